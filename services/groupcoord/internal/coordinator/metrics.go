package coordinator

import (
	"context"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"skein/services/groupcoord/internal/assign"
)

// Metrics are the coordinator's Prometheus metrics. Per group and
// partition the committed offset and the lag behind the partition's high
// watermark (taken every Config.LagInterval, not per request), per group
// its members and epoch; per group and topic nacks, redeliveries and
// records dead-lettered; per process rebalances, loads, fenced writes and
// write latency.
type Metrics struct {
	nacks        *prometheus.CounterVec
	redeliveries *prometheus.CounterVec
	deadLetters  *prometheus.CounterVec
	rebalances   prometheus.Counter
	loads        prometheus.Counter
	fenced       prometheus.Counter
	// expiredOffsets and expiredGroups: what the offset retention removed.
	expiredOffsets prometheus.Counter
	expiredGroups  prometheus.Counter
	// deletedOffsets: what OffsetDelete removed.
	deletedOffsets prometheus.Counter
	loadSeconds    prometheus.Histogram
	writeSeconds   prometheus.Histogram

	coord *Coordinator // set by New

	hwMu sync.Mutex
	hw   map[assign.TopicPartition]int64 // guarded by hwMu
}

var (
	committedDesc = prometheus.NewDesc("skein_groupcoord_committed_offset", "The group's committed offset of a partition.",
		[]string{"group", "topic", "partition"}, nil)
	lagDesc = prometheus.NewDesc("skein_groupcoord_lag_records", "Records between the group's committed offset and the partition's high watermark.",
		[]string{"group", "topic", "partition"}, nil)
	membersDesc = prometheus.NewDesc("skein_groupcoord_group_members", "Members of the group.", []string{"group", "state"}, nil)
	epochDesc   = prometheus.NewDesc("skein_groupcoord_group_epoch", "The group epoch: bumped by every rebalance since the group was created.",
		[]string{"group"}, nil)
	ownedDesc = prometheus.NewDesc("skein_groupcoord_partitions_owned", "Partitions of __consumer_offsets this coordinator serves.", nil, nil)
)

// NewMetrics registers the metrics with reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		nacks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skein_groupcoord_nacks_total",
			Help: "Nacks accepted: records a member of the group could not process."}, []string{"group", "topic"}),
		redeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skein_groupcoord_redeliveries_total",
			Help: "Nacks answered with a redelivery (the record had deliveries left)."}, []string{"group", "topic"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skein_groupcoord_dead_lettered_total",
			Help: "Records written to the group's dead-letter topic after max.delivery.attempts, the group moved past them."}, []string{"group", "topic"}),
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{Name: "skein_groupcoord_rebalances_total",
			Help: "Group epoch bumps (joins, leaves, expiries, subscription and topic changes) on this coordinator."}),
		loads: prometheus.NewCounter(prometheus.CounterOpts{Name: "skein_groupcoord_partition_loads_total",
			Help: "Partitions of __consumer_offsets taken over and loaded."}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{Name: "skein_groupcoord_fenced_total",
			Help: "Partitions dropped because a newer owner fenced this coordinator's writes."}),
		expiredOffsets: prometheus.NewCounter(prometheus.CounterOpts{Name: "skein_groupcoord_offsets_expired_total",
			Help: "Partitions whose committed offsets (and failed deliveries) a group lost to the offset retention."}),
		expiredGroups: prometheus.NewCounter(prometheus.CounterOpts{Name: "skein_groupcoord_groups_expired_total",
			Help: "Empty groups deleted once the offset retention had removed all they held."}),
		deletedOffsets: prometheus.NewCounter(prometheus.CounterOpts{Name: "skein_groupcoord_offsets_deleted_total",
			Help: "Partitions whose committed offsets (with their pending offsets and failed deliveries) an offset deletion removed from a group."}),
		loadSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "skein_groupcoord_partition_load_seconds",
			Help: "Time to fence the previous owner and load a partition.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
		writeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "skein_groupcoord_write_seconds",
			Help: "Latency of acks=all writes to __consumer_offsets.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		hw: map[assign.TopicPartition]int64{},
	}
	if reg != nil {
		reg.MustRegister(m.nacks, m.redeliveries, m.deadLetters, m.rebalances, m.loads, m.fenced, m.expiredOffsets, m.expiredGroups, m.deletedOffsets, m.loadSeconds, m.writeSeconds, m)
	}
	return m
}

func (m *Metrics) nacked(group, topic string) { m.nacks.WithLabelValues(group, topic).Inc() }
func (m *Metrics) redelivered(group, topic string) {
	m.redeliveries.WithLabelValues(group, topic).Inc()
}
func (m *Metrics) deadLettered(group, topic string) {
	m.deadLetters.WithLabelValues(group, topic).Inc()
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{committedDesc, lagDesc, membersDesc, epochDesc, ownedDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the per-group values, read at
// scrape time.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	c := m.coord
	if c == nil {
		return
	}
	m.hwMu.Lock()
	hw := m.hw
	m.hwMu.Unlock()
	parts := c.serving()
	ch <- prometheus.MustNewConstMetric(ownedDesc, prometheus.GaugeValue, float64(len(parts)))
	for _, p := range parts {
		p.mu.Lock()
		for id, gs := range p.groups {
			d := gs.g.Describe()
			ch <- prometheus.MustNewConstMetric(membersDesc, prometheus.GaugeValue, float64(len(d.Members)), id, string(d.State))
			ch <- prometheus.MustNewConstMetric(epochDesc, prometheus.GaugeValue, float64(d.Epoch), id)
			for tp, o := range gs.offsets {
				part := fmt.Sprint(tp.Partition)
				ch <- prometheus.MustNewConstMetric(committedDesc, prometheus.GaugeValue, float64(o.Offset), id, tp.Topic, part)
				if h, ok := hw[tp]; ok {
					ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(max(h-o.Offset, 0)), id, tp.Topic, part)
				}
			}
		}
		p.mu.Unlock()
	}
}

// lagLoop refreshes the high watermarks of every partition some group here
// has committed, every LagInterval.
func (c *Coordinator) lagLoop() {
	for sleepCtx(c.ctx, c.cfg.LagInterval) {
		byTopic := map[string]map[int32]bool{}
		for _, p := range c.serving() {
			p.mu.Lock()
			for _, gs := range p.groups {
				for tp := range gs.offsets {
					if byTopic[tp.Topic] == nil {
						byTopic[tp.Topic] = map[int32]bool{}
					}
					byTopic[tp.Topic][tp.Partition] = true
				}
			}
			p.mu.Unlock()
		}
		hw := map[assign.TopicPartition]int64{}
		for topic, set := range byTopic {
			parts := make([]int32, 0, len(set))
			for p := range set {
				parts = append(parts, p)
			}
			ctx, cancel := context.WithTimeout(c.ctx, c.cfg.LagInterval)
			got, err := c.log.HighWatermarks(ctx, topic, parts)
			cancel()
			if err != nil {
				c.logger.Debug("high watermarks for the lag metrics", "topic", topic, "err", err)
			}
			for p, h := range got {
				hw[assign.TopicPartition{Topic: topic, Partition: p}] = h
			}
		}
		c.metrics.hwMu.Lock()
		c.metrics.hw = hw
		c.metrics.hwMu.Unlock()
	}
}
