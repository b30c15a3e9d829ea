package producer

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"skein/libs/errs"
)

// step is one event in a scenario: check a batch, and if it passes and is not
// a duplicate, append it at the next offset.
type step struct {
	b       Batch
	wantErr *errs.Error // nil: accepted
	dup     bool
	first   int64 // expected first offset (of the append, or of the original)
}

func run(t *testing.T, name string, steps []step) *State {
	t.Helper()
	s := New()
	next := int64(0)
	for i, st := range steps {
		v, err := s.Check(st.b)
		switch {
		case st.wantErr != nil:
			if !errors.Is(err, st.wantErr) {
				t.Fatalf("%s step %d: err %v, want %s", name, i, err, st.wantErr.Name)
			}
			continue
		case err != nil:
			t.Fatalf("%s step %d: unexpected %v", name, i, err)
		}
		if v.Duplicate != st.dup {
			t.Fatalf("%s step %d: duplicate=%v, want %v", name, i, v.Duplicate, st.dup)
		}
		if v.Duplicate {
			if v.FirstOffset != st.first {
				t.Fatalf("%s step %d: duplicate answered offset %d, want %d", name, i, v.FirstOffset, st.first)
			}
			continue
		}
		if next != st.first {
			t.Fatalf("%s step %d: would append at %d, test expects %d", name, i, next, st.first)
		}
		s.Append(st.b, next, next+int64(st.b.Records)-1, 1000+next)
		next += int64(st.b.Records)
	}
	return s
}

func TestIdempotenceWindows(t *testing.T) {
	b := func(epoch int16, seq, n int32) Batch {
		return Batch{ProducerID: 7, Epoch: epoch, FirstSeq: seq, Records: n}
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"in order", []step{{b: b(0, 0, 3), first: 0}, {b: b(0, 3, 2), first: 3}, {b: b(0, 5, 1), first: 5}}},
		{"retry of the last batch", []step{{b: b(0, 0, 3), first: 0}, {b: b(0, 0, 3), dup: true, first: 0}}},
		{"retry of an older batch within the window", []step{
			{b: b(0, 0, 1), first: 0}, {b: b(0, 1, 1), first: 1}, {b: b(0, 2, 1), first: 2},
			{b: b(0, 1, 1), dup: true, first: 1},
		}},
		{"retry older than the window is out of order", []step{
			{b: b(0, 0, 1), first: 0}, {b: b(0, 1, 1), first: 1}, {b: b(0, 2, 1), first: 2},
			{b: b(0, 3, 1), first: 3}, {b: b(0, 4, 1), first: 4}, {b: b(0, 5, 1), first: 5},
			{b: b(0, 0, 1), wantErr: errs.OutOfOrderSequenceNumber},
			{b: b(0, 1, 1), dup: true, first: 1},
		}},
		{"gap", []step{{b: b(0, 0, 3), first: 0}, {b: b(0, 5, 1), wantErr: errs.OutOfOrderSequenceNumber}}},
		{"older epoch fenced", []step{{b: b(2, 0, 1), first: 0}, {b: b(1, 1, 1), wantErr: errs.InvalidProducerEpoch}}},
		{"new epoch restarts at 0", []step{{b: b(0, 0, 5), first: 0}, {b: b(1, 0, 1), first: 5}, {b: b(1, 1, 1), first: 6}}},
		{"new epoch must start at 0", []step{{b: b(0, 0, 5), first: 0}, {b: b(1, 5, 1), wantErr: errs.OutOfOrderSequenceNumber}}},
		// A pipelined batch must not start a producer the node does not know
		// ahead of an earlier one refused before its append.
		{"unknown producer starts at 0", []step{{b: b(0, 42, 2), wantErr: errs.UnknownProducerID}, {b: b(0, 0, 2), first: 0}, {b: b(0, 2, 1), first: 2}}},
		{"negative sequence invalid", []step{{b: b(0, -3, 1), wantErr: errs.InvalidRecord}}},
		{"partial overlap is not a duplicate", []step{{b: b(0, 0, 3), first: 0}, {b: b(0, 1, 3), wantErr: errs.OutOfOrderSequenceNumber}}},
	} {
		run(t, tc.name, tc.steps)
	}
}

func TestNonIdempotentBatchesAlwaysPass(t *testing.T) {
	s := New()
	for i := 0; i < 3; i++ {
		if v, err := s.Check(Batch{ProducerID: NoProducer, FirstSeq: -1, Records: 1}); err != nil || v.Duplicate {
			t.Fatal(v, err)
		}
		s.Append(Batch{ProducerID: NoProducer, FirstSeq: -1, Records: 1}, int64(i), int64(i), 0)
	}
	if len(s.IDs()) != 0 {
		t.Error("non-idempotent batches must leave no state")
	}
}

func TestSequenceWraps(t *testing.T) {
	s := New()
	first := Batch{ProducerID: 1, Epoch: 0, FirstSeq: math.MaxInt32 - 1, Records: 2}
	if first.LastSeq() != math.MaxInt32 {
		t.Fatalf("last seq %d", first.LastSeq())
	}
	s.Append(first, 0, 1, 0)
	wrapped := Batch{ProducerID: 1, Epoch: 0, FirstSeq: 0, Records: 3}
	if _, err := s.Check(wrapped); err != nil {
		t.Fatalf("sequence after MaxInt32 must be 0: %v", err)
	}
	crossing := Batch{ProducerID: 2, FirstSeq: math.MaxInt32, Records: 3}
	if crossing.LastSeq() != 1 {
		t.Fatalf("crossing last seq %d, want 1", crossing.LastSeq())
	}
}

func TestTransactionsAndLSO(t *testing.T) {
	s := New()
	if s.FirstUnstableOffset() != -1 {
		t.Fatal("no open transaction yet")
	}
	s.Append(Batch{ProducerID: 1, Epoch: 0, FirstSeq: 0, Records: 2, Transactional: true}, 10, 11, 0)
	s.Append(Batch{ProducerID: 2, Epoch: 0, FirstSeq: 0, Records: 1, Transactional: true}, 12, 12, 0)
	s.Append(Batch{ProducerID: 1, Epoch: 0, FirstSeq: 2, Records: 1, Transactional: true}, 13, 13, 0)
	if got := s.FirstUnstableOffset(); got != 10 {
		t.Fatalf("first unstable %d, want 10", got)
	}
	if began := s.Marker(1, 0, 3, 12, 0); began != 10 {
		t.Fatalf("marker: txn began at %d, want 10", began)
	}
	if got := s.FirstUnstableOffset(); got != 12 {
		t.Fatalf("first unstable %d, want 12 after producer 1 committed", got)
	}
	s.Marker(2, 0, 3, 13, 0)
	if got := s.FirstUnstableOffset(); got != -1 {
		t.Fatalf("first unstable %d, want -1", got)
	}
	// A marker with a bumped epoch (a timed-out transaction aborted by the
	// coordinator) fences the old epoch.
	s.Marker(1, 1, 4, 14, 0)
	if _, err := s.Check(Batch{ProducerID: 1, Epoch: 0, FirstSeq: 3, Records: 1}); !errors.Is(err, errs.InvalidProducerEpoch) {
		t.Fatalf("old epoch after bump: %v", err)
	}
}

func TestTruncateTo(t *testing.T) {
	s := New()
	s.Append(Batch{ProducerID: 1, FirstSeq: 0, Records: 2}, 0, 1, 0)
	s.Append(Batch{ProducerID: 1, FirstSeq: 2, Records: 2}, 2, 3, 0)
	s.Append(Batch{ProducerID: 2, FirstSeq: 0, Records: 1, Transactional: true}, 4, 4, 0)
	s.TruncateTo(2)
	// Producer 1's second batch is gone: a retry of it is not a duplicate but the next batch.
	if v, err := s.Check(Batch{ProducerID: 1, FirstSeq: 2, Records: 2}); err != nil || v.Duplicate {
		t.Fatalf("after truncation the batch must be appendable again: %v %v", v, err)
	}
	if s.FirstUnstableOffset() != -1 {
		t.Error("a transaction that began above the truncation point is not open")
	}
	if ids := s.IDs(); len(ids) != 1 || ids[0] != 1 {
		t.Errorf("ids %v, want [1]", ids)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	s := run(t, "snap", []step{
		{b: Batch{ProducerID: 9, Epoch: 3, FirstSeq: 0, Records: 2}, first: 0},
		{b: Batch{ProducerID: 9, Epoch: 3, FirstSeq: 2, Records: 2}, first: 2},
	})
	r, err := Restore(s.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	v, err := r.Check(Batch{ProducerID: 9, Epoch: 3, FirstSeq: 2, Records: 2})
	if err != nil || !v.Duplicate || v.FirstOffset != 2 || v.LastOffset != 3 {
		t.Fatalf("restored state lost the window: %+v %v", v, err)
	}
	if _, err := Restore([]byte("{not json")); !errors.Is(err, errs.KafkaStorageError) {
		t.Errorf("corrupt snapshot: %v", err)
	}
	if _, err := Restore([]byte(`{"version":9}`)); err == nil {
		t.Error("unknown version must be refused")
	}
	if _, err := Restore([]byte(`{"version":1,"producers":{"5":null}}`)); !errors.Is(err, errs.KafkaStorageError) {
		t.Errorf("a producer without state: %v, want KAFKA_STORAGE_ERROR", err)
	}
}

// The first unstable offset is the oldest open transaction's first offset
// over every producer, whatever the order of appends, markers, truncations,
// expiries and snapshot round trips that led there: checked against a scan of every
// producer's entry after each step.
func TestFirstUnstableOffsetFollowsEveryProducer(t *testing.T) {
	scan := func(s *State) int64 {
		first := int64(-1)
		for _, pid := range s.IDs() {
			e, _ := s.Get(pid)
			if e.TxnFirstOffset >= 0 && (first < 0 || e.TxnFirstOffset < first) {
				first = e.TxnFirstOffset
			}
		}
		return first
	}
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		s := New()
		next := int64(0)
		seq := map[int64]int32{}
		for i := 0; i < 400; i++ {
			pid := int64(rng.IntN(12))
			switch op := rng.IntN(10); {
			case op < 6:
				n := int32(1 + rng.IntN(3))
				s.Append(Batch{ProducerID: pid, FirstSeq: seq[pid], Records: n, Transactional: rng.IntN(2) == 0}, next, next+int64(n)-1, next)
				seq[pid] += n
				next += int64(n)
			case op < 8:
				s.Marker(pid, 0, 1, next, next)
				next++
			case op < 9:
				if next > 0 {
					next -= int64(rng.IntN(int(min(next, 8)) + 1))
					s.TruncateTo(next)
					clear(seq) // sequences restart: the test checks offsets, not windows
				}
			default:
				r, err := Restore(s.Snapshot())
				if err != nil {
					t.Fatal(err)
				}
				s = r
			}
			if rng.IntN(8) == 0 {
				s.Expire(int64(i+1)*10, 200) // idle producers go; open transactions stay
			}
			if got, want := s.FirstUnstableOffset(), scan(s); got != want {
				t.Fatalf("seed %d step %d: first unstable offset %d, a scan of every producer says %d", seed, i, got, want)
			}
		}
	}
}

// The last stable offset is asked for on every fetch and high-watermark
// move: its cost with many idempotent producers and one open transaction.
func BenchmarkFirstUnstableOffset(b *testing.B) {
	for _, producers := range []int{10, 10000} {
		s := New()
		for pid := int64(0); pid < int64(producers); pid++ {
			s.Append(Batch{ProducerID: pid, Records: 1}, pid, pid, 0)
		}
		s.Append(Batch{ProducerID: int64(producers), Records: 1, Transactional: true}, int64(producers), int64(producers), 0)
		b.Run(fmt.Sprint(producers, "-producers"), func(b *testing.B) {
			for b.Loop() {
				if s.FirstUnstableOffset() != int64(producers) {
					b.Fatal("wrong first unstable offset")
				}
			}
		})
	}
}

// Expire forgets a producer once it has written nothing for maxAge by the
// caller's clock, never one with an open transaction; a forgotten
// producer's retry is no longer a duplicate.
func TestExpire(t *testing.T) {
	const maxAge = 1000
	s := New()
	s.Append(Batch{ProducerID: 1, FirstSeq: 0, Records: 2}, 0, 1, 0)
	s.Append(Batch{ProducerID: 2, FirstSeq: 0, Records: 1, Transactional: true}, 2, 2, 0)
	s.Append(Batch{ProducerID: 3, FirstSeq: 0, Records: 1}, 3, 3, 0)
	ids := func() []int64 { return s.IDs() }
	if n := s.Expire(5000, maxAge); n != 0 || len(ids()) != 3 {
		t.Fatalf("the first call only notes the writes: expired %d, left %v", n, ids())
	}
	// Producer 3 writes again; 1 and 2 stay idle.
	s.Append(Batch{ProducerID: 3, FirstSeq: 1, Records: 1}, 4, 4, 0)
	if n := s.Expire(5000+maxAge-1, maxAge); n != 0 {
		t.Fatalf("expired %d before maxAge", n)
	}
	if n := s.Expire(5000+maxAge, maxAge); n != 1 || !slices.Equal(ids(), []int64{2, 3}) {
		t.Fatalf("at maxAge: expired %d, left %v; want producer 1 gone, 2 (open transaction) and 3 (wrote since) kept", n, ids())
	}
	if v, err := s.Check(Batch{ProducerID: 1, FirstSeq: 0, Records: 2}); err != nil || v.Duplicate {
		t.Fatalf("a forgotten producer's retry: %+v %v, want accepted as new", v, err)
	}
	if s.FirstUnstableOffset() != 2 {
		t.Fatalf("producer 2's transaction must stay open")
	}
	// Its marker ends the transaction; it is forgotten maxAge after that.
	s.Marker(2, 0, 1, 0, 0)
	if n := s.Expire(9000, maxAge); n != 1 || !slices.Equal(ids(), []int64{2}) {
		t.Fatalf("expired %d, left %v; want producer 3 (idle since 6000) gone, 2 (its marker) kept", n, ids())
	}
	if n := s.Expire(9000+maxAge, maxAge); n != 1 || len(ids()) != 0 {
		t.Fatalf("expired %d, left %v; want producer 2 gone", n, ids())
	}

	// A restored state counts from the first call after it, however old its
	// records' timestamps are.
	s = New()
	s.Append(Batch{ProducerID: 7, FirstSeq: 0, Records: 1}, 0, 0, 1)
	r, err := Restore(s.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if n := r.Expire(1<<40, maxAge); n != 0 {
		t.Fatalf("a restored producer expired at the first call")
	}
	if n := r.Expire(1<<40+maxAge, maxAge); n != 1 {
		t.Fatalf("a restored idle producer kept after maxAge")
	}
}

// A producer with a transaction open on the partition writes only
// transactional batches until a marker ends it, at any epoch: a plain
// batch at a higher epoch would fence the transaction's own marker and
// leave it open for good.
func TestPlainBatchDuringAnOpenTransaction(t *testing.T) {
	txn := func(epoch int16, seq int32) Batch {
		return Batch{ProducerID: 9, Epoch: epoch, FirstSeq: seq, Records: 1, Transactional: true}
	}
	plain := func(epoch int16, seq int32) Batch {
		return Batch{ProducerID: 9, Epoch: epoch, FirstSeq: seq, Records: 1}
	}
	s := run(t, "open transaction", []step{
		{b: txn(0, 0), first: 0},
		{b: plain(0, 1), wantErr: errs.InvalidTxnState},
		{b: plain(7, 0), wantErr: errs.InvalidTxnState},
		{b: txn(0, 1), first: 1},
		{b: txn(0, 1), dup: true, first: 1},
	})
	if e, _ := s.Get(9); e.Epoch != 0 || s.FirstUnstableOffset() != 0 {
		t.Fatalf("after the refused batches: epoch %d, first unstable offset %d; want 0 and 0", e.Epoch, s.FirstUnstableOffset())
	}
	// The transaction's marker, at the next epoch, is not fenced, and ends it.
	if first := s.Marker(9, 1, 0, 3, 0); first != 0 || s.FirstUnstableOffset() != -1 {
		t.Fatalf("marker: began at %d, first unstable offset %d", first, s.FirstUnstableOffset())
	}
	if _, err := s.Check(plain(1, 0)); err != nil {
		t.Fatalf("a plain batch after the transaction ended: %v", err)
	}
}

// A retry matches only a batch of its own kind: a transactional batch
// with the sequences of a plain one already written is not that batch.
func TestDuplicateOfAnotherKindIsNoDuplicate(t *testing.T) {
	run(t, "kinds", []step{
		{b: Batch{ProducerID: 4, FirstSeq: 0, Records: 2}, first: 0},
		{b: Batch{ProducerID: 4, FirstSeq: 0, Records: 2, Transactional: true}, wantErr: errs.OutOfOrderSequenceNumber},
		{b: Batch{ProducerID: 4, FirstSeq: 0, Records: 2}, dup: true, first: 0},
	})
	// A batch remembered by a snapshot of before kinds were kept matches
	// a retry of either kind.
	s, err := Restore([]byte(`{"version":1,"producers":{"4":{"epoch":0,"batches":[{"first_seq":0,"last_seq":1,"first_offset":0,"last_offset":1}],"txn_first_offset":-1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, txn := range []bool{false, true} {
		if v, err := s.Check(Batch{ProducerID: 4, FirstSeq: 0, Records: 2, Transactional: txn}); err != nil || !v.Duplicate {
			t.Errorf("transactional=%v against an old snapshot's batch: %+v %v, want a duplicate", txn, v, err)
		}
	}
}

// Every transaction's end bumps the epoch: the next epoch's first batch
// starts at sequence 0, as the producer's sequences do.
func TestEpochFromAMarkerStartsAtSequenceZero(t *testing.T) {
	s := New()
	b := Batch{ProducerID: 5, Epoch: 2, FirstSeq: 0, Records: 3, Transactional: true}
	s.Append(b, 0, 2, 0)
	s.Marker(5, 3, 0, 3, 0)
	if _, err := s.Check(Batch{ProducerID: 5, Epoch: 3, FirstSeq: 3, Records: 1, Transactional: true}); !errors.Is(err, errs.OutOfOrderSequenceNumber) {
		t.Fatalf("sequence 3 as the first batch of the epoch a marker began: %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", err)
	}
	// Kept across a snapshot.
	r, err := Restore(s.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Check(Batch{ProducerID: 5, Epoch: 3, FirstSeq: 3, Records: 1, Transactional: true}); !errors.Is(err, errs.OutOfOrderSequenceNumber) {
		t.Fatalf("after a restore: %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", err)
	}
	next := Batch{ProducerID: 5, Epoch: 3, FirstSeq: 0, Records: 1, Transactional: true}
	if _, err := r.Check(next); err != nil {
		t.Fatalf("sequence 0: %v", err)
	}
	r.Append(next, 4, 4, 0)
	if _, err := r.Check(Batch{ProducerID: 5, Epoch: 3, FirstSeq: 1, Records: 1, Transactional: true}); err != nil {
		t.Fatalf("sequence 1 after it: %v", err)
	}

	// Batches truncated away leave the epoch with none remembered: the
	// producer's retries go on from where its sequence was.
	s = New()
	for i := int32(0); i < 8; i++ {
		s.Append(Batch{ProducerID: 6, FirstSeq: i, Records: 1, Transactional: true}, int64(i), int64(i), 0)
	}
	s.TruncateTo(3)
	if _, err := s.Check(Batch{ProducerID: 6, FirstSeq: 3, Records: 1, Transactional: true}); err != nil {
		t.Fatalf("a retry after the truncation: %v", err)
	}
}

// A follower that truncates its log (no marker cut) holds the producer
// state a replay of what is left would give, for what a producer may send
// next: the epoch a marker began is kept, and with it the rule that its
// first batch starts at sequence 0.
func TestTruncateAnswersAsAReplayOfWhatIsLeft(t *testing.T) {
	type event struct {
		marker bool
		b      Batch
		at     int64 // offset (a batch's first; it takes b.Records offsets)
	}
	txn := func(epoch int16, seq, n int32) Batch {
		return Batch{ProducerID: 5, Epoch: epoch, FirstSeq: seq, Records: n, Transactional: true}
	}
	apply := func(s *State, evs []event, below int64) {
		for _, ev := range evs {
			switch {
			case ev.at >= below:
			case ev.marker:
				s.Marker(5, ev.b.Epoch, 0, ev.at, 0)
			default:
				s.Append(ev.b, ev.at, ev.at+int64(ev.b.Records)-1, 0)
			}
		}
	}
	probes := []Batch{txn(1, 0, 1), txn(1, 1, 1), txn(1, 2, 1), txn(1, 3, 1), txn(1, 8, 1), txn(0, 0, 1), txn(2, 0, 1)}
	answers := func(s *State) []string {
		var out []string
		for _, b := range probes {
			v, err := s.Check(b)
			out = append(out, fmt.Sprintf("%v/%s", v.Duplicate, errs.Of(err).Name))
		}
		return out
	}
	// The epoch-0 transaction ends with a marker at offset 2 that begins
	// epoch 1; then n batches of epoch 1 at offsets 3...
	history := func(n int32) []event {
		evs := []event{{b: txn(0, 0, 2), at: 0}, {marker: true, b: txn(1, 0, 0), at: 2}}
		for seq := int32(0); seq < n; seq++ {
			evs = append(evs, event{b: txn(1, seq, 1), at: 3 + int64(seq)})
		}
		return evs
	}
	// Window batches or fewer: every batch of the epoch is remembered, and
	// a truncation anywhere answers as the replay.
	for cut := int64(3); cut <= 3+Window; cut++ {
		truncated, replayed := New(), New()
		apply(truncated, history(Window), math.MaxInt64)
		truncated.TruncateTo(cut)
		apply(replayed, history(Window), cut)
		if got, want := answers(truncated), answers(replayed); !slices.Equal(got, want) {
			t.Errorf("cut at %d: probes %v: truncated %v, replayed %v", cut, probes, got, want)
		}
	}
	// More: the epoch's first batches are no longer remembered, so a cut
	// of every remembered one leaves what is below unknown here; the
	// producer's next batch is taken at the sequence it comes with (its
	// retry of the first batch cut), as for a producer not seen before.
	truncated := New()
	apply(truncated, history(8), math.MaxInt64)
	truncated.TruncateTo(6) // seqs 3..7 cut
	if v, err := truncated.Check(txn(1, 3, 1)); err != nil || v.Duplicate {
		t.Errorf("the retry of sequence 3 after the cut: %+v %v", v, err)
	}
	// Nothing of the producer cut: the epoch its marker began is kept.
	s := New()
	s.Marker(5, 1, 0, 2, 0)
	s.TruncateTo(20)
	if _, err := s.Check(txn(1, 3, 1)); !errors.Is(err, errs.OutOfOrderSequenceNumber) {
		t.Errorf("a truncation past the marker forgot its epoch: sequence 3 answered %v", err)
	}
	// The whole log cut: nothing is left of the producer.
	s.TruncateTo(0)
	if _, ok := s.Get(5); ok {
		t.Error("a truncation to 0 kept the producer")
	}
}

// A retry is answered with the time its first append was stamped with
// under LogAppendTime, kept across a snapshot; under CreateTime, with none.
func TestDuplicateCarriesItsAppendTime(t *testing.T) {
	s := New()
	s.Append(Batch{ProducerID: 6, FirstSeq: 0, Records: 1, LogAppendTime: true}, 10, 10, 1234)
	s.Append(Batch{ProducerID: 6, FirstSeq: 1, Records: 1}, 11, 11, 999)
	r, err := Restore(s.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]*State{"live": s, "restored": r} {
		if v, err := st.Check(Batch{ProducerID: 6, FirstSeq: 0, Records: 1}); err != nil || !v.Duplicate || v.FirstOffset != 10 || v.LogAppendTime != 1234 {
			t.Errorf("%s: retry of the batch stamped at 1234: %+v %v", name, v, err)
		}
		if v, err := st.Check(Batch{ProducerID: 6, FirstSeq: 1, Records: 1}); err != nil || !v.Duplicate || v.FirstOffset != 11 || v.LogAppendTime != -1 || v.MaxTimestamp != 999 {
			t.Errorf("%s: retry of a batch keeping its create time: %+v %v, want LogAppendTime -1, MaxTimestamp 999", name, v, err)
		}
	}
}

// Describe shows each producer's epoch, last sequence and timestamp,
// coordinator epoch and open transaction's first offset, as
// describe-producers does; the oldest open transaction's first offset is
// the first unstable offset.
func TestDescribe(t *testing.T) {
	type event struct {
		b       *Batch // a batch appended at the next offset, or a marker of marker
		marker  int64  // producer id of a marker (with b nil)
		epoch   int16
		coordEp int32
		ts      int64
	}
	tx := func(pid int64, epoch int16, seq, n int32) *Batch {
		return &Batch{ProducerID: pid, Epoch: epoch, FirstSeq: seq, Records: n, Transactional: true}
	}
	plain := func(pid int64, epoch int16, seq, n int32) *Batch {
		return &Batch{ProducerID: pid, Epoch: epoch, FirstSeq: seq, Records: n}
	}
	for _, tc := range []struct {
		name     string
		events   []event
		want     []Description
		unstable int64
	}{
		{"nothing", nil, []Description{}, -1},
		{"an idempotent producer", []event{{b: plain(7, 0, 0, 3), ts: 100}, {b: plain(7, 0, 3, 2), ts: 110}},
			[]Description{{ProducerID: 7, Epoch: 0, LastSequence: 4, LastTimestamp: 110, TxnStartOffset: -1}}, -1},
		{"a batch of no producer is not one", []event{{b: plain(NoProducer, -1, -1, 1), ts: 5}}, []Description{}, -1},
		{"an open transaction", []event{{b: plain(3, 0, 0, 2), ts: 1}, {b: tx(9, 1, 0, 2), ts: 20}, {b: tx(9, 1, 2, 1), ts: 21}},
			[]Description{
				{ProducerID: 3, Epoch: 0, LastSequence: 1, LastTimestamp: 1, TxnStartOffset: -1},
				{ProducerID: 9, Epoch: 1, LastSequence: 2, LastTimestamp: 21, TxnStartOffset: 2},
			}, 2},
		{"two open, the older holds the LSO", []event{{b: tx(9, 1, 0, 1), ts: 1}, {b: tx(4, 0, 0, 1), ts: 2}, {b: tx(9, 1, 1, 1), ts: 3}},
			[]Description{
				{ProducerID: 4, Epoch: 0, LastSequence: 0, LastTimestamp: 2, TxnStartOffset: 1},
				{ProducerID: 9, Epoch: 1, LastSequence: 1, LastTimestamp: 3, TxnStartOffset: 0},
			}, 0},
		{"a committed transaction: the marker's epoch and coordinator epoch, no sequence known",
			[]event{{b: tx(9, 1, 0, 2), ts: 20}, {marker: 9, epoch: 2, coordEp: 5, ts: 30}},
			[]Description{{ProducerID: 9, Epoch: 2, LastSequence: -1, LastTimestamp: 30, CoordinatorEpoch: 5, TxnStartOffset: -1}}, -1},
		{"a marker at the producer's epoch keeps its sequence",
			[]event{{b: tx(9, 1, 0, 2), ts: 20}, {marker: 9, epoch: 1, coordEp: 5, ts: 30}},
			[]Description{{ProducerID: 9, Epoch: 1, LastSequence: 1, LastTimestamp: 30, CoordinatorEpoch: 5, TxnStartOffset: -1}}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New()
			next := int64(0)
			for _, ev := range tc.events {
				if ev.b != nil {
					s.Append(*ev.b, next, next+int64(ev.b.Records)-1, ev.ts)
					next += int64(ev.b.Records)
					continue
				}
				s.Marker(ev.marker, ev.epoch, ev.coordEp, next, ev.ts)
				next++
			}
			if got := s.Describe(); !slices.Equal(got, tc.want) {
				t.Errorf("Describe:\n got %+v\nwant %+v", got, tc.want)
			}
			if got := s.FirstUnstableOffset(); got != tc.unstable {
				t.Errorf("FirstUnstableOffset %d, want %d", got, tc.unstable)
			}
		})
	}
}
