package log

import (
	"fmt"
	"testing"
)

// With a page-cache window far smaller than what is written, every record
// still reads back as written: across segment rolls, after a truncation
// below what was dropped, after appends past it, and after a reopen.
func TestCacheWindowKeepsEveryRecord(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: t0}
	cfg := DefaultConfig()
	cfg.SegmentBytes = 16 << 20
	open := func() *Log {
		l, err := Open(dir, cfg, Options{Now: c.now, CacheWindow: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := open()
	want := map[Offset]string{}
	next := 0
	appendN := func(batches int) {
		for range batches {
			info, err := l.Append(valuesBatch(t, next, 16, 4000, 1), 0)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 16 {
				want[info.FirstOffset+Offset(i)] = fmt.Sprintf("v%d", next+i)
			}
			next += 16
		}
	}
	check := func(when string) {
		t.Helper()
		got := readRecords(t, l, 0)
		if len(got) != len(want) {
			t.Fatalf("%s: read %d records, want %d", when, len(got), len(want))
		}
		for off, v := range want {
			if g := got[off]; len(g) != 4000 || g[:len(v)] != v || g[len(v)] != '.' {
				t.Fatalf("%s: offset %d reads %.20q..., want %q padded to 4000 bytes", when, off, g, v)
			}
		}
	}

	appendN(480) // about 30 MiB: a roll, the window trimmed many times
	if n := len(l.segs); n < 2 {
		t.Fatalf("%d segments, want at least 2 (the test must cross a roll)", n)
	}
	dropped := l.active().dropped
	if dropped == 0 {
		t.Fatalf("the active segment (%d bytes) had nothing dropped: the window was never trimmed", l.active().size)
	}
	check("after appends")

	cut := Offset(len(want) - 170*16) // below what the active segment dropped
	if err := l.Truncate(cut); err != nil {
		t.Fatal(err)
	}
	for off := range want {
		if off >= cut {
			delete(want, off)
		}
	}
	if size := l.active().size; size >= dropped {
		t.Fatalf("truncated to %d bytes of the active segment, want below the %d it dropped", size, dropped)
	}
	check("after truncating to " + fmt.Sprint(cut))
	appendN(200)
	check("after appending past the truncation")

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open()
	defer l.Close()
	check("after reopening")
}
