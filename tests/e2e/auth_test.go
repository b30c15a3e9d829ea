//go:build integration

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	skeinv1 "skein/gen/skein/v1"
)

// checkAuth runs against a `skein dev --secure` cluster, whose gateway
// requires a principal: without credentials REST is 401 and gRPC
// UNAUTHENTICATED, both SASL_AUTHENTICATION_FAILED; the dev token (User:dev)
// is refused by the authorizer with 403 until the client certificate's
// principal, the super user, adds ACLs for it, then served; the gateway logs
// the refusals and audits admin calls with their principal. The topic
// "secure" exists already.
func checkAuth(t *testing.T, d *Dev, sec *secureFiles, caOnly, withCert *tls.Config) {
	t.Helper()
	if sec.DevToken == "" {
		t.Fatal("cluster.json names no dev token")
	}
	plain := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: caOnly}}
	certed := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: withCert}}
	call := func(hc *http.Client, method, path, token string, body any) (int, map[string]any) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, d.BaseURL+path, rd)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	produce := map[string]any{"records": []map[string]any{{"value": "authenticated"}}}
	create := map[string]any{"name": "auth-topic", "partitions": 1, "replication_factor": 3}
	for _, tc := range []struct {
		name, token, msg string
	}{
		{"no credentials", "", "authentication required"},
		{"unknown token", "not-a-token", "unknown bearer token"},
		{"a JWT (the dev cluster takes none)", "a.b.c", "takes no JWTs"},
	} {
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{"POST", "/v1/topics", create},
			{"POST", "/v1/topics/secure/partitions/0/records", produce},
			{"GET", "/v1/topics/secure/partitions/0/records?offset=0", nil},
		} {
			code, out := call(plain, c.method, c.path, tc.token, c.body)
			if code != http.StatusUnauthorized || out["error_code"] != "SASL_AUTHENTICATION_FAILED" || !strings.Contains(out["message"].(string), tc.msg) {
				t.Errorf("%s: %s %s: %d %v, want 401 SASL_AUTHENTICATION_FAILED saying %q", tc.name, c.method, c.path, code, out, tc.msg)
			}
		}
	}
	// The dev token, without a client certificate: User:dev is
	// authenticated, but the gateway's authorizer (skein dev --secure turns
	// it on) finds no ACL allowing it anything.
	join := map[string]any{"topics": []string{"secure"}}
	for _, c := range []struct {
		method, path string
		body         any
		row          string
	}{
		{"POST", "/v1/topics", create, "TOPIC_AUTHORIZATION_FAILED"},
		{"POST", "/v1/topics/secure/partitions/0/records", produce, "TOPIC_AUTHORIZATION_FAILED"},
		{"GET", "/v1/topics/secure/partitions/0/records?offset=0", nil, "TOPIC_AUTHORIZATION_FAILED"},
		{"POST", "/v1/groups/dev-group/members", join, "GROUP_AUTHORIZATION_FAILED"},
		{"POST", "/v1/acls", map[string]any{"acls": []map[string]any{{"principal": "User:dev", "resource_type": "cluster", "operation": "all"}}}, "CLUSTER_AUTHORIZATION_FAILED"},
	} {
		code, out := call(plain, c.method, c.path, sec.DevToken, c.body)
		if code != http.StatusForbidden || out["error_code"] != c.row || !strings.Contains(fmt.Sprint(out["message"]), "User:dev may not") {
			t.Errorf("dev token without ACLs: %s %s: %d %v, want 403 %s", c.method, c.path, code, out, c.row)
		}
	}
	// The client certificate's principal, the super user, grants User:dev
	// what it needs over REST; an unknown operation is refused whole.
	grant := map[string]any{"acls": []map[string]any{
		{"principal": "User:dev", "resource_type": "topic", "resource_name": "auth-", "pattern_type": "prefixed", "operation": "create"},
		{"principal": "User:dev", "resource_type": "topic", "resource_name": "secure", "operation": "write"},
		{"principal": "User:dev", "resource_type": "topic", "resource_name": "secure", "operation": "read"},
		{"principal": "User:dev", "resource_type": "group", "resource_name": "dev-group", "operation": "read"},
	}}
	if code, out := call(certed, "POST", "/v1/acls", "", grant); code != http.StatusOK || len(out["acls"].([]any)) != 4 {
		t.Fatalf("the super user adds ACLs: %d %v", code, out)
	}
	bad := map[string]any{"acls": []map[string]any{{"principal": "User:dev", "resource_type": "topic", "resource_name": "secure", "operation": "obliterate"}}}
	if code, out := call(certed, "POST", "/v1/acls", "", bad); code != http.StatusBadRequest || out["error_code"] != "INVALID_REQUEST" || !strings.Contains(fmt.Sprint(out["message"]), `unknown operation "obliterate"`) {
		t.Errorf("an ACL with an unknown operation: %d %v, want 400 INVALID_REQUEST", code, out)
	}
	// A binding no call could ever match (a deny that would do nothing)
	// is refused, not stored.
	for _, b := range []struct {
		binding map[string]any
		says    string
	}{
		{map[string]any{"principal": "User:dev", "resource_type": "group", "resource_name": "dev-group", "operation": "write", "permission": "deny"}, "does not apply to a group"},
		{map[string]any{"principal": "user:dev", "resource_type": "topic", "resource_name": "secure", "operation": "read", "permission": "deny"}, "the principal type is User"},
	} {
		code, out := call(certed, "POST", "/v1/acls", "", map[string]any{"acls": []map[string]any{b.binding}})
		if code != http.StatusBadRequest || out["error_code"] != "INVALID_REQUEST" || !strings.Contains(fmt.Sprint(out["message"]), b.says) {
			t.Errorf("the ACL %v: %d %v, want 400 INVALID_REQUEST saying %q", b.binding, code, out, b.says)
		}
	}
	if code, out := call(certed, "GET", "/v1/acls?principal=User:dev", "", nil); code != http.StatusOK || len(out["acls"].([]any)) != 4 {
		t.Errorf("the ACLs of User:dev: %d %v", code, out)
	}
	// Now the same calls as User:dev are served.
	if code, out := call(plain, "POST", "/v1/topics", sec.DevToken, create); code != http.StatusOK {
		t.Errorf("create with the dev token: %d %v", code, out)
	}
	if code, out := call(plain, "POST", "/v1/topics/secure/partitions/0/records", sec.DevToken, produce); code != http.StatusOK {
		t.Errorf("produce with the dev token: %d %v", code, out)
	}
	if code, out := call(plain, "GET", "/v1/topics/secure/partitions/0/records?offset=0", sec.DevToken, nil); code != http.StatusOK {
		t.Errorf("fetch with the dev token: %d %v", code, out)
	}
	if code, out := call(plain, "POST", "/v1/groups/dev-group/members", sec.DevToken, join); code != http.StatusOK || out["member_id"] == "" {
		t.Errorf("group join with the dev token: %d %v", code, out)
	} else {
		call(plain, "DELETE", "/v1/groups/dev-group/members/"+fmt.Sprint(out["member_id"]), sec.DevToken, nil)
	}
	// A nack dead-letters a record and commits past it: read on the group
	// does not reach a topic User:dev may not read (auth-topic, which it
	// created, or one that does not exist), and the answer does not tell
	// the two apart.
	for _, topic := range []string{"auth-topic", "auth-no-such-topic"} {
		nack := map[string]any{"member_epoch": 1, "topic": topic, "partition": 0, "offset": 0, "reason": "x"}
		if code, out := call(plain, "POST", "/v1/groups/dev-group/members/nobody/nack", sec.DevToken, nack); code != http.StatusForbidden ||
			out["error_code"] != "TOPIC_AUTHORIZATION_FAILED" {
			t.Errorf("nack of a record of %s without read on it: %d %v, want 403 TOPIC_AUTHORIZATION_FAILED", topic, code, out)
		}
	}
	// The client certificate, without a token.
	if code, out := call(certed, "GET", "/v1/topics/auth-topic", "", nil); code != http.StatusOK {
		t.Errorf("describe with the client certificate: %d %v", code, out)
	}

	// gRPC: the same three ways.
	grpcList := func(tc *tls.Config, md metadata.MD) error {
		cc, err := grpc.NewClient(d.GRPCAddr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
		if err != nil {
			return err
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = skeinv1.NewAdminServiceClient(cc).ListTopics(metadata.NewOutgoingContext(ctx, md), &skeinv1.ListTopicsRequest{})
		return err
	}
	if err := grpcList(caOnly, nil); status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "authentication required") {
		t.Errorf("gRPC without credentials: %v, want UNAUTHENTICATED", err)
	}
	if err := grpcList(caOnly, metadata.Pairs("authorization", "Bearer "+sec.DevToken)); err != nil {
		t.Errorf("gRPC with the dev token: %v", err)
	}
	if err := grpcList(withCert, nil); err != nil {
		t.Errorf("gRPC with the client certificate: %v", err)
	}

	// The gateway's log: refusals and admin calls with their principal.
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(d.Dir, "logs", "gateway-1.log"))
		hasLine := func(parts ...string) bool {
			for _, line := range strings.Split(string(b), "\n") {
				all := true
				for _, p := range parts {
					all = all && strings.Contains(line, p)
				}
				if all {
					return true
				}
			}
			return false
		}
		ok := hasLine(`"msg":"call refused"`, `"principal":"User:ANONYMOUS"`, `"error_code":"SASL_AUTHENTICATION_FAILED"`, `"node_id":1`) &&
			hasLine(`"msg":"audit"`, `"principal":"User:dev"`, `"operation":"/skein.v1.AdminService/CreateTopic"`, `"resource":"topic:auth-topic"`) &&
			hasLine(`"msg":"audit"`, `"principal":"User:client"`) &&
			hasLine(`"msg":"call denied"`, `"principal":"User:dev"`, `"resource":"topic:secure"`, `"acl_operation":"write"`, `"error_code":"TOPIC_AUTHORIZATION_FAILED"`)
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the gateway's log lacks the refusals or the audit lines:\n%s", tailLines(b, 30))
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
}
