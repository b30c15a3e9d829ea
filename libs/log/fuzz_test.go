package log

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"skein/libs/record"
)

// validPrefix is the independent answer to "what must recovery keep": the
// longest run of whole batches that pass Verify and whose offsets follow on
// from 0.
func validPrefix(data []byte) (int, Offset) {
	it := record.NewBatchIter(data)
	end, next := 0, Offset(0)
	for it.Next() {
		b := it.Batch()
		if b.Verify() != nil || b.BaseOffset() != next {
			break
		}
		end, next = it.Pos(), b.NextOffset()
	}
	return end, next
}

// FuzzRecover writes arbitrary bytes as a partition's only segment, opens the
// log with no recovery point, and checks that it keeps exactly the valid
// prefix, serves exactly those bytes, takes appends, and reopens the same
// from its own index files.
func FuzzRecover(f *testing.F) {
	// Small inputs keep each run (and the fuzzer's minimization) fast.
	var good []byte
	for i := range 3 {
		b := valuesBatch(f, i*2, 2, 3, int64(i))
		record.Batch(b).SetBaseOffset(Offset(i * 2))
		good = append(good, b...)
	}
	f.Add(good)
	f.Add(good[:len(good)-7])
	bad := bytes.Clone(good)
	bad[len(bad)/2] ^= 0x10
	f.Add(bad)
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, segmentName(0)+logSuffix), data, 0o644); err != nil {
			t.Fatal(err)
		}
		wantLen, wantLEO := validPrefix(data)
		cfg := DefaultConfig()
		cfg.IndexIntervalBytes = 64
		c := &clock{t: t0}
		l, err := Open(dir, cfg, Options{Now: c.now})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		check := func(l *Log) {
			t.Helper()
			if l.LEO() != wantLEO {
				t.Fatalf("LEO %d, want %d", l.LEO(), wantLEO)
			}
			var served []byte
			for off := Offset(0); off < l.LEO(); {
				res, err := l.Read(off, 100, NoMaxOffset)
				if err != nil {
					t.Fatal(err)
				}
				served = append(served, res.Records...)
				off = res.NextOffset
			}
			if !bytes.Equal(served, data[:wantLen]) {
				t.Fatalf("served %d bytes that differ from the %d-byte valid prefix", len(served), wantLen)
			}
		}
		check(l)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l, err = Open(dir, cfg, Options{Now: c.now, State: l.State()})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		check(l)
		// Epoch -1 (Kafka's "no epoch") leaves the epoch file alone: one
		// fewer fsync per run.
		if info, err := l.Append(valuesBatch(t, 0, 1, 3, 0), -1); err != nil || info.FirstOffset != wantLEO {
			t.Fatalf("append after recovery: %+v %v", info, err)
		}
	})
}
