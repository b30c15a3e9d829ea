package gateway

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// countREST counts the REST API's answers (paths under /v1/) by HTTP
// status on c: the gRPC metrics count the calls that reach a gRPC method,
// this also the requests refused before one (a body that is not JSON, an
// unknown field, a body over --max-request-bytes, a throttled produce, a
// caller without credentials).
func countREST(c *prometheus.CounterVec, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/") {
			next.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		code := sw.code
		if code == 0 {
			code = http.StatusOK
		}
		c.WithLabelValues(strconv.Itoa(code)).Inc()
	})
}

func newRESTAnswers(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "skein_gateway_rest_responses_total",
		Help: "REST API answers (paths under /v1/) by HTTP status, those refused before a gRPC method included.",
	}, []string{"code"})
	reg.MustRegister(c)
	return c
}

// statusWriter remembers the status an answer was given.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush and Unwrap keep what the wrapped writer can do (a streamed
// answer's flushes, http.ResponseController's deadlines).
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
