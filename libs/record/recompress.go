package record

import (
	"encoding/binary"
	"math"

	"skein/libs/errs"
)

// NeedsRecompress reports whether a leader storing batches with codec c must
// re-encode b: a producer's batch in another codec. Control batches are kept
// as they are, whatever the codec, as Kafka's brokers keep them.
func NeedsRecompress(b Batch, c Compression) bool {
	return !b.IsControl() && b.Compression() != c
}

// Recompress appends to dst b with its records section re-encoded in codec c,
// as a Kafka leader does for a topic whose compression.type names a codec
// other than the producer's (Kafka's LogValidator). Records are not
// decoded: the section is decompressed and compressed again byte for byte,
// so offset deltas, timestamps, keys, values (nil ones too) and headers stay
// exactly as sent. Every header field but the codec bits, the batch length
// and the CRC is kept: base offset, leader epoch, producer id, epoch and
// base sequence, the timestamps and the transactional, control and
// timestamp-type flags. The CRC is computed afresh.
//
// b must be one whole batch; it is verified first. A batch that needs no
// re-encoding (NeedsRecompress is false) is answered as it is, not copied,
// with dst unchanged. maxDecompressed bounds the decompressed records
// section (0: DefaultMaxDecompressed).
func Recompress(dst []byte, b Batch, c Compression, maxDecompressed int) (Batch, []byte, error) {
	if err := b.Verify(); err != nil {
		return nil, dst, err
	}
	if !c.Valid() {
		return nil, dst, errs.Errorf(errs.UnsupportedCompressionType, "compression codec %d", int(c))
	}
	if !NeedsRecompress(b, c) {
		return b, dst, nil
	}
	if maxDecompressed <= 0 {
		maxDecompressed = DefaultMaxDecompressed
	}
	recs := b.RecordsPayload()
	if from := b.Compression(); from != None {
		var err error
		if recs, err = Decompress(nil, recs, from, maxDecompressed); err != nil {
			return nil, dst, err
		}
	}
	start := len(dst)
	dst = append(dst, b[:HeaderSize]...)
	var err error
	if dst, err = Compress(dst, recs, c); err != nil {
		return nil, dst[:start], err
	}
	out := Batch(dst[start:])
	if len(out)-LengthPrefix > math.MaxInt32 {
		return nil, dst[:start], errs.Errorf(errs.MessageTooLarge, "batch at offset %d is too large recompressed with %s", b.BaseOffset(), c)
	}
	be := binary.BigEndian
	be.PutUint32(out[offBatchLength:], uint32(len(out)-LengthPrefix))
	attrs := uint16(b.Attributes())&^attrCodecMask | uint16(c)&attrCodecMask
	be.PutUint16(out[offAttributes:], attrs)
	out.updateCRC()
	return out, dst, nil
}
