package gateway

import (
	"bufio"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "skein/gen/skein/v1"
)

// httpRule is one binding of proto/skein/v1/http.yaml.
type httpRule struct {
	selector, method, path, body string
}

var (
	ruleSelector = regexp.MustCompile(`^\s*- selector: (\S+)$`)
	ruleBinding  = regexp.MustCompile(`^\s*(?:- )?(get|post|put|delete|patch): (\S+)$`)
	ruleBody     = regexp.MustCompile(`^\s*body: "?([^"]*)"?$`)
	pathVariable = regexp.MustCompile(`\{([A-Za-z0-9_.]+)\}`)
)

// readHTTPRules reads every binding of http.yaml, additional ones included
// (each under its rule's selector).
func readHTTPRules(t *testing.T) []httpRule {
	t.Helper()
	f, err := os.Open("../../../../proto/skein/v1/http.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []httpRule
	selector := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case ruleSelector.MatchString(line):
			selector = ruleSelector.FindStringSubmatch(line)[1]
		case ruleBinding.MatchString(line):
			m := ruleBinding.FindStringSubmatch(line)
			out = append(out, httpRule{selector: selector, method: strings.ToUpper(m[1]), path: m[2]})
		case ruleBody.MatchString(line) && len(out) > 0:
			out[len(out)-1].body = ruleBody.FindStringSubmatch(line)[1]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) < 30 {
		t.Fatalf("read %d bindings from http.yaml; the file's layout changed", len(out))
	}
	return out
}

// queryRoutes is what http.yaml and the protos say: a route without a body
// whose request has a field its path does not fill takes that field from
// the query; grpc-gateway reads no query for any other.
func TestQueryRoutesAreTheRoutesWithQueryFields(t *testing.T) {
	want := map[string]bool{}
	for _, r := range readHTTPRules(t) {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(r.selector))
		if err != nil {
			t.Fatalf("%s: %v", r.selector, err)
		}
		md, ok := d.(protoreflect.MethodDescriptor)
		if !ok {
			t.Fatalf("%s is not an RPC", r.selector)
		}
		if r.body != "" {
			continue
		}
		inPath := map[string]bool{}
		for _, m := range pathVariable.FindAllStringSubmatch(r.path, -1) {
			inPath[m[1]] = true
		}
		fields := md.Input().Fields()
		for i := range fields.Len() {
			if !inPath[string(fields.Get(i).Name())] {
				want[r.method+" "+r.path] = true
				break
			}
		}
	}
	if got := slices.Sorted(maps.Keys(queryRoutes)); !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
		t.Errorf("queryRoutes = %q,\nhttp.yaml and the protos say %q", got, slices.Sorted(maps.Keys(want)))
	}
}

// A query parameter on a route that takes none is refused before the call:
// nothing is written, nothing deleted.
func TestQueryOnABodyRouteChangesNothing(t *testing.T) {
	e := start(t)
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "t", "replication_factor": 1}`)
	if code, body := e.do("POST", "/v1/topics/t/records?acks=0", `{"records": [{"value": "v"}]}`); code != 400 || !strings.Contains(body["message"].(string), `"acks"`) {
		t.Fatalf("produce with ?acks=0: %d %v", code, body)
	}
	if code, body := e.do("DELETE", "/v1/topics/t?force=true", ""); code != 400 {
		t.Fatalf("delete with ?force=true: %d %v", code, body)
	}
	out := e.mustDo("GET", "/v1/topics/t", "")
	parts := out["partitions"].([]any)
	if hw := parts[0].(map[string]any)["high_watermark"]; hw != "0" {
		t.Errorf("high watermark %v after a refused produce, want 0", hw)
	}
	res := e.mustDo("POST", "/v1/topics/t/records", `{"records": [{"value": "v"}]}`)["results"].([]any)
	if off := res[0].(map[string]any)["offset"]; off != "0" {
		t.Errorf("the first accepted record at offset %v, want 0", off)
	}
}
