package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	skeinv1 "skein/gen/skein/v1"
)

// Metrics are the request-level series of a storage node.
type Metrics struct {
	produceRequests *prometheus.CounterVec
	produceBytes    prometheus.Counter
	produceLatency  prometheus.Histogram
	fetchBytes      prometheus.Counter
}

// NewMetrics registers the series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		produceRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "skein_storage_produce_partition_requests_total",
			Help: "Per-partition produce requests answered, by topic and error code.",
		}, []string{"topic", "error_code"}),
		produceBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "skein_storage_produce_bytes_total", Help: "Record batch bytes received in produce requests.",
		}),
		produceLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "skein_storage_produce_latency_seconds",
			Help:    "Time from a partition produce's arrival to its answer (acks=all includes replication).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}),
		fetchBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "skein_storage_fetch_bytes_total", Help: "Record batch bytes served to consumers.",
		}),
	}
	reg.MustRegister(m.produceRequests, m.produceBytes, m.produceLatency, m.fetchBytes)
	return m
}

func (m *Metrics) produced(topic string, code skeinv1.ErrorCode, bytes int, d time.Duration) {
	if m == nil {
		return
	}
	m.produceRequests.WithLabelValues(topic, code.String()).Inc()
	m.produceBytes.Add(float64(bytes))
	m.produceLatency.Observe(d.Seconds())
}

func (m *Metrics) fetched(bytes int) {
	if m == nil {
		return
	}
	m.fetchBytes.Add(float64(bytes))
}
