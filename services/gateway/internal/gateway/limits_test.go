package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/rpcerr"
	"skein/services/gateway/internal/budget"
)

// produceBody is a REST produce body of about n bytes.
func produceBody(n int) []byte {
	const pre, post = `{"records": [{"value": "`, `"}]}`
	return []byte(pre + strings.Repeat("x", max(n-len(pre)-len(post), 0)) + post)
}

// onlyReader hides a reader's length, so the request goes chunked.
type onlyReader struct{ io.Reader }

// post sends body to path; chunked hides its length. It answers the status,
// the decoded error document and the headers.
func (e *env) post(path string, body io.Reader, contentLength int64) (int, map[string]any, http.Header) {
	e.t.Helper()
	req, err := http.NewRequest("POST", e.base+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	req.ContentLength = contentLength
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		e.t.Fatalf("POST %s: %d, not JSON: %q", path, resp.StatusCode, raw)
	}
	return resp.StatusCode, out, resp.Header
}

// blockingReader yields head, then blocks until release is closed: a body
// the server can only have refused without reading it whole.
type blockingReader struct {
	head    []byte
	release chan struct{}
}

func (b *blockingReader) Read(p []byte) (int, error) {
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.head = b.head[n:]
		return n, nil
	}
	<-b.release
	return 0, io.ErrUnexpectedEOF
}

func TestRESTBodyLimitIs413(t *testing.T) {
	const limit = 64 << 10
	e := startWith(t, func(c *Config) { c.MaxRequestBytes = limit })
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "t", "replication_factor": 1}`)
	e.mustDo("POST", "/v1/topics", `{"name": "tiny", "replication_factor": 1, "configs": {"max.message.bytes": "1000"}}`)

	tooLarge := func(name string, code int, out map[string]any) {
		t.Helper()
		if code != http.StatusRequestEntityTooLarge || out["error_code"] != "RECORD_LIST_TOO_LARGE" || out["code"] != float64(codes.InvalidArgument) ||
			!strings.Contains(out["message"].(string), "--max-request-bytes") {
			t.Errorf("%s: %d %v, want 413 RECORD_LIST_TOO_LARGE", name, code, out)
		}
	}

	// A Content-Length above the limit is answered at once: this body never
	// ends, so the gateway cannot have waited for it.
	never := &blockingReader{head: produceBody(4 << 10)[:4<<10], release: make(chan struct{})}
	defer close(never.release)
	code, out, _ := e.post("/v1/topics/t/records", never, 100<<20)
	tooLarge("100 MiB Content-Length", code, out)

	// A chunked body is cut off once the bytes read pass the limit, and
	// the client, still sending, reads the answer rather than a reset.
	code, out, _ = e.post("/v1/topics/t/records", onlyReader{bytes.NewReader(produceBody(limit + 1))}, -1)
	tooLarge("chunked body one byte over", code, out)
	for i := 0; i < 5; i++ {
		code, out, _ = e.post("/v1/topics/t/records", onlyReader{bytes.NewReader(produceBody(16 << 20))}, -1)
		tooLarge("chunked 16 MiB body", code, out)
	}
	// Any API route, not only produce.
	code, out, _ = e.post("/v1/topics", bytes.NewReader(produceBody(2*limit)), 2*limit)
	tooLarge("create-topic body", code, out)

	// Within the limit, bodies reach validation and the cluster as before.
	body := produceBody(limit)
	if code, out, _ := e.post("/v1/topics/t/records", bytes.NewReader(body), int64(len(body))); code != http.StatusOK {
		t.Errorf("a body of exactly the limit: %d %v", code, out)
	}
	if code, out, _ := e.post("/v1/topics/t/records", onlyReader{bytes.NewReader(body)}, -1); code != http.StatusOK {
		t.Errorf("a chunked body of exactly the limit: %d %v", code, out)
	}
	if code, out := e.do("POST", "/v1/topics/tiny/records", string(produceBody(2000))); code != http.StatusBadRequest || out["error_code"] != "MESSAGE_TOO_LARGE" {
		t.Errorf("a record above max.message.bytes within the body limit: %d %v", code, out)
	}
}

// A refused body that a client is still sending — above the limit, or
// beyond the budget — is read to its end before the answer, so the client
// finishes its write and reads the 413 or 429 instead of a reset. The body
// goes slowly (its second part after a pause longer than net/http's
// lingering close): answered and closed unread, the second write or the
// read fails.
func TestRefusedBodyIsDrainedBeforeTheAnswer(t *testing.T) {
	const limit = 64 << 10
	e := startWith(t, func(c *Config) { c.MaxRequestBytes = limit; c.MaxInflightProduceBytes = 16 << 10 })
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "t", "replication_factor": 1}`)
	send := func(body []byte, part int) net.Conn {
		t.Helper()
		conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		head := "POST /v1/topics/t/records HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
		if _, err := conn.Write(append([]byte(head), body[:part]...)); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	// A produce that has not finished sending holds the whole budget.
	holder := send(produceBody(16<<10), 1<<10)
	defer holder.Close()
	time.Sleep(200 * time.Millisecond)
	for _, tc := range []struct {
		name      string
		size      int
		status    int
		errorCode string
	}{
		{"above --max-request-bytes", 4 << 20, http.StatusRequestEntityTooLarge, "RECORD_LIST_TOO_LARGE"},
		{"above the in-flight budget", 32 << 10, http.StatusTooManyRequests, "THROTTLING_QUOTA_EXCEEDED"},
	} {
		body := produceBody(tc.size)
		conn := send(body, 1<<10)
		time.Sleep(800 * time.Millisecond)
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write(body[1<<10:]); err != nil {
			t.Fatalf("%s: the rest of the body: %v (the gateway closed without reading it)", tc.name, err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: no answer: %v", tc.name, err)
		}
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode != tc.status || out["error_code"] != tc.errorCode {
			t.Errorf("%s: %d %v, want %d %s", tc.name, resp.StatusCode, out, tc.status, tc.errorCode)
		}
	}
}

func TestGRPCMessageLimit(t *testing.T) {
	const limit = 64 << 10
	e := startWith(t, func(c *Config) { c.MaxRequestBytes = limit })
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "t", "replication_factor": 1}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prod := skeinv1.NewProducerServiceClient(dialGRPC(t, e.gw.GRPCAddr()))
	_, err := prod.Produce(ctx, &skeinv1.ProduceRequest{Topic: "t", Records: []*skeinv1.ProduceRecord{{ValueBytes: make([]byte, limit+grpcSlack+1)}}})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a message above the limit: %v, want RESOURCE_EXHAUSTED", err)
	}
	if _, err := prod.Produce(ctx, &skeinv1.ProduceRequest{Topic: "t", Records: []*skeinv1.ProduceRecord{{ValueBytes: make([]byte, limit-100)}}}); err != nil {
		t.Errorf("a message within the limit: %v", err)
	}
}

// TestProduceBudgetIs429 holds part of a small budget with a produce the
// stalled leader does not answer: produces that do not fit the rest are
// refused at once on every API, and fit again once the first is answered.
func TestProduceBudgetIs429(t *testing.T) {
	const limit = 64 << 10
	e := startWith(t, func(c *Config) { c.MaxInflightProduceBytes = limit })
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "t", "replication_factor": 1}`)
	release := e.cluster.Leader("t", 0).Stall()
	defer release()

	held := produceBody(40 << 10)
	first := make(chan int, 1)
	go func() {
		resp, err := http.Post(e.base+"/v1/topics/t/records", "application/json", bytes.NewReader(held))
		if err != nil {
			first <- -1
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	deadline := time.Now().Add(10 * time.Second)
	for e.gw.inflight.Used() < int64(len(held)) {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled produce holds %d bytes of the budget, want %d", e.gw.inflight.Used(), len(held))
		}
		time.Sleep(5 * time.Millisecond)
	}

	throttled := func(name string, code int, out map[string]any, h http.Header) {
		t.Helper()
		if code != http.StatusTooManyRequests || out["error_code"] != "THROTTLING_QUOTA_EXCEEDED" || out["code"] != float64(codes.ResourceExhausted) || h.Get("Retry-After") != "1" {
			t.Errorf("%s: %d %v Retry-After %q, want 429 THROTTLING_QUOTA_EXCEEDED with Retry-After 1", name, code, out, h.Get("Retry-After"))
		}
	}
	over := produceBody(30 << 10)
	code, out, h := e.post("/v1/topics/t/records", bytes.NewReader(over), int64(len(over)))
	throttled("REST body with its length", code, out, h)
	code, out, h = e.post("/v1/topics/t/partitions/0/records", onlyReader{bytes.NewReader(over)}, -1)
	throttled("chunked REST body", code, out, h)
	// Other routes are not charged.
	if code, out := e.do("GET", "/v1/topics/t", ""); code != http.StatusOK {
		t.Errorf("describe while the budget is used up: %d %v", code, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prod := skeinv1.NewProducerServiceClient(dialGRPC(t, e.gw.GRPCAddr()))
	big := []*skeinv1.ProduceRecord{{ValueBytes: make([]byte, 30<<10)}}
	_, err := prod.Produce(ctx, &skeinv1.ProduceRequest{Topic: "t", Records: big})
	st := status.Convert(err)
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			retry = r
		}
	}
	if st.Code() != codes.ResourceExhausted || errs.Of(rpcerr.FromStatus(err)) != errs.ThrottlingQuotaExceeded || retry == nil || retry.GetRetryDelay().AsDuration() != budget.RetryAfter {
		t.Errorf("gRPC Produce over the budget: %v (retry info %v), want RESOURCE_EXHAUSTED THROTTLING_QUOTA_EXCEEDED with a retry delay", err, retry)
	}
	stream, err := prod.ProduceStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&skeinv1.ProduceStreamRequest{CorrelationId: 7, Topic: "t", Records: big}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.GetResults(); resp.GetCorrelationId() != 7 || len(r) != 1 || r[0].GetErrorCode() != skeinv1.ErrorCode_THROTTLING_QUOTA_EXCEEDED || r[0].GetOutcome() != skeinv1.ProduceOutcome_NOT_WRITTEN {
		t.Errorf("ProduceStream request over the budget: %v", resp)
	}

	// Once the held produce is answered its bytes are back.
	release()
	if code := <-first; code != http.StatusOK {
		t.Fatalf("the held produce: %d", code)
	}
	for e.gw.inflight.Used() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("budget still holds %d bytes after every produce was answered", e.gw.inflight.Used())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code, out, _ := e.post("/v1/topics/t/records", bytes.NewReader(over), int64(len(over))); code != http.StatusOK {
		t.Errorf("REST produce after the budget freed: %d %v", code, out)
	}
	if _, err := prod.Produce(ctx, &skeinv1.ProduceRequest{Topic: "t", Records: big}); err != nil {
		t.Errorf("gRPC produce after the budget freed: %v", err)
	}
	if err := stream.Send(&skeinv1.ProduceStreamRequest{CorrelationId: 8, Topic: "t", Records: big}); err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || resp.GetResults()[0].GetErrorCode() != skeinv1.ErrorCode_NONE {
		t.Errorf("ProduceStream after the budget freed: %v %v", resp, err)
	}
	_ = stream.CloseSend()
	if e.gw.inflight.Used() != 0 {
		// The stream's request is released right after its answer is sent.
		time.Sleep(50 * time.Millisecond)
	}
	if used := e.gw.inflight.Used(); used != 0 {
		t.Errorf("budget holds %d bytes after every produce was answered", used)
	}
	_, metrics := get2(t, e.base+"/metrics")
	for _, m := range []string{`skein_gateway_produce_throttled_total{api="rest"} 2`, `skein_gateway_produce_throttled_total{api="grpc"} 2`, "skein_gateway_produce_inflight_limit_bytes 65536"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
}

func TestIsProduceRoute(t *testing.T) {
	for path, want := range map[string]bool{
		"/v1/topics/t/records":                 true,
		"/v1/topics/t/partitions/3/records":    true,
		"/v1/topics/a%2Fb/records":             true,
		"/v1/topics":                           false,
		"/v1/topics/t/partitions":              false,
		"/v1/groups/g/members/m/records":       false,
		"/v1/topics/t/partitions/3/records/x":  false,
		"/v2/topics/t/partitions/3/records":    false,
		"/v1/topics/t/partitions/3/offsets":    false,
		"/v1/topics/t/records/../../v1/topics": false,
	} {
		r, _ := http.NewRequest("POST", "http://x"+path, nil)
		if got := isProduceRoute(r); got != want {
			t.Errorf("POST %s: %v, want %v", path, got, want)
		}
	}
	r, _ := http.NewRequest("GET", "http://x/v1/topics/t/records", nil)
	if isProduceRoute(r) {
		t.Error("GET is not a produce")
	}
}

func TestMemoryLimit(t *testing.T) {
	for _, c := range []struct{ configured, budget, want int64 }{
		{0, DefaultMaxInflightProduceBytes, 192 << 20},
		{0, 64 << 20, 384 << 20},
		{100 << 20, DefaultMaxInflightProduceBytes, 100 << 20},
	} {
		if got := MemoryLimit(c.configured, c.budget); got != c.want {
			t.Errorf("MemoryLimit(%d, %d) = %d, want %d", c.configured, c.budget, got, c.want)
		}
	}
}
