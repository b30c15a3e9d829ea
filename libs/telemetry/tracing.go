package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// TracingConfig configures Tracing. The zero value plus a service name reads
// everything else from the standard OTEL_* environment.
type TracingConfig struct {
	// ServiceName is the service.name resource attribute; OTEL_SERVICE_NAME wins.
	ServiceName string
	// InstanceID is service.instance.id (a node id, say).
	InstanceID string
	// Exporter overrides the environment's choice (tests pass an in-memory one).
	Exporter sdktrace.SpanExporter
	// Logger receives the exporter's errors (a collector that does not
	// answer, say) as JSON lines like every other; slog.Default when nil.
	Logger *slog.Logger
}

// ShutdownWait bounds the flush of the spans still buffered when a process
// stops: a collector that does not answer must not hold the exit for the
// exporter's own timeout (10 s), which would outlast the time a supervisor
// gives a process to stop. What is not out by then is dropped.
const ShutdownWait = 2 * time.Second

// Tracing installs the global tracer provider and the W3C TraceContext +
// Baggage propagators, and returns a function that flushes and stops it
// within ShutdownWait (or the sooner deadline of its context). OpenTelemetry's
// errors go to cfg.Logger, at WARN, instead of Go's plain-text log.
//
// Spans are exported over OTLP/gRPC when OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, and then every span is sampled.
// Without an exporter a span is sampled only when its parent is (a caller
// that traces its own requests): the rest cost nothing but their ids, and
// Sampled tells writers not to stamp their context into records.
func Tracing(ctx context.Context, cfg TracingConfig) (shutdown func(context.Context) error, err error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: spans not exported", "err", err)
	}))
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))

	exp := cfg.Exporter
	if exp == nil && (os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "") {
		// The exporter reads endpoint, headers, TLS (OTEL_EXPORTER_OTLP_INSECURE) from the environment.
		exp, err = otlptracegrpc.New(ctx)
		if err != nil {
			return nil, err
		}
	}
	name := cfg.ServiceName
	if env := os.Getenv("OTEL_SERVICE_NAME"); env != "" {
		name = env
	}
	attrs := []resource.Option{resource.WithFromEnv(), resource.WithAttributes(semconv.ServiceName(name))}
	if cfg.InstanceID != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceInstanceID(cfg.InstanceID)))
	}
	res, err := resource.New(ctx, attrs...)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, err
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	switch {
	case exp == nil:
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	case cfg.Exporter != nil:
		opts = append(opts, sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSyncer(exp)) // tests read spans as soon as they end
	default:
		opts = append(opts, sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(exp))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	otel.SetTracerProvider(tp)
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, ShutdownWait)
		defer cancel()
		return tp.Shutdown(ctx)
	}, nil
}

// GRPCServerOptions instruments a gRPC server: a span per call (joined to the
// caller's trace) and Prometheus request counts and latencies on m, if m is
// not nil.
func GRPCServerOptions(m *GRPCMetrics) []grpc.ServerOption {
	opts := []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler())}
	if m != nil {
		opts = append(opts, grpc.ChainUnaryInterceptor(m.unary), grpc.ChainStreamInterceptor(m.stream))
	}
	return opts
}

// GRPCDialOptions instruments a gRPC client connection so calls carry the
// caller's trace context.
func GRPCDialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler())}
}

// Sampled reports whether ctx carries a sampled span: one whose context is
// worth carrying into the records it writes (the traceparent header), so
// that replication and consumption join its trace.
func Sampled(ctx context.Context) bool {
	return trace.SpanContextFromContext(ctx).IsSampled()
}
