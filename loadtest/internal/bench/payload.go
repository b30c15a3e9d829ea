package bench

import (
	"strconv"
	"time"
)

// stampLen is the width of the send time at the start of every value: the
// Unix time in nanoseconds as 19 decimal digits (good until 2286).
const stampLen = 19

// Payload fills and returns buf[:size] (growing buf as needed) with a record
// value that starts with t as stampLen decimal digits, so a consumer can
// measure end-to-end latency to the nanosecond, followed by filler. Values
// are ASCII, so the REST API carries them as text. A size below stampLen
// gives filler only.
func Payload(buf []byte, size int, t time.Time) []byte {
	if cap(buf) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	i := 0
	if size >= stampLen {
		s := strconv.AppendInt(buf[:0:stampLen], t.UnixNano(), 10)
		// Left-pad to the fixed width (only times before 2001 are shorter).
		pad := stampLen - len(s)
		copy(buf[pad:], s)
		for j := 0; j < pad; j++ {
			buf[j] = '0'
		}
		i = stampLen
	}
	// The filler is 'a'+i%26 at index i, copied from a ready pattern: a
	// byte at a time it took a fifth of the load generator's CPU.
	for i < size {
		i += copy(buf[i:], filler[i%26:])
	}
	return buf
}

// filler repeats a..z, a whole number of times, so that copying from
// filler[i%26:] continues the pattern at index i.
var filler = func() []byte {
	b := make([]byte, 26*256)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}()

// SentAt is the send time Payload put at the start of v.
func SentAt(v []byte) (time.Time, bool) {
	if len(v) < stampLen {
		return time.Time{}, false
	}
	var n int64
	for _, c := range v[:stampLen] {
		if c < '0' || c > '9' {
			return time.Time{}, false
		}
		n = n*10 + int64(c-'0')
	}
	return time.Unix(0, n), true
}
