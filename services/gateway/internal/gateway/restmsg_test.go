package gateway

import "testing"

func TestRESTMessage(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`parsing field "offset": strconv.ParseInt: parsing "abc": invalid syntax`, `query parameter "offset": "abc" is not an integer`},
		{`parsing field "offset": strconv.ParseInt: parsing "99999999999999999999": value out of range`, `query parameter "offset": 99999999999999999999 is out of range`},
		{`parsing field "include_internal": strconv.ParseBool: parsing "maybe": invalid syntax`, `query parameter "include_internal": "maybe" is not true or false`},
		{`parsing list "producer_id": strconv.ParseInt: parsing "abc": invalid syntax`, `query parameter "producer_id": "abc" is not an integer`},
		{`parsing field "isolation_level": "SOMETIMES" is not a valid value`, `query parameter "isolation_level": "SOMETIMES" is not a valid value`},
		{`type mismatch, parameter: partition, error: strconv.ParseInt: parsing "abc": invalid syntax`, `path parameter "partition": "abc" is not an integer`},
		{`proto: (line 1:30): invalid value for bytes field valueBytes: "***"`, `the body, at line 1 column 30: invalid value for bytes field value_bytes: "***"`},
		{`proto: (line 1:45): invalid value for int64 field timestampMs: "x"`, `the body, at line 1 column 45: invalid value for int64 field timestamp_ms: "x"`},
		{`proto: (line 1:10): invalid value for string field name: 5`, `the body, at line 1 column 10: invalid value for string field name: 5`},
		{`proto: (line 1:15): unknown field "valu"`, `the body, at line 1 column 15: unknown field "valu"`},
		{`proto: unexpected EOF`, `the body is not valid JSON: it ends inside a value, or holds an invalid escape`},
		{"proto:\u00a0(line 1:15): unknown field \"valu\"", `the body, at line 1 column 15: unknown field "valu"`},
		{"proto:\u00a0unexpected EOF", `the body is not valid JSON: it ends inside a value, or holds an invalid escape`},
		{`unexpected EOF`, `the body is not valid JSON: it ends inside a value, or holds an invalid escape`},
		{`invalid character 'o' in literal null (expecting 'u')`, `the body is not valid JSON: invalid character 'o' in literal null (expecting 'u')`},
		{`invalid character '}' looking for beginning of object key string`, `the body is not valid JSON: invalid character '}' looking for beginning of object key string`},
		{`invalid character 'x' after top-level value`, `the body is not valid JSON: invalid character 'x' after top-level value`},
		{`too many values for field "offset": 1, 2`, `too many values for field "offset": 1, 2`},
		{`topic "nope" does not exist`, `topic "nope" does not exist`},
	} {
		if got := restMessage(tc.in); got != tc.want {
			t.Errorf("restMessage(%q)\n  = %q\nwant %q", tc.in, got, tc.want)
		}
	}
}
