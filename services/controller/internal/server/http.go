package server

import (
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/libs/telemetry"
	"skein/services/controller/internal/quorum"
)

// RegisterMetrics registers the controller's gauges on reg; each is read at
// scrape time.
func RegisterMetrics(reg prometheus.Registerer, node *quorum.Node) {
	states := map[string]float64{"Follower": 0, "Candidate": 1, "Leader": 2, "Shutdown": 3}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "skein_controller_" + name, Help: help}, f)
	}
	fromImage := func(f func(img *metadata.Image) int) func() float64 {
		return func() float64 {
			var v int
			node.Read(func(img *metadata.Image) { v = f(img) })
			return float64(v)
		}
	}
	reg.MustRegister(
		gauge("raft_state", "Raft state: 0 follower, 1 candidate, 2 leader, 3 shut down.", func() float64 { return states[node.State()] }),
		gauge("raft_leader", "1 while this controller is the Raft leader.", func() float64 {
			if node.IsLeader() {
				return 1
			}
			return 0
		}),
		gauge("raft_commit_index", "The Raft commit index.", func() float64 { return float64(node.CommitIndex()) }),
		gauge("raft_applied_index", "The last Raft index handed to the metadata state machine (it may not have run it yet).", func() float64 { return float64(node.AppliedIndex()) }),
		gauge("metadata_version", "The metadata version: the Raft index of the last change.", fromImage(func(img *metadata.Image) int { return int(img.Version()) })),
		gauge("brokers_alive", "Registered brokers that are not fenced.", fromImage(func(img *metadata.Image) int { return len(img.LiveBrokers()) })),
		gauge("brokers_fenced", "Registered brokers that are fenced.", fromImage(func(img *metadata.Image) int { return len(img.Brokers()) - len(img.LiveBrokers()) })),
		gauge("topics", "Topics, internal ones included.", fromImage(func(img *metadata.Image) int { return len(img.Topics()) })),
		gauge("offline_partitions", "Partitions without a leader.", fromImage(func(img *metadata.Image) int { return img.OfflinePartitions() })),
		gauge("under_replicated_partitions", "Partitions whose ISR is smaller than their replica set.", fromImage(func(img *metadata.Image) int { return img.UnderReplicatedPartitions() })),
	)
}

// HTTPHandler serves /metrics, /healthz (200 while serving is true) and
// /readyz (200 once srv is Ready).
func HTTPHandler(reg *prometheus.Registry, srv *Server, serving *atomic.Bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", telemetry.MetricsHandler(reg))
	telemetry.Profiling(mux)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !serving.Load() {
			http.Error(w, "not serving", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		leader, err := srv.Ready(r.Context())
		if err != nil {
			http.Error(w, errs.Message(err), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("leader " + itoa(leader) + "\n"))
	})
	return mux
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }
