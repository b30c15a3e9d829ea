// Package budget bounds the bytes of produce requests a gateway holds at
// once, all callers together: Kafka's buffer.memory, applied at the door.
// A request is charged its size when it arrives (a REST body as it is read)
// and released once it is answered, acknowledgement wait included. A request
// that does not fit is refused at once with THROTTLING_QUOTA_EXCEEDED
// (retriable) rather than queued, so a burst of callers cannot make the
// process grow.
package budget

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"

	"skein/libs/errs"
	"skein/libs/rpcerr"
)

// MinCharge is the least a request is charged, whatever its size: a request
// also costs a goroutine, buffers and bookkeeping, so a flood of tiny
// requests is bounded too.
const MinCharge = 4 << 10

// RetryAfter is the back-off a refused caller is told to wait (REST:
// Retry-After; gRPC: a RetryInfo detail and the message).
const RetryAfter = time.Second

// Budget is a shared allowance of bytes. A nil *Budget allows everything.
type Budget struct {
	limit int64

	mu   sync.Mutex
	used int64 // guarded by mu

	throttled *prometheus.CounterVec
}

// New returns a budget of limit bytes (limit <= 0: nil, no budget) whose
// metrics go to reg when it is not nil.
func New(limit int64, reg prometheus.Registerer) *Budget {
	if limit <= 0 {
		return nil
	}
	b := &Budget{limit: limit, throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "skein_gateway_produce_throttled_total",
		Help: "Produce requests refused with THROTTLING_QUOTA_EXCEEDED because the in-flight produce budget was used up, by API (rest, grpc).",
	}, []string{"api"})}
	if reg != nil {
		reg.MustRegister(b.throttled,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "skein_gateway_produce_inflight_bytes",
				Help: "Bytes of produce requests the gateway holds now (charged against --max-inflight-produce-bytes).",
			}, func() float64 { return float64(b.Used()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "skein_gateway_produce_inflight_limit_bytes",
				Help: "The in-flight produce budget, --max-inflight-produce-bytes.",
			}, func() float64 { return float64(b.limit) }))
	}
	return b
}

// Limit is the budget's size in bytes; 0 for a nil budget.
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// Used is the bytes charged now.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

func (b *Budget) tryAcquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

func (b *Budget) release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
}

// Throttled counts one refusal on api ("rest" or "grpc").
func (b *Budget) Throttled(api string) {
	if b != nil {
		b.throttled.WithLabelValues(api).Inc()
	}
}

// Hold is one request's charge, grown as more of it arrives and released
// once. Not safe for concurrent use.
type Hold struct {
	b    *Budget
	held int64
}

// Hold starts an empty charge against b.
func (b *Budget) Hold() *Hold { return &Hold{b: b} }

// Grow makes the charge cover size bytes of the request: at least
// MinCharge, at most the whole budget (so one request larger than the
// budget can still pass when it is alone). It answers false, holding what
// it held, when the rest does not fit now.
func (h *Hold) Grow(size int64) bool {
	if h == nil || h.b == nil {
		return true
	}
	want := min(max(size, MinCharge), h.b.limit)
	if want <= h.held {
		return true
	}
	if !h.b.tryAcquire(want - h.held) {
		return false
	}
	h.held = want
	return true
}

// Held is the bytes charged now.
func (h *Hold) Held() int64 {
	if h == nil {
		return 0
	}
	return h.held
}

// Release gives the charge back; later calls do nothing.
func (h *Hold) Release() {
	if h == nil || h.b == nil || h.held == 0 {
		return
	}
	h.b.release(h.held)
	h.held = 0
}

// Message says why a request of size bytes was refused.
func (b *Budget) Message(size int64) string {
	return fmt.Sprintf("the gateway holds its limit of in-flight produce bytes (%d of %d, this request %d); retry after %v",
		b.Used(), b.Limit(), size, RetryAfter)
}

// Error is the refusal of a request of size bytes as a libs/errs error.
func (b *Budget) Error(size int64) error {
	return errs.Errorf(errs.ThrottlingQuotaExceeded, "%s", b.Message(size))
}

// Status is the refusal as a gRPC status: RESOURCE_EXHAUSTED with the
// THROTTLING_QUOTA_EXCEEDED ErrorInfo and a RetryInfo of RetryAfter.
func (b *Budget) Status(size int64) error {
	st := rpcerr.Status(b.Error(size))
	if withRetry, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(RetryAfter)}); err == nil {
		st = withRetry
	}
	return st.Err()
}

// RetryAfterHeader is RetryAfter as a Retry-After header value (seconds).
func RetryAfterHeader() string {
	return strconv.Itoa(int(max(RetryAfter/time.Second, 1)))
}
