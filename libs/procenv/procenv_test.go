package procenv

import (
	"slices"
	"testing"
)

func TestEnv(t *testing.T) {
	for _, tc := range []struct {
		name   string
		base   []string
		procs  int
		steady bool
		want   []string
	}{
		{"nothing asked", []string{"PATH=/bin", "GODEBUG=x=1", "GOMAXPROCS=4"}, 0, false, []string{"PATH=/bin", "GODEBUG=x=1", "GOMAXPROCS=4"}},
		{"GOMAXPROCS replaced", []string{"GOMAXPROCS=4", "PATH=/bin"}, 1, false, []string{"PATH=/bin", "GOMAXPROCS=1"}},
		{"steady, no GODEBUG", []string{"PATH=/bin"}, 0, true, []string{"PATH=/bin", "GODEBUG=" + SteadySysmon}},
		{"steady, empty GODEBUG", []string{"GODEBUG=", "PATH=/bin"}, 0, true, []string{"PATH=/bin", "GODEBUG=" + SteadySysmon}},
		{"steady added to the user's settings", []string{"GODEBUG=gctrace=1,madvdontneed=1"}, 2, true, []string{"GOMAXPROCS=2", "GODEBUG=gctrace=1,madvdontneed=1," + SteadySysmon}},
		{"the user's schedtrace is kept", []string{"GODEBUG=gctrace=1,schedtrace=1000"}, 0, true, []string{"GODEBUG=gctrace=1,schedtrace=1000"}},
		{"a key with a space is not the runtime's schedtrace", []string{"GODEBUG=gctrace=1, schedtrace=1000"}, 0, true, []string{"GODEBUG=gctrace=1, schedtrace=1000," + SteadySysmon}},
		{"the user's schedtrace=0 is kept", []string{"GODEBUG=schedtrace=0"}, 0, true, []string{"GODEBUG=schedtrace=0"}},
		{"the last GODEBUG counts", []string{"GODEBUG=schedtrace=5", "GODEBUG=x=1"}, 0, true, []string{"GODEBUG=x=1," + SteadySysmon}},
		{"scheddetail is not schedtrace", []string{"GODEBUG=scheddetail=1"}, 0, true, []string{"GODEBUG=scheddetail=1," + SteadySysmon}},
	} {
		if got := Env(tc.base, tc.procs, tc.steady); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
