package telemetry

import (
	"net/http"
	"net/http/pprof"
)

// Profiling serves Go's profiles under /debug/pprof/ on mux, for operators
// chasing a hot path. Mount it on an operations port only (the services'
// HTTP ports bind to loopback by default), never on a public API port.
func Profiling(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
