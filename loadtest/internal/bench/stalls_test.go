package bench

import (
	"context"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     cpuTimes
		bad      bool
	}{
		{name: "a kernel with guest columns", in: "cpu  22321 5 5750 45561 252 3 66 27 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n",
			want: cpuTimes{22321, 5, 5750, 45561, 252, 3, 66, 27}},
		{name: "exactly eight columns", in: "cpu 1 2 3 4 5 6 7 8", want: cpuTimes{1, 2, 3, 4, 5, 6, 7, 8}},
		{name: "a per-CPU line first", in: "cpu0 1 2 3 4 5 6 7 8\n", bad: true},
		{name: "too few columns", in: "cpu 1 2 3 4 5 6 7\n", bad: true},
		{name: "not a number", in: "cpu 1 2 x 4 5 6 7 8\n", bad: true},
		{name: "empty", in: "", bad: true},
	} {
		got, err := parseProcStat(tc.in)
		if (err != nil) != tc.bad {
			t.Errorf("%s: err %v, want an error: %v", tc.name, err, tc.bad)
			continue
		}
		if got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSharesBetween(t *testing.T) {
	a := cpuTimes{100, 0, 50, 1000, 10, 0, 5, 1}
	for _, tc := range []struct {
		name string
		b    cpuTimes
		want *CPUShares
	}{
		// 200 ticks: user 60 + nice 10 + system 20 + irq 2 + softirq 8 busy,
		// idle 80, iowait 10, steal 10.
		{name: "every kind", b: cpuTimes{160, 10, 70, 1080, 20, 2, 13, 11},
			want: &CPUShares{BusyPercent: 50, IOWaitPercent: 5, StealPercent: 5}},
		{name: "all idle", b: cpuTimes{100, 0, 50, 1100, 10, 0, 5, 1}, want: &CPUShares{}},
		{name: "no time passed", b: a, want: nil},
		{name: "counters went back", b: cpuTimes{90, 0, 60, 1100, 10, 0, 5, 1}, want: nil},
	} {
		got := sharesBetween(a, tc.b)
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestStallsCountsWakes(t *testing.T) {
	r, err := Stalls(context.Background(), time.Millisecond, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.Late.Count == 0 || r.Late.Count > 300 {
		t.Errorf("%d wakes of 1 ms in 300 ms", r.Late.Count)
	}
	if r.ElapsedSec < 0.3 || r.Late.Max < r.Late.P50 || r.Over5ms > r.Late.Count {
		t.Errorf("result %+v", r)
	}
	if r.CPU != nil && (r.CPU.BusyPercent < 0 || r.CPU.BusyPercent > 100) {
		t.Errorf("machine CPU %+v", r.CPU)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r, err := Stalls(ctx, time.Second, 0); err != nil || r.Late.Count != 0 {
		t.Errorf("a cancelled run: %+v, %v", r, err)
	}
	if _, err := Stalls(context.Background(), 0, time.Second); err == nil {
		t.Error("a zero interval was taken")
	}
}
