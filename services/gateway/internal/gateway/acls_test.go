package gateway

import (
	"net/http"
	"strings"
	"testing"
)

func TestAclsOverREST(t *testing.T) {
	e := start(t)
	e.waitReady()
	created := e.mustDo("POST", "/v1/acls", `{"acls": [
		{"principal": "User:bob", "resource_type": "topic", "resource_name": "orders", "operation": "Read"},
		{"principal": "User:bob", "resource_type": "group", "resource_name": "billing-", "pattern_type": "prefixed", "operation": "read"},
		{"principal": "User:ops", "resource_type": "cluster", "operation": "alter", "permission": "deny"}]}`)
	acls := created["acls"].([]any)
	if len(acls) != 3 {
		t.Fatalf("created %v", created)
	}
	if a := acls[0].(map[string]any); a["operation"] != "read" || a["pattern_type"] != "literal" || a["permission"] != "allow" {
		t.Errorf("defaults not filled in: %v", a)
	}
	if a := acls[2].(map[string]any); a["resource_name"] != "skein-cluster" || a["permission"] != "deny" {
		t.Errorf("cluster binding %v", a)
	}

	if got := e.mustDo("GET", "/v1/acls", "")["acls"].([]any); len(got) != 3 {
		t.Errorf("describe all: %v", got)
	}
	if got := e.mustDo("GET", "/v1/acls?principal=User:bob&resource_type=group", "")["acls"].([]any); len(got) != 1 || got[0].(map[string]any)["resource_name"] != "billing-" {
		t.Errorf("describe bob's groups: %v", got)
	}

	for _, tc := range []struct{ method, path, body, msg string }{
		{"POST", "/v1/acls", `{"acls": [{"principal": "User:bob", "resource_type": "topic", "resource_name": "t", "operation": "fly"}]}`, `unknown operation "fly"`},
		{"POST", "/v1/acls", `{"acls": [{"principal": "User:bob", "resource_type": "queue", "resource_name": "t", "operation": "read"}]}`, `unknown resource type "queue"`},
		{"POST", "/v1/acls", `{"acls": [{"principal": "User:bob", "resource_type": "topic", "resource_name": "t", "pattern_type": "glob", "operation": "read"}]}`, `unknown pattern type "glob"`},
		{"POST", "/v1/acls", `{"acls": [{"principal": "bob", "resource_type": "topic", "resource_name": "t", "operation": "read"}]}`, `want Type:name`},
		{"POST", "/v1/acls", `{"acls": []}`, `no ACL bindings`},
		{"GET", "/v1/acls?operation=fly", "", `unknown operation "fly"`},
		{"DELETE", "/v1/acls?resource_type=queue", "", `unknown resource type "queue"`},
		{"DELETE", "/v1/acls", "", `empty filter`},
	} {
		code, out := e.do(tc.method, tc.path, tc.body)
		if code != http.StatusBadRequest || out["error_code"] != "INVALID_REQUEST" || !strings.Contains(out["message"].(string), tc.msg) {
			t.Errorf("%s %s %s: %d %v, want 400 INVALID_REQUEST with %q", tc.method, tc.path, tc.body, code, out, tc.msg)
		}
	}
	// A refused request added nothing.
	if got := e.mustDo("GET", "/v1/acls", "")["acls"].([]any); len(got) != 3 {
		t.Errorf("after refusals: %v", got)
	}

	del := e.mustDo("DELETE", "/v1/acls?principal=User:bob", "")
	if d := del["deleted"].([]any); len(d) != 2 {
		t.Errorf("deleted %v", del)
	}
	if got := e.mustDo("GET", "/v1/acls", "")["acls"].([]any); len(got) != 1 || got[0].(map[string]any)["principal"] != "User:ops" {
		t.Errorf("after delete: %v", got)
	}
}
