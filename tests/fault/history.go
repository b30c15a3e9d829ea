package fault

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// History records what the writers and readers of one test saw.
type History struct {
	mu    sync.Mutex
	acks  map[int32][]Ack // by partition, in the order they arrived
	fails []string
	reads map[int32][]time.Time // when a tailing reader received records, by partition
}

// Ack is one acknowledged record.
type Ack struct {
	Value  string
	Offset int64
	At     time.Time
}

// NewHistory returns an empty history.
func NewHistory() *History {
	return &History{acks: map[int32][]Ack{}, reads: map[int32][]time.Time{}}
}

// Acked records an acknowledgement.
func (h *History) Acked(partition int32, value string, offset int64, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.acks[partition] = append(h.acks[partition], Ack{value, offset, at})
}

// Failed records a write that was not acknowledged (its outcome may be
// unknown: it is allowed in the log at most once, never required).
func (h *History) Failed(what string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fails = append(h.fails, what)
}

// Read records that a reader received records of partition at at.
func (h *History) Read(partition int32, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reads[partition] = append(h.reads[partition], at)
}

// Acks answers a copy of partition's acknowledgements.
func (h *History) Acks(partition int32) []Ack {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.acks[partition])
}

// Fails answers the writes that were not acknowledged.
func (h *History) Fails() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.fails)
}

// AckCount answers how many acknowledgements partition has.
func (h *History) AckCount(partition int32) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.acks[partition])
}

// LongestGap answers the longest time without an event among times within
// [from, to], counting from from and up to the first event after to.
func LongestGap(times []time.Time, from, to time.Time) time.Duration {
	sorted := slices.Clone(times)
	slices.SortFunc(sorted, func(a, b time.Time) int { return a.Compare(b) })
	prev, longest := from, time.Duration(0)
	for _, at := range sorted {
		if at.Before(from) {
			continue
		}
		longest = max(longest, at.Sub(prev))
		prev = at
		if at.After(to) {
			return longest
		}
	}
	return max(longest, to.Sub(prev))
}

// AckTimes answers when partition's acknowledgements arrived.
func (h *History) AckTimes(partition int32) []time.Time {
	var out []time.Time
	for _, a := range h.Acks(partition) {
		out = append(out, a.At)
	}
	return out
}

// ReadTimes answers when a reader received records of partition.
func (h *History) ReadTimes(partition int32) []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.reads[partition])
}

// CheckLog audits one partition's log against its acknowledgements: every
// acknowledged value is at its offset, no value is in the log twice (an
// unacknowledged write at most once), no offset holds two records.
func (h *History) CheckLog(t testing.TB, partition int32, log map[int64]string) {
	t.Helper()
	seen := map[string]int64{}
	for off, v := range log {
		if prev, dup := seen[v]; dup {
			t.Errorf("partition %d: %q at offsets %d and %d", partition, v, prev, off)
		}
		seen[v] = off
	}
	lost := 0
	for _, a := range h.Acks(partition) {
		if log[a.Offset] != a.Value {
			lost++
			if lost <= 10 {
				t.Errorf("partition %d: acknowledged %q at offset %d; the log has %q there", partition, a.Value, a.Offset, log[a.Offset])
			}
		}
	}
	if lost > 0 {
		t.Errorf("partition %d: %d of %d acknowledged records lost", partition, lost, h.AckCount(partition))
	}
}

func (a Ack) String() string { return fmt.Sprintf("%s@%d", a.Value, a.Offset) }
