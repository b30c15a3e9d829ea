package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	controllerv1 "skein/gen/skein/controller/v1"
	storagev1 "skein/gen/skein/storage/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/acl"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/libs/peerauth"
	"skein/libs/record"
	"skein/libs/rpcerr"
	"skein/services/storage/internal/partition"
)

// lookedUp answers no partition, and records which were looked up: a
// refused request must not reach a replica.
type lookedUp struct {
	mu   sync.Mutex
	seen []string
}

func (l *lookedUp) Get(tp partition.TP) (*partition.Partition, error) {
	l.mu.Lock()
	l.seen = append(l.seen, tp.Topic)
	l.mu.Unlock()
	return nil, errs.Errorf(errs.UnknownTopicOrPartition, "no %v here", tp)
}

func (l *lookedUp) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.seen
	l.seen = nil
	return out
}

// aclServer is a server whose ACLs let User:alice write and read "orders"
// and describe nothing else; User:root is a super user.
func aclServer(t *testing.T) (*Server, *lookedUp) {
	img := metadata.New("c")
	grants := []*controllerv1.MetadataRecord{
		metadata.AclRecord(acl.Binding{Principal: "User:alice", Resource: acl.Topic, Name: "orders", Pattern: acl.Literal, Operation: acl.Write, Permission: acl.Allow}),
		metadata.AclRecord(acl.Binding{Principal: "User:alice", Resource: acl.Topic, Name: "orders", Pattern: acl.Literal, Operation: acl.Read, Permission: acl.Allow}),
		metadata.AclRecord(acl.Binding{Principal: "User:alice", Resource: acl.TransactionalID, Name: "tx-a", Pattern: acl.Literal, Operation: acl.Write, Permission: acl.Allow}),
	}
	if err := img.Apply(&controllerv1.MetadataDelta{Version: 1, Records: grants}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reps := &lookedUp{}
	s := New(reps, log, NewMetrics(prometheus.NewRegistry()))
	s.Authorize(peerauth.NewAuthorizer(func() *metadata.Image { return img }, map[string]bool{"User:root": true}, log))
	return s, reps
}

var (
	gatewayPeer = peerauth.Peer{Role: peerauth.RoleGateway, ID: "1", Principal: "User:gateway-1"}
	alicePeer   = peerauth.Peer{Role: "client", ID: "alice", Principal: "User:alice"}
	storagePeer = peerauth.Peer{Role: peerauth.RoleStorage, ID: "2", Principal: "User:storage-2"}
)

func as(p peerauth.Peer, named string) context.Context {
	return peerauth.WithCaller(context.Background(), peerauth.CallerOf(p, named))
}

func twoTopics(principal, txn string) *storagev1.ProduceRequest {
	return &storagev1.ProduceRequest{Acks: -1, Principal: principal, TransactionalId: txn, Partitions: []*storagev1.PartitionProduce{
		{Topic: "orders", Partition: 0, Records: []byte("x")},
		{Topic: "payments", Partition: 0, Records: []byte("y")},
	}}
}

func TestProduceIsAuthorizedPerPartition(t *testing.T) {
	s, reps := aclServer(t)
	const denied, allowed = skeinv1.ErrorCode_TOPIC_AUTHORIZATION_FAILED, skeinv1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		req    *storagev1.ProduceRequest
		want   []skeinv1.ErrorCode
		looked []string
	}{
		{"a client certificate", as(alicePeer, ""), twoTopics("", ""), []skeinv1.ErrorCode{allowed, denied}, []string{"orders"}},
		{"a client naming a super user is still itself", as(alicePeer, ""), twoTopics("User:root", ""), []skeinv1.ErrorCode{allowed, denied}, []string{"orders"}},
		{"the gateway for alice (metadata)", as(gatewayPeer, "User:alice"), twoTopics("", ""), []skeinv1.ErrorCode{allowed, denied}, []string{"orders"}},
		{"the gateway for alice (request)", as(gatewayPeer, ""), twoTopics("User:alice", ""), []skeinv1.ErrorCode{allowed, denied}, []string{"orders"}},
		{"the gateway for bob", as(gatewayPeer, ""), twoTopics("User:bob", ""), []skeinv1.ErrorCode{denied, denied}, nil},
		{"the gateway for a super user", as(gatewayPeer, ""), twoTopics("User:root", ""), []skeinv1.ErrorCode{allowed, allowed}, []string{"orders", "payments"}},
		{"a storage node for itself", as(storagePeer, ""), twoTopics("", ""), []skeinv1.ErrorCode{allowed, allowed}, []string{"orders", "payments"}},
		{"plaintext", context.Background(), twoTopics("User:bob", ""), []skeinv1.ErrorCode{allowed, allowed}, []string{"orders", "payments"}},
		{"alice's transaction", as(alicePeer, ""), twoTopics("", "tx-a"), []skeinv1.ErrorCode{allowed, denied}, []string{"orders"}},
		{"another transactional id", as(alicePeer, ""), twoTopics("", "tx-b"),
			[]skeinv1.ErrorCode{skeinv1.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED, skeinv1.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.Produce(tc.ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range resp.GetPartitions() {
				if p.GetErrorCode() != tc.want[i] {
					t.Errorf("%s: %v (%s), want %v", p.GetTopic(), p.GetErrorCode(), p.GetErrorMessage(), tc.want[i])
				}
				if p.GetErrorCode() == denied && p.GetBaseOffset() != -1 {
					t.Errorf("%s refused with base offset %d", p.GetTopic(), p.GetBaseOffset())
				}
			}
			if got := reps.take(); len(got) != len(tc.looked) {
				t.Errorf("replicas looked up %v, want %v (a refused partition must not reach its replica)", got, tc.looked)
			}
		})
	}
}

// On a pipelined stream each request names its own client.
func TestProduceStreamAuthorizesEachRequest(t *testing.T) {
	s, _ := aclServer(t)
	ctx := as(gatewayPeer, "")
	for _, tc := range []struct {
		principal string
		want      skeinv1.ErrorCode
	}{{"User:alice", skeinv1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION}, {"User:bob", skeinv1.ErrorCode_TOPIC_AUTHORIZATION_FAILED}} {
		resp, _ := s.startProduce(ctx, twoTopics(tc.principal, ""), true)()
		if got := resp.GetPartitions()[0].GetErrorCode(); got != tc.want {
			t.Errorf("%s writing orders on the stream: %v, want %v", tc.principal, got, tc.want)
		}
	}
}

func TestFetchAndListOffsetsAreAuthorized(t *testing.T) {
	s, reps := aclServer(t)
	fetch := &storagev1.FetchRequest{Partitions: []*storagev1.PartitionFetch{{Topic: "orders"}, {Topic: "payments"}}}
	resp, err := s.Fetch(as(gatewayPeer, "User:alice"), fetch)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := resp.GetPartitions()[0].GetErrorCode(), resp.GetPartitions()[1].GetErrorCode(); a != skeinv1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION || b != skeinv1.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
		t.Errorf("alice fetching orders and payments: %v, %v", a, b)
	}
	if got := reps.take(); len(got) != 1 || got[0] != "orders" {
		t.Errorf("replicas looked up %v, want [orders]", got)
	}
	lo := &storagev1.ListOffsetsRequest{Partitions: []*storagev1.ListOffsetsPartition{{Topic: "orders"}, {Topic: "payments"}}}
	lresp, err := s.ListOffsets(as(alicePeer, ""), lo)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := lresp.GetPartitions()[0].GetErrorCode(), lresp.GetPartitions()[1].GetErrorCode(); a != skeinv1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION || b != skeinv1.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
		t.Errorf("alice listing offsets of orders and payments: %v, %v", a, b)
	}
	// Describing producers reads the topic, as Kafka's DescribeProducers.
	dp := &storagev1.DescribeProducersRequest{Partitions: []*storagev1.DescribeProducersPartition{{Topic: "orders"}, {Topic: "payments"}}}
	dresp, err := s.DescribeProducers(as(alicePeer, ""), dp)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := dresp.GetPartitions()[0].GetErrorCode(), dresp.GetPartitions()[1].GetErrorCode(); a != skeinv1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION || b != skeinv1.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
		t.Errorf("alice describing producers of orders and payments: %v, %v", a, b)
	}
	// A follower's own fetch is never refused.
	resp, _ = s.Fetch(as(storagePeer, ""), fetch)
	for _, p := range resp.GetPartitions() {
		if p.GetErrorCode() == skeinv1.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
			t.Errorf("a storage node's fetch of %s refused", p.GetTopic())
		}
	}
}

// Deleting records needs delete on the topic: read and write are not
// enough. A request's malformed partitions are refused one by one.
func TestDeleteRecordsIsAuthorized(t *testing.T) {
	s, reps := aclServer(t)
	req := &storagev1.DeleteRecordsRequest{Partitions: []*storagev1.DeleteRecordsPartition{{Topic: "orders", Offset: 3}, {Topic: "payments", Offset: 3}}}
	codes := func(resp *storagev1.DeleteRecordsResponse) []skeinv1.ErrorCode {
		var out []skeinv1.ErrorCode
		for _, p := range resp.GetPartitions() {
			out = append(out, p.GetErrorCode())
		}
		return out
	}
	resp, err := s.DeleteRecords(as(gatewayPeer, "User:alice"), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := codes(resp); !slices.Equal(got, []skeinv1.ErrorCode{skeinv1.ErrorCode_TOPIC_AUTHORIZATION_FAILED, skeinv1.ErrorCode_TOPIC_AUTHORIZATION_FAILED}) {
		t.Errorf("alice deleting records of orders and payments: %v", got)
	}
	if got := reps.take(); len(got) != 0 {
		t.Errorf("replicas looked up %v for refused deletions", got)
	}
	resp, err = s.DeleteRecords(as(gatewayPeer, "User:root"), &storagev1.DeleteRecordsRequest{Partitions: []*storagev1.DeleteRecordsPartition{
		{Topic: "orders", Offset: 3}, {Topic: "orders", Offset: 4}, {Topic: "payments", Offset: -2},
		// The coordinators' state, whatever its cleanup.policy and the
		// caller's rights.
		{Topic: "__consumer_offsets", Offset: 1}, {Topic: "__transaction_state", Offset: -1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := []skeinv1.ErrorCode{skeinv1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, skeinv1.ErrorCode_INVALID_REQUEST, skeinv1.ErrorCode_OFFSET_OUT_OF_RANGE,
		skeinv1.ErrorCode_INVALID_TOPIC_EXCEPTION, skeinv1.ErrorCode_INVALID_TOPIC_EXCEPTION}
	if got := codes(resp); !slices.Equal(got, want) {
		t.Errorf("root deleting orders twice and payments below -1: %v, want %v", got, want)
	}
	if got := reps.take(); len(got) != 1 || got[0] != "orders" {
		t.Errorf("replicas looked up %v, want [orders]", got)
	}
}

// followSink is the server side of a Follow stream, without gRPC.
type followSink struct {
	grpc.ServerStream
	ctx  context.Context
	sent int
}

func (f *followSink) Context() context.Context             { return f.ctx }
func (f *followSink) Send(*storagev1.FollowResponse) error { f.sent++; return nil }

func TestFollowIsAuthorized(t *testing.T) {
	s, reps := aclServer(t)
	for _, tc := range []struct {
		topic  string
		want   *errs.Error
		looked []string
	}{
		{"payments", errs.TopicAuthorizationFailed, nil},
		{"orders", errs.UnknownTopicOrPartition, []string{"orders"}},
	} {
		sink := &followSink{ctx: as(gatewayPeer, "User:alice")}
		err := s.Follow(&storagev1.FollowRequest{Topic: tc.topic}, sink)
		if got := errs.Of(rpcerr.FromStatus(err)); got != tc.want || sink.sent != 0 {
			t.Errorf("alice following %s: %v after %d answers, want %v", tc.topic, err, sink.sent, tc.want)
		}
		if got := reps.take(); fmt.Sprint(got) != fmt.Sprint(tc.looked) {
			t.Errorf("alice following %s: replicas looked up %v, want %v", tc.topic, got, tc.looked)
		}
	}
}

func TestRulesBindReplicationAndMarkers(t *testing.T) {
	r := Rules()
	for _, tc := range []struct {
		method string
		peer   peerauth.Peer
		ok     bool
	}{
		{"Replicate", storagePeer, true},
		{"Replicate", gatewayPeer, false},
		{"Replicate", alicePeer, false},
		{"OffsetForLeaderEpoch", alicePeer, false},
		{"WriteTxnMarkers", peerauth.Peer{Role: peerauth.RoleTxnCoord, ID: "1"}, true},
		{"WriteTxnMarkers", gatewayPeer, false},
		{"Produce", alicePeer, true},
		{"Fetch", alicePeer, true},
		{"DescribeProducers", alicePeer, true},
	} {
		err := r.Check(peerauth.Method(storagev1.StorageService_ServiceDesc, tc.method), tc.peer)
		if (err == nil) != tc.ok {
			t.Errorf("%s by %v: %v, want ok=%v", tc.method, tc.peer, err, tc.ok)
		}
		if err != nil && errs.Of(err) != errs.ClusterAuthorizationFailed {
			t.Errorf("%s by %v refused with %s", tc.method, tc.peer, errs.Of(err).Name)
		}
	}
}

// A transaction's batch is refused without the request's transactional id,
// whoever sends it and with or without ACLs (as Kafka): write on the topic
// alone would open a transaction no coordinator ends. The same batch with
// the id, and a plain batch without one, reach the replica.
func TestTransactionalBatchNeedsItsTransactionalID(t *testing.T) {
	batch := func(txn bool) []byte {
		opts := record.DefaultBatchOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = 7, 0, 0, txn
		b := record.NewBuilder(opts)
		b.Append(1, nil, []byte("v"))
		data, _, err := b.Build(nil)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	acled, acledReps := aclServer(t)
	open := New(&lookedUp{}, slog.New(slog.NewTextHandler(io.Discard, nil)), NewMetrics(prometheus.NewRegistry()))
	for _, tc := range []struct {
		name string
		s    *Server
		ctx  context.Context
		txn  bool
		id   string
		want skeinv1.ErrorCode
	}{
		{"a client with write on the topic, no transactional id", acled, as(alicePeer, ""), true, "", skeinv1.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED},
		{"with its transactional id", acled, as(alicePeer, ""), true, "tx-a", skeinv1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION},
		{"a plain batch", acled, as(alicePeer, ""), false, "", skeinv1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION},
		{"no ACLs, no transactional id", open, context.Background(), true, "", skeinv1.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := tc.s.Produce(tc.ctx, &storagev1.ProduceRequest{Acks: -1, TransactionalId: tc.id,
				Partitions: []*storagev1.PartitionProduce{{Topic: "orders", Partition: 0, Records: batch(tc.txn)}}})
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.GetPartitions()[0]; got.GetErrorCode() != tc.want || got.GetBaseOffset() != -1 {
				t.Errorf("%v (%s) at %d, want %v", got.GetErrorCode(), got.GetErrorMessage(), got.GetBaseOffset(), tc.want)
			}
		})
	}
	if got := acledReps.take(); len(got) != 2 {
		t.Errorf("replicas looked up %v, want orders twice (the refused batch must not reach its replica)", got)
	}
}
