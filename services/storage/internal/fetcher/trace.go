package fetcher

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"skein/libs/record"
)

var tracer = otel.Tracer("skein/storage/fetcher")

// traceHeader is the record header a producer's trace context travels in
// (DESIGN §7), so the follower's append joins the producer's trace.
const traceHeader = "traceparent"

// startAppendSpans starts one "replica.append" span per distinct producer
// trace found in the batches' first records. Only uncompressed batches are
// looked at: decompressing on the replication path to find a header would
// cost more than the span is worth.
func startAppendSpans(batches []byte, follower int32, tp string) []trace.Span {
	var spans []trace.Span
	seen := map[string]bool{}
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
			if string(k) != traceHeader || seen[string(v)] {
				continue
			}
			seen[string(v)] = true
			ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{traceHeader: string(v)})
			if !trace.SpanContextFromContext(ctx).IsValid() {
				continue
			}
			_, span := tracer.Start(ctx, "replica.append", trace.WithAttributes(
				attribute.String("partition", tp), attribute.Int("follower", int(follower)), attribute.Int64("base_offset", int64(b.BaseOffset()))))
			spans = append(spans, span)
		}
	}
	return spans
}
