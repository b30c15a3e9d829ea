package contract

import (
	"encoding/json"
	"os"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"skein/gen/openapi"
	_ "skein/gen/skein/v1"
)

// Every REST endpoint of ../shared/API.md, as "METHOD path".
var apiEndpoints = []string{
	"GET /v1/cluster",
	"POST /v1/topics",
	"GET /v1/topics",
	"GET /v1/topics/{topic}",
	"DELETE /v1/topics/{topic}",
	"POST /v1/topics/{topic}/partitions",
	"POST /v1/topics/{topic}/configs",
	"GET /v1/topics/{topic}/offsets",
	"POST /v1/leaders:elect",
	"POST /v1/topics/{topic}/records",
	"POST /v1/topics/{topic}/partitions/{partition}/records",
	"GET /v1/topics/{topic}/partitions/{partition}/records",
	"POST /v1/groups/{group}/members",
	"POST /v1/groups/{group}/members/{member_id}/heartbeat",
	"POST /v1/groups/{group}/members/{member_id}/records",
	"POST /v1/groups/{group}/offsets",
	"GET /v1/groups/{group}/offsets",
	"DELETE /v1/groups/{group}/members/{member_id}",
	"GET /v1/groups",
	"GET /v1/groups/{group}",
	// Beyond the API document: deleting an empty group, for `skein group delete`.
	"DELETE /v1/groups/{group}",
	"POST /v1/producers",
	"POST /v1/transactions/{transactional_id}/offsets",
	"POST /v1/transactions/{transactional_id}:commit",
	"POST /v1/transactions/{transactional_id}:abort",
}

type rule struct {
	Selector           string `yaml:"selector"`
	Get                string `yaml:"get"`
	Post               string `yaml:"post"`
	Delete             string `yaml:"delete"`
	Body               string `yaml:"body"`
	AdditionalBindings []rule `yaml:"additional_bindings"`
}

func (r rule) endpoint() string {
	switch {
	case r.Get != "":
		return "GET " + r.Get
	case r.Post != "":
		return "POST " + r.Post
	case r.Delete != "":
		return "DELETE " + r.Delete
	}
	return ""
}

func loadRules(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("../../proto/skein/v1/http.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		HTTP struct {
			Rules []rule `yaml:"rules"`
		} `yaml:"http"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{} // endpoint -> selector
	for _, r := range doc.HTTP.Rules {
		for _, b := range append([]rule{r}, r.AdditionalBindings...) {
			ep := b.endpoint()
			if prev, dup := out[ep]; dup {
				t.Errorf("%s mapped twice (%s, %s)", ep, prev, r.Selector)
			}
			out[ep] = r.Selector
		}
	}
	return out
}

func TestHTTPRulesCoverAPI(t *testing.T) {
	rules := loadRules(t)
	for _, ep := range apiEndpoints {
		if _, ok := rules[ep]; !ok {
			t.Errorf("API.md endpoint %s has no REST mapping", ep)
		}
	}
	want := map[string]bool{}
	for _, ep := range apiEndpoints {
		want[ep] = true
	}
	for ep, sel := range rules {
		if !want[ep] {
			t.Errorf("%s (%s) is mapped but not in API.md", ep, sel)
		}
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(sel))
		if err != nil {
			t.Errorf("%s maps to %s, which the protos do not define", ep, sel)
			continue
		}
		if _, ok := d.(protoreflect.MethodDescriptor); !ok {
			t.Errorf("%s is not an RPC", sel)
		}
	}
}

// Every unary RPC of the public services has a REST mapping; only the
// streaming RPCs (ProduceStream, Tail, Consume) are gRPC-only.
func TestEveryUnaryRPCIsMapped(t *testing.T) {
	rules := loadRules(t)
	mapped := map[string]bool{}
	for _, sel := range rules {
		mapped[sel] = true
	}
	var missing []string
	for _, svc := range []string{"AdminService", "ProducerService", "ConsumerService", "GroupService", "TransactionService"} {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName("skein.v1." + svc))
		if err != nil {
			t.Fatalf("service %s: %v", svc, err)
		}
		methods := d.(protoreflect.ServiceDescriptor).Methods()
		for i := 0; i < methods.Len(); i++ {
			m := methods.Get(i)
			if m.IsStreamingClient() || m.IsStreamingServer() {
				continue
			}
			if !mapped[string(m.FullName())] {
				missing = append(missing, string(m.FullName()))
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("unary RPCs without REST mapping: %s", strings.Join(missing, ", "))
	}
}

// The generated OpenAPI document describes the same paths.
func TestOpenAPIHasEveryPath(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openapi.JSON, &doc); err != nil {
		t.Fatal(err)
	}
	for _, ep := range apiEndpoints {
		method, path, _ := strings.Cut(ep, " ")
		ops, ok := doc.Paths[path]
		if !ok {
			t.Errorf("openapi lacks path %s", path)
			continue
		}
		if _, ok := ops[strings.ToLower(method)]; !ok {
			t.Errorf("openapi lacks %s", ep)
		}
	}
}
