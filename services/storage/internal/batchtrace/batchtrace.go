// Package batchtrace reads the producer's trace context out of record
// batches: the gateway stamps each record with a W3C `traceparent` header,
// so the leader's append and the followers' appends can join the
// producer's trace even on long-lived streams whose gRPC context belongs to
// no single produce.
//
// Only the first record of an uncompressed, non-control batch is looked at:
// decompressing on the hot path to find a header would cost more than the
// span is worth.
package batchtrace

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"skein/libs/record"
)

// Header is the record header a producer's trace context travels in.
const Header = "traceparent"

// Each calls fn with every batch whose first record carries a valid trace
// context, until fn returns false.
func Each(batches []byte, fn func(b record.Batch, sc trace.SpanContext) bool) {
	it := record.NewBatchIter(batches)
	it.AllowPartial = true
	for it.Next() {
		b := it.Batch()
		if b.Compression() != record.None || b.IsControl() {
			continue
		}
		var ri record.RecordIter
		if ri.Reset(b) != nil || !ri.Next() {
			continue
		}
		hi := ri.Record().Headers()
		for hi.Next() {
			k, v := hi.Header()
			if string(k) != Header {
				continue
			}
			ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{Header: string(v)})
			if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && !fn(b, sc) {
				return
			}
			break
		}
	}
}

// First is the trace context of the first traced batch, or an invalid one.
func First(batches []byte) trace.SpanContext {
	var out trace.SpanContext
	Each(batches, func(_ record.Batch, sc trace.SpanContext) bool {
		out = sc
		return false
	})
	return out
}
