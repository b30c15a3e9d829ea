//go:build integration

package fault

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	skeinv1 "skein/gen/skein/v1"
)

// The gateway's peak resident memory under TestHostileLoadStaysBounded, the
// whole process life included (VmHWM), must stay below this. The gateway's
// defaults bound what callers make it hold: 4 MiB per REST body or gRPC
// message, 32 MiB of produce requests in flight, and a Go soft memory limit
// of six times that; measured peaks are 186-203 MB (docs/OPERATIONS.md).
const gatewayPeakRSSBound = 300 << 20

// vmHWM reads a process's peak resident set size in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

func (c *devCluster) gatewayPID() int {
	for _, p := range c.processes() {
		if p.Role == "gateway" {
			return p.PID
		}
	}
	c.t.Fatal("no gateway in cluster.json")
	return 0
}

// answers tallies REST answers by status and error code.
type answers struct {
	mu    sync.Mutex
	n     map[string]int
	wrong []string // answers that are not documented for the request
}

func (a *answers) add(kind string, status int, code string, documented bool, detail string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n[fmt.Sprintf("%s %d %s", kind, status, code)]++
	if !documented && len(a.wrong) < 20 {
		a.wrong = append(a.wrong, fmt.Sprintf("%s: %d %s %s", kind, status, code, detail))
	}
}

func (a *answers) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	keys := make([]string, 0, len(a.n))
	for k := range a.n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-60s %d\n", k, a.n[k])
	}
	return b.String()
}

// chunked hides a reader's length so the request is sent chunked.
type chunked struct{ io.Reader }

// send posts a produce body and answers the status and error code (or a
// transport error).
func send(ctx context.Context, hc *http.Client, url string, body io.Reader, length int64) (int, string, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, body)
	if err != nil {
		return 0, "", nil, err
	}
	req.ContentLength = length
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var doc struct {
		ErrorCode string `json:"error_code"`
		Results   []struct {
			ErrorCode string `json:"error_code"`
		} `json:"results"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return resp.StatusCode, "", resp.Header, fmt.Errorf("not JSON: %.200q", raw)
	}
	code := doc.ErrorCode
	if resp.StatusCode == http.StatusOK {
		code = "NONE"
		for _, r := range doc.Results {
			if r.ErrorCode != "NONE" {
				code = r.ErrorCode
			}
		}
	}
	return resp.StatusCode, code, resp.Header, nil
}

// documented reports whether a produce answer is one docs/API.md lists for
// a hostile or overloaded call: written, too large, or throttled.
func documented(status int, code string) bool {
	switch status {
	case http.StatusOK:
		return code == "NONE"
	case http.StatusRequestEntityTooLarge:
		return code == "RECORD_LIST_TOO_LARGE"
	case http.StatusTooManyRequests:
		return code == "THROTTLING_QUOTA_EXCEEDED"
	}
	return false
}

// TestHostileLoadStaysBounded sends the gateway 50 concurrent 30 MB REST
// bodies (half with their Content-Length, half chunked), 30 MB gRPC
// messages, waves of valid 3 MiB produces that together pass the in-flight
// budget, and a flood of small produces, all at once. Every answer must be
// 2xx, 413 RECORD_LIST_TOO_LARGE or 429 THROTTLING_QUOTA_EXCEEDED (gRPC:
// RESOURCE_EXHAUSTED); the gateway's peak RSS must stay below
// gatewayPeakRSSBound; and well-formed produces sent meanwhile, retried
// after Retry-After when throttled, must all be written.
func TestHostileLoadStaysBounded(t *testing.T) {
	c := startDev(t)
	c.createTopic("hostile", 3, 3, 2)
	c.createTopic("canary", 1, 3, 2)
	pid := c.gatewayPID()
	before := vmHWM(t, pid)
	t.Logf("gateway pid %d: peak RSS %d MiB before the load", pid, before>>20)

	base := c.dev.BaseURL + "/v1/topics/"
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 40 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	got := &answers{n: map[string]int{}}
	var transport sync.Map // kind -> first transport error

	// 30 MB: far above --max-request-bytes; one buffer for every request.
	huge := []byte(`{"records": [{"value": "` + strings.Repeat("h", 30_000_000) + `"}]}`)
	// 3 MiB of valid records (three just under max.message.bytes): within
	// the body limit, so these go the whole way and hold the budget.
	rec := strings.Repeat("v", 1_000_000)
	valid := []byte(`{"records": [{"value": "` + rec + `"}, {"value": "` + rec + `"}, {"value": "` + rec + `"}]}`)

	stop := make(chan struct{})
	var hostile, flood sync.WaitGroup
	start := time.Now()
	for i := 0; i < 50; i++ {
		hostile.Add(1)
		go func() {
			defer hostile.Done()
			kind, body, length := "30MB-length", io.Reader(bytes.NewReader(huge)), int64(len(huge))
			if i%2 == 1 {
				kind, body, length = "30MB-chunked", chunked{bytes.NewReader(huge)}, -1
			}
			st, code, _, err := send(ctx, hc, base+"hostile/records", body, length)
			if err != nil {
				transport.LoadOrStore(kind, err)
				got.add(kind, 0, "transport-error", false, err.Error())
				return
			}
			got.add(kind, st, code, st == http.StatusRequestEntityTooLarge && code == "RECORD_LIST_TOO_LARGE" ||
				st == http.StatusTooManyRequests && code == "THROTTLING_QUOTA_EXCEEDED", "")
		}()
	}
	cc, err := grpc.NewClient(c.dev.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	prod := skeinv1.NewProducerServiceClient(cc)
	for i := 0; i < 8; i++ {
		hostile.Add(1)
		go func() {
			defer hostile.Done()
			_, err := prod.Produce(ctx, &skeinv1.ProduceRequest{Topic: "hostile", Records: []*skeinv1.ProduceRecord{{ValueBytes: huge}}})
			code := status.Code(err)
			got.add("grpc-30MB", 0, code.String(), code == codes.ResourceExhausted, fmt.Sprint(err))
		}()
	}
	// Three waves of 40 valid 3 MiB produces: 120 MiB each, against a 32
	// MiB budget.
	for i := 0; i < 40; i++ {
		hostile.Add(1)
		go func() {
			defer hostile.Done()
			for wave := 0; wave < 3; wave++ {
				st, code, _, err := send(ctx, hc, base+"hostile/records", bytes.NewReader(valid), int64(len(valid)))
				if err != nil {
					transport.LoadOrStore("3MiB-valid", err)
					got.add("3MiB-valid", 0, "transport-error", false, err.Error())
					continue
				}
				got.add("3MiB-valid", st, code, st == http.StatusOK && code == "NONE" || st == http.StatusTooManyRequests && code == "THROTTLING_QUOTA_EXCEEDED", "")
			}
		}()
	}
	// The flood: small produces as fast as 32 callers can send them.
	for i := 0; i < 32; i++ {
		flood.Add(1)
		go func() {
			defer flood.Done()
			body := []byte(fmt.Sprintf(`{"records": [{"key": "flood-%d", "value": "small"}]}`, i))
			for {
				select {
				case <-stop:
					return
				default:
				}
				st, code, _, err := send(ctx, hc, base+"hostile/records", bytes.NewReader(body), int64(len(body)))
				if err != nil {
					if ctx.Err() == nil {
						transport.LoadOrStore("small", err)
						got.add("small", 0, "transport-error", false, err.Error())
					}
					continue
				}
				got.add("small", st, code, documented(st, code) && st != http.StatusRequestEntityTooLarge, "")
			}
		}()
	}

	// Well-formed produces in between, each retried after Retry-After
	// while throttled: every one must end written.
	const canaries = 20
	var written, throttledCanary int
	for i := 0; i < canaries; i++ {
		body := []byte(fmt.Sprintf(`{"records": [{"key": "canary", "value": "canary-%d"}]}`, i))
		for attempt := 0; ; attempt++ {
			st, code, h, err := send(ctx, hc, base+"canary/records", bytes.NewReader(body), int64(len(body)))
			if err == nil && st == http.StatusOK && code == "NONE" {
				written++
				break
			}
			if err != nil || st != http.StatusTooManyRequests || code != "THROTTLING_QUOTA_EXCEEDED" || h.Get("Retry-After") == "" {
				t.Fatalf("canary %d: %d %s %v (Retry-After %q)", i, st, code, err, h.Get("Retry-After"))
			}
			throttledCanary++
			secs, _ := strconv.Atoi(h.Get("Retry-After"))
			select {
			case <-time.After(time.Duration(secs) * time.Second):
			case <-ctx.Done():
				t.Fatalf("canary %d still throttled after %d attempts", i, attempt+1)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	hostile.Wait()
	close(stop)
	flood.Wait()
	elapsed := time.Since(start)
	peak := vmHWM(t, pid)

	t.Logf("answers in %v:\n%s", elapsed.Round(time.Millisecond), got)
	t.Logf("canaries: %d of %d written, %d throttled attempts retried", written, canaries, throttledCanary)
	t.Logf("gateway peak RSS: %d MiB (before the load %d MiB; bound %d MiB)", peak>>20, before>>20, gatewayPeakRSSBound>>20)
	transport.Range(func(k, v any) bool {
		t.Errorf("%s: transport error instead of an answer: %v", k, v)
		return true
	})
	for _, w := range got.wrong {
		t.Errorf("undocumented answer: %s", w)
	}
	if peak > gatewayPeakRSSBound {
		t.Errorf("gateway peak RSS %d MiB, above the bound of %d MiB", peak>>20, gatewayPeakRSSBound>>20)
	}
	for _, k := range []string{"30MB-length 413 RECORD_LIST_TOO_LARGE", "small 200 NONE", "3MiB-valid 200 NONE"} {
		if got.n[k] == 0 {
			t.Errorf("no %q answer: the load did not do what it should", k)
		}
	}
	if elapsed > 40*time.Second {
		t.Errorf("the load took %v", elapsed)
	}

	// The canaries are in the log, each once.
	seen := map[string]int{}
	for _, v := range c.readAll("canary", 0) {
		seen[v]++
	}
	for i := 0; i < canaries; i++ {
		if n := seen[fmt.Sprintf("canary-%d", i)]; n != 1 {
			t.Errorf("canary-%d is in the log %d times, want once", i, n)
		}
	}
	// The gateway still serves.
	if st, code, _, err := send(context.Background(), hc, base+"canary/records", strings.NewReader(`{"records": [{"value": "after"}]}`), -1); err != nil || st != http.StatusOK {
		t.Errorf("a produce after the load: %d %s %v", st, code, err)
	}
}
