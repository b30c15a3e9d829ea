package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// A call from an instrumented client to an instrumented server, made inside a
// parent span, must yield one trace: parent -> client span -> server span.
func TestClientServerCallIsOneTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	shutdown, err := Tracing(context.Background(), TracingConfig{ServiceName: "test", Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(context.Background())

	reg := NewRegistry()
	srv := grpc.NewServer(GRPCServerOptions(NewGRPCMetrics(reg))...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(), append(GRPCDialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	ctx, parent := otel.Tracer("test").Start(context.Background(), "produce")
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	parent.End()

	// The server span ends after the client has its answer: wait for it.
	var spans tracetest.SpanStubs
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if spans = exp.GetSpans(); len(spans) >= 3 {
			break
		}
	}
	byKind := map[oteltrace.SpanKind]tracetest.SpanStub{}
	for _, s := range spans {
		if s.SpanContext.TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("span %q is in trace %s, want %s", s.Name, s.SpanContext.TraceID(), parent.SpanContext().TraceID())
		}
		byKind[s.SpanKind] = s
	}
	if len(spans) != 3 {
		t.Fatalf("got %d spans, want 3 (parent, client, server): %v", len(spans), spans)
	}
	client, server := byKind[oteltrace.SpanKindClient], byKind[oteltrace.SpanKindServer]
	if client.Parent.SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("client span's parent is %s, want the produce span", client.Parent.SpanID())
	}
	if server.Parent.SpanID() != client.SpanContext.SpanID() {
		t.Errorf("server span's parent is %s, want the client span %s", server.Parent.SpanID(), client.SpanContext.SpanID())
	}
	if server.Name != "grpc.health.v1.Health/Check" {
		t.Errorf("server span name %q", server.Name)
	}

	// The same call was counted on /metrics.
	rec := httptest.NewRecorder()
	MetricsHandler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	want := `skein_grpc_server_handled_total{code="OK",method="/grpc.health.v1.Health/Check"} 1`
	if !strings.Contains(string(body), want) {
		t.Errorf("/metrics lacks %q", want)
	}
	if !strings.Contains(string(body), "go_goroutines") {
		t.Error("/metrics lacks the Go collector")
	}
}

func TestLoggerCarriesTraceID(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	shutdown, _ := Tracing(context.Background(), TracingConfig{ServiceName: "test", Exporter: exp})
	defer shutdown(context.Background())

	var buf bytes.Buffer
	log, err := NewLogger(&buf, "skein-test", "info")
	if err != nil {
		t.Fatal(err)
	}
	ctx, span := otel.Tracer("test").Start(context.Background(), "op")
	log.InfoContext(ctx, "appended", "offset", 41)
	log.DebugContext(ctx, "hidden at info")
	span.End()

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want 1 line at info level, got %d: %q", len(lines), buf.String())
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatal(err)
	}
	if m["trace_id"] != span.SpanContext().TraceID().String() || m["service"] != "skein-test" || m["offset"] != 41.0 {
		t.Errorf("log line %v", m)
	}
	if _, err := NewLogger(&buf, "x", "loud"); err == nil {
		t.Error("an unknown level must be refused")
	}
}

// Without an exporter nothing is recorded, yet spans carry valid trace
// context to propagate; with one, a child of an unsampled remote parent is
// still recorded, in the parent's trace.
func TestSamplingWithAndWithoutExporter(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	shutdown, err := Tracing(context.Background(), TracingConfig{ServiceName: "quiet"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, span := otel.Tracer("t").Start(context.Background(), "unexported")
	if span.IsRecording() || !span.SpanContext().IsValid() {
		t.Errorf("no exporter: recording %v, valid context %v; want a valid, unrecorded span", span.IsRecording(), span.SpanContext().IsValid())
	}
	parent := oteltrace.SpanContextFromContext(ctx)
	span.End()
	if Sampled(ctx) {
		t.Error("no exporter: a root span reports sampled")
	}
	// A caller that samples its own trace keeps it sampled through here.
	sampledParent := parent.WithTraceFlags(oteltrace.FlagsSampled)
	cctx, child := otel.Tracer("t").Start(oteltrace.ContextWithRemoteSpanContext(context.Background(), sampledParent), "child")
	if !Sampled(cctx) || child.SpanContext().TraceID() != parent.TraceID() {
		t.Error("no exporter: the child of a sampled remote parent is not sampled in its trace")
	}
	child.End()
	shutdown(context.Background())

	exp := tracetest.NewInMemoryExporter()
	shutdown, err = Tracing(context.Background(), TracingConfig{ServiceName: "exporting", Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(context.Background())
	_, child = otel.Tracer("t").Start(oteltrace.ContextWithRemoteSpanContext(context.Background(), parent), "joins")
	child.End()
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].SpanContext.TraceID() != parent.TraceID() {
		t.Fatalf("exported %d spans; want the child in trace %s", len(spans), parent.TraceID())
	}
}

// blockingExporter never returns from Shutdown: a collector that does not
// answer.
type blockingExporter struct{ block chan struct{} }

func (blockingExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (e blockingExporter) Shutdown(context.Context) error                           { <-e.block; return nil }

// Stopping tracing ends within ShutdownWait though the exporter hangs, and
// OpenTelemetry's errors are logged as JSON lines through the logger given.
func TestTracingShutdownIsBoundedAndErrorsAreLogged(t *testing.T) {
	var logs bytes.Buffer
	exp := blockingExporter{block: make(chan struct{})}
	defer close(exp.block)
	shutdown, err := Tracing(context.Background(), TracingConfig{ServiceName: "t", Exporter: exp,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	otel.Handle(errors.New("traces export: exporter export timeout"))
	if !strings.Contains(logs.String(), `"level":"WARN","msg":"tracing: spans not exported","err":"traces export: exporter export timeout"`) {
		t.Errorf("log: %s", logs.String())
	}
	done := make(chan error, 1)
	go func() { done <- shutdown(context.Background()) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("shutdown with a hung exporter: %v, want a deadline exceeded", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("shutdown still waiting on a hung exporter after 30 s")
	}
}
