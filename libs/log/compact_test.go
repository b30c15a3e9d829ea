package log

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"skein/libs/errs"
	"skein/libs/record"
)

// compactedLog writes, in closed segments,
//
//	B0 0-2          k1=a1 k2=b1 k3=c1
//	B1 3-5 (zstd)   k1=a2 k4=d1 k3=c1b
//	B2 6            k2=null (tombstone)      -- roll --
//	B3 7-8          k3=c2 k5=e1
//	B4 9 (txn)      k1=a3
//	B5 10 (control) commit                   -- roll --
//
// and in the active segment B6 11: k5=e2.
func compactedLog(t *testing.T, dir string, c *clock) *Log {
	t.Helper()
	cfg := DefaultConfig()
	cfg.CleanupPolicy = CleanupCompact
	cfg.DeleteRetentionMS = 1000
	cfg.MinCleanableDirtyRatio = 0 // whenever something was written
	l := openLog(t, dir, cfg, State{}, c)
	ts := int64(5000)
	rec := func(k string, v *string) kv {
		r := kv{key: []byte(k), ts: ts}
		if v != nil {
			r.value = []byte(*v)
		}
		return r
	}
	s := func(v string) *string { return &v }
	app := func(b []byte) {
		t.Helper()
		if _, err := l.Append(b, 1); err != nil {
			t.Fatal(err)
		}
	}
	app(batchOf(t, rec("k1", s("a1")), rec("k2", s("b1")), rec("k3", s("c1"))))
	app(batchWith(t, record.Zstd, rec("k1", s("a2")), rec("k4", s("d1")), rec("k3", s("c1b"))))
	app(batchOf(t, rec("k2", nil)))
	l.Roll()
	app(batchOf(t, rec("k3", s("c2")), rec("k5", s("e1"))))
	txn := record.NewBuilder(record.BatchOptions{Transactional: true, ProducerID: 7, BaseSequence: 0})
	txn.Append(ts, []byte("k1"), []byte("a3"))
	tb, _, _ := txn.Build(nil)
	app(tb)
	marker, _, _ := record.BuildMarker(nil, 7, 0, record.Marker{Type: record.ControlCommit}, ts)
	app(marker)
	l.Roll()
	app(batchOf(t, rec("k5", s("e2"))))
	return l
}

// noneAborted: every transaction in the log committed.
func noneAborted(int64, Offset) bool { return false }

type batchShape struct {
	base, last Offset
	count      int32
	codec      record.Compression
}

func shapes(t *testing.T, l *Log) []batchShape {
	t.Helper()
	var out []batchShape
	eachBatch(t, l, func(b record.Batch) {
		out = append(out, batchShape{b.BaseOffset(), b.LastOffset(), b.RecordCount(), b.Compression()})
	})
	return out
}

// eachBatch calls f with every batch of l from its start, each verified.
func eachBatch(t *testing.T, l *Log, f func(record.Batch)) {
	t.Helper()
	for off := l.LogStartOffset(); off < l.LEO(); {
		res, err := l.Read(off, 1<<20, NoMaxOffset)
		if err != nil {
			t.Fatal(err)
		}
		it := record.NewBatchIter(res.Records)
		for it.Next() {
			b := it.Batch()
			if err := b.Verify(); err != nil {
				t.Fatal(err)
			}
			f(b)
		}
		off = res.NextOffset
	}
}

func TestCompaction(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: t0}
	l := compactedLog(t, dir, c)
	before := readRecords(t, l, 0)

	// Pass 1: the tombstone's segment was closed (at t0) less than
	// delete.retention.ms ago, though the tombstone's own timestamp (5000)
	// is decades older: a producer's timestamp does not shorten its stay.
	// k1's a3 at 9, committed in a transaction, supersedes a1 and a2.
	st, err := l.Compact(t0.Add(500*time.Millisecond), NoMaxOffset, noneAborted)
	if err != nil {
		t.Fatal(err)
	}
	if st.SegmentsRewritten != 1 || st.RecordsRemoved != 5 || st.BytesAfter >= st.BytesBefore {
		t.Fatalf("stats %+v", st)
	}
	got := readRecords(t, l, 0)
	want := map[Offset]string{4: "d1", 6: "", 7: "c2", 8: "e1", 9: "a3", 10: string([]byte{0, 0, 0, 0, 0, 0}), 11: "e2"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after compaction\n got %v\nwant %v", got, want)
	}
	for o, v := range got {
		if before[o] != v {
			t.Fatalf("offset %d changed from %q to %q", o, before[o], v)
		}
	}
	// Offsets and batch boundaries are preserved; B0 is now an empty batch;
	// B1 lost offsets 3 and 5 and is still zstd.
	wantShapes := []batchShape{{0, 2, 0, record.None}, {3, 5, 1, record.Zstd}, {6, 6, 1, record.None}, {7, 8, 2, record.None},
		{9, 9, 1, record.None}, {10, 10, 1, record.None}, {11, 11, 1, record.None}}
	if got := shapes(t, l); fmt.Sprint(got) != fmt.Sprint(wantShapes) {
		t.Fatalf("batches\n got %v\nwant %v", got, wantShapes)
	}
	// A read at a removed offset returns the batch that held it.
	if res, err := l.Read(5, 1, NoMaxOffset); err != nil || record.Batch(res.Records).BaseOffset() != 3 || res.NextOffset != 6 {
		t.Fatalf("read at a removed offset: %v", err)
	}

	// Pass 2: the tombstone's segment was closed delete.retention.ms ago.
	if st, err = l.Compact(t0.Add(1001*time.Millisecond), NoMaxOffset, noneAborted); err != nil || st.RecordsRemoved != 1 {
		t.Fatalf("%+v %v", st, err)
	}
	got = readRecords(t, l, 0)
	if _, ok := got[6]; ok || len(got) != 6 {
		t.Fatalf("tombstone survived: %v", got)
	}
	// Nothing left to do.
	if st, err = l.Compact(t0.Add(1001*time.Millisecond), NoMaxOffset, noneAborted); err != nil || st.SegmentsRewritten != 0 {
		t.Fatalf("%+v %v", st, err)
	}

	// The compacted log replicates to a follower, batch for batch.
	f := openLog(t, t.TempDir(), DefaultConfig(), State{}, c)
	defer f.Close()
	for off := Offset(0); off < l.LEO(); {
		res, err := l.Read(off, 100, NoMaxOffset)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.AppendAsFollower(res.Records); err != nil {
			t.Fatal(err)
		}
		off = res.NextOffset
	}
	if fmt.Sprint(readRecords(t, f, 0)) != fmt.Sprint(got) {
		t.Fatal("follower differs")
	}

	// And it reopens the same.
	l.Close()
	l = openLog(t, dir, l.Config(), l.State(), c)
	defer l.Close()
	if fmt.Sprint(readRecords(t, l, 0)) != fmt.Sprint(got) {
		t.Fatal("reopened log differs")
	}
}

// Records without a key, written while the topic was not compacted, go
// at the first compaction after it becomes compacted; keyed ones and the
// offsets of every batch stay.
func TestCompactionRemovesRecordsWithoutAKey(t *testing.T) {
	c := &clock{t: t0}
	l := openLog(t, t.TempDir(), DefaultConfig(), State{}, c)
	defer l.Close()
	for _, b := range [][]byte{
		batchOf(t, kv{value: []byte("n0"), ts: 1}, kv{key: []byte("k"), value: []byte("v1"), ts: 1}),
		batchOf(t, kv{value: []byte("n2"), ts: 2}),
	} {
		if _, err := l.Append(b, 1); err != nil {
			t.Fatal(err)
		}
	}
	l.Roll()
	cfg := l.Config()
	cfg.CleanupPolicy = CleanupCompact
	cfg.MinCleanableDirtyRatio = 0
	l.SetConfig(cfg)
	if _, err := l.Append(batchOf(t, kv{value: []byte("n3"), ts: 3}), 1); errs.Of(err) != errs.InvalidRecord {
		t.Fatalf("a record without a key in a compacted topic: %v, want INVALID_RECORD", err)
	}
	st, err := l.Compact(time.UnixMilli(5000), NoMaxOffset, nil)
	if err != nil || st.RecordsRemoved != 2 {
		t.Fatalf("compaction: %+v, %v; want the 2 records without a key removed", st, err)
	}
	if got, want := fmt.Sprint(readRecords(t, l, 0)), fmt.Sprint(map[Offset]string{1: "v1"}); got != want {
		t.Fatalf("after compaction %s, want %s", got, want)
	}
	wantShapes := []batchShape{{0, 1, 1, record.None}, {2, 2, 0, record.None}}
	if got := shapes(t, l); fmt.Sprint(got) != fmt.Sprint(wantShapes) {
		t.Fatalf("batches\n got %v\nwant %v", got, wantShapes)
	}
}

func TestCompactionNeedsPolicy(t *testing.T) {
	c := &clock{t: t0}
	l := compactedLog(t, t.TempDir(), c)
	defer l.Close()
	cfg := l.Config()
	cfg.CleanupPolicy = CleanupDelete
	l.SetConfig(cfg)
	if st, err := l.Compact(time.UnixMilli(1<<50), NoMaxOffset, nil); err != nil || st.SegmentsRewritten != 0 {
		t.Fatalf("%+v %v", st, err)
	}
}

// TestCompactionAlongsideAppends runs compaction while a writer appends and
// readers read: appends are not held up for the pass, and nobody sees a
// half-cleaned segment.
func TestCompactionAlongsideAppends(t *testing.T) {
	cfg := smallConfig()
	cfg.CleanupPolicy = CleanupCompact
	l := openLog(t, t.TempDir(), cfg, State{}, &clock{t: t0})
	defer l.Close()
	for i := range 200 {
		if _, err := l.Append(batchOf(t, kv{key: fmt.Appendf(nil, "k%d", i%10), value: fmt.Appendf(nil, "v%d", i), ts: int64(i)}), 0); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := l.Compact(t0, NoMaxOffset, nil)
		done <- err
	}()
	for i := 200; i < 300; i++ {
		if _, err := l.Append(batchOf(t, kv{key: fmt.Appendf(nil, "k%d", i%10), value: fmt.Appendf(nil, "v%d", i), ts: int64(i)}), 0); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			readRecords(t, l, 0)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := readRecords(t, l, 0)
	// Which segments the pass saw depends on scheduling, but the newest
	// record of every key (offsets 290-299) must survive, and every offset
	// read must hold what was written there.
	for o := Offset(0); o < 300; o++ {
		v, ok := got[o]
		if o >= 290 && !ok {
			t.Fatalf("offset %d missing", o)
		}
		if ok && v != fmt.Sprintf("v%d", o) {
			t.Fatalf("offset %d holds %q", o, v)
		}
	}
	if len(got) >= 300 {
		t.Fatal("compaction removed nothing")
	}
}

// Compaction stops at the offset it is given (the HW, or the LSO): a
// segment that ends above it is left whole, and its records supersede
// nothing, since a follower may yet truncate them away; the committed
// record they would replace must survive that.
func TestCompactionStopsAtTheGivenOffset(t *testing.T) {
	c := &clock{t: t0}
	l := compactedLog(t, t.TempDir(), c)
	defer l.Close()
	// Segments: 0-6, 7-10, and the active one from 11. k3's c1b at 5 is
	// superseded only by c2 at 7, above the bound.
	st, err := l.Compact(time.UnixMilli(5500), 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := readRecords(t, l, 0)
	if got[5] != "c1b" || got[7] != "c2" || st.SegmentsRewritten != 1 {
		t.Fatalf("compacted below 7: %+v, records %v: want c1b at 5 kept (c2 at 7 is above the bound)", st, got)
	}
	if _, ok := got[0]; ok { // a1 at 0 is superseded by a2 at 3, below the bound
		t.Fatalf("a1 at 0 survived compaction below 7: %v", got)
	}
	if st, err := l.Compact(time.UnixMilli(5500), 6, nil); err != nil || st.SegmentsRewritten != 0 {
		t.Fatalf("below 6 no segment ends: %+v %v", st, err)
	}
	if _, err := l.Compact(time.UnixMilli(5500), NoMaxOffset, nil); err != nil {
		t.Fatal(err)
	}
	if got := readRecords(t, l, 0); got[7] != "c2" {
		t.Fatalf("with the bound lifted: %v", got)
	} else if _, ok := got[5]; ok {
		t.Fatalf("with the bound lifted c1b at 5 survived: %v", got)
	}
}

// min.cleanable.dirty.ratio, min.compaction.lag.ms and max.compaction.lag.ms
// decide when a compaction runs; until then a superseded record stays.
func TestCompactionWaitsForItsConfig(t *testing.T) {
	type step struct {
		write  []kv  // appended, then the segment is closed
		now    int64 // compaction at this time
		gone0  bool  // offset 0 (k0's first value) was compacted away
		reason string
	}
	val := func(k string, ts int64) kv { return kv{key: []byte(k), value: bytes.Repeat([]byte{'v'}, 100), ts: ts} }
	keys := func(ts int64, ks ...string) []kv {
		var out []kv
		for _, k := range ks {
			out = append(out, val(k, ts))
		}
		return out
	}
	ten := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"}
	for _, tc := range []struct {
		name    string
		configs map[string]string
		steps   []step
	}{
		{"dirty ratio", map[string]string{"min.cleanable.dirty.ratio": "0.5"}, []step{
			{keys(1000, ten...), 2000, false, "the first pass cleans the log (nothing superseded yet)"},
			{keys(1500, "k0"), 2000, false, "one record of eleven is dirty: below the ratio"},
			{keys(1600, ten[1:]...), 2000, true, "ten of twenty dirty: at the ratio"},
		}},
		{"max lag forces it", map[string]string{"min.cleanable.dirty.ratio": "0.99", "max.compaction.lag.ms": "1000"}, []step{
			{keys(1000, ten...), 2000, false, "the first pass"},
			{keys(1500, "k0"), 2400, false, "dirty since 1500: not 1000 ms yet"},
			{nil, 2500, true, "dirty for 1000 ms"},
		}},
		{"min lag holds it", map[string]string{"min.cleanable.dirty.ratio": "0", "min.compaction.lag.ms": "1000"}, []step{
			{append(keys(1000, ten...), val("k0", 1000)), 1500, false, "the newest record is 500 ms old"},
			{nil, 2000, true, "1000 ms old"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig(tc.configs)
			if err != nil {
				t.Fatal(err)
			}
			cfg.CleanupPolicy = CleanupCompact
			l := openLog(t, t.TempDir(), cfg, State{}, &clock{t: time.UnixMilli(1000)})
			defer l.Close()
			for i, s := range tc.steps {
				if len(s.write) > 0 {
					if _, err := l.Append(batchOf(t, s.write...), 0); err != nil {
						t.Fatal(err)
					}
					l.Roll()
				}
				if _, err := l.Compact(time.UnixMilli(s.now), NoMaxOffset, nil); err != nil {
					t.Fatal(err)
				}
				if _, kept := readRecords(t, l, 0)[0]; kept == s.gone0 {
					t.Fatalf("step %d (%s): offset 0 kept %v", i, s.reason, kept)
				}
			}
		})
	}
	if _, err := ParseConfig(map[string]string{"min.compaction.lag.ms": "2000", "max.compaction.lag.ms": "1000"}); errs.Of(err) != errs.InvalidConfig {
		t.Errorf("min above max lag: %v, want INVALID_CONFIG", err)
	}
}

// txnBatch builds a transactional batch of producer pid.
func txnBatch(t *testing.T, pid int64, epoch int16, seq int32, recs ...kv) []byte {
	t.Helper()
	return batchWithOptions(t, record.BatchOptions{Transactional: true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}, recs...)
}

// A committed transaction's records are compacted as any others: a newer
// version supersedes them, and a later tombstone takes its key away for
// good. An aborted one's records are removed and supersede nothing. The
// batches keep their producer and transactional flag.
func TestCompactionOfTransactions(t *testing.T) {
	c := &clock{t: t0}
	cfg := DefaultConfig()
	cfg.CleanupPolicy = CleanupCompact
	cfg.DeleteRetentionMS = 1000
	cfg.MinCleanableDirtyRatio = 0
	l := openLog(t, t.TempDir(), cfg, State{}, c)
	defer l.Close()
	v := func(k, v string) kv { return kv{key: []byte(k), value: []byte(v), ts: 5000} }
	app := func(b []byte) {
		t.Helper()
		if _, err := l.Append(b, 1); err != nil {
			t.Fatal(err)
		}
	}
	marker := func(pid int64, epoch int16, typ record.ControlType) []byte {
		b, _, err := record.BuildMarker(nil, pid, epoch, record.Marker{Type: typ}, 5000)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	app(batchOf(t, v("alice", "v1")))                              // 0
	app(txnBatch(t, 9, 0, 0, v("alice", "v2")))                    // 1, committed
	app(marker(9, 0, record.ControlCommit))                        // 2
	app(batchOf(t, kv{key: []byte("alice"), ts: 5000}))            // 3, a tombstone
	app(txnBatch(t, 9, 1, 0, v("carol", "c1"), v("dave", "d1")))   // 4-5, committed
	app(marker(9, 1, record.ControlCommit))                        // 6
	app(txnBatch(t, 11, 0, 0, v("carol", "bad"), v("bob", "bad"))) // 7-8, aborted
	app(marker(11, 0, record.ControlAbort))                        // 9
	app(batchOf(t, v("dave", "d2")))                               // 10
	l.Roll()
	app(batchOf(t, v("erin", "e1"))) // 11, active
	aborted := func(pid int64, off Offset) bool { return pid == 11 && off >= 7 && off <= 9 }

	st, err := l.Compact(t0.Add(500*time.Millisecond), NoMaxOffset, aborted)
	if err != nil {
		t.Fatal(err)
	}
	got := readRecords(t, l, 0)
	// alice's v1 and committed v2 are superseded by the tombstone at 3;
	// dave's committed d1 by d2; carol's c1 stays, though the aborted
	// transaction wrote carol later; the aborted records go.
	wantOffsets := []Offset{2, 3, 4, 6, 9, 10, 11}
	var gotOffsets []Offset
	for o := range got {
		gotOffsets = append(gotOffsets, o)
	}
	slices.Sort(gotOffsets)
	if !slices.Equal(gotOffsets, wantOffsets) || got[4] != "c1" || got[10] != "d2" || st.RecordsRemoved != 5 {
		t.Fatalf("after compaction (%+v): records %v, want offsets %v with c1 at 4 and d2 at 10", st, got, wantOffsets)
	}
	type shape struct {
		base, last   Offset
		count        int32
		txn, control bool
		pid          int64
		epoch        int16
	}
	var shapes []shape
	eachBatch(t, l, func(b record.Batch) {
		shapes = append(shapes, shape{b.BaseOffset(), b.LastOffset(), b.RecordCount(), b.IsTransactional(), b.IsControl(), b.ProducerID(), b.ProducerEpoch()})
	})
	none := int64(record.NoProducerID)
	wantShapes := []shape{
		{0, 0, 0, false, false, none, -1}, {1, 1, 0, true, false, 9, 0}, {2, 2, 1, true, true, 9, 0}, {3, 3, 1, false, false, none, -1},
		{4, 5, 1, true, false, 9, 1}, {6, 6, 1, true, true, 9, 1}, {7, 8, 0, true, false, 11, 0}, {9, 9, 1, true, true, 11, 0},
		{10, 10, 1, false, false, none, -1}, {11, 11, 1, false, false, none, -1},
	}
	if fmt.Sprint(shapes) != fmt.Sprint(wantShapes) {
		t.Fatalf("batches\n got %v\nwant %v", shapes, wantShapes)
	}

	// Once the tombstone may go, alice is gone for good: no older
	// transactional version of it comes back.
	if _, err := l.Compact(t0.Add(1001*time.Millisecond), NoMaxOffset, aborted); err != nil {
		t.Fatal(err)
	}
	got = readRecords(t, l, 0)
	for o, val := range got {
		if o <= 3 && o != 2 {
			t.Fatalf("alice's offset %d holds %q after its tombstone went: %v", o, val, got)
		}
	}
}

// delete.retention.ms counts from when a tombstone's segment was closed,
// also after a restart (from the segment file's time, which a compaction's
// rewrite keeps), not from the tombstone's own timestamp.
func TestTombstoneRetentionAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	cfg := DefaultConfig()
	cfg.CleanupPolicy = CleanupCompact
	cfg.DeleteRetentionMS = time.Hour.Milliseconds()
	cfg.MinCleanableDirtyRatio = 0
	l := openLog(t, dir, cfg, State{}, &clock{t: now})
	old := now.Add(-2 * time.Hour).UnixMilli() // the producer's timestamps, hours back
	for _, b := range [][]byte{
		batchOf(t, kv{key: []byte("k"), value: []byte("v1"), ts: old}),
		batchOf(t, kv{key: []byte("k"), ts: old}), // tombstone at 1
		batchOf(t, kv{key: []byte("x"), value: []byte("x1"), ts: old}),
	} {
		if _, err := l.Append(b, 1); err != nil {
			t.Fatal(err)
		}
	}
	l.Roll()
	if _, err := l.Append(batchOf(t, kv{key: []byte("y"), value: []byte("y1"), ts: old}), 1); err != nil {
		t.Fatal(err)
	}
	st := l.State()
	l.Close()
	// The segment was closed half an hour ago, as far as its file says.
	seg := filepath.Join(dir, segmentName(0)+logSuffix)
	closed := now.Add(-30 * time.Minute).Truncate(time.Second) // what any filesystem keeps
	if err := os.Chtimes(seg, time.Time{}, closed); err != nil {
		t.Fatal(err)
	}

	l = openLog(t, dir, cfg, st, &clock{t: now})
	if cs, err := l.Compact(now, NoMaxOffset, nil); err != nil || cs.RecordsRemoved != 1 {
		t.Fatalf("compaction: %+v, %v; want v1 removed and the tombstone kept", cs, err)
	}
	if got := readRecords(t, l, 0); len(got) != 3 {
		t.Fatalf("after the first compaction: %v, want the tombstone at 1, x1 and y1", got)
	}
	if fi, err := os.Stat(seg); err != nil || !fi.ModTime().Equal(closed) {
		t.Fatalf("the rewritten segment's time: %v (%v), want %v", fi.ModTime(), err, closed)
	}
	st = l.State()
	l.Close()

	l = openLog(t, dir, cfg, st, &clock{t: now})
	defer l.Close()
	if _, err := l.Compact(now.Add(20*time.Minute), NoMaxOffset, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := readRecords(t, l, 0)[1]; !ok {
		t.Fatal("the tombstone went 50 minutes after its segment was closed (delete.retention.ms is an hour)")
	}
	if _, err := l.Compact(now.Add(31*time.Minute), NoMaxOffset, nil); err != nil {
		t.Fatal(err)
	}
	if got := readRecords(t, l, 0); len(got) != 2 {
		t.Fatalf("61 minutes after its segment was closed: %v, want the tombstone gone", got)
	}
}

// Without a way to tell committed transactions from aborted ones,
// compaction keeps transactional batches whole and lets their records
// supersede nothing: an aborted write must never cost a committed record.
func TestCompactionWithoutTransactionOutcomes(t *testing.T) {
	c := &clock{t: t0}
	l := compactedLog(t, t.TempDir(), c)
	defer l.Close()
	if _, err := l.Compact(t0.Add(500*time.Millisecond), NoMaxOffset, nil); err != nil {
		t.Fatal(err)
	}
	got := readRecords(t, l, 0)
	if got[3] != "a2" || got[9] != "a3" {
		t.Fatalf("k1's a2 at 3 and transactional a3 at 9 must both stay: %v", got)
	}
}
