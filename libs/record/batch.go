package record

// RecordBatch v2 layout (all integers big endian; Kafka's DefaultRecordBatch):
//
//	| off | size | field                | notes                                      |
//	|-----|------|----------------------|--------------------------------------------|
//	|   0 |    8 | baseOffset           | rewritten by the leader (outside the CRC)  |
//	|   8 |    4 | batchLength          | bytes after this field: total = 12 + this  |
//	|  12 |    4 | partitionLeaderEpoch | rewritten by the leader (outside the CRC)  |
//	|  16 |    1 | magic                | always 2                                   |
//	|  17 |    4 | crc                  | CRC-32C (Castagnoli) of bytes [21, end)    |
//	|  21 |    2 | attributes           | bits 0-2 codec, 3 timestamp type,          |
//	|     |      |                      | 4 transactional, 5 control,                |
//	|     |      |                      | 6 delete horizon (KIP-534)                 |
//	|  23 |    4 | lastOffsetDelta      | last offset = baseOffset + this            |
//	|  27 |    8 | baseTimestamp        | records carry deltas from it               |
//	|  35 |    8 | maxTimestamp         |                                            |
//	|  43 |    8 | producerId           | -1 when not idempotent                     |
//	|  51 |    2 | producerEpoch        |                                            |
//	|  53 |    4 | baseSequence         |                                            |
//	|  57 |    4 | recordCount          |                                            |
//	|  61 |    - | records              | compressed as one blob when codec != 0     |

import (
	"encoding/binary"
	"hash/crc32"

	"skein/libs/errs"
)

// Offset is a position in a partition's log: the index of a record.
type Offset int64

// Epoch is a partition leader epoch.
type Epoch int32

const (
	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57

	// HeaderSize is the size of a batch with no records.
	HeaderSize = 61
	// LengthPrefix is what precedes the bytes batchLength counts.
	LengthPrefix = 12
	// MinBatchLength is the smallest legal batchLength (a batch with no records).
	MinBatchLength = HeaderSize - LengthPrefix

	// Magic is the only message format this package reads or writes.
	Magic = 2

	attrCodecMask     = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)

// NoProducerID, NoProducerEpoch and NoSequence mark a batch that was not
// written by an idempotent producer.
const (
	NoProducerID    = -1
	NoProducerEpoch = -1
	NoSequence      = -1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Batch is a view over the bytes of one whole record batch. Its accessors
// assume len(b) >= HeaderSize, which BatchIter and PeekSize guarantee; they
// never decode records.
type Batch []byte

func (b Batch) BaseOffset() Offset { return Offset(binary.BigEndian.Uint64(b[offBaseOffset:])) }

// BatchLength is the batchLength field: the size of the batch minus 12.
func (b Batch) BatchLength() int32 { return int32(binary.BigEndian.Uint32(b[offBatchLength:])) }

// Size is the length of the whole batch as its header declares it.
func (b Batch) Size() int { return LengthPrefix + int(b.BatchLength()) }

func (b Batch) PartitionLeaderEpoch() Epoch {
	return Epoch(binary.BigEndian.Uint32(b[offLeaderEpoch:]))
}
func (b Batch) Magic() int8 { return int8(b[offMagic]) }
func (b Batch) CRC() uint32 { return binary.BigEndian.Uint32(b[offCRC:]) }
func (b Batch) Attributes() int16 {
	return int16(binary.BigEndian.Uint16(b[offAttributes:]))
}
func (b Batch) Compression() Compression { return Compression(b.Attributes() & attrCodecMask) }

// LogAppendTime reports whether maxTimestamp was set by the broker
// (message.timestamp.type=LogAppendTime) rather than taken from the records.
func (b Batch) LogAppendTime() bool   { return b.Attributes()&attrLogAppendTime != 0 }
func (b Batch) IsTransactional() bool { return b.Attributes()&attrTransactional != 0 }
func (b Batch) IsControl() bool       { return b.Attributes()&attrControl != 0 }
func (b Batch) LastOffsetDelta() int32 {
	return int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))
}

// LastOffset is the offset of the batch's last record. Compaction may have
// removed records, but never changes it.
func (b Batch) LastOffset() Offset { return b.BaseOffset() + Offset(b.LastOffsetDelta()) }

// NextOffset is LastOffset()+1: the log end offset after this batch.
func (b Batch) NextOffset() Offset { return b.LastOffset() + 1 }

func (b Batch) BaseTimestamp() int64 { return int64(binary.BigEndian.Uint64(b[offBaseTimestamp:])) }
func (b Batch) MaxTimestamp() int64  { return int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])) }
func (b Batch) ProducerID() int64    { return int64(binary.BigEndian.Uint64(b[offProducerID:])) }
func (b Batch) ProducerEpoch() int16 {
	return int16(binary.BigEndian.Uint16(b[offProducerEpoch:]))
}
func (b Batch) BaseSequence() int32 { return int32(binary.BigEndian.Uint32(b[offBaseSequence:])) }

// LastSequence is the sequence number of the last record, wrapping at
// MaxInt32 as Kafka's producers do.
func (b Batch) LastSequence() int32 {
	seq := b.BaseSequence()
	if seq == NoSequence {
		return NoSequence
	}
	return int32((int64(seq) + int64(b.LastOffsetDelta())) % (1 << 31))
}

func (b Batch) RecordCount() int32 { return int32(binary.BigEndian.Uint32(b[offRecordCount:])) }

// RecordsPayload is the records section as stored: compressed when the
// codec is not None.
func (b Batch) RecordsPayload() []byte { return b[HeaderSize:] }

// SetBaseOffset rewrites the base offset in place. It is outside the CRC.
func (b Batch) SetBaseOffset(o Offset) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(o))
}

// SetPartitionLeaderEpoch rewrites the leader epoch in place. It is outside
// the CRC.
func (b Batch) SetPartitionLeaderEpoch(e Epoch) {
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(e))
}

// SetMaxTimestamp sets the timestamp type and maxTimestamp, as a broker does
// for message.timestamp.type=LogAppendTime, and recomputes the CRC since both
// fields are covered by it.
func (b Batch) SetMaxTimestamp(logAppendTime bool, ts int64) {
	attrs := uint16(b.Attributes()) &^ attrLogAppendTime
	if logAppendTime {
		attrs |= attrLogAppendTime
	}
	binary.BigEndian.PutUint16(b[offAttributes:], attrs)
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	b.updateCRC()
}

func (b Batch) updateCRC() {
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
}

// PeekSize returns the size of the batch at the start of buf, reading only its
// header. ok is false when buf is too short to hold the header or the whole
// batch (a torn tail, or a fetch cut at maxBytes); err is set when the header
// cannot belong to a valid batch.
func PeekSize(buf []byte) (size int, ok bool, err error) {
	if len(buf) < offMagic+1 {
		return 0, false, nil
	}
	length := int32(binary.BigEndian.Uint32(buf[offBatchLength:]))
	if length < MinBatchLength {
		return 0, false, errs.Errorf(errs.CorruptMessage, "batch length %d below the minimum %d", length, MinBatchLength)
	}
	if m := int8(buf[offMagic]); m != Magic {
		return 0, false, errs.Errorf(errs.CorruptMessage, "unsupported magic %d (only %d)", m, Magic)
	}
	size = LengthPrefix + int(length)
	return size, len(buf) >= size, nil
}

// Verify checks that b is exactly one well-framed v2 batch whose CRC matches:
// what the log checks before it stores or serves bytes. It does not decode
// records.
func (b Batch) Verify() error {
	if len(b) < HeaderSize {
		return errs.Errorf(errs.CorruptMessage, "batch of %d bytes is shorter than the %d-byte header", len(b), HeaderSize)
	}
	size, _, err := PeekSize(b)
	if err != nil {
		return err
	}
	if size != len(b) {
		return errs.Errorf(errs.CorruptMessage, "batch length field says %d bytes, have %d", size, len(b))
	}
	if got, want := crc32.Checksum(b[offAttributes:], castagnoli), b.CRC(); got != want {
		return errs.Errorf(errs.CorruptMessage, "crc mismatch at offset %d: computed %08x, stored %08x", b.BaseOffset(), got, want)
	}
	if d := b.LastOffsetDelta(); d < 0 {
		return errs.Errorf(errs.CorruptMessage, "negative last offset delta %d at offset %d", d, b.BaseOffset())
	}
	if n := b.RecordCount(); n < 0 || int64(n) > int64(b.LastOffsetDelta())+1 {
		return errs.Errorf(errs.CorruptMessage, "record count %d does not fit last offset delta %d at offset %d", n, b.LastOffsetDelta(), b.BaseOffset())
	}
	if c := b.Compression(); !c.Valid() {
		return errs.Errorf(errs.UnsupportedCompressionType, "compression codec %d at offset %d", int(c), b.BaseOffset())
	}
	return nil
}
