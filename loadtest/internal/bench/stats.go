package bench

import (
	"fmt"
	"io"
	"sync"
	"time"

	"skein/loadtest/internal/hist"
)

// stats gathers what a run measured; safe for concurrent use. lat is the
// per-record latency (produce: from when the record was due to its
// acknowledgement; consume: the fetch round trip); e2e, for consumers, is
// from the producer's send time in the value to the record's arrival.
type stats struct {
	mu       sync.Mutex
	start    time.Time
	cpu0     cpuSample // this process's CPU time at start
	last     time.Time // the last record counted
	records  int64
	bytes    int64
	errors   int64
	firstErr error
	lat, e2e hist.Histogram
	// this progress window
	wRecords, wBytes int64
	wLat, wE2E       hist.Histogram
}

func newStats() *stats {
	return &stats{start: time.Now(), cpu0: sampleCPU(), lat: *hist.New(), e2e: *hist.New(), wLat: *hist.New(), wE2E: *hist.New()}
}

// ok counts n records of bytes in all that took lat each.
func (s *stats) ok(n, bytes int64, lat time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records += n
	s.bytes += bytes
	s.wRecords += n
	s.wBytes += bytes
	if lat >= 0 && n > 0 {
		s.lat.RecordDuration(lat, uint64(n))
		s.wLat.RecordDuration(lat, uint64(n))
	}
	s.last = time.Now()
}

// fetched counts n consumed records of bytes in all, from one fetch that
// took d.
func (s *stats) fetched(n, bytes int64, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records += n
	s.bytes += bytes
	s.wRecords += n
	s.wBytes += bytes
	s.lat.RecordDuration(d, 1)
	s.wLat.RecordDuration(d, 1)
	s.last = time.Now()
}

// endToEnd counts one consumed record's end-to-end latency.
func (s *stats) endToEnd(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.e2e.RecordDuration(d, 1)
	s.wE2E.RecordDuration(d, 1)
}

// fail counts n records that failed with err.
func (s *stats) fail(n int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errors += n
	if s.firstErr == nil {
		s.firstErr = err
	}
}

func (s *stats) count() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.records
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// progress prints one line per interval until stop is closed, as
// kafka-producer-perf-test does: the window's rate and latencies.
func (s *stats) progress(w io.Writer, every time.Duration, verb string, stop <-chan struct{}) {
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	prev := time.Now()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			s.mu.Lock()
			el := now.Sub(prev).Seconds()
			prev = now
			line := fmt.Sprintf("%7.1fs %s %9d records %10.1f rec/s %8.2f MiB/s | lat ms p50 %.2f p99 %.2f max %.2f",
				now.Sub(s.start).Seconds(), verb, s.records, float64(s.wRecords)/el, float64(s.wBytes)/el/(1<<20),
				ms(s.wLat.Quantile(0.5)), ms(s.wLat.Quantile(0.99)), ms(s.wLat.Max()))
			if s.wE2E.Count() > 0 {
				line += fmt.Sprintf(" | e2e ms p50 %.2f p99 %.2f", ms(s.wE2E.Quantile(0.5)), ms(s.wE2E.Quantile(0.99)))
			}
			if s.errors > 0 {
				line += fmt.Sprintf(" | errors %d", s.errors)
			}
			s.wRecords, s.wBytes = 0, 0
			s.wLat.Reset()
			s.wE2E.Reset()
			s.mu.Unlock()
			fmt.Fprintln(w, line)
		}
	}
}

// Latency is a latency distribution in milliseconds.
type Latency struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
}

func latencyOf(h *hist.Histogram) Latency {
	return Latency{Count: h.Count(), Mean: h.Mean() / 1e6, P50: ms(h.Quantile(0.5)), P95: ms(h.Quantile(0.95)),
		P99: ms(h.Quantile(0.99)), P999: ms(h.Quantile(0.999)), Max: ms(h.Max())}
}

// Summary is the result of a run, printed as JSON with --json.
type Summary struct {
	Mode        string  `json:"mode"`
	Transport   string  `json:"transport"`
	Topic       string  `json:"topic"`
	Group       string  `json:"group,omitempty"`
	Acks        *int    `json:"acks,omitempty"`
	RecordSize  int     `json:"record_size,omitempty"`
	Batch       int     `json:"batch,omitempty"`
	Concurrency int     `json:"concurrency"`
	InFlight    int     `json:"in_flight,omitempty"`
	Keyless     bool    `json:"keyless,omitempty"`
	TargetRate  float64 `json:"target_rate,omitempty"`
	Records     int64   `json:"records"`
	Bytes       int64   `json:"bytes"`
	Errors      int64   `json:"errors"`
	FirstError  string  `json:"first_error,omitempty"`
	ElapsedSec  float64 `json:"elapsed_s"`
	RecordsPerS float64 `json:"records_per_s"`
	MiBPerS     float64 `json:"mib_per_s"`
	// Latency: produce, per record, from when it was due (the rate
	// schedule; the send time when unlimited) to its acknowledgement;
	// consume, per fetch, the fetch round trip (long polls included).
	Latency Latency `json:"latency_ms"`
	// EndToEnd (consume): from the send time stamped in each value to its
	// arrival at this consumer.
	EndToEnd *Latency `json:"end_to_end_ms,omitempty"`
	// CPU is this load generator's own user+system time over the measured
	// run (absent where the platform does not say).
	CPU *CPU `json:"load_generator_cpu,omitempty"`
}

func (s *stats) summary(sum Summary) Summary {
	s.mu.Lock()
	defer s.mu.Unlock()
	el := s.last.Sub(s.start).Seconds()
	if s.records == 0 || el <= 0 {
		el = time.Since(s.start).Seconds()
	}
	sum.Records, sum.Bytes, sum.Errors, sum.ElapsedSec = s.records, s.bytes, s.errors, el
	if s.firstErr != nil {
		sum.FirstError = s.firstErr.Error()
	}
	sum.RecordsPerS = float64(s.records) / el
	sum.MiBPerS = float64(s.bytes) / el / (1 << 20)
	sum.Latency = latencyOf(&s.lat)
	if s.e2e.Count() > 0 {
		e := latencyOf(&s.e2e)
		sum.EndToEnd = &e
	}
	sum.CPU = cpuSince(s.cpu0, s.records)
	return sum
}

// String is the human summary line.
func (s Summary) String() string {
	out := fmt.Sprintf("%s %s topic=%s", s.Mode, s.Transport, s.Topic)
	if s.Acks != nil {
		out += fmt.Sprintf(" acks=%d", *s.Acks)
	}
	if s.RecordSize > 0 {
		out += fmt.Sprintf(" record=%dB batch=%d", s.RecordSize, s.Batch)
	}
	out += fmt.Sprintf(" concurrency=%d", s.Concurrency)
	if s.Keyless {
		out += " keyless"
	}
	if s.TargetRate > 0 {
		out += fmt.Sprintf(" target=%.0f rec/s", s.TargetRate)
	}
	out += fmt.Sprintf("\n  %d records in %.2fs: %.1f records/s, %.2f MiB/s, %d errors", s.Records, s.ElapsedSec, s.RecordsPerS, s.MiBPerS, s.Errors)
	l := s.Latency
	out += fmt.Sprintf("\n  latency ms: mean %.2f p50 %.2f p95 %.2f p99 %.2f p99.9 %.2f max %.2f", l.Mean, l.P50, l.P95, l.P99, l.P999, l.Max)
	if e := s.EndToEnd; e != nil {
		out += fmt.Sprintf("\n  end-to-end ms: mean %.2f p50 %.2f p95 %.2f p99 %.2f p99.9 %.2f max %.2f", e.Mean, e.P50, e.P95, e.P99, e.P999, e.Max)
	}
	if c := s.CPU; c != nil {
		out += fmt.Sprintf("\n  load generator CPU: %.2fs (user %.2f + sys %.2f), %.2f cores, %.1f µs/record", c.Sec, c.UserSec, c.SysSec, c.Cores, c.PerRecordUS)
	}
	if s.FirstError != "" {
		out += "\n  first error: " + s.FirstError
	}
	return out
}
