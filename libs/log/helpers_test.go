package log

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"skein/libs/record"
)

// tb is what the helpers need of a *testing.T or a *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// clock is a test clock the log reads through Options.Now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

var t0 = time.UnixMilli(1_700_000_000_000)

// kv is a record the tests write.
type kv struct {
	key, value []byte
	ts         int64
}

// batchOf builds an uncompressed batch at offset 0 (the log assigns offsets).
func batchOf(t tb, recs ...kv) []byte {
	t.Helper()
	return batchWith(t, record.None, recs...)
}

func batchWith(t tb, c record.Compression, recs ...kv) []byte {
	t.Helper()
	opts := record.DefaultBatchOptions()
	opts.Compression = c
	return batchWithOptions(t, opts, recs...)
}

// batchWithOptions builds a batch of recs with opts (its producer, flags,
// codec).
func batchWithOptions(t tb, opts record.BatchOptions, recs ...kv) []byte {
	t.Helper()
	b := record.NewBuilder(opts)
	for _, r := range recs {
		b.Append(r.ts, r.key, r.value)
	}
	out, _, err := b.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// valuesBatch builds a batch of n records with values "v<first+i>" padded to
// size bytes, keys "k<first+i>", timestamps ts.
func valuesBatch(t tb, first, n, size int, ts int64) []byte {
	t.Helper()
	recs := make([]kv, n)
	for i := range recs {
		v := fmt.Appendf(nil, "v%d", first+i)
		if len(v) < size {
			v = append(v, bytes.Repeat([]byte{'.'}, size-len(v))...)
		}
		recs[i] = kv{key: fmt.Appendf(nil, "k%d", first+i), value: v, ts: ts}
	}
	return batchOf(t, recs...)
}

func openLog(t testing.TB, dir string, cfg Config, st State, c *clock) *Log {
	t.Helper()
	l, err := Open(dir, cfg, Options{State: st, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// readRecords reads everything from offset to the LEO, decoding records:
// offset -> value.
func readRecords(t tb, l *Log, from Offset) map[Offset]string {
	t.Helper()
	out := map[Offset]string{}
	var it record.RecordIter
	for off := from; off < l.LEO(); {
		res, err := l.Read(off, 1<<20, NoMaxOffset)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(res.Records) == 0 {
			t.Fatalf("read at %d below LEO %d returned nothing", off, l.LEO())
		}
		bi := record.NewBatchIter(res.Records)
		for bi.Next() {
			b := bi.Batch()
			if err := b.Verify(); err != nil {
				t.Fatalf("served a bad batch at %d: %v", b.BaseOffset(), err)
			}
			if err := it.Reset(b); err != nil {
				t.Fatal(err)
			}
			for it.Next() {
				if it.Offset() >= from {
					out[it.Offset()] = string(it.Record().Value)
				}
			}
		}
		if bi.Err() != nil {
			t.Fatal(bi.Err())
		}
		off = res.NextOffset
	}
	return out
}
