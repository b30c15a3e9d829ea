package history

import (
	"fmt"
	"slices"
	"strings"
)

// Kind names one class of anomaly (doc.go defines each).
type Kind string

const (
	LostWrite          Kind = "lost-write"
	Unseen             Kind = "unseen"
	Duplicate          Kind = "duplicate"
	InconsistentOffset Kind = "inconsistent-offset"
	FailedWritten      Kind = "failed-written"
	NonmonotonicSend   Kind = "nonmonotonic-send"
	PollSkip           Kind = "poll-skip"
	NonmonotonicPoll   Kind = "nonmonotonic-poll"
	CommitBackwards    Kind = "commit-backwards"
	AbortedRead        Kind = "aborted-read"
	UncommittedRead    Kind = "uncommitted-read"
	Nonlinearizable    Kind = "nonlinearizable"
)

// Kinds lists every kind in the order the table prints them.
var Kinds = []Kind{LostWrite, Unseen, Duplicate, InconsistentOffset, FailedWritten, NonmonotonicSend,
	PollSkip, NonmonotonicPoll, CommitBackwards, AbortedRead, UncommittedRead, Nonlinearizable}

// Anomaly is one instance of a Kind.
type Anomaly struct {
	Kind      Kind
	Partition int32
	Offset    int64 // -1 when no single offset applies
	Value     string
	Detail    string
}

func (a Anomaly) String() string {
	at := fmt.Sprintf("p%d", a.Partition)
	if a.Offset >= 0 {
		at = fmt.Sprintf("p%d@%d", a.Partition, a.Offset)
	}
	if a.Value != "" {
		at += fmt.Sprintf(" %q", a.Value)
	}
	return at + ": " + a.Detail
}

// Verdict is the answer of the linearizability check of one partition.
type Verdict string

const (
	Linearizable Verdict = "linearizable"
	// NotLinearizable also adds a Nonlinearizable anomaly.
	NotLinearizable Verdict = "not-linearizable"
	// TimedOut: porcupine found no answer within the timeout.
	TimedOut Verdict = "unknown"
	// Skipped: more operations than Options.LinearizabilityMaxOps.
	Skipped Verdict = "skipped"
)

// Linearizability is the check of one partition.
type Linearizability struct {
	Partition int32
	Ops       int
	Verdict   Verdict
}

// Result is what Check found.
type Result struct {
	// Anomalies in the order of Kinds, then by partition and offset.
	Anomalies []Anomaly
	// Linearizability per partition, by partition.
	Linearizability []Linearizability
	// What the history held.
	Acknowledged, Unknown, NotWritten, Polls, Polled, Commits int
	// MaxExamples is how many examples of each kind String prints.
	MaxExamples int
}

// Valid reports whether no anomaly was found. A linearizability check that
// timed out or was skipped does not make a result invalid; it is printed.
func (r *Result) Valid() bool { return len(r.Anomalies) == 0 }

// Count answers how many anomalies of kind were found.
func (r *Result) Count(kind Kind) int {
	n := 0
	for _, a := range r.Anomalies {
		if a.Kind == kind {
			n++
		}
	}
	return n
}

// Of answers the anomalies of kind.
func (r *Result) Of(kind Kind) []Anomaly {
	var out []Anomaly
	for _, a := range r.Anomalies {
		if a.Kind == kind {
			out = append(out, a)
		}
	}
	return out
}

// Counts answers every kind's count, zeros included.
func (r *Result) Counts() map[Kind]int {
	out := map[Kind]int{}
	for _, k := range Kinds {
		out[k] = 0
	}
	for _, a := range r.Anomalies {
		out[a.Kind]++
	}
	return out
}

// String prints a compact table: the history's size, every kind with its
// count and up to MaxExamples examples, the linearizability verdicts and
// VALID or INVALID.
func (r *Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "history: %d acknowledged, %d unknown, %d not written; %d polls (%d records); %d commits\n",
		r.Acknowledged, r.Unknown, r.NotWritten, r.Polls, r.Polled, r.Commits)
	width := 0
	for _, k := range Kinds {
		width = max(width, len(k))
	}
	counts := r.Counts()
	for _, k := range Kinds {
		fmt.Fprintf(&b, "  %-*s %6d\n", width, k, counts[k])
		n := 0
		for _, a := range r.Anomalies {
			if a.Kind != k {
				continue
			}
			if n == r.MaxExamples {
				fmt.Fprintf(&b, "      … %d more\n", counts[k]-n)
				break
			}
			fmt.Fprintf(&b, "      %s\n", a)
			n++
		}
	}
	if len(r.Linearizability) > 0 {
		var parts []string
		for _, l := range r.Linearizability {
			parts = append(parts, fmt.Sprintf("p%d %s (%d ops)", l.Partition, l.Verdict, l.Ops))
		}
		fmt.Fprintf(&b, "linearizability: %s\n", strings.Join(parts, ", "))
	}
	if r.Valid() {
		b.WriteString("VALID\n")
	} else {
		fmt.Fprintf(&b, "INVALID: %d anomalies\n", len(r.Anomalies))
	}
	return b.String()
}

func (r *Result) add(a Anomaly) { r.Anomalies = append(r.Anomalies, a) }

// sortAnomalies orders anomalies by kind (as in Kinds), partition, offset,
// value and detail, so a result prints the same on every run.
func (r *Result) sortAnomalies() {
	rank := map[Kind]int{}
	for i, k := range Kinds {
		rank[k] = i
	}
	slices.SortStableFunc(r.Anomalies, func(a, b Anomaly) int {
		if c := rank[a.Kind] - rank[b.Kind]; c != 0 {
			return c
		}
		if a.Partition != b.Partition {
			return int(a.Partition) - int(b.Partition)
		}
		if a.Offset != b.Offset {
			if a.Offset < b.Offset {
				return -1
			}
			return 1
		}
		if c := strings.Compare(a.Value, b.Value); c != 0 {
			return c
		}
		return strings.Compare(a.Detail, b.Detail)
	})
}
