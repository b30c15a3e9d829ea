package replica

import (
	"slices"
	"testing"
	"time"

	plog "skein/libs/log"
	"skein/libs/record"
	"skein/services/storage/internal/partition"
	"skein/services/storage/internal/producer"
)

// Compaction empties batches (an aborted transaction's, a superseded
// idempotent write's) but keeps their headers: a replica that rebuilds its
// producer state and aborted-transaction index from the compacted log, as
// one does at start without a usable snapshot, ends with what it had
// before, so a producer's retry is still recognised and read_committed
// readers still skip what was aborted.
func TestProducerStateSurvivesCompaction(t *testing.T) {
	cfg := plog.DefaultConfig()
	cfg.CleanupPolicy = plog.CleanupCompact
	cfg.MinCleanableDirtyRatio = 0
	l, err := plog.Open(t.TempDir(), cfg, plog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ts := time.Now().UnixMilli()
	app := func(opts record.BatchOptions, kvs ...string) {
		t.Helper()
		b := record.NewBuilder(opts)
		for i := 0; i < len(kvs); i += 2 {
			b.Append(ts+int64(i), []byte(kvs[i]), []byte(kvs[i+1]))
		}
		out, _, err := b.Build(nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(out, 1); err != nil {
			t.Fatal(err)
		}
	}
	marker := func(pid int64, epoch int16, typ record.ControlType) {
		t.Helper()
		b, _, err := record.BuildMarker(nil, pid, epoch, record.Marker{Type: typ, CoordinatorEpoch: 3}, ts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(b, 1); err != nil {
			t.Fatal(err)
		}
	}
	idem := func(pid int64, seq int32) record.BatchOptions {
		return record.BatchOptions{ProducerID: pid, ProducerEpoch: 2, BaseSequence: seq}
	}
	txn := func(pid int64, epoch int16, seq int32) record.BatchOptions {
		return record.BatchOptions{Transactional: true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}
	}
	app(idem(4, 0), "k", "a", "j", "a")      // 0-1, superseded whole: an empty batch
	app(txn(5, 0, 0), "k", "b")              // 2, committed, superseded
	marker(5, 0, record.ControlCommit)       // 3
	app(txn(6, 1, 0), "k", "bad", "x", "no") // 4-5, aborted: an empty batch
	app(txn(6, 1, 2), "y", "no")             // 6, aborted
	marker(6, 1, record.ControlAbort)        // 7
	app(idem(4, 2), "k", "c", "j", "c")      // 8-9
	app(txn(5, 1, 0), "m", "m1")             // 10, committed
	marker(5, 1, record.ControlCommit)       // 11
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	app(txn(6, 2, 0), "z", "open") // 12, a transaction still open, in the active segment

	recovered := func() *partition.Partition {
		t.Helper()
		p := partition.New(partition.Config{Topic: "c", Self: 1}, logAdapter{l}, 0, producer.New(), nil, time.Now)
		if err := p.Recover(l.LogStartOffset()); err != nil {
			t.Fatal(err)
		}
		return p
	}
	before := recovered()
	wantAborted := []partition.AbortedTxn{{ProducerID: 6, FirstOffset: 4, LastOffset: 7}}
	if got := before.AbortedBetween(0, 100); !slices.Equal(got, wantAborted) {
		t.Fatalf("aborted index before compaction %v, want %v", got, wantAborted)
	}
	st, err := l.Compact(time.Now(), 12, before.AbortedBelow(12))
	if err != nil {
		t.Fatal(err)
	}
	if st.RecordsRemoved != 6 {
		t.Fatalf("compaction removed %d records (%+v), want 6: j=a, k=a, k=b and the aborted three", st.RecordsRemoved, st)
	}
	after := recovered()
	if b, a := string(before.SnapshotProducers().Producers), string(after.SnapshotProducers().Producers); a != b {
		t.Errorf("producer state rebuilt from the compacted log\n%s\nwant, as before compaction,\n%s", a, b)
	}
	if got := after.AbortedBetween(0, 100); !slices.Equal(got, wantAborted) {
		t.Errorf("aborted index rebuilt from the compacted log %v, want %v", got, wantAborted)
	}
	if lso := after.Snapshot(); lso.LEO != 13 {
		t.Errorf("LEO after compaction %d, want 13", lso.LEO)
	}
}
