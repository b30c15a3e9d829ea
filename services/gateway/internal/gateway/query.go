package gateway

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
)

// strictQueryParser is grpc-gateway's query parser, except that a query
// parameter naming no field of the request is refused: the default ignores
// it, so a misspelt ?offest=5 read from offset 0 and a ?partition=5 the
// route does not take answered every partition.
type strictQueryParser struct{ runtime.DefaultQueryParser }

// mapEntryKey is a map field's entry in a query: field[key].
var mapEntryKey = regexp.MustCompile(`^(.*)\[(.*)\]$`)

func (p *strictQueryParser) Parse(msg proto.Message, values url.Values, filter *utilities.DoubleArray) error {
	for key := range values {
		name := key
		if m := mapEntryKey.FindStringSubmatch(key); m != nil {
			name = m[1]
		}
		path, ok := fieldPath(msg.ProtoReflect().Descriptor(), strings.Split(name, "."))
		if !ok {
			return fmt.Errorf("unknown query parameter %q", key)
		}
		// A field the path fills: the default parser drops it, so a
		// DELETE /v1/groups/a/offsets?group=b would act on a without a
		// word.
		if filter != nil && filter.HasCommonPrefix(path) {
			return fmt.Errorf("query parameter %q names what the path gives (%s)", key, strings.Join(path, "."))
		}
	}
	if err := p.DefaultQueryParser.Parse(msg, values, filter); err != nil {
		return err
	}
	// A lookup by time names the time: protobuf reads a missing one as 0,
	// which would answer each partition's first offset as if asked for it.
	if r, ok := msg.(*skeinv1.ListOffsetsRequest); ok && r.GetSpec() == skeinv1.OffsetSpec_TIMESTAMP && !values.Has("timestamp_ms") && !values.Has("timestampMs") {
		return fmt.Errorf("spec TIMESTAMP needs timestamp_ms: the time, in milliseconds since the epoch, to find the first offset at or after")
	}
	return nil
}

// fieldPath answers the proto names of the field path names (field names,
// proto or JSON, one per level of nested messages), and whether it names a
// field of md.
func fieldPath(md protoreflect.MessageDescriptor, path []string) ([]string, bool) {
	out := make([]string, 0, len(path))
	for i, name := range path {
		fields := md.Fields()
		f := fields.ByName(protoreflect.Name(name))
		if f == nil {
			f = fields.ByJSONName(name)
		}
		if f == nil {
			return nil, false
		}
		out = append(out, string(f.Name()))
		if i == len(path)-1 {
			return out, true
		}
		if md = f.Message(); md == nil || f.IsList() || f.IsMap() {
			return nil, false
		}
	}
	return nil, false
}

// queryRoutes are the routes that take query parameters: those without a
// body whose request has fields the path does not fill. Every other route
// is answered by grpc-gateway without reading its query, so a parameter
// there (a POST .../records?acks=0 that would have written with acks=-1)
// is refused by refuseQuery rather than ignored. Keys are the method and
// the route's template as in proto/skein/v1/http.yaml; a test derives the
// same set from that file and the protos.
var queryRoutes = map[string]bool{
	"GET /v1/topics":                    true,
	"GET /v1/topics/{topic}/offsets":    true,
	"GET /v1/acls":                      true,
	"DELETE /v1/acls":                   true,
	"DELETE /v1/groups/{group}/offsets": true,
	"GET /v1/transactions":              true,
	"GET /v1/topics/{topic}/partitions/{partition}/records": true,
}

// patternVar is a path variable in grpc-gateway's form of a template,
// {name=*}, which http.yaml writes {name}.
var patternVar = regexp.MustCompile(`\{([A-Za-z0-9_.]+)=\*\}`)

// refuseQuery answers INVALID_REQUEST for a query parameter on a route
// that takes none (see queryRoutes); the routes that take some check their
// names with strictQueryParser.
func refuseQuery(next runtime.HandlerFunc) runtime.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, pathParams map[string]string) {
		if r.URL.RawQuery != "" {
			if pat, ok := runtime.HTTPPattern(r.Context()); ok {
				route := r.Method + " " + patternVar.ReplaceAllString(pat.String(), "{$1}")
				// ParseQuery, not URL.Query, which drops what it cannot parse
				// (?acks=0;x would pass as no parameter at all).
				vals, err := url.ParseQuery(r.URL.RawQuery)
				if keys := slices.Sorted(maps.Keys(vals)); (err != nil || len(keys) > 0) && !queryRoutes[route] {
					where := "the body or the path"
					if r.Method == http.MethodGet || r.Method == http.MethodDelete {
						where = "the path"
					}
					msg := fmt.Sprintf("a malformed query %q: %s takes its fields in %s", r.URL.RawQuery, route, where)
					if err == nil {
						msg = fmt.Sprintf("unknown query parameter %q: %s takes its fields in %s", keys[0], route, where)
					}
					writeError(w, http.StatusBadRequest, errorBody{Code: int32(codes.InvalidArgument), ErrorCode: errs.InvalidRequest.Name, Message: msg})
					return
				}
			}
		}
		next(w, r, pathParams)
	}
}
