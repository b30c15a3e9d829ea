package fetcher

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"skein/libs/record"
	"skein/services/storage/internal/partition"
)

func TestFollowerAppendJoinsTheProducersTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	otel.SetTracerProvider(tp)
	defer tp.Shutdown(context.Background())

	ctx, producerSpan := tp.Tracer("test").Start(context.Background(), "produce")
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)

	build := func(c record.Compression, headers ...record.Header) []byte {
		o := record.DefaultBatchOptions()
		o.Compression = c
		b := record.NewBuilder(o)
		b.Append(time.Now().UnixMilli(), []byte("k"), []byte("v"), headers...)
		batch, _, err := b.Build(nil)
		if err != nil {
			t.Fatal(err)
		}
		return batch
	}
	traced := build(record.None, record.Header{Key: "traceparent", Value: []byte(carrier["traceparent"])})
	untraced := build(record.None)
	data := append(append(append([]byte{}, traced...), untraced...), traced...)

	spans := startAppendSpans(data, 3, partition.TP{Topic: "t", Partition: 0})
	for _, s := range spans {
		s.End()
	}
	got := exp.GetSpans()
	if len(got) != 1 {
		t.Fatalf("want one span for one distinct trace, got %d", len(got))
	}
	if got[0].SpanContext.TraceID() != producerSpan.SpanContext().TraceID() || got[0].Parent.SpanID() != producerSpan.SpanContext().SpanID() {
		t.Errorf("follower span not a child of the producer's span: %+v", got[0])
	}
	var named bool
	for _, a := range got[0].Attributes {
		named = named || a.Key == "partition" && a.Value.AsString() == "t-0"
	}
	if !named {
		t.Errorf("follower span attributes %v, want partition t-0", got[0].Attributes)
	}
	if n := len(startAppendSpans(untraced, 3, partition.TP{Topic: "t"})); n != 0 {
		t.Errorf("batch without traceparent started %d spans", n)
	}
}
