package log

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"skein/libs/record"
)

// layout is where each batch of a closed log sits on disk.
type batchLoc struct {
	seg       Offset // segment base
	pos, size int64
	base      Offset
	next      Offset
}

// buildCrashLog writes a multi-segment log with batches of varied sizes and
// epochs, closes it, and returns its records, batch locations and state.
func buildCrashLog(t *testing.T, dir string) (map[Offset]string, []batchLoc, State) {
	t.Helper()
	c := &clock{t: t0}
	l := openLog(t, dir, smallConfig(), State{}, c)
	for i := range 24 {
		n := 1 + i%3
		if _, err := l.Append(valuesBatch(t, int(l.LEO()), n, 20+i*7%90, int64(i)), Epoch(i/6)); err != nil {
			t.Fatal(err)
		}
	}
	want := readRecords(t, l, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var locs []batchLoc
	for _, base := range l.SegmentBases() {
		data, err := os.ReadFile(filepath.Join(dir, segmentName(base)+logSuffix))
		if err != nil {
			t.Fatal(err)
		}
		it := record.NewBatchIter(data)
		for it.Next() {
			b := it.Batch()
			locs = append(locs, batchLoc{seg: base, pos: int64(it.Pos() - len(b)), size: int64(len(b)), base: b.BaseOffset(), next: b.NextOffset()})
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
	}
	if len(l.SegmentBases()) < 4 {
		t.Fatalf("want several segments, got %v", l.SegmentBases())
	}
	return want, locs, l.State()
}

// snapshot is a directory's files in memory. Restoring it into one reused
// directory, rather than copying into a fresh one per case, keeps these tests
// fast on file systems where creating files is slow.
type snapshot map[string][]byte

func takeSnapshot(t *testing.T, dir string) snapshot {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	snap := snapshot{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		snap[e.Name()] = data
	}
	return snap
}

func (snap snapshot) restore(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := snap[e.Name()]; !ok {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	for name, data := range snap {
		path := filepath.Join(dir, name)
		if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
			continue
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkRecovered reopens dir and checks that the log ends at wantLEO and
// holds exactly the reference records below it, and that it takes appends.
func checkRecovered(t *testing.T, dir string, st State, want map[Offset]string, wantLEO Offset, what string) {
	t.Helper()
	c := &clock{t: t0}
	l, err := Open(dir, smallConfig(), Options{State: st, Now: c.now})
	if err != nil {
		t.Fatalf("%s: open: %v", what, err)
	}
	defer l.Close()
	if l.LEO() != wantLEO {
		t.Fatalf("%s: LEO %d, want %d", what, l.LEO(), wantLEO)
	}
	got := readRecords(t, l, 0)
	exp := map[Offset]string{}
	for o, v := range want {
		if o < wantLEO {
			exp[o] = v
		}
	}
	if !maps.Equal(got, exp) {
		t.Fatalf("%s: recovered records differ: %d records, want %d", what, len(got), len(exp))
	}
	// A read at every offset finds the batch holding it (through the index).
	buf := make([]byte, 0, 4096)
	for o := l.LogStartOffset(); o < wantLEO; o++ {
		res, err := l.ReadInto(buf, o, 1, NoMaxOffset)
		b := record.Batch(res.Records)
		if err != nil || len(b) < record.HeaderSize || b.BaseOffset() > o || b.LastOffset() < o || b.Verify() != nil {
			t.Fatalf("%s: read at %d: %v", what, o, err)
		}
	}
	for _, e := range l.Epochs() {
		if e.StartOffset >= wantLEO && wantLEO > 0 {
			t.Fatalf("%s: epoch cache %v runs past the LEO %d", what, l.Epochs(), wantLEO)
		}
	}
	epoch := max(l.LatestEpoch(), 0) // an epoch change would cost fsyncs in every case
	if info, err := l.Append(valuesBatch(t, 0, 1, 5, 0), epoch); err != nil || info.FirstOffset != wantLEO {
		t.Fatalf("%s: append after recovery: %+v %v", what, info, err)
	}
}

// TestRecoverTornWrites cuts segment files at many byte positions, as a
// crash in the middle of writes leaves them, and reopens with and without
// the recovery point.
func TestRecoverTornWrites(t *testing.T) {
	src := t.TempDir()
	want, locs, st := buildCrashLog(t, src)
	snap := takeSnapshot(t, src)
	dir := t.TempDir()
	segs := map[Offset][]batchLoc{}
	var bases []Offset
	for _, b := range locs {
		if len(segs[b.seg]) == 0 {
			bases = append(bases, b.seg)
		}
		segs[b.seg] = append(segs[b.seg], b)
	}
	// The last segment, and one in the middle (whose later segments must go).
	for _, seg := range []Offset{bases[len(bases)-1], bases[1]} {
		batches := segs[seg]
		end := batches[len(batches)-1].pos + batches[len(batches)-1].size
		// Every 11th byte, plus both sides of every batch boundary and a cut
		// inside each header.
		cuts := map[int64]bool{}
		for cut := int64(0); cut < end; cut += 11 {
			cuts[cut] = true
		}
		for _, b := range batches {
			cuts[b.pos+1], cuts[b.pos+b.size-1], cuts[b.pos+record.HeaderSize-1] = true, true, true
		}
		for cut := range cuts {
			// Expected: the log ends after the last batch wholly before the cut.
			wantLEO := seg
			for _, b := range batches {
				if b.pos+b.size <= cut {
					wantLEO = b.next
				}
			}
			for _, state := range []State{{}, st} {
				snap.restore(t, dir)
				if err := os.Truncate(filepath.Join(dir, segmentName(seg)+logSuffix), cut); err != nil {
					t.Fatal(err)
				}
				checkRecovered(t, dir, state, want, wantLEO, fmt.Sprintf("segment %d cut at %d, recovery point %d", seg, cut, state.RecoveryPoint))
			}
		}
	}
}

// TestRecoverBitFlips flips one bit at many positions and reopens with no
// recovery point: the log must end before the damaged batch. The one field
// a flip can hide in is the partition leader epoch, which no checksum covers
// (as in Kafka); the records still read back unchanged then.
func TestRecoverBitFlips(t *testing.T) {
	src := t.TempDir()
	want, locs, _ := buildCrashLog(t, src)
	snap := takeSnapshot(t, src)
	dir := t.TempDir()
	last := locs[len(locs)-1].next
	for i, b := range locs {
		if i%4 != 0 && i != len(locs)-1 {
			continue // every fourth batch keeps the test fast; all header fields are hit below
		}
		// Both ends of every header field, and a few places in the records.
		positions := []int64{0, 7, 8, 11, 12, 15, 16, 17, 20, 21, 23, 27, 35, 43, 51, 53, 57, 60}
		for q := int64(1); q <= 2; q++ {
			positions = append(positions, record.HeaderSize+(b.size-record.HeaderSize-1)*q/2)
		}
		{
			for _, p := range positions {
				wantLEO := b.base
				if p >= 12 && p < 16 { // partitionLeaderEpoch
					wantLEO = last
				}
				snap.restore(t, dir)
				path := filepath.Join(dir, segmentName(b.seg)+logSuffix)
				f, err := os.OpenFile(path, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				one := make([]byte, 1)
				f.ReadAt(one, b.pos+p)
				one[0] ^= 1 << (p % 8)
				f.WriteAt(one, b.pos+p)
				f.Close()
				checkRecovered(t, dir, State{}, want, wantLEO, fmt.Sprintf("bit %d of byte %d of batch %d", p%8, p, b.base))
			}
		}
	}
}

// TestRecoverBadIndexes damages the index files of segments below the
// recovery point (the ones open trusts) and checks that reads stay right.
func TestRecoverBadIndexes(t *testing.T) {
	src := t.TempDir()
	want, locs, st := buildCrashLog(t, src)
	snap := takeSnapshot(t, src)
	dir := t.TempDir()
	seg := locs[len(locs)/2].seg
	damage := map[string]func([]byte) []byte{
		"missing":    nil,
		"empty":      func([]byte) []byte { return nil },
		"torn entry": func(b []byte) []byte { return b[:len(b)-3] },
		"zeroed":     func(b []byte) []byte { return make([]byte, len(b)) },
		"garbage": func(b []byte) []byte {
			g := make([]byte, len(b))
			for i := range g {
				g[i] = byte(i * 37)
			}
			return g
		},
		"shifted":        func(b []byte) []byte { b = append([]byte(nil), b...); b[len(b)-1]++; return b },
		"stale and long": func(b []byte) []byte { return append(append([]byte(nil), b...), 0, 0, 1, 0, 0, 0, 9, 0) },
		// The first entry points a few bytes off while the last is right:
		// open cannot tell, so readers must (the offset index case).
		"first entry off": func(b []byte) []byte { b = append([]byte(nil), b...); b[7] += 3; return b },
	}
	for name, f := range damage {
		for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
			snap.restore(t, dir)
			path := filepath.Join(dir, segmentName(seg)+suffix)
			if f == nil {
				os.Remove(path)
			} else {
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if len(data) < 2*timeEntrySize {
					t.Fatalf("%s has fewer than two entries; the test needs them", path)
				}
				os.WriteFile(path, f(data), 0o644)
			}
			checkRecovered(t, dir, st, want, locs[len(locs)-1].next, name+" "+suffix)
		}
	}
}

// TestRecoverLeftovers checks that an interrupted compaction or checkpoint
// write leaves nothing that open trips over.
func TestRecoverLeftovers(t *testing.T) {
	src := t.TempDir()
	want, locs, st := buildCrashLog(t, src)
	dir := t.TempDir()
	takeSnapshot(t, src).restore(t, dir)
	os.WriteFile(filepath.Join(dir, segmentName(locs[0].seg)+logSuffix+cleanedSuffix), []byte("half written"), 0o644)
	os.WriteFile(filepath.Join(dir, epochFile+".tmp"), []byte("0\n"), 0o644)
	checkRecovered(t, dir, st, want, locs[len(locs)-1].next, "leftovers")
	if m, _ := filepath.Glob(filepath.Join(dir, "*.cleaned")); len(m) != 0 {
		t.Fatalf("leftover %v not removed", m)
	}
}

// RecoveryCut says whether Open cut a torn or damaged tail: the storage
// node logs it, since what lay past the cut is on the other replicas only.
func TestRecoveryCutIsReported(t *testing.T) {
	src := t.TempDir()
	_, locs, st := buildCrashLog(t, src)
	last := locs[len(locs)-1]
	for _, tc := range []struct {
		name string
		cut  int64 // bytes left in the last batch's segment; -1: untouched
		want bool
	}{
		{"untouched", -1, false},
		{"torn inside the last batch", last.pos + last.size - 3, true},
		{"ending at a batch boundary", last.pos, false},
	} {
		dir := t.TempDir()
		takeSnapshot(t, src).restore(t, dir)
		if tc.cut >= 0 {
			if err := os.Truncate(filepath.Join(dir, segmentName(last.seg)+logSuffix), tc.cut); err != nil {
				t.Fatal(err)
			}
		}
		l, err := Open(dir, smallConfig(), Options{State: State{RecoveryPoint: st.RecoveryPoint}, Now: (&clock{t: t0}).now})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := l.RecoveryCut(); got != tc.want {
			t.Errorf("%s: RecoveryCut %v, want %v (LEO %d)", tc.name, got, tc.want, l.LEO())
		}
		l.Close()
	}
}
