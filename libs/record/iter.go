package record

import "skein/libs/errs"

// BatchIter walks concatenated batches in a byte slice without copying.
// It checks framing (length and magic) only; call Batch().Verify() for the
// CRC. A trailing partial batch ends the iteration: Err reports it unless
// AllowPartial was set, which is what a fetch response reader wants (Kafka
// cuts fetches at maxBytes mid-batch).
//
//	it := record.NewBatchIter(buf)
//	for it.Next() { b := it.Batch(); ... }
//	if err := it.Err(); err != nil { ... }
type BatchIter struct {
	buf []byte
	pos int
	cur Batch
	err error

	// AllowPartial makes a trailing partial batch a clean end rather than an
	// error.
	AllowPartial bool
}

// NewBatchIter returns an iterator over the batches in buf.
func NewBatchIter(buf []byte) BatchIter { return BatchIter{buf: buf} }

// Next advances to the next whole batch.
func (it *BatchIter) Next() bool {
	if it.err != nil || it.pos >= len(it.buf) {
		it.cur = nil
		return false
	}
	rest := it.buf[it.pos:]
	size, ok, err := PeekSize(rest)
	if err != nil {
		it.err, it.cur = err, nil
		return false
	}
	if !ok {
		if !it.AllowPartial {
			it.err = errs.Errorf(errs.CorruptMessage, "truncated batch at byte %d: %d bytes left", it.pos, len(rest))
		}
		it.cur = nil
		return false
	}
	if size < HeaderSize {
		// PeekSize already checks MinBatchLength; this keeps the accessors'
		// HeaderSize promise obvious.
		it.err, it.cur = errs.Errorf(errs.CorruptMessage, "batch of %d bytes at byte %d", size, it.pos), nil
		return false
	}
	it.cur = Batch(rest[:size:size])
	it.pos += size
	return true
}

// Batch is the current batch, a sub-slice of the input.
func (it *BatchIter) Batch() Batch { return it.cur }

// Pos is the byte position just past the current batch: after the loop, the
// length of the well-framed prefix of the input.
func (it *BatchIter) Pos() int { return it.pos }

// Err is the framing error that stopped the iteration, if any.
func (it *BatchIter) Err() error { return it.err }
