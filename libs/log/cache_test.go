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

// The advice comes in small rounds as a segment grows: every byte more
// than the window behind the end is handed to the disk once, in order, a
// round covering about cacheStep (more when appends are larger); and a byte
// is dropped only once it was handed over cacheDropLag before, never twice,
// at least cacheDropStep at a time, and the drop keeps up.
func TestCacheTrimRounds(t *testing.T) {
	for _, tc := range []struct {
		name           string
		window, append int64
		total          int64
	}{
		{"small appends", 8 << 20, 16 << 10, 64 << 20},
		{"appends larger than a step", 8 << 20, 3 << 20, 64 << 20},
		{"window not aligned", 5<<20 + 4097, 100 << 10, 40 << 20},
		{"no room past the window", 8 << 20, 64 << 10, 8<<20 + cacheStep - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s segment
			var handed, dropped int64 // the advice given so far, as frontiers
			var rounds int64
			for s.size < tc.total {
				s.size = min(s.size+tc.append, tc.total)
				job, ok := s.nextTrim(tc.window)
				if !ok {
					if s.size-tc.window-s.wb >= cacheStep+cacheAlign {
						t.Fatalf("at %d bytes: no round, with %d bytes out of the window not handed over", s.size, s.size-tc.window-s.wb)
					}
					continue
				}
				rounds++
				if job.wbOff != handed || job.wbLen < cacheStep || job.wbOff+job.wbLen > s.size-tc.window {
					t.Fatalf("at %d bytes: hand over [%d, +%d), want from %d, at least a step, not within the window", s.size, job.wbOff, job.wbLen, handed)
				}
				if job.wbLen > max(cacheStep, tc.append)+cacheAlign {
					t.Fatalf("at %d bytes: hand over %d bytes at once, want about a step", s.size, job.wbLen)
				}
				if job.dropOff != dropped || job.dropLen < 0 || job.dropOff+job.dropLen > handed-cacheDropLag && job.dropLen > 0 {
					t.Fatalf("at %d bytes: drop [%d, +%d), want from %d and at least %d behind what was handed over (%d)", s.size, job.dropOff, job.dropLen, dropped, cacheDropLag, handed)
				}
				if job.dropLen > 0 && job.dropLen < cacheDropStep {
					t.Fatalf("at %d bytes: drop %d bytes, want at least %d at once", s.size, job.dropLen, cacheDropStep)
				}
				if (job.wbOff|job.wbLen|job.dropOff|job.dropLen)%cacheAlign != 0 {
					t.Fatalf("at %d bytes: round %+v is not aligned to %d", s.size, job, cacheAlign)
				}
				handed, dropped = job.wbOff+job.wbLen, job.dropOff+job.dropLen
				s.wb, s.dropped = handed, dropped
			}
			wantRounds := max(tc.total-tc.window, 0) / max(cacheStep, tc.append) / 2
			if rounds < wantRounds {
				t.Fatalf("%d rounds for %d bytes, want at least %d", rounds, tc.total, wantRounds)
			}
			if tc.total-tc.window >= cacheStep+cacheAlign && dropped < handed-cacheDropLag-cacheDropStep-max(cacheStep, tc.append)-cacheAlign {
				t.Fatalf("dropped up to %d with %d handed over: the drop fell behind by more than %d", dropped, handed, cacheDropLag)
			}
		})
	}
}
