package topicconfig

import "testing"

func TestCompactedFrom(t *testing.T) {
	for _, tc := range []struct {
		policy string
		set    bool
		want   bool
	}{
		{"", false, false},
		{"delete", true, false},
		{"compact", true, true},
		{"compact,delete", true, true},
		{" delete , compact ", true, true},
		{"compacted", true, false},
	} {
		o := map[string]string{}
		if tc.set {
			o["cleanup.policy"] = tc.policy
		}
		if got := CompactedFrom(o); got != tc.want {
			t.Errorf("cleanup.policy %q (set %v): %v, want %v", tc.policy, tc.set, got, tc.want)
		}
	}
}

func BenchmarkCompactedFrom(b *testing.B) {
	o := map[string]string{"retention.ms": "1000"}
	b.ReportAllocs()
	for b.Loop() {
		if CompactedFrom(o) {
			b.Fatal("compacted")
		}
	}
}
