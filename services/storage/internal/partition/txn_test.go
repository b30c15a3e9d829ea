package partition

import (
	"context"
	"slices"
	"testing"

	"skein/libs/record"
	"skein/services/storage/internal/producer"
)

func TestTransactionsBoundReadCommitted(t *testing.T) {
	c := newCluster(t, 1)
	leader := c.replicas[1]
	txn := func(pid int64, seq int32, v string) []byte {
		o := record.DefaultBatchOptions()
		o.ProducerID, o.ProducerEpoch, o.BaseSequence, o.Transactional = pid, 0, seq, true
		return batchOf(t, o, v)
	}
	leader.Produce(context.Background(), AcksLeader, -1, plain(t, "plain0"))      // 0
	leader.Produce(context.Background(), AcksLeader, -1, txn(7, 0, "aborted1"))   // 1
	leader.Produce(context.Background(), AcksLeader, -1, txn(8, 0, "committed2")) // 2
	leader.Produce(context.Background(), AcksLeader, -1, plain(t, "plain3"))      // 3
	c.replicate()
	s := leader.Snapshot()
	if s.HW != 4 || s.LSO != 1 {
		t.Fatalf("HW %d LSO %d, want 4 and 1 (producer 7's transaction is open)", s.HW, s.LSO)
	}
	res, _ := leader.Fetch(0, 1<<20, true, -1)
	if res.LSO != 1 || countRecords(t, res.Records) != 1 {
		t.Fatalf("read_committed before any marker: LSO %d, %d records", res.LSO, countRecords(t, res.Records))
	}

	done := make(chan error, 1)
	go func() { _, err := leader.WriteMarker(context.Background(), 7, 0, false, 1, 0); done <- err }() // abort at 4
	eventually(t, "abort marker appended", func() bool { return leader.Snapshot().LEO == 5 })
	c.replicate()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	go func() { _, err := leader.WriteMarker(context.Background(), 8, 0, true, 1, 0); done <- err }() // commit at 5
	eventually(t, "commit marker appended", func() bool { return leader.Snapshot().LEO == 6 })
	c.replicate()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s = leader.Snapshot()
	if s.LSO != s.HW || s.HW != 6 {
		t.Fatalf("after both markers: HW %d LSO %d", s.HW, s.LSO)
	}
	res, _ = leader.Fetch(0, 1<<20, true, -1)
	want := []AbortedTxn{{ProducerID: 7, FirstOffset: 1, LastOffset: 4}}
	if !slices.Equal(res.Aborted, want) {
		t.Fatalf("aborted %v, want %v", res.Aborted, want)
	}

	// A follower rebuilt the same index from the replicated markers, and so
	// does a replica recovering from its log.
	if got := c.replicas[2].AbortedBetween(0, 10); !slices.Equal(got, want) {
		t.Errorf("follower aborted index %v", got)
	}
	fresh := New(Config{Topic: "t", Self: 1}, c.logs[1], 6, producer.New(), nil, c.now)
	if err := fresh.Recover(0); err != nil {
		t.Fatal(err)
	}
	if got := fresh.AbortedBetween(0, 10); !slices.Equal(got, want) {
		t.Errorf("recovered aborted index %v", got)
	}
	if fresh.producers.FirstUnstableOffset() != -1 {
		t.Error("recovered state has an open transaction")
	}
}

func countRecords(t *testing.T, data []byte) int {
	n := 0
	it := record.NewBatchIter(data)
	for it.Next() {
		n += int(it.Batch().RecordCount())
	}
	return n
}

func TestProducerSnapshotPlusReplay(t *testing.T) {
	c := newCluster(t, 1)
	leader := c.replicas[1]
	o := record.DefaultBatchOptions()
	o.ProducerID, o.ProducerEpoch = 5, 0
	for seq := int32(0); seq < 3; seq++ {
		o.BaseSequence = seq
		if _, err := leader.Produce(context.Background(), AcksLeader, -1, batchOf(t, o, "x")); err != nil {
			t.Fatal(err)
		}
	}
	snap := leader.SnapshotProducers()
	o.BaseSequence = 3
	after := batchOf(t, o, "after-snapshot")
	leader.Produce(context.Background(), AcksLeader, -1, after)

	restored := New(Config{Topic: "t", Self: 1}, c.logs[1], 0, producer.New(), nil, c.now)
	if err := restored.RestoreProducers(snap); err != nil {
		t.Fatal(err)
	}
	// The batch written after the snapshot was replayed from the log: its
	// retry is recognized, and the next sequence is 4.
	e, ok := restored.producers.Get(5)
	if !ok || len(e.Batches) != 4 || e.Batches[3].FirstSeq != 3 || e.Batches[3].FirstOffset != 3 {
		t.Fatalf("restored state %+v", e)
	}
	// A snapshot beyond the log's end (a cut tail) is ignored for a full replay.
	snap.Next = 99
	again := New(Config{Topic: "t", Self: 1}, c.logs[1], 0, producer.New(), nil, c.now)
	if err := again.RestoreProducers(snap); err != nil {
		t.Fatal(err)
	}
	if e, _ := again.producers.Get(5); len(e.Batches) != 4 {
		t.Fatalf("full replay state %+v", e)
	}
}
