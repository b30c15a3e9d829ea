package partition

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"skein/libs/errs"
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
	// The leader describes its producers: 7's open transaction, the
	// oldest, starts at the LSO; a follower does not answer.
	ps, err := leader.Producers(-1)
	if err != nil || len(ps) != 2 || ps[0].ProducerID != 7 || ps[0].TxnStartOffset != int64(s.LSO) || ps[1].ProducerID != 8 ||
		ps[1].TxnStartOffset != 2 || ps[0].LastSequence != 0 || ps[0].Epoch != 0 {
		t.Fatalf("producers: %+v %v", ps, err)
	}
	if _, err := c.replicas[2].Producers(-1); errs.Of(err) != errs.NotLeaderOrFollower {
		t.Errorf("producers of a follower: %v", err)
	}

	done := make(chan error, 1)
	// The coordinator writes a transaction's markers at the epoch after its
	// batches'.
	go func() { _, err := leader.WriteMarker(context.Background(), 7, 1, false, 1, 0); done <- err }() // abort at 4
	eventually(t, "abort marker appended", func() bool { return leader.Snapshot().LEO == 5 })
	c.replicate()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	go func() { _, err := leader.WriteMarker(context.Background(), 8, 1, true, 1, 0); done <- err }() // commit at 5
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
	// What compaction asks of each transactional batch below the LSO:
	// producer 7's batch at 1 and its marker at 4 are an aborted
	// transaction's, producer 8's batch at 2 a committed one's.
	aborted := leader.AbortedBelow(6)
	for _, tc := range []struct {
		pid  int64
		off  record.Offset
		want bool
	}{{7, 1, true}, {7, 4, true}, {8, 2, false}, {7, 5, false}, {7, 0, false}} {
		if got := aborted(tc.pid, tc.off); got != tc.want {
			t.Errorf("aborted(%d, %d) = %v, want %v", tc.pid, tc.off, got, tc.want)
		}
	}
	if leader.AbortedBelow(1)(7, 1) {
		t.Error("producer 7's transaction starts at 1: below 1 it is not listed")
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
	if used, err := restored.RestoreProducers(snap); err != nil || !used {
		t.Fatalf("restoring a snapshot the log reaches: used %v, %v", used, err)
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
	if used, err := again.RestoreProducers(snap); err != nil || used {
		t.Fatalf("restoring a snapshot beyond the log's end: used %v, %v; want it left for a full replay", used, err)
	}
	if e, _ := again.producers.Get(5); len(e.Batches) != 4 {
		t.Fatalf("full replay state %+v", e)
	}
}

// firstTxnBatch has leader 1 append producer 7's first transactional
// batch (epoch 0, sequence 0), of one record v, and replicates it; it
// answers the batch options for the producer's next batches.
func firstTxnBatch(t *testing.T, c *cluster, v string) record.BatchOptions {
	t.Helper()
	o := record.DefaultBatchOptions()
	o.ProducerID, o.ProducerEpoch, o.BaseSequence, o.Transactional = 7, 0, 0, true
	if _, err := c.replicas[1].Produce(context.Background(), AcksLeader, -1, batchOf(t, o, v)); err != nil {
		t.Fatal(err)
	}
	c.replicate()
	return o
}

// abortAcrossAFailover has leader 1 append producer pid's abort marker (at
// the bumped epoch 1), ending at leo, and die before a follower has it;
// replica 2 is elected with 3 and the coordinator writes the abort again
// there. Replica 1 stays cut off.
func abortAcrossAFailover(t *testing.T, c *cluster, pid int64, leo record.Offset) {
	t.Helper()
	c.cut[2], c.cut[3] = true, true
	ctx, cancel := context.WithCancel(context.Background())
	go c.replicas[1].WriteMarker(ctx, pid, 1, false, 1, 0)
	eventually(t, "abort on the old leader", func() bool { return c.replicas[1].Snapshot().LEO == leo })
	cancel()
	c.cut[1], c.cut[2], c.cut[3] = true, false, false
	c.elect(2, []int32{2, 3})
	done := make(chan error, 1)
	go func() { _, err := c.replicas[2].WriteMarker(context.Background(), pid, 1, false, 1, 0); done <- err }()
	eventually(t, "abort on the new leader", func() bool { return c.replicas[2].Snapshot().LEO == leo })
	c.replicate()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A follower whose divergent tail held an abort marker reopens the
// transaction the marker ended, so the new leader's marker for it lands in
// the aborted index again: read_committed readers of that replica, once it
// leads, never see the aborted records.
func TestTruncatedMarkerReopensItsTransaction(t *testing.T) {
	c := newCluster(t, 1)
	o := record.DefaultBatchOptions()
	o.ProducerID, o.ProducerEpoch, o.Transactional = 7, 0, true
	for seq, v := range []string{"a0", "a1"} {
		o.BaseSequence = int32(seq)
		if _, err := c.replicas[1].Produce(context.Background(), AcksLeader, -1, batchOf(t, o, v)); err != nil {
			t.Fatal(err)
		}
	}
	c.replicate()

	abortAcrossAFailover(t, c, 7, 3)
	c.cut[1] = false
	c.replicate()

	want := []AbortedTxn{{ProducerID: 7, FirstOffset: 0, LastOffset: 2}}
	for _, id := range []int32{1, 2, 3} {
		if got := c.replicas[id].AbortedBetween(0, 10); !slices.Equal(got, want) {
			t.Errorf("replica %d: aborted index %v, want %v", id, got, want)
		}
		if f := c.replicas[id].producers.FirstUnstableOffset(); f != -1 {
			t.Errorf("replica %d: a transaction is open from %d", id, f)
		}
	}
	if got := c.logs[1].values(); !slices.Equal(got, c.logs[2].values()) {
		t.Errorf("replica 1 log %v, leader %v", got, c.logs[2].values())
	}
}

// A read_committed reader at the log start while retention deletes the
// segment it has just read: the aborted transactions of what it reads go
// with the records, though retention forgets them before the answer.
func TestAbortedTransactionsOfARecordsReadAsRetentionDeletesThem(t *testing.T) {
	c := newCluster(t, 1)
	leader := c.replicas[1]
	firstTxnBatch(t, c, "aborted0") // 0
	done := make(chan error, 1)
	go func() { _, err := leader.WriteMarker(context.Background(), 7, 1, false, 1, 0); done <- err }() // abort at 1
	eventually(t, "abort marker appended", func() bool { return leader.Snapshot().LEO == 2 })
	c.replicate()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	leader.Produce(context.Background(), AcksLeader, -1, plain(t, "plain2")) // 2
	c.replicate()

	c.logs[1].mu.Lock()
	c.logs[1].onRead = func() {
		c.logs[1].deleteBefore(2)
		leader.ForgetAbortedBelow()
	}
	c.logs[1].mu.Unlock()
	res, err := leader.Fetch(0, 1<<20, true, -1)
	if err != nil {
		t.Fatal(err)
	}
	if n := countRecords(t, res.Records); n != 3 {
		t.Fatalf("read %d records, want the 3 read before the deletion", n)
	}
	if want := []AbortedTxn{{ProducerID: 7, FirstOffset: 0, LastOffset: 1}}; !slices.Equal(res.Aborted, want) {
		t.Fatalf("aborted %v, want %v: the reader would take aborted0 as committed", res.Aborted, want)
	}
	if got := leader.AbortedBetween(0, 10); len(got) != 0 {
		t.Fatalf("retention left %v", got)
	}
}

// A follower that cuts a marker replays its log from its last producer
// snapshot, not from the log's start: the replay holds the partition's
// lock, and a log of many gigabytes would stall its replication for
// minutes. What it rebuilds is the same.
func TestACutMarkerReplaysFromTheLastSnapshot(t *testing.T) {
	c := newCluster(t, 1)
	idem := record.DefaultBatchOptions()
	idem.ProducerID, idem.ProducerEpoch = 9, 0
	for seq := range int32(10) {
		idem.BaseSequence = seq
		if _, err := c.replicas[1].Produce(context.Background(), AcksLeader, -1, batchOf(t, idem, fmt.Sprint("i", seq))); err != nil {
			t.Fatal(err)
		}
	}
	o := record.DefaultBatchOptions()
	o.ProducerID, o.ProducerEpoch, o.Transactional = 7, 0, true
	for seq, v := range []string{"a0", "a1"} {
		o.BaseSequence = int32(seq)
		if _, err := c.replicas[1].Produce(context.Background(), AcksLeader, -1, batchOf(t, o, v)); err != nil {
			t.Fatal(err)
		}
	}
	c.replicate()
	if s := c.replicas[1].SnapshotProducers(); s.Next != 12 {
		t.Fatalf("snapshot at %d, want 12", s.Next)
	}

	abortAcrossAFailover(t, c, 7, 13)

	c.logs[1].mu.Lock()
	c.logs[1].readFrom = nil
	c.logs[1].mu.Unlock()
	c.cut[1] = false
	c.replicate()
	c.logs[1].mu.Lock()
	reads := slices.Clone(c.logs[1].readFrom)
	c.logs[1].mu.Unlock()
	for _, off := range reads {
		if off < 12 {
			t.Errorf("replica 1 read its log from %d after the cut (reads %v), want nothing below the snapshot's 12", off, reads)
			break
		}
	}
	want := []AbortedTxn{{ProducerID: 7, FirstOffset: 10, LastOffset: 12}}
	if got := c.replicas[1].AbortedBetween(0, 20); !slices.Equal(got, want) {
		t.Errorf("replica 1: aborted index %v, want %v", got, want)
	}
	if f := c.replicas[1].producers.FirstUnstableOffset(); f != -1 {
		t.Errorf("replica 1: a transaction is open from %d", f)
	}
	if e, ok := c.replicas[1].producers.Get(9); !ok || len(e.Batches) != producer.Window || e.Batches[len(e.Batches)-1].FirstSeq != 9 {
		t.Errorf("replica 1: producer 9 %+v, want its last %d batches up to sequence 9", e, producer.Window)
	}
	if got := c.logs[1].values(); !slices.Equal(got, c.logs[2].values()) {
		t.Errorf("replica 1 log %v, leader %v", got, c.logs[2].values())
	}
}

// A marker that arrives late, after its transaction ended and the producer
// began the next one at the epoch the marker carries, is refused rather
// than ending the new transaction; so is one from an older coordinator.
func TestLateMarkerDoesNotEndTheNextTransaction(t *testing.T) {
	c := newCluster(t, 1)
	leader := c.replicas[1]
	o := record.DefaultBatchOptions()
	o.ProducerID, o.Transactional, o.BaseSequence = 7, true, 0
	produce := func(epoch int16, v string) {
		t.Helper()
		o.ProducerEpoch = epoch
		if _, err := leader.Produce(context.Background(), AcksLeader, -1, batchOf(t, o, v)); err != nil {
			t.Fatal(err)
		}
	}
	marker := func(epoch int16, commit bool, coordinatorEpoch int32) error {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			_, err := leader.WriteMarker(context.Background(), 7, epoch, commit, coordinatorEpoch, 0)
			done <- err
		}()
		for {
			c.replicate()
			select {
			case err := <-done:
				return err
			case <-time.After(time.Millisecond):
			}
		}
	}
	produce(0, "t1")                           // 0
	if err := marker(1, true, 3); err != nil { // 1: T1 commits
		t.Fatal(err)
	}
	produce(1, "t2") // 2: T2 opens at the epoch the commit gave the producer

	for _, tc := range []struct {
		name        string
		epoch       int16
		coordinator int32
		want        *errs.Error
	}{
		{"T1's commit again", 1, 3, errs.InvalidProducerEpoch},
		{"an abort at T1's marker epoch", 1, 3, errs.InvalidProducerEpoch},
		{"an older coordinator", 2, 2, errs.TransactionCoordinatorFenced},
	} {
		if err := marker(tc.epoch, tc.name != "an abort at T1's marker epoch", tc.coordinator); errs.Of(err) != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want.Name)
		}
		if s := leader.Snapshot(); s.LEO != 3 || s.LSO != 2 {
			t.Fatalf("%s: LEO %d LSO %d, want 3 and 2 (T2 open, nothing appended)", tc.name, s.LEO, s.LSO)
		}
	}
	if err := marker(2, false, 3); err != nil { // 3: T2's own abort
		t.Fatal(err)
	}
	want := []AbortedTxn{{ProducerID: 7, FirstOffset: 2, LastOffset: 3}}
	if got := leader.AbortedBetween(0, 10); !slices.Equal(got, want) {
		t.Fatalf("aborted %v, want %v", got, want)
	}
}

// What a read_committed reader sees of an open transaction: the last
// stable offset never falls below the log start (retention may delete
// where the transaction began), a lookup by time never answers an offset
// inside the transaction, and the marker that ends it moves the last
// stable offset only once the HW passes it, as Kafka's unreplicated
// transactions: a marker on the leader alone could be lost with it, and a
// new leader would find the transaction open again.
func TestReadCommittedAroundAnOpenTransaction(t *testing.T) {
	c := newCluster(t, 1)
	leader := c.replicas[1]
	o := firstTxnBatch(t, c, "open") // 0
	if off, _, _, err := leader.ListOffset(1_600_000_000_000, true, -1); err != nil || off != -1 {
		t.Errorf("read_committed lookup by time: %d %v, want -1 (offset 0 is in an open transaction)", off, err)
	}
	if off, _, _, err := leader.ListOffset(1_600_000_000_000, false, -1); err != nil || off != 0 {
		t.Errorf("read_uncommitted lookup by time: %d %v, want 0", off, err)
	}

	c.cut[2], c.cut[3] = true, true                               // the marker reaches no follower: the HW stays
	go leader.WriteMarker(context.Background(), 7, 1, true, 1, 0) // 1
	for deadline := time.Now().Add(5 * time.Second); leader.Snapshot().LEO != 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the marker was not appended")
		}
	}
	if s := leader.Snapshot(); s.HW != 1 || s.LSO != 0 {
		t.Fatalf("HW %d LSO %d with the commit's marker on the leader alone, want 1 and 0", s.HW, s.LSO)
	}
	if res, err := leader.Fetch(0, 1<<20, true, -1); err != nil || res.LSO != 0 {
		t.Fatalf("read_committed fetch before the marker is replicated: LSO %d %v, want 0", res.LSO, err)
	}
	w := NewWaker()
	defer w.Forget()
	leader.WakeOnHW(w)
	c.cut[2], c.cut[3] = false, false
	c.replicate()
	select {
	case <-w.C():
	case <-time.After(5 * time.Second):
		t.Fatal("the HW passed the marker and woke no reader")
	}
	if s := leader.Snapshot(); s.HW != 2 || s.LSO != 2 {
		t.Fatalf("HW %d LSO %d once the marker is replicated, want 2 and 2", s.HW, s.LSO)
	}

	// Another transaction, open from offset 2, loses its start to retention.
	c.replicate()
	o.ProducerID = 8
	for i := range 3 {
		o.BaseSequence = int32(i)
		if _, err := leader.Produce(context.Background(), AcksLeader, -1, batchOf(t, o, "open2")); err != nil { // 2, 3, 4
			t.Fatal(err)
		}
	}
	c.replicate()
	c.logs[1].deleteBefore(3)
	if s := leader.Snapshot(); s.LSO != 3 {
		t.Fatalf("LSO %d with the log starting at 3, want 3", s.LSO)
	}
	if res, err := leader.Fetch(3, 1<<20, true, -1); err != nil || res.LSO != 3 {
		t.Fatalf("read_committed fetch at the log start: %+v %v", res.LSO, err)
	}
}

// Compaction's question, for a producer with several aborted transactions,
// and the index forgetting what ends below the log start.
func TestAbortedBelowAndForget(t *testing.T) {
	c := newCluster(t, 1)
	p := c.replicas[1]
	p.mu.Lock()
	p.aborted = []AbortedTxn{{ProducerID: 7, FirstOffset: 2, LastOffset: 4}, {ProducerID: 8, FirstOffset: 3, LastOffset: 9},
		{ProducerID: 7, FirstOffset: 10, LastOffset: 12}, {ProducerID: 7, FirstOffset: 20, LastOffset: 25}}
	p.mu.Unlock()
	aborted := p.AbortedBelow(30)
	for _, tc := range []struct {
		pid  int64
		off  record.Offset
		want bool
	}{
		{7, 1, false}, {7, 2, true}, {7, 4, true}, {7, 5, false}, {7, 11, true}, {7, 13, false}, {7, 20, true}, {7, 26, false},
		{8, 2, false}, {8, 9, true}, {9, 3, false},
	} {
		if got := aborted(tc.pid, tc.off); got != tc.want {
			t.Errorf("aborted(%d, %d) = %v, want %v", tc.pid, tc.off, got, tc.want)
		}
	}
	// A log start at 0 forgets nothing.
	p.ForgetAbortedBelow()
	if got := p.AbortedBetween(0, 100); len(got) != 4 {
		t.Fatalf("with the log start at 0: %v", got)
	}
	// With the log start at 10, the two that end below it go.
	for i := range 12 {
		if _, err := p.Produce(context.Background(), AcksLeader, -1, plain(t, fmt.Sprint("v", i))); err != nil {
			t.Fatal(err)
		}
	}
	c.replicate()
	if _, _, err := p.DeleteRecords(10, -1); err != nil {
		t.Fatal(err)
	}
	p.ForgetAbortedBelow()
	want := []AbortedTxn{{ProducerID: 7, FirstOffset: 10, LastOffset: 12}, {ProducerID: 7, FirstOffset: 20, LastOffset: 25}}
	if got := p.AbortedBetween(0, 100); !slices.Equal(got, want) {
		t.Fatalf("with the log start at 10: %v, want %v", got, want)
	}
}
