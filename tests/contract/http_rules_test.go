package contract

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"skein/gen/openapi"
	_ "skein/gen/skein/v1"
)

const apiDoc = "../../docs/API.md"

// route is one REST route docs/API.md documents: a heading
//
//	### `METHOD /path` (Service.Method)
//
// followed by the section's text up to the next heading.
type route struct {
	endpoint string // "METHOD /path"
	selector string // "skein.v1.Service.Method"
	body     string // the section below the heading
}

var routeHeading = regexp.MustCompile("^### `(GET|POST|DELETE|PUT|PATCH) (/[^`]*)` \\(([A-Za-z]+\\.[A-Za-z]+)\\)\\s*$")

// loadRoutes reads every route heading of docs/API.md.
func loadRoutes(t *testing.T) []route {
	t.Helper()
	raw, err := os.ReadFile(apiDoc)
	if err != nil {
		t.Fatal(err)
	}
	var out []route
	var cur *route
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "#") {
			if cur != nil {
				out = append(out, *cur)
				cur = nil
			}
			if m := routeHeading.FindStringSubmatch(line); m != nil {
				cur = &route{endpoint: m[1] + " " + m[2], selector: "skein.v1." + m[3]}
			} else if strings.HasPrefix(line, "### `") && strings.Contains(line, " /") {
				t.Errorf("docs/API.md heading %q looks like a route but is not \"### `METHOD /path` (Service.Method)\"", line)
			}
			continue
		}
		if cur != nil {
			cur.body += line + "\n"
		}
	}
	if cur != nil {
		out = append(out, *cur)
	}
	if len(out) == 0 {
		t.Fatalf("docs/API.md documents no route")
	}
	return out
}

type rule struct {
	Selector           string `yaml:"selector"`
	Get                string `yaml:"get"`
	Post               string `yaml:"post"`
	Delete             string `yaml:"delete"`
	Put                string `yaml:"put"`
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
	case r.Put != "":
		return "PUT " + r.Put
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

// The routes of docs/API.md are exactly the REST mapping, each with the RPC
// the mapping names, and every mapped selector is an RPC of the protos.
func TestHTTPRulesMatchAPIDoc(t *testing.T) {
	rules := loadRules(t)
	documented := map[string]bool{}
	for _, r := range loadRoutes(t) {
		if documented[r.endpoint] {
			t.Errorf("docs/API.md documents %s twice", r.endpoint)
		}
		documented[r.endpoint] = true
		sel, ok := rules[r.endpoint]
		switch {
		case !ok:
			t.Errorf("docs/API.md documents %s, which http.yaml does not map", r.endpoint)
		case sel != r.selector:
			t.Errorf("docs/API.md says %s is %s; http.yaml maps it to %s", r.endpoint, r.selector, sel)
		}
	}
	for ep, sel := range rules {
		if !documented[ep] {
			t.Errorf("%s (%s) is mapped in http.yaml but not documented in docs/API.md", ep, sel)
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

var curlLine = regexp.MustCompile(`curl\s[^\n]*`)

// curlMatches reports whether a curl command line calls method on a URL whose
// path fits the route's template ({param} matches one path segment).
func curlMatches(cmd, method, template string) bool {
	m := "GET"
	if x := regexp.MustCompile(`-X\s+([A-Z]+)`).FindStringSubmatch(cmd); x != nil {
		m = x[1]
	}
	if m != method {
		return false
	}
	pat := regexp.QuoteMeta(template)
	pat = regexp.MustCompile(`\\\{[a-z_]+\\\}`).ReplaceAllString(pat, `[^/?'" ]+`)
	return regexp.MustCompile(`https?://[^/\s'"]+` + pat + `([?'"\s]|$)`).MatchString(cmd)
}

// Every documented route has a curl example of that route in its section.
func TestEveryRouteHasACurlExample(t *testing.T) {
	for _, r := range loadRoutes(t) {
		method, path, _ := strings.Cut(r.endpoint, " ")
		found := false
		for _, cmd := range curlLine.FindAllString(strings.ReplaceAll(r.body, "\\\n", " "), -1) {
			if curlMatches(cmd, method, path) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("docs/API.md: the section of %s has no curl example calling it", r.endpoint)
		}
	}
}

func TestCurlMatches(t *testing.T) {
	for _, c := range []struct {
		cmd, method, path string
		want              bool
	}{
		{"curl -s http://localhost:8080/v1/topics/orders", "GET", "/v1/topics/{topic}", true},
		{"curl -s 'http://localhost:8080/v1/topics/orders/offsets?spec=EARLIEST'", "GET", "/v1/topics/{topic}/offsets", true},
		{"curl -s http://localhost:8080/v1/topics/orders/offsets", "GET", "/v1/topics/{topic}", false},
		{"curl -s -X DELETE http://localhost:8080/v1/topics/orders", "GET", "/v1/topics/{topic}", false},
		{"curl -s -X POST http://localhost:8080/v1/transactions/t:commit -d '{}'", "POST", "/v1/transactions/{transactional_id}:commit", true},
		{"curl -s -X POST http://localhost:8080/v1/transactions/t:abort -d '{}'", "POST", "/v1/transactions/{transactional_id}:commit", false},
	} {
		if got := curlMatches(c.cmd, c.method, c.path); got != c.want {
			t.Errorf("curlMatches(%q, %s, %s) = %v, want %v", c.cmd, c.method, c.path, got, c.want)
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

// The generated OpenAPI document describes every documented route.
func TestOpenAPIHasEveryPath(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openapi.JSON, &doc); err != nil {
		t.Fatal(err)
	}
	for _, r := range loadRoutes(t) {
		method, path, _ := strings.Cut(r.endpoint, " ")
		ops, ok := doc.Paths[path]
		if !ok {
			t.Errorf("openapi lacks path %s", path)
			continue
		}
		if _, ok := ops[strings.ToLower(method)]; !ok {
			t.Errorf("openapi lacks %s", r.endpoint)
		}
	}
}
