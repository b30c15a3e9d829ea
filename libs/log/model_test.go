package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"pgregory.net/rapid"

	"skein/libs/errs"
	"skein/libs/record"
)

// The model: the log as a list of batches of values, and a start offset.
type modelBatch struct {
	base   Offset
	values []string
	size   int
}

func (b modelBatch) next() Offset { return b.base + Offset(len(b.values)) }

type model struct {
	batches []modelBatch
	start   Offset // log start offset
	empty   Offset // the LEO when there are no batches
}

func (m *model) leo() Offset {
	if n := len(m.batches); n > 0 {
		return m.batches[n-1].next()
	}
	return m.empty
}

// holding returns the index of the batch holding offset.
func (m *model) holding(o Offset) int {
	for i, b := range m.batches {
		if o < b.next() {
			return i
		}
	}
	return len(m.batches)
}

// logMachine drives a Log and the model with the same random operations.
type logMachine struct {
	base  string // parent of the log directory
	dir   string
	cfg   Config
	clock *clock
	l     *Log
	m     model
	seq   int // makes every value unique
	epoch Epoch
}

func (lm *logMachine) init(t *rapid.T) {
	lm.cfg = DefaultConfig()
	lm.cfg.SegmentBytes = int64(rapid.IntRange(150, 3000).Draw(t, "segment.bytes"))
	lm.cfg.IndexIntervalBytes = int64(rapid.IntRange(0, 600).Draw(t, "index.interval.bytes"))
	lm.cfg.RetentionMS = -1
	// flush.messages=1 zero-fills the active segment ahead of the appends.
	lm.cfg.FlushMessages = rapid.SampledFrom([]int64{lm.cfg.FlushMessages, 1}).Draw(t, "flush.messages")
	lm.clock = &clock{t: t0}
	var err error
	if lm.dir, err = os.MkdirTemp(lm.base, "log"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if lm.l != nil {
			lm.l.Close()
		}
		os.RemoveAll(lm.dir)
	})
	lm.open(t, State{})
}

func (lm *logMachine) open(t *rapid.T, st State) {
	l, err := Open(lm.dir, lm.cfg, Options{State: st, Now: lm.clock.now})
	if err != nil {
		t.Fatal(err)
	}
	lm.l = l
}

func (lm *logMachine) Append(t *rapid.T) {
	n := rapid.IntRange(1, 4).Draw(t, "records")
	size := rapid.IntRange(1, 300).Draw(t, "value size")
	lm.epoch += Epoch(rapid.IntRange(0, 1).Draw(t, "epoch bump"))
	codec := rapid.SampledFrom([]record.Compression{record.None, record.None, record.LZ4}).Draw(t, "codec")
	var recs []kv
	var values []string
	for range n {
		lm.seq++
		v := fmt.Sprintf("%d:%0*d", lm.seq, size, lm.seq)
		recs = append(recs, kv{key: []byte("k"), value: []byte(v), ts: int64(lm.seq)})
		values = append(values, v)
	}
	b := batchWith(t, codec, recs...)
	info, err := lm.l.Append(b, lm.epoch)
	if err != nil {
		t.Fatal(err)
	}
	if info.FirstOffset != lm.m.leo() || info.LastOffset != lm.m.leo()+Offset(n-1) {
		t.Fatalf("append got offsets %d-%d, model LEO %d", info.FirstOffset, info.LastOffset, lm.m.leo())
	}
	lm.m.batches = append(lm.m.batches, modelBatch{base: info.FirstOffset, values: values, size: len(b)})
}

func (lm *logMachine) Read(t *rapid.T) {
	offset := Offset(rapid.IntRange(int(lm.m.start)-2, int(lm.m.leo())+2).Draw(t, "offset"))
	maxBytes := rapid.IntRange(1, 2000).Draw(t, "maxBytes")
	maxOffset := NoMaxOffset
	if rapid.Bool().Draw(t, "bounded") {
		maxOffset = Offset(rapid.IntRange(int(lm.m.start), int(lm.m.leo())+1).Draw(t, "maxOffset"))
	}
	maxRecords, stopAfter := 0, NoMaxOffset
	if rapid.Bool().Draw(t, "records bounded") {
		maxRecords = rapid.IntRange(1, 6).Draw(t, "maxRecords")
		stopAfter = offset + Offset(maxRecords) - 1
	}
	res, err := lm.l.ReadRecordsInto(nil, offset, maxBytes, maxOffset, maxRecords)
	if offset < lm.m.start || offset > lm.m.leo() {
		if !errors.Is(err, errs.OffsetOutOfRange) {
			t.Fatalf("read at %d outside [%d, %d]: %v", offset, lm.m.start, lm.m.leo(), err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	// Expected: whole batches from the one holding offset, while below
	// maxOffset; at least one, then within maxBytes. A segment boundary may
	// end the read earlier, so what came back must be a non-empty prefix of
	// that when anything qualifies.
	i := lm.m.holding(offset)
	qualifies := i < len(lm.m.batches) && lm.m.batches[i].next()-1 < maxOffset
	it := record.NewBatchIter(res.Records)
	var ri record.RecordIter
	total, k := 0, 0
	for ; it.Next(); k++ {
		b := it.Batch()
		if i+k >= len(lm.m.batches) {
			t.Fatalf("read returned more batches than the model has")
		}
		mb := lm.m.batches[i+k]
		if b.BaseOffset() != mb.base || b.NextOffset() != mb.next() || len(b) != mb.size || b.LastOffset() >= maxOffset {
			t.Fatalf("batch %d: got %d-%d (%d bytes), model %d-%d (%d bytes), maxOffset %d", k, b.BaseOffset(), b.LastOffset(), len(b), mb.base, mb.next()-1, mb.size, maxOffset)
		}
		if k > 0 && lm.m.batches[i+k-1].next()-1 >= stopAfter {
			t.Fatalf("batch %d (%d-%d) read after the one holding %d (maxRecords %d from %d)", k, b.BaseOffset(), b.LastOffset(), stopAfter, maxRecords, offset)
		}
		total += len(b)
		if k > 0 && total > maxBytes {
			t.Fatalf("read returned %d bytes for maxBytes %d", total, maxBytes)
		}
		if err := ri.Reset(b); err != nil {
			t.Fatal(err)
		}
		for j := 0; ri.Next(); j++ {
			if string(ri.Record().Value) != mb.values[j] {
				t.Fatalf("offset %d holds %q, model %q", ri.Offset(), ri.Record().Value, mb.values[j])
			}
		}
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	if qualifies != (k > 0) {
		t.Fatalf("read at %d (maxOffset %d) returned %d batches; model says qualifies=%v", offset, maxOffset, k, qualifies)
	}
	if k == 0 && res.NextOffset != offset || k > 0 && res.NextOffset != lm.m.batches[i+k-1].next() {
		t.Fatalf("next offset %d", res.NextOffset)
	}
}

func (lm *logMachine) Truncate(t *rapid.T) {
	to := Offset(rapid.IntRange(int(lm.m.start), int(lm.m.leo())).Draw(t, "truncate to"))
	if err := lm.l.Truncate(to); err != nil {
		t.Fatal(err)
	}
	i := lm.m.holding(to)
	if i < len(lm.m.batches) {
		lm.m.empty = lm.m.batches[i].base
		lm.m.batches = lm.m.batches[:i]
	}
	if lm.m.start > lm.m.leo() {
		lm.m.start = lm.m.leo()
	}
}

func (lm *logMachine) DeleteRecords(t *rapid.T) {
	to := Offset(rapid.IntRange(int(lm.m.start), int(lm.m.leo())).Draw(t, "delete before"))
	if err := lm.l.DeleteRecordsBefore(to); err != nil {
		t.Fatal(err)
	}
	lm.m.start = to
	lm.dropBelowStart()
}

func (lm *logMachine) RetainBytes(t *rapid.T) {
	cfg := lm.cfg
	cfg.RetentionBytes = int64(rapid.IntRange(0, 4000).Draw(t, "retention.bytes"))
	lm.l.SetConfig(cfg)
	before := lm.l.Size()
	if _, err := lm.l.DeleteExpired(lm.clock.now(), lm.l.LEO()); err != nil {
		t.Fatal(err)
	}
	lm.l.SetConfig(lm.cfg)
	start := lm.l.LogStartOffset()
	if start < lm.m.start {
		t.Fatalf("retention moved the start back from %d to %d", lm.m.start, start)
	}
	if start != lm.m.start {
		// It may only land on a batch boundary, and may only have deleted
		// while at least retention.bytes remain.
		if i := lm.m.holding(start); i < len(lm.m.batches) && lm.m.batches[i].base != start {
			t.Fatalf("retention cut inside a batch at %d", start)
		}
		if after := lm.l.Size(); after < cfg.RetentionBytes || after >= before {
			t.Fatalf("retention.bytes %d: %d bytes became %d", cfg.RetentionBytes, before, after)
		}
	}
	lm.m.start = start
	lm.dropBelowStart()
}

func (lm *logMachine) dropBelowStart() {
	for len(lm.m.batches) > 0 && lm.m.batches[0].next() <= lm.m.start {
		lm.m.empty = lm.m.batches[0].next()
		lm.m.batches = lm.m.batches[1:]
	}
}

func (lm *logMachine) Reopen(t *rapid.T) {
	st := lm.l.State()
	if err := lm.l.Close(); err != nil {
		t.Fatal(err)
	}
	lm.l = nil
	if rapid.Bool().Draw(t, "lose the recovery point") {
		st.RecoveryPoint = 0
	}
	lm.open(t, State{LogStartOffset: st.LogStartOffset, RecoveryPoint: st.RecoveryPoint})
}

// Crash opens a copy of the files as they are, without closing the log
// first (its unflushed writes are in the copy, as after a process crash):
// the copy ends where the log did, whatever zeros follow its batches.
func (lm *logMachine) Crash(t *rapid.T) {
	st := lm.l.State()
	dir, err := os.MkdirTemp(lm.base, "crashed")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(lm.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(lm.dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lm.l.Close()
	os.RemoveAll(lm.dir)
	lm.l, lm.dir = nil, dir
	if rapid.Bool().Draw(t, "lose the recovery point") {
		st.RecoveryPoint = 0
	}
	lm.open(t, State{LogStartOffset: st.LogStartOffset, RecoveryPoint: st.RecoveryPoint})
}

func (lm *logMachine) FollowerAppendElsewhere(t *rapid.T) {
	// A batch at any offset but the LEO is refused and changes nothing.
	off := lm.m.leo() + Offset(rapid.SampledFrom([]int{-1, 1, 5}).Draw(t, "skew"))
	b := batchOf(t, kv{key: []byte("x"), value: []byte("y")})
	record.Batch(b).SetBaseOffset(off)
	if _, err := lm.l.AppendAsFollower(b); !errors.Is(err, errs.OffsetOutOfRange) {
		t.Fatalf("follower append at %d with LEO %d: %v", off, lm.m.leo(), err)
	}
}

func (lm *logMachine) Check(t *rapid.T) {
	if lm.l.LEO() != lm.m.leo() || lm.l.LogStartOffset() != lm.m.start {
		t.Fatalf("LEO %d start %d, model %d %d", lm.l.LEO(), lm.l.LogStartOffset(), lm.m.leo(), lm.m.start)
	}
	got := readRecords(t, lm.l, lm.m.start)
	n := 0
	for _, b := range lm.m.batches {
		for j, v := range b.values {
			o := b.base + Offset(j)
			if o < lm.m.start {
				continue
			}
			n++
			if got[o] != v {
				t.Fatalf("offset %d = %q, model %q", o, got[o], v)
			}
		}
	}
	if n != len(got) {
		t.Fatalf("log holds %d records from %d, model %d", len(got), lm.m.start, n)
	}
}

func TestLogModel(t *testing.T) {
	base := t.TempDir()
	rapid.Check(t, func(t *rapid.T) {
		lm := &logMachine{base: base}
		lm.init(t)
		t.Repeat(rapid.StateMachineActions(lm))
	})
}
