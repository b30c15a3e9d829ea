package gateway

import (
	"regexp"
	"strings"
)

// The refusals grpc-gateway and protojson make themselves (a malformed
// body, a path or query value of the wrong type) speak of Go's strconv and
// of the fields' JSON names. restMessage says the same in the API's terms:
// the parameter or body field by its documented name, and what its value
// is not.
var (
	queryParse = regexp.MustCompile(`^parsing (?:field|list) "([^"]*)": (.*)$`)
	pathParse  = regexp.MustCompile(`^type mismatch, parameter: ([^,]*), error: (.*)$`)
	strconvErr = regexp.MustCompile(`^strconv\.Parse(Int|Uint|Float|Bool): parsing "(.*)": (invalid syntax|value out of range)$`)
	bodyAt     = regexp.MustCompile(`^proto: +\(line (\d+):(\d+)\): (.*)$`)
	// protobuf writes "proto:" then a space or, picked by a hash of the
	// binary to discourage matching its messages, a no-break space.
	protoPrefix = strings.NewReplacer("proto:\u00a0", "proto: ")
	fieldName   = regexp.MustCompile(`(field )([a-z][A-Za-z0-9]*)`)
	// encoding/json's syntax errors, which the body's decoder meets first.
	jsonSyntax = regexp.MustCompile(`^invalid character '.+' (in|after|looking for) `)
)

// restMessage rewrites the message of one of grpc-gateway's or protojson's
// own refusals; any other message comes back as it is.
func restMessage(msg string) string {
	msg = protoPrefix.Replace(msg)
	if m := queryParse.FindStringSubmatch(msg); m != nil {
		return "query parameter " + quote(m[1]) + ": " + valueProblem(m[2])
	}
	if m := pathParse.FindStringSubmatch(msg); m != nil {
		return "path parameter " + quote(m[1]) + ": " + valueProblem(m[2])
	}
	if m := bodyAt.FindStringSubmatch(msg); m != nil {
		return "the body, at line " + m[1] + " column " + m[2] + ": " + fieldName.ReplaceAllStringFunc(m[3], snakeField)
	}
	if jsonSyntax.MatchString(msg) {
		return "the body is not valid JSON: " + msg
	}
	switch strings.TrimPrefix(msg, "proto: ") {
	case "unexpected EOF":
		return "the body is not valid JSON: it ends inside a value, or holds an invalid escape"
	case "syntax error (line 1:1): unexpected token ":
		return "the body is not valid JSON"
	}
	if rest, ok := strings.CutPrefix(msg, "proto: "); ok {
		return "the body: " + rest
	}
	return msg
}

// valueProblem says what is wrong with a parameter's value: strconv's
// errors as what the value is not, the rest as they are.
func valueProblem(msg string) string {
	m := strconvErr.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	if m[3] == "value out of range" {
		return m[2] + " is out of range"
	}
	switch m[1] {
	case "Int", "Uint":
		return quote(m[2]) + " is not an integer"
	case "Float":
		return quote(m[2]) + " is not a number"
	}
	return quote(m[2]) + " is not true or false"
}

func quote(s string) string { return `"` + s + `"` }

// snakeField turns "field valueBytes" (protojson names a field by its JSON
// name) into "field value_bytes", the name the API documents.
func snakeField(s string) string {
	m := fieldName.FindStringSubmatch(s)
	var b strings.Builder
	b.WriteString(m[1])
	for _, r := range m[2] {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
