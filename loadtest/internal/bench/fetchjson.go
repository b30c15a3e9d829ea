package bench

import (
	"cmp"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeFetch reads what a consumer needs from the JSON answer of a REST
// fetch (GET /v1/topics/{topic}/partitions/{p}/records): every record's
// value and next_offset, in one pass over body and without reflection.
// encoding/json spent about 10 µs of the load generator's CPU on each
// 1 KiB record, more than the gateway spent serving it, so the REST rows
// measured the load generator rather than the gateway.
//
// It takes any JSON the gateway may write: fields in any order, fields it
// does not know, escapes, whitespace. A record whose value is not UTF-8
// comes as value_bytes (base64) and is decoded; a record without either
// gives a nil value. A value without escapes aliases body.
func decodeFetch(body []byte) (values [][]byte, next int64, err error) {
	s := jsonScanner{b: body}
	if err := s.object(func(key []byte) error {
		switch string(key) {
		case "records":
			if c, err := s.peek(); err != nil || c == 'n' {
				return cmp.Or(err, s.literal("null"))
			}
			return s.array(func() error {
				var v []byte
				err := s.object(func(key []byte) error {
					var err error
					switch string(key) {
					case "value":
						v, err = s.nullableString()
					case "value_bytes":
						var b64 []byte
						if b64, err = s.nullableString(); err == nil && b64 != nil {
							v = make([]byte, base64.StdEncoding.DecodedLen(len(b64)))
							var n int
							n, err = base64.StdEncoding.Decode(v, b64)
							v = v[:n]
						}
					default:
						err = s.skip()
					}
					return err
				})
				values = append(values, v)
				return err
			})
		case "next_offset":
			// protobuf JSON writes an int64 as a string; a number is read too.
			tok, err := s.nullableString()
			if err == nil && tok == nil {
				tok, err = s.number()
			}
			if err != nil {
				return err
			}
			if next, err = strconv.ParseInt(string(tok), 10, 64); err != nil {
				return fmt.Errorf("next_offset %q: %w", tok, err)
			}
			return nil
		default:
			return s.skip()
		}
	}); err != nil {
		return nil, 0, err
	}
	s.ws()
	if s.i != len(s.b) {
		return nil, 0, s.errf("data after the answer")
	}
	return values, next, nil
}

// jsonScanner reads JSON from b; i is the next byte.
type jsonScanner struct {
	b []byte
	i int
}

var errJSONEnd = errors.New("JSON ends too early")

func (s *jsonScanner) errf(format string, args ...any) error {
	return fmt.Errorf("JSON at byte %d: %s", s.i, fmt.Sprintf(format, args...))
}

func (s *jsonScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek skips whitespace and returns the next byte.
func (s *jsonScanner) peek() (byte, error) {
	s.ws()
	if s.i >= len(s.b) {
		return 0, errJSONEnd
	}
	return s.b[s.i], nil
}

func (s *jsonScanner) expect(c byte) error {
	got, err := s.peek()
	if err != nil {
		return err
	}
	if got != c {
		return s.errf("want %q, got %q", c, got)
	}
	s.i++
	return nil
}

// object reads an object, calling field with each key; field must read
// the key's value.
func (s *jsonScanner) object(field func(key []byte) error) error {
	return s.list('{', '}', func() error {
		key, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		return field(key)
	})
}

// array reads an array, calling elem to read each element.
func (s *jsonScanner) array(elem func() error) error {
	return s.list('[', ']', elem)
}

// list reads open, items separated by commas (each read by item), and
// close.
func (s *jsonScanner) list(open, close byte, item func() error) error {
	if err := s.expect(open); err != nil {
		return err
	}
	if c, err := s.peek(); err != nil {
		return err
	} else if c == close {
		s.i++
		return nil
	}
	for {
		if err := item(); err != nil {
			return err
		}
		c, err := s.peek()
		if err != nil {
			return err
		}
		switch c {
		case ',':
			s.i++
		case close:
			s.i++
			return nil
		default:
			return s.errf("want ',' or %q, got %q", close, c)
		}
	}
}

// nullableString reads a string, or null (nil, nil); anything else is left
// unread and answered nil, nil too, for the caller to read as it likes.
func (s *jsonScanner) nullableString() ([]byte, error) {
	c, err := s.peek()
	if err != nil {
		return nil, err
	}
	switch c {
	case '"':
		v, err := s.str()
		if v == nil && err == nil {
			v = []byte{}
		}
		return v, err
	case 'n':
		return nil, s.literal("null")
	}
	return nil, nil
}

// str reads a string and returns its unescaped bytes: a slice of b when it
// has no escapes.
func (s *jsonScanner) str() ([]byte, error) {
	if err := s.expect('"'); err != nil {
		return nil, err
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], nil
		case c == '\\':
			return s.escaped(start)
		case c < 0x20:
			return nil, s.errf("control character %#x in a string", c)
		}
		s.i++
	}
	return nil, errJSONEnd
}

// escaped finishes a string that started at start and has an escape at i.
func (s *jsonScanner) escaped(start int) ([]byte, error) {
	out := append([]byte(nil), s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return out, nil
		case c < 0x20:
			return nil, s.errf("control character %#x in a string", c)
		case c != '\\':
			out = append(out, c)
			s.i++
			continue
		}
		if s.i+1 >= len(s.b) {
			return nil, errJSONEnd
		}
		e := s.b[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, err := s.hex4()
			if err != nil {
				return nil, err
			}
			if utf16.IsSurrogate(r) {
				// A pair's second half follows as another \u escape; a lone
				// half is U+FFFD, as encoding/json reads it.
				r2 := utf8.RuneError
				if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					save := s.i
					s.i += 2
					low, err := s.hex4()
					if err != nil {
						return nil, err
					}
					if r2 = utf16.DecodeRune(r, low); r2 == utf8.RuneError {
						s.i = save
					}
				}
				r = r2
			}
			out = utf8.AppendRune(out, r)
		default:
			s.i--
			return nil, s.errf("bad escape \\%c", e)
		}
	}
	return nil, errJSONEnd
}

func (s *jsonScanner) hex4() (rune, error) {
	if s.i+4 > len(s.b) {
		return 0, errJSONEnd
	}
	v, err := strconv.ParseUint(string(s.b[s.i:s.i+4]), 16, 32)
	if err != nil {
		return 0, s.errf("bad \\u escape %q", s.b[s.i:s.i+4])
	}
	s.i += 4
	return rune(v), nil
}

// number reads a number's text, checked by strconv.
func (s *jsonScanner) number() ([]byte, error) {
	if _, err := s.peek(); err != nil {
		return nil, err
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if (c < '0' || c > '9') && c != '-' && c != '+' && c != '.' && c != 'e' && c != 'E' {
			break
		}
		s.i++
	}
	tok := s.b[start:s.i]
	if len(tok) == 0 {
		return nil, s.errf("want a value")
	}
	if _, err := strconv.ParseFloat(string(tok), 64); err != nil {
		return nil, s.errf("bad number %q", tok)
	}
	return tok, nil
}

func (s *jsonScanner) literal(word string) error {
	if len(s.b)-s.i < len(word) {
		return errJSONEnd
	}
	if string(s.b[s.i:s.i+len(word)]) != word {
		return s.errf("want %s", word)
	}
	s.i += len(word)
	return nil
}

// skip reads one value of any kind and drops it.
func (s *jsonScanner) skip() error {
	c, err := s.peek()
	if err != nil {
		return err
	}
	switch c {
	case '"':
		_, err = s.str()
	case '{':
		err = s.object(func([]byte) error { return s.skip() })
	case '[':
		err = s.array(s.skip)
	case 't':
		err = s.literal("true")
	case 'f':
		err = s.literal("false")
	case 'n':
		err = s.literal("null")
	default:
		_, err = s.number()
	}
	return err
}
