package record

import (
	"encoding/binary"
	"math"
	"slices"
)

// BatchOptions are the header fields a batch is built with.
type BatchOptions struct {
	BaseOffset           Offset
	PartitionLeaderEpoch Epoch
	Compression          Compression
	LogAppendTime        bool
	Transactional        bool
	Control              bool
	// ProducerID, ProducerEpoch and BaseSequence identify an idempotent
	// producer's batch; use NoProducerID / NoProducerEpoch / NoSequence (as
	// DefaultBatchOptions does) for one that is not.
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
}

// DefaultBatchOptions is a plain, uncompressed, non-idempotent batch at
// offset 0.
func DefaultBatchOptions() BatchOptions {
	return BatchOptions{ProducerID: NoProducerID, ProducerEpoch: NoProducerEpoch, BaseSequence: NoSequence}
}

// Builder accumulates records and encodes one batch. The zero value is not
// usable; call NewBuilder. A Builder may be Reset and reused.
type Builder struct {
	opts BatchOptions
	recs []byte // encoded records, uncompressed
	n    int32

	baseTS, maxTS   int64
	haveTS          bool
	lastDelta       int32
	lastOverride    bool
	maxTSOverride   bool
	baseTSOverride  bool
	nextOffsetDelta int32
}

// NewBuilder returns a builder for a batch with the given header.
func NewBuilder(opts BatchOptions) *Builder {
	b := &Builder{}
	b.Reset(opts)
	return b
}

// Reset empties the builder, keeping its buffers.
func (b *Builder) Reset(opts BatchOptions) {
	*b = Builder{opts: opts, recs: b.recs[:0], lastDelta: -1}
}

// Grow reserves room for n more bytes of encoded records, so a caller that
// knows the batch's size appends without the buffer growing step by step.
func (b *Builder) Grow(n int) { b.recs = slices.Grow(b.recs, n) }

// Len is the number of records appended.
func (b *Builder) Len() int { return int(b.n) }

// Append adds a record with the next offset delta. The first record's
// timestamp becomes the batch's base timestamp.
func (b *Builder) Append(timestamp int64, key, value []byte, headers ...Header) {
	if !b.haveTS && !b.baseTSOverride {
		b.baseTS = timestamp
	}
	b.AppendRaw(b.nextOffsetDelta, timestamp-b.baseTS, key, value, headers)
}

// SetBaseTimestamp fixes the base timestamp that record timestamp deltas are
// taken from; AppendRaw callers copying records from an existing batch use
// it to keep the original deltas.
func (b *Builder) SetBaseTimestamp(ts int64) { b.baseTS, b.baseTSOverride = ts, true }

// AppendRaw adds a record with an explicit offset delta and timestamp delta,
// as compaction needs when it copies surviving records. Deltas must increase.
func (b *Builder) AppendRaw(offsetDelta int32, timestampDelta int64, key, value []byte, headers []Header) {
	ts := b.baseTS + timestampDelta
	if !b.haveTS || ts > b.maxTS {
		b.maxTS = ts
	}
	b.haveTS = true
	b.lastDelta = offsetDelta
	b.nextOffsetDelta = offsetDelta + 1
	b.n++

	bodyLen := 1 + VarintLen(timestampDelta) + VarintLen(int64(offsetDelta)) +
		BytesLen(key) + BytesLen(value) + VarintLen(int64(len(headers)))
	for _, h := range headers {
		bodyLen += VarintLen(int64(len(h.Key))) + len(h.Key) + BytesLen(h.Value)
	}
	r := b.recs
	r = binary.AppendVarint(r, int64(bodyLen))
	r = append(r, 0) // attributes
	r = binary.AppendVarint(r, timestampDelta)
	r = binary.AppendVarint(r, int64(offsetDelta))
	r = appendBytes(r, key)
	r = appendBytes(r, value)
	r = binary.AppendVarint(r, int64(len(headers)))
	for _, h := range headers {
		r = binary.AppendVarint(r, int64(len(h.Key)))
		r = append(r, h.Key...)
		r = appendBytes(r, h.Value)
	}
	b.recs = r
}

// OverrideLastOffsetDelta keeps a batch's original last offset when records
// at its end were removed (compaction), so offsets and producer sequences
// stay where they were.
func (b *Builder) OverrideLastOffsetDelta(d int32) { b.lastDelta, b.lastOverride = d, true }

// OverrideMaxTimestamp keeps a batch's original max timestamp.
func (b *Builder) OverrideMaxTimestamp(ts int64) { b.maxTS, b.maxTSOverride = ts, true }

// Build appends the encoded batch to dst and returns the batch (a sub-slice
// of the result) and the extended dst.
func (b *Builder) Build(dst []byte) (Batch, []byte, error) {
	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	var err error
	if dst, err = Compress(dst, b.recs, b.opts.Compression); err != nil {
		return nil, dst[:start], err
	}
	h := dst[start:]
	if len(h)-LengthPrefix > math.MaxInt32 {
		return nil, dst[:start], errTooLarge
	}
	be := binary.BigEndian
	be.PutUint64(h[offBaseOffset:], uint64(b.opts.BaseOffset))
	be.PutUint32(h[offBatchLength:], uint32(len(h)-LengthPrefix))
	be.PutUint32(h[offLeaderEpoch:], uint32(b.opts.PartitionLeaderEpoch))
	h[offMagic] = Magic
	attrs := uint16(b.opts.Compression) & attrCodecMask
	if b.opts.LogAppendTime {
		attrs |= attrLogAppendTime
	}
	if b.opts.Transactional {
		attrs |= attrTransactional
	}
	if b.opts.Control {
		attrs |= attrControl
	}
	be.PutUint16(h[offAttributes:], attrs)
	last := b.lastDelta
	if last < 0 {
		last = 0 // an empty batch still covers its base offset
	}
	be.PutUint32(h[offLastOffsetDelta:], uint32(last))
	baseTS, maxTS := b.baseTS, b.maxTS
	if !b.haveTS && !b.maxTSOverride && !b.baseTSOverride {
		baseTS, maxTS = -1, -1 // Kafka's NO_TIMESTAMP
	}
	be.PutUint64(h[offBaseTimestamp:], uint64(baseTS))
	be.PutUint64(h[offMaxTimestamp:], uint64(maxTS))
	be.PutUint64(h[offProducerID:], uint64(b.opts.ProducerID))
	be.PutUint16(h[offProducerEpoch:], uint16(b.opts.ProducerEpoch))
	be.PutUint32(h[offBaseSequence:], uint32(b.opts.BaseSequence))
	be.PutUint32(h[offRecordCount:], uint32(b.n))
	Batch(h).updateCRC()
	return Batch(h), dst, nil
}

// VarintLen is the size of v as a zig-zag varint, as record fields encode it.
func VarintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// BytesLen is the encoded size of a record's key, value or header value:
// its varint length (-1 for nil) and its bytes.
func BytesLen(b []byte) int {
	if b == nil {
		return 1
	}
	return VarintLen(int64(len(b))) + len(b)
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}
