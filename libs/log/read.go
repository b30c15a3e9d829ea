package log

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"skein/libs/errs"
	"skein/libs/record"
)

// ReadResult is what a Read found.
type ReadResult struct {
	// Records holds whole batches exactly as stored, back to back; empty
	// when there is nothing to read below the bound. It is a sub-slice of the
	// buffer given to ReadInto.
	Records []byte
	// NextOffset is the offset after the last batch in Records (the offset
	// asked for when Records is empty): where the next fetch starts.
	NextOffset Offset
	// LEO and LogStartOffset as of the read.
	LEO            Offset
	LogStartOffset Offset
}

// Read is ReadInto with a fresh buffer.
func (l *Log) Read(offset Offset, maxBytes int, maxOffset Offset) (ReadResult, error) {
	return l.ReadInto(nil, offset, maxBytes, maxOffset)
}

// ReadInto appends to dst the stored bytes of the batches from the one
// holding offset on, and returns them in the result (dst's spare capacity is
// used first, so a reused buffer makes reads allocation-free):
//
//   - whole batches only, and only batches whose last offset is below
//     maxOffset (pass the HW, the LSO, or NoMaxOffset);
//   - at most maxBytes, except that the first batch is returned whole even
//     when it alone is larger, so that a consumer always makes progress;
//   - from one segment: a read that reaches a segment's end stops there.
//
// An offset below the log start offset or above the LEO is
// OFFSET_OUT_OF_RANGE; reading at the LEO returns nothing. Records are never
// decoded. Reads run concurrently with each other and with the writer.
func (l *Log) ReadInto(dst []byte, offset Offset, maxBytes int, maxOffset Offset) (ReadResult, error) {
	return l.ReadRecordsInto(dst, offset, maxBytes, maxOffset, 0)
}

// ReadRecordsInto is ReadInto that, when maxRecords is positive, also ends
// with the batch holding offset+maxRecords-1, and reads no further than the
// index shows that batch to end: a reader that keeps maxRecords records is
// not made to read (or be sent) the megabytes after them.
func (l *Log) ReadRecordsInto(dst []byte, offset Offset, maxBytes int, maxOffset Offset, maxRecords int) (ReadResult, error) {
	stopAfter := Offset(NoMaxOffset)
	if maxRecords > 0 && offset <= NoMaxOffset-Offset(maxRecords) {
		stopAfter = offset + Offset(maxRecords) - 1
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	res := ReadResult{Records: dst[len(dst):len(dst)], NextOffset: offset, LEO: l.leo, LogStartOffset: l.lso}
	if l.closed {
		return res, errs.Errorf(errs.KafkaStorageError, "log %s is closed", l.dir)
	}
	if offset < l.lso || offset > l.leo {
		return res, errs.Errorf(errs.OffsetOutOfRange, "offset %d is outside [%d, %d]", offset, l.lso, l.leo)
	}
	if offset == l.leo || offset >= maxOffset || len(l.segs) == 0 {
		return res, nil
	}
	if cap(dst)-len(dst) < record.HeaderSize {
		dst = grow(dst, record.HeaderSize)
	}
	// The segment holding offset: the last whose base is <= offset.
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
	for i = max(i, 0); i < len(l.segs); i++ {
		s := l.segs[i]
		pos, rel := floorPos(s.index, uint32(max(0, offset-s.base)))
		for first := true; pos < s.size; first = false {
			h, err := readHeader(s.f, pos, dst)
			if err != nil {
				return res, l.readFailed(s, pos, err)
			}
			_, _, err = record.PeekSize(h)
			if first && pos != 0 && (err != nil || h.BaseOffset() != s.base+Offset(rel)) {
				// The index entry does not point at the batch it names (a
				// damaged index open could not tell): scan from the start.
				pos = 0
				continue
			}
			if err != nil {
				return res, errs.Errorf(errs.CorruptMessage, "stored batch at %s:%d: %v", s.path(logSuffix), pos, err)
			}
			if h.LastOffset() >= offset {
				if h.LastOffset() >= maxOffset {
					return res, nil
				}
				return l.readFrom(dst, s, pos, h.Size(), maxBytes, maxOffset, stopAfter, res)
			}
			pos += int64(h.Size())
		}
	}
	return res, nil
}

// readFrom reads the batches of s starting at pos (the first of which is
// first bytes long and below maxOffset) into dst with one read, ending with
// the batch that holds stopAfter.
func (l *Log) readFrom(dst []byte, s *segment, pos int64, first, maxBytes int, maxOffset, stopAfter Offset, res ReadResult) (ReadResult, error) {
	n := int(min(int64(max(first, maxBytes)), s.size-pos))
	if stopAfter < NoMaxOffset {
		if next, ok := ceilPos(s.index, stopAfter+1-s.base); ok && next > pos {
			// The indexed batch at or after stopAfter+1 starts after the
			// one holding stopAfter ends.
			n = min(n, max(first, int(next-pos)))
		}
	}
	start := len(dst)
	dst = grow(dst, n)
	buf := dst[start : start+n]
	if _, err := s.f.ReadAt(buf, pos); err != nil {
		return res, l.readFailed(s, pos, err)
	}
	end := first
	res.NextOffset = record.Batch(buf).NextOffset()
	for end+record.HeaderSize <= n && res.NextOffset <= stopAfter {
		b := record.Batch(buf[end:])
		size, ok, err := record.PeekSize(b)
		if err != nil || !ok || b.LastOffset() >= maxOffset {
			break
		}
		res.NextOffset = b.NextOffset()
		end += size
	}
	res.Records = buf[:end]
	return res, nil
}

// grow makes room for n more bytes after len(b).
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	out := make([]byte, len(b), len(b)+n+cap(b)/4)
	copy(out, b)
	return out
}

// TimestampOffset is the answer to a ListOffsets-by-timestamp query.
type TimestampOffset struct {
	Offset    Offset
	Timestamp int64
}

// OffsetForTimestamp returns the first offset whose record timestamp is at or
// after ts (for log-append-time batches, the batch's timestamp), and that
// timestamp; ok is false when no record qualifies. Only this path decodes
// records, of the one batch that holds the answer.
func (l *Log) OffsetForTimestamp(ts int64) (TimestampOffset, bool, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return TimestampOffset{}, false, errs.Errorf(errs.KafkaStorageError, "log %s is closed", l.dir)
	}
	buf := make([]byte, 0, record.HeaderSize)
	var it record.RecordIter
	for _, s := range l.segs {
		if s.maxTS < ts || s.next <= l.lso {
			continue
		}
		pos := int64(0)
		if rel, ok := floorTime(s.times, ts); ok {
			var want uint32
			pos, want = floorPos(s.index, rel)
			if h, err := readHeader(s.f, pos, buf); err != nil || h.BaseOffset() != s.base+Offset(want) {
				pos = 0 // a damaged index: scan the whole segment
			}
		}
		for pos < s.size {
			h, err := readHeader(s.f, pos, buf)
			if err != nil {
				return TimestampOffset{}, false, errs.Errorf(errs.KafkaStorageError, "reading %s: %v", s.path(logSuffix), err)
			}
			size := int64(h.Size())
			if h.MaxTimestamp() >= ts && h.LastOffset() >= l.lso && !h.IsControl() {
				b := make(record.Batch, size)
				if _, err := s.f.ReadAt(b, pos); err != nil {
					return TimestampOffset{}, false, errs.Errorf(errs.KafkaStorageError, "reading %s: %v", s.path(logSuffix), err)
				}
				if err := it.Reset(b); err != nil {
					return TimestampOffset{}, false, err
				}
				for it.Next() {
					rts := it.Timestamp()
					if rts >= ts && it.Offset() >= l.lso {
						return TimestampOffset{Offset: it.Offset(), Timestamp: rts}, true, nil
					}
				}
				if err := it.Err(); err != nil {
					return TimestampOffset{}, false, err
				}
			}
			pos += size
		}
	}
	return TimestampOffset{}, false, nil
}

// readFailed answers a read of s at pos that failed. One the disk could not
// serve (an I/O error, not a short read) fails the log, as a failed write
// does, as Kafka takes a log directory offline on a read error: a leader
// that cannot read keeps no leadership its followers cannot fetch from.
// Called with mu held for reading.
func (l *Log) readFailed(s *segment, pos int64, err error) error {
	werr := fmt.Errorf("reading %s at %d: %w", s.path(logSuffix), pos, err)
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		l.readErr.CompareAndSwap(nil, &werr)
		l.hasFailed.Store(true)
	}
	return errs.Errorf(errs.KafkaStorageError, "%v", werr)
}
