package server

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	storagev1 "skein/gen/skein/storage/v1"
	"skein/libs/errs"
	"skein/libs/record"
	"skein/services/storage/internal/batchtrace"
	"skein/services/storage/internal/partition"
)

type noReplicas struct{}

func (noReplicas) Get(tp partition.TP) (*partition.Partition, error) {
	return nil, errs.Errorf(errs.UnknownTopicOrPartition, "no %v here", tp)
}

func batchWith(t *testing.T, c record.Compression, headers ...record.Header) []byte {
	t.Helper()
	opts := record.DefaultBatchOptions()
	opts.Compression = c
	b := record.NewBuilder(opts)
	b.Append(1, []byte("k"), []byte("v"), headers...)
	b.Append(2, []byte("k"), []byte("v"))
	batch, _, err := b.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	return batch
}

func TestRecordsSpanContext(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	sc := batchtrace.First(batchWith(t, record.None, record.Header{Key: "h", Value: []byte("x")}, record.Header{Key: batchtrace.Header, Value: []byte(tp)}))
	if !sc.IsValid() || sc.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || sc.SpanID().String() != "b7ad6b7169203331" || !sc.IsRemote() {
		t.Errorf("span context %+v from %s", sc, tp)
	}
	for name, batches := range map[string][]byte{
		"no header":  batchWith(t, record.None),
		"bad header": batchWith(t, record.None, record.Header{Key: batchtrace.Header, Value: []byte("nonsense")}),
		"compressed": batchWith(t, record.Gzip, record.Header{Key: batchtrace.Header, Value: []byte(tp)}),
		"empty":      nil,
		"torn":       batchWith(t, record.None, record.Header{Key: batchtrace.Header, Value: []byte(tp)})[:30],
	} {
		if sc := batchtrace.First(batches); sc.IsValid() {
			t.Errorf("%s: got a span context %+v", name, sc)
		}
	}
}

// On the pipelined ProduceStream the gRPC context is the stream's: the
// leader's storage.append span must join the producer's trace named in the
// records, and link back to the stream. Unary Produce keeps the caller's.
func TestStreamProduceSpanJoinsRecordsTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prev := tracer
	tracer = tp.Tracer("skein/storage")
	t.Cleanup(func() { tracer = prev })

	s := New(noReplicas{}, slog.New(slog.NewTextHandler(io.Discard, nil)), NewMetrics(prometheus.NewRegistry()))
	producer := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled})
	header := "00-" + producer.TraceID().String() + "-" + producer.SpanID().String() + "-01"
	req := &storagev1.ProduceRequest{Acks: -1, Partitions: []*storagev1.PartitionProduce{{Topic: "t", Partition: 0,
		Records: batchWith(t, record.None, record.Header{Key: batchtrace.Header, Value: []byte(header)})}}}

	streamCtx, stream := tp.Tracer("test").Start(context.Background(), "ProduceStream")
	if _, err := s.produce(streamCtx, req, true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.produce(streamCtx, req, false); err != nil {
		t.Fatal(err)
	}
	stream.End()

	var appends []tracetest.SpanStub
	for _, sp := range exp.GetSpans() {
		if sp.Name == "storage.append" {
			appends = append(appends, sp)
		}
	}
	if len(appends) != 2 {
		t.Fatalf("got %d storage.append spans, want 2", len(appends))
	}
	fromRecords, unary := appends[0], appends[1]
	if fromRecords.SpanContext.TraceID() != producer.TraceID() || fromRecords.Parent.SpanID() != producer.SpanID() {
		t.Errorf("stream append span is in trace %s under %s, want %s under %s",
			fromRecords.SpanContext.TraceID(), fromRecords.Parent.SpanID(), producer.TraceID(), producer.SpanID())
	}
	if len(fromRecords.Links) != 1 || fromRecords.Links[0].SpanContext.SpanID() != stream.SpanContext().SpanID() {
		t.Errorf("stream append span links %+v, want the stream span", fromRecords.Links)
	}
	if unary.Parent.SpanID() != stream.SpanContext().SpanID() || len(unary.Links) != 0 {
		t.Errorf("unary append span's parent %s, links %v: want the caller's span and no links", unary.Parent.SpanID(), unary.Links)
	}
}
