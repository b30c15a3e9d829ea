package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/rpcerr"
)

// fakeGateway keeps topics in memory behind the public gRPC services, enough
// to drive the CLI end to end.
type fakeGateway struct {
	skeinv1.UnimplementedAdminServiceServer
	skeinv1.UnimplementedProducerServiceServer
	skeinv1.UnimplementedConsumerServiceServer

	mu     sync.Mutex
	topics map[string][][]*skeinv1.ConsumedRecord
	grew   chan struct{}
	acks   []int32
	codecs []string // each ProduceStream request's compression
	// nameOnly answers a created topic by its name alone, as the gateway
	// does to a principal that may create the topic but not describe it.
	nameOnly bool
	// holdProduce, when set, holds every ProduceStream request unanswered
	// until it is closed.
	holdProduce chan struct{}
	// deletes are the DeleteRecords requests, in order.
	deletes []*skeinv1.DeleteRecordsRequest
	// openTxn: records at the end of each partition an open transaction
	// holds above the last stable offset.
	openTxn int64
	// tails counts the Tail streams opened.
	tails atomic.Int32
}

func (g *fakeGateway) describe(name string) *skeinv1.TopicDescription {
	d := &skeinv1.TopicDescription{Name: name, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "604800000", "segment.ms": "5000"},
		OverriddenConfigs: []string{"segment.ms"}}
	for i, p := range g.topics[name] {
		d.Partitions = append(d.Partitions, &skeinv1.PartitionDescription{Partition: int32(i), Leader: 1, Replicas: []int32{1}, Isr: []int32{1}, HighWatermark: int64(len(p))})
		if name == "unanswered" { // its leader did not answer in time
			pd := d.Partitions[i]
			pd.LogStartOffset, pd.HighWatermark, pd.LastStableOffset = -1, -1, -1
		}
	}
	return d
}

func (g *fakeGateway) CreateTopic(_ context.Context, req *skeinv1.CreateTopicRequest) (*skeinv1.CreateTopicResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.topics[req.GetName()]; ok {
		return nil, rpcerr.ToGRPC(errs.Errorf(errs.TopicAlreadyExists, "topic %q already exists", req.GetName()))
	}
	// As the gateway: a count given is checked, an absent one is the default.
	if req.Partitions != nil && req.GetPartitions() < 1 {
		return nil, rpcerr.ToGRPC(errs.Errorf(errs.InvalidPartitions, "%d partitions", req.GetPartitions()))
	}
	if req.ReplicationFactor != nil && req.GetReplicationFactor() < 1 {
		return nil, rpcerr.ToGRPC(errs.Errorf(errs.InvalidReplicationFactor, "replication factor %d", req.GetReplicationFactor()))
	}
	g.topics[req.GetName()] = make([][]*skeinv1.ConsumedRecord, max(req.GetPartitions(), 1))
	if g.nameOnly {
		return &skeinv1.CreateTopicResponse{Topic: &skeinv1.TopicDescription{Name: req.GetName()}}, nil
	}
	return &skeinv1.CreateTopicResponse{Topic: g.describe(req.GetName())}, nil
}

// ElectLeaders answers a preferred election for a topic of two partitions
// or more as elected on partition 0 and not needed on the others; an
// unclean one finds no eligible leader for partition 1.
func (g *fakeGateway) ElectLeaders(_ context.Context, req *skeinv1.ElectLeadersRequest) (*skeinv1.ElectLeadersResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ps, ok := g.topics[req.GetTopic()]
	if !ok {
		return nil, rpcerr.ToGRPC(errs.Errorf(errs.UnknownTopicOrPartition, "topic %q does not exist", req.GetTopic()))
	}
	resp := &skeinv1.ElectLeadersResponse{}
	for p := range ps {
		r := &skeinv1.ElectionResult{Topic: req.GetTopic(), Partition: int32(p), Leader: 1}
		switch {
		case p > 0 && req.GetType() == skeinv1.ElectionType_PREFERRED:
			r.ErrorCode, r.Message = skeinv1.ErrorCode_ELECTION_NOT_NEEDED, "the preferred replica leads already"
		case p == 1 && req.GetType() == skeinv1.ElectionType_UNCLEAN:
			r.Leader, r.ErrorCode, r.Message = -1, skeinv1.ErrorCode_ELIGIBLE_LEADERS_NOT_AVAILABLE, "no live replica"
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func (g *fakeGateway) ListTopics(context.Context, *skeinv1.ListTopicsRequest) (*skeinv1.ListTopicsResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := &skeinv1.ListTopicsResponse{}
	for name, ps := range g.topics {
		out.Topics = append(out.Topics, &skeinv1.TopicSummary{Name: name, Partitions: int32(len(ps)), ReplicationFactor: 1})
	}
	return out, nil
}

func (g *fakeGateway) CreatePartitions(_ context.Context, req *skeinv1.CreatePartitionsRequest) (*skeinv1.CreatePartitionsResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	parts, ok := g.topics[req.GetTopic()]
	if !ok {
		return nil, rpcerr.ToGRPC(errs.Errorf(errs.UnknownTopicOrPartition, "no topic %q", req.GetTopic()))
	}
	if int(req.GetCount()) <= len(parts) {
		return nil, rpcerr.ToGRPC(errs.Errorf(errs.InvalidPartitions, "topic %q has %d partitions; %d does not grow it", req.GetTopic(), len(parts), req.GetCount()))
	}
	for len(parts) < int(req.GetCount()) {
		parts = append(parts, nil)
	}
	g.topics[req.GetTopic()] = parts
	return &skeinv1.CreatePartitionsResponse{Topic: g.describe(req.GetTopic())}, nil
}

func (g *fakeGateway) DescribeTopic(_ context.Context, req *skeinv1.DescribeTopicRequest) (*skeinv1.DescribeTopicResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.topics[req.GetTopic()]; !ok {
		return nil, rpcerr.ToGRPC(errs.Errorf(errs.UnknownTopicOrPartition, "topic %q does not exist", req.GetTopic()))
	}
	return &skeinv1.DescribeTopicResponse{Topic: g.describe(req.GetTopic())}, nil
}

// DeleteRecords answers each partition's offset (its record count for
// -1), OFFSET_OUT_OF_RANGE above it, and keeps the request.
func (g *fakeGateway) DeleteRecords(_ context.Context, req *skeinv1.DeleteRecordsRequest) (*skeinv1.DeleteRecordsResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ps, ok := g.topics[req.GetTopic()]
	if !ok {
		return nil, rpcerr.ToGRPC(errs.Errorf(errs.UnknownTopicOrPartition, "topic %q does not exist", req.GetTopic()))
	}
	g.deletes = append(g.deletes, req)
	out := &skeinv1.DeleteRecordsResponse{}
	for _, p := range req.GetPartitions() {
		hw := int64(len(ps[p.GetPartition()]))
		r := &skeinv1.DeleteRecordsResult{Partition: p.GetPartition(), LowWatermark: p.GetOffset()}
		switch {
		case p.GetOffset() == -1:
			r.LowWatermark = hw
		case p.GetOffset() > hw:
			r.LowWatermark, r.ErrorCode, r.Message = -1, skeinv1.ErrorCode_OFFSET_OUT_OF_RANGE, "above the high watermark"
		}
		out.Partitions = append(out.Partitions, r)
	}
	return out, nil
}

func (g *fakeGateway) ListOffsets(_ context.Context, req *skeinv1.ListOffsetsRequest) (*skeinv1.ListOffsetsResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := &skeinv1.ListOffsetsResponse{}
	for i := range g.topics[req.GetTopic()] {
		out.Offsets = append(out.Offsets, &skeinv1.PartitionOffset{Partition: int32(i)})
	}
	return out, nil
}

func (g *fakeGateway) GetCluster(context.Context, *skeinv1.GetClusterRequest) (*skeinv1.GetClusterResponse, error) {
	return &skeinv1.GetClusterResponse{ClusterId: "fake", ControllerId: 2,
		Brokers:      []*skeinv1.BrokerInfo{{Id: 1, GrpcAddr: "127.0.0.1:1", State: "ALIVE"}},
		Controllers:  []*skeinv1.ControllerInfo{{Id: 2, Addr: "127.0.0.1:2", Leader: true, State: "ALIVE"}, {Id: 3, Addr: "127.0.0.1:3", State: "DEAD"}, {Id: 4, Addr: "127.0.0.1:4"}},
		Coordinators: []*skeinv1.CoordinatorInfo{{Id: 1, Kind: "GROUP", GrpcAddr: "127.0.0.1:5", State: "ALIVE"}, {Id: 2, Kind: "TRANSACTION", GrpcAddr: "127.0.0.1:6", State: "DEAD"}}}, nil
}

func (g *fakeGateway) ProduceStream(stream skeinv1.ProducerService_ProduceStreamServer) error {
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		g.mu.Lock()
		if hold := g.holdProduce; hold != nil {
			g.mu.Unlock()
			<-hold // never answered while held
			g.mu.Lock()
		}
		g.acks = append(g.acks, req.GetAcks())
		g.codecs = append(g.codecs, req.GetCompression())
		resp := &skeinv1.ProduceStreamResponse{CorrelationId: req.GetCorrelationId(), Results: g.appendRecords(req.GetTopic(), req.GetRecords())}
		g.mu.Unlock()
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

func (g *fakeGateway) read(topic string, p int32, off int64, n int) ([]*skeinv1.ConsumedRecord, int64, chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	recs := g.topics[topic][p]
	end := min(int(off)+n, len(recs))
	if int(off) > len(recs) {
		return nil, int64(len(recs)), g.grew
	}
	return recs[off:end], int64(len(recs)), g.grew
}

// Produce appends the records as ProduceStream does (group dlq-replay
// produces this way).
func (g *fakeGateway) Produce(_ context.Context, req *skeinv1.ProduceRequest) (*skeinv1.ProduceResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return &skeinv1.ProduceResponse{Results: g.appendRecords(req.GetTopic(), req.GetRecords())}, nil
}

// appendRecords appends records to a topic's partitions, headers and
// timestamps kept, answers each, and wakes the readers waiting on grew;
// g.mu held.
func (g *fakeGateway) appendRecords(topic string, recs []*skeinv1.ProduceRecord) []*skeinv1.ProduceResult {
	var out []*skeinv1.ProduceResult
	for i, r := range recs {
		if v := r.GetValue(); strings.HasPrefix(v, "oversized") { // refused as the gateway refuses it, by its place in the request
			out = append(out, &skeinv1.ProduceResult{Offset: -1, ErrorCode: skeinv1.ErrorCode_MESSAGE_TOO_LARGE,
				Message: fmt.Sprintf("record %d is %d bytes as a batch, above max.message.bytes 8 of topic %q", i, len(v), topic)})
			continue
		}
		p := r.GetPartition()
		parts, ok := g.topics[topic]
		if !ok || int(p) >= len(parts) {
			out = append(out, &skeinv1.ProduceResult{Offset: -1, ErrorCode: skeinv1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, Message: "no such partition"})
			continue
		}
		off := int64(len(parts[p]))
		parts[p] = append(parts[p], &skeinv1.ConsumedRecord{Topic: topic, Partition: p, Offset: off, Key: r.Key, Value: r.Value,
			KeyBytes: r.KeyBytes, ValueBytes: r.ValueBytes, Headers: r.GetHeaders(), TimestampMs: r.GetTimestampMs()})
		out = append(out, &skeinv1.ProduceResult{Partition: p, Offset: off})
	}
	close(g.grew)
	g.grew = make(chan struct{})
	return out
}

// Fetch answers up to max_records records, 500 when it is not set (as the
// gateway, which has a default).
func (g *fakeGateway) Fetch(_ context.Context, req *skeinv1.FetchRequest) (*skeinv1.FetchResponse, error) {
	n := 500
	if req.MaxRecords != nil {
		n = int(req.GetMaxRecords())
	}
	recs, hw, _ := g.read(req.GetTopic(), req.GetPartition(), req.GetOffset(), n)
	g.mu.Lock()
	lso := hw - g.openTxn
	g.mu.Unlock()
	if req.GetIsolationLevel() == skeinv1.IsolationLevel_READ_COMMITTED {
		for len(recs) > 0 && recs[len(recs)-1].GetOffset() >= lso {
			recs = recs[:len(recs)-1]
		}
	}
	return &skeinv1.FetchResponse{Records: recs, NextOffset: req.GetOffset() + int64(len(recs)), HighWatermark: hw, LastStableOffset: lso}, nil
}

func (g *fakeGateway) Tail(req *skeinv1.TailRequest, stream skeinv1.ConsumerService_TailServer) error {
	off := req.GetOffset()
	if req.Offset == nil {
		_, off, _ = g.read(req.GetTopic(), req.GetPartition(), 0, 0)
	}
	g.tails.Add(1) // where it starts is settled
	for {
		recs, hw, grew := g.read(req.GetTopic(), req.GetPartition(), off, 100)
		if len(recs) > 0 {
			off += int64(len(recs))
			if err := stream.Send(&skeinv1.TailResponse{Records: recs, NextOffset: off, HighWatermark: hw}); err != nil {
				return err
			}
			continue
		}
		select {
		case <-grew:
		case <-stream.Context().Done():
			return nil
		}
	}
}

func startFake(t *testing.T) (*fakeGateway, string) {
	g := &fakeGateway{topics: map[string][][]*skeinv1.ConsumedRecord{}, grew: make(chan struct{})}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	skeinv1.RegisterAdminServiceServer(s, g)
	skeinv1.RegisterProducerServiceServer(s, g)
	skeinv1.RegisterConsumerServiceServer(s, g)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return g, lis.Addr().String()
}

// run runs the CLI with stdin and answers its exit status and output.
func run(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(args, IO{In: strings.NewReader(stdin), Out: &out, Err: &errOut})
	return code, out.String(), errOut.String()
}

func TestTopicProduceConsume(t *testing.T) {
	_, addr := startFake(t)
	t.Setenv("SKEIN_GATEWAY", addr) // the env twin of --gateway

	if code, out, errOut := run(t, "", "topic", "create", "orders", "--partitions", "2", "--config", "retention.ms=60000"); code != 0 || !strings.Contains(out, "created topic orders") || !strings.Contains(out, "PARTITION") {
		t.Fatalf("create: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := run(t, "", "topic", "create", "orders"); code != 1 || !strings.Contains(errOut, "TOPIC_ALREADY_EXISTS") {
		t.Errorf("create twice: %d %q", code, errOut)
	}
	// A count of 0 given is sent, and refused, not read as the default.
	for _, tc := range []struct{ args, want string }{
		{"topic create zero --partitions 0", "INVALID_PARTITIONS"},
		{"topic create zero --replication-factor 0", "INVALID_REPLICATION_FACTOR"},
		{"topic alter orders --partitions 0", "INVALID_PARTITIONS"},
	} {
		if code, _, errOut := run(t, "", strings.Fields(tc.args)...); code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: %d %q, want %s", tc.args, code, errOut, tc.want)
		}
	}
	if code, out, _ := run(t, "", "topic", "list"); code != 0 || !strings.Contains(out, "orders") {
		t.Errorf("list: %d %q", code, out)
	}
	// Offsets a leader did not answer are "-", not -1.
	if code, out, errOut := run(t, "", "topic", "create", "unanswered"); code != 0 {
		t.Fatalf("create: %d %q", code, errOut)
	} else if code, out, _ = run(t, "", "topic", "describe", "unanswered"); code != 0 || strings.Contains(out, "-1") ||
		!strings.HasSuffix(strings.Join(strings.Fields(out), " "), "0 1 0 1 1 - - -") {
		t.Errorf("describe with offsets not known: %d %q", code, out)
	}
	// The topic's own configs are marked, the defaults are not.
	if code, out, _ := run(t, "", "topic", "describe", "orders"); code != 0 || !strings.Contains(out, " *segment.ms=5000\n") || !strings.Contains(out, "  retention.ms=604800000\n") {
		t.Errorf("describe: %d %q", code, out)
	}
	if code, out, _ := run(t, "", "topic", "describe", "orders", "--json"); code != 0 || !strings.Contains(out, `"replication_factor": 1`) {
		t.Errorf("describe --json: %d %q", code, out)
	}
	if code, _, errOut := run(t, "", "topic", "describe", "nope"); code != 1 || !strings.Contains(errOut, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("describe unknown: %d %q", code, errOut)
	}

	code, _, errOut := run(t, "k1:hello\nk2:world\nk3:a:b\n", "produce", "orders", "--key-separator", ":", "--partition", "1", "--acks", "1")
	if code != 0 {
		t.Fatalf("produce: %d %q", code, errOut)
	}
	code, out, errOut := run(t, "", "consume", "orders", "--partition", "1", "--print-key")
	if code != 0 || out != "k1\thello\nk2\tworld\nk3\ta:b\n" {
		t.Fatalf("consume: %d %q %q", code, out, errOut)
	}
	if code, out, _ := run(t, "", "consume", "orders", "--partition", "1", "--from", "1", "--max", "1"); code != 0 || out != "world\n" {
		t.Errorf("consume --from 1 --max 1: %d %q", code, out)
	}
	if code, out, _ := run(t, "", "consume", "orders", "--from", "latest"); code != 0 || out != "" {
		t.Errorf("consume --from latest without --follow: %d %q", code, out)
	}
	if code, _, errOut := run(t, "no separator here\n", "produce", "orders", "--key-separator", ":"); code != 1 || !strings.Contains(errOut, "line 1 has no key separator") {
		t.Errorf("a line without the separator: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "x\n", "produce", "orders", "--partition", "5"); code != 1 || !strings.Contains(errOut, "UNKNOWN_TOPIC_OR_PARTITION") || !strings.Contains(errOut, "1 of 1 records") {
		t.Errorf("produce to a missing partition: %d %q", code, errOut)
	}
	if code, _, _ := run(t, "", "consume", "orders", "--from", "3"); code != 2 {
		t.Errorf("--from OFFSET over several partitions must be a usage error, got %d", code)
	}
	// A topic that does not exist refuses each record alike: told once.
	if code, _, errOut := run(t, "a\nb\nc\n", "produce", "nope"); code != 1 || strings.Count(errOut, "UNKNOWN_TOPIC_OR_PARTITION") != 1 || !strings.Contains(errOut, "lines 1-3: UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("produce to a topic that does not exist: %d %q, want one line for lines 1-3", code, errOut)
	}
}

func TestTopicDeleteRecords(t *testing.T) {
	g, addr := startFake(t)
	t.Setenv("SKEIN_GATEWAY", addr)
	run(t, "", "topic", "create", "orders", "--partitions", "2")
	run(t, "a\nb\nc\n", "produce", "orders", "--partition", "0")
	sent := func() string {
		g.mu.Lock()
		defer g.mu.Unlock()
		var out []string
		for _, p := range g.deletes[len(g.deletes)-1].GetPartitions() {
			out = append(out, fmt.Sprintf("%d=%d", p.GetPartition(), p.GetOffset()))
		}
		return strings.Join(out, " ")
	}
	if code, out, errOut := run(t, "", "topic", "delete-records", "orders", "--before", "1=-1", "--before", "0=2"); code != 0 || !strings.Contains(out, "LOG START") || sent() != "0=2 1=-1" {
		t.Fatalf("--before: %d %q %q, sent %s", code, out, errOut, sent())
	}
	if code, out, _ := run(t, "", "topic", "delete-records", "orders", "--all", "--json"); code != 0 || !strings.Contains(out, `"low_watermark": "3"`) || sent() != "0=-1 1=-1" {
		t.Errorf("--all: %d %q, sent %s", code, out, sent())
	}
	code, out, errOut := run(t, "", "topic", "delete-records", "orders", "--before", "0=9", "--before", "1=0")
	if code != 1 || !strings.Contains(errOut, "1 of 2 partitions failed") {
		t.Errorf("a partition refused: %d %q", code, errOut)
	}
	for _, l := range strings.Split(out, "\n") {
		// The refused partition's log start is not known: "-", not -1.
		if f := strings.Fields(l); len(f) > 2 && f[0] == "0" && f[1] != "-" {
			t.Errorf("the refused partition's row %q shows log start %s", l, f[1])
		}
	}
	g.mu.Lock()
	n := len(g.deletes)
	g.mu.Unlock()
	for _, args := range [][]string{
		{"orders"}, {"orders", "--all", "--before", "0=1"}, {"orders", "--before", "0"}, {"orders", "--before", "x=1"},
		{"orders", "--before", "0=-2"}, {"orders", "--before", "-1=3"}, {"orders", "--before", "0=1", "--before", "0=2"},
	} {
		if code, _, _ := run(t, "", append([]string{"topic", "delete-records"}, args...)...); code != 2 {
			t.Errorf("delete-records %q: exit %d, want 2", args, code)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.deletes) != n {
		t.Errorf("a usage error sent %d requests", len(g.deletes)-n)
	}
}

// consume --follow over a whole topic picks up a partition added while it
// runs, from that partition's start.
func TestConsumeFollowsAddedPartitions(t *testing.T) {
	defer func(d time.Duration) { newPartitionPoll = d }(newPartitionPoll)
	// Long enough for the partition to be added and written before the
	// command's first look: what was written before it saw the partition
	// is printed too.
	newPartitionPoll = 500 * time.Millisecond
	g, addr := startFake(t)
	run(t, "", "topic", "create", "t", "--gateway", addr)
	type result struct {
		code        int
		out, errOut string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errOut := run(t, "", "consume", "t", "--gateway", addr, "--follow", "--from", "latest", "--max", "3")
		done <- result{code, out, errOut}
	}()
	for deadline := time.Now().Add(5 * time.Second); g.tails.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the command did not follow partition 0")
		}
	}
	run(t, "a\n", "produce", "t", "--gateway", addr, "--partition", "0")
	if code, _, errOut := run(t, "", "topic", "alter", "t", "--partitions", "2", "--gateway", addr); code != 0 {
		t.Fatalf("alter: %d %q", code, errOut)
	}
	// Written before the command can have seen the partition: still printed.
	run(t, "b\nc\n", "produce", "t", "--gateway", addr, "--partition", "1")
	select {
	case r := <-done:
		lines := strings.Split(strings.TrimSpace(r.out), "\n")
		slices.Sort(lines)
		if r.code != 0 || strings.Join(lines, ",") != "a,b,c" {
			t.Fatalf("follow across a new partition: %d %q %q", r.code, r.out, r.errOut)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("consume --follow did not print the added partition's records")
	}
}

func TestConsumeFollow(t *testing.T) {
	g, addr := startFake(t)
	run(t, "", "topic", "create", "t", "--gateway", addr)
	// Written once the command follows the partition from its end (a
	// record written before would not be printed, rightly).
	go func() {
		for deadline := time.Now().Add(10 * time.Second); g.tails.Load() == 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		for i := 0; i < 3; i++ {
			run(t, fmt.Sprintf("v%d\n", i), "produce", "t", "--gateway", addr, "--partition", "0")
		}
	}()
	code, out, errOut := run(t, "", "consume", "t", "--gateway", addr, "--follow", "--from", "latest", "--max", "3")
	if code != 0 || out != "v0\nv1\nv2\n" {
		t.Fatalf("follow: %d %q %q", code, out, errOut)
	}
	g.mu.Lock()
	if len(g.acks) == 0 || g.acks[0] != -1 {
		t.Errorf("default acks %v, want -1", g.acks)
	}
	g.acks = nil
	g.mu.Unlock()
	// --acks takes Kafka's "all" as -1.
	for _, a := range []string{"all", "1", "0", "-1"} {
		if code, _, errOut := run(t, "x\n", "produce", "t", "--gateway", addr, "--acks", a); code != 0 {
			t.Fatalf("--acks %s: %d %q", a, code, errOut)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if fmt.Sprint(g.acks) != "[-1 1 0 -1]" {
		t.Errorf("--acks all, 1, 0, -1 sent %v", g.acks)
	}
}

func TestClusterAndUsage(t *testing.T) {
	_, addr := startFake(t)
	if code, out, _ := run(t, "", "cluster", "--gateway", addr); code != 0 || !strings.Contains(out, "Cluster fake") || !strings.Contains(out, "ALIVE") {
		t.Errorf("cluster: %d %q", code, out)
	} else {
		// Each controller's state as gossip sees it; "-" when unknown.
		for _, want := range []string{`(?m)^CONTROLLER +ADDRESS +LEADER +STATE$`, `(?m)^2 +127\.0\.0\.1:2 +true +ALIVE$`, `(?m)^3 +127\.0\.0\.1:3 +false +DEAD$`, `(?m)^4 +127\.0\.0\.1:4 +false +-$`,
			`(?m)^COORDINATOR +ADDRESS +KIND +STATE$`, `(?m)^1 +127\.0\.0\.1:5 +GROUP +ALIVE$`, `(?m)^2 +127\.0\.0\.1:6 +TRANSACTION +DEAD$`} {
			if !regexp.MustCompile(want).MatchString(out) {
				t.Errorf("cluster output lacks %s:\n%s", want, out)
			}
		}
	}
	for _, args := range [][]string{{}, {"bogus"}, {"topic"}, {"topic", "create"}, {"topic", "list", "extra"}, {"group", "describe"}, {"group", "list", "extra"}, {"consume", "t", "--from", "yesterday"}, {"cluster", "--gateway", "http://127.0.0.1:8080"}} {
		if code, _, _ := run(t, "", args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
	// A usage error shows the command's own usage, not every command's.
	if code, _, errOut := run(t, "", "group", "describe"); code != 2 || !strings.Contains(errOut, "skein group describe GROUP") ||
		!strings.Contains(errOut, "skein group dlq-replay") || strings.Contains(errOut, "skein topic create") || !strings.Contains(errOut, "skein --help") {
		t.Errorf("group describe without a group: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "", "bogus"); code != 2 || !strings.Contains(errOut, "skein topic create") {
		t.Errorf("an unknown command shows every command: %d %q", code, errOut)
	}
	// Bad values and flags that would do nothing are usage errors that
	// say what is wrong.
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"dev", "--storage-nodes", "0"}, "--storage-nodes 0"},
		{[]string{"dev", "--storage-nodes", "-1"}, "--storage-nodes -1"},
		{[]string{"dev", "--log-level", "loud"}, `--log-level: log level "loud": want debug, info, warn or error`},
		{[]string{"consume", "t", "--idle", "1s"}, "--idle is for a group member"},
		{[]string{"consume", "t", "--assignor", "bogus"}, "--assignor is for a group member"},
		{[]string{"consume", "t", "--instance-id", "x"}, "--instance-id is for a group member"},
		{[]string{"consume", "t", "--session-timeout", "5s"}, "--session-timeout is for a group member"},
		{[]string{"consume", "t", "--group", "g", "--session-timeout", "-5s"}, "--session-timeout -5s"},
		{[]string{"consume", "t", "--group", "g", "--idle", "-1s"}, "--idle -1s"},
		{[]string{"consume", "t", "--from", "none"}, "--from none is for --group"},
		{[]string{"consume", "t", "--group", "g", "--from", "bogus"}, `--from "bogus": want earliest, latest or none (with --group`},
		{[]string{"topic", "delete-records", "t", "--all", "--before", "0=0"}, "not both"},
		{[]string{"--bogus", "topic", "list"}, `unknown flag "--bogus"`},
	} {
		args := tc.args
		if args[0] != "dev" {
			args = append(args, "--gateway", addr)
		}
		if code, _, errOut := run(t, "", args...); code != 2 || !strings.Contains(errOut, tc.says) {
			t.Errorf("%q: exit %d, %q; want 2 and %q", tc.args, code, errOut, tc.says)
		}
	}
	// A bearer token never goes out in plaintext.
	if code, _, errOut := run(t, "", "cluster", "--gateway", addr, "--token", "secret"); code != 2 || !strings.Contains(errOut, "--token needs --tls-ca") {
		t.Errorf("--token without --tls-ca: exit %d, %q", code, errOut)
	}
	if code, out, _ := run(t, "", "help"); code != 0 || !strings.Contains(out, "skein dev") {
		t.Errorf("help: %d", code)
	}
	// The connection flags may come before the command, as other tools
	// take them; other flags there are not taken for a command.
	for _, args := range [][]string{{"--gateway", addr, "cluster"}, {"--gateway=" + addr, "--json", "cluster"}, {"-gateway", addr, "cluster", "--json"}} {
		if code, out, errOut := run(t, "", args...); code != 0 || !strings.Contains(out, "fake") {
			t.Errorf("%q: exit %d, %q %q", args, code, out, errOut)
		}
	}
	for _, args := range [][]string{{"--partitions", "3", "cluster"}, {"--gateway", addr}, {"--gateway", addr, "dev"}} {
		if code, _, _ := run(t, "", args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

// --compression goes in every produce request; a codec that is not one is
// a usage error (exit 2) that sends nothing.
func TestProduceCompression(t *testing.T) {
	g, addr := startFake(t)
	run(t, "", "topic", "create", "t", "--gateway", addr)
	if code, _, errOut := run(t, "a\nb\n", "produce", "t", "--gateway", addr, "--compression", "zstd"); code != 0 {
		t.Fatalf("--compression zstd: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "c\n", "produce", "t", "--gateway", addr); code != 0 {
		t.Fatalf("no --compression: %d %q", code, errOut)
	}
	g.mu.Lock()
	codecs := slices.Clone(g.codecs)
	g.mu.Unlock()
	if len(codecs) < 2 || codecs[0] != "zstd" || codecs[len(codecs)-1] != "" {
		t.Errorf("requests' compression %q, want zstd first and none named last", codecs)
	}
	code, _, errOut := run(t, "d\n", "produce", "t", "--gateway", addr, "--compression", "brotli")
	if code != 2 || !strings.Contains(errOut, `--compression "brotli": not one of none, gzip, snappy, lz4, zstd`) {
		t.Errorf("--compression brotli: %d %q", code, errOut)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.codecs) != len(codecs) {
		t.Errorf("a bad --compression sent %d requests", len(g.codecs)-len(codecs))
	}
}

// Lines that together pass a gateway's 4 MiB message limit (the fake's, as
// gRPC's default) go in several requests, each well within it.
func TestProduceSplitsLargeInput(t *testing.T) {
	g, addr := startFake(t)
	t.Setenv("SKEIN_GATEWAY", addr)
	if code, _, errOut := run(t, "", "topic", "create", "big"); code != 0 {
		t.Fatalf("create: %d %q", code, errOut)
	}
	line := strings.Repeat("x", 600_000) + "\n"
	if code, _, errOut := run(t, strings.Repeat(line, 20), "produce", "big"); code != 0 {
		t.Fatalf("produce 20 lines of 600 kB: %d %q", code, errOut)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := len(g.topics["big"][0]); n != 20 {
		t.Errorf("%d records written, want 20", n)
	}
}

// A line produce cannot send stops the input there: the lines before it
// are written (and the command waits for their answers), nothing after
// it is sent, and the error says how far it got.
func TestProduceStopsAtABadLine(t *testing.T) {
	g, addr := startFake(t)
	t.Setenv("SKEIN_GATEWAY", addr)
	if code, _, errOut := run(t, "", "topic", "create", "kv"); code != 0 {
		t.Fatalf("create: %d %q", code, errOut)
	}
	var in strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&in, "k:%d\n", i)
	}
	in.WriteString("no separator here\nk:after\n")
	code, _, errOut := run(t, in.String(), "produce", "kv", "--key-separator", ":")
	if code != 1 || !strings.Contains(errOut, "line 3001 has no key separator") || !strings.Contains(errOut, "3000 of the 3000 records before it were written") {
		t.Fatalf("produce with a bad line 3001: %d %q", code, errOut)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	got := g.topics["kv"][0]
	if len(got) != 3000 {
		t.Fatalf("%d records written, want the 3000 lines before the bad one", len(got))
	}
	for i, r := range got {
		if r.GetValue() != strconv.Itoa(i) || r.GetKey() != "k" {
			t.Fatalf("record %d: %v, want k:%d", i, r, i)
		}
	}
}

// An interrupt ends produce while its input is still open: it stops
// reading, waits for the answers of what it sent, and says what was
// written.
func TestProduceInterrupted(t *testing.T) {
	g, feed, interrupt := produceOnOpenInput(t, "open")
	for i := range 10 {
		fmt.Fprintf(feed, "line %d\n", i)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		g.mu.Lock()
		n := len(g.topics["open"][0])
		g.mu.Unlock()
		if n == 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d records written before the interrupt, want 10", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if errOut := interrupt(); !strings.Contains(errOut, "interrupted: 10 of the 10 records sent were written") {
		t.Fatalf("stderr %q", errOut)
	}
}

// An interrupt ends a transactional produce while its input is still open:
// nothing was sent (the transaction goes out once the input is whole), and
// it says so.
func TestTransactionalProduceInterruptedWhileReading(t *testing.T) {
	_, feed, interrupt := produceOnOpenInput(t, "tx", "--transactional-id", "t1")
	fmt.Fprintln(feed, "one")
	fmt.Fprintln(feed, "two")
	if errOut := interrupt(); !strings.Contains(errOut, "interrupted: nothing of the") || !strings.Contains(errOut, "lines read was written") {
		t.Fatalf("stderr %q", errOut)
	}
}

// produceOnOpenInput creates args[0] on a fake gateway and runs produce with
// args on an input that stays open, as a terminal's does: feed writes it,
// and interrupt interrupts the produce, checks that it ends with the
// interrupt's status (exit 130) within 5 s, and answers its stderr.
func produceOnOpenInput(t *testing.T, args ...string) (g *fakeGateway, feed io.Writer, interrupt func() string) {
	t.Helper()
	g, addr := startFake(t)
	t.Setenv("SKEIN_GATEWAY", addr)
	if code, _, errOut := run(t, "", "topic", "create", args[0]); code != 0 {
		t.Fatalf("create: %d %q", code, errOut)
	}
	stdin, w := io.Pipe()
	t.Cleanup(func() { w.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var errOut syncBuffer
	done := make(chan error, 1)
	go func() { done <- produceCmd(ctx, args, IO{In: stdin, Out: io.Discard, Err: &errOut}) }()
	return g, w, func() string {
		t.Helper()
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("produce after an interrupt: %v, want context.Canceled (exit status 130)", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("produce still reads its open input after an interrupt")
		}
		return errOut.String()
	}
}

// The group-only flags are refused without --group when typed, not when
// their environment twins are set (SKEIN_SESSION_TIMEOUT is a group
// coordinator's setting too).
func TestGroupOnlyFlagsFromTheEnvironment(t *testing.T) {
	_, addr := startFake(t)
	t.Setenv("SKEIN_GATEWAY", addr)
	if code, _, errOut := run(t, "", "topic", "create", "e"); code != 0 {
		t.Fatalf("create: %d %q", code, errOut)
	}
	t.Setenv("SKEIN_SESSION_TIMEOUT", "5s")
	t.Setenv("SKEIN_IDLE", "1s")
	if code, out, errOut := run(t, "", "consume", "e"); code != 0 || out != "" {
		t.Errorf("consume with group settings in the environment: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := run(t, "", "consume", "e", "--idle", "1s"); code != 2 || !strings.Contains(errOut, "--idle is for a group member") {
		t.Errorf("consume --idle without --group: %d %q", code, errOut)
	}
}

// A number a flag cannot take is a usage error, never wrapped or taken as
// the default; a bad config leaves a topic alter undone, partitions too.
func TestFlagValuesOutOfRange(t *testing.T) {
	g, addr := startFake(t)
	t.Setenv("SKEIN_GATEWAY", addr)
	if code, _, errOut := run(t, "", "topic", "create", "t", "--partitions", "2"); code != 0 {
		t.Fatalf("create: %d %q", code, errOut)
	}
	for _, args := range [][]string{
		{"topic", "create", "wrap", "--partitions", "4294967297"},
		{"topic", "create", "wrap", "--replication-factor", "2147483648"},
		{"topic", "alter", "t", "--partitions", "4294967300"},
		{"produce", "t", "--partition", "4294967297"},
		{"produce", "t", "--partition", "-5"},
		{"produce", "t", "--acks", "2"},
		{"produce", "t", "--acks", "most"},
		{"consume", "t", "--partition", "4294967297"},
		{"consume", "t", "--partition", "-5"},
		{"consume", "t", "--max", "-2"},
		{"consume", "t", "--group", "g", "--session-timeout", "1000h"},
	} {
		if code, _, errOut := run(t, "x\n", args...); code != 2 || !strings.Contains(errOut, "--") {
			t.Errorf("%q: %d %q, want a usage error naming the flag", args, code, errOut)
		}
	}
	// A flag that takes one value, given twice, is refused: the flag package
	// would act on the last alone. --config repeats; a value that looks like
	// a flag is a value.
	for _, args := range [][]string{
		{"group", "reset-offsets", "g", "--topic", "a", "--topic", "b", "--to-earliest"},
		{"group", "reset-offsets", "g", "--topic=a", "-topic", "b", "--to-earliest"},
		{"produce", "t", "--partition", "0", "--partition=1"},
	} {
		if code, _, errOut := run(t, "x\n", args...); code != 2 || !strings.Contains(errOut, "is given more than once") {
			t.Errorf("%q: %d %q, want a usage error", args, code, errOut)
		}
	}
	if code, _, errOut := run(t, "", "topic", "create", "twice", "--config", "retention.ms=5", "--config", "segment.ms=7"); code != 0 {
		t.Errorf("--config twice: %d %q", code, errOut)
	}
	if _, _, errOut := run(t, "", "group", "reset-offsets", "g", "--topic", "--to-earliest", "--to-earliest"); strings.Contains(errOut, "more than once") {
		t.Errorf("a --topic value that looks like a flag was counted as the flag: %q", errOut)
	}
	if code, _, errOut := run(t, "", "topic", "alter", "t", "--partitions", "5", "--config", "retention.ms=abc"); code != 1 || !strings.Contains(errOut, "INVALID_CONFIG") {
		t.Fatalf("alter with a bad config: %d %q", code, errOut)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := len(g.topics["t"]); n != 2 {
		t.Fatalf("t has %d partitions after a refused alter, want 2", n)
	}
	if _, ok := g.topics["wrap"]; ok {
		t.Fatal("a topic was created from a partition count out of range")
	}
}

// --json prints the API's JSON wherever a command answers: a record or a
// produce result per line for the streaming commands.
func TestJSONOutputOfStreams(t *testing.T) {
	_, addr := startFake(t)
	t.Setenv("SKEIN_GATEWAY", addr)
	if code, _, errOut := run(t, "", "topic", "create", "j"); code != 0 {
		t.Fatalf("create: %d %q", code, errOut)
	}
	code, out, errOut := run(t, "a\nb\nc\n", "produce", "j", "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 {
		t.Fatalf("produce --json: %d %q %q, want three lines", code, out, errOut)
	}
	for i, l := range lines {
		var r struct {
			Offset    string `json:"offset"`
			ErrorCode string `json:"error_code"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Offset != strconv.Itoa(i) || r.ErrorCode != "NONE" {
			t.Fatalf("produce --json line %d: %q (%v)", i, l, err)
		}
	}
	code, out, errOut = run(t, "", "consume", "j", "--from", "earliest", "--max", "3", "--json")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 {
		t.Fatalf("consume --json: %d %q %q, want three lines", code, out, errOut)
	}
	for i, l := range lines {
		var r struct {
			Value  string `json:"value"`
			Offset string `json:"offset"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Value != string(rune('a'+i)) || r.Offset != strconv.Itoa(i) {
			t.Fatalf("consume --json line %d: %q (%v)", i, l, err)
		}
	}
}

// A gateway address without a port is a usage error (not port 443), one
// that nothing listens on says where to look, and a line too long for
// produce is named by its number.
func TestGatewayAddressAndLongLines(t *testing.T) {
	if code, _, errOut := run(t, "", "topic", "list", "--gateway", "127.0.0.1"); code != 2 || !strings.Contains(errOut, "host:port") {
		t.Errorf("--gateway without a port: %d %q", code, errOut)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := lis.Addr().String()
	lis.Close() // nothing listens there now
	if code, _, errOut := run(t, "", "topic", "list", "--gateway", closed); code != 1 || !strings.Contains(errOut, "SKEIN_GATEWAY") {
		t.Errorf("no gateway at %s: %d %q, want a hint at --gateway", closed, code, errOut)
	}
	// A gateway that could not reach a controller relays the refusal: the
	// hint is not for it.
	relayed := rpcerr.ToGRPC(errs.Errorf(errs.NetworkException, "dial tcp 127.0.0.1:26920: connect: connection refused"))
	if msg := describeErr(relayed); strings.Contains(msg, "SKEIN_GATEWAY") || !strings.Contains(msg, "NETWORK_EXCEPTION") {
		t.Errorf("a refusal the gateway relays: %q, want no hint at --gateway", msg)
	}
	// A listener that takes the connection and says nothing (a stopped
	// gateway): this side gives up, and says so, not that it was refused.
	hung := status.Error(codes.Unavailable, `connection error: desc = "error reading server preface: read tcp 127.0.0.1:50862->127.0.0.1:39999: use of closed network connection"`)
	if msg := describeErr(hung); !strings.Contains(msg, "said nothing before this command gave up") || strings.Contains(msg, "--tls-ca") {
		t.Errorf("a silent listener: %q, want the hint that it said nothing, not one about TLS", msg)
	}
	// Another Skein process's gRPC port: a service it does not serve.
	other := status.Error(codes.Unimplemented, "unknown service skein.v1.AdminService")
	if msg := describeErr(other); !strings.Contains(msg, "not the gateway's API") {
		t.Errorf("a storage node's port: %q, want a hint at the gateway's address", msg)
	}
	// An HTTP/1.1 server there (the gateway's REST port, say).
	web := httptest.NewServer(http.NotFoundHandler())
	defer web.Close()
	if code, _, errOut := run(t, "", "topic", "list", "--gateway", web.Listener.Addr().String()); code != 1 || !strings.Contains(errOut, "REST port") {
		t.Errorf("an HTTP/1.1 server at --gateway: %d %q, want a hint at the gRPC address", code, errOut)
	}
	_, addr := startFake(t)
	t.Setenv("SKEIN_GATEWAY", addr)
	if code, _, errOut := run(t, "", "topic", "create", "long"); code != 0 {
		t.Fatalf("create: %d %q", code, errOut)
	}
	huge := "ok\n" + strings.Repeat("x", maxLine+1) + "\n"
	if code, _, errOut := run(t, huge, "produce", "long"); code != 1 || !strings.Contains(errOut, "line 2 is longer than") {
		t.Errorf("a line over %d bytes: %d %q", maxLine, code, errOut)
	}
	big := strings.Repeat("y", maxLineBytes+1) + "\n"
	if code, _, errOut := run(t, big, "produce", "long"); code != 1 || !strings.Contains(errOut, "line 1 is") || strings.Contains(errOut, "UNKNOWN_SERVER_ERROR") {
		t.Errorf("a line over what one request carries: %d %q", code, errOut)
	}
}

// --help after a command with subcommands lists them, and a bad flag is
// reported once with the command's own flags, not the whole usage too.
func TestHelpAndFlagErrors(t *testing.T) {
	for _, cmd := range []string{"topic", "group", "acl"} {
		code, out, errOut := run(t, "", cmd, "--help")
		if code != 0 || !strings.Contains(out, "skein "+cmd+" ") || strings.Contains(out, "skein dev") {
			t.Errorf("%s --help: %d %q %q, want its subcommands' usage", cmd, code, out, errOut)
		}
	}
	code, _, errOut := run(t, "", "topic", "create", "t", "--partitons", "3")
	if code != 2 || strings.Count(errOut, "-partitons") != 2 || strings.Contains(errOut, "skein topic list") {
		t.Errorf("a misspelt flag: %d %q, want the flag package's error and usage of topic create alone", code, errOut)
	}
}

// An interrupt ends produce within its grace period even when the
// gateway never answers what was sent.
func TestProduceInterruptedWithoutAnswers(t *testing.T) {
	g, addr := startFake(t)
	t.Setenv("SKEIN_GATEWAY", addr)
	if code, _, errOut := run(t, "", "topic", "create", "mute"); code != 0 {
		t.Fatalf("create: %d %q", code, errOut)
	}
	hold := make(chan struct{})
	defer close(hold)
	g.mu.Lock()
	g.holdProduce = hold
	g.mu.Unlock()
	defer func(d time.Duration) { interruptGrace = d }(interruptGrace)
	interruptGrace = 200 * time.Millisecond
	ctx, interrupt := context.WithCancel(context.Background())
	var errOut bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- produceCmd(ctx, []string{"mute"}, IO{In: strings.NewReader("a\nb\n"), Out: io.Discard, Err: &errOut})
	}()
	time.Sleep(200 * time.Millisecond) // sent, and waiting for the answers
	interrupt()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !strings.Contains(errOut.String(), "may or may not be written") {
			t.Fatalf("produce interrupted with its answers held: %v %q", err, errOut.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("produce still waits for a gateway that does not answer, after an interrupt")
	}
}

// Input that is not UTF-8 is produced as it is, in the bytes fields.
func TestProduceBytesThatAreNotUTF8(t *testing.T) {
	g, addr := startFake(t)
	t.Setenv("SKEIN_GATEWAY", addr)
	if code, _, errOut := run(t, "", "topic", "create", "raw"); code != 0 {
		t.Fatalf("create: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "caf\xe9\xff:v\xe9\nplain:text\n", "produce", "raw", "--key-separator", ":"); code != 0 {
		t.Fatalf("produce of latin-1 bytes: %d %q", code, errOut)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	got := g.topics["raw"][0]
	if len(got) != 2 || string(got[0].GetKeyBytes()) != "caf\xe9\xff" || string(got[0].GetValueBytes()) != "v\xe9" ||
		got[1].GetKey() != "plain" || got[1].GetValue() != "text" {
		t.Fatalf("records %v", got)
	}
}

func TestDevGoMaxProcs(t *testing.T) {
	for _, tc := range []struct {
		flag      int
		env       string
		cpus      int
		want      int
		wantWhy   string
		wantUsage bool
	}{
		{flag: 0, cpus: 2, want: 1, wantWhy: "GOMAXPROCS=1 each: 2 CPUs shared by 3 storage nodes and the gateway"},
		{flag: 0, cpus: 8, want: 2, wantWhy: "GOMAXPROCS=2 each"},
		{flag: 0, env: "2", cpus: 2, want: 0, wantWhy: "GOMAXPROCS=2 each, from the environment"},
		{flag: 4, env: "2", cpus: 2, want: 4, wantWhy: "as --gomaxprocs asks"},
		{flag: -1, cpus: 2, want: 0, wantWhy: "own default"},
		{flag: -2, cpus: 2, wantUsage: true},
	} {
		got, why, err := devGoMaxProcs(tc.flag, tc.env, tc.cpus, 3)
		if tc.wantUsage {
			if err == nil || !strings.Contains(err.Error(), "--gomaxprocs -2") {
				t.Errorf("--gomaxprocs %d: err %v, want a usage error naming it", tc.flag, err)
			}
			continue
		}
		if err != nil || got != tc.want || !strings.Contains(why, tc.wantWhy) {
			t.Errorf("--gomaxprocs %d, GOMAXPROCS=%q, %d CPUs: %d %q %v, want %d and %q", tc.flag, tc.env, tc.cpus, got, why, err, tc.want, tc.wantWhy)
		}
	}
}

func TestConsumePrintsNullForAMissingKeyOrValue(t *testing.T) {
	g, addr := startFake(t)
	t.Setenv("SKEIN_GATEWAY", addr)
	run(t, "", "topic", "create", "orders")
	if code, _, errOut := run(t, "k:v\n:empty key\n", "produce", "orders", "--key-separator", ":"); code != 0 {
		t.Fatalf("produce keyed: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "no key\n", "produce", "orders"); code != 0 {
		t.Fatalf("produce keyless: %d %q", code, errOut)
	}
	g.mu.Lock() // a tombstone: a key and no value
	g.topics["orders"][0] = append(g.topics["orders"][0], &skeinv1.ConsumedRecord{Topic: "orders", Offset: 3, Key: ptr("gone")})
	g.mu.Unlock()
	code, out, errOut := run(t, "", "consume", "orders", "--print-key")
	if want := "k\tv\n\tempty key\nnull\tno key\ngone\tnull\n"; code != 0 || out != want {
		t.Fatalf("consume --print-key: %d %q %q, want %q", code, out, errOut, want)
	}
	if code, out, _ := run(t, "", "consume", "orders", "--from", "3"); code != 0 || out != "null\n" {
		t.Errorf("a tombstone's value: %d %q", code, out)
	}
}

// A topic created by a principal that may not describe it is answered by
// its name only: the CLI says so instead of printing a topic of 0
// partitions and replication 0.
func TestTopicCreatedWithoutDescribe(t *testing.T) {
	g, addr := startFake(t)
	g.nameOnly = true
	code, out, errOut := run(t, "", "topic", "create", "hidden", "--partitions", "3", "--gateway", addr)
	if code != 0 || !strings.Contains(out, "created topic hidden") || !strings.Contains(out, "may not describe it") ||
		strings.Contains(out, "partitions: 0") || strings.Contains(out, "PARTITION") {
		t.Fatalf("create without describe: %d %q %q", code, out, errOut)
	}
}

// topic elect-leaders runs a topic's election as kafka-leader-election.sh:
// a partition already led by the replica asked for is no failure, any
// other refusal exits 1 once every partition is printed.
func TestTopicElectLeaders(t *testing.T) {
	_, addr := startFake(t)
	t.Setenv("SKEIN_GATEWAY", addr)
	run(t, "", "topic", "create", "orders", "--partitions", "2")
	code, out, errOut := run(t, "", "topic", "elect-leaders", "orders")
	if code != 0 || !strings.Contains(out, "0          1       elected") || !strings.Contains(out, "ELECTION_NOT_NEEDED") {
		t.Errorf("preferred election: %d %q %q", code, out, errOut)
	}
	code, out, errOut = run(t, "", "topic", "elect-leaders", "orders", "--type", "UNCLEAN")
	if code != 1 || !strings.Contains(out, "ELIGIBLE_LEADERS_NOT_AVAILABLE") || !strings.Contains(errOut, "1 of 2 partition(s) of orders got no unclean election") {
		t.Errorf("unclean election with a partition refused: %d %q %q", code, out, errOut)
	}
	if code, out, _ := run(t, "", "topic", "elect-leaders", "orders", "--json"); code != 0 || !strings.Contains(out, `"error_code": "ELECTION_NOT_NEEDED"`) {
		t.Errorf("--json: %d %q", code, out)
	}
	// An unclean election is asked for on the command line only.
	t.Setenv("SKEIN_TYPE", "unclean")
	if code, out, errOut := run(t, "", "topic", "elect-leaders", "orders"); code != 2 || out != "" || !strings.Contains(errOut, "comes from the environment") {
		t.Errorf("SKEIN_TYPE=unclean: %d %q %q, want a usage error", code, out, errOut)
	}
	t.Setenv("SKEIN_TYPE", "")
	for _, tc := range []struct {
		args []string
		code int
		has  string
	}{
		{[]string{"topic", "elect-leaders", "orders", "--type", "sideways"}, 2, `--type "sideways"`},
		{[]string{"topic", "elect-leaders"}, 2, "takes 1 argument"},
		{[]string{"topic", "elect-leaders", "nosuch"}, 1, "UNKNOWN_TOPIC_OR_PARTITION"},
	} {
		if code, _, errOut := run(t, "", tc.args...); code != tc.code || !strings.Contains(errOut, tc.has) {
			t.Errorf("%v: %d %q, want %d and %q", tc.args, code, errOut, tc.code, tc.has)
		}
	}
}

// Under --read-committed without --follow, reading stops at the last
// stable offset, and an open transaction holding it below the high
// watermark is said on stderr: the records after it are not printed.
func TestConsumeReadCommittedSaysWhereItStopped(t *testing.T) {
	g, addr := startFake(t)
	t.Setenv("SKEIN_GATEWAY", addr)
	if code, _, errOut := run(t, "", "topic", "create", "tx"); code != 0 {
		t.Fatalf("create: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "a\nb\nc\n", "produce", "tx"); code != 0 {
		t.Fatalf("produce: %d %q", code, errOut)
	}
	g.mu.Lock()
	g.openTxn = 2
	g.mu.Unlock()
	code, out, errOut := run(t, "", "consume", "tx", "--read-committed")
	if code != 0 || out != "a\n" || !strings.Contains(errOut, "tx-0: read up to its last stable offset 1") || !strings.Contains(errOut, "up to 3") {
		t.Errorf("read_committed below an open transaction: %d %q %q", code, out, errOut)
	}
	if code, out, errOut := run(t, "", "consume", "tx"); code != 0 || out != "a\nb\nc\n" || errOut != "" {
		t.Errorf("read_uncommitted: %d %q %q", code, out, errOut)
	}
}

// produce --header puts the same headers, in order, on every record, and
// consume prints partition, offset and headers as Kafka's console consumer
// does with print.partition, print.offset and print.headers.
func TestHeadersPartitionAndOffsetPrinted(t *testing.T) {
	_, addr := startFake(t)
	t.Setenv("SKEIN_GATEWAY", addr)
	run(t, "", "topic", "create", "h", "--partitions", "2")
	if code, _, errOut := run(t, "k1:v1\nk2:v2\n", "produce", "h", "--partition", "1", "--key-separator", ":",
		"--header", "source=cli", "--header", "trace=a=b", "--header", "source=again"); code != 0 {
		t.Fatalf("produce: %d %q", code, errOut)
	}
	run(t, "plain\n", "produce", "h", "--partition", "1")
	code, out, errOut := run(t, "", "consume", "h", "--partition", "1", "--print-partition", "--print-offset", "--print-headers", "--print-key")
	want := "Partition:1\tOffset:0\tsource:cli,trace:a=b,source:again\tk1\tv1\n" +
		"Partition:1\tOffset:1\tsource:cli,trace:a=b,source:again\tk2\tv2\n" +
		"Partition:1\tOffset:2\tNO_HEADERS\tnull\tplain\n"
	if code != 0 || out != want {
		t.Errorf("consume: %d %q %q, want %q", code, out, errOut, want)
	}
	if code, out, _ := run(t, "", "consume", "h", "--partition", "1", "--print-offset", "--key-separator", " | ", "--max", "1"); code != 0 || out != "Offset:0 | v1\n" {
		t.Errorf("--print-offset alone: %d %q", code, out)
	}
	// The timestamp comes first, named by its type.
	var buf strings.Builder
	p := &printer{w: &buf, printTimestamp: true, printOffset: true, sep: "\t"}
	p.print(&skeinv1.ConsumedRecord{Offset: 4, TimestampMs: 1700000000000, Value: ptr("c")})
	p.print(&skeinv1.ConsumedRecord{Offset: 5, TimestampMs: 1700000000001, Value: ptr("l"), TimestampType: skeinv1.TimestampType_LOG_APPEND_TIME})
	if want := "CreateTime:1700000000000\tOffset:4\tc\nLogAppendTime:1700000000001\tOffset:5\tl\n"; buf.String() != want {
		t.Errorf("--print-timestamp: %q, want %q", buf.String(), want)
	}
	for _, bad := range []string{"novalue", "=v", ""} {
		if code, _, errOut := run(t, "x\n", "produce", "h", "--header", bad); code != 2 || !strings.Contains(errOut, "KEY=VALUE") {
			t.Errorf("--header %q: %d %q, want a usage error", bad, code, errOut)
		}
	}
}

// A record the gateway refuses is reported by its stdin line, and the
// gateway's name for it (its place in the request) is not repeated.
func TestRefusedRecordNamedByLine(t *testing.T) {
	_, addr := startFake(t)
	t.Setenv("SKEIN_GATEWAY", addr)
	run(t, "", "topic", "create", "r")
	code, _, errOut := run(t, "a\nb\noversized-c\nd\n", "produce", "r")
	if code != 1 || !strings.Contains(errOut, "line 3: MESSAGE_TOO_LARGE: the record is 11 bytes as a batch") || strings.Contains(errOut, "record 2") ||
		!strings.Contains(errOut, "1 of 4 records were not written") {
		t.Errorf("produce: %d %q", code, errOut)
	}
	for _, tc := range []struct {
		msg  string
		i    int
		want string
	}{
		{"record 2 is 11 bytes", 2, "the record is 11 bytes"},
		{"record 2: key too long", 2, "the record: key too long"},
		{"record 2", 2, "the record"},
		{"record 21 is 11 bytes", 2, "record 21 is 11 bytes"},
		{"record 2 is 11 bytes", 3, "record 2 is 11 bytes"},
		{"topic \"x\" is gone", 0, "topic \"x\" is gone"},
	} {
		if got := recordMessage(tc.msg, tc.i); got != tc.want {
			t.Errorf("recordMessage(%q, %d) = %q, want %q", tc.msg, tc.i, got, tc.want)
		}
	}
}

// A partition whose last in-sync replica lost its logs says so under the
// table, with the way out.
func TestDescribeNamesALostReplica(t *testing.T) {
	var out strings.Builder
	err := printTopic(IO{Out: &out}, &skeinv1.TopicDescription{Name: "solo", Partitions: []*skeinv1.PartitionDescription{
		{Partition: 0, Leader: -1, Replicas: []int32{4, 1}, LostReplica: &skeinv1.LostReplica{Broker: 4, LogDirId: "3802ab"}},
		{Partition: 1, Leader: 1, Replicas: []int32{1, 4}, Isr: []int32{1}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := "partition 0 is offline: its last in-sync replica, broker 4, lost its logs (data directory 3802ab); bring that disk back, or accept the loss: skein topic elect-leaders solo --type unclean\n"
	if !strings.HasSuffix(out.String(), want) || strings.Contains(out.String(), "partition 1 is offline") {
		t.Errorf("describe:\n%s", out.String())
	}
}
