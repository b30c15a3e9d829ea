package log

// A partition directory (Kafka's layout):
//
//	| file                                 | content                                    |
//	|--------------------------------------|--------------------------------------------|
//	| 00000000000000000000.log             | record batches, back to back, as produced  |
//	| 00000000000000000000.index           | sparse offset index (index.go)             |
//	| 00000000000000000000.timeindex       | sparse time index (index.go)               |
//	| 00000000000000004096.log ...         | the next segment: named by its base offset |
//	| leader-epoch-checkpoint              | epoch -> start offset (epoch.go)           |
//	| *.cleaned, *.tmp                     | compaction / checkpoint leftovers: deleted |
//	|                                      | on open                                    |
//
// A segment's base offset is the base offset of its first batch; the last
// segment is the active one and the only one appended to.

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"skein/libs/record"
)

const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	cleanedSuffix   = ".cleaned"
)

func segmentName(base Offset) string { return fmt.Sprintf("%020d", int64(base)) }

func parseSegmentName(name string) (Offset, bool) {
	stem, ok := strings.CutSuffix(name, logSuffix)
	if !ok || len(stem) != 20 {
		return 0, false
	}
	v, err := strconv.ParseInt(stem, 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return Offset(v), true
}

// segment is one .log file and its indexes. base and f never change. The
// other fields change only under Log.wmu and, while the segment is published
// in Log.segs, only with Log.mu held for writing: readers hold Log.mu for
// reading and see a consistent (size, next, index) triple.
type segment struct {
	dir  string
	base Offset
	f    *os.File

	size int64 // bytes of whole, valid batches; the file may be longer (fileSize)
	// fileSize is the length of the file: size, and on the active segment
	// of a log that fsyncs often, zeros written ahead of it (see zeroFill).
	fileSize int64
	next     Offset // offset after the last batch; base when empty
	index    []indexEntry
	times    []timeEntry

	maxTS    int64     // largest batch max timestamp, -1 if none
	maxTSRel uint32    // relative offset of the batch that holds maxTS
	firstTS  int64     // first batch's max timestamp (segment.ms rolls from it), -1 if none
	created  time.Time // for segment.ms when batches carry no timestamps
	// closedMS is when the segment stopped taking appends, by the log's
	// clock in ms (its file's modification time for one found on disk at
	// open); 0 while it is active. delete.retention.ms counts from it.
	closedMS int64
	// swept: compacted once it had been closed for delete.retention.ms,
	// which dropped its tombstones for good.
	swept       bool
	sinceIndex  int64 // bytes appended since the last offset index entry
	indexOnDisk bool  // the .index/.timeindex files hold exactly index/times

	// The page-cache window (cache.go), on the active segment: bytes
	// below wb were handed to the disk and bytes below dropped were dropped
	// from the cache.
	wb, dropped int64
}

func (s *segment) path(suffix string) string {
	return filepath.Join(s.dir, segmentName(s.base)+suffix)
}

// createSegment makes a new, empty segment file, replacing any leftover.
func createSegment(dir string, base Offset, now time.Time) (*segment, error) {
	s := &segment{dir: dir, base: base, next: base, maxTS: -1, firstTS: -1, created: now}
	f, err := os.OpenFile(s.path(logSuffix), os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	s.f = f
	os.Remove(s.path(indexSuffix))
	os.Remove(s.path(timeIndexSuffix))
	return s, nil
}

func (s *segment) empty() bool { return s.size == 0 }

// Zero-filling ahead of the appends. An append that grows a file changes its
// size and its block map, so the fsync after it commits the filesystem's
// journal as well as the data; an append over blocks the file already has
// (written, not merely fallocated: those are marked unwritten, and the first
// write to them is a journalled change too) fsyncs the data alone. On the
// 2-core test machine's ext4, 28 KiB written and fsynced cost 320 µs of wall
// time and 160 µs of CPU at the end of a file and 260 µs and 105 µs with the
// file zero-filled 1 MiB at a time ahead of the writes, the zeros included.
// The zeros cost a write of their own (about 0.3 ms of CPU per MiB), which
// only frequent fsyncs repay: a log zero-fills when flush.messages is at
// most zeroFillFlushMessages. Past the log's end the file holds zeros,
// which recovery takes for the end of the log and cuts (zeroTail), and the
// file is cut back to its batches when the segment rolls or the log closes.
const (
	zeroFillFlushMessages = 100
	zeroFillChunk         = 1 << 20
)

// zeroChunk is an array, not a slice made at start-up: untouched, it takes
// neither heap nor resident memory in a node whose topics never zero-fill.
var zeroChunk [zeroFillChunk]byte

// zeroFill makes the file at least end bytes long, writing zeros from its
// current end to the next multiple of zeroFillChunk past end.
func (s *segment) zeroFill(end int64) error {
	s.fileSize = max(s.fileSize, s.size) // never zeros over batches
	if end <= s.fileSize {
		return nil
	}
	target := (end/zeroFillChunk + 1) * zeroFillChunk
	for s.fileSize < target {
		n := min(target-s.fileSize, zeroFillChunk)
		if _, err := s.f.WriteAt(zeroChunk[:n], s.fileSize); err != nil {
			return err
		}
		s.fileSize += n
	}
	return nil
}

// cutZeros cuts the file back to its batches.
func (s *segment) cutZeros() error {
	if s.fileSize <= s.size {
		return nil
	}
	if err := s.f.Truncate(s.size); err != nil {
		return err
	}
	s.fileSize = s.size
	return nil
}

// zeroTail reports whether f holds only zero bytes from from to to.
func zeroTail(f *os.File, from, to int64, buf []byte) (bool, error) {
	if cap(buf) < scanChunk {
		buf = make([]byte, scanChunk)
	}
	buf = buf[:cap(buf)]
	for pos := from; pos < to; {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), to-pos)], pos)
		if n == 0 && err != nil {
			return false, err
		}
		for _, c := range buf[:n] {
			if c != 0 {
				return false, nil
			}
		}
		pos += int64(n)
	}
	return true, nil
}

// noteBatch updates the in-memory indexes for a batch just written at pos.
// Like Kafka, an offset entry is added once more than indexInterval bytes
// have gone by since the last one, and a time entry alongside it when the
// max timestamp has grown since the last time entry.
func (s *segment) noteBatch(b record.Batch, pos int64, indexInterval int64) {
	rel := uint32(b.BaseOffset() - s.base)
	ts := b.MaxTimestamp()
	if s.size == 0 && pos == 0 {
		s.firstTS = ts
	}
	if ts > s.maxTS {
		s.maxTS, s.maxTSRel = ts, rel
	}
	if s.sinceIndex > indexInterval {
		s.index = append(s.index, indexEntry{rel: rel, pos: uint32(pos)})
		s.sinceIndex = 0
		s.noteTime()
	}
	s.sinceIndex += int64(b.Size())
	s.next = b.NextOffset()
	s.indexOnDisk = false
}

// noteTime adds a time entry for the segment's max timestamp so far, if it
// grew since the last entry.
func (s *segment) noteTime() {
	if s.maxTS < 0 {
		return
	}
	if n := len(s.times); n == 0 || s.maxTS > s.times[n-1].ts {
		s.times = append(s.times, timeEntry{ts: s.maxTS, rel: s.maxTSRel})
		s.indexOnDisk = false
	}
}

// resetIndexes forgets everything derived from the .log, before a rescan.
func (s *segment) resetIndexes() {
	s.size, s.next, s.index, s.times = 0, s.base, nil, nil
	s.maxTS, s.maxTSRel, s.firstTS, s.sinceIndex = -1, 0, -1, 0
	s.indexOnDisk = false
}

// persistIndexes writes the index files if they are stale.
func (s *segment) persistIndexes() error {
	if s.indexOnDisk {
		return nil
	}
	if err := writeFile(s.path(indexSuffix), encodeIndex(s.index)); err != nil {
		return err
	}
	if err := writeFile(s.path(timeIndexSuffix), encodeTimes(s.times)); err != nil {
		return err
	}
	s.indexOnDisk = true
	return nil
}

// syncIndexes fsyncs the index files persistIndexes wrote (a closed
// segment's): a recovery point past the segment trusts them on open.
func (s *segment) syncIndexes() error {
	for _, suf := range []string{indexSuffix, timeIndexSuffix} {
		f, err := os.Open(s.path(suf))
		if os.IsNotExist(err) {
			continue // none written: the next open rebuilds it
		}
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *segment) close() error { return s.f.Close() }

// remove closes the segment and deletes its files.
func (s *segment) remove() error {
	s.f.Close()
	var first error
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		if err := os.Remove(s.path(suf)); err != nil && !os.IsNotExist(err) && first == nil {
			first = err
		}
	}
	return first
}

// scanChunk is how much a sequential scan reads at a time.
const scanChunk = 1 << 20

// scan walks the batches of f between from and to, calling fn with each
// whole, well-framed batch (checked with Verify when verify is set) and its
// position. It stops at the first batch that is torn, badly framed or fails
// its CRC, or when fn returns false, and returns the position where it
// stopped: the end of the valid prefix. buf is scratch, returned grown.
func scan(f *os.File, from, to int64, verify bool, buf []byte, fn func(b record.Batch, pos int64) bool) (int64, []byte, error) {
	pos := from
	for pos < to {
		want := min(int64(max(cap(buf), scanChunk)), to-pos)
		if int64(cap(buf)) < want {
			buf = make([]byte, want)
		}
		buf = buf[:want]
		n, err := f.ReadAt(buf, pos)
		if err != nil && err != io.EOF {
			return pos, buf, err
		}
		chunk := buf[:n]
		off := 0
		for off < len(chunk) {
			at := pos + int64(off)
			size, ok, err := record.PeekSize(chunk[off:])
			if err != nil {
				return at, buf, nil
			}
			if size == 0 { // not even the length and magic in this chunk
				if off == 0 || at+record.HeaderSize > to {
					return at, buf, nil // torn tail
				}
				break // read on from at
			}
			if size < record.HeaderSize {
				return at, buf, nil
			}
			if !ok {
				if at+int64(size) > to || (off == 0 && n < len(buf)) {
					return at, buf, nil // torn tail
				}
				if off == 0 {
					// A batch larger than the buffer: grow to hold it.
					buf = make([]byte, size)
				}
				break // read on from at
			}
			b := record.Batch(chunk[off : off+size])
			if verify && b.Verify() != nil {
				return at, buf, nil
			}
			if !fn(b, at) {
				return at, buf, nil
			}
			off += size
		}
		if n == 0 {
			return pos, buf, nil
		}
		pos += int64(off)
	}
	return pos, buf, nil
}

// readHeader reads the batch header at pos into dst's spare capacity and
// returns it; dst must have HeaderSize bytes of spare capacity.
func readHeader(f *os.File, pos int64, dst []byte) (record.Batch, error) {
	h := dst[len(dst) : len(dst)+record.HeaderSize]
	if _, err := f.ReadAt(h, pos); err != nil {
		return nil, err
	}
	return record.Batch(h), nil
}
