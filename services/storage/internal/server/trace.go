package server

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"skein/libs/record"
)

// traceHeader is the record header a producer's trace context travels in
// (DESIGN §7).
const traceHeader = "traceparent"

// recordsSpanContext is the span context in the traceparent header of the
// first record of the first uncompressed, non-control batch in batches, or an
// invalid one. On the pipelined ProduceStream the gRPC context belongs to the
// long-lived stream, not to any one produce; the records say whose produce it
// is. Compressed batches are not opened: that would cost more on the hot path
// than the span is worth (followers skip them the same way).
func recordsSpanContext(batches []byte) trace.SpanContext {
	it := record.NewBatchIter(batches)
	for it.Next() {
		b := it.Batch()
		if b.Compression() != record.None || b.IsControl() {
			continue
		}
		var ri record.RecordIter
		if ri.Reset(b) != nil || !ri.Next() {
			return trace.SpanContext{}
		}
		hi := ri.Record().Headers()
		for hi.Next() {
			if k, v := hi.Header(); string(k) == traceHeader {
				ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{traceHeader: string(v)})
				return trace.SpanContextFromContext(ctx)
			}
		}
		return trace.SpanContext{}
	}
	return trace.SpanContext{}
}
