package history

import (
	"fmt"
	"slices"
	"sync"
	"time"

	skeinv1 "skein/gen/skein/v1"
)

// Send is one produce of one record.
type Send struct {
	// Producer names the writer (one sequential or pipelined producer):
	// nonmonotonic sends are judged per producer and partition.
	Producer  string
	Partition int32
	Value     string
	Outcome   Outcome
	// Offset is where the record was acknowledged; meaningful only when
	// Outcome is Written.
	Offset int64
	// Err describes a send that was not acknowledged.
	Err string
	// Txn is the id of the transaction the record belongs to ("" when it is
	// not transactional); a Txn entry says how that transaction ended.
	Txn string
	// Invoke is when the send was handed to the client, Complete when its
	// answer (or the give-up) came back.
	Invoke, Complete time.Time
}

func (s Send) String() string {
	at := fmt.Sprintf("p%d", s.Partition)
	if s.Outcome == Written {
		at = fmt.Sprintf("p%d@%d", s.Partition, s.Offset)
	}
	out := fmt.Sprintf("%s %q %s %s", s.Producer, s.Value, at, s.Outcome)
	if !s.Invoke.IsZero() {
		out += fmt.Sprintf(" at %s after %v", s.Invoke.Format("15:04:05.000"), s.Complete.Sub(s.Invoke).Round(time.Millisecond))
	}
	if s.Err != "" {
		out += ": " + s.Err
	}
	return out
}

// Record is one record a poll returned.
type Record struct {
	Partition int32
	Offset    int64
	Value     string
}

// Poll is one fetch by one consumer.
type Poll struct {
	// Consumer is the group member id, or the name of a standalone consumer.
	Consumer string
	// Group is "" for a standalone consumer, which reads what it asks for:
	// every partition counts as assigned to it and MemberEpoch is ignored.
	Group       string
	MemberEpoch int32
	// Assignment is the member's assigned partitions when it polled.
	Assignment []int32
	// Records in the order the poll returned them.
	Records []Record
	// ReadCommitted marks a read_committed consumer: only its polls are
	// checked for aborted and uncommitted reads.
	ReadCommitted bool
	// Err describes a failed poll (it returned nothing).
	Err              string
	Invoke, Complete time.Time
}

// Commit is one offset commit of one partition.
type Commit struct {
	Group       string
	Member      string
	MemberEpoch int32
	Partition   int32
	// Offset is the committed position: the next offset to read.
	Offset           int64
	OK               bool
	Err              string
	Invoke, Complete time.Time
}

// TxnOutcome is how a transaction ended.
type TxnOutcome int

const (
	// TxnUnknown: the commit or abort was sent without a definite answer.
	TxnUnknown TxnOutcome = iota
	TxnCommitted
	TxnAborted
)

func (o TxnOutcome) String() string {
	switch o {
	case TxnCommitted:
		return "committed"
	case TxnAborted:
		return "aborted"
	}
	return "unknown"
}

// Txn is the end of one transaction: its commit or abort call.
type Txn struct {
	ID               string
	Outcome          TxnOutcome
	Invoke, Complete time.Time
}

// History is what a test's clients saw, each list in recording order.
type History struct {
	Sends   []Send
	Polls   []Poll
	Commits []Commit
	Txns    []Txn
}

// Log is the final read of a topic after the run: per partition, offset →
// value. A partition missing from it is read as empty.
type Log map[int32]map[int64]string

// Recorder collects a History from many goroutines. The zero value is
// ready to use.
type Recorder struct {
	mu    sync.Mutex
	h     History
	acked map[int32]int
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{} }

// Send records one send.
func (r *Recorder) Send(s Send) {
	if s.Outcome != Written {
		s.Offset = -1
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Sends = append(r.h.Sends, s)
	if s.Outcome == Written {
		if r.acked == nil {
			r.acked = map[int32]int{}
		}
		r.acked[s.Partition]++
	}
}

// Acked records a send acknowledged at partition and offset.
func (r *Recorder) Acked(producer string, partition int32, value string, offset int64, invoke, complete time.Time) {
	r.Send(Send{Producer: producer, Partition: partition, Value: value, Outcome: Written, Offset: offset, Invoke: invoke, Complete: complete})
}

// Failed records a send that was not acknowledged, with what is known of
// it (NotWritten or Unknown) and why.
func (r *Recorder) Failed(producer string, partition int32, value string, outcome Outcome, why string, invoke, complete time.Time) {
	r.Send(Send{Producer: producer, Partition: partition, Value: value, Outcome: outcome, Err: why, Invoke: invoke, Complete: complete})
}

// SendErr records a send whose call failed with err, classified by
// ErrOutcome (a nil err here means the answer was lost: Unknown).
func (r *Recorder) SendErr(producer string, partition int32, value string, err error, invoke, complete time.Time) {
	o, why := ErrOutcome(err), "no answer"
	if err != nil {
		why = err.Error()
	}
	if o == Written {
		o = Unknown
	}
	r.Failed(producer, partition, value, o, why, invoke, complete)
}

// SendResult records the gateway's gRPC answer for one record: its
// partition, offset, error and outcome field.
func (r *Recorder) SendResult(producer, value string, res *skeinv1.ProduceResult, invoke, complete time.Time) {
	s := Send{Producer: producer, Partition: res.GetPartition(), Value: value, Outcome: ResultOutcome(res),
		Offset: res.GetOffset(), Invoke: invoke, Complete: complete}
	if s.Outcome != Written {
		s.Err = res.GetErrorCode().String()
		if m := res.GetMessage(); m != "" {
			s.Err += ": " + m
		}
	}
	r.Send(s)
}

// Poll records one poll (its slices are copied).
func (r *Recorder) Poll(p Poll) {
	p.Assignment = slices.Clone(p.Assignment)
	p.Records = slices.Clone(p.Records)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Polls = append(r.h.Polls, p)
}

// Commit records one offset commit.
func (r *Recorder) Commit(c Commit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Commits = append(r.h.Commits, c)
}

// Txn records the end of a transaction.
func (r *Recorder) Txn(t Txn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Txns = append(r.h.Txns, t)
}

// AckCount answers how many sends to partition were acknowledged so far.
func (r *Recorder) AckCount(partition int32) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.acked[partition]
}

// History answers a copy of everything recorded so far.
func (r *Recorder) History() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := History{Sends: slices.Clone(r.h.Sends), Polls: slices.Clone(r.h.Polls),
		Commits: slices.Clone(r.h.Commits), Txns: slices.Clone(r.h.Txns)}
	for i := range h.Polls {
		h.Polls[i].Assignment = slices.Clone(h.Polls[i].Assignment)
		h.Polls[i].Records = slices.Clone(h.Polls[i].Records)
	}
	return h
}

// Acks answers partition's acknowledged sends in recording order.
func (h History) Acks(partition int32) []Send {
	var out []Send
	for _, s := range h.Sends {
		if s.Outcome == Written && s.Partition == partition {
			out = append(out, s)
		}
	}
	return out
}

// Unacknowledged answers the sends that were not acknowledged (NotWritten
// or Unknown), in recording order.
func (h History) Unacknowledged() []Send {
	var out []Send
	for _, s := range h.Sends {
		if s.Outcome != Written {
			out = append(out, s)
		}
	}
	return out
}

// AckTimes answers when partition's acknowledgements arrived.
func (h History) AckTimes(partition int32) []time.Time {
	var out []time.Time
	for _, s := range h.Acks(partition) {
		out = append(out, s.Complete)
	}
	return out
}

// ReadTimes answers when polls that returned records of partition
// completed.
func (h History) ReadTimes(partition int32) []time.Time {
	var out []time.Time
	for _, p := range h.Polls {
		if slices.ContainsFunc(p.Records, func(r Record) bool { return r.Partition == partition }) {
			out = append(out, p.Complete)
		}
	}
	return out
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
