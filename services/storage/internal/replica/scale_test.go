package replica_test

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/checkpoint"
	"skein/libs/metadata"
	"skein/services/storage/internal/partition"
	"skein/services/storage/internal/replica"
)

// countingFetchers counts what the manager asks of the follower side.
type countingFetchers struct {
	mu      sync.Mutex
	follows int
}

func (c *countingFetchers) Follow(partition.TP, *partition.Partition, int32) {
	c.mu.Lock()
	c.follows++
	c.mu.Unlock()
}
func (c *countingFetchers) Unfollow(partition.TP) {}

func (c *countingFetchers) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.follows
}

// gatedStore holds DeletePartitions until released, and counts its calls.
type gatedStore struct {
	checkpoint.Store
	armed   atomic.Bool // gate only once set (a new replica forgets its name's offsets too)
	entered chan []checkpoint.Partition
	release chan struct{}
}

func (g *gatedStore) DeletePartitions(ps ...checkpoint.Partition) error {
	if g.armed.Load() {
		g.entered <- ps
		<-g.release
	}
	return g.Store.DeletePartitions(ps...)
}

// scaleImage is a three-broker cluster where node 1 follows broker 2 in
// every partition of the named topics (n partitions each).
func scaleImage(t *testing.T, n int, topics ...string) *metadata.Image {
	t.Helper()
	im := metadata.New("test")
	var recs []*controllerv1.MetadataRecord
	for b := int32(1); b <= 3; b++ {
		recs = append(recs, metadata.BrokerRecord(&controllerv1.BrokerRecord{Id: b, GrpcAddr: fmt.Sprint("127.0.0.1:", b), BrokerEpoch: 1}))
	}
	for i, name := range topics {
		id := fmt.Sprintf("0a1b2c3d-0000-8000-8000-%012d", i+1)
		recs = append(recs, metadata.TopicRecord(&controllerv1.TopicRecord{TopicId: id, Name: name}))
		for p := range n {
			recs = append(recs, metadata.PartitionRecord(&controllerv1.PartitionRecord{Topic: name, TopicId: id, Partition: int32(p),
				Replicas: []int32{2, 1, 3}, Isr: []int32{2, 1, 3}, Leader: 2}))
		}
	}
	if err := im.Apply(&controllerv1.MetadataDelta{Version: 10, Records: recs}); err != nil {
		t.Fatal(err)
	}
	return im
}

// A metadata change touches only the replicas it changes: a leader moving
// in one partition of 400 hands the follower side that one partition, not
// all 400 again (each image used to reconcile every replica, which at
// thousands of partitions kept a node busy through a stream of changes).
func TestAnImageTouchesOnlyWhatItChanges(t *testing.T) {
	fetchers := &countingFetchers{}
	m := replica.New(replica.Config{Self: 1, DataDir: t.TempDir()}, slog.New(slog.NewTextHandler(io.Discard, nil)), noProposer{}, fetchers, checkpoint.NewMemory())
	defer m.Close()
	im := scaleImage(t, 200, "a", "b")
	m.OnImage(im)
	if got := fetchers.count(); got != 400 {
		t.Fatalf("%d follows for 400 new replicas following broker 2", got)
	}
	next := im.Clone()
	if err := next.Apply(&controllerv1.MetadataDelta{Version: 11, Records: []*controllerv1.MetadataRecord{metadata.PartitionRecord(&controllerv1.PartitionRecord{
		Topic: "a", TopicId: "0a1b2c3d-0000-8000-8000-000000000001", Partition: 7, Replicas: []int32{2, 1, 3}, Isr: []int32{1, 3}, Leader: 3, LeaderEpoch: 1, PartitionEpoch: 1})}}); err != nil {
		t.Fatal(err)
	}
	m.OnImage(next)
	if got := fetchers.count() - 400; got != 1 {
		t.Fatalf("a leader change in one partition made %d follows, want 1", got)
	}
	p, err := m.Get(partition.TP{Topic: "a", Partition: 7})
	if err != nil || p.Snapshot().State.Leader != 3 {
		t.Fatalf("a/7 after the change: %v", err)
	}
	// The same image sent whole again (the watch moved to another
	// controller: new records, equal ones) changes nothing either.
	again, err := metadata.FromProto(next.ToProto())
	if err != nil {
		t.Fatal(err)
	}
	m.OnImage(again)
	if got := fetchers.count() - 401; got != 0 {
		t.Fatalf("the same image sent again made %d follows, want none", got)
	}
	// A topic's config change reaches each of its replicas.
	cfg := next.Clone()
	if err := cfg.Apply(&controllerv1.MetadataDelta{Version: 12, Records: []*controllerv1.MetadataRecord{metadata.TopicRecord(&controllerv1.TopicRecord{
		TopicId: "0a1b2c3d-0000-8000-8000-000000000002", Name: "b", Configs: map[string]string{"min.insync.replicas": "2"}})}}); err != nil {
		t.Fatal(err)
	}
	before := fetchers.count()
	m.OnImage(cfg)
	if got := fetchers.count() - before; got != 200 {
		t.Fatalf("a config change of topic b made %d follows, want its 200 replicas", got)
	}
}

// Deleting a topic removes its replicas' data without holding up requests
// for the others, and forgets all their offsets in one checkpoint write.
func TestDeletingATopicDoesNotHoldUpTheOthers(t *testing.T) {
	store := &gatedStore{Store: checkpoint.NewMemory(), entered: make(chan []checkpoint.Partition, 1), release: make(chan struct{})}
	m := replica.New(replica.Config{Self: 1, DataDir: t.TempDir()}, slog.New(slog.NewTextHandler(io.Discard, nil)), noProposer{}, &countingFetchers{}, store)
	defer m.Close()
	released := false
	release := func() {
		if !released {
			released = true
			close(store.release)
		}
	}
	defer release() // before Close, should the test fail with the removal held
	m.OnImage(scaleImage(t, 50, "keep", "gone"))
	store.armed.Store(true)
	done := make(chan struct{})
	go func() { defer close(done); m.OnImage(scaleImage(t, 50, "keep")) }()
	var deleted []checkpoint.Partition
	select {
	case deleted = <-store.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the deleted topic's offsets were never removed")
	}
	if len(deleted) != 50 {
		t.Fatalf("one write removes %d partitions' offsets, want the deleted topic's 50", len(deleted))
	}
	got := make(chan error, 1)
	go func() {
		_, err := m.Get(partition.TP{Topic: "keep", Partition: 3})
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("a kept partition while the deleted topic is removed: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a request for a kept partition waited for the deleted topic's removal")
	}
	release()
	<-done
	if _, err := m.Get(partition.TP{Topic: "gone", Partition: 3}); err == nil {
		t.Fatal("a deleted topic's replica is still hosted")
	}
}
