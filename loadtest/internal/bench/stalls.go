package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"skein/loadtest/internal/hist"
)

// StallResult is what a process that only sleeps saw of the machine: how
// late each of its wakes came, and how busy the CPUs were meanwhile. Run at
// a real-time priority (chrt -f) beside a workload, it tells a machine that
// stopped (the host took the CPUs away, or the kernel held them) from a
// workload that queued for them: a real-time sleeper wakes on time on a
// machine that is merely busy.
type StallResult struct {
	Mode       string  `json:"mode"`
	IntervalMS float64 `json:"interval_ms"`
	ElapsedSec float64 `json:"elapsed_s"`
	// Late: how long after its due time each wake came.
	Late Latency `json:"late_ms"`
	// Over5ms counts the wakes 5 ms or more late.
	Over5ms uint64 `json:"over_5ms"`
	// CPU is the machine's CPU time over the run, all CPUs together
	// (/proc/stat); nil where the platform does not say.
	CPU *CPUShares `json:"machine_cpu,omitempty"`
}

func (r StallResult) String() string {
	out := fmt.Sprintf("stalls: %d wakes every %.1f ms over %.1fs; late ms: p50 %.3f p99 %.3f p99.9 %.3f max %.3f; %d wakes 5 ms or more late",
		r.Late.Count, r.IntervalMS, r.ElapsedSec, r.Late.P50, r.Late.P99, r.Late.P999, r.Late.Max, r.Over5ms)
	if c := r.CPU; c != nil {
		out += fmt.Sprintf("\n  the machine's CPUs: %.1f%% busy, %.1f%% waiting on I/O, %.1f%% stolen by the host", c.BusyPercent, c.IOWaitPercent, c.StealPercent)
	}
	return out
}

// CPUShares is how the machine's CPU time was spent between two readings
// of /proc/stat, as percentages of all of it.
type CPUShares struct {
	// BusyPercent: user, nice, system, irq and softirq.
	BusyPercent   float64 `json:"busy_percent"`
	IOWaitPercent float64 `json:"iowait_percent"`
	// StealPercent: time the host ran something else while a CPU of this
	// machine had work.
	StealPercent float64 `json:"steal_percent"`
}

// cpuTimes is the first line of /proc/stat: user, nice, system, idle,
// iowait, irq, softirq, steal, in clock ticks.
type cpuTimes [8]uint64

// parseProcStat reads the machine-wide "cpu" line of /proc/stat.
func parseProcStat(data string) (cpuTimes, error) {
	line, _, _ := strings.Cut(data, "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return cpuTimes{}, fmt.Errorf("/proc/stat: first line %q is not the cpu line", line)
	}
	var t cpuTimes
	for i := range t {
		v, err := strconv.ParseUint(fields[i+1], 10, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("/proc/stat: field %d of %q: %w", i+1, line, err)
		}
		t[i] = v
	}
	return t, nil
}

// sharesBetween answers how the time from a to b was spent, or nil when
// none passed (or the counters went backwards).
func sharesBetween(a, b cpuTimes) *CPUShares {
	var d cpuTimes
	var total uint64
	for i := range d {
		if b[i] < a[i] {
			return nil
		}
		d[i] = b[i] - a[i]
		total += d[i]
	}
	if total == 0 {
		return nil
	}
	pct := func(v uint64) float64 { return float64(v) / float64(total) * 100 }
	return &CPUShares{BusyPercent: pct(d[0] + d[1] + d[2] + d[5] + d[6]), IOWaitPercent: pct(d[4]), StealPercent: pct(d[7])}
}

func readProcStat() (cpuTimes, bool) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, false
	}
	t, err := parseProcStat(string(raw))
	return t, err == nil
}

// Stalls sleeps for interval again and again until ctx ends or duration
// (when positive) has passed, and reports how late each wake came.
func Stalls(ctx context.Context, interval, duration time.Duration) (StallResult, error) {
	if interval <= 0 {
		return StallResult{}, errors.New("the interval must be positive")
	}
	// The clock starts before the deadline is set, so a run given a
	// duration reports at least that duration.
	start := time.Now()
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, start.Add(duration))
		defer cancel()
	}
	h := hist.New()
	var over5 uint64
	stat0, statOK := readProcStat()
	t := time.NewTimer(interval)
	defer t.Stop()
	due := start.Add(interval)
	for {
		select {
		case <-ctx.Done():
			r := StallResult{Mode: "stalls", IntervalMS: float64(interval) / 1e6, ElapsedSec: time.Since(start).Seconds(),
				Late: latencyOf(h), Over5ms: over5}
			if stat1, ok := readProcStat(); ok && statOK {
				r.CPU = sharesBetween(stat0, stat1)
			}
			return r, nil
		case <-t.C:
			now := time.Now() // not the timer's own time: the wait for a CPU counts too
			late := max(now.Sub(due), 0)
			h.RecordDuration(late, 1)
			if late >= 5*time.Millisecond {
				over5++
			}
			// The next wake is due an interval after this one came, so a
			// stall is counted once, not again for every interval it hid.
			due = now.Add(interval)
			t.Reset(interval)
		}
	}
}
