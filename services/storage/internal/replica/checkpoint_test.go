package replica_test

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/checkpoint"
	"skein/libs/record"
	"skein/services/storage/internal/partition"
)

// countingStore counts the durable writes made to a checkpoint store.
type countingStore struct {
	checkpoint.Store
	mu    sync.Mutex
	saves int // SaveOffsets calls
	snaps int // Puts of producer snapshots
}

func (c *countingStore) SaveOffsets(o map[checkpoint.Partition]checkpoint.Offsets) error {
	c.mu.Lock()
	c.saves++
	c.mu.Unlock()
	return c.Store.SaveOffsets(o)
}

func (c *countingStore) Put(key string, v []byte) error {
	if strings.HasPrefix(key, "producers/") {
		c.mu.Lock()
		c.snaps++
		c.mu.Unlock()
	}
	return c.Store.Put(key, v)
}

func (c *countingStore) counts() (saves, snaps int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.saves, c.snaps
}

// waitQuiet waits until a store has taken no write for quiet, and fails
// the test if that does not happen within limit.
func waitQuiet(t *testing.T, c *countingStore, quiet, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	s0, p0 := c.counts()
	since := time.Now()
	for time.Since(since) < quiet {
		if time.Now().After(deadline) {
			s, p := c.counts()
			t.Fatalf("the checkpoint store is still written %v after the last change: %d offset saves and %d producer snapshots so far", limit, s, p)
		}
		time.Sleep(10 * time.Millisecond)
		if s, p := c.counts(); s != s0 || p != p0 {
			s0, p0, since = s, p, time.Now()
		}
	}
}

func TestIdleNodeRewritesNoCheckpoint(t *testing.T) {
	stores := map[int32]*countingStore{}
	var mu sync.Mutex
	_, nodes := startNodesWith(t, nodeOptions{fetchWait: 200 * time.Millisecond, checkpointEvery: 20 * time.Millisecond,
		store: func(id int32) checkpoint.Store {
			mu.Lock()
			defer mu.Unlock()
			stores[id] = &countingStore{Store: checkpoint.NewMemory()}
			return stores[id]
		}})
	tp := checkpoint.Partition{Topic: "t", Partition: 0}
	hwSaved := func(id int32) record.Offset {
		all, err := stores[id].LoadOffsets()
		if err != nil {
			t.Fatal(err)
		}
		return all[tp].HighWatermark
	}

	for round, want := range []record.Offset{1, 2} {
		if r := produce(t, nodes[0], "v"); r.GetErrorCode() != 0 {
			t.Fatalf("produce: %v", r)
		}
		// Every node saves the new HW once the followers have learnt it...
		deadline := time.Now().Add(10 * time.Second)
		for _, n := range nodes {
			for hwSaved(n.id) != want {
				if time.Now().After(deadline) {
					t.Fatalf("round %d: node %d checkpointed HW %d, want %d", round, n.id, hwSaved(n.id), want)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		// ...and then writes nothing while nothing changes: 25 checkpoint
		// periods without a write.
		for _, n := range nodes {
			waitQuiet(t, stores[n.id], 500*time.Millisecond, 10*time.Second)
			if got := hwSaved(n.id); got != want {
				t.Fatalf("round %d: node %d's checkpoint says HW %d after settling, want %d", round, n.id, got, want)
			}
		}
	}
	for _, n := range nodes {
		s, p := stores[n.id].counts()
		t.Logf("node %d: %d offset saves, %d producer snapshots", n.id, s, p)
	}
}

// failingStore refuses offset saves while fail is set, as a full or
// failing disk does.
type failingStore struct {
	checkpoint.Store
	fail atomic.Bool
}

func (f *failingStore) SaveOffsets(o map[checkpoint.Partition]checkpoint.Offsets) error {
	if f.fail.Load() {
		return errors.New("no space left on device")
	}
	return f.Store.SaveOffsets(o)
}

// A log start that must be on disk before the node reports it (a
// DeleteRecords its leader answers once every ISR member has saved it)
// fails the log when its save fails: nothing is reported unsaved, and the
// replica refuses writes until its disk takes them again.
func TestAFailedSaveOfALogStartFailsTheLog(t *testing.T) {
	stores := map[int32]*failingStore{}
	_, nodes := startNodesWith(t, nodeOptions{checkpointEvery: time.Hour, store: func(id int32) checkpoint.Store {
		stores[id] = &failingStore{Store: checkpoint.NewMemory()}
		return stores[id]
	}})
	if r := produce(t, nodes[0], "v"); r.GetErrorCode() != skeinv1.ErrorCode_NONE {
		t.Fatalf("produce: %v", r)
	}
	stores[1].fail.Store(true)
	nodes[0].mgr.Checkpoint([]partition.TP{{Topic: "t", Partition: 0}})
	if r := produce(t, nodes[0], "w"); r.GetErrorCode() != skeinv1.ErrorCode_KAFKA_STORAGE_ERROR || !strings.Contains(r.GetErrorMessage(), "no space left") {
		t.Fatalf("a produce after the failed save: %v, want KAFKA_STORAGE_ERROR naming it", r)
	}
}

// A checkpoint of a topic of the same name that its removal could not
// forget (a failing disk) is forgotten when the new topic's replica is
// created: a restart before the next checkpoint would otherwise open the
// new log at the old one's start and high watermark.
func TestANewReplicaForgetsAStaleCheckpointOfItsName(t *testing.T) {
	stale := checkpoint.Offsets{LogStartOffset: 5000, HighWatermark: 5000, RecoveryPoint: 5000}
	stores := map[int32]checkpoint.Store{}
	_, nodes := startNodesWith(t, nodeOptions{checkpointEvery: time.Hour, store: func(id int32) checkpoint.Store {
		s := checkpoint.NewMemory()
		if err := s.SaveOffsets(map[checkpoint.Partition]checkpoint.Offsets{{Topic: "t", Partition: 0}: stale}); err != nil {
			t.Fatal(err)
		}
		stores[id] = s
		return s
	}})
	if r := produce(t, nodes[0], "v"); r.GetErrorCode() != skeinv1.ErrorCode_NONE {
		t.Fatalf("produce: %v", r)
	}
	for id, s := range stores {
		all, err := s.LoadOffsets()
		if err != nil {
			t.Fatal(err)
		}
		if got := all[checkpoint.Partition{Topic: "t", Partition: 0}]; got == stale {
			t.Errorf("node %d still holds the old topic's checkpoint %+v for the new replica", id, got)
		}
	}
}
