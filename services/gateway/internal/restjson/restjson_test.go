package restjson

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	skeinv1 "skein/gen/skein/v1"
)

// The gateway's protojson options, which the fast path must agree with.
var reference = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

func compact(t *testing.T, b []byte) string {
	t.Helper()
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return out.String()
}

func check(t *testing.T, name string, r *skeinv1.FetchResponse) {
	t.Helper()
	want, err := reference.Marshal(r)
	if err != nil {
		t.Fatalf("%s: protojson: %v", name, err)
	}
	got := AppendFetchResponse(nil, r)
	if g, w := compact(t, got), compact(t, want); g != w {
		t.Errorf("%s:\n got %s\nwant %s", name, g, w)
	}
	// And it reads back as the same message.
	back := &skeinv1.FetchResponse{}
	if err := protojson.Unmarshal(got, back); err != nil || !proto.Equal(back, r) {
		t.Errorf("%s: read back %v (%v), want %v", name, back, err, r)
	}
}

func TestFetchResponseAsProtojsonWritesIt(t *testing.T) {
	check(t, "empty", &skeinv1.FetchResponse{})
	check(t, "no records, offsets", &skeinv1.FetchResponse{NextOffset: 7, HighWatermark: math.MaxInt64, LastStableOffset: -1, LogStartOffset: 3})
	check(t, "every field", &skeinv1.FetchResponse{
		Records: []*skeinv1.ConsumedRecord{{
			Topic: "orders", Partition: 2, Offset: 41, TimestampMs: 1764547200123,
			Key: proto.String("k"), Value: proto.String(`{"total": 12.5, "note": "a \"quoted\" \\ line\nnext\ttab"}`),
			Headers: []*skeinv1.Header{
				{Key: "traceparent", Value: proto.String("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")},
				{Key: "bin", ValueBytes: []byte{0, 1, 2, 0xff}},
				{Key: "null"},
				{Key: "empty", Value: proto.String("")},
			},
			LeaderEpoch: 3, DeliveryAttempt: 2, TimestampType: skeinv1.TimestampType_LOG_APPEND_TIME,
		}, {
			Topic: "orders", Partition: 2, Offset: 42, TimestampMs: -1,
			KeyBytes: []byte{0xc3, 0x28}, ValueBytes: []byte{},
		}, {
			Topic: "t", Offset: 43, // a tombstone: no value at all
		}},
		NextOffset: 44, HighWatermark: 44, LastStableOffset: 44,
	})
	check(t, "text that needs escapes", &skeinv1.FetchResponse{Records: []*skeinv1.ConsumedRecord{{
		Topic: "t", Value: proto.String("\x00\x01\x1f\b\f\r</script>&<\u2028\u2029 ünïcødé 日本語 😀 \x7f"),
	}}})
}

// Random records, the way a fetch returns them: every field and every
// optional one set or not, text with every kind of character.
func TestRandomFetchResponses(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	runes := []rune{'a', 'Z', '0', ' ', '"', '\\', '/', '\n', '\t', 0, 0x1f, 0x7f, 'é', '日', '😀', 0x2028, 0xfffd}
	text := func() *string {
		if rng.IntN(3) == 0 {
			return nil
		}
		var b []rune
		for range rng.IntN(40) {
			b = append(b, runes[rng.IntN(len(runes))])
		}
		s := string(b)
		return &s
	}
	raw := func() []byte {
		if rng.IntN(3) == 0 {
			return nil
		}
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return b
	}
	for i := range 300 {
		r := &skeinv1.FetchResponse{NextOffset: rng.Int64(), HighWatermark: rng.Int64N(1000), LastStableOffset: -rng.Int64N(5), LogStartOffset: rng.Int64()}
		for range rng.IntN(6) {
			rec := &skeinv1.ConsumedRecord{
				Topic: "topic-" + string(rune('a'+rng.IntN(26))), Partition: rng.Int32(), Offset: rng.Int64(), TimestampMs: rng.Int64() - math.MaxInt64/2,
				Key: text(), KeyBytes: raw(), Value: text(), ValueBytes: raw(), LeaderEpoch: rng.Int32N(9), DeliveryAttempt: rng.Int32N(6),
				TimestampType: skeinv1.TimestampType(rng.IntN(2)),
			}
			for range rng.IntN(3) {
				rec.Headers = append(rec.Headers, &skeinv1.Header{Key: *orEmpty(text()), Value: text(), ValueBytes: raw()})
			}
			r.Records = append(r.Records, rec)
		}
		check(t, "random "+string(rune('0'+i%10)), r)
	}
}

func orEmpty(s *string) *string {
	if s == nil {
		return new(string)
	}
	return s
}

// Appending to a buffer keeps what it held.
func TestAppendKeepsThePrefix(t *testing.T) {
	got := AppendFetchResponse([]byte("prefix:"), &skeinv1.FetchResponse{NextOffset: 1})
	if !bytes.HasPrefix(got, []byte("prefix:{")) {
		t.Fatalf("%s", got)
	}
}

func BenchmarkFetchResponse(b *testing.B) {
	r := &skeinv1.FetchResponse{NextOffset: 2000, HighWatermark: 2000}
	v := string(bytes.Repeat([]byte("x"), 1024))
	for i := range 2000 {
		r.Records = append(r.Records, &skeinv1.ConsumedRecord{Topic: "bench", Offset: int64(i), TimestampMs: 1764547200123, Value: proto.String(v),
			Headers: []*skeinv1.Header{{Key: "traceparent", Value: proto.String("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")}}})
	}
	b.Run("restjson", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = AppendFetchResponse(nil, r)
		}
	})
	b.Run("protojson", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = reference.Marshal(r)
		}
	})
}

// The eight-lane check agrees with the byte-by-byte rule for every byte
// value in every lane, beside any neighbours.
func TestNeedsEscape8(t *testing.T) {
	esc := func(c byte) bool { return c < 0x20 || c == '"' || c == '\\' }
	rng := rand.New(rand.NewPCG(3, 4))
	for lane := range 8 {
		for v := range 256 {
			for range 8 {
				var w [8]byte
				want := false
				for i := range w {
					w[i] = byte(rng.IntN(256))
					if i == lane {
						w[i] = byte(v)
					}
					want = want || esc(w[i])
				}
				if got := needsEscape8(load8(string(w[:]), 0)); got != want {
					t.Fatalf("% x: needsEscape8 = %v, want %v", w, got, want)
				}
			}
		}
	}
}

// A string that is not UTF-8 (never a text field) still comes out as JSON,
// each bad byte as U+FFFD.
func TestInvalidUTF8(t *testing.T) {
	got := appendString(nil, "a\xffb\"\xc3")
	var s string
	if err := json.Unmarshal(got, &s); err != nil || s != "a\ufffdb\"\ufffd" {
		t.Fatalf("%s -> %q %v", got, s, err)
	}
}
