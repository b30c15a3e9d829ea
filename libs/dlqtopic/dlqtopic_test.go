package dlqtopic

import (
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"
	"testing"
)

func TestDefault(t *testing.T) {
	long := func(n int, c string) string { return strings.Repeat(c, n) }
	for _, tc := range []struct {
		name, source, want string
	}{
		{"a short name", "orders", "orders.dlq"},
		{"the longest that takes the suffix as it is", long(245, "a"), long(245, "a") + ".dlq"},
		{"one longer", long(246, "a"), long(236, "a") + "-" + hash(long(246, "a")) + ".dlq"},
		{"the longest topic name", long(249, "b"), long(236, "b") + "-" + hash(long(249, "b")) + ".dlq"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Default(tc.source); got != tc.want {
				t.Errorf("Default(%d characters) = %q, want %q", len(tc.source), got, tc.want)
			}
		})
	}
}

// hash is the whole name's FNV-1a, as eight hex digits.
func hash(source string) string {
	h := fnv.New32a()
	h.Write([]byte(source))
	return fmt.Sprintf("%08x", h.Sum32())
}

func TestDefaultFitsATopicNameAndKeepsLongNamesApart(t *testing.T) {
	valid := regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)
	seen := map[string]string{}
	for n := 240; n <= 249; n++ {
		for _, end := range []string{"x", "y", "z-1", "z.2"} {
			source := strings.Repeat("t", n-len(end)) + end
			got := Default(source)
			if !valid.MatchString(got) || !strings.HasSuffix(got, ".dlq") {
				t.Fatalf("Default of %d characters = %q (%d): not a topic name ending .dlq", n, got, len(got))
			}
			if other, ok := seen[got]; ok {
				t.Fatalf("%q and %q share the dead-letter topic %q", other, source, got)
			}
			seen[got] = source
		}
	}
}
