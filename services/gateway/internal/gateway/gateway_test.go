package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
	"skein/libs/client/clienttest"
	"skein/libs/errs"
	"skein/libs/telemetry"
)

var spans = tracetest.NewInMemoryExporter()

func TestMain(m *testing.M) {
	shutdown, err := telemetry.Tracing(context.Background(), telemetry.TracingConfig{ServiceName: "gateway-test", Exporter: spans})
	if err != nil {
		panic(err)
	}
	code := m.Run()
	shutdown(context.Background())
	os.Exit(code)
}

type env struct {
	t       *testing.T
	cluster *clienttest.Cluster
	gw      *Gateway
	base    string
}

// start runs fake controller + two storage nodes and a gateway in front.
func start(t *testing.T, controllers ...string) *env {
	t.Helper()
	return startWith(t, nil, controllers...)
}

// startWith is start with the gateway's config changed by mod first.
func startWith(t *testing.T, mod func(*Config), controllers ...string) *env {
	t.Helper()
	cl := clienttest.Start(t, 2)
	if len(controllers) == 0 {
		controllers = []string{cl.ControllerAddr}
	}
	cfg := Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Controllers: controllers, ShutdownGrace: 2 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &env{t: t, cluster: cl, gw: g, base: "http://" + g.HTTPAddr()}
}

func (e *env) waitReady() {
	e.t.Helper()
	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.gw.Client().WaitReady(wctx); err != nil {
		e.t.Fatal(err)
	}
}

// do sends a request and decodes the JSON answer.
func (e *env) do(method, path, body string) (int, map[string]any) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.base+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		e.t.Fatalf("%s %s: %d, not JSON: %q", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

func (e *env) mustDo(method, path, body string) map[string]any {
	e.t.Helper()
	code, out := e.do(method, path, body)
	if code != http.StatusOK {
		e.t.Fatalf("%s %s: %d %v", method, path, code, out)
	}
	return out
}

func TestHealthReadinessOpenAPIAndMetrics(t *testing.T) {
	e := start(t)
	e.waitReady()
	get := func(path string) (int, string) {
		resp, err := http.Get(e.base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz %d", code)
	}
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz %d once metadata arrived", code)
	}
	code, doc := get("/openapi.json")
	var api struct {
		Paths map[string]any `json:"paths"`
	}
	if code != 200 || json.Unmarshal([]byte(doc), &api) != nil || api.Paths["/v1/topics"] == nil {
		t.Errorf("/openapi.json %d: %.200s", code, doc)
	}
	e.mustDo("GET", "/v1/topics", "")
	code, metrics := get("/metrics")
	if code != 200 || !strings.Contains(metrics, `skein_grpc_server_handled_total{code="OK",method="/skein.v1.AdminService/ListTopics"}`) {
		t.Errorf("/metrics %d lacks the ListTopics call", code)
	}

	// With no controller reachable the gateway is alive but not ready.
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := lis.Addr().String()
	lis.Close()
	e2 := start(t, dead)
	code, _ = get2(t, e2.base+"/readyz")
	if code != http.StatusServiceUnavailable {
		t.Errorf("/readyz without metadata: %d, want 503", code)
	}
	if code, _ = get2(t, e2.base+"/healthz"); code != 200 {
		t.Errorf("/healthz without metadata: %d", code)
	}
	// Calls are refused as unavailable rather than left hanging.
	if code, body := e2.do("GET", "/v1/topics", ""); code != http.StatusServiceUnavailable || body["error_code"] != "LEADER_NOT_AVAILABLE" {
		t.Errorf("a call without metadata: %d %v", code, body)
	}
}

func get2(t *testing.T, url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Every bad input is answered with its documented HTTP status and error
// code, in the REST error body (docs/API.md).
func TestRESTRefusals(t *testing.T) {
	e := start(t)
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "t", "partitions": 2, "replication_factor": 1}`)
	e.mustDo("POST", "/v1/topics", `{"name": "tiny", "configs": {"max.message.bytes": "1000"}}`)
	long := strings.Repeat("a", 250)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"topic name with a space", "POST", "/v1/topics", `{"name": "bad name"}`, 400, "INVALID_TOPIC_EXCEPTION"},
		{"topic name with a slash", "POST", "/v1/topics", `{"name": "a/b"}`, 400, "INVALID_TOPIC_EXCEPTION"},
		{"escaped slash in a topic path", "GET", "/v1/topics/a%2Fb", "", 400, "INVALID_TOPIC_EXCEPTION"},
		{"escaped slash in a produce path", "POST", "/v1/topics/a%2Fb/records", `{"records": [{"value": "x"}]}`, 400, "INVALID_TOPIC_EXCEPTION"},
		{"topic name .", "POST", "/v1/topics", `{"name": "."}`, 400, "INVALID_TOPIC_EXCEPTION"},
		{"topic name ..", "POST", "/v1/topics", `{"name": ".."}`, 400, "INVALID_TOPIC_EXCEPTION"},
		{"empty topic name", "POST", "/v1/topics", `{"name": ""}`, 400, "INVALID_TOPIC_EXCEPTION"},
		{"topic name of 250", "POST", "/v1/topics", `{"name": "` + long + `"}`, 400, "INVALID_TOPIC_EXCEPTION"},
		{"non-ASCII topic name", "GET", "/v1/topics/caf%C3%A9", "", 400, "INVALID_TOPIC_EXCEPTION"},
		{"internal topic name", "POST", "/v1/topics", `{"name": "__consumer_offsets"}`, 400, "INVALID_TOPIC_EXCEPTION"},
		{"unknown topic", "GET", "/v1/topics/nope", "", 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"delete unknown topic", "DELETE", "/v1/topics/nope", "", 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"RF above live brokers", "POST", "/v1/topics", `{"name": "rf", "replication_factor": 3}`, 400, "INVALID_REPLICATION_FACTOR"},
		{"RF zero", "POST", "/v1/topics", `{"name": "rf", "replication_factor": 0}`, 400, "INVALID_REPLICATION_FACTOR"},
		{"zero partitions", "POST", "/v1/topics", `{"name": "p0", "partitions": 0}`, 400, "INVALID_PARTITIONS"},
		{"topic exists", "POST", "/v1/topics", `{"name": "t"}`, 409, "TOPIC_ALREADY_EXISTS"},
		{"unknown config", "POST", "/v1/topics", `{"name": "c", "configs": {"retention.forever": "1"}}`, 400, "INVALID_CONFIG"},
		{"bad config value", "POST", "/v1/topics/t/configs", `{"configs": {"retention.ms": "soon"}}`, 400, "INVALID_CONFIG"},
		{"shrinking partitions", "POST", "/v1/topics/t/partitions", `{"count": 1}`, 400, "INVALID_PARTITIONS"},
		{"acks=5", "POST", "/v1/topics/t/records", `{"acks": 5, "records": [{"value": "v"}]}`, 400, "INVALID_REQUIRED_ACKS"},
		{"acks=2", "POST", "/v1/topics/t/records", `{"acks": 2, "records": [{"value": "v"}]}`, 400, "INVALID_REQUIRED_ACKS"},
		{"produce to unknown topic", "POST", "/v1/topics/nope/records", `{"records": [{"value": "v"}]}`, 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"produce to bad topic name", "POST", "/v1/topics/a%20b/records", `{"records": [{"value": "v"}]}`, 400, "INVALID_TOPIC_EXCEPTION"},
		{"record partition out of range", "POST", "/v1/topics/t/records", `{"records": [{"value": "v", "partition": 2}]}`, 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"negative record partition", "POST", "/v1/topics/t/records", `{"records": [{"value": "v", "partition": -1}]}`, 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"route partition out of range", "POST", "/v1/topics/t/partitions/7/records", `{"records": [{"value": "v"}]}`, 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"fetch partition out of range", "GET", "/v1/topics/t/partitions/9/records", "", 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"offset out of range", "GET", "/v1/topics/t/partitions/0/records?offset=99", "", 400, "OFFSET_OUT_OF_RANGE"},
		{"negative offset", "GET", "/v1/topics/t/partitions/0/records?offset=-5", "", 400, "OFFSET_OUT_OF_RANGE"},
		{"zero max_bytes", "GET", "/v1/topics/t/partitions/0/records?max_bytes=0", "", 400, "INVALID_FETCH_SIZE"},
		{"oversized record", "POST", "/v1/topics/tiny/records", `{"records": [{"value": "` + strings.Repeat("x", 2000) + `"}]}`, 400, "MESSAGE_TOO_LARGE"},
		{"no records", "POST", "/v1/topics/t/records", `{"records": []}`, 400, "INVALID_REQUEST"},
		{"key and key_bytes", "POST", "/v1/topics/t/records", `{"records": [{"key": "k", "key_bytes": "aw=="}]}`, 400, "INVALID_REQUEST"},
		{"negative timestamp", "POST", "/v1/topics/t/records", `{"records": [{"value": "v", "timestamp_ms": -3}]}`, 400, "INVALID_TIMESTAMP"},
		{"producer id off the partition route", "POST", "/v1/topics/t/records", `{"producer_id": 5, "producer_epoch": 0, "base_sequence": 0, "records": [{"value": "v"}]}`, 400, "INVALID_REQUEST"},
		{"transactional id too long", "POST", "/v1/topics/t/partitions/0/records", `{"transactional_id": "` + strings.Repeat("x", 256) + `", "producer_id": 5, "producer_epoch": 0, "base_sequence": 0, "records": [{"value": "v"}]}`, 400, "INVALID_REQUEST"},
		{"transaction timeout without a transactional id", "POST", "/v1/producers", `{"transaction_timeout_ms": 5000}`, 400, "INVALID_REQUEST"},
		{"zero transaction timeout", "POST", "/v1/producers", `{"transactional_id": "tx", "transaction_timeout_ms": 0}`, 400, "INVALID_TRANSACTION_TIMEOUT"},
		{"commit with a negative producer id", "POST", "/v1/transactions/tx:commit", `{"producer_id": -1, "producer_epoch": 0}`, 400, "INVALID_REQUEST"},
		{"abort with an epoch out of range", "POST", "/v1/transactions/tx:abort", `{"producer_id": 1, "producer_epoch": 40000}`, 400, "INVALID_REQUEST"},
		{"produce with an epoch out of range", "POST", "/v1/topics/t/partitions/0/records", `{"producer_id": 5, "producer_epoch": -1, "base_sequence": 0, "records": [{"value": "v"}]}`, 400, "INVALID_REQUEST"},
		{"produce with a negative sequence", "POST", "/v1/topics/t/partitions/0/records", `{"producer_id": 5, "producer_epoch": 0, "base_sequence": -5, "records": [{"value": "v"}]}`, 400, "INVALID_REQUEST"},
		{"produce to the group coordinators' topic", "POST", "/v1/topics/__consumer_offsets/records", `{"records": [{"key": "x", "value": "y"}]}`, 400, "INVALID_TOPIC_EXCEPTION"},
		{"produce to the transaction coordinators' topic", "POST", "/v1/topics/__transaction_state/partitions/0/records", `{"records": [{"key": "x", "value": "y"}]}`, 400, "INVALID_TOPIC_EXCEPTION"},
		{"offsets for no group", "POST", "/v1/transactions/tx/offsets", `{"producer_id": 1, "producer_epoch": 0, "group": "", "offsets": [{"topic": "t", "partition": 0, "offset": 1}]}`, 400, "INVALID_GROUP_ID"},
		{"no offsets", "POST", "/v1/transactions/tx/offsets", `{"producer_id": 1, "producer_epoch": 0, "group": "g", "offsets": []}`, 400, "INVALID_REQUEST"},
		{"negative transactional offset", "POST", "/v1/transactions/tx/offsets", `{"producer_id": 1, "producer_epoch": 0, "group": "g", "offsets": [{"topic": "t", "partition": 0, "offset": -4}]}`, 400, "INVALID_REQUEST"},
		{"producer id without sequence", "POST", "/v1/topics/t/partitions/0/records", `{"producer_id": 5, "records": [{"value": "v"}]}`, 400, "INVALID_REQUEST"},
		{"sequence without producer id", "POST", "/v1/topics/t/partitions/0/records", `{"producer_epoch": 0, "base_sequence": 5, "records": [{"value": "v"}]}`, 400, "INVALID_REQUEST"},
		{"epoch without producer id off the partition route", "POST", "/v1/topics/t/records", `{"producer_epoch": 0, "records": [{"value": "v"}]}`, 400, "INVALID_REQUEST"},
		{"malformed JSON", "POST", "/v1/topics", `{"name": `, 400, "INVALID_REQUEST"},
		{"not JSON at all", "POST", "/v1/topics/t/records", `acks=1`, 400, "INVALID_REQUEST"},
		{"string for an int", "POST", "/v1/topics", `{"name": "w", "partitions": "many"}`, 400, "INVALID_REQUEST"},
		{"number for a string", "POST", "/v1/topics", `{"name": 5}`, 400, "INVALID_REQUEST"},
		{"object for a list", "POST", "/v1/topics/t/records", `{"records": {"value": "v"}}`, 400, "INVALID_REQUEST"},
		{"bad base64", "POST", "/v1/topics/t/records", `{"records": [{"value_bytes": "***"}]}`, 400, "INVALID_REQUEST"},
		{"unknown field", "POST", "/v1/topics", `{"nam": "x"}`, 400, "INVALID_REQUEST"},
		{"non-numeric partition in the path", "GET", "/v1/topics/t/partitions/zero/records", "", 400, "INVALID_REQUEST"},
		{"non-numeric offset", "GET", "/v1/topics/t/partitions/0/records?offset=abc", "", 400, "INVALID_REQUEST"},
		{"unknown isolation level", "GET", "/v1/topics/t/partitions/0/records?isolation_level=SOMETIMES", "", 400, "INVALID_REQUEST"},
		{"bad offsets spec", "GET", "/v1/topics/t/offsets?spec=SOON", "", 400, "INVALID_REQUEST"},
		{"commit without an offset", "POST", "/v1/groups/g/offsets", `{"member_id": "m", "member_epoch": 1, "offsets": [{"topic": "t", "partition": 0}]}`, 400, "INVALID_REQUEST"},
		{"commit with a null offset", "POST", "/v1/groups/g/offsets", `{"member_id": "m", "member_epoch": -1, "offsets": [{"topic": "t", "partition": 0, "offset": 3}, {"topic": "t", "partition": 1, "offset": null}]}`, 400, "INVALID_REQUEST"},
		{"commit without a partition", "POST", "/v1/groups/g/offsets", `{"member_id": "m", "member_epoch": 1, "offsets": [{"topic": "t", "offset": 5}]}`, 400, "INVALID_REQUEST"},
		{"transactional offsets without an offset", "POST", "/v1/transactions/tx/offsets", `{"producer_id": 1, "producer_epoch": 0, "group": "g", "offsets": [{"topic": "t", "partition": 0}]}`, 400, "INVALID_REQUEST"},
		{"join with an undefined isolation level", "POST", "/v1/groups/g/members", `{"topics": ["t"], "isolation_level": 3}`, 400, "INVALID_REQUEST"},
		{"join with READ_COMMITTED, which a unary member keeps nowhere", "POST", "/v1/groups/g/members", `{"topics": ["t"], "isolation_level": "READ_COMMITTED"}`, 400, "INVALID_REQUEST"},
		{"delete records without a partition", "POST", "/v1/topics/t/records:delete", `{"partitions": [{"offset": -1}]}`, 400, "INVALID_REQUEST"},
		{"delete records without an offset", "POST", "/v1/topics/t/records:delete", `{"partitions": [{"partition": 0, "offset": 1}, {"partition": 1}]}`, 400, "INVALID_REQUEST"},
		{"delete records with a null offset", "POST", "/v1/topics/t/records:delete", `{"partitions": [{"partition": 0, "offset": null}]}`, 400, "INVALID_REQUEST"},
		{"idempotent produce with acks 1", "POST", "/v1/topics/t/partitions/0/records", `{"acks": 1, "producer_id": 5, "producer_epoch": 0, "base_sequence": 0, "records": [{"value": "v"}]}`, 400, "INVALID_REQUIRED_ACKS"},
		{"transactional produce with acks 0", "POST", "/v1/topics/t/partitions/0/records", `{"acks": 0, "transactional_id": "tx", "producer_id": 5, "producer_epoch": 0, "base_sequence": 0, "records": [{"value": "v"}]}`, 400, "INVALID_REQUIRED_ACKS"},
		{"delete records of an internal topic", "POST", "/v1/topics/__consumer_offsets/records:delete", `{"partitions": [{"partition": 0, "offset": 1}]}`, 400, "INVALID_TOPIC_EXCEPTION"},
		{"timestamp without spec TIMESTAMP", "GET", "/v1/topics/t/offsets?timestamp_ms=1764400000000", "", 400, "INVALID_REQUEST"},
		{"spec TIMESTAMP without a timestamp", "GET", "/v1/topics/t/offsets?spec=TIMESTAMP", "", 400, "INVALID_REQUEST"},
		{"timestamp with spec EARLIEST", "GET", "/v1/topics/t/offsets?spec=EARLIEST&timestamp_ms=5", "", 400, "INVALID_REQUEST"},
		{"an empty path segment", "POST", "/v1/groups//members", `{"topics": ["t"]}`, 400, "INVALID_REQUEST"},
		{"an empty group id before a route's last word", "DELETE", "/v1/groups//config", "", 400, "INVALID_REQUEST"},
		{"a dot segment", "GET", "/v1/topics/./t", "", 400, "INVALID_REQUEST"},
		{"a dot-dot segment", "GET", "/v1/topics/x/../t", "", 400, "INVALID_REQUEST"},
		{"misspelt query parameter", "GET", "/v1/topics/t/partitions/0/records?offest=5", "", 400, "INVALID_REQUEST"},
		{"query parameter the route does not take", "GET", "/v1/topics/t/offsets?partition=1", "", 400, "INVALID_REQUEST"},
		{"query parameter inside a scalar", "GET", "/v1/topics/t/partitions/0/records?offset.x=5", "", 400, "INVALID_REQUEST"},
		// A field the path fills: not dropped in silence.
		{"query parameter naming the path's group", "DELETE", "/v1/groups/g/offsets?topic=t&group=other", "", 400, "INVALID_REQUEST"},
		{"query parameter naming the path's partition", "GET", "/v1/topics/t/partitions/0/records?partition=1", "", 400, "INVALID_REQUEST"},
		{"query parameter naming the path's topic, as JSON", "GET", "/v1/topics/t/partitions/0/records?topic=u", "", 400, "INVALID_REQUEST"},
		// Routes that take every field from the body or the path.
		{"query parameter on a produce", "POST", "/v1/topics/t/records?acks=0", `{"records": [{"value": "v"}]}`, 400, "INVALID_REQUEST"},
		{"query parameter on a partition's produce", "POST", "/v1/topics/t/partitions/0/records?partition=1", `{"records": [{"value": "v"}]}`, 400, "INVALID_REQUEST"},
		{"query parameter on a topic's description", "GET", "/v1/topics/t?bogus=1", "", 400, "INVALID_REQUEST"},
		{"query parameter on a topic's deletion", "DELETE", "/v1/topics/t?if_exists", "", 400, "INVALID_REQUEST"},
		{"query parameter on the cluster", "GET", "/v1/cluster?verbose=1", "", 400, "INVALID_REQUEST"},
		{"query parameter on a group list", "GET", "/v1/groups?state=EMPTY", "", 400, "INVALID_REQUEST"},
		{"malformed query on a produce", "POST", "/v1/topics/t/records?acks=0;x", `{"records": [{"value": "v"}]}`, 400, "INVALID_REQUEST"},
		{"badly escaped query on a produce", "POST", "/v1/topics/t/records?acks=%zz", `{"records": [{"value": "v"}]}`, 400, "INVALID_REQUEST"},
		{"group fetch with an isolation level out of range", "POST", "/v1/groups/g/members/m1/records", `{"member_epoch": 1, "isolation_level": 7}`, 400, "INVALID_REQUEST"},
		{"group fetch with an encoding out of range", "POST", "/v1/groups/g/members/m1/records", `{"member_epoch": 1, "encoding": 9}`, 400, "INVALID_REQUEST"},
		// Decoded, not UTF-8: a protobuf string may not hold it.
		{"a group id not UTF-8", "POST", "/v1/groups/%FF/members", `{"topics": ["t"]}`, 400, "INVALID_REQUEST"},
		{"a group id not UTF-8, described", "GET", "/v1/groups/%FF", "", 400, "INVALID_REQUEST"},
		{"a topic name not UTF-8", "GET", "/v1/topics/%C3%28", "", 400, "INVALID_REQUEST"},
		{"a query value not UTF-8", "GET", "/v1/acls?principal=User:%FF", "", 400, "INVALID_REQUEST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.do(tc.method, tc.path, tc.body)
			if code != tc.status || body["error_code"] != tc.code {
				t.Fatalf("%d %v, want %d %s", code, body, tc.status, tc.code)
			}
			if msg, _ := body["message"].(string); msg == "" {
				t.Errorf("no message in %v", body)
			} else if strings.Contains(msg, "strconv") || strings.Contains(msg, "proto:") || strings.Contains(msg, "field valueBytes") {
				t.Errorf("a message in Go's terms, not the API's: %q", msg)
			}
			grpcCode, ok := body["code"].(float64)
			if !ok {
				t.Fatalf("no numeric code in %v", body)
			}
			if row := errs.ForName(tc.code); tc.status != 404 || tc.code != "INVALID_REQUEST" {
				if int(grpcCode) != int(row.GRPC) {
					t.Errorf("code %v, want %d (%s)", grpcCode, row.GRPC, row.GRPC)
				}
			}
		})
	}
}

// A refusal from the storage node comes back per record, with its code.
func TestStorageRefusalsArePerRecord(t *testing.T) {
	e := start(t)
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "t", "replication_factor": 1}`)
	e.cluster.Leader("t", 0).FailNext("t", 0, errs.Errorf(errs.MessageTooLarge, "batch above max.message.bytes"), 1)
	out := e.mustDo("POST", "/v1/topics/t/records", `{"records": [{"value": "a"}, {"value": "b"}]}`)
	res := out["results"].([]any)
	for i, r := range res {
		m := r.(map[string]any)
		if m["error_code"] != "MESSAGE_TOO_LARGE" || m["offset"] != "-1" || m["message"] == "" || m["outcome"] != "NOT_WRITTEN" {
			t.Errorf("result %d: %v", i, m)
		}
	}
}

// A record appended by the leader but not by enough replicas until the
// delivery timeout may be in the log: its outcome is UNKNOWN.
func TestUnknownOutcome(t *testing.T) {
	e := startWith(t, func(c *Config) {
		c.ProducerOptions = append(c.ProducerOptions, client.WithDeliveryTimeout(time.Second))
	})
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "t", "replication_factor": 1}`)
	e.cluster.Leader("t", 0).FailNext("t", 0, errs.NotEnoughReplicasAfterAppend, 1_000_000)
	out := e.mustDo("POST", "/v1/topics/t/records", `{"records": [{"value": "c"}]}`)
	if m := out["results"].([]any)[0].(map[string]any); m["error_code"] == "NONE" || m["outcome"] != "UNKNOWN" {
		t.Errorf("after NOT_ENOUGH_REPLICAS_AFTER_APPEND to the end: %v, want outcome UNKNOWN", m)
	}
}

// Field names are the proto names, zero values are present, and keys,
// values and header values round-trip as text or base64 bytes.
func TestJSONConventions(t *testing.T) {
	e := start(t)
	e.waitReady()
	desc := e.mustDo("POST", "/v1/topics", `{"name": "conv", "partitions": 1, "replication_factor": 1, "configs": {"retention.ms": "1000"}}`)
	if desc["name"] != "conv" || desc["replication_factor"] != 1.0 || desc["internal"] != false || desc["configs"].(map[string]any)["retention.ms"] != "1000" {
		t.Fatalf("create answered %v", desc)
	}
	p0 := desc["partitions"].([]any)[0].(map[string]any)
	for _, k := range []string{"partition", "leader", "leader_epoch", "replicas", "isr", "log_start_offset", "high_watermark", "last_stable_offset"} {
		if _, ok := p0[k]; !ok {
			t.Errorf("partition description lacks %q: %v", k, p0)
		}
	}
	if p0["partition"] != 0.0 || p0["leader_epoch"] != 0.0 || p0["high_watermark"] != "0" {
		t.Errorf("zero values: %v", p0)
	}

	binary := base64.StdEncoding.EncodeToString([]byte{0xff, 0xfe, 0x00})
	out := e.mustDo("POST", "/v1/topics/conv/records", `{"acks": -1, "records": [
		{"key": "user-1", "value": "hello", "headers": [{"key": "h", "value": "v"}, {"key": "bin", "value_bytes": "`+binary+`"}], "timestamp_ms": 1764400000000},
		{"key_bytes": "`+binary+`", "value_bytes": "`+base64.StdEncoding.EncodeToString([]byte("text in bytes"))+`"},
		{"key": "tomb"}]}`)
	res := out["results"].([]any)
	if len(res) != 3 {
		t.Fatalf("results %v", out)
	}
	for i, r := range res {
		m := r.(map[string]any)
		if m["offset"] != fmt.Sprint(i) || m["partition"] != 0.0 || m["error_code"] != "NONE" || m["message"] != "" || m["outcome"] != "WRITTEN" {
			t.Errorf("result %d: %v (one per record, in order, zero values present)", i, m)
		}
	}
	if ts := res[0].(map[string]any)["timestamp_ms"]; ts != "1764400000000" {
		t.Errorf("timestamp_ms %v", ts)
	}

	fetch := e.mustDo("GET", "/v1/topics/conv/partitions/0/records?offset=0", "")
	recs := fetch["records"].([]any)
	if len(recs) != 3 || fetch["next_offset"] != "3" || fetch["high_watermark"] != "3" || fetch["log_start_offset"] != "0" {
		t.Fatalf("fetch %v", fetch)
	}
	r0, r1, r2 := recs[0].(map[string]any), recs[1].(map[string]any), recs[2].(map[string]any)
	if r0["key"] != "user-1" || r0["value"] != "hello" || r0["topic"] != "conv" || r0["offset"] != "0" || r0["timestamp_ms"] != "1764400000000" {
		t.Errorf("text record %v", r0)
	}
	if r0["key_bytes"] != nil || r0["value_bytes"] != nil {
		t.Errorf("a text record carries bytes fields too: %v", r0)
	}
	hs := r0["headers"].([]any)
	if h := hs[0].(map[string]any); h["key"] != "h" || h["value"] != "v" {
		t.Errorf("text header %v", h)
	}
	if h := hs[1].(map[string]any); h["key"] != "bin" || h["value_bytes"] != binary || h["value"] != nil {
		t.Errorf("binary header %v", h)
	}
	if r1["key_bytes"] != binary || r1["key"] != nil || r1["value"] != "text in bytes" {
		t.Errorf("binary key / UTF-8 value under TEXT: %v", r1)
	}
	if r2["key"] != "tomb" || r2["value"] != nil || r2["value_bytes"] != nil {
		t.Errorf("tombstone %v", r2)
	}
	var traceparent bool
	for _, h := range hs {
		traceparent = traceparent || h.(map[string]any)["key"] == "traceparent"
	}
	if !traceparent {
		t.Errorf("no traceparent header on a produced record: %v", hs)
	}

	fetch = e.mustDo("GET", "/v1/topics/conv/partitions/0/records?offset=0&max_records=1&encoding=BYTES", "")
	recs = fetch["records"].([]any)
	r0 = recs[0].(map[string]any)
	if len(recs) != 1 || fetch["next_offset"] != "1" || r0["value_bytes"] != base64.StdEncoding.EncodeToString([]byte("hello")) || r0["value"] != nil || r0["key_bytes"] != base64.StdEncoding.EncodeToString([]byte("user-1")) {
		t.Errorf("encoding=BYTES: %v", fetch)
	}
	if h := r0["headers"].([]any)[0].(map[string]any); h["value_bytes"] != base64.StdEncoding.EncodeToString([]byte("v")) {
		t.Errorf("encoding=BYTES header %v", h)
	}

	// Empty lists are present too.
	fetch = e.mustDo("GET", "/v1/topics/conv/partitions/0/records?offset=3", "")
	if recs, ok := fetch["records"].([]any); !ok || len(recs) != 0 {
		t.Errorf("an empty fetch: %v", fetch)
	}
}

// The long poll's max_wait_ms reaches the leader, and the call answers as
// soon as data arrives.
func TestLongPollPassesMaxWait(t *testing.T) {
	e := start(t)
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "lp", "replication_factor": 1}`)
	go func() {
		time.Sleep(150 * time.Millisecond)
		e.do("POST", "/v1/topics/lp/records", `{"records": [{"value": "late"}]}`)
	}()
	start := time.Now()
	out := e.mustDo("GET", "/v1/topics/lp/partitions/0/records?offset=0&max_wait_ms=4000", "")
	if recs := out["records"].([]any); len(recs) != 1 || recs[0].(map[string]any)["value"] != "late" {
		t.Fatalf("long poll %v", out)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("answered after %v; should answer when data arrives", d)
	}
	fetches := e.cluster.Leader("lp", 0).Fetches()
	if len(fetches) == 0 || fetches[0].GetMaxWaitMs() != 4000 {
		t.Fatalf("leader saw %v, want max_wait_ms 4000", fetches)
	}
}

func TestAdminOverREST(t *testing.T) {
	e := start(t)
	e.waitReady()
	cluster := e.mustDo("GET", "/v1/cluster", "")
	if cluster["cluster_id"] != "test-cluster" || len(cluster["brokers"].([]any)) != 2 || len(cluster["controllers"].([]any)) != 1 {
		t.Fatalf("cluster %v", cluster)
	}
	if b := cluster["brokers"].([]any)[0].(map[string]any); b["state"] != "ALIVE" || b["grpc_addr"] == "" || b["rack"] != "" {
		t.Errorf("broker %v", b)
	}
	e.mustDo("POST", "/v1/topics", `{"name": "a.b_c-1", "partitions": 2}`)
	list := e.mustDo("GET", "/v1/topics", "")
	if ts := list["topics"].([]any); len(ts) != 1 || ts[0].(map[string]any)["partitions"] != 2.0 || ts[0].(map[string]any)["replication_factor"] != 2.0 {
		t.Fatalf("list %v", list)
	}
	e.mustDo("POST", "/v1/topics/a.b_c-1/records", `{"records": [{"value": "x", "partition": 1}, {"value": "y", "partition": 1}]}`)
	d := e.mustDo("GET", "/v1/topics/a.b_c-1", "")
	if p1 := d["partitions"].([]any)[1].(map[string]any); p1["high_watermark"] != "2" || p1["log_start_offset"] != "0" || p1["last_stable_offset"] != "2" {
		t.Errorf("describe %v", p1)
	}
	if d["configs"].(map[string]any)["cleanup.policy"] != "delete" {
		t.Errorf("describe shows no effective configs: %v", d["configs"])
	}
	if o, ok := d["overridden_configs"].([]any); !ok || len(o) != 0 {
		t.Errorf("a topic that sets no config lists %v as its own", d["overridden_configs"])
	}
	if code, body := e.do("POST", "/v1/topics/a.b_c-1/partitions", `{}`); code != 400 || !strings.Contains(fmt.Sprint(body["message"]), "count is missing") {
		t.Errorf("grow without a count: %d %v, want 400 naming the missing count", code, body)
	}
	grown := e.mustDo("POST", "/v1/topics/a.b_c-1/partitions", `{"count": 3}`)
	if len(grown["partitions"].([]any)) != 3 {
		t.Errorf("grown %v", grown)
	}
	alt := e.mustDo("POST", "/v1/topics/a.b_c-1/configs", `{"configs": {"retention.ms": "5000"}}`)
	if alt["configs"].(map[string]any)["retention.ms"] != "5000" || fmt.Sprint(alt["overridden_configs"]) != "[retention.ms]" {
		t.Errorf("altered %v", alt)
	}
	// A value with spaces around it is kept without them, and the call
	// answers once the change is in, as for any other.
	start := time.Now()
	alt = e.mustDo("POST", "/v1/topics/a.b_c-1/configs", `{"configs": {"retention.ms": " 6000 "}}`)
	if alt["configs"].(map[string]any)["retention.ms"] != "6000" || time.Since(start) > 5*time.Second {
		t.Errorf("altered with a spaced value in %v: %v", time.Since(start), alt)
	}
	// A list is kept as its items, each once.
	start = time.Now()
	alt = e.mustDo("POST", "/v1/topics/a.b_c-1/configs", `{"configs": {"cleanup.policy": "delete,, delete"}}`)
	if alt["configs"].(map[string]any)["cleanup.policy"] != "delete" || time.Since(start) > 5*time.Second {
		t.Errorf("altered with an untidy list in %v: %v", time.Since(start), alt)
	}
	offs := e.mustDo("GET", "/v1/topics/a.b_c-1/offsets?spec=LATEST", "")
	if o := offs["offsets"].([]any); len(o) != 3 || o[1].(map[string]any)["offset"] != "2" || o[0].(map[string]any)["error_code"] != "NONE" {
		t.Errorf("offsets %v", offs)
	}
	offs = e.mustDo("GET", "/v1/topics/a.b_c-1/offsets?spec=TIMESTAMP&timestamp_ms=0", "")
	if o := offs["offsets"].([]any); o[1].(map[string]any)["offset"] != "0" || o[0].(map[string]any)["offset"] != "-1" {
		t.Errorf("offsets by time %v", offs)
	}
	// A partition without a leader answers its row's error with -1 for the
	// offset and the time alike, as a lookup that found nothing does.
	leader2, _, _ := e.cluster.Controller.Leader("a.b_c-1", 2)
	e.cluster.Controller.SetLeader("a.b_c-1", 2, -1)
	deadline := time.Now().Add(5 * time.Second)
	for {
		offs = e.mustDo("GET", "/v1/topics/a.b_c-1/offsets?spec=EARLIEST", "")
		o := offs["offsets"].([]any)[2].(map[string]any)
		if o["error_code"] == "LEADER_NOT_AVAILABLE" {
			if o["offset"] != "-1" || o["timestamp_ms"] != "-1" || o["message"] == "" {
				t.Errorf("a leaderless partition's row %v", o)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition 2 still answers %v with no leader", o)
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.cluster.Controller.SetLeader("a.b_c-1", 2, leader2)
	el := e.mustDo("POST", "/v1/leaders:elect", `{"topic": "a.b_c-1", "type": "PREFERRED"}`)
	if r := el["results"].([]any); len(r) != 3 || r[0].(map[string]any)["error_code"] != "ELECTION_NOT_NEEDED" {
		t.Errorf("elect %v", el)
	}
	if del := e.mustDo("DELETE", "/v1/topics/a.b_c-1", ""); del["topic"] != "a.b_c-1" {
		t.Errorf("delete %v", del)
	}
	if code, _ := e.do("GET", "/v1/topics/a.b_c-1", ""); code != 404 {
		t.Errorf("deleted topic still described: %d", code)
	}
}

func dialGRPC(t *testing.T, addr string) *grpc.ClientConn {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestGRPCReflectionListsTheServices(t *testing.T) {
	e := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(dialGRPC(t, e.gw.GRPCAddr())).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: "*"}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, s := range resp.GetListServicesResponse().GetService() {
		got[s.GetName()] = true
	}
	for _, want := range []string{"skein.v1.AdminService", "skein.v1.ProducerService", "skein.v1.ConsumerService", "skein.v1.GroupService", "skein.v1.TransactionService", "grpc.health.v1.Health"} {
		if !got[want] {
			t.Errorf("reflection lacks %s: %v", want, got)
		}
	}
}

// ProduceStream answers by correlation id; Tail streams what is committed.
func TestProduceStreamAndTail(t *testing.T) {
	e := start(t)
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "s", "replication_factor": 1}`)
	conn := dialGRPC(t, e.gw.GRPCAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()

	tail, err := skeinv1.NewConsumerServiceClient(conn).Tail(ctx, &skeinv1.TailRequest{Topic: "s", Partition: 0, Offset: ptr[int64](0)})
	if err != nil {
		t.Fatal(err)
	}
	ps, err := skeinv1.NewProducerServiceClient(conn).ProduceStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v := func(s string) *string { return &s }
	for corr := uint64(10); corr < 13; corr++ {
		if err := ps.Send(&skeinv1.ProduceStreamRequest{CorrelationId: corr, Topic: "s", Records: []*skeinv1.ProduceRecord{{Value: v(fmt.Sprint(corr))}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ps.Send(&skeinv1.ProduceStreamRequest{CorrelationId: 99, Topic: "s", Acks: ptr[int32](7), Records: []*skeinv1.ProduceRecord{{Value: v("x")}}}); err != nil {
		t.Fatal(err)
	}
	if err := ps.CloseSend(); err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]*skeinv1.ProduceStreamResponse{}
	for _, resp := range recvUntilEOF(t, ps) {
		seen[resp.GetCorrelationId()] = resp
	}
	for corr := uint64(10); corr < 13; corr++ {
		r := seen[corr]
		if r == nil || len(r.GetResults()) != 1 || r.GetResults()[0].GetErrorCode() != skeinv1.ErrorCode_NONE {
			t.Errorf("correlation %d: %v", corr, r)
		}
	}
	if r := seen[99]; r == nil || r.GetResults()[0].GetErrorCode() != skeinv1.ErrorCode_INVALID_REQUIRED_ACKS {
		t.Errorf("a bad request in the stream: %v", r)
	}
	b := e.cluster.Leader("s", 0).Batches("s", 0)
	if len(b) == 0 || b[0].ProducerID() < 0 {
		t.Errorf("the stream's batches are not idempotent")
	}

	var got []string
	for len(got) < 3 {
		resp, err := tail.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resp.GetRecords() {
			got = append(got, r.GetValue())
		}
	}
	if strings.Join(got, ",") != "10,11,12" {
		t.Errorf("tail saw %v", got)
	}
}

// A stream refuses a record on its own — too large for the topic, a
// partition the topic lacks — and writes the others of its request, as a
// Kafka producer fails one send and not its neighbours.
func TestProduceStreamRefusesRecordsOneByOne(t *testing.T) {
	e := start(t)
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "small", "replication_factor": 1, "configs": {"max.message.bytes": "200"}}`)
	conn := dialGRPC(t, e.gw.GRPCAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ps, err := skeinv1.NewProducerServiceClient(conn).ProduceStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v := func(s string) *string { return &s }
	big := strings.Repeat("a", 300)
	reqs := []*skeinv1.ProduceStreamRequest{
		{CorrelationId: 1, Topic: "small", Records: []*skeinv1.ProduceRecord{{Value: v("short")}, {Value: v(big)}, {Value: v("short2")}, {Value: v("p9"), Partition: ptr[int32](9)}, {Value: v("short3")}}},
		{CorrelationId: 2, Topic: "small", Records: []*skeinv1.ProduceRecord{{Value: v(big)}}},
		{CorrelationId: 3, Topic: "small", Records: []*skeinv1.ProduceRecord{{Value: v(big)}, {Value: v("short4")}, {Value: v(big)}, {Value: v("short5")}}},
	}
	for _, r := range reqs {
		if err := ps.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := ps.CloseSend(); err != nil {
		t.Fatal(err)
	}
	seen := map[uint64][]*skeinv1.ProduceResult{}
	for _, resp := range recvUntilEOF(t, ps) {
		seen[resp.GetCorrelationId()] = resp.GetResults()
	}
	codes := func(rs []*skeinv1.ProduceResult) (out []string) {
		for _, r := range rs {
			out = append(out, fmt.Sprintf("%s/%d", r.GetErrorCode(), r.GetOffset()))
		}
		return out
	}
	want := []string{"NONE/0", "MESSAGE_TOO_LARGE/-1", "NONE/1", "UNKNOWN_TOPIC_OR_PARTITION/-1", "NONE/2"}
	if got := codes(seen[1]); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("mixed request: %v, want %v", got, want)
	}
	if r := seen[1]; len(r) == 5 && !strings.Contains(r[1].GetMessage(), "record 1 is") {
		t.Errorf("the refusal does not name its record: %q", r[1].GetMessage())
	}
	if got := codes(seen[2]); fmt.Sprint(got) != fmt.Sprint([]string{"MESSAGE_TOO_LARGE/-1"}) {
		t.Errorf("a request of one refused record: %v", got)
	}
	want3 := []string{"MESSAGE_TOO_LARGE/-1", "NONE/3", "MESSAGE_TOO_LARGE/-1", "NONE/4"}
	if got := codes(seen[3]); fmt.Sprint(got) != fmt.Sprint(want3) {
		t.Errorf("a request whose first record is refused: %v, want %v", got, want3)
	}
	fetch := e.mustDo("GET", "/v1/topics/small/partitions/0/records?offset=0", "")
	var values []string
	for _, r := range fetch["records"].([]any) {
		values = append(values, r.(map[string]any)["value"].(string))
	}
	if strings.Join(values, ",") != "short,short2,short3,short4,short5" {
		t.Errorf("the partition holds %v", values)
	}
}

// The produce span, the storage call and the record's traceparent header
// share one trace.
func TestProduceIsOneTrace(t *testing.T) {
	e := start(t)
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "tr", "replication_factor": 1}`)
	spans.Reset()
	e.mustDo("POST", "/v1/topics/tr/records", `{"records": [{"value": "v"}]}`)
	fetch := e.mustDo("GET", "/v1/topics/tr/partitions/0/records?offset=0", "")
	var tp string
	for _, h := range fetch["records"].([]any)[0].(map[string]any)["headers"].([]any) {
		if h.(map[string]any)["key"] == "traceparent" {
			tp = h.(map[string]any)["value"].(string)
		}
	}
	parts := strings.Split(tp, "-")
	if len(parts) != 4 {
		t.Fatalf("traceparent %q", tp)
	}
	var serverSpan bool
	for _, s := range spans.GetSpans() {
		if s.Name == "skein.v1.ProducerService/Produce" && s.SpanContext.TraceID().String() == parts[1] {
			serverSpan = true
		}
	}
	if !serverSpan {
		t.Errorf("no gateway Produce span in trace %s", parts[1])
	}
}

func ptr[T any](v T) *T { return &v }

// A pipelined ProduceStream answers every request exactly once, with one
// result per record, even when the client half-closes right after its
// last request: the stream ends only after the last answer is sent.
func TestProduceStreamAnswersEveryRequestOnce(t *testing.T) {
	e := start(t)
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "m", "partitions": 3, "replication_factor": 1}`)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ps, err := skeinv1.NewProducerServiceClient(dialGRPC(t, e.gw.GRPCAddr())).ProduceStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const requests, perRequest = 200, 5
	for corr := uint64(1); corr <= requests; corr++ {
		req := &skeinv1.ProduceStreamRequest{CorrelationId: corr, Topic: "m"}
		for i := 0; i < perRequest; i++ {
			req.Records = append(req.Records, &skeinv1.ProduceRecord{ValueBytes: []byte(fmt.Sprint(corr, "/", i)), Partition: ptr(int32(i % 3))})
		}
		if corr%50 == 0 {
			// A request that fails validation is answered in its turn too.
			req.Acks = ptr[int32](7)
		}
		if err := ps.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	if err := ps.CloseSend(); err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]int{}
	offsets := map[[2]int64]bool{}
	for _, resp := range recvUntilEOF(t, ps) {
		corr := resp.GetCorrelationId()
		seen[corr]++
		if len(resp.GetResults()) != perRequest {
			t.Fatalf("correlation %d: %d results, want %d", corr, len(resp.GetResults()), perRequest)
		}
		for i, r := range resp.GetResults() {
			if corr%50 == 0 {
				if r.GetErrorCode() != skeinv1.ErrorCode_INVALID_REQUIRED_ACKS {
					t.Errorf("correlation %d record %d: %v, want INVALID_REQUIRED_ACKS", corr, i, r)
				}
				continue
			}
			key := [2]int64{int64(r.GetPartition()), r.GetOffset()}
			if r.GetErrorCode() != skeinv1.ErrorCode_NONE || r.GetPartition() != int32(i%3) || offsets[key] {
				t.Errorf("correlation %d record %d: %v (partition %d wanted, offsets once)", corr, i, r, i%3)
			}
			offsets[key] = true
		}
	}
	for corr := uint64(1); corr <= requests; corr++ {
		if seen[corr] != 1 {
			t.Errorf("correlation %d answered %d times, want once", corr, seen[corr])
		}
	}
	if want := (requests - requests/50) * perRequest; len(offsets) != want {
		t.Errorf("%d records written, want %d", len(offsets), want)
	}
}

// recvUntilEOF reads a produce stream's answers until the server ends it.
func recvUntilEOF(t *testing.T, ps skeinv1.ProducerService_ProduceStreamClient) []*skeinv1.ProduceStreamResponse {
	t.Helper()
	var out []*skeinv1.ProduceStreamResponse
	for {
		resp, err := ps.Recv()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, resp)
	}
}

// Shutdown ends open Tail and ProduceStream sessions at once instead of
// waiting out the grace period for callers that never leave.
func TestGracefulShutdownEndsStreams(t *testing.T) {
	cl := clienttest.Start(t, 1)
	coord, _ := cl.StartGroupCoordinator(t, 1)
	g, err := New(Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Controllers: []string{cl.ControllerAddr}, ShutdownGrace: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx) }()
	e := &env{t: t, cluster: cl, gw: g, base: "http://" + g.HTTPAddr()}
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "s", "replication_factor": 1}`)

	conn := dialGRPC(t, g.GRPCAddr())
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	// From offset 0: a tail from the high watermark may be positioned after
	// the produce below is written.
	from := int64(0)
	tail, err := skeinv1.NewConsumerServiceClient(conn).Tail(sctx, &skeinv1.TailRequest{Topic: "s", Offset: &from})
	if err != nil {
		t.Fatal(err)
	}
	ps, err := skeinv1.NewProducerServiceClient(conn).ProduceStream(sctx)
	if err != nil {
		t.Fatal(err)
	}
	v := "v"
	if err := ps.Send(&skeinv1.ProduceStreamRequest{CorrelationId: 1, Topic: "s", Records: []*skeinv1.ProduceRecord{{Value: &v}}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := ps.Recv(); err != nil || resp.GetCorrelationId() != 1 {
		t.Fatalf("first answer %v %v", resp, err)
	}
	if resp, err := tail.Recv(); err != nil || len(resp.GetRecords()) != 1 {
		t.Fatalf("tail %v %v", resp, err)
	}
	consume, err := skeinv1.NewGroupServiceClient(conn).Consume(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := consume.Send(&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Subscribe{Subscribe: &skeinv1.JoinGroupRequest{
		Group: "drained", Topics: []string{"s"}, AutoOffsetReset: "earliest"}}}); err != nil {
		t.Fatal(err)
	}
	for read := false; !read; {
		resp, err := consume.Recv()
		if err != nil {
			t.Fatalf("consume: %v", err)
		}
		read = len(resp.GetRecords().GetRecords()) > 0
	}

	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve waited on open streams")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("shutdown took %v", d)
	}
	// Every stream ends UNAVAILABLE, which tells the client to go on at
	// another gateway: a produce stream's request it did not answer was
	// not written (TestProduceStreamDrainedEndsUnavailable), a tail goes
	// on from its next offset, and a group member (which left the group)
	// subscribes again.
	if _, err := tail.Recv(); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("tail after shutdown: %v, want UNAVAILABLE", err)
	}
	if _, err := ps.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("produce stream after shutdown: %v, want UNAVAILABLE", err)
	}
	if _, err := consume.Recv(); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "left the group") {
		t.Errorf("consume stream after shutdown: %v, want UNAVAILABLE", err)
	}
	if m := coord.Members("drained"); len(m) != 0 {
		t.Errorf("the drained member is still in the group: %v", m)
	}
}

// POST /v1/producers without a transactional id gives an idempotent
// producer a fresh id at epoch 0, another on every call.
func TestInitProducerIdempotent(t *testing.T) {
	e := start(t)
	e.waitReady()
	seen := map[any]bool{}
	for range 3 {
		code, body := e.do("POST", "/v1/producers", `{}`)
		if code != 200 || body["producer_id"] == nil || seen[body["producer_id"]] {
			t.Fatalf("%d %v (seen %v)", code, body, seen)
		}
		if ep, ok := body["producer_epoch"].(float64); ok && ep != 0 {
			t.Fatalf("epoch %v, want 0", ep)
		}
		seen[body["producer_id"]] = true
	}
}

// A producer of Produce calls that no call uses for the idle timeout is
// closed (each is one principal's, acks' and codec's: a gateway with many
// clients would otherwise keep them all), and the next call starts another.
func TestIdleSharedProducersAreClosed(t *testing.T) {
	e := startWith(t, func(c *Config) { c.ProducerIdleTimeout = time.Second })
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "idle", "replication_factor": 1}`)
	shared := func() string {
		_, metrics := get2(t, e.base+"/metrics")
		for _, line := range strings.Split(metrics, "\n") {
			if v, ok := strings.CutPrefix(line, "skein_gateway_shared_producers "); ok {
				return v
			}
		}
		t.Fatal("/metrics lacks skein_gateway_shared_producers")
		return ""
	}
	start := time.Now()
	e.mustDo("POST", "/v1/topics/idle/records", `{"acks": 1, "records": [{"value": "a"}]}`)
	e.mustDo("POST", "/v1/topics/idle/records", `{"acks": -1, "records": [{"value": "b"}]}`)
	if got := shared(); got != "2" && time.Since(start) < 900*time.Millisecond {
		t.Fatalf("%s shared producers after produces with acks 1 and -1, want 2", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for shared() != "0" {
		if time.Now().After(deadline) {
			t.Fatalf("%s shared producers 10 s after the last call, want 0", shared())
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.mustDo("POST", "/v1/topics/idle/records", `{"acks": 1, "records": [{"value": "c"}]}`)
	if got := shared(); got != "1" {
		t.Fatalf("%s shared producers after another produce, want 1", got)
	}
	var fetched struct {
		Records []struct {
			Value string `json:"value"`
		} `json:"records"`
	}
	code, raw := get2(t, e.base+"/v1/topics/idle/partitions/0/records?offset=0")
	if err := json.Unmarshal([]byte(raw), &fetched); err != nil || code != 200 || len(fetched.Records) != 3 || fetched.Records[2].Value != "c" {
		t.Fatalf("after the closes: %d %s", code, raw)
	}
}

// The REST API takes a request as it was sent: one JSON value as its body,
// the method it names, and no state change a browser was led into by a web
// page of another origin. Clients that are not browsers (curl, programs)
// are not affected.
func TestRESTTakesRequestsAsSent(t *testing.T) {
	e := start(t)
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "victim", "partitions": 1, "replication_factor": 1}`)
	send := func(method, path, body string, headers ...string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, e.base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var out map[string]any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: %d, not JSON: %q", method, path, resp.StatusCode, raw)
		}
		return resp.StatusCode, out
	}
	exists := func(topic string) bool {
		code, _ := e.do("GET", "/v1/topics/"+topic, "")
		return code == http.StatusOK
	}
	form := "application/x-www-form-urlencoded"
	for _, tc := range []struct {
		name, method, path, body string
		headers                  []string
		status                   int
	}{
		{"JSON with junk after it", "POST", "/v1/topics", `{"name": "junk"} trailing`, []string{"Content-Type", "application/json"}, 400},
		{"two JSON values", "POST", "/v1/topics", `{"name": "junk"} {"name": "junk2"}`, nil, 400},
		{"a form POST to a GET route", "POST", "/v1/cluster", "x=1", []string{"Content-Type", form}, 405},
		{"a method override to DELETE", "POST", "/v1/topics/victim", "", []string{"Content-Type", form, "X-HTTP-Method-Override", "DELETE"}, 405},
		{"a POST to the event stream", "POST", "/v1/events", "", nil, 405},
		{"a GET of a demo action", "GET", "/v1/console/demo/storage/1/kill", "", nil, 405},
		{"a create from another origin's page", "POST", "/v1/topics", `{"name": "junk"}`, []string{"Content-Type", "text/plain", "Origin", "http://elsewhere.invalid", "Sec-Fetch-Site", "cross-site"}, 403},
		{"a delete from another origin's page", "DELETE", "/v1/topics/victim", "", []string{"Origin", "http://elsewhere.invalid"}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := send(tc.method, tc.path, tc.body, tc.headers...)
			if code != tc.status || body["error_code"] != "INVALID_REQUEST" {
				t.Fatalf("%d %v, want %d INVALID_REQUEST", code, body, tc.status)
			}
			if msg, _ := body["message"].(string); msg == "" {
				t.Errorf("no message in %v", body)
			}
		})
	}
	if exists("junk") || exists("junk2") {
		t.Error("a refused request created a topic")
	}
	if !exists("victim") {
		t.Fatal("a refused request deleted a topic")
	}
	// The console's own page, and curl with its default content type, go
	// through.
	if code, body := send("POST", "/v1/topics", `{"name": "same-origin"}`, "Content-Type", "application/json", "Origin", e.base, "Sec-Fetch-Site", "same-origin"); code != http.StatusOK {
		t.Fatalf("same-origin create: %d %v", code, body)
	}
	if code, body := send("POST", "/v1/topics", `{"name": "from-curl"}`, "Content-Type", form); code != http.StatusOK {
		t.Fatalf("curl's create: %d %v", code, body)
	}
}
