package gateway

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
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
		if !hasField(msg.ProtoReflect().Descriptor(), strings.Split(name, ".")) {
			return fmt.Errorf("unknown query parameter %q", key)
		}
	}
	return p.DefaultQueryParser.Parse(msg, values, filter)
}

// hasField reports whether path (field names, proto or JSON, one per level
// of nested messages) names a field of md.
func hasField(md protoreflect.MessageDescriptor, path []string) bool {
	for i, name := range path {
		fields := md.Fields()
		f := fields.ByName(protoreflect.Name(name))
		if f == nil {
			f = fields.ByJSONName(name)
		}
		if f == nil {
			return false
		}
		if i == len(path)-1 {
			return true
		}
		if md = f.Message(); md == nil || f.IsList() || f.IsMap() {
			return false
		}
	}
	return false
}
