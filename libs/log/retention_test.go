package log

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"skein/libs/errs"
)

// retentionLog holds 11 one-record batches of 369 bytes with timestamps
// 1000*i, two per 1024-byte segment: segments at 0, 2, 4, 6, 8 and the
// active one at 10.
func retentionLog(t *testing.T, cfg Config) *Log {
	t.Helper()
	l := openLog(t, t.TempDir(), cfg, State{}, &clock{t: t0})
	for i := range 11 {
		if _, err := l.Append(valuesBatch(t, i, 1, 300, int64(1000*i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprint(l.SegmentBases()); got != "[0 2 4 6 8 10]" {
		t.Fatalf("segments %s", got)
	}
	return l
}

func survivors(t *testing.T, l *Log) []Offset {
	got := readRecords(t, l, l.LogStartOffset())
	var out []Offset
	for o := range got {
		out = append(out, o)
	}
	slices.Sort(out)
	return out
}

func TestRetention(t *testing.T) {
	at := func(ms int64) time.Time { return time.UnixMilli(ms) }
	cases := []struct {
		name         string
		retentionMS  int64
		retentionB   int64
		policy       CleanupPolicy
		now          time.Time
		wantDeleted  int
		wantSegments string
		wantFirst    Offset
	}{
		// Cutoff 10000-4500 = 5500: segments whose newest record (1000,
		// 3000, 5000) is older go; 6's newest is 7000.
		{"by time", 4500, -1, CleanupDelete, at(10_000), 3, "[6 8 10]", 6},
		{"by time, nothing old enough", 4500, -1, CleanupDelete, at(5_000), 0, "[0 2 4 6 8 10]", 0},
		// Total 5*738+369 = 4059 bytes; delete while what remains is still
		// >= 2000: 3321, then 2583, then stop (1845 < 2000).
		{"by size", -1, 2000, CleanupDelete, at(0), 2, "[4 6 8 10]", 4},
		{"size limit above the log", -1, 1 << 20, CleanupDelete, at(0), 0, "[0 2 4 6 8 10]", 0},
		// Once all of the active segment has expired too, a new one starts
		// at the LEO and the old one goes (Kafka's roll before deleting).
		{"the active segment too, once all of it has expired", 0, 0, CleanupDelete, at(1 << 50), 6, "[11]", 11},
		// Cutoff 10000-0 = 10000: the active segment's record (10000) is
		// not older, so it stays and only the closed segments go.
		{"not an active segment holding a record at the cutoff", 0, -1, CleanupDelete, at(10_000), 5, "[10]", 10},
		// retention.bytes=0 takes the active segment too, after a roll, as
		// Kafka deletes every segment that breaches the size.
		{"by size 0, the active segment too", -1, 0, CleanupDelete, at(1 << 50), 6, "[11]", 11},
		// A limit the log without its active segment is under keeps it.
		{"by size, the active segment within the limit", -1, 1, CleanupDelete, at(1 << 50), 5, "[10]", 10},
		{"both: the stricter wins", 4500, 3000, CleanupDelete, at(10_000), 3, "[6 8 10]", 6},
		{"compact only: no deletion", 0, 0, CleanupCompact, at(1 << 50), 0, "[0 2 4 6 8 10]", 0},
		{"forever", -1, -1, CleanupDelete | CleanupCompact, at(1 << 50), 0, "[0 2 4 6 8 10]", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := smallConfig()
			cfg.RetentionMS, cfg.RetentionBytes, cfg.CleanupPolicy = c.retentionMS, c.retentionB, c.policy
			l := retentionLog(t, cfg)
			defer l.Close()
			n, err := l.DeleteExpired(c.now, l.LEO())
			if err != nil {
				t.Fatal(err)
			}
			if n != c.wantDeleted || fmt.Sprint(l.SegmentBases()) != c.wantSegments || l.LogStartOffset() != c.wantFirst {
				t.Fatalf("deleted %d, segments %v, start %d; want %d, %s, %d", n, l.SegmentBases(), l.LogStartOffset(), c.wantDeleted, c.wantSegments, c.wantFirst)
			}
			want := []Offset{}
			for o := c.wantFirst; o <= 10; o++ {
				want = append(want, o)
			}
			if got := survivors(t, l); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("surviving offsets %v, want %v", got, want)
			}
		})
	}
}

func TestRetentionAfterDeleteRecords(t *testing.T) {
	cfg := smallConfig()
	cfg.RetentionMS, cfg.RetentionBytes = -1, -1
	l := retentionLog(t, cfg)
	defer l.Close()
	// DeleteRecordsBefore deletes what it can at once; a segment it only
	// partly covers stays, and the start offset stays inside it.
	if err := l.DeleteRecordsBefore(5); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(l.SegmentBases()); got != "[4 6 8 10]" || l.LogStartOffset() != 5 {
		t.Fatalf("segments %s start %d", got, l.LogStartOffset())
	}
	if n, _ := l.DeleteExpired(t0, l.LEO()); n != 0 {
		t.Fatalf("deleted %d more", n)
	}
	if got := survivors(t, l); fmt.Sprint(got) != "[5 6 7 8 9 10]" {
		t.Fatalf("survivors %v", got)
	}
}

// AdvanceLogStart moves the start at once and leaves the segments to the
// next retention pass, whatever the policy; it waits for no compaction.
func TestAdvanceLogStart(t *testing.T) {
	cfg := smallConfig()
	cfg.RetentionMS, cfg.RetentionBytes, cfg.CleanupPolicy = -1, -1, CleanupDelete|CleanupCompact
	l := retentionLog(t, cfg)
	defer l.Close()
	l.cmu.Lock() // a compaction in progress
	err := l.AdvanceLogStart(5)
	l.cmu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(l.SegmentBases()); got != "[0 2 4 6 8 10]" || l.LogStartOffset() != 5 {
		t.Fatalf("segments %s start %d", got, l.LogStartOffset())
	}
	if _, err := l.Read(4, 100, NoMaxOffset); !errors.Is(err, errs.OffsetOutOfRange) {
		t.Fatalf("a read below the new start: %v", err)
	}
	if err := l.AdvanceLogStart(3); err != nil || l.LogStartOffset() != 5 {
		t.Fatalf("a lower start: %v, start %d", err, l.LogStartOffset())
	}
	if err := l.AdvanceLogStart(l.LEO() + 1); !errors.Is(err, errs.OffsetOutOfRange) || l.LogStartOffset() != 5 {
		t.Fatalf("past the log end: %v, start %d", err, l.LogStartOffset())
	}
	if n, err := l.DeleteExpired(t0, l.LEO()); err != nil || n != 2 || fmt.Sprint(l.SegmentBases()) != "[4 6 8 10]" {
		t.Fatalf("the next pass deleted %d (%v): segments %v", n, err, l.SegmentBases())
	}
	if got := survivors(t, l); fmt.Sprint(got) != "[5 6 7 8 9 10]" {
		t.Fatalf("survivors %v", got)
	}
}

// Retention never takes a segment that is not wholly below the bound the
// storage node passes (the high watermark), whichever rule expires it.
func TestRetentionStopsAtTheBound(t *testing.T) {
	cases := []struct {
		name        string
		retentionMS int64
		retentionB  int64
		upTo        Offset
		wantBases   string
	}{
		// Segments at 0, 2, 4, 6, 8 and 10 (active); every one expired.
		{"by time, bound inside a segment", 0, -1, 5, "[4 6 8 10]"},
		{"by time, bound at a segment's base", 0, -1, 6, "[6 8 10]"},
		{"by size", -1, 0, 3, "[2 4 6 8 10]"},
		{"bound below the first segment's end", 0, 0, 1, "[0 2 4 6 8 10]"},
		{"bound at the log end", 0, 0, 11, "[11]"},
		{"bound one below the log end", 0, 0, 10, "[10]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := smallConfig()
			cfg.RetentionMS, cfg.RetentionBytes = c.retentionMS, c.retentionB
			l := retentionLog(t, cfg)
			defer l.Close()
			if _, err := l.DeleteExpired(time.UnixMilli(1<<50), c.upTo); err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(l.SegmentBases()); got != c.wantBases {
				t.Fatalf("segments %s, want %s", got, c.wantBases)
			}
			if l.LogStartOffset() > c.upTo {
				t.Fatalf("log start %d passed the bound %d", l.LogStartOffset(), c.upTo)
			}
		})
	}
}

// Retention that takes the active segment leaves an empty log at the same
// end: reads below it are out of range, appends go on at the same offsets,
// and a reopened log (the node's checkpoint holding the start) agrees.
func TestRetentionOfTheActiveSegmentKeepsTheLogEnd(t *testing.T) {
	cfg := smallConfig()
	cfg.RetentionMS, cfg.RetentionBytes = 60_000, -1
	dir := t.TempDir()
	l := openLog(t, dir, cfg, State{}, &clock{t: t0})
	for i := range 3 {
		if _, err := l.Append(valuesBatch(t, i, 1, 10, int64(1000*i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprint(l.SegmentBases()); got != "[0]" {
		t.Fatalf("segments %s, want one", got)
	}
	// The newest record is at 2000 ms: not yet expired at 62000.
	if n, err := l.DeleteExpired(time.UnixMilli(62_000), l.LEO()); err != nil || n != 0 {
		t.Fatalf("deleted %d (%v) before the newest record expired", n, err)
	}
	n, err := l.DeleteExpired(time.UnixMilli(62_001), l.LEO())
	if err != nil || n != 1 || fmt.Sprint(l.SegmentBases()) != "[3]" || l.LogStartOffset() != 3 || l.LEO() != 3 {
		t.Fatalf("deleted %d (%v): segments %v, start %d, LEO %d; want 1, [3], 3, 3", n, err, l.SegmentBases(), l.LogStartOffset(), l.LEO())
	}
	if _, err := l.Read(2, 1<<20, NoMaxOffset); !errors.Is(err, errs.OffsetOutOfRange) {
		t.Fatalf("a read below the new start: %v", err)
	}
	// An empty active segment is not rolled again.
	if n, err := l.DeleteExpired(time.UnixMilli(1<<50), l.LEO()); err != nil || n != 0 || fmt.Sprint(l.SegmentBases()) != "[3]" {
		t.Fatalf("a second pass deleted %d (%v): segments %v", n, err, l.SegmentBases())
	}
	info, err := l.Append(valuesBatch(t, 3, 1, 10, 70_000), 0)
	if err != nil || info.FirstOffset != 3 {
		t.Fatalf("append after retention: %+v, %v; want offset 3", info, err)
	}
	st := l.State()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg, st, &clock{t: t0})
	defer l.Close()
	if l.LogStartOffset() != 3 || l.LEO() != 4 {
		t.Fatalf("reopened: start %d, LEO %d; want 3, 4", l.LogStartOffset(), l.LEO())
	}
	if got := survivors(t, l); fmt.Sprint(got) != "[3]" {
		t.Fatalf("survivors %v", got)
	}
}
