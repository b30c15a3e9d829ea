package fetcher

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"skein/libs/record"
	"skein/services/storage/internal/batchtrace"
)

var tracer = otel.Tracer("skein/storage/fetcher")

// startAppendSpans starts one "replica.append" span per distinct producer
// trace in the batches, so the follower's append joins the producer's trace.
// The partition's name is formatted only for a traced batch: a round of
// untraced batches costs no allocation here.
func startAppendSpans(batches []byte, follower int32, tp fmt.Stringer) []trace.Span {
	var spans []trace.Span
	var seen map[trace.TraceID]bool
	batchtrace.Each(batches, func(b record.Batch, sc trace.SpanContext) bool {
		if seen[sc.TraceID()] {
			return true
		}
		if seen == nil {
			seen = map[trace.TraceID]bool{}
		}
		seen[sc.TraceID()] = true
		_, span := tracer.Start(trace.ContextWithRemoteSpanContext(context.Background(), sc), "replica.append", trace.WithAttributes(
			attribute.String("partition", tp.String()), attribute.Int("follower", int(follower)), attribute.Int64("base_offset", int64(b.BaseOffset()))))
		spans = append(spans, span)
		return true
	})
	return spans
}
