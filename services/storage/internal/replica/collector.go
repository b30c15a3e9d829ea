package replica

import "github.com/prometheus/client_golang/prometheus"

// Collector exposes the replicas' state to Prometheus at scrape time.
type Collector struct {
	m                                         *Manager
	hosted, leading, underReplicated, lagDesc *prometheus.Desc
	shrinks, expands                          *prometheus.Desc
}

// NewCollector returns a collector over m.
func NewCollector(m *Manager) *Collector {
	return &Collector{
		m:               m,
		hosted:          prometheus.NewDesc("skein_storage_partitions", "Partition replicas hosted on this node.", nil, nil),
		leading:         prometheus.NewDesc("skein_storage_leader_partitions", "Partitions this node leads.", nil, nil),
		underReplicated: prometheus.NewDesc("skein_storage_under_replicated_partitions", "Partitions led here whose ISR is smaller than their replica set.", nil, nil),
		shrinks:         prometheus.NewDesc("skein_storage_isr_shrinks_total", "ISR shrinks this node proposed and the controller committed.", nil, nil),
		expands:         prometheus.NewDesc("skein_storage_isr_expands_total", "ISR expansions this node proposed and the controller committed.", nil, nil),
		lagDesc:         prometheus.NewDesc("skein_storage_follower_lag_records", "How far each follower's LEO is behind this leader's.", []string{"partition", "replica"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.hosted
	ch <- c.leading
	ch <- c.underReplicated
	ch <- c.lagDesc
	ch <- c.shrinks
	ch <- c.expands
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.m.Stats()
	ch <- prometheus.MustNewConstMetric(c.hosted, prometheus.GaugeValue, float64(s.Hosted))
	ch <- prometheus.MustNewConstMetric(c.leading, prometheus.GaugeValue, float64(s.Leading))
	ch <- prometheus.MustNewConstMetric(c.underReplicated, prometheus.GaugeValue, float64(s.UnderReplicated))
	ch <- prometheus.MustNewConstMetric(c.shrinks, prometheus.CounterValue, float64(s.ISRShrinks))
	ch <- prometheus.MustNewConstMetric(c.expands, prometheus.CounterValue, float64(s.ISRExpands))
	for key, lag := range s.FollowerLag {
		part, replica := splitLagKey(key)
		ch <- prometheus.MustNewConstMetric(c.lagDesc, prometheus.GaugeValue, float64(lag), part, replica)
	}
}

func splitLagKey(k string) (string, string) {
	for i := len(k) - 1; i >= 0; i-- {
		if k[i] == '/' {
			return k[:i], k[i+1:]
		}
	}
	return k, ""
}
