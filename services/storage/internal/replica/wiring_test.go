package replica_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	controllerv1 "skein/gen/skein/controller/v1"
	storagev1 "skein/gen/skein/storage/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/checkpoint"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/libs/record"
	"skein/services/storage/internal/fetcher"
	"skein/services/storage/internal/isrsender"
	"skein/services/storage/internal/partition"
	"skein/services/storage/internal/replica"
	"skein/services/storage/internal/server"
)

// fakeController holds the metadata, commits ISR changes and pushes every
// version to the nodes, as WatchMetadata would.
type fakeController struct {
	mu    sync.Mutex
	im    *metadata.Image
	nodes []*node
}

func (fc *fakeController) apply(t *testing.T, recs ...*controllerv1.MetadataRecord) {
	fc.mu.Lock()
	err := fc.im.Apply(&controllerv1.MetadataDelta{Version: uint64(fc.im.Version()) + 1, Records: recs})
	im := fc.im.Clone()
	fc.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range fc.nodes {
		n.mgr.OnImage(im.Clone())
	}
}

func (fc *fakeController) partition(topic string, p int32) *controllerv1.PartitionRecord {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	pr, _ := fc.im.Partition(topic, p)
	return pr
}

type proposer struct {
	t  *testing.T
	fc *fakeController
}

// alter is the fake controller's AlterPartition, sent through the node's
// real isrsender.
func (pp proposer) alter(_ context.Context, changes []partition.ISRChange) ([]partition.State, []error, error) {
	states, errors := make([]partition.State, len(changes)), make([]error, len(changes))
	for i, ch := range changes {
		cur := pp.fc.partition(ch.Topic, ch.Partition)
		le, pe := ch.LeaderEpoch, ch.PartitionEpoch
		if cur.GetLeaderEpoch() != le || cur.GetPartitionEpoch() != pe {
			errors[i] = errs.Errorf(errs.InvalidUpdateVersion, "stale")
			continue
		}
		next := &controllerv1.PartitionRecord{Topic: ch.Topic, TopicId: cur.GetTopicId(), Partition: ch.Partition, Replicas: cur.GetReplicas(), Isr: ch.ISR,
			Leader: cur.GetLeader(), LeaderEpoch: le, PartitionEpoch: pe + 1}
		pp.fc.apply(pp.t, metadata.PartitionRecord(next))
		states[i] = partition.State{Leader: next.Leader, LeaderEpoch: le, PartitionEpoch: pe + 1, Replicas: next.Replicas, ISR: ch.ISR}
	}
	return states, errors, nil
}

type node struct {
	id   int32
	addr string
	dir  string // the node's data directory
	mgr  *replica.Manager
	srv  *grpc.Server
	api  *server.Server // the StorageService srv serves
	fet  *fetcher.Manager
	cc   *grpc.ClientConn
}

func startNodes(t *testing.T) (*fakeController, []*node) {
	return startNodesWaiting(t, 200*time.Millisecond)
}

// startNodesWaiting starts three nodes whose followers let the leader hold
// an idle fetch round for fetchWait.
func startNodesWaiting(t *testing.T, fetchWait time.Duration) (*fakeController, []*node) {
	return startNodesWith(t, nodeOptions{fetchWait: fetchWait})
}

type nodeOptions struct {
	fetchWait time.Duration
	// store gives each node its checkpoint store (default: in memory).
	store func(id int32) checkpoint.Store
	// checkpointEvery also sets how often producer state is snapshotted
	// (default: the manager's).
	checkpointEvery time.Duration
	// producerIDExpiration: the manager's default when zero.
	producerIDExpiration time.Duration
}

func startNodesWith(t *testing.T, o nodeOptions) (*fakeController, []*node) {
	fetchWait := o.fetchWait
	if o.store == nil {
		o.store = func(int32) checkpoint.Store { return checkpoint.NewMemory() }
	}
	fc := &fakeController{im: metadata.New("test")}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var nodes []*node
	var brokers []*controllerv1.MetadataRecord
	conns := map[int32]*grpc.ClientConn{}
	var connsMu sync.Mutex
	for id := int32(1); id <= 3; id++ {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		n := &node{id: id, addr: lis.Addr().String(), dir: t.TempDir()}
		n.fet = fetcher.New(fetcher.Config{Self: id, BrokerEpoch: func() int64 { return 1 }, MaxWait: fetchWait}, func(b int32) (*grpc.ClientConn, bool) {
			connsMu.Lock()
			defer connsMu.Unlock()
			cc, ok := conns[b]
			return cc, ok
		}, log)
		sender := isrsender.New(proposer{t, fc}.alter)
		n.mgr = replica.New(replica.Config{Self: id, DataDir: n.dir, ReplicaLagMax: 2 * time.Second, Tick: 50 * time.Millisecond, RetentionEvery: 50 * time.Millisecond,
			CheckpointEvery: o.checkpointEvery, ProducerSnapshotEvery: o.checkpointEvery, ProducerIDExpiration: o.producerIDExpiration}, log, sender, n.fet, o.store(id))
		n.srv = grpc.NewServer()
		n.api = server.New(n.mgr, log, nil)
		server.Register(n.srv, n.api)
		go n.srv.Serve(lis)
		n.cc, _ = grpc.NewClient(n.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		connsMu.Lock()
		conns[id] = n.cc
		connsMu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		go n.mgr.Run(ctx)
		go sender.Run(ctx)
		t.Cleanup(func() {
			cancel()
			n.fet.Close()
			n.srv.Stop()
			n.cc.Close()
			n.mgr.Close()
		})
		nodes = append(nodes, n)
		brokers = append(brokers, metadata.BrokerRecord(&controllerv1.BrokerRecord{Id: id, GrpcAddr: n.addr, BrokerEpoch: 1}))
	}
	fc.nodes = nodes
	fc.apply(t, brokers...)
	fc.apply(t,
		metadata.TopicRecord(&controllerv1.TopicRecord{TopicId: "tid1", Name: "t", Configs: map[string]string{"min.insync.replicas": "2"}}),
		metadata.PartitionRecord(&controllerv1.PartitionRecord{Topic: "t", TopicId: "tid1", Partition: 0, Replicas: []int32{1, 2, 3}, Isr: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 0}),
	)
	return fc, nodes
}

func oneRecord(t *testing.T, v string) []byte {
	b := record.NewBuilder(record.DefaultBatchOptions())
	b.Append(time.Now().UnixMilli(), []byte("k"), []byte(v))
	batch, _, err := b.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	return batch
}

func produce(t *testing.T, n *node, v string) *storagev1.PartitionProduceResult {
	t.Helper()
	return produceTo(t, n, "t", v)
}

// produceTo writes one record to partition 0 of topic with acks=all and a
// 5 s timeout.
func produceTo(t *testing.T, n *node, topic, v string) *storagev1.PartitionProduceResult {
	t.Helper()
	resp, err := storagev1.NewStorageServiceClient(n.cc).Produce(context.Background(), &storagev1.ProduceRequest{
		Acks: -1, TimeoutMs: 5000, Partitions: []*storagev1.PartitionProduce{{Topic: topic, Partition: 0, CurrentLeaderEpoch: -1, Records: oneRecord(t, v)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetPartitions()[0]
}

func leo(t *testing.T, n *node) int64 {
	p, err := n.mgr.Get(partition.TP{Topic: "t", Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	return int64(p.Snapshot().LEO)
}

func TestReplicationOverGRPC(t *testing.T) {
	fc, nodes := startNodes(t)
	for i := 0; i < 20; i++ {
		r := produce(t, nodes[0], "v")
		if r.GetErrorCode() != 0 || r.GetBaseOffset() != int64(i) {
			t.Fatalf("produce %d: %v", i, r)
		}
	}
	// acks=all answered: both followers hold everything.
	for _, n := range nodes[1:] {
		if got := leo(t, n); got < 20 {
			t.Errorf("follower %d LEO %d after acks=all", n.id, got)
		}
	}

	// A consumer fetch at the end long-polls and wakes on the next commit.
	client := storagev1.NewStorageServiceClient(nodes[0].cc)
	type out struct {
		resp *storagev1.FetchResponse
		took time.Duration
	}
	got := make(chan out, 1)
	go func() {
		start := time.Now()
		resp, _ := client.Fetch(context.Background(), &storagev1.FetchRequest{MaxWaitMs: 5000, MaxBytes: 1 << 20,
			Partitions: []*storagev1.PartitionFetch{{Topic: "t", Partition: 0, FetchOffset: 20, CurrentLeaderEpoch: -1}}})
		got <- out{resp, time.Since(start)}
	}()
	time.Sleep(100 * time.Millisecond)
	produce(t, nodes[0], "late")
	o := <-got
	if len(o.resp.GetPartitions()[0].GetRecords()) == 0 || o.took > 3*time.Second {
		t.Fatalf("long poll: %v after %v", o.resp, o.took)
	}

	// Leadership moves to 2; 1 follows it and the new writes reach everyone.
	cur := fc.partition("t", 0)
	fc.apply(t, metadata.PartitionRecord(&controllerv1.PartitionRecord{Topic: "t", TopicId: "tid1", Partition: 0, Replicas: []int32{1, 2, 3}, Isr: cur.GetIsr(),
		Leader: 2, LeaderEpoch: cur.GetLeaderEpoch() + 1, PartitionEpoch: cur.GetPartitionEpoch() + 1}))
	if r := produce(t, nodes[0], "to-old-leader"); r.GetErrorCode() != int32ToCode(errs.NotLeaderOrFollower) {
		t.Fatalf("produce to old leader: %v", r)
	}
	if r := produce(t, nodes[1], "new"); r.GetErrorCode() != 0 || r.GetBaseOffset() != 21 {
		t.Fatalf("produce to new leader: %v", r)
	}
	deadline := time.Now().Add(5 * time.Second)
	for leo(t, nodes[0]) != 22 || leo(t, nodes[2]) != 22 {
		if time.Now().After(deadline) {
			t.Fatalf("LEOs %d %d %d", leo(t, nodes[0]), leo(t, nodes[1]), leo(t, nodes[2]))
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A follower cut off (its server stopped) leaves the ISR after the lag.
	nodes[2].fet.Close()
	deadline = time.Now().Add(10 * time.Second)
	for {
		if isr := fc.partition("t", 0).GetIsr(); slices.Equal(isr, []int32{1, 2}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ISR still %v", fc.partition("t", 0).GetIsr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// On a loaded machine a follower may also drop out and rejoin on its own
	// in between; the net effect is one shrink.
	if st := nodes[1].mgr.Stats(); st.ISRShrinks < 1 || st.ISRShrinks-st.ISRExpands != 1 || st.UnderReplicated != 1 || st.Leading != 1 {
		t.Errorf("leader stats after the shrink: %+v", st)
	}
	if r := produce(t, nodes[1], "after-shrink"); r.GetErrorCode() != 0 {
		t.Fatalf("acks=all with ISR [1 2] and min.insync=2: %v", r)
	}
}

func int32ToCode(e *errs.Error) skeinv1.ErrorCode { return skeinv1.ErrorCode(e.Code) }

// The cleaner (retention and compaction) runs beside the ISR checks: while
// it is stuck in a long compaction of the leader's log, a follower that
// stops fetching still leaves the ISR after the lag.
func TestLongCompactionDoesNotDelayISRChecks(t *testing.T) {
	fc, nodes := startNodes(t)
	stuck := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	replica.SetCleanup(nodes[0].mgr, func(string) {
		once.Do(func() { close(stuck) })
		<-release
	})
	t.Cleanup(func() { close(release) })
	select {
	case <-stuck:
	case <-time.After(10 * time.Second):
		t.Fatal("the cleaner never ran")
	}
	nodes[2].fet.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(fc.partition("t", 0).GetIsr(), []int32{1, 2}) {
		if time.Now().After(deadline) {
			t.Fatalf("ISR still %v 10 s after a follower stopped, while the cleaner is busy", fc.partition("t", 0).GetIsr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// addTopicU creates topic u: one partition on nodes 1, 2 and 3, led by 1.
func addTopicU(t *testing.T, fc *fakeController) {
	fc.apply(t,
		metadata.TopicRecord(&controllerv1.TopicRecord{TopicId: "tid2", Name: "u", Configs: map[string]string{"min.insync.replicas": "2"}}),
		metadata.PartitionRecord(&controllerv1.PartitionRecord{Topic: "u", TopicId: "tid2", Partition: 0, Replicas: []int32{1, 2, 3}, Isr: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 0}),
	)
}

// A partition a follower starts to follow joins its fetch session at once,
// not when the leader answers the round in flight: with idle rounds held
// for a minute, an acks=all write to a new topic whose followers already
// fetch from its leader is still answered within its 5 s timeout.
func TestNewPartitionDoesNotWaitOutTheRoundInFlight(t *testing.T) {
	fc, nodes := startNodesWaiting(t, time.Minute)
	if r := produce(t, nodes[0], "v"); r.GetErrorCode() != 0 {
		t.Fatalf("produce to t-0: %v", r)
	}
	// Both followers are now in an idle round on node 1 that asks for t-0 only.
	time.Sleep(200 * time.Millisecond)
	addTopicU(t, fc)
	start := time.Now()
	r := produceTo(t, nodes[0], "u", "first")
	if r.GetErrorCode() != 0 || r.GetBaseOffset() != 0 {
		t.Fatalf("acks=all to a new partition after %v: %v (the followers did not fetch it until their round in flight ended)", time.Since(start).Round(time.Millisecond), r)
	}
	t.Logf("acks=all to the new partition answered after %v", time.Since(start).Round(time.Millisecond))
	for _, n := range nodes[1:] {
		p, err := n.mgr.Get(partition.TP{Topic: "u", Partition: 0})
		if err != nil {
			t.Fatal(err)
		}
		if leo := p.Snapshot().LEO; leo != 1 {
			t.Errorf("follower %d holds u-0 up to %d, want 1", n.id, leo)
		}
	}
}

// The manager forgets a producer id idle for ProducerIDExpiration at its
// retention checks: until then a retry is answered as a duplicate, after
// it the same batch is written again.
func TestIdleProducerIDIsForgotten(t *testing.T) {
	_, nodes := startNodesWith(t, nodeOptions{producerIDExpiration: 300 * time.Millisecond})
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 9, 0, 0
	b := record.NewBuilder(opts)
	b.Append(time.Now().UnixMilli(), []byte("k"), []byte("once"))
	batch, _, err := b.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := storagev1.NewStorageServiceClient(nodes[0].cc)
	send := func() *storagev1.PartitionProduceResult {
		r := produceRaw(t, c, "t", 0, -1, batch)
		if r.GetErrorCode() != skeinv1.ErrorCode_NONE {
			t.Fatalf("produce: %v", r)
		}
		return r
	}
	first := send()
	if again := send(); again.GetBaseOffset() != first.GetBaseOffset() || leo(t, nodes[0]) != 1 {
		t.Fatalf("an immediate retry: offset %d (first %d), LEO %d; want a duplicate", again.GetBaseOffset(), first.GetBaseOffset(), leo(t, nodes[0]))
	}
	deadline := time.Now().Add(10 * time.Second)
	for leo(t, nodes[0]) == 1 {
		if time.Now().After(deadline) {
			t.Fatal("the idle producer id is still known after 10 s")
		}
		time.Sleep(100 * time.Millisecond)
		send()
	}
	if got := leo(t, nodes[0]); got != 2 {
		t.Fatalf("LEO %d after the producer id was forgotten, want the batch written once more", got)
	}
}

// A consumer's long poll over several partitions wakes on a commit to any
// one of them, and a poll that ends leaves no registration behind on the
// partitions that stayed idle.
func TestLongPollWakesOnAnyOfItsPartitions(t *testing.T) {
	fc, nodes := startNodes(t)
	addTopicU(t, fc)
	if r := produce(t, nodes[0], "v"); r.GetErrorCode() != 0 {
		t.Fatalf("produce to t-0: %v", r)
	}
	client := storagev1.NewStorageServiceClient(nodes[0].cc)
	poll := func(wait int32) (*storagev1.FetchResponse, time.Duration) {
		start := time.Now()
		resp, err := client.Fetch(context.Background(), &storagev1.FetchRequest{MaxWaitMs: wait, MaxBytes: 1 << 20, Partitions: []*storagev1.PartitionFetch{
			{Topic: "t", Partition: 0, FetchOffset: 1, CurrentLeaderEpoch: -1},
			{Topic: "u", Partition: 0, FetchOffset: 0, CurrentLeaderEpoch: -1},
		}})
		if err != nil {
			t.Error(err)
		}
		return resp, time.Since(start)
	}
	type out struct {
		resp *storagev1.FetchResponse
		took time.Duration
	}
	got := make(chan out, 1)
	go func() {
		resp, took := poll(10000)
		got <- out{resp, took}
	}()
	time.Sleep(200 * time.Millisecond)
	if r := produceTo(t, nodes[0], "u", "second partition"); r.GetErrorCode() != 0 {
		t.Fatalf("produce to u-0: %v", r)
	}
	o := <-got
	if ps := o.resp.GetPartitions(); len(ps) != 2 || len(ps[0].GetRecords()) != 0 || len(ps[1].GetRecords()) == 0 || o.took > 5*time.Second {
		t.Fatalf("long poll over t-0 and u-0 after a write to u-0: %v after %v", o.resp, o.took)
	}
	// Polls that time out on the idle partitions.
	for range 5 {
		if resp, _ := poll(20); len(resp.GetPartitions()) != 2 {
			t.Fatalf("idle poll: %v", resp)
		}
	}
	for _, tp := range []partition.TP{{Topic: "t", Partition: 0}, {Topic: "u", Partition: 0}} {
		p, err := nodes[0].mgr.Get(tp)
		if err != nil {
			t.Fatal(err)
		}
		// The followers' replication polls may be waiting: one each (a
		// stream the followers replaced when u was added lets go of its
		// registrations as its handler returns, a moment later).
		deadline := time.Now().Add(2 * time.Second)
		for {
			hw, leo := p.Wakers()
			if hw == 0 && leo <= 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%v keeps %d consumer and %d follower registrations: some are of polls that ended", tp, hw, leo)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// A leader's answers on a replication stream carry a partition only when
// it has news for the follower (batches, a moved high watermark): a
// follower of many idle partitions decodes and applies only those that
// moved. A new stream starts with every partition.
func TestReplicationAnswersCarryOnlyWhatMoved(t *testing.T) {
	fc, nodes := startNodes(t)
	addTopicU(t, fc)
	if r := produce(t, nodes[0], "v"); r.GetErrorCode() != 0 {
		t.Fatalf("produce to t-0: %v", r)
	}
	// From here this test is replica 3's follower.
	nodes[2].fet.Close()
	client := storagev1.NewStorageServiceClient(nodes[0].cc)
	open := func() storagev1.StorageService_ReplicateClient {
		s, err := client.Replicate(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ask := func(s storagev1.StorageService_ReplicateClient, wait int32, tOff, uOff int64) map[string]*storagev1.ReplicaFetchResult {
		t.Helper()
		return askReplicate(t, s, &storagev1.ReplicateRequest{ReplicaId: 3, BrokerEpoch: 1, MaxWaitMs: wait, MaxBytes: 1 << 20}, 0, tOff, uOff)
	}
	s := open()
	if got := ask(s, 0, 1, 0); len(got) != 2 || got["t-0"].GetHighWatermark() != 1 || got["u-0"].GetHighWatermark() != 0 {
		t.Fatalf("the first answer of a stream: %v, want t-0 (HW 1) and u-0 (HW 0)", got)
	}
	if got := ask(s, 50, 1, 0); len(got) != 0 {
		t.Fatalf("nothing moved, and the answer carries %v", got)
	}
	resp, err := client.Produce(context.Background(), &storagev1.ProduceRequest{Acks: 1, TimeoutMs: 5000,
		Partitions: []*storagev1.PartitionProduce{{Topic: "u", Partition: 0, CurrentLeaderEpoch: -1, Records: oneRecord(t, "w")}}})
	if err != nil || resp.GetPartitions()[0].GetErrorCode() != 0 {
		t.Fatalf("produce to u-0: %v %v", resp, err)
	}
	got := ask(s, 5000, 1, 0)
	if len(got) != 1 || len(got["u-0"].GetRecords()) == 0 {
		t.Fatalf("after a write to u-0 the answer carries %v, want u-0 alone with its batch", got)
	}
	// Replica 3 now holds u-0's record: the HW moves to 1, and that alone
	// is news.
	deadline := time.Now().Add(5 * time.Second)
	for {
		got = ask(s, 50, 1, 1)
		if u := got["u-0"]; u != nil && u.GetHighWatermark() == 1 {
			break
		}
		if _, ok := got["t-0"]; ok || time.Now().After(deadline) {
			t.Fatalf("waiting for u-0's HW to move: the answer carries %v", got)
		}
	}
	if len(got) != 1 || len(got["u-0"].GetRecords()) != 0 {
		t.Fatalf("u-0's HW moved: the answer carries %v, want u-0 alone without batches", got)
	}
	if got := ask(s, 50, 1, 1); len(got) != 0 {
		t.Fatalf("nothing moved, and the answer carries %v", got)
	}
	// A new stream knows nothing the follower was told.
	s.CloseSend()
	if got := ask(open(), 0, 1, 1); len(got) != 2 {
		t.Fatalf("the first answer of a new stream carries %v, want both partitions", got)
	}
}

// A long poll with min_bytes waits while less is there, answers once
// enough is, and answers at once when the reader's max_records is there
// whatever its min_bytes.
func TestLongPollWaitsForMinBytes(t *testing.T) {
	_, nodes := startNodes(t)
	if r := produce(t, nodes[0], "small"); r.GetErrorCode() != 0 {
		t.Fatalf("produce: %v", r)
	}
	client := storagev1.NewStorageServiceClient(nodes[0].cc)
	poll := func(minBytes, maxRecords int32) (*storagev1.FetchResponse, time.Duration) {
		start := time.Now()
		resp, err := client.Fetch(context.Background(), &storagev1.FetchRequest{MaxWaitMs: 10000, MinBytes: minBytes, MaxBytes: 1 << 20,
			Partitions: []*storagev1.PartitionFetch{{Topic: "t", Partition: 0, FetchOffset: 0, CurrentLeaderEpoch: -1, MaxRecords: maxRecords}}})
		if err != nil {
			t.Error(err)
		}
		return resp, time.Since(start)
	}
	offsets := func(resp *storagev1.FetchResponse) []int64 {
		var out []int64
		for _, p := range resp.GetPartitions() {
			for it := record.NewBatchIter(p.GetRecords()); it.Next(); {
				for o := it.Batch().BaseOffset(); o <= it.Batch().LastOffset(); o++ {
					out = append(out, int64(o))
				}
			}
		}
		return out
	}

	// What is there already meets a small min_bytes: at once.
	if resp, took := poll(10, 0); !slices.Equal(offsets(resp), []int64{0}) || took > 5*time.Second {
		t.Fatalf("min_bytes 10 over one small record: offsets %v after %v", offsets(resp), took)
	}
	// max_records 1 is met by the record there: at once, whatever min_bytes.
	if resp, took := poll(1<<20, 1); !slices.Equal(offsets(resp), []int64{0}) || took > 5*time.Second {
		t.Fatalf("min_bytes 1 MiB with max_records 1: offsets %v after %v", offsets(resp), took)
	}

	// 2,000 bytes are not there yet: the poll waits for them.
	type out struct {
		resp *storagev1.FetchResponse
		took time.Duration
	}
	got := make(chan out, 1)
	go func() {
		resp, took := poll(2000, 0)
		got <- out{resp, took}
	}()
	select {
	case o := <-got:
		t.Fatalf("min_bytes 2000 over one small record answered before any more came: offsets %v after %v", offsets(o.resp), o.took)
	case <-time.After(300 * time.Millisecond):
	}
	if r := produce(t, nodes[0], strings.Repeat("x", 1000)); r.GetErrorCode() != 0 {
		t.Fatalf("produce: %v", r)
	}
	select {
	case o := <-got:
		t.Fatalf("min_bytes 2000 answered with about 1,100 bytes there: offsets %v after %v", offsets(o.resp), o.took)
	case <-time.After(300 * time.Millisecond):
	}
	if r := produce(t, nodes[0], strings.Repeat("y", 1000)); r.GetErrorCode() != 0 {
		t.Fatalf("produce: %v", r)
	}
	o := <-got
	if !slices.Equal(offsets(o.resp), []int64{0, 1, 2}) || o.took > 8*time.Second {
		t.Fatalf("min_bytes 2000 once 2,100 bytes were there: offsets %v after %v, want 0, 1, 2 before max_wait_ms", offsets(o.resp), o.took)
	}
}

// Retention stops at the high watermark: records the followers have not
// fetched stay on the leader, however expired, so the log start never
// passes what a consumer may read.
func TestRetentionStopsAtTheHighWatermark(t *testing.T) {
	fc, nodes := startNodes(t)
	nodes[1].fet.Close()
	nodes[2].fet.Close()
	fc.apply(t,
		metadata.TopicRecord(&controllerv1.TopicRecord{TopicId: "tid3", Name: "r", Configs: map[string]string{"retention.ms": "0", "segment.bytes": "100"}}),
		metadata.PartitionRecord(&controllerv1.PartitionRecord{Topic: "r", TopicId: "tid3", Partition: 0, Replicas: []int32{1, 2, 3}, Isr: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 0}),
	)
	for i := range 5 { // one segment each (segment.bytes 100)
		resp, err := storagev1.NewStorageServiceClient(nodes[0].cc).Produce(context.Background(), &storagev1.ProduceRequest{
			Acks: 1, TimeoutMs: 5000, Partitions: []*storagev1.PartitionProduce{{Topic: "r", Partition: 0, CurrentLeaderEpoch: -1, Records: oneRecord(t, fmt.Sprint("v", i))}},
		})
		if err != nil || resp.GetPartitions()[0].GetErrorCode() != 0 {
			t.Fatalf("produce %d: %v %v", i, resp, err)
		}
	}
	p, err := nodes[0].mgr.Get(partition.TP{Topic: "r", Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	// Several cleaner rounds (every 50 ms), before the followers' lag (2 s)
	// takes them out of the ISR and lets the HW move.
	time.Sleep(500 * time.Millisecond)
	if s := p.Snapshot(); s.LEO != 5 || s.Start > s.HW {
		t.Fatalf("log start %d, HW %d, LEO %d: retention passed the high watermark", s.Start, s.HW, s.LEO)
	}
}

// Retention takes a quiet partition's last segment once all of it has
// expired and every replica holds it: on each replica the log start moves
// to the log end, a read below it is out of range, and the next record
// takes the next offset.
func TestRetentionEmptiesAQuietPartition(t *testing.T) {
	var storesMu sync.Mutex
	stores := map[int32]checkpoint.Store{}
	fc, nodes := startNodesWith(t, nodeOptions{fetchWait: 200 * time.Millisecond, store: func(id int32) checkpoint.Store {
		storesMu.Lock()
		defer storesMu.Unlock()
		stores[id] = checkpoint.NewMemory()
		return stores[id]
	}})
	fc.apply(t,
		metadata.TopicRecord(&controllerv1.TopicRecord{TopicId: "tid4", Name: "q", Configs: map[string]string{"retention.ms": "300"}}),
		metadata.PartitionRecord(&controllerv1.PartitionRecord{Topic: "q", TopicId: "tid4", Partition: 0, Replicas: []int32{1, 2, 3}, Isr: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 0}),
	)
	for i := range 3 {
		if r := produceTo(t, nodes[0], "q", fmt.Sprint("v", i)); r.GetErrorCode() != 0 || r.GetBaseOffset() != int64(i) {
			t.Fatalf("produce %d: %v", i, r)
		}
	}
	tp := partition.TP{Topic: "q", Partition: 0}
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range nodes {
		p, err := n.mgr.Get(tp)
		if err != nil {
			t.Fatal(err)
		}
		for s := p.Snapshot(); s.Start != 3 || s.LEO != 3; s = p.Snapshot() {
			if time.Now().After(deadline) {
				t.Fatalf("node %d: log start %d, LEO %d; want both 3 once the records expired", n.id, s.Start, s.LEO)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if r := produceTo(t, nodes[0], "q", "v3"); r.GetErrorCode() != 0 || r.GetBaseOffset() != 3 {
		t.Fatalf("produce after retention: %v, want offset 3", r)
	}
	// Each replica saved its producers at or above the new log start, so
	// a restart has a snapshot to restore them from (the periodic one is
	// 30 s away).
	for _, n := range nodes {
		storesMu.Lock()
		st := stores[n.id]
		storesMu.Unlock()
		keys, err := st.Keys("producers/")
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, k := range keys {
			raw, ok, err := st.Get(k)
			var snap partition.ProducerSnapshot
			if err != nil || !ok || json.Unmarshal(raw, &snap) != nil {
				t.Fatalf("node %d: snapshot %s: %v %v", n.id, k, ok, err)
			}
			found = found || (strings.Contains(k, "q-0") && snap.Next >= 3)
		}
		if !found {
			t.Errorf("node %d: no producer snapshot at or above the log start 3 among %v", n.id, keys)
		}
	}
}

// A replication answer stops at the follower's max_bytes: the first
// partition with records gets its first whole batch whatever the bound,
// and the partitions after it get none once the bound is reached (rather
// than a batch each, which let an answer over many partitions outgrow the
// transport's limit and stop replication from the leader); they come in
// the next answer.
func TestReplicationAnswerStopsAtItsBound(t *testing.T) {
	fc, nodes := startNodes(t)
	addTopicU(t, fc)
	if r := produce(t, nodes[0], "v"); r.GetErrorCode() != 0 {
		t.Fatalf("produce to t-0: %v", r)
	}
	client := storagev1.NewStorageServiceClient(nodes[0].cc)
	resp, err := client.Produce(context.Background(), &storagev1.ProduceRequest{Acks: 1, TimeoutMs: 5000,
		Partitions: []*storagev1.PartitionProduce{{Topic: "u", Partition: 0, CurrentLeaderEpoch: -1, Records: oneRecord(t, "w")}}})
	if err != nil || resp.GetPartitions()[0].GetErrorCode() != 0 {
		t.Fatalf("produce to u-0: %v %v", resp, err)
	}
	nodes[2].fet.Close() // from here this test is replica 3's follower
	s, err := client.Replicate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ask := func(tOff, uOff int64) map[string]*storagev1.ReplicaFetchResult {
		t.Helper()
		return askReplicate(t, s, &storagev1.ReplicateRequest{ReplicaId: 3, BrokerEpoch: 1, MaxBytes: 1}, -1, tOff, uOff)
	}
	got := ask(0, 0)
	if len(got["t-0"].GetRecords()) == 0 || len(got["u-0"].GetRecords()) != 0 {
		t.Fatalf("with max_bytes 1: t-0 %d bytes, u-0 %d bytes; want t-0's batch alone", len(got["t-0"].GetRecords()), len(got["u-0"].GetRecords()))
	}
	if got = ask(1, 0); len(got["u-0"].GetRecords()) == 0 {
		t.Fatalf("the next answer carries %v, want u-0's batch", got)
	}
}

// askReplicate sends req on s for t-0 (its last fetched epoch tEpoch) and
// u-0 at the offsets given and answers the results by partition.
func askReplicate(t *testing.T, s storagev1.StorageService_ReplicateClient, req *storagev1.ReplicateRequest, tEpoch int32, tOff, uOff int64) map[string]*storagev1.ReplicaFetchResult {
	t.Helper()
	req.Partitions = []*storagev1.ReplicaFetchState{
		{Topic: "t", Partition: 0, FetchOffset: tOff, LastFetchedEpoch: tEpoch, CurrentLeaderEpoch: 0},
		{Topic: "u", Partition: 0, FetchOffset: uOff, LastFetchedEpoch: -1, CurrentLeaderEpoch: 0},
	}
	if err := s.Send(req); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*storagev1.ReplicaFetchResult{}
	for _, r := range resp.GetPartitions() {
		out[fmt.Sprintf("%s-%d", r.GetTopic(), r.GetPartition())] = r
	}
	return out
}

// A replication answer gives each partition at most the follower's
// partition_max_bytes (its first batch always whole), so a partition far
// behind leaves room in the answer for the others.
func TestReplicationAnswerBoundsEachPartition(t *testing.T) {
	fc, nodes := startNodes(t)
	addTopicU(t, fc)
	for _, v := range []string{"v1", "v2"} {
		if r := produce(t, nodes[0], v); r.GetErrorCode() != 0 {
			t.Fatalf("produce to t-0: %v", r)
		}
	}
	if r := produceTo(t, nodes[0], "u", "w"); r.GetErrorCode() != 0 {
		t.Fatalf("produce to u-0: %v", r)
	}
	nodes[2].fet.Close() // from here this test is replica 3's follower
	s, err := storagev1.NewStorageServiceClient(nodes[0].cc).Replicate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := askReplicate(t, s, &storagev1.ReplicateRequest{ReplicaId: 3, BrokerEpoch: 1, MaxBytes: 1 << 20, PartitionMaxBytes: 1}, -1, 0, 0)
	tb, ub := got["t-0"].GetRecords(), got["u-0"].GetRecords()
	if len(tb) < record.HeaderSize || record.Batch(tb).Size() != len(tb) || len(ub) == 0 {
		t.Fatalf("with partition_max_bytes 1: t-0 %d bytes, u-0 %d bytes; want t-0's first batch alone and u-0's batch", len(tb), len(ub))
	}
	if got = askReplicate(t, s, &storagev1.ReplicateRequest{ReplicaId: 3, BrokerEpoch: 1, MaxBytes: 1 << 20}, -1, 0, 1); record.Batch(got["t-0"].GetRecords()).Size() == len(got["t-0"].GetRecords()) {
		t.Fatalf("without partition_max_bytes t-0 gets %d bytes, want both its batches", len(got["t-0"].GetRecords()))
	}
}

// Records deleted before an offset leave the disk of every replica: the
// leader moves its log start, the followers take it from their fetches,
// and each node's cleaner deletes the segments wholly below it, whatever
// the topic's cleanup.policy is by then.
func TestDeletedRecordsLeaveEveryReplicasDisk(t *testing.T) {
	fc, nodes := startNodes(t)
	topic := &controllerv1.TopicRecord{TopicId: "tid4", Name: "d", Configs: map[string]string{"segment.bytes": "100"}}
	fc.apply(t,
		metadata.TopicRecord(topic),
		metadata.PartitionRecord(&controllerv1.PartitionRecord{Topic: "d", TopicId: "tid4", Partition: 0, Replicas: []int32{1, 2, 3}, Isr: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 0}),
	)
	client := storagev1.NewStorageServiceClient(nodes[0].cc)
	for i := range 5 { // one segment each (segment.bytes 100)
		resp, err := client.Produce(context.Background(), &storagev1.ProduceRequest{
			Acks: -1, TimeoutMs: 5000, Partitions: []*storagev1.PartitionProduce{{Topic: "d", Partition: 0, CurrentLeaderEpoch: -1, Records: oneRecord(t, fmt.Sprint("v", i))}},
		})
		if err != nil || resp.GetPartitions()[0].GetErrorCode() != 0 {
			t.Fatalf("produce %d: %v %v", i, resp, err)
		}
	}
	resp, err := client.DeleteRecords(context.Background(), &storagev1.DeleteRecordsRequest{TimeoutMs: 10_000,
		Partitions: []*storagev1.DeleteRecordsPartition{{Topic: "d", Partition: 0, Offset: 3, CurrentLeaderEpoch: -1}}})
	if err != nil || resp.GetPartitions()[0].GetErrorCode() != 0 || resp.GetPartitions()[0].GetLowWatermark() != 3 {
		t.Fatalf("DeleteRecords before 3: %v %v", resp, err)
	}
	// The topic is compacted from now on: its segments below the start go
	// all the same.
	topic.Configs = map[string]string{"segment.bytes": "100", "cleanup.policy": "compact"}
	fc.apply(t, metadata.TopicRecord(topic))
	segmentBases := func(n *node) []string {
		files, _ := filepath.Glob(filepath.Join(n.dir, "logs", "d-0-tid4", "*.log"))
		var out []string
		for _, f := range files {
			out = append(out, strings.TrimLeft(strings.TrimSuffix(filepath.Base(f), ".log"), "0"))
		}
		return out
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range nodes {
		for {
			bases := segmentBases(n)
			if len(bases) > 0 && !slices.ContainsFunc(bases, func(b string) bool { return b == "" || b == "1" || b == "2" }) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d still holds segments %v below the log start 3", n.id, bases)
			}
			time.Sleep(20 * time.Millisecond)
		}
		p, err := n.mgr.Get(partition.TP{Topic: "d", Partition: 0})
		if err != nil {
			t.Fatal(err)
		}
		if s := p.Snapshot(); s.Start != 3 || s.LEO != 5 {
			t.Errorf("node %d: log start %d, LEO %d; want 3 and 5", n.id, s.Start, s.LEO)
		}
	}
}

// A topic name of the longest length a topic may have (249 characters) does
// not fit in a directory name with its partition and id after it: the
// replicas still open, take writes and replicate them.
func TestLongestTopicNameFitsADirectory(t *testing.T) {
	fc, nodes := startNodes(t)
	long := strings.Repeat("e", 249)
	fc.apply(t,
		metadata.TopicRecord(&controllerv1.TopicRecord{TopicId: "b8a1a4c2-5f1e-4a7e-9d43-0c6f3a3e2b11", Name: long, Configs: map[string]string{"min.insync.replicas": "2"}}),
		metadata.PartitionRecord(&controllerv1.PartitionRecord{Topic: long, TopicId: "b8a1a4c2-5f1e-4a7e-9d43-0c6f3a3e2b11", Partition: 0, Replicas: []int32{1, 2, 3}, Isr: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 0}),
	)
	var r *storagev1.PartitionProduceResult
	deadline := time.Now().Add(5 * time.Second)
	for {
		r = produceTo(t, nodes[0], long, "v")
		if r.GetErrorCode() == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r.GetErrorCode() != 0 || r.GetBaseOffset() != 0 {
		t.Fatalf("produce to a topic with a 249-character name: %v", r)
	}
	for _, n := range nodes {
		p, err := n.mgr.Get(partition.TP{Topic: long, Partition: 0})
		if err != nil {
			t.Fatalf("node %d: %v", n.id, err)
		}
		if leo := p.Snapshot().LEO; leo != 1 {
			t.Errorf("node %d: LEO %d after acks=all, want 1", n.id, leo)
		}
		dirs, err := os.ReadDir(filepath.Join(n.dir, "logs"))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dirs {
			if len(d.Name()) > 255 {
				t.Errorf("node %d: directory name of %d bytes", n.id, len(d.Name()))
			}
		}
	}
	// The short names of existing directories are as they were.
	if got := replica.DirName(partition.TP{Topic: "t", Partition: 0}, "tid1"); got != "t-0-tid1" {
		t.Errorf("directory of t-0: %q", got)
	}
}

// The cleaner compacts a committed transaction's records as any others
// and removes an aborted one's, on every replica: an aborted write never
// takes the place of the committed value it came after.
func TestCompactionTellsCommittedFromAborted(t *testing.T) {
	fc, nodes := startNodes(t)
	fc.apply(t,
		metadata.TopicRecord(&controllerv1.TopicRecord{TopicId: "tid9", Name: "c", Configs: map[string]string{
			"segment.bytes": "100", "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0"}}),
		metadata.PartitionRecord(&controllerv1.PartitionRecord{Topic: "c", TopicId: "tid9", Partition: 0, Replicas: []int32{1, 2, 3}, Isr: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 0}),
	)
	client := storagev1.NewStorageServiceClient(nodes[0].cc)
	batch := func(pid int64, key, value string) []byte {
		opts := record.DefaultBatchOptions()
		if pid >= 0 {
			opts.Transactional, opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = true, pid, 0, 0
		}
		b := record.NewBuilder(opts)
		b.Append(time.Now().UnixMilli(), []byte(key), []byte(value))
		out, _, err := b.Build(nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	produce := func(b []byte) {
		t.Helper()
		txnID := ""
		if record.Batch(b).IsTransactional() {
			txnID = fmt.Sprint("tx-", record.Batch(b).ProducerID())
		}
		resp, err := client.Produce(context.Background(), &storagev1.ProduceRequest{TransactionalId: txnID,
			Acks: -1, TimeoutMs: 5000, Partitions: []*storagev1.PartitionProduce{{Topic: "c", Partition: 0, CurrentLeaderEpoch: -1, Records: b}}})
		if err != nil || resp.GetPartitions()[0].GetErrorCode() != 0 {
			t.Fatalf("produce: %v %v", resp, err)
		}
	}
	marker := func(pid int64, commit bool) {
		t.Helper()
		resp, err := client.WriteTxnMarkers(context.Background(), &storagev1.WriteTxnMarkersRequest{Markers: []*storagev1.TxnMarker{{
			ProducerId: pid, ProducerEpoch: 1, Committed: commit, CoordinatorEpoch: 1, Partitions: []*storagev1.TopicPartition{{Topic: "c", Partition: 0}}}}})
		if err != nil || resp.GetMarkers()[0].GetPartitions()[0].GetErrorCode() != 0 {
			t.Fatalf("marker: %v %v", resp, err)
		}
	}
	produce(batch(-1, "k", "v1")) // 0
	produce(batch(5, "k", "v2"))  // 1, committed
	marker(5, true)               // 2
	produce(batch(6, "k", "bad")) // 3, aborted
	marker(6, false)              // 4
	produce(batch(-1, "o", "o1")) // 5
	produce(batch(-1, "o", "o2")) // 6
	produce(batch(-1, "p", "p1")) // 7, in the active segment
	// Each replica compacts its own log; each is made the leader in turn to
	// read what its cleaner left.
	deadline := time.Now().Add(20 * time.Second)
	for i, n := range nodes {
		if i > 0 {
			fc.apply(t, metadata.PartitionRecord(&controllerv1.PartitionRecord{Topic: "c", TopicId: "tid9", Partition: 0,
				Replicas: []int32{1, 2, 3}, Isr: []int32{1, 2, 3}, Leader: n.id, LeaderEpoch: int32(i)}))
		}
		for {
			got, err := readAll(n, "c")
			if err == nil && got[1] == "v2" && got[6] == "o2" && len(got) == 3 {
				break // k=v2, o=o2 and p=p1; the markers are not records
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d holds %v (%v) after compaction, want k=v2 at 1, o=o2 at 6 and p=p1 at 7 alone", n.id, got, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// readAll reads, as leader, the data records (no control records) of
// topic's partition 0 on n: offset -> value.
func readAll(n *node, topic string) (map[int64]string, error) {
	p, err := n.mgr.Get(partition.TP{Topic: topic, Partition: 0})
	if err != nil {
		return nil, err
	}
	out := map[int64]string{}
	for off := p.Snapshot().Start; off < p.Snapshot().HW; {
		res, err := p.Fetch(off, 1<<20, false, -1)
		if err != nil {
			return nil, err
		}
		it := record.NewBatchIter(res.Records)
		var ri record.RecordIter
		for it.Next() {
			b := it.Batch()
			off = b.LastOffset() + 1
			if b.IsControl() {
				continue
			}
			if err := ri.Reset(b); err != nil {
				return nil, err
			}
			for ri.Next() {
				out[int64(ri.Offset())] = string(ri.Record().Value)
			}
		}
		if len(res.Records) == 0 {
			break
		}
	}
	return out, nil
}

// A follower that truncates its log saves its producer state at once. A
// snapshot from before the cut, still stored when the log grew back past
// it, would be restored at the next start with a producer whose batch the
// log no longer holds, and a retry of that batch would be answered as a
// duplicate though no replica has it.
//
// If the new snapshot cannot be saved (a full disk), the old one is removed
// instead: a restart replays the whole log.
func TestTruncationReplacesTheProducerSnapshot(t *testing.T) {
	t.Run("saved", func(t *testing.T) { truncationReplacesTheSnapshot(t, false) })
	t.Run("save fails", func(t *testing.T) { truncationReplacesTheSnapshot(t, true) })
}

// failingPuts is a checkpoint store whose Puts fail while failing is set.
type failingPuts struct {
	checkpoint.Store
	failing atomic.Bool
}

func (f *failingPuts) Put(key string, v []byte) error {
	if f.failing.Load() {
		return errs.Errorf(errs.KafkaStorageError, "putting %s: no space left on device", key)
	}
	return f.Store.Put(key, v)
}

func truncationReplacesTheSnapshot(t *testing.T, failSave bool) {
	var storesMu sync.Mutex
	stores := map[int32]*failingPuts{}
	fc, nodes := startNodesWith(t, nodeOptions{fetchWait: 200 * time.Millisecond, checkpointEvery: time.Hour, store: func(id int32) checkpoint.Store {
		storesMu.Lock()
		defer storesMu.Unlock()
		stores[id] = &failingPuts{Store: checkpoint.NewMemory()}
		return stores[id]
	}})
	part := func(leader, epoch int32) *controllerv1.MetadataRecord {
		return metadata.PartitionRecord(&controllerv1.PartitionRecord{Topic: "s", TopicId: "tid7", Partition: 0, Replicas: []int32{1, 2, 3}, Isr: []int32{1, 2, 3}, Leader: leader, LeaderEpoch: epoch})
	}
	fc.apply(t, metadata.TopicRecord(&controllerv1.TopicRecord{TopicId: "tid7", Name: "s"}), part(1, 0))
	if r := produceTo(t, nodes[0], "s", "v0"); r.GetErrorCode() != 0 {
		t.Fatalf("produce v0: %v", r)
	}
	// Leader 1 takes an idempotent batch that no follower fetches, and
	// snapshots its producers with it.
	nodes[1].fet.Close()
	nodes[2].fet.Close()
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 9, 0, 0
	b := record.NewBuilder(opts)
	b.Append(time.Now().UnixMilli(), []byte("k"), []byte("lost"))
	batch, _, err := b.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := storagev1.NewStorageServiceClient(nodes[0].cc).Produce(context.Background(), &storagev1.ProduceRequest{
		Acks: 1, TimeoutMs: 5000, Partitions: []*storagev1.PartitionProduce{{Topic: "s", Partition: 0, CurrentLeaderEpoch: -1, Records: batch}}})
	if err != nil || resp.GetPartitions()[0].GetErrorCode() != 0 || resp.GetPartitions()[0].GetBaseOffset() != 1 {
		t.Fatalf("produce the unreplicated batch: %v %v", resp, err)
	}
	replica.SnapshotProducers(nodes[0].mgr)
	key := "producers/" + replica.DirName(partition.TP{Topic: "s"}, "tid7")
	storesMu.Lock()
	st := stores[1]
	storesMu.Unlock()
	stored := func() partition.ProducerSnapshot {
		t.Helper()
		raw, ok, err := st.Get(key)
		var snap partition.ProducerSnapshot
		if err != nil || !ok || json.Unmarshal(raw, &snap) != nil {
			t.Fatalf("snapshot %s: %v %v", key, ok, err)
		}
		return snap
	}
	if s := stored(); s.Next != 2 {
		t.Fatalf("snapshot before the cut is as of %d, want 2", s.Next)
	}

	st.failing.Store(failSave)
	// Replica 2 leads at epoch 1 without it; replica 1 follows, cuts its
	// log back to 1 and fetches what replica 2 writes next.
	fc.apply(t, part(2, 1))
	for i := range 2 {
		resp, err := storagev1.NewStorageServiceClient(nodes[1].cc).Produce(context.Background(), &storagev1.ProduceRequest{
			Acks: 1, TimeoutMs: 5000, Partitions: []*storagev1.PartitionProduce{{Topic: "s", Partition: 0, CurrentLeaderEpoch: -1, Records: oneRecord(t, fmt.Sprint("w", i))}}})
		if err != nil || resp.GetPartitions()[0].GetErrorCode() != 0 {
			t.Fatalf("produce w%d to the new leader: %v %v", i, resp, err)
		}
	}
	p, err := nodes[0].mgr.Get(partition.TP{Topic: "s"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.Snapshot().LEO != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("replica 1's LEO %d, want 3 after the cut and the new leader's two records", p.Snapshot().LEO)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if failSave {
		// No snapshot: a restart now would replay the whole log.
		if _, ok, err := st.Get(key); ok || err != nil {
			t.Fatalf("after a cut whose new snapshot could not be saved: the old one is still stored (%v, %v)", ok, err)
		}
		return
	}
	// The stored snapshot is from the cut, not from before it: a restart
	// now would replay the new leader's records after it.
	if s := stored(); s.Next > 1 {
		t.Fatalf("the stored producer snapshot is as of %d, above the cut at 1: it holds %s", s.Next, s.Producers)
	}
}

// A stored producer snapshot beyond the end of the log it was taken of (a
// tail recovery cut, a log restored from an older copy) is not used at the
// open, and is replaced at once rather than kept until the next periodic
// snapshot: once the log grew back past it, a restart would restore it.
func TestOpenReplacesASnapshotBeyondTheLog(t *testing.T) {
	stale, err := json.Marshal(partition.ProducerSnapshot{Next: 5, Producers: []byte(`{"version":1,"producers":{"9":{"epoch":0,"batches":[{"first_seq":0,"last_seq":0,"first_offset":4,"last_offset":4,"timestamp":1,"kind":1}],"txn_first_offset":-1}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	key := "producers/" + replica.DirName(partition.TP{Topic: "s"}, "tid8")
	store := checkpoint.NewMemory()
	fc, nodes := startNodesWith(t, nodeOptions{fetchWait: 200 * time.Millisecond, checkpointEvery: time.Hour, store: func(id int32) checkpoint.Store {
		if id == 1 {
			return store
		}
		return checkpoint.NewMemory()
	}})
	// Replica 1's directory is there (empty: its log ends at 0), with the
	// snapshot of a longer log stored for it.
	if err := os.MkdirAll(filepath.Join(nodes[0].dir, "logs", replica.DirName(partition.TP{Topic: "s"}, "tid8")), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := store.Put(key, stale); err != nil {
		t.Fatal(err)
	}
	fc.apply(t, metadata.TopicRecord(&controllerv1.TopicRecord{TopicId: "tid8", Name: "s"}),
		metadata.PartitionRecord(&controllerv1.PartitionRecord{Topic: "s", TopicId: "tid8", Partition: 0, Replicas: []int32{1, 2, 3}, Isr: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 0}))
	if _, err := nodes[0].mgr.Get(partition.TP{Topic: "s"}); err != nil {
		t.Fatal(err)
	}
	raw, ok, err := store.Get(key)
	var snap partition.ProducerSnapshot
	if err != nil || !ok || json.Unmarshal(raw, &snap) != nil {
		t.Fatalf("snapshot %s: %v %v", key, ok, err)
	}
	if snap.Next != 0 || strings.Contains(string(snap.Producers), `"9"`) {
		t.Fatalf("stored snapshot after the open: as of %d, %s; want the empty log's, as of 0", snap.Next, snap.Producers)
	}
}

// A node whose partition directories were made for one cluster refuses the
// metadata of another (controllers replaced by a new cluster whose image
// names none of its topics): nothing is removed, and the images of its own
// cluster are applied again afterwards.
func TestImageOfAnotherClusterRemovesNothing(t *testing.T) {
	fc, nodes := startNodes(t)
	if r := produce(t, nodes[0], "v0"); r.GetErrorCode() != 0 {
		t.Fatalf("produce: %v", r)
	}
	n := nodes[0]
	dir := filepath.Join(n.dir, "logs", replica.DirName(partition.TP{Topic: "t"}, "tid1"))
	other := metadata.New("another-cluster")
	if err := other.Apply(&controllerv1.MetadataDelta{Version: 1, Records: []*controllerv1.MetadataRecord{
		metadata.BrokerRecord(&controllerv1.BrokerRecord{Id: 1, GrpcAddr: n.addr, BrokerEpoch: 1})}}); err != nil {
		t.Fatal(err)
	}
	n.mgr.OnImage(other)
	p, err := n.mgr.Get(partition.TP{Topic: "t"})
	if err != nil {
		t.Fatalf("t-0 after another cluster's image: %v", err)
	}
	if s := p.Snapshot(); s.LEO != 1 {
		t.Errorf("t-0's LEO %d after another cluster's image, want 1", s.LEO)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("t-0's directory after another cluster's image: %v", err)
	}
	if im := n.mgr.Image(); im == nil || im.ClusterID() != "test" {
		t.Errorf("the node holds the image of %q, want its own cluster's", im.ClusterID())
	}
	// Its own cluster's next image is applied: a new topic is hosted.
	fc.apply(t,
		metadata.TopicRecord(&controllerv1.TopicRecord{TopicId: "tid9", Name: "after"}),
		metadata.PartitionRecord(&controllerv1.PartitionRecord{Topic: "after", TopicId: "tid9", Partition: 0, Replicas: []int32{1, 2, 3}, Isr: []int32{1, 2, 3}, Leader: 1}))
	if _, err := n.mgr.Get(partition.TP{Topic: "after"}); err != nil {
		t.Errorf("a topic of its own cluster after the refusal: %v", err)
	}
}

// The internal topics' producer ids are the coordinators', whose epochs
// fence a deposed owner: they are never forgotten, however idle.
func TestCoordinatorProducerIDsAreNotForgotten(t *testing.T) {
	fc, nodes := startNodesWith(t, nodeOptions{producerIDExpiration: 300 * time.Millisecond})
	fc.apply(t,
		metadata.TopicRecord(&controllerv1.TopicRecord{TopicId: "tid-co", Name: metadata.ConsumerOffsetsTopic}),
		metadata.PartitionRecord(&controllerv1.PartitionRecord{Topic: metadata.ConsumerOffsetsTopic, TopicId: "tid-co", Partition: 0,
			Replicas: []int32{1, 2, 3}, Isr: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 0}),
	)
	batchOf := func(pid int64, v string) []byte {
		opts := record.DefaultBatchOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, 3, 0
		b := record.NewBuilder(opts)
		b.Append(time.Now().UnixMilli(), []byte("k"), []byte(v))
		batch, _, err := b.Build(nil)
		if err != nil {
			t.Fatal(err)
		}
		return batch
	}
	c := storagev1.NewStorageServiceClient(nodes[0].cc)
	var internal *storagev1.PartitionProduceResult
	deadline := time.Now().Add(10 * time.Second)
	for {
		internal = produceRaw(t, c, metadata.ConsumerOffsetsTopic, 0, -1, batchOf(9, "owner"))
		if internal.GetErrorCode() == skeinv1.ErrorCode_NONE {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("produce to %s: %v", metadata.ConsumerOffsetsTopic, internal)
		}
		time.Sleep(50 * time.Millisecond) // the partition is being opened
	}
	user := batchOf(10, "user")
	if r := produceRaw(t, c, "t", 0, -1, user); r.GetErrorCode() != skeinv1.ErrorCode_NONE {
		t.Fatalf("produce to t: %v", r)
	}
	// Once the user topic's idle id is forgotten (its retry is written
	// again), a retention check has run over both.
	for leo(t, nodes[0]) == 1 {
		if time.Now().After(deadline) {
			t.Fatal("the idle producer id of t is still known after 10 s")
		}
		time.Sleep(100 * time.Millisecond)
		produceRaw(t, c, "t", 0, -1, user)
	}
	time.Sleep(500 * time.Millisecond) // and another
	again := produceRaw(t, c, metadata.ConsumerOffsetsTopic, 0, -1, batchOf(9, "owner"))
	if again.GetErrorCode() != skeinv1.ErrorCode_NONE || again.GetBaseOffset() != internal.GetBaseOffset() {
		t.Fatalf("the coordinator's retry after %v idle: %v, want a duplicate of offset %d", 800*time.Millisecond, again, internal.GetBaseOffset())
	}
	p, err := nodes[0].mgr.Get(partition.TP{Topic: metadata.ConsumerOffsetsTopic, Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Snapshot().LEO; got != 1 {
		t.Fatalf("%s holds %d records, want the one", metadata.ConsumerOffsetsTopic, got)
	}
}
