package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/metadata"
	"skein/services/storage/internal/partition"
)

// Metrics are the request-level series of a storage node.
type Metrics struct {
	topics          map[string]bool // the topics of the last image ForgetDeletedTopics saw
	produceRequests *prometheus.CounterVec
	produceBytes    prometheus.Counter
	produceLatency  prometheus.Histogram
	fetchBytes      prometheus.Counter
	// recordBytes: what a leader appended, by topic and stage; recompressed:
	// batches it re-encoded to the topic's compression.type.
	recordBytes  *prometheus.CounterVec
	recompressed *prometheus.CounterVec
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
		recordBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "skein_storage_produce_record_bytes_total",
			Help: "Record batch bytes this node appended as leader, by topic: stage=stored as written to the log, stage=uncompressed with their records decompressed. uncompressed / stored is the compression ratio.",
		}, []string{"topic", "stage"}),
		recompressed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "skein_storage_produce_recompressed_batches_total",
			Help: "Producer batches this node, as leader, re-encoded to the topic's compression.type before appending them, by topic.",
		}, []string{"topic"}),
	}
	reg.MustRegister(m.produceRequests, m.produceBytes, m.produceLatency, m.fetchBytes, m.recordBytes, m.recompressed)
	return m
}

// ForgetDeletedTopics drops the series of the topics that were in the
// previous image and are not in im: a deleted topic's counters would
// otherwise be exported for as long as the process runs, and a cluster that
// creates and deletes topics would grow its series without bound. Called
// with each new image, from one goroutine.
func (m *Metrics) ForgetDeletedTopics(im *metadata.Image) {
	if m == nil {
		return
	}
	now := make(map[string]bool, len(m.topics))
	for _, t := range im.Topics() {
		now[t.GetName()] = true
	}
	for t := range m.topics {
		if !now[t] {
			for _, v := range []*prometheus.CounterVec{m.produceRequests, m.recordBytes, m.recompressed} {
				v.DeletePartialMatch(prometheus.Labels{"topic": t})
			}
		}
	}
	m.topics = now
}

func (m *Metrics) produced(topic string, code skeinv1.ErrorCode, bytes int, d time.Duration) {
	if m == nil {
		return
	}
	m.produceRequests.WithLabelValues(topic, code.String()).Inc()
	m.produceBytes.Add(float64(bytes))
	m.produceLatency.Observe(d.Seconds())
}

// appended counts what a leader wrote for one partition produce.
func (m *Metrics) appended(topic string, r partition.ProduceResult) {
	if m == nil {
		return
	}
	if r.StoredBytes > 0 {
		m.recordBytes.WithLabelValues(topic, "stored").Add(float64(r.StoredBytes))
		m.recordBytes.WithLabelValues(topic, "uncompressed").Add(float64(r.UncompressedBytes))
	}
	if r.Recompressed > 0 {
		m.recompressed.WithLabelValues(topic).Add(float64(r.Recompressed))
	}
}

func (m *Metrics) fetched(bytes int) {
	if m == nil {
		return
	}
	m.fetchBytes.Add(float64(bytes))
}
