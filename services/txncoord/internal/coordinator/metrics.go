package coordinator

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"skein/services/txncoord/internal/txn"
)

// Metrics are the coordinator's Prometheus metrics: transactions ended
// (commits, aborts, timeouts), the open transactions and the age of the
// oldest (read at scrape time), partition loads, fenced writes, failed
// marker attempts, and the latency of state writes and marker writes.
type Metrics struct {
	commits        prometheus.Counter
	aborts         prometheus.Counter
	timeouts       prometheus.Counter
	loads          prometheus.Counter
	fenced         prometheus.Counter
	markerFailures prometheus.Counter
	loadSeconds    prometheus.Histogram
	writeSeconds   prometheus.Histogram
	markerSeconds  prometheus.Histogram

	coord atomic.Pointer[Coordinator] // set by New
}

var (
	openDesc = prometheus.NewDesc("skein_txncoord_open_transactions",
		"Transactions open on this coordinator: ONGOING, or decided (PREPARE_*) with markers still to write.", nil, nil)
	oldestDesc = prometheus.NewDesc("skein_txncoord_oldest_open_transaction_seconds",
		"Age of the oldest open transaction on this coordinator (0 when none is open).", nil, nil)
	idsDesc   = prometheus.NewDesc("skein_txncoord_transactional_ids", "Transactional ids with a state on this coordinator.", nil, nil)
	ownedDesc = prometheus.NewDesc("skein_txncoord_partitions_owned", "Partitions of __transaction_state this coordinator serves.", nil, nil)
)

// NewMetrics registers the metrics with reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := &Metrics{
		commits:        counter("skein_txncoord_commits_total", "Transactions committed: COMPLETE_COMMIT written after every marker."),
		aborts:         counter("skein_txncoord_aborts_total", "Transactions aborted (by their producer, a fence or a timeout): COMPLETE_ABORT written after every marker."),
		timeouts:       counter("skein_txncoord_timeouts_total", "Transactions aborted because they outlived their timeout."),
		loads:          counter("skein_txncoord_partition_loads_total", "Partitions of __transaction_state taken over and loaded."),
		fenced:         counter("skein_txncoord_fenced_total", "Partitions dropped because a newer owner fenced this coordinator's writes."),
		markerFailures: counter("skein_txncoord_marker_failures_total", "Attempts at writing a transaction's markers that failed (each is retried)."),
		loadSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "skein_txncoord_partition_load_seconds",
			Help: "Time to fence the previous owner and load a partition.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
		writeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "skein_txncoord_write_seconds",
			Help: "Latency of acks=all writes to __transaction_state.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		markerSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "skein_txncoord_marker_write_seconds",
			Help: "Latency of one attempt at writing a transaction's markers to all its partitions.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
	}
	if reg != nil {
		reg.MustRegister(m.commits, m.aborts, m.timeouts, m.loads, m.fenced, m.markerFailures, m.loadSeconds, m.writeSeconds, m.markerSeconds, m)
	}
	return m
}

func (m *Metrics) setCoordinator(c *Coordinator) { m.coord.Store(c) }

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{openDesc, oldestDesc, idsDesc, ownedDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the gauges, read at scrape time.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	c := m.coord.Load()
	if c == nil {
		return
	}
	g := c.gauges()
	ch <- prometheus.MustNewConstMetric(openDesc, prometheus.GaugeValue, float64(g.open))
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, g.oldest)
	ch <- prometheus.MustNewConstMetric(idsDesc, prometheus.GaugeValue, float64(g.ids))
	ch <- prometheus.MustNewConstMetric(ownedDesc, prometheus.GaugeValue, float64(g.owned))
}

type gauges struct {
	open, ids, owned int
	oldest           float64 // seconds
}

// gauges counts the open transactions of the partitions served here.
func (c *Coordinator) gauges() gauges {
	now := c.cfg.Now()
	parts := c.serving()
	g := gauges{owned: len(parts)}
	for _, p := range parts {
		p.mu.Lock()
		g.ids += len(p.txns)
		for _, t := range p.txns {
			switch t.State() {
			case txn.Ongoing, txn.PrepareCommit, txn.PrepareAbort, txn.PrepareEpochFence:
				g.open++
				if start := t.Record().StartTime; !start.IsZero() {
					g.oldest = max(g.oldest, now.Sub(start).Seconds())
				}
			}
		}
		p.mu.Unlock()
	}
	return g
}
