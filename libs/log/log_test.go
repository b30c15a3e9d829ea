package log

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"skein/libs/errs"
	"skein/libs/record"
)

func smallConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 1024
	c.IndexIntervalBytes = 128
	return c
}

func TestAppendAssignsOffsetsAndEpoch(t *testing.T) {
	c := &clock{t: t0}
	l := openLog(t, t.TempDir(), DefaultConfig(), State{}, c)
	defer l.Close()
	b := batchOf(t, kv{key: []byte("a"), value: []byte("1"), ts: 10}, kv{key: []byte("b"), value: []byte("2"), ts: 20})
	b2 := append([]byte(nil), b...)
	info, err := l.Append(b, 5)
	if err != nil {
		t.Fatal(err)
	}
	if info.FirstOffset != 0 || info.LastOffset != 1 || info.MaxTimestamp != 20 {
		t.Fatalf("%+v", info)
	}
	info, err = l.Append(b2, 5)
	if err != nil || info.FirstOffset != 2 || info.LastOffset != 3 || l.LEO() != 4 {
		t.Fatalf("%+v %v", info, err)
	}
	res, err := l.Read(2, 1<<20, NoMaxOffset)
	if err != nil {
		t.Fatal(err)
	}
	got := record.Batch(res.Records)
	if got.BaseOffset() != 2 || got.PartitionLeaderEpoch() != 5 || got.Verify() != nil || res.NextOffset != 4 {
		t.Fatalf("base %d epoch %d next %d", got.BaseOffset(), got.PartitionLeaderEpoch(), res.NextOffset)
	}
	// Stored byte for byte apart from the two rewritten fields.
	if !bytes.Equal(got[21:], b2[21:]) {
		t.Fatal("the batch was changed beyond base offset and leader epoch")
	}
}

func TestAppendValidation(t *testing.T) {
	c := &clock{t: t0}
	cfg := DefaultConfig()
	cfg.MaxMessageBytes = 200
	l := openLog(t, t.TempDir(), cfg, State{}, c)
	defer l.Close()
	good := batchOf(t, kv{key: []byte("k"), value: []byte("v")})
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)-1] ^= 1
	noKey := batchOf(t, kv{value: []byte("v")})
	cases := []struct {
		name string
		in   []byte
		want *errs.Error
	}{
		{"crc", flipped, errs.CorruptMessage},
		{"torn", good[:len(good)-2], errs.CorruptMessage},
		{"empty", nil, errs.InvalidRecord},
		{"too large", valuesBatch(t, 0, 3, 100, 0), errs.MessageTooLarge},
		{"codec 6", func() []byte {
			b := append([]byte(nil), good...)
			b[22] |= 6
			record.Batch(b).SetMaxTimestamp(false, record.Batch(b).MaxTimestamp()) // recompute the CRC
			return b
		}(), errs.UnsupportedCompressionType},
	}
	for _, tc := range cases {
		if _, err := l.Append(tc.in, 0); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %s", tc.name, err, tc.want.Name)
		}
	}
	if l.LEO() != 0 {
		t.Fatalf("refused appends moved the LEO to %d", l.LEO())
	}
	// A compacted topic refuses records without a key.
	cfg.CleanupPolicy = CleanupCompact
	l.SetConfig(cfg)
	if _, err := l.Append(noKey, 0); !errors.Is(err, errs.InvalidRecord) {
		t.Fatalf("null key on a compacted topic: %v", err)
	}
	if _, err := l.Append(good, 0); err != nil {
		t.Fatal(err)
	}
}

func TestAppendManyBatchesAtOnce(t *testing.T) {
	l := openLog(t, t.TempDir(), smallConfig(), State{}, &clock{t: t0})
	defer l.Close()
	var in []byte
	for i := range 3 {
		in = append(in, valuesBatch(t, i*2, 2, 10, 0)...)
	}
	info, err := l.Append(in, 1)
	if err != nil || info.FirstOffset != 0 || info.LastOffset != 5 {
		t.Fatalf("%+v %v", info, err)
	}
	got := readRecords(t, l, 0)
	for i := range 6 {
		if want := fmt.Sprintf("v%d........", i); got[Offset(i)] != want {
			t.Fatalf("offset %d = %q", i, got[Offset(i)])
		}
	}
}

func TestAppendAsFollower(t *testing.T) {
	leader := openLog(t, t.TempDir(), smallConfig(), State{}, &clock{t: t0})
	defer leader.Close()
	follower := openLog(t, t.TempDir(), smallConfig(), State{}, &clock{t: t0})
	defer follower.Close()
	for i := range 10 {
		if _, err := leader.Append(valuesBatch(t, i, 1, 50, int64(i)), Epoch(i/4)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := leader.Read(0, 300, NoMaxOffset)
	if err != nil {
		t.Fatal(err)
	}
	// Not at the LEO: refused.
	skip := record.NewBatchIter(res.Records)
	skip.Next()
	if _, err := follower.AppendAsFollower(res.Records[len(skip.Batch()):]); !errors.Is(err, errs.OffsetOutOfRange) {
		t.Fatalf("append past the LEO: %v", err)
	}
	for off := Offset(0); off < leader.LEO(); {
		res, err := leader.Read(off, 300, NoMaxOffset)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := follower.AppendAsFollower(res.Records); err != nil {
			t.Fatal(err)
		}
		off = res.NextOffset
	}
	// Again at an old offset: refused.
	res, _ = leader.Read(0, 100, NoMaxOffset)
	if _, err := follower.AppendAsFollower(res.Records); !errors.Is(err, errs.OffsetOutOfRange) {
		t.Fatalf("append below the LEO: %v", err)
	}
	if follower.LEO() != 10 {
		t.Fatalf("follower LEO %d", follower.LEO())
	}
	if fmt.Sprint(follower.Epochs()) != fmt.Sprint(leader.Epochs()) {
		t.Fatalf("epochs: follower %v leader %v", follower.Epochs(), leader.Epochs())
	}
	want := []EpochEntry{{0, 0}, {1, 4}, {2, 8}}
	if fmt.Sprint(leader.Epochs()) != fmt.Sprint(want) {
		t.Fatalf("leader epochs %v, want %v", leader.Epochs(), want)
	}
}

func TestReadBounds(t *testing.T) {
	l := openLog(t, t.TempDir(), DefaultConfig(), State{}, &clock{t: t0})
	defer l.Close()
	var sizes []int
	for i := range 5 {
		b := valuesBatch(t, i*3, 3, 100, 0) // offsets 3i..3i+2
		sizes = append(sizes, len(b))
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	batches := func(res ReadResult) []Offset {
		var out []Offset
		it := record.NewBatchIter(res.Records)
		for it.Next() {
			out = append(out, it.Batch().BaseOffset())
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
		return out
	}
	cases := []struct {
		name      string
		offset    Offset
		maxBytes  int
		maxOffset Offset
		want      []Offset
		next      Offset
	}{
		{"middle of a batch returns that batch", 4, sizes[0], NoMaxOffset, []Offset{3}, 6},
		{"at least one batch though maxBytes is 1", 0, 1, NoMaxOffset, []Offset{0}, 3},
		{"whole batches only", 0, sizes[0]*2 + 10, NoMaxOffset, []Offset{0, 3}, 6},
		{"everything", 0, 1 << 20, NoMaxOffset, []Offset{0, 3, 6, 9, 12}, 15},
		{"below the high watermark only", 0, 1 << 20, 9, []Offset{0, 3, 6}, 9},
		{"HW inside a batch excludes it", 0, 1 << 20, 10, []Offset{0, 3, 6}, 9},
		{"offset at the HW", 9, 1 << 20, 9, nil, 9},
		{"first batch not below the HW", 7, 1 << 20, 8, nil, 7},
		{"at the LEO", 15, 1 << 20, NoMaxOffset, nil, 15},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := l.Read(c.offset, c.maxBytes, c.maxOffset)
			if err != nil {
				t.Fatal(err)
			}
			if got := batches(res); fmt.Sprint(got) != fmt.Sprint(c.want) || res.NextOffset != c.next {
				t.Fatalf("batches %v next %d, want %v next %d", got, res.NextOffset, c.want, c.next)
			}
		})
	}
	for _, off := range []Offset{-1, 16} {
		if _, err := l.Read(off, 100, NoMaxOffset); !errors.Is(err, errs.OffsetOutOfRange) {
			t.Fatalf("read at %d: %v", off, err)
		}
	}
}

func TestRollBySizeAndTime(t *testing.T) {
	c := &clock{t: t0}
	cfg := smallConfig()
	cfg.SegmentMS = 1000
	dir := t.TempDir()
	l := openLog(t, dir, cfg, State{}, c)
	defer l.Close()
	b := valuesBatch(t, 0, 1, 300, 0)
	for range 6 {
		if _, err := l.Append(append([]byte(nil), b...), 0); err != nil {
			t.Fatal(err)
		}
	}
	// 369-byte batches, 1024-byte segments: two per segment.
	if got := fmt.Sprint(l.SegmentBases()); got != "[0 2 4]" {
		t.Fatalf("segments %s", got)
	}
	for _, base := range []string{"00000000000000000000", "00000000000000000002", "00000000000000000004"} {
		if _, err := os.Stat(filepath.Join(dir, base+".log")); err != nil {
			t.Fatal(err)
		}
	}
	// Time: by the batches' timestamps, 1001 ms after the segment's first.
	small := func(ts int64) []byte { return valuesBatch(t, 0, 1, 1, ts) }
	l.Roll()
	for _, ts := range []int64{5000, 6000, 6001} {
		if _, err := l.Append(small(ts), 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprint(l.SegmentBases()); got != "[0 2 4 6 8]" {
		t.Fatalf("after a time roll: segments %s", got)
	}
	// Without timestamps, by the clock since the segment was created.
	l.Roll()
	if _, err := l.Append(small(-1), 0); err != nil {
		t.Fatal(err)
	}
	c.advance(1001 * time.Millisecond)
	if _, err := l.Append(small(-1), 0); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(l.SegmentBases()); got != "[0 2 4 6 8 9 10]" {
		t.Fatalf("after a clock roll: segments %s", got)
	}
}

func TestIndexLookupsAcrossSegments(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4 << 10
	cfg.IndexIntervalBytes = 256
	dir := t.TempDir()
	c := &clock{t: t0}
	l := openLog(t, dir, cfg, State{}, c)
	for i := range 200 {
		if _, err := l.Append(valuesBatch(t, i*2, 2, 40, int64(1000+i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	check := func(l *Log) {
		t.Helper()
		for off := Offset(0); off < 400; off += 7 {
			res, err := l.Read(off, 1, NoMaxOffset)
			if err != nil {
				t.Fatal(err)
			}
			b := record.Batch(res.Records)
			if b.BaseOffset() != off/2*2 || len(res.Records) != b.Size() {
				t.Fatalf("read %d got batch %d", off, b.BaseOffset())
			}
		}
		for _, ts := range []int64{0, 1000, 1001, 1100, 1199} {
			got, ok, err := l.OffsetForTimestamp(ts)
			want := Offset(max(0, ts-1000) * 2)
			if err != nil || !ok || got.Offset != want || got.Timestamp != max(ts, 1000) {
				t.Fatalf("timestamp %d: %+v %v %v, want %d", ts, got, ok, err, want)
			}
		}
		if _, ok, _ := l.OffsetForTimestamp(1200); ok {
			t.Fatal("found an offset past every timestamp")
		}
	}
	check(l)
	if len(l.SegmentBases()) < 3 {
		t.Fatalf("want several segments, have %v", l.SegmentBases())
	}
	l.Close()
	// Reopened from the index files (clean), and with them gone (rebuilt).
	l = openLog(t, dir, cfg, l.State(), c)
	check(l)
	l.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "*index"))
	for _, f := range files {
		os.Remove(f)
	}
	l = openLog(t, dir, cfg, l.State(), c)
	check(l)
	l.Close()
}

func TestEndOffsetForEpoch(t *testing.T) {
	l := openLog(t, t.TempDir(), smallConfig(), State{}, &clock{t: t0})
	defer l.Close()
	// epoch 1: offsets 0-3, epoch 3: 4-5, epoch 4: 6-9
	for i, e := range []Epoch{1, 1, 3, 4, 4} {
		if _, err := l.Append(valuesBatch(t, i*2, 2, 5, 0), e); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		req       Epoch
		wantEpoch Epoch
		wantEnd   Offset
	}{
		{0, 0, 0},                             // older than every epoch: its start
		{1, 1, 4},                             // ends where epoch 3 starts
		{2, 1, 4},                             // not known: the largest epoch below it
		{3, 3, 6},                             //
		{4, 4, 10},                            // latest: the LEO
		{5, UndefinedEpoch, UndefinedOffset},  // newer than this replica knows
		{-1, UndefinedEpoch, UndefinedOffset}, //
	}
	for _, c := range cases {
		e, o := l.EndOffsetFor(c.req)
		if e != c.wantEpoch || o != c.wantEnd {
			t.Errorf("EndOffsetFor(%d) = (%d, %d), want (%d, %d)", c.req, e, o, c.wantEpoch, c.wantEnd)
		}
	}
	// Truncating drops the epochs that start at or above the new end.
	if err := l.Truncate(5); err != nil {
		t.Fatal(err)
	}
	if l.LEO() != 4 { // offset 5 is inside the batch 4-5: the whole batch goes
		t.Fatalf("LEO %d", l.LEO())
	}
	if got := fmt.Sprint(l.Epochs()); got != "[{1 0}]" {
		t.Fatalf("epochs after truncation %s", got)
	}
	if e, o := l.EndOffsetFor(1); e != 1 || o != 4 {
		t.Fatalf("after truncation: (%d, %d)", e, o)
	}
}

// Under flush.messages=1 a leader counts its log toward the HW only up to
// what is fsynced; otherwise up to the LEO.
func TestDurableEnd(t *testing.T) {
	cfg := smallConfig()
	cfg.FlushMessages = 1
	l := openLog(t, t.TempDir(), cfg, State{}, &clock{t: t0})
	defer l.Close()
	if _, err := l.Append(valuesBatch(t, 0, 2, 5, 0), 0); err != nil {
		t.Fatal(err)
	}
	if d := l.DurableEnd(); d != 0 || l.LEO() != 2 {
		t.Fatalf("flush.messages=1, before the sync: durable end %d, LEO %d; want 0, 2", d, l.LEO())
	}
	if err := l.SyncIfDue(2); err != nil {
		t.Fatal(err)
	}
	if d := l.DurableEnd(); d != 2 {
		t.Fatalf("flush.messages=1, after the sync: durable end %d, want 2", d)
	}
	cfg.FlushMessages = 1000
	l.SetConfig(cfg)
	if _, err := l.Append(valuesBatch(t, 2, 2, 5, 0), 0); err != nil {
		t.Fatal(err)
	}
	if d := l.DurableEnd(); d != 4 {
		t.Fatalf("flush.messages=1000: durable end %d, want the LEO 4", d)
	}
}

// A new leader's epoch starts at its LEO before it appends anything, so
// OffsetForLeaderEpoch can answer for an epoch this log never got batches
// of (the one its predecessor led briefly): the largest older epoch, ending
// where the new one starts. The entry is saved, dropped by a truncation at
// the LEO (the replica became a follower without writing in it) and by a
// reopen.
func TestAssignEpochAtTheLogEnd(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: t0}
	l := openLog(t, dir, smallConfig(), State{}, c)
	for i, e := range []Epoch{1, 1, 4} {
		if _, err := l.Append(valuesBatch(t, i*2, 2, 5, 0), e); err != nil {
			t.Fatal(err)
		}
	}
	if e, o := l.EndOffsetFor(5); e != UndefinedEpoch || o != UndefinedOffset {
		t.Fatalf("before the assignment EndOffsetFor(5) = (%d, %d), want undefined", e, o)
	}
	if err := l.AssignEpoch(6); err != nil {
		t.Fatal(err)
	}
	if err := l.AssignEpoch(3); err != nil { // older: nothing changes
		t.Fatal(err)
	}
	if got := fmt.Sprint(l.Epochs()); got != "[{1 0} {4 4} {6 6}]" {
		t.Fatalf("epochs %s", got)
	}
	if l.LatestEpoch() != 6 {
		t.Fatalf("latest epoch %d, want 6", l.LatestEpoch())
	}
	if e, o := l.EndOffsetFor(5); e != 4 || o != 6 {
		t.Fatalf("EndOffsetFor(5) = (%d, %d), want (4, 6)", e, o)
	}
	if e, o := l.EndOffsetFor(6); e != 6 || o != 6 {
		t.Fatalf("EndOffsetFor(6) = (%d, %d), want (6, 6)", e, o)
	}
	// Kept in memory until a batch of the epoch is appended.
	data, err := os.ReadFile(filepath.Join(dir, epochFile))
	if err != nil || string(data) != "0\n2\n1 0\n4 4\n" {
		t.Fatalf("checkpoint file %q %v", data, err)
	}
	// A truncation at (or past) the LEO cuts no batch but drops the entry.
	if err := l.Truncate(6); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(l.Epochs()); got != "[{1 0} {4 4}]" || l.LEO() != 6 {
		t.Fatalf("after Truncate(LEO): epochs %s, LEO %d", got, l.LEO())
	}
	// The first batch of the new epoch starts where it was assigned.
	if err := l.AssignEpoch(6); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(valuesBatch(t, 6, 2, 5, 0), 6); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, epochFile)); err != nil || string(data) != "0\n3\n1 0\n4 4\n6 6\n" {
		t.Fatalf("checkpoint file after the epoch's first batch %q %v", data, err)
	}
	if err := l.AssignEpoch(7); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(l.Epochs()); got != "[{1 0} {4 4} {6 6} {7 8}]" {
		t.Fatalf("epochs %s", got)
	}
	st := l.State()
	l.Close()
	l = openLog(t, dir, smallConfig(), st, c)
	defer l.Close()
	if got := fmt.Sprint(l.Epochs()); got != "[{1 0} {4 4} {6 6}]" {
		t.Fatalf("reopened: epochs %s (an entry no batch followed is dropped)", got)
	}
}

func TestEpochCachePersistedAndRebuilt(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: t0}
	l := openLog(t, dir, smallConfig(), State{}, c)
	for i, e := range []Epoch{0, 2, 2, 7} {
		if _, err := l.Append(valuesBatch(t, i, 1, 5, 0), e); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	data, err := os.ReadFile(filepath.Join(dir, epochFile))
	if err != nil || string(data) != "0\n3\n0 0\n2 1\n7 3\n" {
		t.Fatalf("checkpoint file %q %v", data, err)
	}
	os.Remove(filepath.Join(dir, epochFile))
	l = openLog(t, dir, smallConfig(), l.State(), c)
	defer l.Close()
	if got := fmt.Sprint(l.Epochs()); got != "[{0 0} {2 1} {7 3}]" {
		t.Fatalf("rebuilt epochs %s", got)
	}
}

func TestTruncateAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: t0}
	l := openLog(t, dir, smallConfig(), State{}, c)
	for i := range 20 {
		if _, err := l.Append(valuesBatch(t, i, 1, 200, 0), 0); err != nil {
			t.Fatal(err)
		}
	}
	before := l.SegmentBases()
	if err := l.Truncate(7); err != nil {
		t.Fatal(err)
	}
	if l.LEO() != 7 {
		t.Fatalf("LEO %d", l.LEO())
	}
	for _, b := range before {
		_, err := os.Stat(filepath.Join(dir, segmentName(b)+".log"))
		if (b < 7) != (err == nil) && b != 6 {
			t.Fatalf("segment %d: exists=%v", b, err == nil)
		}
	}
	got := readRecords(t, l, 0)
	if len(got) != 7 {
		t.Fatalf("%d records after truncation", len(got))
	}
	// Appends continue at the new end, and survive a reopen.
	if info, err := l.Append(valuesBatch(t, 100, 1, 10, 0), 1); err != nil || info.FirstOffset != 7 {
		t.Fatalf("%+v %v", info, err)
	}
	l.Close()
	l = openLog(t, dir, smallConfig(), l.State(), c)
	defer l.Close()
	got = readRecords(t, l, 0)
	if len(got) != 8 || got[7] != "v100......" || got[6] != "v6"+string(bytes.Repeat([]byte{'.'}, 198)) {
		t.Fatalf("after reopen: %d records, [7]=%q", len(got), got[7])
	}
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: t0}
	l := openLog(t, dir, smallConfig(), State{}, c)
	for i := range 10 {
		l.Append(valuesBatch(t, i, 1, 200, 0), 0)
	}
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	if l.LEO() != 1000 || l.LogStartOffset() != 1000 || fmt.Sprint(l.SegmentBases()) != "[1000]" || len(l.Epochs()) != 0 {
		t.Fatalf("LEO %d start %d segs %v", l.LEO(), l.LogStartOffset(), l.SegmentBases())
	}
	if _, err := l.Read(5, 100, NoMaxOffset); !errors.Is(err, errs.OffsetOutOfRange) {
		t.Fatal(err)
	}
	if info, err := l.Append(valuesBatch(t, 0, 1, 10, 0), 3); err != nil || info.FirstOffset != 1000 {
		t.Fatalf("%+v %v", info, err)
	}
	l.Close()
	l = openLog(t, dir, smallConfig(), l.State(), c)
	defer l.Close()
	if l.LEO() != 1001 || l.LogStartOffset() != 1000 {
		t.Fatalf("reopened: LEO %d start %d", l.LEO(), l.LogStartOffset())
	}
}

func TestFlushPolicy(t *testing.T) {
	c := &clock{t: t0}
	cfg := DefaultConfig()
	l := openLog(t, t.TempDir(), cfg, State{}, c)
	defer l.Close()
	l.Append(valuesBatch(t, 0, 3, 10, 0), 0)
	if rp := l.State().RecoveryPoint; rp != 0 {
		t.Fatalf("default policy flushed: recovery point %d", rp)
	}
	cfg.FlushMS = 1000
	l.SetConfig(cfg)
	l.FlushIfDue(c.now().Add(999 * time.Millisecond))
	if rp := l.State().RecoveryPoint; rp != 0 {
		t.Fatalf("flushed before flush.ms: %d", rp)
	}
	c.advance(time.Second)
	l.FlushIfDue(c.now())
	if rp := l.State().RecoveryPoint; rp != 3 {
		t.Fatalf("flush.ms: recovery point %d", rp)
	}
	cfg.FlushMessages = 1
	l.SetConfig(cfg)
	appendSync := func() {
		t.Helper()
		info, err := l.Append(valuesBatch(t, 0, 2, 10, 0), 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.SyncIfDue(info.LastOffset + 1); err != nil {
			t.Fatal(err)
		}
	}
	appendSync()
	if rp := l.State().RecoveryPoint; rp != 5 {
		t.Fatalf("flush.messages=1: recovery point %d after SyncIfDue returned", rp)
	}
	cfg.FlushMessages = 4
	l.SetConfig(cfg)
	appendSync()
	if rp := l.State().RecoveryPoint; rp != 5 {
		t.Fatalf("flush.messages=4 flushed after 2: %d", rp)
	}
	appendSync()
	if rp := l.State().RecoveryPoint; rp != 9 {
		t.Fatalf("flush.messages=4 did not flush after 4: %d", rp)
	}
	// An append alone only publishes: the recovery point stays until the
	// caller asks.
	cfg.FlushMessages = 1
	l.SetConfig(cfg)
	info, err := l.Append(valuesBatch(t, 0, 2, 10, 0), 0)
	if err != nil {
		t.Fatal(err)
	}
	if rp := l.State().RecoveryPoint; rp != 9 {
		t.Fatalf("the append itself flushed: recovery point %d", rp)
	}
	if err := l.SyncIfDue(info.LastOffset + 1); err != nil {
		t.Fatal(err)
	}
	if rp := l.State().RecoveryPoint; rp != 11 {
		t.Fatalf("recovery point %d after SyncIfDue(11)", rp)
	}
	l.Close()
	if err := l.SyncIfDue(12); !errors.Is(err, errs.KafkaStorageError) {
		t.Fatalf("SyncIfDue past the end of a closed log: %v", err)
	}
}

// Appends under flush.messages=1 from many goroutines, each followed by
// SyncIfDue, beside retention deleting segments and rolls: every SyncIfDue
// returns with the recovery point past its own records, and the log holds
// every record once after a reopen.
func TestSyncIfDueGroupCommit(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.FlushMessages = 1
	l := openLog(t, dir, cfg, State{}, &clock{t: t0})
	const writers, each = 8, 40
	batches := make([][]byte, writers*each)
	for i := range batches {
		batches[i] = valuesBatch(t, i, 1, 10, 0)
	}
	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				info, err := l.Append(batches[w*each+i], 0)
				if err != nil {
					errc <- err
					return
				}
				if err := l.SyncIfDue(info.LastOffset + 1); err != nil {
					errc <- err
					return
				}
				if rp := l.State().RecoveryPoint; rp <= info.LastOffset {
					errc <- fmt.Errorf("SyncIfDue(%d) returned with the recovery point at %d", info.LastOffset+1, rp)
					return
				}
			}
		})
	}
	stop := make(chan struct{})
	var side sync.WaitGroup
	side.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := l.Roll(); err != nil {
				errc <- err
				return
			}
			leo := l.LEO()
			if err := l.DeleteRecordsBefore(leo / 2); err != nil {
				errc <- err
				return
			}
		}
	})
	wg.Wait()
	close(stop)
	side.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if l.LEO() != writers*each {
		t.Fatalf("LEO %d, want %d", l.LEO(), writers*each)
	}
	st := l.State()
	if st.RecoveryPoint != writers*each {
		t.Fatalf("recovery point %d, want %d", st.RecoveryPoint, writers*each)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg, st, &clock{t: t0})
	defer l.Close()
	seen := map[string]bool{}
	for off, v := range readRecords(t, l, l.LogStartOffset()) {
		if seen[v] {
			t.Fatalf("record %q twice (again at %d)", v, off)
		}
		seen[v] = true
	}
	if len(seen) != int(l.LEO()-l.LogStartOffset()) {
		t.Fatalf("read %d records from %d to %d", len(seen), l.LogStartOffset(), l.LEO())
	}
}

func TestDeleteRecordsBefore(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: t0}
	l := openLog(t, dir, smallConfig(), State{}, c)
	for i := range 10 {
		l.Append(valuesBatch(t, i*2, 2, 150, 0), Epoch(i))
	}
	// 2-record batches of ~370 bytes, two per segment: segments at 0,4,8,12,16.
	if err := l.DeleteRecordsBefore(9); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 9 || fmt.Sprint(l.SegmentBases()) != "[8 12 16]" {
		t.Fatalf("start %d segments %v", l.LogStartOffset(), l.SegmentBases())
	}
	if _, err := l.Read(8, 100, NoMaxOffset); !errors.Is(err, errs.OffsetOutOfRange) {
		t.Fatalf("read below the start: %v", err)
	}
	// Reading at the start returns the batch holding it.
	if res, err := l.Read(9, 1, NoMaxOffset); err != nil || record.Batch(res.Records).BaseOffset() != 8 {
		t.Fatal(err)
	}
	if got := fmt.Sprint(l.Epochs()); got != "[{4 9} {5 10} {6 12} {7 14} {8 16} {9 18}]" {
		t.Fatalf("epochs %s", got)
	}
	if err := l.DeleteRecordsBefore(21); !errors.Is(err, errs.OffsetOutOfRange) {
		t.Fatal(err)
	}
	st := l.State()
	l.Close()
	l = openLog(t, dir, smallConfig(), st, c)
	defer l.Close()
	if l.LogStartOffset() != 9 {
		t.Fatalf("reopened start %d", l.LogStartOffset())
	}
}

func TestConcurrentReadersAndWriter(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 8 << 10
	l := openLog(t, t.TempDir(), cfg, State{}, &clock{t: t0})
	defer l.Close()
	const n = 300
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			var it record.RecordIter
			for off := Offset(0); off < n; {
				res, err := l.ReadInto(buf[:0], off, 1000+r*300, NoMaxOffset)
				if errors.Is(err, errs.OffsetOutOfRange) {
					// Retention overtook this reader, as it may a slow consumer.
					off = l.LogStartOffset()
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				buf = res.Records
				bi := record.NewBatchIter(res.Records)
				for bi.Next() {
					if err := bi.Batch().Verify(); err != nil {
						t.Error(err)
						return
					}
					it.Reset(bi.Batch())
					for it.Next() {
						if want := fmt.Sprintf("v%d", it.Offset()); string(it.Record().Value[:len(want)]) != want {
							t.Errorf("offset %d holds %q", it.Offset(), it.Record().Value)
							return
						}
					}
				}
				off = res.NextOffset
			}
		}()
	}
	for i := range n {
		if _, err := l.Append(valuesBatch(t, i, 1, 100, 0), 0); err != nil {
			t.Fatal(err)
		}
		if i%50 == 49 {
			if _, err := l.DeleteExpired(t0, l.LEO()); err != nil {
				t.Fatal(err)
			}
		}
	}
	wg.Wait()
}

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig(map[string]string{"segment.bytes": "2048", "cleanup.policy": "compact,delete", "min.insync.replicas": "2", "retention.ms": "-1"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SegmentBytes != 2048 || cfg.CleanupPolicy != CleanupCompact|CleanupDelete || cfg.RetentionMS != -1 || cfg.IndexIntervalBytes != 4096 {
		t.Fatalf("%+v", cfg)
	}
	if _, err := ParseConfig(map[string]string{"segment.byte": "1"}); !errors.Is(err, errs.InvalidConfig) {
		t.Fatal(err)
	}
	d := DefaultConfig()
	if d.SegmentBytes != 1<<30 || d.SegmentMS != 7*24*3600*1000 || d.RetentionBytes != -1 || d.MaxMessageBytes != 1048588 || d.CleanupPolicy != CleanupDelete {
		t.Fatalf("defaults %+v", d)
	}
}

// TestReadAllocations pins the read path's promise: with a reused buffer a
// fetch allocates nothing, however many records it returns.
func TestReadAllocations(t *testing.T) {
	cfg := DefaultConfig()
	cfg.IndexIntervalBytes = 512
	l := openLog(t, t.TempDir(), cfg, State{}, &clock{t: t0})
	defer l.Close()
	for i := range 50 {
		if _, err := l.Append(valuesBatch(t, i*10, 10, 100, 0), 0); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 0, 64<<10)
	allocs := testing.AllocsPerRun(50, func() {
		res, err := l.ReadInto(buf[:0], 123, 32<<10, NoMaxOffset)
		if err != nil || len(res.Records) == 0 {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per read", allocs)
	}
}

func TestLogAppendTime(t *testing.T) {
	c := &clock{t: time.UnixMilli(9000)}
	cfg := DefaultConfig()
	cfg.LogAppendTime = true
	l := openLog(t, t.TempDir(), cfg, State{}, c)
	defer l.Close()
	info, err := l.Append(valuesBatch(t, 0, 2, 5, 100), 0)
	if err != nil || info.LogAppendTime != 9000 || info.MaxTimestamp != 9000 {
		t.Fatalf("%+v %v", info, err)
	}
	res, _ := l.Read(0, 100, NoMaxOffset)
	b := record.Batch(res.Records)
	if !b.LogAppendTime() || b.MaxTimestamp() != 9000 || b.Verify() != nil {
		t.Fatalf("stored batch: logAppendTime=%v max=%d", b.LogAppendTime(), b.MaxTimestamp())
	}
	if got, ok, err := l.OffsetForTimestamp(5000); err != nil || !ok || got.Offset != 0 || got.Timestamp != 9000 {
		t.Fatalf("%+v %v %v", got, ok, err)
	}
}

// Flush waits for a SyncIfDue fsync in progress: that fsync may have taken
// the directory's flag, and nothing may count as durable before it ends.
func TestFlushWaitsForASyncInProgress(t *testing.T) {
	l := openLog(t, t.TempDir(), smallConfig(), State{}, &clock{t: t0})
	defer l.Close()
	if _, err := l.Append(valuesBatch(t, 0, 2, 5, 0), 0); err != nil {
		t.Fatal(err)
	}
	// A SyncIfDue fsync in progress, between taking its files and ending.
	done := make(chan struct{})
	l.fmu.Lock()
	l.syncing, l.syncDone = true, done
	l.fmu.Unlock()
	var once sync.Once
	end := func() {
		once.Do(func() {
			l.fmu.Lock()
			l.syncing = false
			close(done)
			l.fmu.Unlock()
		})
	}
	defer end() // before Close, which waits for it
	flushed := make(chan error, 1)
	go func() { flushed <- l.Flush() }()
	select {
	case err := <-flushed:
		t.Fatalf("Flush returned (%v) while another fsync was running", err)
	case <-time.After(50 * time.Millisecond):
	}
	if rp := l.State().RecoveryPoint; rp != 0 {
		t.Fatalf("recovery point %d while the fsync runs, want 0", rp)
	}
	end()
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if rp := l.State().RecoveryPoint; rp != 2 {
		t.Fatalf("recovery point %d after the flush, want 2", rp)
	}
}

// After a failed fsync, Close counts nothing more as durable: the
// recovery point it leaves is where the last good sync ended.
func TestCloseAfterAFailedSync(t *testing.T) {
	l := openLog(t, t.TempDir(), smallConfig(), State{}, &clock{t: t0})
	if _, err := l.Append(valuesBatch(t, 0, 2, 5, 0), 0); err != nil {
		t.Fatal(err)
	}
	l.fmu.Lock()
	l.syncErr = errors.New("input/output error")
	l.hasFailed.Store(true)
	l.fmu.Unlock()
	if err := l.Flush(); errs.Of(err) != errs.KafkaStorageError {
		t.Fatalf("Flush after a failed fsync: %v, want KAFKA_STORAGE_ERROR", err)
	}
	_ = l.Close()
	if rp := l.State().RecoveryPoint; rp != 0 {
		t.Fatalf("recovery point %d after closing a log whose fsync failed, want 0", rp)
	}
}

// message.timestamp.before.max.ms and message.timestamp.after.max.ms
// refuse a batch with a record whose create time is too far from the
// leader's clock, whole and with INVALID_TIMESTAMP, and leave the log as
// it was; under LogAppendTime the producer's times are not checked.
func TestAppendChecksCreateTimes(t *testing.T) {
	const now = 10_000_000
	hour := int64(time.Hour / time.Millisecond)
	for _, tc := range []struct {
		name          string
		configs       map[string]string
		times         []int64 // one record each, in one batch
		wantRefused   bool
		wantInMessage string
	}{
		{"defaults bound nothing", nil, []int64{0, now + 100*hour}, false, ""},
		{"inside both bounds", map[string]string{"message.timestamp.before.max.ms": "3600000", "message.timestamp.after.max.ms": "3600000"}, []int64{now - hour, now, now + hour}, false, ""},
		{"one record too old", map[string]string{"message.timestamp.before.max.ms": "3600000"}, []int64{now, now - hour - 1}, true, "record 1 of the batch: timestamp 6399999 is before 6400000, the earliest"},
		{"one record too new", map[string]string{"message.timestamp.after.max.ms": "3600000"}, []int64{now + hour + 1, now}, true, "record 0 of the batch: timestamp 13600001 is after 13600000, the latest"},
		{"zero: nothing in the past", map[string]string{"message.timestamp.before.max.ms": "0"}, []int64{now - 1}, true, "timestamp 9999999 is before 10000000"},
		{"no timestamp passes", map[string]string{"message.timestamp.before.max.ms": "0", "message.timestamp.after.max.ms": "0"}, []int64{-1}, false, ""},
		{"LogAppendTime is not checked", map[string]string{"message.timestamp.type": "LogAppendTime", "message.timestamp.before.max.ms": "0"}, []int64{0}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig(tc.configs)
			if err != nil {
				t.Fatal(err)
			}
			l := openLog(t, t.TempDir(), cfg, State{}, &clock{t: time.UnixMilli(now)})
			defer l.Close()
			if _, err := l.Append(valuesBatch(t, 0, 1, 10, now), 0); err != nil {
				t.Fatal(err)
			}
			recs := make([]kv, len(tc.times))
			for i, ts := range tc.times {
				recs[i] = kv{key: fmt.Appendf(nil, "k%d", i), value: []byte("v"), ts: ts}
			}
			_, err = l.Append(batchOf(t, recs...), 0)
			switch {
			case !tc.wantRefused && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantRefused && errs.Of(err) != errs.InvalidTimestamp:
				t.Fatalf("err = %v, want INVALID_TIMESTAMP", err)
			case tc.wantRefused && !strings.Contains(err.Error(), tc.wantInMessage):
				t.Fatalf("err = %v, want it to say %q", err, tc.wantInMessage)
			}
			want := Offset(1)
			if !tc.wantRefused {
				want += Offset(len(tc.times))
			}
			if got := l.LEO(); got != want {
				t.Fatalf("LEO %d, want %d", got, want)
			}
			if got := readRecords(t, l, 0); got[0] == "" || len(got) != int(want) {
				t.Fatalf("log holds %v", got)
			}
		})
	}
}

// Without flush.ms or flush.messages nothing asks for an fsync, but a
// rolled segment is flushed with its indexes (as Kafka flushes at a roll):
// the recovery point reaches the active segment, so a restart after a
// crash re-validates only that one, and a disk that fails write-back is
// found out within a segment. The active segment stays unflushed.
func TestRolledSegmentsAreFlushed(t *testing.T) {
	c := &clock{t: t0}
	dir := t.TempDir()
	l := openLog(t, dir, DefaultConfig(), State{}, c)
	defer l.Close()
	if err := l.FlushRolled(); err != nil || l.State().RecoveryPoint != 0 {
		t.Fatalf("nothing rolled: %v, recovery point %d", err, l.State().RecoveryPoint)
	}
	for i := range 3 {
		if _, err := l.Append(valuesBatch(t, i*3, 3, 10, t0.UnixMilli()), 0); err != nil {
			t.Fatal(err)
		}
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Append(valuesBatch(t, 9, 3, 10, t0.UnixMilli()), 0); err != nil {
		t.Fatal(err)
	}
	if bases := l.SegmentBases(); len(bases) != 4 || bases[3] != 9 {
		t.Fatalf("segments %v", bases)
	}
	if err := l.FlushRolled(); err != nil {
		t.Fatal(err)
	}
	if rp := l.State().RecoveryPoint; rp != 9 {
		t.Fatalf("recovery point %d after the rolled segments were flushed, want 9 (the active segment's base)", rp)
	}
	if err := l.FlushRolled(); err != nil || l.State().RecoveryPoint != 9 {
		t.Fatalf("again: %v, recovery point %d", err, l.State().RecoveryPoint)
	}
	// Reopened from that state, as after a crash, the log is whole.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, DefaultConfig(), State{RecoveryPoint: 9}, c)
	if got := readRecords(t, l, 0); len(got) != 12 || got[0] != "v0........" || got[11] != "v11......." {
		t.Fatalf("after a reopen: %d records %v", len(got), got)
	}
}

// A read the disk cannot serve fails the log, as a failed write does: the
// node then takes it offline and reopens it, instead of keeping a
// leadership its followers cannot fetch from. A short read does not.
func TestAReadTheDiskCannotServeFailsTheLog(t *testing.T) {
	c := &clock{t: t0}
	l := openLog(t, t.TempDir(), DefaultConfig(), State{}, c)
	defer l.Close()
	if _, err := l.Append(valuesBatch(t, 0, 3, 10, t0.UnixMilli()), 0); err != nil {
		t.Fatal(err)
	}
	s := l.segs[0]
	if err := l.readFailed(s, 0, io.ErrUnexpectedEOF); errs.Of(err) != errs.KafkaStorageError || l.Failed() {
		t.Fatalf("a short read: %v, failed %v", err, l.Failed())
	}
	s.f.Close() // what the disk answers now: an error
	if _, err := l.Read(0, 1<<20, NoMaxOffset); errs.Of(err) != errs.KafkaStorageError {
		t.Fatalf("a read from a file that cannot be read: %v", err)
	}
	if !l.Failed() {
		t.Fatal("the log is not failed after a read error")
	}
	if _, err := l.Append(valuesBatch(t, 3, 1, 10, t0.UnixMilli()), 0); errs.Of(err) != errs.KafkaStorageError || !strings.Contains(err.Error(), "reading") {
		t.Fatalf("an append after the read error: %v, want the log failed naming the read", err)
	}
}
