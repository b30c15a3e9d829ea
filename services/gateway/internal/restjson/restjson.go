// Package restjson writes the REST answers that carry records — a fetch's
// records — as JSON without protojson's reflection. The output means what
// protojson's does under the gateway's options (proto field names, zero
// values emitted, 64-bit integers as strings, bytes as padded base64, an
// unset optional field left out), so a REST caller cannot tell which one
// wrote it; a 2,000-record fetch costs a fraction of the CPU.
package restjson

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"

	skeinv1 "skein/gen/skein/v1"
)

// AppendFetchResponse appends r as JSON to dst.
func AppendFetchResponse(dst []byte, r *skeinv1.FetchResponse) []byte {
	dst = grow(dst, fetchSize(r))
	dst = append(dst, `{"records":`...)
	dst = appendRecords(dst, r.GetRecords())
	dst = appendInt64Field(dst, "next_offset", r.GetNextOffset())
	dst = appendInt64Field(dst, "high_watermark", r.GetHighWatermark())
	dst = appendInt64Field(dst, "last_stable_offset", r.GetLastStableOffset())
	dst = appendInt64Field(dst, "log_start_offset", r.GetLogStartOffset())
	return append(dst, '}')
}

func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst
	}
	out := make([]byte, len(dst), len(dst)+n)
	copy(out, dst)
	return out
}

// fetchSize estimates the JSON size of r, so that the answer is written
// into one buffer without growing it.
func fetchSize(r *skeinv1.FetchResponse) int {
	n := 160
	for _, rec := range r.GetRecords() {
		n += 200 + len(rec.GetTopic())
		n += textSize(rec.Key) + textSize(rec.Value)
		n += base64.StdEncoding.EncodedLen(len(rec.GetKeyBytes())) + base64.StdEncoding.EncodedLen(len(rec.GetValueBytes()))
		for _, h := range rec.GetHeaders() {
			n += 48 + len(h.GetKey()) + textSize(h.Value) + base64.StdEncoding.EncodedLen(len(h.GetValueBytes()))
		}
	}
	return n
}

// textSize is a string's JSON size when it needs no escapes, plus a
// little: an escaped string grows the buffer once.
func textSize(s *string) int {
	if s == nil {
		return 0
	}
	return len(*s) + len(*s)/16 + 2
}

func appendRecords(dst []byte, recs []*skeinv1.ConsumedRecord) []byte {
	dst = append(dst, '[')
	for i, rec := range recs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendRecord(dst, rec)
	}
	return append(dst, ']')
}

func appendRecord(dst []byte, r *skeinv1.ConsumedRecord) []byte {
	dst = append(dst, `{"topic":`...)
	dst = appendString(dst, r.GetTopic())
	dst = append(dst, `,"partition":`...)
	dst = strconv.AppendInt(dst, int64(r.GetPartition()), 10)
	dst = appendInt64Field(dst, "offset", r.GetOffset())
	dst = appendInt64Field(dst, "timestamp_ms", r.GetTimestampMs())
	dst = appendOptionalString(dst, "key", r.Key)
	dst = appendOptionalBytes(dst, "key_bytes", r.KeyBytes)
	dst = appendOptionalString(dst, "value", r.Value)
	dst = appendOptionalBytes(dst, "value_bytes", r.ValueBytes)
	dst = append(dst, `,"headers":[`...)
	for i, h := range r.GetHeaders() {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"key":`...)
		dst = appendString(dst, h.GetKey())
		dst = appendOptionalString(dst, "value", h.Value)
		dst = appendOptionalBytes(dst, "value_bytes", h.ValueBytes)
		dst = append(dst, '}')
	}
	dst = append(dst, `],"leader_epoch":`...)
	dst = strconv.AppendInt(dst, int64(r.GetLeaderEpoch()), 10)
	dst = append(dst, `,"delivery_attempt":`...)
	dst = strconv.AppendInt(dst, int64(r.GetDeliveryAttempt()), 10)
	dst = append(dst, `,"timestamp_type":"`...)
	dst = append(dst, r.GetTimestampType().String()...)
	return append(dst, '"', '}')
}

// appendInt64Field appends ,"name":"v": protojson writes 64-bit integers as
// strings, which JavaScript reads without losing digits.
func appendInt64Field(dst []byte, name string, v int64) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, `":"`...)
	dst = strconv.AppendInt(dst, v, 10)
	return append(dst, '"')
}

// appendOptionalString appends ,"name":"s" when s is set: an unset
// optional field is left out, as protojson leaves it out.
func appendOptionalString(dst []byte, name string, s *string) []byte {
	if s == nil {
		return dst
	}
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	return appendString(dst, *s)
}

func appendOptionalBytes(dst []byte, name string, b []byte) []byte {
	if b == nil {
		return dst
	}
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':', '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string: quotes, backslashes and
// control characters escaped as protojson escapes them. A valid UTF-8
// string (a text field always is) is scanned eight bytes at a time and
// copied in runs; in one that is not, each bad byte becomes U+FFFD.
func appendString(dst []byte, s string) []byte {
	valid := utf8.ValidString(s)
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if valid && i+8 <= len(s) && !needsEscape8(load8(s, i)) {
			i += 8
			continue
		}
		c := s[i]
		if c >= utf8.RuneSelf && !valid {
			if r, size := utf8.DecodeRuneInString(s[i:]); r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\ufffd"...)
			i++
			start = i
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		dst = appendEscape(dst, c)
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// load8 reads s[i:i+8] as a little-endian word.
func load8(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// needsEscape8 reports whether any of the eight bytes in x is below 0x20,
// a quote or a backslash (bytes from 0x80 up are UTF-8 and pass as they
// are): the bit tricks find a byte below n, or a zero byte after an XOR,
// in every lane at once and exactly.
func needsEscape8(x uint64) bool {
	below := (x - ones*0x20) &^ x
	q := x ^ (ones * '"')
	quote := (q - ones) &^ q
	b := x ^ (ones * '\\')
	backslash := (b - ones) &^ b
	return (below|quote|backslash)&highs != 0
}

func appendEscape(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}
