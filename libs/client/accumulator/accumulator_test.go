package accumulator

import (
	"fmt"
	"testing"
	"time"

	"skein/libs/record"
)

var t0 = time.Unix(1764400000, 0)

func rec(i, valueLen int) Record {
	return Record{Timestamp: t0.UnixMilli() + int64(i), Key: []byte(fmt.Sprintf("k%d", i)), Value: make([]byte, valueLen), Token: i}
}

// build encodes b the way the producer will, to check the size bookkeeping.
func build(t *testing.T, b *Batch) record.Batch {
	t.Helper()
	bld := record.NewBuilder(record.DefaultBatchOptions())
	for _, r := range b.Records {
		bld.Append(r.Timestamp, r.Key, r.Value, r.Headers...)
	}
	out, _, err := bld.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestBatchSizeSplitsBatchesAtTheLimit(t *testing.T) {
	a := New(Config{BatchSize: 1000, Linger: time.Hour})
	tp := TP{"t", 0}
	opened := 0
	for i := 0; i < 100; i++ {
		r := rec(i, 90)
		r.Headers = []record.Header{{Key: "traceparent", Value: []byte("00-abc-01")}}
		if a.Append(tp, r, t0, 0) {
			opened++
		}
	}
	if a.Records() != 100 {
		t.Fatalf("Records() = %d", a.Records())
	}
	var got []*Batch
	for b := a.Pop(tp); b != nil; b = a.Pop(tp) {
		got = append(got, b)
	}
	if len(got) != opened || len(got) < 10 {
		t.Fatalf("%d batches, %d opened", len(got), opened)
	}
	next := 0
	for i, b := range got {
		enc := build(t, b)
		if b.Bytes != len(enc) {
			t.Errorf("batch %d: accounted %d bytes, encodes to %d", i, b.Bytes, len(enc))
		}
		if b.Bytes > 1000 {
			t.Errorf("batch %d is %d bytes, above batch.size", i, b.Bytes)
		}
		if i < len(got)-1 && b.Bytes+RecordSize(&got[i+1].Records[0], int32(len(b.Records)), b.Records[0].Timestamp) <= 1000 {
			t.Errorf("batch %d closed while the next record still fitted", i)
		}
		for _, r := range b.Records {
			if r.Token.(int) != next {
				t.Fatalf("record %v out of order, want %d", r.Token, next)
			}
			next++
		}
	}
}

func TestMaxMessageBytesCapsTheBatch(t *testing.T) {
	a := New(Config{BatchSize: 16 << 10, Linger: time.Hour})
	tp := TP{"t", 3}
	for i := 0; i < 20; i++ {
		a.Append(tp, rec(i, 100), t0, 500)
	}
	for b := a.Pop(tp); b != nil; b = a.Pop(tp) {
		if b.Bytes > 500 {
			t.Errorf("batch of %d bytes on a topic with max.message.bytes 500", b.Bytes)
		}
	}
}

func TestLargeRecordTravelsAlone(t *testing.T) {
	a := New(Config{BatchSize: 100, Linger: time.Hour})
	tp := TP{"t", 0}
	a.Append(tp, rec(0, 10), t0, 0)
	if !a.Append(tp, rec(1, 500), t0, 0) {
		t.Fatal("a record larger than batch.size must open its own batch")
	}
	if !a.Append(tp, rec(2, 10), t0, 0) {
		t.Fatal("nothing may join the oversized record's batch")
	}
	for i, want := range []int{1, 1, 1} {
		if b := a.Pop(tp); len(b.Records) != want || b.Records[0].Token.(int) != i {
			t.Fatalf("batch %d: %d records starting at %v", i, len(b.Records), b.Records[0].Token)
		}
	}
}

func TestLingerAndReadiness(t *testing.T) {
	a := New(Config{BatchSize: 1000, Linger: 5 * time.Millisecond})
	p0, p1 := TP{"t", 0}, TP{"t", 1}
	a.Append(p0, rec(0, 10), t0, 0)
	a.Append(p1, rec(1, 10), t0.Add(2*time.Millisecond), 0)

	for _, tc := range []struct {
		at    time.Duration
		flush bool
		want  string
	}{
		{0, false, "[]"},
		{4 * time.Millisecond, false, "[]"},
		{5 * time.Millisecond, false, "[{t 0}]"},
		{7 * time.Millisecond, false, "[{t 0} {t 1}]"},
		{1 * time.Millisecond, true, "[{t 0} {t 1}]"},
	} {
		if got := fmt.Sprint(a.Ready(t0.Add(tc.at), tc.flush, nil)); got != tc.want {
			t.Errorf("Ready(+%v, flush=%v) = %s, want %s", tc.at, tc.flush, got, tc.want)
		}
	}
	// A partition the caller calls eager (nothing in flight there) is ready
	// at once; the others still linger.
	idle := func(tp TP) bool { return tp == p1 }
	if got := fmt.Sprint(a.Ready(t0.Add(2*time.Millisecond), false, idle)); got != "[{t 1}]" {
		t.Errorf("Ready(+2ms, p1 eager) = %s, want [{t 1}]", got)
	}
	if got := fmt.Sprint(a.Ready(t0.Add(5*time.Millisecond), false, idle)); got != "[{t 0} {t 1}]" {
		t.Errorf("Ready(+5ms, p1 eager) = %s, want both", got)
	}
	// Only partitions with a batch are listed, however eager.
	if got := fmt.Sprint(a.Ready(t0, false, func(TP) bool { return true })); got != "[{t 0} {t 1}]" {
		t.Errorf("Ready(all eager) = %s, want [{t 0} {t 1}]", got)
	}
	if at, ok := a.NextReady(t0); !ok || !at.Equal(t0.Add(5*time.Millisecond)) {
		t.Errorf("NextReady = %v %v, want +5ms", at, ok)
	}
	if at, ok := a.NextReady(t0.Add(5 * time.Millisecond)); !ok || !at.Equal(t0.Add(7*time.Millisecond)) {
		t.Errorf("NextReady after p0 is ready = %v %v, want +7ms", at, ok)
	}

	// A full batch is ready before linger, and so is one with a batch behind it.
	for i := 2; i < 30; i++ {
		a.Append(p0, rec(i, 100), t0, 0)
	}
	if got := fmt.Sprint(a.Ready(t0, false, nil)); got != "[{t 0}]" {
		t.Errorf("with a full batch: Ready = %s", got)
	}
	if !a.Fits(p0, &Record{Timestamp: t0.UnixMilli(), Value: []byte("x")}) {
		t.Error("the open batch should have room for a tiny record")
	}
	if a.Fits(TP{"t", 9}, &Record{}) {
		t.Error("a partition with no batch has no room")
	}
}

// ReadyNow answers for one partition what Ready answers without eager: after
// the first batch is taken, the next is ready only if it is full, has a
// batch behind it, lingered long enough, or a flush asks for it.
func TestReadyNowAfterAPop(t *testing.T) {
	p0, none := TP{"t", 0}, TP{"t", 9}
	for _, tc := range []struct {
		at    time.Duration
		flush bool
		want  []bool // before each Pop, until the queue is empty
	}{
		{0, false, []bool{true, true, false, false}},
		{5 * time.Millisecond, false, []bool{true, true, true, false}},
		{0, true, []bool{true, true, true, false}},
	} {
		// Eight records of 30 bytes: two full batches of three, then an open one.
		b := New(Config{BatchSize: 200, Linger: 5 * time.Millisecond})
		for i := range 8 {
			b.Append(p0, rec(i, 30), t0, 0)
		}
		var got []bool
		for range 4 {
			got = append(got, b.ReadyNow(p0, t0.Add(tc.at), tc.flush))
			b.Pop(p0)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("ReadyNow(+%v, flush=%v) before each pop = %v, want %v", tc.at, tc.flush, got, tc.want)
		}
	}
	if New(Config{BatchSize: 200}).ReadyNow(none, t0.Add(time.Hour), true) {
		t.Error("a partition with no batch is never ready")
	}
}

func TestExpire(t *testing.T) {
	a := New(Config{BatchSize: 100, Linger: time.Hour})
	tp := TP{"t", 0}
	a.Append(tp, rec(0, 80), t0, 0)
	a.Append(tp, rec(1, 80), t0.Add(time.Second), 0)
	a.Append(TP{"u", 0}, rec(2, 10), t0.Add(2*time.Second), 0)
	exp := a.Expire(t0.Add(1500 * time.Millisecond))
	if len(exp) != 2 || a.Records() != 1 {
		t.Fatalf("expired %d batches, %d records left", len(exp), a.Records())
	}
	if at, ok := a.Oldest(); !ok || !at.Equal(t0.Add(2*time.Second)) {
		t.Errorf("Oldest = %v", at)
	}
}

func TestNewBatchHasRoomForTheLastOnesRecords(t *testing.T) {
	tp := TP{Topic: "t", Partition: 0}
	a := New(Config{BatchSize: 256 << 10})
	for i := 0; i < 40; i++ {
		a.Append(tp, rec(i, 1024), t0, 0)
	}
	if got := len(a.Pop(tp).Records); got != 40 {
		t.Fatalf("first batch held %d records, want 40", got)
	}
	a.Append(tp, rec(40, 1024), t0, 0)
	b := a.queues[tp][0]
	first := &b.Records[0]
	for i := 41; i < 80; i++ {
		a.Append(tp, rec(i, 1024), t0, 0)
	}
	if len(b.Records) != 40 || &b.Records[0] != first {
		t.Fatalf("the second batch of 40 grew its slice (len %d, moved %v)", len(b.Records), &b.Records[0] != first)
	}
	for i, r := range b.Records {
		if r.Token != 40+i {
			t.Fatalf("record %d of the second batch is %v, want %d", i, r.Token, 40+i)
		}
	}

	// The room is bounded by what the batch could hold: a topic whose
	// max.message.bytes fits two such records gets no room for 40.
	a.Pop(tp)
	a.Append(tp, rec(80, 1024), t0, 2300)
	if c := cap(a.queues[tp][0].Records); c > 2 {
		t.Fatalf("a batch limited to 2,300 bytes has room for %d records of 1 KiB", c)
	}
	// Other partitions start small.
	other := TP{Topic: "t", Partition: 1}
	a.Append(other, rec(81, 1024), t0, 0)
	if c := cap(a.queues[other][0].Records); c != 1 {
		t.Fatalf("a partition with no popped batch starts with room for %d records, want 1", c)
	}
}

// BenchmarkAppendPop is a steady stream of 1 KiB records in batches of 100
// (the gateway's batch size, 256 KiB, is not reached).
func BenchmarkAppendPop(b *testing.B) {
	tp := TP{Topic: "t", Partition: 0}
	a := New(Config{BatchSize: 256 << 10})
	r := rec(0, 1024)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		a.Append(tp, r, t0, 0)
		if i%100 == 99 {
			a.Pop(tp)
		}
	}
}
