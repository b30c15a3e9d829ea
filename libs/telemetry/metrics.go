package telemetry

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// NewRegistry returns a Prometheus registry with the Go runtime and process
// collectors already registered.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// MetricsHandler serves reg in the Prometheus text format.
func MetricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// GRPCMetrics counts and times gRPC calls by method and status code.
type GRPCMetrics struct {
	handled *prometheus.CounterVec
	latency *prometheus.HistogramVec
}

// NewGRPCMetrics registers skein_grpc_server_handled_total and
// skein_grpc_server_handling_seconds on reg.
func NewGRPCMetrics(reg prometheus.Registerer) *GRPCMetrics {
	m := &GRPCMetrics{
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "skein_grpc_server_handled_total",
			Help: "gRPC calls completed, by method and status code.",
		}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "skein_grpc_server_handling_seconds",
			Help:    "Time from a gRPC call's arrival to its answer (to its end, for streams).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14), // 100µs .. ~15 min
		}, []string{"method"}),
	}
	reg.MustRegister(m.handled, m.latency)
	return m
}

func (m *GRPCMetrics) observe(method string, start time.Time, err error) {
	m.handled.WithLabelValues(method, status.Code(err).String()).Inc()
	m.latency.WithLabelValues(method).Observe(time.Since(start).Seconds())
}

func (m *GRPCMetrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	m.observe(info.FullMethod, start, err)
	return resp, err
}

func (m *GRPCMetrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	start := time.Now()
	err := handler(srv, ss)
	m.observe(info.FullMethod, start, err)
	return err
}
