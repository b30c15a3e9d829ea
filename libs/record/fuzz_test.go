package record

import (
	"bytes"
	"errors"
	"testing"

	"skein/libs/errs"
)

// FuzzDecodeBatch feeds arbitrary bytes to the batch and record decoders.
// They must never panic, must fail only with rows of the error table, and
// whatever they accept must survive a re-encode with the same records.
func FuzzDecodeBatch(f *testing.F) {
	for _, c := range codecs {
		opts := DefaultBatchOptions()
		opts.Compression = c
		opts.BaseOffset = 3
		b := build(f, opts, sampleRecords()[:3])
		f.Add([]byte(b))
	}
	m, _, _ := BuildMarker(nil, 1, 1, Marker{Type: ControlAbort}, 5)
	f.Add([]byte(m))
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, data []byte) {
		it := NewBatchIter(data)
		it.AllowPartial = true
		var ri RecordIter
		for it.Next() {
			b := it.Batch()
			// Header accessors never decode and never fail on a framed batch.
			_, _, _ = b.LastOffset(), b.LastSequence(), b.IsControl()
			if err := b.Verify(); err != nil {
				mustBeTableError(t, err)
				continue
			}
			err := ValidateRecords(&ri, b, ValidateOptions{MaxDecompressed: 1 << 20})
			if err != nil {
				mustBeTableError(t, err)
				continue
			}
			checkReencode(t, b)
		}
		if err := it.Err(); err != nil {
			mustBeTableError(t, err)
		}
	})
}

func mustBeTableError(t *testing.T, err error) {
	t.Helper()
	for _, row := range []*errs.Error{errs.CorruptMessage, errs.InvalidRecord, errs.UnsupportedCompressionType, errs.MessageTooLarge} {
		if errors.Is(err, row) {
			return
		}
	}
	t.Fatalf("error outside the table: %v", err)
}

// checkReencode rebuilds a valid batch uncompressed from its decoded records
// and checks that the records read back identical.
func checkReencode(t *testing.T, b Batch) {
	var it RecordIter
	it.MaxDecompressed = 1 << 20
	if err := it.Reset(b); err != nil {
		t.Fatal(err)
	}
	opts := BatchOptions{BaseOffset: b.BaseOffset(), ProducerID: b.ProducerID(), ProducerEpoch: b.ProducerEpoch(), BaseSequence: b.BaseSequence()}
	bl := NewBuilder(opts)
	bl.SetBaseTimestamp(b.BaseTimestamp())
	type rec struct {
		delta   int32
		ts      int64
		k, v    []byte
		headers []Header
	}
	var want []rec
	for it.Next() {
		r := it.Record()
		h := r.AppendHeaders(nil)
		want = append(want, rec{r.OffsetDelta, r.TimestampDelta, bytes.Clone(r.Key), bytes.Clone(r.Value), h})
		bl.AppendRaw(r.OffsetDelta, r.TimestampDelta, r.Key, r.Value, h)
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	bl.OverrideLastOffsetDelta(b.LastOffsetDelta())
	nb, _, err := bl.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := nb.Verify(); err != nil {
		t.Fatal(err)
	}
	if nb.LastOffset() != b.LastOffset() || nb.RecordCount() != b.RecordCount() {
		t.Fatalf("re-encoded header differs: last %d/%d count %d/%d", nb.LastOffset(), b.LastOffset(), nb.RecordCount(), b.RecordCount())
	}
	if err := it.Reset(nb); err != nil {
		t.Fatal(err)
	}
	for i := 0; it.Next(); i++ {
		r, w := it.Record(), want[i]
		if r.OffsetDelta != w.delta || r.TimestampDelta != w.ts || !sameBytes(r.Key, w.k) || !sameBytes(r.Value, w.v) || r.HeaderCount != len(w.headers) {
			t.Fatalf("record %d changed by re-encoding", i)
		}
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
}
