package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
	"skein/libs/errs"
	skeinmeta "skein/libs/metadata"
	"skein/libs/rpcerr"
	"skein/services/gateway/internal/authn"
)

// syncBuffer is a log sink tests read while the gateway writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var jwtKey = []byte("a test key of at least sixteen bytes")

// startAuth runs a gateway that requires a principal and takes the token
// "dev-token" (User:dev) and JWTs signed with jwtKey.
func startAuth(t *testing.T) (*env, *syncBuffer) {
	t.Helper()
	dir := t.TempDir()
	tf, kf := filepath.Join(dir, "tokens"), filepath.Join(dir, "jwt.key")
	if err := os.WriteFile(tf, []byte("dev-token User:dev\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kf, jwtKey, 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := authn.NewVerifier(authn.Config{TokenFile: tf, JWTKeyFile: kf})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	e := startWith(t, func(c *Config) {
		c.Auth, c.AuthRequired = v, true
		c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	e.waitReady()
	return e, logs
}

// call sends a REST request with the given headers.
func (e *env) call(method, path, body string, headers map[string]string) (int, map[string]any, http.Header) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.base+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out, resp.Header
}

func TestRESTAuthentication(t *testing.T) {
	e, logs := startAuth(t)
	expired, err := authn.SignJWT(map[string]any{"sub": "carol", "exp": time.Now().Add(-time.Minute).Unix()}, jwtKey)
	if err != nil {
		t.Fatal(err)
	}
	good, err := authn.SignJWT(map[string]any{"sub": "carol", "exp": time.Now().Add(time.Hour).Unix()}, jwtKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		headers map[string]string
		msgHas  string
	}{
		{"no credentials", nil, "authentication required"},
		{"unknown token", map[string]string{"Authorization": "Bearer nope"}, "unknown bearer token"},
		{"expired JWT", map[string]string{"Authorization": "Bearer " + expired}, "JWT: expired at"},
		{"malformed JWT", map[string]string{"Authorization": "Bearer a.b.c"}, "JWT: malformed"},
		{"basic auth", map[string]string{"Authorization": "Basic eDp5"}, "must be \"Bearer <token>\""},
		// The principal header of the in-memory hop, sent from outside in
		// every form grpc-gateway would forward.
		{"forged metadata header", map[string]string{"Grpc-Metadata-Skein-Principal": "User:admin"}, "authentication required"},
		{"forged lower-case header", map[string]string{"grpc-metadata-skein-principal": "User:admin"}, "authentication required"},
		{"forged bare header", map[string]string{"Skein-Principal": "User:admin"}, "authentication required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, h := e.call("GET", "/v1/topics", "", tc.headers)
			if code != http.StatusUnauthorized || out["error_code"] != "SASL_AUTHENTICATION_FAILED" || out["code"] != float64(codes.Unauthenticated) {
				t.Fatalf("got %d %v, want 401 SASL_AUTHENTICATION_FAILED", code, out)
			}
			if msg, _ := out["message"].(string); !strings.Contains(msg, tc.msgHas) {
				t.Fatalf("message %q does not say %q", msg, tc.msgHas)
			}
			if h.Get("WWW-Authenticate") == "" {
				t.Fatal("no WWW-Authenticate header")
			}
		})
	}
	if !strings.Contains(logs.String(), `"msg":"call refused"`) {
		t.Errorf("no refusal in the log:\n%s", logs.String())
	}
	// Two Authorization headers are refused, whichever comes first: a
	// token that does not verify may not ride beside one that does.
	for _, pair := range [][2]string{{"Bearer dev-token", "Bearer nope"}, {"Bearer nope", "Bearer dev-token"}, {"Bearer dev-token", "Bearer dev-token"}} {
		req, err := http.NewRequest("GET", e.base+"/v1/topics", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Add("Authorization", pair[0])
		req.Header.Add("Authorization", pair[1])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || out["error_code"] != "SASL_AUTHENTICATION_FAILED" || !strings.Contains(fmt.Sprint(out["message"]), "2 Authorization headers") {
			t.Errorf("Authorization %q then %q: %d %v, want 401 SASL_AUTHENTICATION_FAILED", pair[0], pair[1], resp.StatusCode, out)
		}
	}

	// Probes stay open.
	if code, _, _ := e.call("GET", "/healthz", "", nil); code != http.StatusOK {
		t.Errorf("/healthz without credentials: %d", code)
	}

	// A token: the call goes through, and its principal crosses the
	// in-memory hop into the admin audit line and the call's span.
	for _, tok := range []struct{ header, principal string }{{"Bearer dev-token", "User:dev"}, {"Bearer " + good, "User:carol"}} {
		spans.Reset()
		code, out, _ := e.call("GET", "/v1/topics", "", map[string]string{"Authorization": tok.header, "Grpc-Metadata-Skein-Principal": "User:admin"})
		if code != http.StatusOK {
			t.Fatalf("%s: %d %v", tok.principal, code, out)
		}
		if !strings.Contains(logs.String(), `"msg":"audit","principal":"`+tok.principal+`","operation":"/skein.v1.AdminService/ListTopics"`) {
			t.Errorf("no audit line for %s:\n%s", tok.principal, logs.String())
		}
		if strings.Contains(logs.String(), "User:admin") {
			t.Errorf("a forged principal reached the gateway:\n%s", logs.String())
		}
		if !spanHasPrincipal(tok.principal) {
			t.Errorf("no span carries skein.principal=%s", tok.principal)
		}
	}
}

func spanHasPrincipal(p string) bool {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range spans.GetSpans() {
			for _, a := range s.Attributes {
				if a.Key == "skein.principal" && a.Value.AsString() == p {
					return true
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func TestGRPCAuthentication(t *testing.T) {
	e, logs := startAuth(t)
	cc, err := grpc.NewClient(e.gw.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	admin := skeinv1.NewAdminServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		md   metadata.MD
	}{
		{"no credentials", nil},
		{"unknown token", metadata.Pairs("authorization", "Bearer nope")},
		{"a good token, then an unknown one", metadata.Pairs("authorization", "Bearer dev-token", "authorization", "Bearer nope")},
		{"an unknown token, then a good one", metadata.Pairs("authorization", "Bearer nope", "authorization", "Bearer dev-token")},
		// Only the in-memory hop may carry a principal.
		{"forged principal", metadata.Pairs(principalMD, "User:admin")},
	} {
		_, err := admin.ListTopics(metadata.NewOutgoingContext(ctx, tc.md), &skeinv1.ListTopicsRequest{})
		if status.Code(err) != codes.Unauthenticated || errs.Of(rpcerr.FromStatus(err)) != errs.SaslAuthenticationFailed {
			t.Errorf("%s: %v, want UNAUTHENTICATED SASL_AUTHENTICATION_FAILED", tc.name, err)
		}
	}
	if _, err := admin.ListTopics(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer dev-token"), &skeinv1.ListTopicsRequest{}); err != nil {
		t.Fatalf("with the token: %v", err)
	}
	if !strings.Contains(logs.String(), `"principal":"User:dev"`) {
		t.Errorf("no audit line for User:dev:\n%s", logs.String())
	}
	// A stream is checked too.
	tail, err := skeinv1.NewConsumerServiceClient(cc).Tail(ctx, &skeinv1.TailRequest{Topic: "t"})
	if err == nil {
		_, err = tail.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("Tail without credentials: %v", err)
	}
	// Health stays open.
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health without credentials: %v", err)
	}
}

// Without --auth-required, a caller without credentials is served and bad
// credentials are still refused.
func TestAuthOptional(t *testing.T) {
	logs := &syncBuffer{}
	e := startWith(t, func(c *Config) { c.Logger = slog.New(slog.NewJSONHandler(logs, nil)) })
	e.waitReady()
	if code, out, _ := e.call("GET", "/v1/topics", "", nil); code != http.StatusOK {
		t.Fatalf("no credentials, auth optional: %d %v", code, out)
	}
	// A caller without credentials cannot name itself through the
	// in-memory hop's metadata, in any form grpc-gateway forwards.
	for _, h := range []string{"Grpc-Metadata-Skein-Principal", "grpc-metadata-skein-principal", "Skein-Principal"} {
		if code, out, _ := e.call("GET", "/v1/topics", "", map[string]string{h: "User:admin"}); code != http.StatusOK {
			t.Fatalf("%s: %d %v", h, code, out)
		}
	}
	if l := logs.String(); strings.Contains(l, "User:admin") || !strings.Contains(l, `"principal":"User:ANONYMOUS"`) {
		t.Fatalf("a forged principal header reached the gateway:\n%s", l)
	}
	if code, out, _ := e.call("GET", "/v1/topics", "", map[string]string{"Authorization": "Bearer x"}); code != http.StatusUnauthorized || !strings.Contains(out["message"].(string), "accepts no bearer tokens") {
		t.Fatalf("a token at a gateway without token sources: %d %v", code, out)
	}
}

// The HTTP side drops the headers that name the in-memory hop's principal
// before anything routes the request, whatever grpc-gateway's header
// matcher would forward.
func TestWrapHTTPDropsPrincipalHeaders(t *testing.T) {
	a := &auth{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var seen http.Header
	var principal authn.Principal
	h := a.wrapHTTP(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		seen, principal = r.Header.Clone(), principalFrom(r.Context())
	}))
	r := httptest.NewRequest("GET", "/v1/topics", nil)
	r.Header.Set("Grpc-Metadata-Skein-Principal", "User:admin")
	r.Header.Set("skein-principal", "User:admin")
	r.Header.Set("Grpc-Metadata-Skein-Principal-Bin", "VXNlcjphZG1pbg")
	r.Header.Set("skein-principal-bin", "VXNlcjphZG1pbg")
	r.Header.Set("X-Other", "kept")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if seen.Get("Grpc-Metadata-Skein-Principal") != "" || seen.Get("Skein-Principal") != "" || seen.Get("Grpc-Metadata-Skein-Principal-Bin") != "" ||
		seen.Get("Skein-Principal-Bin") != "" || seen.Get("X-Other") != "kept" {
		t.Fatalf("headers after the auth wrapper: %v", seen)
	}
	if principal != "" {
		t.Fatalf("principal %q from headers", principal)
	}
	if md := principalMetadata(context.Background(), r); md != nil {
		t.Fatalf("metadata for a caller without a principal: %v", md)
	}
}

// Each call the gateway makes for a caller names the caller, so storage
// nodes authorize it as the caller's: a unary produce, a pipelined stream
// and a fetch, for two principals whose batches never share a request.
func TestGatewayNamesTheCallerToStorage(t *testing.T) {
	e, _ := startAuth(t)
	carol, err := authn.SignJWT(map[string]any{"sub": "carol", "exp": time.Now().Add(time.Hour).Unix()}, jwtKey)
	if err != nil {
		t.Fatal(err)
	}
	dev := map[string]string{"Authorization": "Bearer dev-token"}
	if code, out, _ := e.call("POST", "/v1/topics", `{"name": "named", "partitions": 1, "replication_factor": 1}`, dev); code != http.StatusOK {
		t.Fatalf("create: %d %v", code, out)
	}
	// A name beyond ASCII is a principal like any other, on every hop.
	jose, err := authn.SignJWT(map[string]any{"sub": "josé", "exp": time.Now().Add(time.Hour).Unix()}, jwtKey)
	if err != nil {
		t.Fatal(err)
	}
	if code, out, _ := e.call("GET", "/v1/topics/named/partitions/0/records?offset=0", "", map[string]string{"Authorization": "Bearer " + jose}); code != http.StatusOK {
		t.Fatalf("fetch as josé: %d %v", code, out)
	}
	for _, h := range []map[string]string{dev, {"Authorization": "Bearer " + carol}} {
		if code, out, _ := e.call("POST", "/v1/topics/named/records", `{"records": [{"value": "dg=="}]}`, h); code != http.StatusOK {
			t.Fatalf("produce: %d %v", code, out)
		}
	}
	if code, out, _ := e.call("GET", "/v1/topics/named/partitions/0/records?offset=0", "", dev); code != http.StatusOK {
		t.Fatalf("fetch: %d %v", code, out)
	}

	cc, err := grpc.NewClient(e.gw.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+carol), 10*time.Second)
	defer cancel()
	stream, err := skeinv1.NewProducerServiceClient(cc).ProduceStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&skeinv1.ProduceStreamRequest{CorrelationId: 1, Topic: "named", Records: []*skeinv1.ProduceRecord{{ValueBytes: []byte("s")}}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || resp.GetResults()[0].GetErrorCode() != skeinv1.ErrorCode_NONE {
		t.Fatalf("stream produce: %v %v", resp, err)
	}
	stream.CloseSend()

	named := map[string]int{}
	for _, s := range e.cluster.Storage {
		for k, n := range s.Named() {
			named[k] += n
		}
	}
	for _, want := range []string{"produce:User:dev", "produce:User:carol", "fetch:User:dev", "fetch:User:josé"} {
		if named[want] == 0 {
			t.Errorf("no storage node saw %s; saw %v", want, named)
		}
	}
	if named["produce:User:carol"] < 2 {
		t.Errorf("carol's unary and stream produces named her %d times, want 2; saw %v", named["produce:User:carol"], named)
	}
}

// Under --authorizer the console's event stream needs cluster describe and
// its demo actions cluster alter; a super user has both.
func TestConsoleRoutesAreAuthorized(t *testing.T) {
	dir := t.TempDir()
	tf := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tf, []byte("dev-token User:dev\nroot-token User:root\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := authn.NewVerifier(authn.Config{TokenFile: tf})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	e := startWith(t, func(c *Config) {
		c.Auth, c.AuthRequired = v, true
		c.Authorizer, c.SuperUsers = true, map[string]bool{"User:root": true}
		c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	e.waitReady()
	for _, c := range []struct{ method, path, acl string }{
		{"GET", "/v1/events", "describe"},
		{"GET", "/v1/console/demo", "describe"},
		{"POST", "/v1/console/demo/storage/1/pause", "alter"},
	} {
		code, out, _ := e.call(c.method, c.path, "", map[string]string{"Authorization": "Bearer dev-token"})
		if code != http.StatusForbidden || out["error_code"] != "CLUSTER_AUTHORIZATION_FAILED" || !strings.Contains(fmt.Sprint(out["message"]), "User:dev may not "+c.acl+" the cluster") {
			t.Errorf("User:dev %s %s: %d %v, want 403 CLUSTER_AUTHORIZATION_FAILED", c.method, c.path, code, out)
		}
	}
	if !strings.Contains(logs.String(), `"msg":"call denied","principal":"User:dev","operation":"POST /v1/console/demo/storage/1/pause"`) {
		t.Errorf("no denial logged:\n%s", logs.String())
	}
	// The super user: the demos answer (off here: 403 from the demo route
	// itself, not the authorizer), and the event stream opens.
	if code, out, _ := e.call("GET", "/v1/console/demo", "", map[string]string{"Authorization": "Bearer root-token"}); code != http.StatusOK {
		t.Errorf("super user, demo status: %d %v", code, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.base+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer root-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Errorf("super user, event stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// A gRPC stream ends once the credentials it opened with no longer verify:
// a ProduceStream whose token was taken out of the token file has its
// next request refused with UNAUTHENTICATED.
func TestGRPCStreamEndsWhenItsTokenIsRevoked(t *testing.T) {
	e := startTokenAuth(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.gw.Client().CreateTopic(ctx, client.TopicSpec{Name: "s", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	// Created by the controllers; produced to once the gateway's metadata
	// holds it.
	if _, err := e.gw.Client().WaitMetadata(ctx, func(m *skeinmeta.Image) bool { return m.PartitionCount("s") == 1 }); err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(e.gw.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	// Over plaintext the token rides as metadata (the CLI insists on TLS;
	// the gateway does not).
	sctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer dev-token")
	stream, err := skeinv1.NewProducerServiceClient(cc).ProduceStream(sctx)
	if err != nil {
		t.Fatal(err)
	}
	send := func(id uint64) (*skeinv1.ProduceStreamResponse, error) {
		if err := stream.Send(&skeinv1.ProduceStreamRequest{CorrelationId: id, Topic: "s", Records: []*skeinv1.ProduceRecord{{ValueBytes: []byte("v")}}}); err != nil {
			return nil, err
		}
		return stream.Recv()
	}
	for id := uint64(1); id <= 2; id++ {
		if resp, err := send(id); err != nil || resp.GetResults()[0].GetErrorCode() != skeinv1.ErrorCode_NONE {
			t.Fatalf("produce %d with a good token: %v %v", id, resp, err)
		}
	}
	e.revokeDevToken(t)
	time.Sleep(1100 * time.Millisecond) // the stream checks at most once a second
	_, err = send(3)
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "unknown bearer token") {
		t.Fatalf("produce after the token was removed: %v, want UNAUTHENTICATED", err)
	}
}
