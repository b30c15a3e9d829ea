package cli

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/rpcerr"
)

// fakeTxns is TransactionService's admin side with one open transaction.
type fakeTxns struct {
	skeinv1.UnimplementedTransactionServiceServer
	listed []*skeinv1.ListTransactionsRequest
}

func (f *fakeTxns) ListTransactions(_ context.Context, req *skeinv1.ListTransactionsRequest) (*skeinv1.ListTransactionsResponse, error) {
	f.listed = append(f.listed, req)
	return &skeinv1.ListTransactionsResponse{Transactions: []*skeinv1.TransactionSummary{
		{TransactionalId: "app-tx", ProducerId: 1000, State: "ONGOING"}}}, nil
}

func (f *fakeTxns) DescribeTransaction(_ context.Context, req *skeinv1.DescribeTransactionRequest) (*skeinv1.DescribeTransactionResponse, error) {
	if req.GetTransactionalId() != "app-tx" {
		return nil, rpcerr.ToGRPC(errs.Errorf(errs.TransactionalIDNotFound, "transactional id %q does not exist", req.GetTransactionalId()))
	}
	return &skeinv1.DescribeTransactionResponse{TransactionalId: "app-tx", State: "ONGOING", ProducerId: 1000, ProducerEpoch: 2,
		TransactionTimeoutMs: 60000, TransactionStartTimeMs: time.Now().Add(-time.Second).UnixMilli(),
		Partitions: []*skeinv1.TopicPartitions{{Topic: "orders", Partitions: []int32{0, 1}}}, Groups: []string{"g"}}, nil
}

// fakeProducers is AdminService's DescribeProducers for partition orders-1.
type fakeProducers struct {
	skeinv1.UnimplementedAdminServiceServer
}

func (fakeProducers) DescribeProducers(_ context.Context, req *skeinv1.DescribeProducersRequest) (*skeinv1.DescribeProducersResponse, error) {
	if req.GetTopic() != "orders" || req.GetPartition() != 1 {
		return nil, rpcerr.ToGRPC(errs.Errorf(errs.UnknownTopicOrPartition, "no partition %s-%d", req.GetTopic(), req.GetPartition()))
	}
	return &skeinv1.DescribeProducersResponse{Topic: "orders", Partition: 1, Producers: []*skeinv1.ProducerDescription{
		{ProducerId: 1000, ProducerEpoch: 2, LastSequence: 4, LastTimestampMs: 1765015200000, CoordinatorEpoch: 3, CurrentTransactionStartOffset: 17},
		{ProducerId: 1001, LastSequence: -1, LastTimestampMs: 1765015200001, CurrentTransactionStartOffset: -1}}}, nil
}

func TestTxnCommands(t *testing.T) {
	f := &fakeTxns{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	skeinv1.RegisterTransactionServiceServer(s, f)
	skeinv1.RegisterAdminServiceServer(s, fakeProducers{})
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	addr := lis.Addr().String()

	code, out, errOut := run(t, "", "txn", "list", "--state", "Ongoing", "--gateway", addr)
	if code != 0 || !strings.Contains(out, "TRANSACTIONAL-ID") || !strings.Contains(out, "app-tx") || !strings.Contains(out, "1000") {
		t.Errorf("list: %d %q %q", code, out, errOut)
	}
	if len(f.listed) != 1 || strings.Join(f.listed[0].GetState(), ",") != "Ongoing" {
		t.Errorf("list asked %v", f.listed)
	}
	if code, _, errOut := run(t, "", "txn", "list", "--gateway", addr); code != 0 || len(f.listed) != 2 || len(f.listed[1].GetState()) != 0 {
		t.Errorf("list without --state: %d %q %v", code, errOut, f.listed)
	}
	// Several states, comma-separated, as group list takes them.
	if code, _, errOut := run(t, "", "txn", "list", "--state", "PrepareCommit, Ongoing", "--gateway", addr); code != 0 || len(f.listed) != 3 ||
		strings.Join(f.listed[2].GetState(), ",") != "PrepareCommit,Ongoing" {
		t.Errorf("list --state PrepareCommit,Ongoing: %d %q %v", code, errOut, f.listed)
	}
	// A state no transaction has is the command line's mistake (exit 2, as
	// group list), and no request is sent.
	if code, _, errOut := run(t, "", "txn", "list", "--state", "Ongoing,bogus", "--gateway", addr); code != 2 || len(f.listed) != 3 ||
		!strings.Contains(errOut, `"bogus"`) || !strings.Contains(errOut, "PREPARE_COMMIT") {
		t.Errorf("list --state Ongoing,bogus: %d %q %v", code, errOut, f.listed)
	}
	code, out, errOut = run(t, "", "txn", "describe", "app-tx", "--gateway", addr)
	if code != 0 || !strings.Contains(out, "ONGOING") || !strings.Contains(out, "orders-0,orders-1") || !strings.Contains(out, "60000") {
		t.Errorf("describe: %d %q %q", code, out, errOut)
	}
	code, out, _ = run(t, "", "txn", "describe", "app-tx", "--json", "--gateway", addr)
	if code != 0 || !strings.Contains(out, `"transaction_start_time_ms"`) || !strings.Contains(out, `"groups"`) {
		t.Errorf("describe --json: %d %q", code, out)
	}
	if code, _, errOut := run(t, "", "txn", "describe", "nobody", "--gateway", addr); code != 1 || !strings.Contains(errOut, "TRANSACTIONAL_ID_NOT_FOUND") {
		t.Errorf("describe of an unknown id: %d %q", code, errOut)
	}
	if code, _, _ := run(t, "", "txn", "describe", "--gateway", addr); code != 2 {
		t.Errorf("describe without an id: %d", code)
	}
	code, out, errOut = run(t, "", "txn", "describe-producers", "--topic", "orders", "--partition", "1", "--gateway", addr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.Contains(lines[0], "TXN-START-OFFSET") || !strings.HasSuffix(lines[1], "17") ||
		!strings.Contains(lines[2], " - ") || !strings.HasSuffix(lines[2], "-") {
		t.Errorf("describe-producers: %d %q %q", code, out, errOut)
	}
	code, out, _ = run(t, "", "txn", "describe-producers", "--topic", "orders", "--partition", "1", "--json", "--gateway", addr)
	if code != 0 || !strings.Contains(out, `"current_transaction_start_offset"`) {
		t.Errorf("describe-producers --json: %d %q", code, out)
	}
	for _, args := range [][]string{{"--topic", "orders"}, {"--partition", "1"}, {"orders", "--topic", "orders", "--partition", "1"}} {
		if code, _, _ := run(t, "", append(append([]string{"txn", "describe-producers"}, args...), "--gateway", addr)...); code != 2 {
			t.Errorf("describe-producers %v: %d, want a usage error", args, code)
		}
	}
	if code, _, errOut := run(t, "", "txn", "describe-producers", "--topic", "orders", "--partition", "5", "--gateway", addr); code != 1 ||
		!strings.Contains(errOut, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("describe-producers of an unknown partition: %d %q", code, errOut)
	}
	if code, _, _ := run(t, "", "txn", "abort", "--gateway", addr); code != 2 {
		t.Errorf("an unknown subcommand: %d", code)
	}
}
