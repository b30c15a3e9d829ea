package bench

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// burn spins until this process has used d more CPU time (or 20 s of wall
// time have passed, on a machine too busy to give it that).
func burn(t *testing.T, d time.Duration) uint64 {
	var x uint64 = 1
	u0, s0, _ := processCPU()
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); {
		for range 100000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if u, s, _ := processCPU(); u+s-u0-s0 >= d {
			return x
		}
	}
	t.Fatalf("the process was not given %v of CPU in 20 s of wall time", d)
	return x
}

func TestSummaryReportsOwnCPU(t *testing.T) {
	st := newStats()
	_ = burn(t, 100*time.Millisecond)
	st.ok(1000, 1000*1024, time.Millisecond)
	sum := st.summary(Summary{Mode: "produce", Transport: GRPCStream, Topic: "t"})
	c := sum.CPU
	if c == nil {
		t.Fatal("summary has no load_generator_cpu")
	}
	if c.Sec < 0.1 || c.Sec != c.UserSec+c.SysSec {
		t.Errorf("cpu %+v: want ≥ 0.1 s of user+sys", *c)
	}
	if c.Cores <= 0 || c.Cores > float64(runtime.NumCPU())+0.5 {
		t.Errorf("cores %.2f: want in (0, %d]", c.Cores, runtime.NumCPU())
	}
	if want := c.Sec / 1000 * 1e6; c.PerRecordUS < want*0.99 || c.PerRecordUS > want*1.01 {
		t.Errorf("µs/record %.1f, want %.1f", c.PerRecordUS, want)
	}
	if !strings.Contains(sum.String(), "load generator CPU") {
		t.Errorf("human summary lacks the CPU line:\n%s", sum)
	}
}
