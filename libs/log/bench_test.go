package log

// Throughput of the log next to a raw os.File doing the same I/O, in one run:
//
//	go test -run '^$' -bench . -benchtime 2s ./log/
//
// Batches are 16 records of 1 KiB values, uncompressed (~16.7 KB).

import (
	"os"
	"path/filepath"
	"testing"
)

func benchBatch(b *testing.B) []byte {
	return valuesBatch(b, 0, 16, 1024, 1_700_000_000_000)
}

// rewindEvery bounds the disk a long benchmark uses: every so many batches
// (64 MiB) the log drops its old segments and the raw file is emptied, with
// the timer stopped.
const rewindEvery = 4096

func BenchmarkAppend(b *testing.B) {
	for _, fsync := range []bool{false, true} {
		name := "nosync"
		if fsync {
			name = "fsync"
		}
		b.Run("log/"+name, func(b *testing.B) {
			batch := benchBatch(b)
			cfg := DefaultConfig()
			cfg.SegmentBytes = 64 << 20
			if fsync {
				cfg.FlushMessages = 1
			}
			c := &clock{t: t0}
			l := openLog(b, b.TempDir(), cfg, State{}, c)
			defer l.Close()
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := l.Append(batch, 0); err != nil {
					b.Fatal(err)
				}
				if i%rewindEvery == rewindEvery-1 {
					b.StopTimer()
					l.DeleteRecordsBefore(l.LEO())
					b.StartTimer()
				}
			}
		})
		b.Run("raw/"+name, func(b *testing.B) {
			batch := benchBatch(b)
			f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := f.Write(batch); err != nil {
					b.Fatal(err)
				}
				if fsync {
					if err := f.Sync(); err != nil {
						b.Fatal(err)
					}
				}
				if i%rewindEvery == rewindEvery-1 {
					b.StopTimer()
					f.Truncate(0)
					f.Seek(0, 0)
					b.StartTimer()
				}
			}
		})
	}
}

// BenchmarkRead reads 64 MiB sequentially in fetches of 64 batches (~1 MiB),
// the log through ReadInto with a reused buffer, the raw file with ReadAt.
func BenchmarkRead(b *testing.B) {
	const perRead = 64
	batch := benchBatch(b)
	chunk := perRead * len(batch)
	cfg := DefaultConfig()
	cfg.SegmentBytes = int64(16 * chunk) // whole reads never straddle a segment
	dir := b.TempDir()
	l := openLog(b, dir, cfg, State{}, &clock{t: t0})
	defer l.Close()
	for range rewindEvery {
		if _, err := l.Append(batch, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("log", func(b *testing.B) {
		buf := make([]byte, 0, chunk+len(batch))
		b.SetBytes(int64(chunk))
		b.ReportAllocs()
		b.ResetTimer()
		off := Offset(0)
		for range b.N {
			res, err := l.ReadInto(buf[:0], off, chunk, NoMaxOffset)
			if err != nil {
				b.Fatal(err)
			}
			if len(res.Records) != chunk {
				b.Fatalf("read %d bytes, want %d", len(res.Records), chunk)
			}
			if off = res.NextOffset; off >= l.LEO() {
				off = 0
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		f, err := os.Open(filepath.Join(dir, segmentName(0)+logSuffix))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		fi, _ := f.Stat()
		buf := make([]byte, chunk)
		b.SetBytes(int64(chunk))
		b.ReportAllocs()
		b.ResetTimer()
		pos := int64(0)
		for range b.N {
			if _, err := f.ReadAt(buf, pos); err != nil {
				b.Fatal(err)
			}
			if pos += int64(chunk); pos+int64(chunk) > fi.Size() {
				pos = 0
			}
		}
	})
}
