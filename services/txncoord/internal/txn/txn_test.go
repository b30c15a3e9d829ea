package txn

import (
	"strings"
	"testing"
	"time"

	"skein/libs/errs"
)

func ids(next int64) Allocator {
	return func() (int64, error) { next++; return next - 1, nil }
}

var minute = InitRequest{Timeout: time.Minute, ExpectedProducerID: NoProducerID, ExpectedEpoch: NoEpoch}

// initTxn answers a Txn of "tx" with producer 1000 at epoch 0, written.
func initTxn(t *testing.T) *Txn {
	t.Helper()
	x := New(Config{}, "tx")
	_, eff, err := x.InitProducerId(minute, t0, ids(1000))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.Complete(*eff.Write); err != nil {
		t.Fatal(err)
	}
	return x
}

func TestNew(t *testing.T) {
	x := New(Config{}, "tx")
	if x.Exists() || x.State() != Empty || x.ID() != "tx" {
		t.Fatalf("new: exists %v, state %s", x.Exists(), x.State())
	}
	if d := x.Describe(); d.ProducerID != NoProducerID || d.ProducerEpoch != NoEpoch || d.Pending != "" || d.MarkersDue {
		t.Fatalf("describe: %+v", d)
	}
	if _, ok := x.NextDeadline(); ok {
		t.Fatal("a new id has a deadline")
	}
	if eff := x.Tick(t0.Add(365 * 24 * time.Hour)); eff.Write != nil {
		t.Fatal("a new id expired")
	}
	if err := x.check(); err != nil {
		t.Fatal(err)
	}
}

func TestInitRefusals(t *testing.T) {
	for name, id := range map[string]string{"empty": "", "too long": strings.Repeat("x", maxString+1)} {
		_, _, err := New(Config{}, id).InitProducerId(minute, t0, ids(1))
		if errs.Of(err) != errs.InvalidRequest {
			t.Errorf("%s transactional id: %v", name, err)
		}
	}
	x := New(Config{MaxTimeout: time.Hour}, "tx")
	if _, _, err := x.InitProducerId(InitRequest{Timeout: time.Hour, ExpectedProducerID: -1, ExpectedEpoch: -1}, t0, ids(1)); err != nil {
		t.Fatalf("a timeout at the configured maximum: %v", err)
	}
	x = New(Config{}, "tx")
	if _, _, err := x.InitProducerId(InitRequest{Timeout: time.Minute, ExpectedProducerID: 5, ExpectedEpoch: -1}, t0, ids(1)); errs.Of(err) != errs.InvalidRequest {
		t.Fatalf("half an expected pair: %v", err)
	}
	// A new id accepts an expected pair (an idempotent producer turning
	// transactional) and forgets it.
	r, eff, err := x.InitProducerId(InitRequest{Timeout: time.Minute, ExpectedProducerID: 5, ExpectedEpoch: 3}, t0, ids(1))
	if err != nil || r.ProducerID != 1 || r.ProducerEpoch != 0 || eff.Write.hasPrev() {
		t.Fatalf("new id with an expected pair: %+v %+v %v", r, eff.Write, err)
	}
}

func TestAllocator(t *testing.T) {
	x := New(Config{}, "tx")
	if _, _, err := x.InitProducerId(minute, t0, nil); errs.Of(err) != errs.UnknownServerError {
		t.Fatalf("no allocator: %v", err)
	}
	bad := func() (int64, error) { return -3, nil }
	if _, _, err := x.InitProducerId(minute, t0, bad); errs.Of(err) != errs.UnknownServerError {
		t.Fatalf("negative id: %v", err)
	}
	// An allocator is called only when an id is needed.
	x = initTxn(t)
	calls := 0
	count := func() (int64, error) { calls++; return 5000, nil }
	if _, _, err := x.InitProducerId(minute, t0, count); err != nil || calls != 0 {
		t.Fatalf("a bump called the allocator %d times: %v", calls, err)
	}
	x.Fail()
	// The allocator must not answer the id in use.
	rec := x.Record()
	rec.ProducerEpoch = MaxHandedEpoch
	x, err := Load(Config{}, rec)
	if err != nil {
		t.Fatal(err)
	}
	same := func() (int64, error) { return rec.ProducerID, nil }
	if _, _, err := x.InitProducerId(minute, t0, same); errs.Of(err) != errs.UnknownServerError {
		t.Fatalf("the id in use: %v", err)
	}
}

func TestCompleteChecksTheRecord(t *testing.T) {
	x := initTxn(t)
	if _, err := x.Complete(x.Record()); errs.Of(err) != errs.UnknownServerError {
		t.Fatalf("complete with nothing pending: %v", err)
	}
	eff, err := x.AddPartitions(1000, 0, []TopicPartition{{"t", 1}, {"t", 0}, {"t", 1}}, t0.Add(1500*time.Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	w := eff.Write.clone()
	if FormatPartitions(w.Partitions) != "t:0,1" || !w.StartTime.Equal(t0.Add(time.Millisecond)) {
		t.Fatalf("written: %s from %v", FormatPartitions(w.Partitions), w.StartTime)
	}
	other := w.clone()
	other.Partitions = other.Partitions[:1]
	if _, err := x.Complete(other); errs.Of(err) != errs.UnknownServerError {
		t.Fatalf("complete with another record: %v", err)
	}
	if p, ok := x.Pending(); !ok || !p.Equal(w) {
		t.Fatal("a refused Complete dropped the pending transition")
	}
	// The answered record is a copy: the shell may not change the pending one.
	eff.Write.Partitions[0].Partition = 9
	if _, err := x.Complete(w); err != nil {
		t.Fatal(err)
	}
	if x.State() != Ongoing || x.Describe().Pending != "" {
		t.Fatalf("after complete: %+v", x.Describe())
	}
}

func TestAddOffsetsRefusesAnEmptyGroup(t *testing.T) {
	x := initTxn(t)
	if _, err := x.AddOffsets(1000, 0, "", t0); errs.Of(err) != errs.InvalidGroupID {
		t.Fatalf("empty group: %v", err)
	}
	if _, err := x.AddPartitions(1000, 0, []TopicPartition{{"", 0}}, t0); errs.Of(err) != errs.InvalidRequest {
		t.Fatalf("empty topic: %v", err)
	}
}

func TestDescribe(t *testing.T) {
	x := initTxn(t)
	eff, _ := x.AddPartitions(1000, 0, []TopicPartition{{"t", 0}}, t0)
	if _, err := x.Complete(*eff.Write); err != nil {
		t.Fatal(err)
	}
	_, eff, err := x.EndTxn(1000, 0, true, t0.Add(time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := x.Describe(); d.State != Ongoing || d.Pending != PrepareCommit || d.MarkersDue {
		t.Fatalf("pending: %+v", d)
	}
	done, err := x.Complete(*eff.Write)
	if err != nil || done.Markers == nil {
		t.Fatalf("complete: %+v %v", done, err)
	}
	d := x.Describe()
	if d.State != PrepareCommit || d.Pending != "" || !d.MarkersDue || d.ProducerEpoch != 1 || d.Timeout != time.Minute ||
		!d.StartTime.Equal(t0) || !d.UpdateTime.Equal(t0.Add(time.Second)) || FormatPartitions(d.Partitions) != "t:0" {
		t.Fatalf("describe: %+v", d)
	}
}

func TestFormatPartitions(t *testing.T) {
	for in, want := range map[string]string{"": "-", "a0": "a:0", "a0a1b2": "a:0,1;b:2"} {
		var ps []TopicPartition
		for i := 0; i+1 < len(in); i += 2 {
			ps = append(ps, TopicPartition{in[i : i+1], int32(in[i+1] - '0')})
		}
		if got := FormatPartitions(ps); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

func TestParseState(t *testing.T) {
	for _, tc := range []struct {
		name string
		want State
		ok   bool
	}{
		{"ONGOING", Ongoing, true},
		{"Ongoing", Ongoing, true},
		{"ongoing", Ongoing, true},
		{"PREPARE_COMMIT", PrepareCommit, true},
		{"PrepareCommit", PrepareCommit, true},
		{"CompleteAbort", CompleteAbort, true},
		{"complete_abort", CompleteAbort, true},
		{"EMPTY", Empty, true},
		{"Dead", Dead, true},
		{"PrepareEpochFence", "", false}, // never a logged state
		{"", "", false},
		{"_", "", false},
		{"RUNNING", "", false},
	} {
		got, ok := ParseState(tc.name)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseState(%q) = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
