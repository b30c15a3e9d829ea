package replica_test

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	controllerv1 "skein/gen/skein/controller/v1"
	storagev1 "skein/gen/skein/storage/v1"
	"skein/libs/acl"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/libs/peerauth"
	"skein/libs/record"
	"skein/libs/rpcerr"
	"skein/services/storage/internal/partition"
)

// follow opens a Follow stream on n.
func follow(t *testing.T, ctx context.Context, n *node, req *storagev1.FollowRequest) storagev1.StorageService_FollowClient {
	t.Helper()
	s, err := storagev1.NewStorageServiceClient(n.cc).Follow(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// answerOffsets answers the base offset of each batch of an answer, and
// its high watermark.
func answerOffsets(t *testing.T, s storagev1.StorageService_FollowClient) ([]int64, int64) {
	t.Helper()
	resp, err := s.Recv()
	if err != nil {
		t.Fatalf("follow answer: %v", err)
	}
	var bases []int64
	it := record.NewBatchIter(resp.GetPartition().GetRecords())
	for it.Next() {
		if err := it.Batch().Verify(); err != nil {
			t.Fatal(err)
		}
		bases = append(bases, int64(it.Batch().BaseOffset()))
	}
	if err := it.Err(); err != nil {
		t.Fatalf("an answer's batches: %v", err)
	}
	if len(bases) == 0 {
		t.Fatal("an empty follow answer")
	}
	return bases, resp.GetPartition().GetHighWatermark()
}

// streamEnd waits for s to end and answers its error.
func streamEnd(t *testing.T, s storagev1.StorageService_FollowClient) *errs.Error {
	t.Helper()
	for {
		if _, err := s.Recv(); err != nil {
			return errs.Of(rpcerr.FromStatus(err))
		}
	}
}

// A Follow stream answers what is committed from its offset and then each
// new commit, with no request in between, whole batches only; max_records
// ends an answer at the batch that holds its last record.
func TestFollowStreamsEachCommit(t *testing.T) {
	_, nodes := startNodes(t)
	for _, v := range []string{"a", "b", "c"} {
		if r := produce(t, nodes[0], v); r.GetErrorCode() != 0 {
			t.Fatalf("produce: %v", r)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := follow(t, ctx, nodes[0], &storagev1.FollowRequest{Topic: "t", FetchOffset: 1, CurrentLeaderEpoch: -1})
	var got []int64
	for len(got) < 2 {
		bases, hw := answerOffsets(t, s)
		if hw != 3 {
			t.Fatalf("answer's high watermark %d, want 3", hw)
		}
		got = append(got, bases...)
	}
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("batches from offset 1: %v, want [1 2]", got)
	}
	// Later commits arrive on the same stream.
	for i, v := range []string{"d", "e"} {
		if r := produce(t, nodes[0], v); r.GetErrorCode() != 0 {
			t.Fatalf("produce: %v", r)
		}
		bases, _ := answerOffsets(t, s)
		if len(bases) != 1 || bases[0] != int64(3+i) {
			t.Fatalf("answer after the commit of offset %d: %v", 3+i, bases)
		}
	}

	one := follow(t, ctx, nodes[0], &storagev1.FollowRequest{Topic: "t", FetchOffset: 0, MaxRecords: 1, CurrentLeaderEpoch: -1})
	for want := int64(0); want < 5; want++ {
		if bases, _ := answerOffsets(t, one); len(bases) != 1 || bases[0] != want {
			t.Fatalf("max_records 1: answer %v, want [%d]", bases, want)
		}
	}
	cancel()
	// The streams' registrations with the partition go with them.
	p, err := nodes[0].mgr.Get(partition.TP{Topic: "t", Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for hw, _ := p.Wakers(); hw != 0; hw, _ = p.Wakers() {
		if time.Now().After(deadline) {
			t.Fatalf("%d high-watermark registrations left after the streams ended", hw)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A Follow stream ends with NOT_LEADER_OR_FOLLOWER soon after its node
// stops leading the partition, and when the node drains.
func TestFollowEndsWhenTheLeaderMoves(t *testing.T) {
	fc, nodes := startNodes(t)
	// Only the partition's change can wake the stream in time.
	nodes[0].api.SetFollowRecheck(time.Hour)
	if r := produce(t, nodes[0], "a"); r.GetErrorCode() != 0 {
		t.Fatalf("produce: %v", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := follow(t, ctx, nodes[0], &storagev1.FollowRequest{Topic: "t", FetchOffset: 1, CurrentLeaderEpoch: 0})
	time.Sleep(100 * time.Millisecond) // parked, waiting for a commit
	fc.apply(t, metadata.PartitionRecord(&controllerv1.PartitionRecord{Topic: "t", TopicId: "tid1", Partition: 0, Replicas: []int32{1, 2, 3},
		Isr: []int32{1, 2, 3}, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1}))
	if c := streamEnd(t, s); c != errs.NotLeaderOrFollower {
		t.Fatalf("stream on the old leader ended with %v, want NOT_LEADER_OR_FOLLOWER", c)
	}
	// The new leader serves it; its drain ends it.
	s = follow(t, ctx, nodes[1], &storagev1.FollowRequest{Topic: "t", FetchOffset: 0, CurrentLeaderEpoch: 1})
	if bases, _ := answerOffsets(t, s); len(bases) != 1 || bases[0] != 0 {
		t.Fatalf("new leader's first answer: %v", bases)
	}
	nodes[1].api.Drain()
	if c := streamEnd(t, s); c != errs.NotLeaderOrFollower {
		t.Fatalf("stream on a draining node ended with %v, want NOT_LEADER_OR_FOLLOWER", c)
	}
}

// Requests a Follow stream cannot serve end it at once with their error,
// and leave the node serving.
func TestFollowRefusesWhatItCannotServe(t *testing.T) {
	_, nodes := startNodes(t)
	if r := produce(t, nodes[0], "a"); r.GetErrorCode() != 0 {
		t.Fatalf("produce: %v", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		n    int
		req  *storagev1.FollowRequest
		want *errs.Error
	}{
		{"negative offset", 0, &storagev1.FollowRequest{Topic: "t", FetchOffset: -1, CurrentLeaderEpoch: -1}, errs.InvalidRequest},
		{"negative max_bytes", 0, &storagev1.FollowRequest{Topic: "t", MaxBytes: -1, CurrentLeaderEpoch: -1}, errs.InvalidRequest},
		{"negative max_records", 0, &storagev1.FollowRequest{Topic: "t", MaxRecords: -1, CurrentLeaderEpoch: -1}, errs.InvalidRequest},
		{"offset past the log end", 0, &storagev1.FollowRequest{Topic: "t", FetchOffset: 5, CurrentLeaderEpoch: -1}, errs.OffsetOutOfRange},
		{"unknown topic", 0, &storagev1.FollowRequest{Topic: "nope", CurrentLeaderEpoch: -1}, errs.UnknownTopicOrPartition},
		{"a follower", 1, &storagev1.FollowRequest{Topic: "t", CurrentLeaderEpoch: -1}, errs.NotLeaderOrFollower},
		{"a stale epoch", 0, &storagev1.FollowRequest{Topic: "t", CurrentLeaderEpoch: 7}, errs.UnknownLeaderEpoch},
	} {
		if c := streamEnd(t, follow(t, ctx, nodes[tc.n], tc.req)); c != tc.want {
			t.Errorf("%s: ended with %v, want %v", tc.name, c, tc.want)
		}
	}
	// The node still answers, from the first record.
	s := follow(t, ctx, nodes[0], &storagev1.FollowRequest{Topic: "t", CurrentLeaderEpoch: -1})
	if bases, _ := answerOffsets(t, s); len(bases) != 1 || bases[0] != 0 {
		t.Fatalf("after the refusals: %v", bases)
	}
}

// followSink is a Follow stream served in the test's process: the answers
// go to sent.
type followSink struct {
	grpc.ServerStream
	ctx  context.Context
	sent chan *storagev1.FollowResponse
}

func (f *followSink) Context() context.Context { return f.ctx }
func (f *followSink) Send(r *storagev1.FollowResponse) error {
	select {
	case f.sent <- r:
		return nil
	case <-f.ctx.Done():
		return f.ctx.Err()
	}
}

// A Follow stream checks its reader's ACLs again as it goes, as each fetch
// of a fetching reader is checked: taking the Read permission away ends
// the stream with TOPIC_AUTHORIZATION_FAILED.
func TestFollowEndsWhenReadIsRevoked(t *testing.T) {
	_, nodes := startNodes(t)
	if r := produce(t, nodes[0], "a"); r.GetErrorCode() != 0 {
		t.Fatalf("produce: %v", r)
	}
	grant := metadata.AclRecord(acl.Binding{Principal: "User:alice", Resource: acl.Topic, Name: "t", Pattern: acl.Literal,
		Operation: acl.Read, Permission: acl.Allow})
	img := metadata.New("c")
	if err := img.Apply(&controllerv1.MetadataDelta{Version: 1, Records: []*controllerv1.MetadataRecord{grant}}); err != nil {
		t.Fatal(err)
	}
	var current atomic.Pointer[metadata.Image]
	current.Store(img)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// Set before any call of the test reads it; the node's own replication
	// does not.
	nodes[0].api.Authorize(peerauth.NewAuthorizer(current.Load, nil, log))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	alice := peerauth.Peer{Role: "client", ID: "alice", Principal: "User:alice"}
	sink := &followSink{ctx: peerauth.WithCaller(ctx, peerauth.CallerOf(alice, "")), sent: make(chan *storagev1.FollowResponse, 8)}
	done := make(chan error, 1)
	go func() {
		done <- nodes[0].api.Follow(&storagev1.FollowRequest{Topic: "t", CurrentLeaderEpoch: -1}, sink)
	}()
	select {
	case r := <-sink.sent:
		if len(r.GetPartition().GetRecords()) == 0 {
			t.Fatal("an empty first answer")
		}
	case err := <-done:
		t.Fatalf("the stream ended before its first answer: %v", err)
	case <-ctx.Done():
		t.Fatal("no answer in 20 s")
	}

	revoked := metadata.New("c")
	current.Store(revoked)
	start := time.Now()
	select {
	case err := <-done:
		if c := errs.Of(rpcerr.FromStatus(err)); c != errs.TopicAuthorizationFailed {
			t.Errorf("the stream ended with %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
		t.Logf("the stream ended %v after the revocation", time.Since(start).Round(time.Millisecond))
	case <-ctx.Done():
		t.Fatal("the stream outlived its reader's Read permission by 20 s")
	}
}
