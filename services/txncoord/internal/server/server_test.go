package server

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	controllerv1 "skein/gen/skein/controller/v1"
	txnv1 "skein/gen/skein/txn/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/acl"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/libs/peerauth"
	"skein/libs/rpcerr"
	"skein/services/txncoord/internal/coordinator"
	"skein/services/txncoord/internal/txn"
)

// appendLog accepts every write and reads them back.
type appendLog struct {
	mu   sync.Mutex
	recs map[int32][]coordinator.Entry
}

func (l *appendLog) Produce(_ context.Context, p int32, _ coordinator.Identity, recs []coordinator.KV) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range recs {
		l.recs[p] = append(l.recs[p], coordinator.Entry{Offset: int64(len(l.recs[p])), KV: r})
	}
	return int64(len(l.recs[p]) - 1), nil
}

func (l *appendLog) Fetch(_ context.Context, p int32, off int64) ([]coordinator.Entry, int64, int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	end := int64(len(l.recs[p]))
	if off >= end {
		return nil, end, end, nil
	}
	return append([]coordinator.Entry(nil), l.recs[p][off:]...), end, end, nil
}

// noMarkers writes every marker at once.
type noMarkers struct{}

func (noMarkers) WriteMarkers(context.Context, int64, int16, bool, int32, []txn.TopicPartition) error {
	return nil
}

// newServer answers a server over a coordinator that owns the one
// __transaction_state partition, loaded; az decides its callers.
func newServer(t *testing.T, az *peerauth.Authorizer) *Server {
	var pids atomic.Int64
	pids.Store(999)
	c := coordinator.New(coordinator.Config{NodeID: 1, WriteTimeout: time.Second, MarkersTimeout: time.Second,
		AllocateProducerID: func(context.Context) (int64, error) { return pids.Add(1), nil },
		Logger:             slog.New(slog.DiscardHandler)},
		&appendLog{recs: map[int32][]coordinator.Entry{}}, noMarkers{}, nil)
	t.Cleanup(c.Close)
	c.OnMetadata(coordinator.View{Partitions: 1, Owned: map[int32]coordinator.Ownership{0: {Epoch: 1, ProducerID: 7}}, Registered: true,
		OffsetsPartitions: 1, Topics: map[string]int32{"orders": 2, "payments": 2}})
	s := New(c, az)
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, _ := s.DescribeTransactions(context.Background(), &txnv1.DescribeTransactionsRequest{TransactionalIds: []string{"none"}})
		if resp.GetTransactions()[0].GetErrorCode() == skeinv1.ErrorCode_TRANSACTIONAL_ID_NOT_FOUND {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("not loaded: %v", resp)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testAuthorizer decides with grants and the super user User:admin.
func testAuthorizer(t *testing.T, grants ...acl.Binding) *peerauth.Authorizer {
	t.Helper()
	img := metadata.New("c")
	var recs []*controllerv1.MetadataRecord
	for _, b := range grants {
		recs = append(recs, metadata.AclRecord(b))
	}
	if err := img.Apply(&controllerv1.MetadataDelta{Version: 1, Records: recs}); err != nil {
		t.Fatal(err)
	}
	return peerauth.NewAuthorizer(func() *metadata.Image { return img }, map[string]bool{"User:admin": true}, slog.New(slog.DiscardHandler))
}

func allow(principal string, typ acl.ResourceType, name string, op acl.Operation) acl.Binding {
	return acl.Binding{Principal: principal, Resource: typ, Name: name, Pattern: acl.Literal, Operation: op, Permission: acl.Allow}
}

var gatewayPeer = peerauth.Peer{Role: peerauth.RoleGateway, ID: "1", Principal: "User:gateway-1"}

// viaGateway is a call the gateway makes for a client.
func viaGateway(principal string) context.Context {
	return peerauth.WithCaller(context.Background(), peerauth.CallerOf(gatewayPeer, principal))
}

// withCert is a call of a client with its own certificate.
func withCert(name string) context.Context {
	p := peerauth.Peer{Role: "client", ID: name, Principal: "User:" + name}
	return peerauth.WithCaller(context.Background(), peerauth.CallerOf(p, ""))
}

func tps(topic string, partitions ...int32) *txnv1.TopicPartitions {
	return &txnv1.TopicPartitions{Topic: topic, Partitions: partitions}
}

// codes answers a response's partition codes as topic-partition: code.
func codes(r *txnv1.AddPartitionsToTxnResponse) map[string]skeinv1.ErrorCode {
	out := map[string]skeinv1.ErrorCode{}
	for _, p := range r.GetPartitions() {
		out[fmt.Sprintf("%s-%d", p.GetTopic(), p.GetPartition())] = p.GetErrorCode()
	}
	return out
}

// TestAuthorization: every handler refuses a caller without the ACL it
// needs, with the code the gateway and the client surface, and serves one
// with it; Skein's own services and plaintext callers are never refused.
func TestAuthorization(t *testing.T) {
	s := newServer(t, testAuthorizer(t,
		allow("User:alice", acl.TransactionalID, "tx", acl.Write),
		allow("User:alice", acl.Topic, "orders", acl.Write),
		allow("User:alice", acl.Group, "app", acl.Read),
		allow("User:describer", acl.TransactionalID, "tx", acl.Describe),
	))
	const txnDenied, topicDenied, groupDenied = skeinv1.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
		skeinv1.ErrorCode_TOPIC_AUTHORIZATION_FAILED, skeinv1.ErrorCode_GROUP_AUTHORIZATION_FAILED
	alice, bob := viaGateway("User:alice"), viaGateway("User:bob")

	// InitProducerId writes the transactional id; an idempotent producer
	// (no id) needs write on some topic, as Kafka's.
	init := &txnv1.InitProducerIdRequest{TransactionalId: "tx", TransactionTimeoutMs: 60_000, ProducerId: -1, ProducerEpoch: -1}
	for name, ctx := range map[string]context.Context{
		"no ACL": bob, "no ACL, own certificate": withCert("bob"), "describe is not write": viaGateway("User:describer"),
	} {
		r, err := s.InitProducerId(ctx, init)
		if err != nil || r.GetErrorCode() != txnDenied || r.GetErrorMessage() == "" || r.GetProducerId() != -1 || r.GetProducerEpoch() != -1 {
			t.Errorf("init, %s: %v %v", name, r, err)
		}
	}
	idempotent := &txnv1.InitProducerIdRequest{ProducerId: -1, ProducerEpoch: -1}
	for name, ctx := range map[string]context.Context{"no ACL": bob, "no ACL, own certificate": withCert("bob"), "describe": viaGateway("User:describer")} {
		if r, err := s.InitProducerId(ctx, idempotent); err != nil || r.GetErrorCode() != skeinv1.ErrorCode_CLUSTER_AUTHORIZATION_FAILED || r.GetProducerId() != -1 {
			t.Errorf("idempotent init, %s: %v %v", name, r, err)
		}
	}
	if r, err := s.InitProducerId(alice, idempotent); err != nil || r.GetErrorCode() != skeinv1.ErrorCode_NONE || r.GetProducerId() < 0 {
		t.Errorf("idempotent init with write on a topic: %v %v", r, err)
	}
	r, err := s.InitProducerId(alice, init)
	if err != nil || r.GetErrorCode() != skeinv1.ErrorCode_NONE {
		t.Fatalf("init with the ACL: %v %v", r, err)
	}
	pid, epoch := r.GetProducerId(), r.GetProducerEpoch()

	// AddPartitionsToTxn writes the id and each partition's topic: a topic
	// the caller may not write is refused on its own.
	add := func(ctx context.Context, parts ...*txnv1.TopicPartitions) (*txnv1.AddPartitionsToTxnResponse, error) {
		return s.AddPartitionsToTxn(ctx, &txnv1.AddPartitionsToTxnRequest{TransactionalId: "tx", ProducerId: pid, ProducerEpoch: epoch, Partitions: parts})
	}
	if r, err := add(bob, tps("orders", 0, 1)); err != nil || len(r.GetPartitions()) != 2 ||
		r.GetPartitions()[0].GetErrorCode() != txnDenied || r.GetPartitions()[1].GetErrorCode() != txnDenied || r.GetPartitions()[0].GetErrorMessage() == "" {
		t.Errorf("add without the id's ACL: %v %v", r, err)
	}
	if _, err := add(bob); errs.Of(rpcerr.FromStatus(err)) != errs.TransactionalIDAuthorizationFailed {
		t.Errorf("add of nothing without the id's ACL: %v", err)
	}
	if r, err := add(alice, tps("payments", 0)); err != nil || len(r.GetPartitions()) != 1 || r.GetPartitions()[0].GetErrorCode() != topicDenied ||
		r.GetPartitions()[0].GetErrorMessage() == "" {
		t.Errorf("add of a topic without its ACL: %v %v", r, err)
	}
	r2, err := add(alice, tps("payments", 1), tps("orders", 0, 1), tps("orders", 7))
	want := map[string]skeinv1.ErrorCode{"payments-1": topicDenied, "orders-0": skeinv1.ErrorCode_NONE, "orders-1": skeinv1.ErrorCode_NONE,
		"orders-7": skeinv1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION}
	if got := codes(r2); err != nil || len(r2.GetPartitions()) != 4 || r2.GetPartitions()[0].GetTopic() != "payments" || len(got) != len(want) {
		t.Errorf("add of allowed and refused topics: %v %v", r2, err)
	} else {
		for k, w := range want {
			if got[k] != w {
				t.Errorf("add of allowed and refused topics: %s is %s, want %s", k, got[k], w)
			}
		}
	}

	// AddOffsetsToTxn writes the id and reads the group.
	offsets := func(ctx context.Context, group string) (*txnv1.AddOffsetsToTxnResponse, error) {
		return s.AddOffsetsToTxn(ctx, &txnv1.AddOffsetsToTxnRequest{TransactionalId: "tx", ProducerId: pid, ProducerEpoch: epoch, GroupId: group})
	}
	for name, tc := range map[string]struct {
		ctx   context.Context
		group string
		want  skeinv1.ErrorCode
	}{
		"no ACL":            {bob, "app", txnDenied},
		"not the group":     {alice, "other", groupDenied},
		"the id and group":  {alice, "app", skeinv1.ErrorCode_NONE},
		"describe the id":   {viaGateway("User:describer"), "app", txnDenied},
		"a super user, any": {viaGateway("User:admin"), "other", skeinv1.ErrorCode_NONE},
	} {
		r, err := offsets(tc.ctx, tc.group)
		if err != nil || r.GetErrorCode() != tc.want || (tc.want != skeinv1.ErrorCode_NONE && r.GetErrorMessage() == "") {
			t.Errorf("add offsets, %s: %v %v, want %s", name, r, err, tc.want)
		}
	}

	// DescribeTransactions describes each id the caller may describe.
	describe := &txnv1.DescribeTransactionsRequest{TransactionalIds: []string{"other", "tx", "none"}}
	for name, tc := range map[string]struct {
		ctx  context.Context
		want []skeinv1.ErrorCode
	}{
		"no ACL":    {bob, []skeinv1.ErrorCode{txnDenied, txnDenied, txnDenied}},
		"describe":  {viaGateway("User:describer"), []skeinv1.ErrorCode{txnDenied, skeinv1.ErrorCode_NONE, txnDenied}},
		"write":     {alice, []skeinv1.ErrorCode{txnDenied, skeinv1.ErrorCode_NONE, txnDenied}},
		"plaintext": {context.Background(), []skeinv1.ErrorCode{skeinv1.ErrorCode_TRANSACTIONAL_ID_NOT_FOUND, skeinv1.ErrorCode_NONE, skeinv1.ErrorCode_TRANSACTIONAL_ID_NOT_FOUND}},
	} {
		r, err := s.DescribeTransactions(tc.ctx, describe)
		var got []skeinv1.ErrorCode
		for i, d := range r.GetTransactions() {
			got = append(got, d.GetErrorCode())
			if d.GetTransactionalId() != describe.TransactionalIds[i] {
				t.Errorf("describe, %s: answer %d is of %q", name, i, d.GetTransactionalId())
			}
			if d.GetErrorCode() == txnDenied && (d.GetState() != string(txn.Dead) || d.GetProducerId() != -1 || len(d.GetPartitions()) != 0) {
				t.Errorf("describe, %s: a refused id shows its state: %v", name, d)
			}
			if d.GetTransactionalId() == "tx" && d.GetErrorCode() == skeinv1.ErrorCode_NONE && (d.GetProducerId() != pid || len(d.GetPartitions()) == 0) {
				t.Errorf("describe, %s: %v", name, d)
			}
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("describe, %s: %v %v, want %v", name, got, err, tc.want)
		}
	}

	// ListTransactions shows only the ids the caller may describe; an
	// unknown state filter is answered back and matches nothing.
	if _, err := s.InitProducerId(viaGateway("User:admin"), &txnv1.InitProducerIdRequest{TransactionalId: "other",
		TransactionTimeoutMs: 60_000, ProducerId: -1, ProducerEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	listed := func(r *txnv1.ListTransactionsResponse) (out []string) {
		for _, l := range r.GetTransactions() {
			out = append(out, l.GetTransactionalId()+":"+l.GetState())
		}
		return out
	}
	for name, tc := range map[string]struct {
		ctx     context.Context
		req     *txnv1.ListTransactionsRequest
		want    []string
		unknown []string
	}{
		"no ACL":             {bob, &txnv1.ListTransactionsRequest{}, nil, nil},
		"describe":           {viaGateway("User:describer"), &txnv1.ListTransactionsRequest{}, []string{"tx:ONGOING"}, nil},
		"write":              {alice, &txnv1.ListTransactionsRequest{}, []string{"tx:ONGOING"}, nil},
		"a super user":       {viaGateway("User:admin"), &txnv1.ListTransactionsRequest{}, []string{"other:EMPTY", "tx:ONGOING"}, nil},
		"state, Kafka's way": {context.Background(), &txnv1.ListTransactionsRequest{StateFilters: []string{"Empty"}}, []string{"other:EMPTY"}, nil},
		"states":             {context.Background(), &txnv1.ListTransactionsRequest{StateFilters: []string{"EMPTY", "ONGOING"}}, []string{"other:EMPTY", "tx:ONGOING"}, nil},
		"producer id":        {context.Background(), &txnv1.ListTransactionsRequest{ProducerIdFilters: []int64{pid}}, []string{"tx:ONGOING"}, nil},
		"an unknown state":   {context.Background(), &txnv1.ListTransactionsRequest{StateFilters: []string{"RUNNING"}}, nil, []string{"RUNNING"}},
		"known and unknown":  {context.Background(), &txnv1.ListTransactionsRequest{StateFilters: []string{"RUNNING", "ongoing"}}, []string{"tx:ONGOING"}, []string{"RUNNING"}},
	} {
		r, err := s.ListTransactions(tc.ctx, tc.req)
		if got := listed(r); err != nil || !slices.Equal(got, tc.want) || !slices.Equal(r.GetUnknownStateFilters(), tc.unknown) {
			t.Errorf("list, %s: %v %v %v, want %v %v", name, got, r.GetUnknownStateFilters(), err, tc.want, tc.unknown)
		}
	}

	// EndTxn writes the id.
	end := &txnv1.EndTxnRequest{TransactionalId: "tx", ProducerId: pid, ProducerEpoch: epoch, Committed: true}
	if r, err := s.EndTxn(bob, end); err != nil || r.GetErrorCode() != txnDenied || r.GetErrorMessage() == "" || r.GetProducerId() != -1 {
		t.Errorf("end without the ACL: %v %v", r, err)
	}
	if r, err := s.EndTxn(alice, end); err != nil || r.GetErrorCode() != skeinv1.ErrorCode_NONE || r.GetProducerId() != pid {
		t.Errorf("end with the ACL: %v %v", r, err)
	}

	// Skein's own services and plaintext callers are not subject to ACLs.
	for name, ctx := range map[string]context.Context{
		"the gateway for itself": peerauth.WithCaller(context.Background(), peerauth.CallerOf(gatewayPeer, "")),
		"a group coordinator": peerauth.WithCaller(context.Background(),
			peerauth.CallerOf(peerauth.Peer{Role: peerauth.RoleGroupCoord, ID: "1", Principal: "User:groupcoord-1"}, "")),
		"plaintext": context.Background(),
	} {
		id := "svc-" + name
		r, err := s.InitProducerId(ctx, &txnv1.InitProducerIdRequest{TransactionalId: id, TransactionTimeoutMs: 60_000, ProducerId: -1, ProducerEpoch: -1})
		if err != nil || r.GetErrorCode() != skeinv1.ErrorCode_NONE {
			t.Fatalf("%s: init %v %v", name, r, err)
		}
		a, err := s.AddPartitionsToTxn(ctx, &txnv1.AddPartitionsToTxnRequest{TransactionalId: id, ProducerId: r.GetProducerId(),
			ProducerEpoch: r.GetProducerEpoch(), Partitions: []*txnv1.TopicPartitions{tps("payments", 0)}})
		if err != nil || a.GetPartitions()[0].GetErrorCode() != skeinv1.ErrorCode_NONE {
			t.Errorf("%s: add %v %v", name, a, err)
		}
		d, err := s.DescribeTransactions(ctx, &txnv1.DescribeTransactionsRequest{TransactionalIds: []string{id}})
		if err != nil || d.GetTransactions()[0].GetErrorCode() != skeinv1.ErrorCode_NONE {
			t.Errorf("%s: describe %v %v", name, d, err)
		}
	}
}

// TestRules: the transaction coordinator has no internal method; every
// method is open to every peer (its handler decides).
func TestRules(t *testing.T) {
	rules := Rules()
	methods := peerauth.MethodsOf(txnv1.TransactionCoordinatorService_ServiceDesc)
	if len(methods) != 6 {
		t.Fatalf("methods %v", methods)
	}
	for m := range rules {
		if !slices.Contains(methods, m) {
			t.Errorf("rule for %s, not a method of the service", m)
		}
	}
	for _, p := range []peerauth.Peer{gatewayPeer, {Role: "client", ID: "alice", Principal: "User:alice"}, {Principal: "User:x"}} {
		for _, m := range methods {
			if err := rules.Check(m, p); err != nil {
				t.Errorf("%s from %v: %v", m, p, err)
			}
		}
	}
}
