package history

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// at is t0 plus ms milliseconds.
func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func ack(producer string, p int32, v string, off int64, from, to int) Send {
	return Send{Producer: producer, Partition: p, Value: v, Outcome: Written, Offset: off, Invoke: at(from), Complete: at(to)}
}

func recs(p int32, from int64, values ...string) []Record {
	var out []Record
	for i, v := range values {
		out = append(out, Record{p, from + int64(i), v})
	}
	return out
}

func member(id string, epoch int32, assigned []int32, records []Record, from, to int) Poll {
	return Poll{Consumer: id, Group: "g", MemberEpoch: epoch, Assignment: assigned, Records: records, Invoke: at(from), Complete: at(to)}
}

func tail(name string, records []Record, from, to int) Poll {
	return Poll{Consumer: name, Records: records, Invoke: at(from), Complete: at(to)}
}

// clean is a history without anomalies: producer a writes a-0..a-4 to
// partition 0, b writes b-0, b-1 to partition 1; a-5's outcome is unknown
// and it never landed, a-6 was refused, a-7's outcome is unknown and it is
// at offset 5. Member m1 of group g reads both partitions to the end and
// commits; a standalone tail reads partition 0.
func clean() (History, Log) {
	h := History{
		Sends: []Send{
			ack("a", 0, "a-0", 0, 0, 10),
			ack("b", 1, "b-0", 0, 0, 12),
			ack("a", 0, "a-1", 1, 10, 20),
			ack("a", 0, "a-2", 2, 20, 30),
			ack("b", 1, "b-1", 1, 12, 25),
			ack("a", 0, "a-3", 3, 30, 40),
			ack("a", 0, "a-4", 4, 40, 50),
			{Producer: "a", Partition: 0, Value: "a-5", Outcome: Unknown, Err: "REQUEST_TIMED_OUT", Invoke: at(50), Complete: at(90)},
			{Producer: "a", Partition: 0, Value: "a-6", Outcome: NotWritten, Err: "NOT_ENOUGH_REPLICAS", Invoke: at(90), Complete: at(95)},
			{Producer: "a", Partition: 0, Value: "a-7", Outcome: Unknown, Err: "connection reset", Invoke: at(95), Complete: at(130)},
		},
		Polls: []Poll{
			member("m1", 1, []int32{0, 1}, append(recs(0, 0, "a-0", "a-1", "a-2"), recs(1, 0, "b-0")...), 30, 35),
			member("m1", 1, []int32{0, 1}, nil, 36, 37),
			member("m1", 1, []int32{0, 1}, append(recs(0, 3, "a-3", "a-4"), recs(1, 1, "b-1")...), 50, 55),
			member("m1", 1, []int32{0, 1}, recs(0, 5, "a-7"), 140, 150),
			tail("tail", recs(0, 0, "a-0", "a-1"), 20, 25),
			tail("tail", recs(0, 2, "a-2", "a-3", "a-4", "a-7"), 140, 145),
		},
		Commits: []Commit{
			{Group: "g", Member: "m1", MemberEpoch: 1, Partition: 0, Offset: 3, OK: true, Invoke: at(36), Complete: at(38)},
			{Group: "g", Member: "m1", MemberEpoch: 1, Partition: 1, Offset: 1, OK: true, Invoke: at(36), Complete: at(38)},
			{Group: "g", Member: "m1", MemberEpoch: 1, Partition: 0, Offset: 1, OK: false, Err: "FENCED_MEMBER_EPOCH", Invoke: at(56), Complete: at(57)},
			{Group: "g", Member: "m1", MemberEpoch: 1, Partition: 0, Offset: 5, OK: true, Invoke: at(56), Complete: at(58)},
			{Group: "g", Member: "m1", MemberEpoch: 1, Partition: 1, Offset: 2, OK: true, Invoke: at(56), Complete: at(58)},
			{Group: "g", Member: "m1", MemberEpoch: 1, Partition: 0, Offset: 6, OK: true, Invoke: at(151), Complete: at(152)},
		},
	}
	log := Log{
		0: {0: "a-0", 1: "a-1", 2: "a-2", 3: "a-3", 4: "a-4", 5: "a-7"},
		1: {0: "b-0", 1: "b-1"},
	}
	return h, log
}

// counts is every nonzero count of a result.
func counts(r *Result) map[Kind]int {
	out := map[Kind]int{}
	for k, n := range r.Counts() {
		if n > 0 {
			out[k] = n
		}
	}
	return out
}

func TestCleanHistoryIsValid(t *testing.T) {
	h, log := clean()
	r := Check(h, log, Options{})
	if !r.Valid() {
		t.Fatalf("a clean history is invalid:\n%s", r)
	}
	if r.Acknowledged != 7 || r.Unknown != 2 || r.NotWritten != 1 || r.Polls != 6 || r.Polled != 14 || r.Commits != 6 {
		t.Errorf("summary %d/%d/%d, %d polls %d records, %d commits", r.Acknowledged, r.Unknown, r.NotWritten, r.Polls, r.Polled, r.Commits)
	}
	want := []Linearizability{{0, 18, Linearizable}, {1, 4, Linearizable}}
	if fmt.Sprint(r.Linearizability) != fmt.Sprint(want) {
		t.Errorf("linearizability %v, want %v", r.Linearizability, want)
	}
	if s := r.String(); !strings.Contains(s, "VALID") || strings.Contains(s, "INVALID") {
		t.Errorf("table:\n%s", s)
	}
}

// Each case changes the clean history so that it holds one anomaly (and
// the ones that necessarily come with it): a checker that always passes,
// or that misses a kind, fails here.
func TestEachAnomalyIsFound(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(h *History, log Log)
		want   map[Kind]int
		// example is a part of the first example of the first kind in want.
		example string
	}{
		{"an acknowledged record missing from the log",
			func(h *History, log Log) { delete(log[0], 2) },
			map[Kind]int{LostWrite: 1}, `p0@2 "a-2": acknowledged to a; the log has nothing there`},
		{"an acknowledged record replaced in the log",
			func(h *History, log Log) { log[0][4] = "x" },
			map[Kind]int{LostWrite: 1, InconsistentOffset: 1}, `the log has "x" there`},
		{"an acknowledged record at another offset of the log",
			func(h *History, log Log) { delete(log[1], 1); log[1][2] = "b-1" },
			map[Kind]int{LostWrite: 1, Duplicate: 1}, `(the value is at p1@2)`},
		{"a record no member of the group polled across a rebalance",
			func(h *History, log Log) {
				h.Polls[2] = member("m2", 2, []int32{0, 1}, append(recs(0, 4, "a-4"), recs(1, 1, "b-1")...), 50, 55)
				h.Polls[3].Consumer, h.Polls[3].MemberEpoch = "m2", 2
			},
			map[Kind]int{Unseen: 1}, `p0@3 "a-3": acknowledged to a; group g read p0 up to 6 and never saw it`},
		{"a record the standalone consumer did not poll",
			func(h *History, log Log) { h.Polls[5].Records = recs(0, 4, "a-4", "a-7") },
			map[Kind]int{Unseen: 2, PollSkip: 1}, `consumer tail read p0 up to 6`},
		{"a value at two offsets of the log",
			func(h *History, log Log) { log[0][6] = "a-1" },
			map[Kind]int{Duplicate: 1}, `p0@1 "a-1": at p0@1 (log, ack:a, poll:m1, poll:tail) and p0@6 (log)`},
		{"a value in two partitions",
			func(h *History, log Log) { log[1][2] = "a-0" },
			map[Kind]int{Duplicate: 1}, `and p1@2 (log)`},
		{"two values polled at one offset",
			func(h *History, log Log) { h.Polls = append(h.Polls, tail("tail2", recs(0, 0, "zz"), 60, 70)) },
			map[Kind]int{InconsistentOffset: 1, Unseen: 1}, `p0@0: values "a-0" (log, ack:a, poll:m1, poll:tail) and "zz" (poll:tail2)`},
		{"two sends acknowledged at one offset",
			func(h *History, log Log) { h.Sends = append(h.Sends, ack("c", 1, "c-0", 1, 30, 40)) },
			map[Kind]int{InconsistentOffset: 1, LostWrite: 1}, `p1@1: values "b-1" (log, ack:b, poll:m1) and "c-0" (ack:c)`},
		{"a refused send in the log",
			func(h *History, log Log) { log[0][6] = "a-6" },
			map[Kind]int{FailedWritten: 1}, `p0@6 "a-6": answered NOT_WRITTEN to a (NOT_ENOUGH_REPLICAS), in the final log`},
		{"a refused send polled",
			func(h *History, log Log) {
				h.Polls = append(h.Polls, tail("tail2", append(recs(0, 0, "a-0", "a-1", "a-2", "a-3", "a-4", "a-7"), Record{0, 6, "a-6"}), 160, 170))
			},
			map[Kind]int{FailedWritten: 1}, `p0 "a-6": answered NOT_WRITTEN to a (NOT_ENOUGH_REPLICAS), polled`},
		{"a producer's later send acknowledged at a lower offset",
			func(h *History, log Log) {
				h.Sends = append(h.Sends, ack("c", 1, "c-0", 3, 30, 40), ack("c", 1, "c-1", 2, 40, 45))
				log[1][2], log[1][3] = "c-1", "c-0"
			},
			map[Kind]int{NonmonotonicSend: 1}, `p1@2 "c-1": c sent it after "c-0", acknowledged at 3`},
		{"a producer's later send acknowledged at the same offset",
			func(h *History, log Log) {
				h.Sends = append(h.Sends, ack("c", 1, "c-0", 2, 30, 40), ack("c", 1, "c-1", 2, 40, 45))
				log[1][2] = "c-0"
			},
			map[Kind]int{NonmonotonicSend: 1, InconsistentOffset: 1, LostWrite: 1}, `c sent it after "c-0", acknowledged at 2`},
		{"a member skipping a record in its assignment",
			func(h *History, log Log) { h.Polls[2].Records = append(recs(0, 4, "a-4"), recs(1, 1, "b-1")...) },
			map[Kind]int{PollSkip: 1, Unseen: 1}, `p0@3: member m1 of g at epoch 1 polled 2 then 4; the log holds 1 between`},
		{"a member skipping within one poll",
			func(h *History, log Log) {
				h.Polls[0].Records = append(recs(0, 0, "a-0"), Record{0, 2, "a-2"}, Record{1, 0, "b-0"})
			},
			map[Kind]int{PollSkip: 1, Unseen: 1}, `polled 0 then 2`},
		{"a member going back within its assignment",
			func(h *History, log Log) {
				h.Polls[2].Records = append(recs(0, 2, "a-2", "a-3", "a-4"), recs(1, 1, "b-1")...)
			},
			map[Kind]int{NonmonotonicPoll: 1}, `p0@2 "a-2": member m1 of g at epoch 1 polled it after offset 2`},
		{"a standalone consumer going back",
			func(h *History, log Log) { h.Polls[5].Records = recs(0, 0, "a-0", "a-1", "a-2", "a-3", "a-4", "a-7") },
			map[Kind]int{NonmonotonicPoll: 1}, `p0@0 "a-0": tail polled it after offset 1`},
		{"a commit below one that had completed",
			func(h *History, log Log) {
				h.Commits = append(h.Commits, Commit{Group: "g", Member: "m2", MemberEpoch: 2, Partition: 0, Offset: 4, OK: true, Invoke: at(160), Complete: at(161)})
			},
			map[Kind]int{CommitBackwards: 1}, `p0@4: group g: m2 (epoch 2) committed 4 after m1 (epoch 1) had committed 6`},
		{"a read_committed poll of an aborted transaction",
			func(h *History, log Log) {
				h.Sends = append(h.Sends, Send{Producer: "t", Partition: 1, Value: "t-0", Outcome: Written, Offset: 2, Txn: "t1", Invoke: at(60), Complete: at(61)})
				h.Txns = append(h.Txns, Txn{ID: "t1", Outcome: TxnAborted, Invoke: at(62), Complete: at(63)})
				h.Polls = append(h.Polls, Poll{Consumer: "rc", ReadCommitted: true, Records: recs(1, 0, "b-0", "b-1", "t-0"), Invoke: at(70), Complete: at(71)})
				log[1][2] = "t-0"
			},
			map[Kind]int{AbortedRead: 1}, `p1@2 "t-0": rc read it; transaction t1 aborted`},
		{"a read_committed poll before the commit",
			func(h *History, log Log) {
				h.Sends = append(h.Sends, Send{Producer: "t", Partition: 1, Value: "t-0", Outcome: Written, Offset: 2, Txn: "t1", Invoke: at(60), Complete: at(61)})
				h.Txns = append(h.Txns, Txn{ID: "t1", Outcome: TxnCommitted, Invoke: at(80), Complete: at(81)})
				h.Polls = append(h.Polls, Poll{Consumer: "rc", ReadCommitted: true, Records: recs(1, 0, "b-0", "b-1", "t-0"), Invoke: at(70), Complete: at(71)})
				log[1][2] = "t-0"
			},
			map[Kind]int{UncommittedRead: 1}, `rc read it before transaction t1 was committed`},
		{"a read_committed poll of a transaction that never ended",
			func(h *History, log Log) {
				h.Sends = append(h.Sends, Send{Producer: "t", Partition: 1, Value: "t-0", Outcome: Written, Offset: 2, Txn: "t1", Invoke: at(60), Complete: at(61)})
				h.Polls = append(h.Polls, Poll{Consumer: "rc", ReadCommitted: true, Records: recs(1, 0, "b-0", "b-1", "t-0"), Invoke: at(70), Complete: at(71)})
				log[1][2] = "t-0"
			},
			map[Kind]int{UncommittedRead: 1}, `transaction t1 never ended`},
		{"a committed transaction's record a read_committed consumer passed over",
			func(h *History, log Log) {
				h.Sends = append(h.Sends, Send{Producer: "t", Partition: 1, Value: "t-0", Outcome: Written, Offset: 2, Txn: "t1", Invoke: at(60), Complete: at(61)},
					ack("b", 1, "b-2", 4, 62, 63))
				h.Txns = append(h.Txns, Txn{ID: "t1", Outcome: TxnCommitted, Invoke: at(62), Complete: at(64)})
				h.Polls = append(h.Polls, Poll{Consumer: "rc", ReadCommitted: true, Records: append(recs(1, 0, "b-0", "b-1"), Record{1, 4, "b-2"}), Invoke: at(70), Complete: at(71)})
				log[1][2], log[1][4] = "t-0", "b-2" // 3: the commit marker, not read
			},
			map[Kind]int{Unseen: 1, PollSkip: 1}, `p1@2 "t-0": acknowledged to t; consumer rc read p1 up to 5`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, log := clean()
			tc.change(&h, log)
			r := Check(h, log, Options{LinearizabilityMaxOps: -1, MaxExamples: 10})
			want := maps.Clone(tc.want)
			maps.DeleteFunc(want, func(_ Kind, n int) bool { return n == 0 })
			if got := counts(r); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("counts %v, want %v\n%s", got, want, r)
			}
			if r.Valid() {
				t.Errorf("Valid() with anomalies:\n%s", r)
			}
			if len(r.Anomalies) > 0 && !strings.Contains(r.Anomalies[0].String(), tc.example) &&
				!strings.Contains(r.String(), tc.example) {
				t.Errorf("no example with %q:\n%s", tc.example, r)
			}
		})
	}
}

// Histories that look close to an anomaly but are legal.
func TestLegalHistoriesPass(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(h *History, log Log)
	}{
		{"nothing polled: nothing is unseen", func(h *History, log Log) { h.Polls = nil }},
		{"a consumer that stopped early answers only for what it passed", func(h *History, log Log) {
			h.Polls = []Poll{tail("tail", recs(0, 0, "a-0", "a-1"), 20, 25)}
		}},
		{"an unknown send retried under the same value that landed once", func(h *History, log Log) {
			h.Sends = append(h.Sends, Send{Producer: "a", Partition: 0, Value: "a-7", Outcome: Unknown, Invoke: at(96), Complete: at(131)})
		}},
		{"a re-delivery after the member epoch changed", func(h *History, log Log) {
			h.Polls[2] = member("m1", 2, []int32{0, 1}, append(recs(0, 1, "a-1", "a-2", "a-3", "a-4"), recs(1, 1, "b-1")...), 50, 55)
			h.Polls[3].MemberEpoch = 2
		}},
		{"a re-delivery after the partition was revoked and given back", func(h *History, log Log) {
			h.Polls = append(h.Polls[:2:2], append([]Poll{member("m1", 1, []int32{1}, nil, 40, 41)}, h.Polls[2:]...)...)
			h.Polls[3].Records = append(recs(0, 0, "a-0", "a-1", "a-2", "a-3", "a-4"), recs(1, 1, "b-1")...)
		}},
		{"a gap over offsets the log does not hold", func(h *History, log Log) {
			log[0] = map[int64]string{0: "a-0", 1: "a-1", 2: "a-2", 3: "a-3", 5: "a-4", 6: "a-7"} // 4: a control record
			for i := range h.Sends {
				if h.Sends[i].Value == "a-4" {
					h.Sends[i].Offset = 5
				}
			}
			h.Polls[2].Records = []Record{{0, 3, "a-3"}, {0, 5, "a-4"}, {1, 1, "b-1"}}
			h.Polls[3].Records = []Record{{0, 6, "a-7"}}
			h.Polls[5].Records = []Record{{0, 2, "a-2"}, {0, 3, "a-3"}, {0, 5, "a-4"}, {0, 6, "a-7"}}
		}},
		{"overlapping commits that complete out of order", func(h *History, log Log) {
			h.Commits = append(h.Commits,
				Commit{Group: "g", Member: "m1", MemberEpoch: 1, Partition: 1, Offset: 3, OK: true, Invoke: at(160), Complete: at(170)},
				Commit{Group: "g", Member: "m1", MemberEpoch: 1, Partition: 1, Offset: 2, OK: true, Invoke: at(161), Complete: at(165)})
		}},
		{"failed commits may go backwards", func(h *History, log Log) {
			h.Commits = append(h.Commits, Commit{Group: "g", Member: "m1", Partition: 0, Offset: 0, Invoke: at(200), Complete: at(201)})
		}},
		{"another group commits its own offsets", func(h *History, log Log) {
			h.Commits = append(h.Commits, Commit{Group: "g2", Member: "x", Partition: 0, Offset: 1, OK: true, Invoke: at(200), Complete: at(201)})
		}},
		{"a read_uncommitted consumer may read an aborted transaction", func(h *History, log Log) {
			h.Sends = append(h.Sends, Send{Producer: "t", Partition: 1, Value: "t-0", Outcome: Written, Offset: 2, Txn: "t1", Invoke: at(60), Complete: at(61)})
			h.Txns = append(h.Txns, Txn{ID: "t1", Outcome: TxnAborted, Invoke: at(62), Complete: at(63)})
			h.Polls = append(h.Polls, Poll{Consumer: "ru", Records: recs(1, 0, "b-0", "b-1", "t-0"), Invoke: at(70), Complete: at(71)})
			log[1][2] = "t-0"
		}},
		{"a read_committed consumer reads a committed transaction and passes an aborted one", func(h *History, log Log) {
			h.Sends = append(h.Sends,
				Send{Producer: "t", Partition: 1, Value: "t-0", Outcome: Written, Offset: 2, Txn: "t1", Invoke: at(60), Complete: at(61)},
				Send{Producer: "t", Partition: 1, Value: "t-1", Outcome: Written, Offset: 4, Txn: "t2", Invoke: at(70), Complete: at(71)})
			h.Txns = append(h.Txns, Txn{ID: "t1", Outcome: TxnCommitted, Invoke: at(62), Complete: at(63)},
				Txn{ID: "t2", Outcome: TxnAborted, Invoke: at(72), Complete: at(73)})
			h.Polls = append(h.Polls, Poll{Consumer: "rc", ReadCommitted: true, Records: recs(1, 0, "b-0", "b-1", "t-0"), Invoke: at(80), Complete: at(81)})
			log[1][2], log[1][4] = "t-0", "t-1" // 3 and 5: markers, not read
		}},
		{"a failed poll changes nothing", func(h *History, log Log) {
			h.Polls = append(h.Polls, Poll{Consumer: "m1", Group: "g", MemberEpoch: 9, Err: "NOT_COORDINATOR", Invoke: at(51), Complete: at(52)})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, log := clean()
			tc.change(&h, log)
			if r := Check(h, log, Options{}); !r.Valid() {
				t.Errorf("invalid:\n%s", r)
			}
		})
	}
}

func TestMissingPartitionIsReadAsEmpty(t *testing.T) {
	h, log := clean()
	delete(log, 1)
	r := Check(h, log, Options{LinearizabilityMaxOps: -1})
	if n := r.Count(LostWrite); n != 2 {
		t.Errorf("%d lost writes, want b-0 and b-1:\n%s", n, r)
	}
	r = Check(h, nil, Options{LinearizabilityMaxOps: -1})
	if n := r.Count(LostWrite); n != 7 {
		t.Errorf("%d lost writes against no log, want all 7:\n%s", n, r)
	}
}

func TestEmptyHistoryIsValid(t *testing.T) {
	if r := Check(History{}, nil, Options{}); !r.Valid() || len(r.Linearizability) != 0 {
		t.Errorf("%s", r)
	}
}
