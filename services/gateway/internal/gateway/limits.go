package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"

	"skein/libs/errs"
	"skein/services/gateway/internal/budget"
)

// The gateway's resource limits (docs/API.md, docs/OPERATIONS.md).
//
// DefaultMaxRequestBytes bounds one REST body and one gRPC message. The
// largest batch a topic takes by default is max.message.bytes, 1 MiB; as
// REST JSON such a record is about 1.4 MiB base64-encoded (more with JSON
// escapes), so 4 MiB lets every default-sized record through and still
// refuses the megabytes a client should never send in one call.
//
// DefaultMaxInflightProduceBytes is the gateway-wide budget of produce
// request bytes held at once: Kafka's buffer.memory default, the gateway
// being one producer for all its callers. The process holds a few times
// that at worst (a REST body is held as JSON, as protobuf and as record
// batches while it is served, and the heap grows to twice what is live
// before a collection): about 250 MB measured under hostile load.
const (
	DefaultMaxRequestBytes         = 4 << 20
	DefaultMaxInflightProduceBytes = 32 << 20
)

// MemoryLimit is the Go runtime's soft memory limit for a gateway: the
// configured one when positive, else six times its in-flight produce
// budget. A REST produce is held as JSON, as protobuf and as record batches
// while it is served, so a full budget means about three times it live;
// without a limit Go lets the heap reach twice what is live before it
// collects, and hostile load took the process past 300 MB. Under the limit
// the collector runs earlier instead (its CPU is capped by the runtime, so
// a gateway whose live heap passes the limit slows down rather than dies).
func MemoryLimit(configured, inflightBudget int64) int64 {
	if configured > 0 {
		return configured
	}
	return 6 * inflightBudget
}

// grpcSlack is what the gRPC message limit adds to --max-request-bytes.
const grpcSlack = 4 << 10

// A refused body is read and dropped before the answer is written, up to
// maxDrainBytes and for at most drainTimeout. A server that answers and
// closes while its client is still sending resets the connection (the
// unread bytes make the close a reset), and the client's write fails with
// a broken pipe before it reads the answer. Draining into io.Discard holds
// no memory; a body beyond the bound (its Content-Length says so, or it
// goes on past it) is left unread and the connection closed.
const (
	maxDrainBytes = 64 << 20
	drainTimeout  = 5 * time.Second
)

// drainRefused reads and drops what is left of a refused body: n bytes
// when known, else until it ends or maxDrainBytes.
func drainRefused(w http.ResponseWriter, body io.Reader, n int64) {
	if n == 0 || n > maxDrainBytes {
		return
	}
	if n < 0 {
		n = maxDrainBytes
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(drainTimeout))
	_, _ = io.CopyN(io.Discard, body, n)
	_ = rc.SetReadDeadline(time.Time{})
}

// errBodyTooLarge and errThrottled end a REST body's reading; the error
// handler answers them as 413 and 429.
var (
	errBodyTooLarge = errors.New("request body too large")
	errThrottled    = errors.New("in-flight produce budget used up")
)

// limitedBody reads a REST body up to max bytes, charging a produce's bytes
// to its hold as they arrive.
type limitedBody struct {
	r             io.ReadCloser
	max           int64
	n             int64
	contentLength int64        // -1: chunked
	hold          *budget.Hold // nil: not a produce

	err       error // errBodyTooLarge or errThrottled once hit; sticky
	tooLarge  bool
	throttled bool
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	// One byte past the limit is enough to know the body is too large.
	if rest := l.max - l.n + 1; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := l.r.Read(p)
	l.n += int64(n)
	if l.n > l.max {
		l.tooLarge, l.err = true, errBodyTooLarge
		return 0, l.err
	}
	if !l.hold.Grow(l.n) {
		l.throttled, l.err = true, errThrottled
		return 0, l.err
	}
	return n, err
}

func (l *limitedBody) Close() error { return l.r.Close() }

type limitedBodyKey struct{}

// bodyLimitHit answers how the REST body of the request in ctx was cut
// short, if it was: 413 or 429 with the error document.
func bodyLimitHit(ctx context.Context) (*limitedBody, bool) {
	l, _ := ctx.Value(limitedBodyKey{}).(*limitedBody)
	return l, l != nil && (l.tooLarge || l.throttled)
}

// restLimits bounds what a REST caller can make the gateway hold.
type restLimits struct {
	maxBody int64
	budget  *budget.Budget
}

// wrap answers a body above maxBody 413 RECORD_LIST_TOO_LARGE without
// reading it when its Content-Length says so, and as soon as the bytes read
// pass maxBody otherwise; it charges a produce's body to the budget (its
// Content-Length up front, a chunked body as it arrives) and answers 429
// THROTTLING_QUOTA_EXCEEDED with Retry-After when the budget cannot take it.
// The charge is released once the answer is written.
func (rl restLimits) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > rl.maxBody {
			drainRefused(w, r.Body, r.ContentLength)
			rl.writeTooLarge(w, r.ContentLength)
			return
		}
		l := &limitedBody{r: r.Body, max: rl.maxBody, contentLength: r.ContentLength}
		if isProduceRoute(r) {
			l.hold = rl.budget.Hold()
			defer l.hold.Release()
			if !l.hold.Grow(max(r.ContentLength, 0)) {
				drainRefused(w, r.Body, r.ContentLength)
				rl.writeThrottled(w, max(r.ContentLength, 0))
				return
			}
		}
		// A copy of the request carries the wrapped body: net/http keeps
		// looking at the original one to see whether a body was left
		// unread (one beyond the drain bound), and then half-closes the
		// connection.
		rr := r.WithContext(context.WithValue(r.Context(), limitedBodyKey{}, l))
		rr.Body = l
		next.ServeHTTP(w, rr)
	})
}

// writeLimitHit answers a body cut short by its limit or by the budget.
func (rl restLimits) writeLimitHit(w http.ResponseWriter, l *limitedBody) {
	// Nothing of the body is kept: its charge goes back to the budget
	// before the drain, which may take seconds.
	l.hold.Release()
	rest := int64(-1)
	if cl := l.contentLength; cl >= 0 {
		rest = cl - l.n
	}
	drainRefused(w, l.r, rest)
	if l.tooLarge {
		rl.writeTooLarge(w, -1)
		return
	}
	rl.writeThrottled(w, l.n)
}

func (rl restLimits) writeTooLarge(w http.ResponseWriter, size int64) {
	msg := fmt.Sprintf("the request body is larger than the gateway's limit of %d bytes (--max-request-bytes)", rl.maxBody)
	if size >= 0 {
		msg = fmt.Sprintf("the request body of %d bytes is larger than the gateway's limit of %d bytes (--max-request-bytes)", size, rl.maxBody)
	}
	// The rest of the body is not read: close the connection rather than
	// drain it.
	w.Header().Set("Connection", "close")
	writeError(w, http.StatusRequestEntityTooLarge, errorBody{Code: int32(errs.RecordListTooLarge.GRPC), ErrorCode: errs.RecordListTooLarge.Name, Message: msg})
}

func (rl restLimits) writeThrottled(w http.ResponseWriter, size int64) {
	rl.budget.Throttled("rest")
	w.Header().Set("Retry-After", budget.RetryAfterHeader())
	w.Header().Set("Connection", "close")
	writeError(w, http.StatusTooManyRequests, errorBody{Code: int32(codes.ResourceExhausted), ErrorCode: errs.ThrottlingQuotaExceeded.Name, Message: rl.budget.Message(size)})
}

// isProduceRoute reports whether r is a REST produce:
// POST /v1/topics/{topic}/records or
// POST /v1/topics/{topic}/partitions/{partition}/records.
func isProduceRoute(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	seg := strings.Split(r.URL.EscapedPath(), "/")
	switch {
	case len(seg) == 5:
		return seg[1] == "v1" && seg[2] == "topics" && seg[4] == "records"
	case len(seg) == 7:
		return seg[1] == "v1" && seg[2] == "topics" && seg[4] == "partitions" && seg[6] == "records"
	}
	return false
}

// fromLoopback reports whether a gRPC call came over the in-memory
// connection REST uses: its produce bytes were charged as a REST body.
func fromLoopback(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	return ok && p.Addr != nil && p.Addr.Network() == "bufconn"
}
