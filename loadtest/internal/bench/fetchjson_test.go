package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// fetchAnswer is a REST fetch answer as the gateway writes it, for
// encoding/json to write and to read back as the reference.
type fetchAnswer struct {
	Records []map[string]any `json:"records"`
	Next    any              `json:"next_offset"`
	HW      string           `json:"high_watermark"`
}

// randomText mixes ASCII, characters JSON escapes, multi-byte UTF-8 and
// characters outside the basic plane (written as surrogate pairs by some
// encoders).
func randomText(r *rand.Rand) string {
	parts := []string{"a", "value ", `"`, `\`, "/", "\n", "\t", "\x01", "é", "€", "𝄞", "<&>", "\u2028"}
	var b strings.Builder
	for range r.IntN(12) {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	return b.String()
}

func randomAnswer(r *rand.Rand) (fetchAnswer, [][]byte, int64) {
	next := r.Int64N(1 << 40)
	a := fetchAnswer{HW: strconv.FormatInt(next+5, 10), Next: strconv.FormatInt(next, 10)}
	if r.IntN(4) == 0 {
		a.Next = next // a number instead of protobuf JSON's string
	}
	var want [][]byte
	for i := range r.IntN(6) {
		rec := map[string]any{
			"topic": "t", "partition": 2, "offset": strconv.Itoa(i), "timestamp_ms": "1700000000000",
			"headers":      []map[string]any{{"key": randomText(r), "value": randomText(r)}},
			"leader_epoch": 3, "delivery_attempt": 0, "extra": map[string]any{"nested": []any{1.5e3, true, false, nil, "x"}},
		}
		if r.IntN(2) == 0 {
			rec["key"] = randomText(r)
		}
		switch r.IntN(4) {
		case 0:
			v := []byte{0xff, 0x00, byte(i)}
			rec["value_bytes"] = v // encoding/json writes []byte as base64
			want = append(want, v)
		case 1:
			want = append(want, nil) // no value
		default:
			v := randomText(r)
			rec["value"] = v
			want = append(want, []byte(v))
		}
		a.Records = append(a.Records, rec)
	}
	return a, want, next
}

func TestDecodeFetchReadsWhatEncodingJSONWrites(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		a, want, wantNext := randomAnswer(r)
		body, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			var ind bytes.Buffer
			if err := json.Indent(&ind, body, " ", "\t"); err != nil {
				t.Fatal(err)
			}
			body = append(ind.Bytes(), '\n')
		}
		got, next, err := decodeFetch(body)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if next != wantNext || len(got) != len(want) {
			t.Fatalf("%s: next %d, %d values; want %d, %d", body, next, len(got), wantNext, len(want))
		}
		for j := range want {
			if !bytes.Equal(got[j], want[j]) || (got[j] == nil) != (want[j] == nil) {
				t.Fatalf("%s: value %d is %q, want %q", body, j, got[j], want[j])
			}
		}
	}
}

func TestDecodeFetchEscapes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`"plain"`, "plain"},
		{`""`, ""},
		{`"a\"b\\c\/d\b\f\n\r\t"`, "a\"b\\c/d\b\f\n\r\t"},
		{`"\u00e9\u20ac"`, "é€"},
		{`"\ud834\udd1e"`, "𝄞"},
		{`"\ud834x"`, "\ufffdx"},           // a lone high half
		{`"\udd1e"`, "\ufffd"},             // a lone low half
		{`"\ud834\u0041"`, "\ufffdA"},      // a high half before a non-surrogate escape
		{`"raw é and \n"`, "raw é and \n"}, // raw UTF-8 kept
	} {
		body := `{"records":[{"value":` + tc.in + `}],"next_offset":"1"}`
		got, _, err := decodeFetch([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		var ref struct{ Records []struct{ Value string } }
		if err := json.Unmarshal([]byte(body), &ref); err != nil {
			t.Fatal(err)
		}
		if string(got[0]) != tc.want || ref.Records[0].Value != tc.want {
			t.Errorf("%s: got %q, encoding/json %q, want %q", tc.in, got[0], ref.Records[0].Value, tc.want)
		}
	}
}

// Every malformed answer is an error, never a panic or a partial success.
func TestDecodeFetchRefusesBrokenAnswers(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	a, _, _ := randomAnswer(r)
	for len(a.Records) < 3 {
		a, _, _ = randomAnswer(r)
	}
	body, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	// Every strict prefix of the object.
	for n := range len(body) - 1 {
		if _, _, err := decodeFetch(body[:n]); err == nil {
			t.Fatalf("the first %d bytes were accepted: %s", n, body[:n])
		}
	}
	for _, bad := range []string{
		``, `[]`, `{"records":{}}`, `{"records":[1]}`, `{"records":[{"value":1}]}`,
		`{"records":[{"value":"a"}}`, `{"records":[{"value":"a"]}`, `{"records":[] "next_offset":"1"}`,
		`{"next_offset":"x"}`, `{"next_offset":true}`, `{"next_offset":"9223372036854775808"}`,
		`{"records":[{"value":"a` + "\x01" + `"}]}`, `{"records":[{"value":"\q"}]}`, `{"records":[{"value":"\u12g4"}]}`,
		`{"records":[{"value_bytes":"!!!"}]}`, `{"x":tru}`, `{"x":nul}`, `{"x":-}`, `{"x":1.2.3}`,
		`{} {}`, `{"a":1,}`, `{"a" 1}`, `{1:2}`,
	} {
		if vals, next, err := decodeFetch([]byte(bad)); err == nil {
			t.Errorf("%s was accepted: %q, %d", bad, vals, next)
		}
	}
}

// BenchmarkDecodeFetch: a 2,000-record answer of 1 KiB values, the REST
// consumer's default fetch, read by decodeFetch and by encoding/json.
func BenchmarkDecodeFetch(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"records":[`)
	val := strings.Repeat("x", 1024)
	for i := range 2000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"topic":"bench","partition":0,"offset":"%d","timestamp_ms":"1764650000000","value":"%s","headers":[],"leader_epoch":1,"delivery_attempt":0}`, i, val)
	}
	sb.WriteString(`],"next_offset":"2000","high_watermark":"5000","last_stable_offset":"5000","log_start_offset":"0"}`)
	body := []byte(sb.String())
	b.Run("decodeFetch", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if vals, _, err := decodeFetch(body); err != nil || len(vals) != 2000 {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var resp struct {
				Records []struct {
					Value string `json:"value"`
				} `json:"records"`
				Next jnum `json:"next_offset"`
			}
			if err := json.Unmarshal(body, &resp); err != nil || len(resp.Records) != 2000 {
				b.Fatal(err)
			}
		}
	})
}
