package log

// Throughput of the log next to a raw os.File doing the same I/O, in one run:
//
//	go test -run '^$' -bench . -benchtime 2s ./log/
//
// BenchmarkAppend and BenchmarkRead run the log and the raw file one after
// the other; BenchmarkPaired* interleave them, which is the fairer comparison
// on a shared machine.
//
// Batches are 16 records of 1 KiB values, uncompressed (~16.7 KB).

import (
	"os"
	"path/filepath"
	"testing"
	"time"
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
				info, err := l.Append(batch, 0)
				if err == nil {
					err = l.SyncIfDue(info.LastOffset + 1)
				}
				if err != nil {
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

// The paired benchmarks alternate the log and the raw file within each
// iteration, timing each side, so that load from elsewhere on the machine
// hits both alike; they report each side's MB/s and log/raw as a percentage.
func BenchmarkPairedAppend(b *testing.B) {
	for _, fsync := range []bool{false, true} {
		name := "nosync"
		if fsync {
			name = "fsync"
		}
		b.Run(name, func(b *testing.B) {
			batch := benchBatch(b)
			cfg := DefaultConfig()
			cfg.SegmentBytes = 64 << 20
			if fsync {
				cfg.FlushMessages = 1
			}
			l := openLog(b, b.TempDir(), cfg, State{}, &clock{t: t0})
			defer l.Close()
			f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			var logT, rawT time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				info, err := l.Append(batch, 0)
				if err == nil {
					err = l.SyncIfDue(info.LastOffset + 1)
				}
				if err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				if _, err := f.Write(batch); err != nil {
					b.Fatal(err)
				}
				if fsync {
					if err := f.Sync(); err != nil {
						b.Fatal(err)
					}
				}
				logT, rawT = logT+mid.Sub(start), rawT+time.Since(mid)
				if i%rewindEvery == rewindEvery-1 {
					b.StopTimer()
					l.DeleteRecordsBefore(l.LEO())
					f.Truncate(0)
					f.Seek(0, 0)
					b.StartTimer()
				}
			}
			reportPair(b, int64(len(batch))*int64(b.N), logT, rawT)
		})
	}
}

func BenchmarkPairedRead(b *testing.B) {
	const perRead = 64
	batch := benchBatch(b)
	chunk := perRead * len(batch)
	cfg := DefaultConfig()
	cfg.SegmentBytes = int64(16 * chunk)
	dir := b.TempDir()
	l := openLog(b, dir, cfg, State{}, &clock{t: t0})
	defer l.Close()
	for range rewindEvery {
		if _, err := l.Append(batch, 0); err != nil {
			b.Fatal(err)
		}
	}
	// The raw side reads the same kind of bytes: the segment files, in order.
	var files []*os.File
	for _, base := range l.SegmentBases() {
		f, err := os.Open(filepath.Join(dir, segmentName(base)+logSuffix))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
	}
	// It reads half the log ahead of the log's reader, so that neither side
	// finds the other's bytes in the CPU cache.
	logBuf, rawBuf := make([]byte, 0, chunk+len(batch)), make([]byte, chunk)
	var logT, rawT time.Duration
	off, pos, fi := Offset(0), int64(0), len(files)/2
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		res, err := l.ReadInto(logBuf[:0], off, chunk, NoMaxOffset)
		if err != nil || len(res.Records) != chunk {
			b.Fatalf("read %d bytes: %v", len(res.Records), err)
		}
		mid := time.Now()
		if _, err := files[fi].ReadAt(rawBuf, pos); err != nil {
			b.Fatal(err)
		}
		logT, rawT = logT+mid.Sub(start), rawT+time.Since(mid)
		if off = res.NextOffset; off >= l.LEO() {
			off = 0
		}
		if pos += int64(chunk); pos >= cfg.SegmentBytes {
			pos, fi = 0, (fi+1)%len(files)
		}
	}
	reportPair(b, int64(chunk)*int64(b.N), logT, rawT)
}

func reportPair(b *testing.B, bytes int64, logT, rawT time.Duration) {
	mb := float64(bytes) / 1e6
	b.ReportMetric(mb/logT.Seconds(), "log-MB/s")
	b.ReportMetric(mb/rawT.Seconds(), "raw-MB/s")
	b.ReportMetric(100*rawT.Seconds()/logT.Seconds(), "log/raw-%")
}
