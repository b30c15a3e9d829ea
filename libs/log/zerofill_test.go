package log

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"testing"
)

// fsyncingConfig is a log that fsyncs every append, so it zero-fills ahead.
func fsyncingConfig(segmentBytes int64) Config {
	c := DefaultConfig()
	c.SegmentBytes = segmentBytes
	c.IndexIntervalBytes = 128
	c.FlushMessages = 1
	return c
}

func fileSizes(t *testing.T, dir string, bases []Offset) []int64 {
	t.Helper()
	var sizes []int64
	for _, base := range bases {
		fi, err := os.Stat(filepath.Join(dir, segmentName(base)+logSuffix))
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, fi.Size())
	}
	return sizes
}

// appendSynced appends n batches and waits for each one's fsync, as a
// storage node does under flush.messages=1.
func appendSynced(t *testing.T, l *Log, n int) {
	t.Helper()
	for i := range n {
		info, err := l.Append(valuesBatch(t, int(l.LEO()), 2, 300, int64(i)), 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.SyncIfDue(info.LastOffset + 1); err != nil {
			t.Fatal(err)
		}
	}
}

func TestZeroFillAheadOfAppends(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: t0}
	l := openLog(t, dir, fsyncingConfig(8<<20), State{}, c)
	appendSynced(t, l, 20)
	want := readRecords(t, l, 0)
	if len(want) != 40 {
		t.Fatalf("read %d records, want 40", len(want))
	}
	if got := fileSizes(t, dir, l.SegmentBases()); len(got) != 1 || got[0] != zeroFillChunk || l.Size() >= zeroFillChunk {
		t.Fatalf("file sizes %v and log size %d: want one file of %d bytes holding the batches and zeros", got, l.Size(), zeroFillChunk)
	}

	// A crash now leaves the zeros on disk: the log ends at its last batch.
	crashed := t.TempDir()
	takeSnapshot(t, dir).restore(t, crashed)
	for _, st := range []State{{}, l.State()} {
		takeSnapshot(t, dir).restore(t, crashed)
		r := openLog(t, crashed, fsyncingConfig(8<<20), st, c)
		if r.LEO() != l.LEO() || r.Size() != l.Size() || !maps.Equal(readRecords(t, r, 0), want) {
			t.Fatalf("recovered from recovery point %d: LEO %d size %d, want %d and %d", st.RecoveryPoint, r.LEO(), r.Size(), l.LEO(), l.Size())
		}
		if got := fileSizes(t, crashed, r.SegmentBases()); got[0] != l.Size() {
			t.Fatalf("recovery left a file of %d bytes, want the %d of its batches", got[0], l.Size())
		}
		appendSynced(t, r, 1)
		if r.LEO() != l.LEO()+2 {
			t.Fatalf("append after recovery: LEO %d, want %d", r.LEO(), l.LEO()+2)
		}
		r.Close()
	}

	// Close cuts the zeros, so the file is trusted as it is on the next open.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fileSizes(t, dir, l.SegmentBases()); got[0] != l.Size() {
		t.Fatalf("closed file of %d bytes, want %d", got[0], l.Size())
	}
	r := openLog(t, dir, fsyncingConfig(8<<20), l.State(), c)
	defer r.Close()
	if r.LEO() != l.LEO() || !maps.Equal(readRecords(t, r, 0), want) {
		t.Fatalf("reopened: LEO %d, want %d", r.LEO(), l.LEO())
	}
}

// A log that does not fsync often writes no zeros.
func TestNoZeroFillWithoutFrequentFsyncs(t *testing.T) {
	dir := t.TempDir()
	cfg := fsyncingConfig(8 << 20)
	cfg.FlushMessages = zeroFillFlushMessages + 1
	l := openLog(t, dir, cfg, State{}, &clock{t: t0})
	defer l.Close()
	appendSynced(t, l, 5)
	if got := fileSizes(t, dir, l.SegmentBases()); got[0] != l.Size() {
		t.Fatalf("file of %d bytes, want the %d of its batches", got[0], l.Size())
	}
	// Turning frequent fsyncs on starts zero-filling after the batches.
	cfg.FlushMessages = 1
	l.SetConfig(cfg)
	before := l.Size()
	appendSynced(t, l, 1)
	if got := fileSizes(t, dir, l.SegmentBases()); got[0] != zeroFillChunk {
		t.Fatalf("file of %d bytes after flush.messages=1, want %d", got[0], zeroFillChunk)
	}
	want := readRecords(t, l, 0)
	if len(want) != 12 || l.Size() <= before {
		t.Fatalf("%d records in %d bytes, want 12 in more than %d", len(want), l.Size(), before)
	}
}

func TestZeroFillRollCutsTheSegment(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, fsyncingConfig(4<<10), State{}, &clock{t: t0})
	defer l.Close()
	appendSynced(t, l, 30)
	bases := l.SegmentBases()
	if len(bases) < 3 {
		t.Fatalf("want several segments, got %v", bases)
	}
	sizes := fileSizes(t, dir, bases)
	var closed int64
	for _, n := range sizes[:len(sizes)-1] {
		if n > 4<<10 {
			t.Fatalf("a rolled segment kept its zeros: file sizes %v", sizes)
		}
		closed += n
	}
	if sizes[len(sizes)-1] != zeroFillChunk {
		t.Fatalf("active segment file of %d bytes, want %d", sizes[len(sizes)-1], zeroFillChunk)
	}
	if active := l.Size() - closed; active <= 0 || active >= zeroFillChunk {
		t.Fatalf("active segment holds %d bytes of batches", active)
	}
	if got := readRecords(t, l, 0); len(got) != 60 {
		t.Fatalf("read %d records, want 60", len(got))
	}
}

// Zeros after a closed segment's batches are a roll whose cut a crash lost:
// the segments after it stay. Anything else after its batches is a torn
// write, and the log ends there, as before.
func TestRecoverZeroTail(t *testing.T) {
	dir := t.TempDir()
	want, locs, st := buildCrashLog(t, dir)
	snap := takeSnapshot(t, dir)
	mid := locs[len(locs)/2].seg
	name := segmentName(mid) + logSuffix
	if mid == locs[len(locs)-1].seg {
		t.Fatal("want a segment in the middle")
	}
	leo := locs[len(locs)-1].next
	var midEnd Offset
	for _, loc := range locs {
		if loc.seg == mid {
			midEnd = loc.next
		}
	}
	for _, tc := range []struct {
		name    string
		tail    []byte
		wantLEO Offset
	}{
		{"zeros", make([]byte, 5000), leo},
		{"one zero", []byte{0}, leo},
		{"garbage then zeros", append([]byte{7}, make([]byte, 5000)...), midEnd},
		{"zeros then garbage", append(make([]byte, 5000), 7), midEnd},
	} {
		for _, from := range []State{{}, {LogStartOffset: st.LogStartOffset, RecoveryPoint: mid}} {
			snap.restore(t, dir)
			f, err := os.OpenFile(filepath.Join(dir, name), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(tc.tail); err != nil {
				t.Fatal(err)
			}
			f.Close()
			checkRecovered(t, dir, from, want, tc.wantLEO, tc.name)
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(data, snap[name]) {
				t.Fatalf("%s: the segment holds %d bytes after recovery, want its %d", tc.name, len(data), len(snap[name]))
			}
		}
	}
}

func TestZeroFillTruncate(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: t0}
	l := openLog(t, dir, fsyncingConfig(8<<20), State{}, c)
	defer l.Close()
	appendSynced(t, l, 10)
	if err := l.Truncate(7); err != nil {
		t.Fatal(err)
	}
	if l.LEO() != 6 {
		t.Fatalf("LEO %d after truncating at 7, want 6 (batches of two)", l.LEO())
	}
	if got := fileSizes(t, dir, l.SegmentBases()); got[0] != l.Size() {
		t.Fatalf("file of %d bytes after truncation, want %d", got[0], l.Size())
	}
	appendSynced(t, l, 3)
	want := readRecords(t, l, 0)
	if len(want) != 12 || l.LEO() != 12 {
		t.Fatalf("%d records, LEO %d: want 12 and 12", len(want), l.LEO())
	}
	crashed := t.TempDir()
	takeSnapshot(t, dir).restore(t, crashed)
	r := openLog(t, crashed, fsyncingConfig(8<<20), State{}, c)
	defer r.Close()
	if r.LEO() != 12 || !maps.Equal(readRecords(t, r, 0), want) {
		t.Fatalf("recovered LEO %d, want 12", r.LEO())
	}
}
