package record

// Record layout inside the (decompressed) records section. Varints are
// zig-zag encoded base-128, as protobuf's sint32/sint64:
//
//	| field          | type                | notes                              |
//	|----------------|---------------------|------------------------------------|
//	| length         | varint              | bytes of the record after this     |
//	| attributes     | int8                | unused, 0                          |
//	| timestampDelta | varlong             | from the batch's baseTimestamp     |
//	| offsetDelta    | varint              | from the batch's baseOffset        |
//	| keyLength      | varint              | -1 = null key                      |
//	| key            | keyLength bytes     |                                    |
//	| valueLength    | varint              | -1 = null value (a tombstone)      |
//	| value          | valueLength bytes   |                                    |
//	| headerCount    | varint              |                                    |
//	| headers        | headerCount times:  | keyLength varint (>= 0), key,      |
//	|                |                     | valueLength varint (-1 = null), value |

import (
	"encoding/binary"
	"math"

	"skein/libs/errs"
)

// Header is one record header. A nil Value is a null header value.
type Header struct {
	Key   string
	Value []byte
}

// Record is a decoded record whose slices point into the batch or the
// iterator's buffer. A nil Key or Value is null (a nil Value with a key is a
// tombstone); an empty non-nil slice is a present, empty one.
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key            []byte
	Value          []byte
	HeaderCount    int
	headers        []byte // the raw header section, HeaderCount entries
}

// Headers returns an iterator over the record's headers, without copying.
func (r *Record) Headers() HeaderIter { return HeaderIter{buf: r.headers, left: r.HeaderCount} }

// AppendHeaders appends the record's headers to dst, copying only the
// header key strings.
func (r *Record) AppendHeaders(dst []Header) []Header {
	it := r.Headers()
	for it.Next() {
		k, v := it.Header()
		dst = append(dst, Header{Key: string(k), Value: v})
	}
	return dst
}

// HeaderIter walks a record's headers; the record was validated when it was
// decoded, so iteration cannot fail.
type HeaderIter struct {
	buf  []byte
	left int
	k, v []byte
}

func (it *HeaderIter) Next() bool {
	if it.left == 0 {
		return false
	}
	it.left--
	var ok bool
	it.k, it.buf, ok = readBytes(it.buf)
	if !ok {
		it.left = 0
		return false
	}
	it.v, it.buf, _ = readBytes(it.buf)
	return true
}

// Header is the current header's key and value (nil value = null).
func (it *HeaderIter) Header() (key, value []byte) { return it.k, it.v }

func readVarint(b []byte) (int32, []byte, bool) {
	// Most lengths and deltas fit one byte; skip the general decoder then.
	if len(b) > 0 && b[0] < 0x80 {
		u := int32(b[0])
		return (u >> 1) ^ -(u & 1), b[1:], true
	}
	v, n := binary.Varint(b)
	if n <= 0 || n > 5 || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, b, false
	}
	return int32(v), b[n:], true
}

func readVarlong(b []byte) (int64, []byte, bool) {
	if len(b) > 0 && b[0] < 0x80 {
		u := int64(b[0])
		return (u >> 1) ^ -(u & 1), b[1:], true
	}
	v, n := binary.Varint(b)
	if n <= 0 {
		return 0, b, false
	}
	return v, b[n:], true
}

// readBytes reads a varint length and that many bytes; -1 is null (nil).
func readBytes(b []byte) ([]byte, []byte, bool) {
	n, b, ok := readVarint(b)
	if !ok || n < -1 || int(n) > len(b) {
		return nil, b, false
	}
	if n == -1 {
		return nil, b, true
	}
	return b[:n:n], b[n:], true
}

// parseRecord decodes the record at the start of b and returns the rest.
func parseRecord(b []byte, r *Record) ([]byte, error) {
	length, b, ok := readVarint(b)
	if !ok || length < 0 || int(length) > len(b) {
		return nil, errs.Errorf(errs.InvalidRecord, "bad record length")
	}
	body, rest := b[:length], b[length:]
	if len(body) < 1 {
		return nil, errs.Errorf(errs.InvalidRecord, "record too short for its attributes")
	}
	r.Attributes = int8(body[0])
	body = body[1:]
	if r.TimestampDelta, body, ok = readVarlong(body); !ok {
		return nil, errs.Errorf(errs.InvalidRecord, "bad timestamp delta")
	}
	if r.OffsetDelta, body, ok = readVarint(body); !ok {
		return nil, errs.Errorf(errs.InvalidRecord, "bad offset delta")
	}
	if r.Key, body, ok = readBytes(body); !ok {
		return nil, errs.Errorf(errs.InvalidRecord, "bad key length")
	}
	if r.Value, body, ok = readBytes(body); !ok {
		return nil, errs.Errorf(errs.InvalidRecord, "bad value length at offset delta %d", r.OffsetDelta)
	}
	var count int32
	if count, body, ok = readVarint(body); !ok || count < 0 {
		return nil, errs.Errorf(errs.InvalidRecord, "bad header count at offset delta %d", r.OffsetDelta)
	}
	r.HeaderCount, r.headers = int(count), body
	for i := int32(0); i < count; i++ {
		var k []byte
		if k, body, ok = readBytes(body); !ok || k == nil {
			return nil, errs.Errorf(errs.InvalidRecord, "bad header key at offset delta %d", r.OffsetDelta)
		}
		if _, body, ok = readBytes(body); !ok {
			return nil, errs.Errorf(errs.InvalidRecord, "bad header value at offset delta %d", r.OffsetDelta)
		}
	}
	if len(body) != 0 {
		return nil, errs.Errorf(errs.InvalidRecord, "%d bytes left over in record at offset delta %d", len(body), r.OffsetDelta)
	}
	return rest, nil
}

// DefaultMaxDecompressed bounds a batch's decompressed records section when
// the caller does not say otherwise.
const DefaultMaxDecompressed = 64 << 20

// RecordIter yields the records of one batch at a time. It is meant to be
// kept and Reset for every batch: its decompression buffer is reused, so a
// steady state does not allocate.
//
//	var it record.RecordIter
//	if err := it.Reset(b); err != nil { ... }
//	for it.Next() { r := it.Record(); ... }
//	if err := it.Err(); err != nil { ... }
type RecordIter struct {
	// MaxDecompressed bounds the decompressed records section;
	// 0 means DefaultMaxDecompressed.
	MaxDecompressed int

	buf       []byte // decompression scratch, reused
	src       []byte
	size      int // the records section's size, decompressed
	left      int32
	rec       Record
	err       error
	base      Offset
	baseTS    int64
	maxTS     int64 // every record's timestamp when logAppend
	logAppend bool
	scanned   int32
}

// Reset starts iterating over b's records, decompressing them first when b
// is compressed. b must have passed Verify (or come from a trusted log).
func (it *RecordIter) Reset(b Batch) error {
	it.err, it.src, it.left, it.scanned, it.size = nil, nil, 0, 0, 0
	if len(b) < HeaderSize {
		it.err = errs.Errorf(errs.CorruptMessage, "batch of %d bytes", len(b))
		return it.err
	}
	it.base, it.baseTS = b.BaseOffset(), b.BaseTimestamp()
	it.maxTS, it.logAppend = b.MaxTimestamp(), b.LogAppendTime()
	it.left = b.RecordCount()
	if it.left < 0 {
		it.err = errs.Errorf(errs.CorruptMessage, "negative record count %d", it.left)
		return it.err
	}
	c := b.Compression()
	if c == None {
		it.src = b.RecordsPayload()
		it.size = len(it.src)
		return nil
	}
	if !c.Valid() {
		it.err = errs.Errorf(errs.UnsupportedCompressionType, "compression codec %d at offset %d", int(c), it.base)
		return it.err
	}
	limit := it.MaxDecompressed
	if limit <= 0 {
		limit = DefaultMaxDecompressed
	}
	var err error
	it.buf, err = Decompress(it.buf[:0], b.RecordsPayload(), c, limit)
	if err != nil {
		it.err = err
		return err
	}
	it.src = it.buf
	it.size = len(it.src)
	return nil
}

// RecordsSize is the size of the batch's records section as Reset found it,
// decompressed: with HeaderSize, what the batch would take uncompressed.
func (it *RecordIter) RecordsSize() int { return it.size }

// Next decodes the next record. It returns false at the end or on error.
func (it *RecordIter) Next() bool {
	if it.err != nil {
		return false
	}
	if it.left == 0 {
		if len(it.src) != 0 {
			it.err = errs.Errorf(errs.InvalidRecord, "%d bytes after the last record of the batch at offset %d", len(it.src), it.base)
		}
		return false
	}
	rest, err := parseRecord(it.src, &it.rec)
	if err != nil {
		it.err = errs.Errorf(errs.InvalidRecord, "record %d of the batch at offset %d: %s", it.scanned, it.base, errs.Message(err))
		return false
	}
	it.src = rest
	it.left--
	it.scanned++
	return true
}

// Record is the current record; it is overwritten by Next.
func (it *RecordIter) Record() *Record { return &it.rec }

// Offset is the current record's offset.
func (it *RecordIter) Offset() Offset { return it.base + Offset(it.rec.OffsetDelta) }

// Timestamp is the current record's timestamp: its create time, or for a
// batch stamped with log append time the batch's MaxTimestamp, as Kafka's
// readers take it.
func (it *RecordIter) Timestamp() int64 {
	if it.logAppend {
		return it.maxTS
	}
	return it.baseTS + it.rec.TimestampDelta
}

// Err is the error that ended the iteration, if any.
func (it *RecordIter) Err() error { return it.err }

// ValidateOptions selects the checks ValidateRecords makes beyond parsing.
type ValidateOptions struct {
	// Strict requires what a leader requires of a producer's batch: at least
	// one record, offset deltas 0, 1, 2, ... and lastOffsetDelta =
	// recordCount-1. Compacted batches fail it (they have gaps).
	Strict bool
	// RequireKeys refuses records with a null key (compacted topics).
	RequireKeys bool
	// MaxDecompressed bounds the decompressed records; 0 means
	// DefaultMaxDecompressed.
	MaxDecompressed int
	// CheckTimestamps refuses a record whose create time (a record without
	// one, -1, passes) is outside [MinTimestamp, MaxTimestamp] with
	// INVALID_TIMESTAMP: message.timestamp.before.max.ms and
	// message.timestamp.after.max.ms around the leader's clock.
	CheckTimestamps            bool
	MinTimestamp, MaxTimestamp int64
}

// ValidateRecords decodes every record of b (which must have passed Verify)
// and checks it against the header, using it for scratch space.
func ValidateRecords(it *RecordIter, b Batch, opts ValidateOptions) error {
	it.MaxDecompressed = opts.MaxDecompressed
	if err := it.Reset(b); err != nil {
		return err
	}
	count, lastDelta := b.RecordCount(), b.LastOffsetDelta()
	if opts.Strict && count == 0 {
		return errs.Errorf(errs.InvalidRecord, "batch at offset %d has no records", b.BaseOffset())
	}
	if opts.Strict && lastDelta != count-1 {
		return errs.Errorf(errs.InvalidRecord, "batch at offset %d: last offset delta %d with %d records", b.BaseOffset(), lastDelta, count)
	}
	prev := int32(-1)
	for i := int32(0); it.Next(); i++ {
		r := it.Record()
		switch {
		case opts.Strict && r.OffsetDelta != i:
			return errs.Errorf(errs.InvalidRecord, "batch at offset %d: record %d has offset delta %d", b.BaseOffset(), i, r.OffsetDelta)
		case r.OffsetDelta <= prev || r.OffsetDelta > lastDelta:
			return errs.Errorf(errs.InvalidRecord, "batch at offset %d: record %d has offset delta %d out of order or past %d", b.BaseOffset(), i, r.OffsetDelta, lastDelta)
		case opts.RequireKeys && r.Key == nil && !b.IsControl():
			return errs.Errorf(errs.InvalidRecord, "batch at offset %d: a compacted topic does not accept a record without a key", b.BaseOffset())
		case opts.CheckTimestamps && !b.IsControl():
			switch ts := b.BaseTimestamp() + r.TimestampDelta; {
			case ts == -1:
			case ts < opts.MinTimestamp:
				return errs.Errorf(errs.InvalidTimestamp, "record %d of the batch: timestamp %d is before %d, the earliest the topic's message.timestamp.before.max.ms accepts now", i, ts, opts.MinTimestamp)
			case ts > opts.MaxTimestamp:
				return errs.Errorf(errs.InvalidTimestamp, "record %d of the batch: timestamp %d is after %d, the latest the topic's message.timestamp.after.max.ms accepts now", i, ts, opts.MaxTimestamp)
			}
		}
		prev = r.OffsetDelta
	}
	return it.Err()
}
