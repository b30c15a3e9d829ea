package history

import (
	"fmt"
	"testing"
	"time"
)

func linOnly(t *testing.T, h History, log Log, opts Options) *Result {
	t.Helper()
	r := Check(h, log, opts)
	for _, a := range r.Anomalies {
		if a.Kind != Nonlinearizable {
			t.Errorf("unexpected %s", a)
		}
	}
	return r
}

func TestLinearizableHistories(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    History
		log  Log
	}{
		{"concurrent sends acknowledged in either order", History{
			Sends: []Send{ack("a", 0, "a", 1, 0, 10), ack("b", 0, "b", 0, 0, 10), ack("c", 0, "c", 2, 5, 20)},
			Polls: []Poll{tail("t", recs(0, 0, "b"), 5, 15), tail("t", recs(0, 1, "a", "c"), 16, 30)},
		}, Log{0: {0: "b", 1: "a", 2: "c"}}},
		{"an unknown send read later, and one never seen", History{
			Sends: []Send{
				ack("a", 0, "a-0", 0, 0, 10),
				{Producer: "a", Partition: 0, Value: "a-1", Outcome: Unknown, Invoke: at(10), Complete: at(20)},
				{Producer: "a", Partition: 0, Value: "a-2", Outcome: Unknown, Invoke: at(20), Complete: at(30)},
				ack("b", 0, "b-0", 2, 40, 50),
			},
			Polls: []Poll{tail("t", recs(0, 0, "a-0", "a-1"), 100, 110)},
		}, Log{0: {0: "a-0", 1: "a-1", 2: "b-0"}}},
		{"an unknown send that took effect after it gave up", History{
			Sends: []Send{
				{Producer: "a", Partition: 0, Value: "a-0", Outcome: Unknown, Invoke: at(0), Complete: at(10)},
				ack("b", 0, "b-0", 0, 20, 30),
			},
		}, Log{0: {0: "b-0", 1: "a-0"}}},
		{"sparse offsets (control records between)", History{
			Sends: []Send{ack("a", 0, "a-0", 0, 0, 10), ack("a", 0, "a-1", 2, 10, 20)},
			Polls: []Poll{tail("t", []Record{{0, 0, "a-0"}, {0, 2, "a-1"}}, 30, 40)},
		}, Log{0: {0: "a-0", 2: "a-1"}}},
		{"a read concurrent with the send it reads", History{
			Sends: []Send{ack("a", 0, "a-0", 0, 0, 10)},
			Polls: []Poll{tail("t", recs(0, 0, "a-0"), 5, 6)},
		}, Log{0: {0: "a-0"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := linOnly(t, tc.h, tc.log, Options{})
			if len(r.Linearizability) != 1 || r.Linearizability[0].Verdict != Linearizable {
				t.Errorf("%v\n%s", r.Linearizability, r)
			}
		})
	}
}

// Each history here breaks linearizability and nothing else the checker
// looks at, so only porcupine can catch it.
func TestNonLinearizableHistories(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    History
		log  Log
	}{
		{"a later send of another producer at a lower offset", History{
			Sends: []Send{ack("a", 0, "a", 1, 0, 10), ack("b", 0, "b", 0, 20, 30)},
		}, Log{0: {0: "b", 1: "a"}}},
		{"a read before the send was invoked", History{
			Sends: []Send{ack("a", 0, "a", 0, 10, 20)},
			Polls: []Poll{tail("t", recs(0, 0, "a"), 0, 5)},
		}, Log{0: {0: "a"}}},
		{"a read of an offset the log had not reached", History{
			Sends: []Send{ack("a", 0, "a-0", 0, 0, 10), ack("a", 0, "a-1", 1, 30, 40)},
			Polls: []Poll{tail("t", recs(0, 0, "a-0", "a-1"), 15, 20)},
		}, Log{0: {0: "a-0", 1: "a-1"}}},
		{"a value no send wrote", History{
			Sends: []Send{ack("a", 0, "a-0", 0, 0, 10)},
			Polls: []Poll{tail("t", recs(0, 0, "a-0", "ghost"), 15, 20)},
		}, Log{0: {0: "a-0", 1: "ghost"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := linOnly(t, tc.h, tc.log, Options{})
			if len(r.Linearizability) != 1 || r.Linearizability[0].Verdict != NotLinearizable {
				t.Errorf("%v\n%s", r.Linearizability, r)
			}
			if r.Count(Nonlinearizable) != 1 || r.Valid() {
				t.Errorf("no nonlinearizable anomaly:\n%s", r)
			}
		})
	}
}

func TestLinearizabilityPerPartition(t *testing.T) {
	h := History{Sends: []Send{
		ack("a", 0, "a", 1, 0, 10), ack("b", 0, "b", 0, 20, 30), // p0: not linearizable
		ack("a", 1, "c", 1, 0, 10), ack("b", 1, "d", 2, 20, 30), // p1: fine
	}}
	r := linOnly(t, h, Log{0: {0: "b", 1: "a"}, 1: {1: "c", 2: "d"}}, Options{})
	want := []Linearizability{{0, 2, NotLinearizable}, {1, 2, Linearizable}}
	if fmt.Sprint(r.Linearizability) != fmt.Sprint(want) {
		t.Errorf("%v, want %v", r.Linearizability, want)
	}
	if as := r.Of(Nonlinearizable); len(as) != 1 || as[0].Partition != 0 {
		t.Errorf("%v", as)
	}
}

// wide is a partition of n concurrent sends, all acknowledged, read in an
// order that contradicts the last one: porcupine has to try many orders.
func wide(n int) (History, Log) {
	var h History
	log := Log{0: {}}
	for i := range n {
		v := fmt.Sprintf("v%d", i)
		h.Sends = append(h.Sends, Send{Producer: v, Partition: 0, Value: v, Outcome: Unknown, Invoke: at(0), Complete: at(10)})
		h.Polls = append(h.Polls, tail("t", recs(0, int64(i), v), 0, 1000))
		log[0][int64(i)] = v
	}
	return h, log
}

func TestLinearizabilityTooLargeIsSkipped(t *testing.T) {
	h, log := wide(20)
	r := Check(h, log, Options{LinearizabilityMaxOps: 39})
	if want := []Linearizability{{0, 40, Skipped}}; fmt.Sprint(r.Linearizability) != fmt.Sprint(want) {
		t.Errorf("%v, want %v", r.Linearizability, want)
	}
	if !r.Valid() {
		t.Errorf("a skipped check is not an anomaly:\n%s", r)
	}
	if r := Check(h, log, Options{LinearizabilityMaxOps: -1}); len(r.Linearizability) != 0 {
		t.Errorf("check off: %v", r.Linearizability)
	}
}

func TestLinearizabilityTimeoutIsUnknown(t *testing.T) {
	h, log := wide(200)
	// A send of a value read at offset 0 that begins after every read ended:
	// no order fits, and porcupine must try a great many to know it.
	h.Sends = append(h.Sends, ack("late", 0, "v0", 0, 2000, 2010))
	r := Check(h, log, Options{LinearizabilityMaxOps: 1000, LinearizabilityTimeout: time.Nanosecond})
	if len(r.Linearizability) != 1 || r.Linearizability[0].Verdict != TimedOut {
		t.Fatalf("%v", r.Linearizability)
	}
	if r.Count(Nonlinearizable) != 0 {
		t.Errorf("a timeout is not a violation:\n%s", r)
	}
	if s := r.String(); !containsAll(s, "p0 unknown (400 ops)") {
		t.Errorf("table:\n%s", s)
	}
}
