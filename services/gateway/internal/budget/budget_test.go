package budget

import (
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"skein/libs/errs"
	"skein/libs/rpcerr"
)

func TestHoldChargesAtLeastMinAndAtMostTheLimit(t *testing.T) {
	b := New(100<<10, prometheus.NewRegistry())
	small := b.Hold()
	if !small.Grow(10) || small.Held() != MinCharge || b.Used() != MinCharge {
		t.Fatalf("a 10-byte request holds %d (budget %d), want MinCharge", small.Held(), b.Used())
	}
	grown := b.Hold()
	for _, n := range []int64{20 << 10, 50 << 10, 30 << 10} { // never shrinks
		if !grown.Grow(n) {
			t.Fatalf("Grow(%d) refused with %d used", n, b.Used())
		}
	}
	if grown.Held() != 50<<10 || b.Used() != MinCharge+50<<10 {
		t.Fatalf("held %d, used %d", grown.Held(), b.Used())
	}
	if over := b.Hold(); over.Grow(60<<10) || over.Held() != 0 {
		t.Fatalf("a request that does not fit was charged %d", over.Held())
	}
	grown.Release()
	grown.Release() // once only
	small.Release()
	if b.Used() != 0 {
		t.Fatalf("used %d after every release", b.Used())
	}
	// Alone, a request larger than the whole budget takes all of it.
	huge := b.Hold()
	if !huge.Grow(1<<30) || b.Used() != 100<<10 {
		t.Fatalf("a request above the budget, alone: used %d", b.Used())
	}
	if b.Hold().Grow(1) {
		t.Fatal("a full budget took another request")
	}
	huge.Release()
}

func TestNilBudgetAllowsEverything(t *testing.T) {
	var b *Budget
	if New(0, nil) != nil {
		t.Fatal("a zero limit is no budget")
	}
	h := b.Hold()
	if !h.Grow(1<<40) || b.Used() != 0 || b.Limit() != 0 {
		t.Fatal("a nil budget refused or counted")
	}
	h.Release()
	b.Throttled("rest")
}

func TestConcurrentHoldsNeverPassTheLimit(t *testing.T) {
	const limit = 1 << 20
	b := New(limit, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	peak := int64(0)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				h := b.Hold()
				if h.Grow(int64(64<<10 + j)) {
					mu.Lock()
					peak = max(peak, b.Used())
					mu.Unlock()
					h.Release()
				}
			}
		}()
	}
	wg.Wait()
	if peak > limit || b.Used() != 0 {
		t.Fatalf("peak %d above the limit %d, or %d left", peak, limit, b.Used())
	}
}

func TestRefusal(t *testing.T) {
	b := New(1<<20, nil)
	if err := b.Error(5); errs.Of(err) != errs.ThrottlingQuotaExceeded || !errs.IsRetriable(err) {
		t.Errorf("Error: %v", err)
	}
	st := status.Convert(b.Status(5))
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			retry = r
		}
	}
	if st.Code() != codes.ResourceExhausted || errs.Of(rpcerr.FromStatus(st.Err())) != errs.ThrottlingQuotaExceeded || retry.GetRetryDelay().AsDuration() != RetryAfter {
		t.Errorf("Status: %v, retry %v", st, retry)
	}
	if RetryAfterHeader() != "1" {
		t.Errorf("Retry-After %q", RetryAfterHeader())
	}
}
