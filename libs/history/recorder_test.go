package history

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"skein/libs/errs"

	skeinv1 "skein/gen/skein/v1"
)

func TestRecorderIsSafeForConcurrentUse(t *testing.T) {
	r := NewRecorder()
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := int32(w % 2)
			producer := fmt.Sprintf("w%d", w)
			for i := range each {
				v := fmt.Sprintf("%s-%d", producer, i)
				switch i % 4 {
				case 0, 1:
					r.Acked(producer, p, v, int64(w*each+i), at(i), at(i+1))
				case 2:
					r.Failed(producer, p, v, Unknown, "timeout", at(i), at(i+1))
				case 3:
					r.Poll(Poll{Consumer: producer, Records: []Record{{p, int64(i), v}}, Invoke: at(i), Complete: at(i + 1)})
					r.Commit(Commit{Group: "g", Member: producer, Partition: p, Offset: int64(i), OK: true})
				}
				_ = r.AckCount(p)
				_ = r.History()
			}
		}()
	}
	wg.Wait()
	h := r.History()
	if len(h.Sends) != writers*each*3/4 || len(h.Polls) != writers*each/4 || len(h.Commits) != writers*each/4 {
		t.Errorf("%d sends, %d polls, %d commits", len(h.Sends), len(h.Polls), len(h.Commits))
	}
	if n := r.AckCount(0) + r.AckCount(1); n != writers*each/2 || len(h.Acks(0))+len(h.Acks(1)) != n {
		t.Errorf("%d acknowledged", n)
	}
	if n := len(h.Unacknowledged()); n != writers*each/4 {
		t.Errorf("%d unacknowledged", n)
	}
}

func TestRecorderCopies(t *testing.T) {
	var r Recorder // the zero value works
	recs := []Record{{0, 0, "a"}}
	assigned := []int32{0}
	r.Poll(Poll{Consumer: "c", Group: "g", Assignment: assigned, Records: recs})
	recs[0].Value, assigned[0] = "changed", 9
	h := r.History()
	if h.Polls[0].Records[0].Value != "a" || h.Polls[0].Assignment[0] != 0 {
		t.Errorf("the recorder kept the caller's slices: %+v", h.Polls[0])
	}
	h.Polls[0].Records[0].Value = "changed"
	if r.History().Polls[0].Records[0].Value != "a" {
		t.Error("History shares the recorder's slices")
	}
	r.Acked("p", 0, "a", 0, at(0), at(1))
	if r.AckCount(0) != 1 || r.AckCount(1) != 0 {
		t.Errorf("ack counts %d %d", r.AckCount(0), r.AckCount(1))
	}
}

func TestRecorderSendHelpers(t *testing.T) {
	r := NewRecorder()
	r.SendResult("g", "a", &skeinv1.ProduceResult{Partition: 2, Offset: 7}, at(0), at(1))
	r.SendResult("g", "b", &skeinv1.ProduceResult{Partition: 2, Offset: -1, ErrorCode: skeinv1.ErrorCode_NOT_ENOUGH_REPLICAS,
		Message: "isr 1 < 2", Outcome: skeinv1.ProduceOutcome_NOT_WRITTEN}, at(1), at(2))
	r.SendResult("g", "c", &skeinv1.ProduceResult{Partition: 2, Offset: -1, ErrorCode: skeinv1.ErrorCode_REQUEST_TIMED_OUT,
		Outcome: skeinv1.ProduceOutcome_UNKNOWN}, at(2), at(3))
	r.SendErr("g", 2, "d", context.DeadlineExceeded, at(3), at(4))
	r.SendErr("g", 2, "e", errs.Errorf(errs.NotEnoughReplicas, "isr 1"), at(4), at(5))
	r.SendErr("g", 2, "f", nil, at(5), at(6))
	r.Send(Send{Producer: "g", Partition: 2, Value: "h", Outcome: NotWritten, Offset: 12})
	var got []string
	for _, s := range r.History().Sends {
		got = append(got, fmt.Sprintf("%s %s %d %q", s.Value, s.Outcome, s.Offset, s.Err))
	}
	want := []string{
		`a WRITTEN 7 ""`,
		`b NOT_WRITTEN -1 "NOT_ENOUGH_REPLICAS: isr 1 < 2"`,
		`c UNKNOWN -1 "REQUEST_TIMED_OUT"`,
		`d UNKNOWN -1 "context deadline exceeded"`,
		`e NOT_WRITTEN -1 "NOT_ENOUGH_REPLICAS: isr 1"`,
		`f UNKNOWN -1 "no answer"`,
		`h NOT_WRITTEN -1 ""`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	if s := r.History().Sends[1].String(); s != `g "b" p2 NOT_WRITTEN at 03:04:05.001 after 1ms: NOT_ENOUGH_REPLICAS: isr 1 < 2` {
		t.Errorf("%s", s)
	}
	if s := r.History().Sends[0].String(); s != `g "a" p2@7 WRITTEN at 03:04:05.000 after 1ms` {
		t.Errorf("%s", s)
	}
}

func TestTimesOfAcksAndReads(t *testing.T) {
	h := History{
		Sends: []Send{ack("a", 0, "a-0", 0, 0, 10), ack("a", 1, "b-0", 0, 0, 11), ack("a", 0, "a-1", 1, 10, 20),
			{Partition: 0, Value: "a-2", Outcome: Unknown, Invoke: at(20), Complete: at(30)}},
		Polls: []Poll{tail("t", recs(0, 0, "a-0"), 10, 15), tail("t", nil, 15, 16), tail("t", recs(1, 0, "b-0"), 16, 17), tail("t", recs(0, 1, "a-1"), 17, 18)},
	}
	if got, want := h.AckTimes(0), []time.Time{at(10), at(20)}; !slices.Equal(got, want) {
		t.Errorf("ack times %v", got)
	}
	if got, want := h.ReadTimes(0), []time.Time{at(15), at(18)}; !slices.Equal(got, want) {
		t.Errorf("read times %v", got)
	}
}

func TestLongestGap(t *testing.T) {
	for _, tc := range []struct {
		name     string
		times    []time.Time
		from, to time.Time
		want     time.Duration
	}{
		{"nothing", nil, at(0), at(100), 100 * time.Millisecond},
		{"steady", []time.Time{at(10), at(20), at(30)}, at(0), at(40), 10 * time.Millisecond},
		{"a stall in the middle, out of order", []time.Time{at(90), at(10), at(20)}, at(0), at(100), 70 * time.Millisecond},
		{"events before from are ignored", []time.Time{at(-50), at(5), at(10)}, at(0), at(12), 5 * time.Millisecond},
		{"up to the first event after to", []time.Time{at(10), at(150), at(160)}, at(0), at(100), 140 * time.Millisecond},
	} {
		if got := LongestGap(tc.times, tc.from, tc.to); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
