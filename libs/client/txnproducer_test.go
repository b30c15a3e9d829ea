package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
	"skein/libs/client/clienttest"
	"skein/libs/client/partitioner"
	"skein/libs/errs"
)

// txnSetup is a fake cluster of one storage node, a group coordinator and
// a transaction coordinator that applies the groups' offsets.
func txnSetup(t *testing.T, partitions int32) (*clienttest.Cluster, *clienttest.TxnCoordinator, *clienttest.GroupCoordinator, *client.Client) {
	t.Helper()
	cl := clienttest.Start(t, 1)
	gc, _ := cl.StartGroupCoordinator(t, 1)
	tc, _ := cl.StartTxnCoordinator(t, 2)
	tc.Groups = gc
	c := newClient(t, cl)
	createTopic(t, c, "out", partitions, nil)
	return cl, tc, gc, c
}

// batchIDs describes a partition's batches as "pid/epoch/baseSeq/count/txn".
func batchIDs(st *clienttest.Storage, topic string, partition int32) []string {
	var out []string
	for _, b := range st.Batches(topic, partition) {
		out = append(out, fmt.Sprintf("%d/%d/%d/%d/%v", b.ProducerID(), b.ProducerEpoch(), b.BaseSequence(), b.RecordCount(), b.IsTransactional()))
	}
	return out
}

func to(p int32, vals ...string) []client.Record {
	var out []client.Record
	for _, v := range vals {
		out = append(out, client.Record{Topic: "out", Partition: ptr(p), Value: []byte(v)})
	}
	return out
}

// Each partition gets one batch per Send under the producer's id and
// epoch, with its own sequence from 0; a partition is added to the
// transaction once; a commit bumps the epoch and the next transaction's
// sequences start at 0 again, its partitions added again.
func TestTransactionalProducerSequencesAndAddsOnce(t *testing.T) {
	cl, tc, _, c := txnSetup(t, 3)
	p, err := c.NewTransactionalProducer(ctx(t), "tx-1", client.WithTransactionTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pid, epoch := p.ProducerIdentity()
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	if err := p.Begin(); errs.Of(err) != errs.InvalidTxnState {
		t.Errorf("a second Begin: %v, want INVALID_TXN_STATE", err)
	}
	res, err := p.Send(ctx(t), append(to(0, "a1", "a2", "a3"), to(1, "b1", "b2")...)...)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 5 || res[0].Offset != 0 || res[2].Offset != 2 || res[3].Partition != 1 || res[4].Offset != 1 {
		t.Errorf("results %+v", res)
	}
	key := []byte("k")
	keyed := partitioner.ForKey(key, 3)
	if _, err := p.Send(ctx(t), append(to(0, "a4", "a5"), client.Record{Topic: "out", Key: key, Value: []byte("k1")})...); err != nil {
		t.Fatal(err)
	}
	st := cl.Storage[1]
	want0 := []string{fmt.Sprintf("%d/%d/0/3/true", pid, epoch), fmt.Sprintf("%d/%d/3/2/true", pid, epoch)}
	if keyed == 0 {
		want0 = append(want0, fmt.Sprintf("%d/%d/5/1/true", pid, epoch))
	}
	if got := batchIDs(st, "out", 0); !slices.Equal(got, want0) {
		t.Errorf("partition 0 batches %v, want %v", got, want0)
	}
	if got := batchIDs(st, "out", 1); len(got) < 1 || got[0] != fmt.Sprintf("%d/%d/0/2/true", pid, epoch) {
		t.Errorf("partition 1 batches %v", got)
	}
	adds := tc.Adds()
	seen := map[string]int{}
	for _, a := range adds {
		for _, name := range a {
			seen[name]++
		}
	}
	if seen["out-0"] != 1 || seen["out-1"] != 1 || (keyed == 2 && seen["out-2"] != 1) || len(adds) != 1+btoi(keyed == 2) {
		t.Errorf("AddPartitionsToTxn calls %v, want each partition once", adds)
	}
	if err := p.Commit(ctx(t)); err != nil {
		t.Fatal(err)
	}
	pid2, epoch2 := p.ProducerIdentity()
	if pid2 != pid || epoch2 != epoch+1 {
		t.Errorf("after commit %d/%d, want %d/%d", pid2, epoch2, pid, epoch+1)
	}
	if _, err := p.Send(ctx(t), to(0, "x")...); errs.Of(err) != errs.InvalidTxnState {
		t.Errorf("Send with no transaction: %v, want INVALID_TXN_STATE", err)
	}
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx(t), to(0, "c1")...); err != nil {
		t.Fatal(err)
	}
	got := batchIDs(st, "out", 0)
	if last := got[len(got)-1]; last != fmt.Sprintf("%d/%d/0/1/true", pid, epoch+1) {
		t.Errorf("first batch of the next transaction %s, want sequence 0 at epoch %d", last, epoch+1)
	}
	if n := len(tc.Adds()); n != len(adds)+1 {
		t.Errorf("%d AddPartitionsToTxn calls, want %d: the new transaction adds its partition again", n, len(adds)+1)
	}
	if err := p.Abort(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, e := p.ProducerIdentity(); e != epoch+2 {
		t.Errorf("epoch %d after the abort, want %d", e, epoch+2)
	}
	// A transaction with nothing in it ends without the coordinator.
	ends := count(tc.Calls(), "end")
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(ctx(t)); err != nil {
		t.Fatalf("empty commit: %v", err)
	}
	if n := count(tc.Calls(), "end"); n != ends {
		t.Errorf("an empty transaction called EndTxn")
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func count(s []string, x string) int {
	n := 0
	for _, v := range s {
		if v == x {
			n++
		}
	}
	return n
}

// SendOffsets adds the group once and its offsets become the group's only
// when the transaction commits.
func TestTransactionalProducerSendOffsets(t *testing.T) {
	_, tc, gc, c := txnSetup(t, 2)
	p, err := c.NewTransactionalProducer(ctx(t), "tx-offsets")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	in := client.TopicPartition{Topic: "in", Partition: 1}
	for i, commit := range []bool{false, true} {
		if err := p.Begin(); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Send(ctx(t), to(0, "v")...); err != nil {
			t.Fatal(err)
		}
		for _, off := range []int64{5, 9} {
			if err := p.SendOffsets(ctx(t), "g", map[client.TopicPartition]int64{in: off + int64(i)}); err != nil {
				t.Fatal(err)
			}
		}
		if got := gc.Committed("g", "in", 1); got != -1 {
			t.Errorf("offset %d committed before the end", got)
		}
		end := p.Abort
		if commit {
			end = p.Commit
		}
		if err := end(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if got := gc.Committed("g", "in", 1); got != 10 {
		t.Errorf("committed %d, want 10 (the committed transaction's last)", got)
	}
	if n := count(tc.Calls(), "offsets"); n != 2 {
		t.Errorf("%d AddOffsetsToTxn calls, want 2 (once per transaction)", n)
	}
}

// Another instance fencing the producer makes it unusable: every call
// answers the same fatal error.
func TestTransactionalProducerFencedIsFatal(t *testing.T) {
	cl, tc, _, c := txnSetup(t, 2)
	p, err := c.NewTransactionalProducer(ctx(t), "tx-fenced")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx(t), to(0, "a")...); err != nil {
		t.Fatal(err)
	}
	q, err := c.NewTransactionalProducer(ctx(t), "tx-fenced") // the new instance
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	_, err = p.Send(ctx(t), to(1, "b")...) // a new partition: AddPartitions refuses
	if errs.Of(err) != errs.ProducerFenced {
		t.Fatalf("Send after the fence: %v, want PRODUCER_FENCED", err)
	}
	calls := len(tc.Calls())
	for name, call := range map[string]func() error{
		"Begin":       p.Begin,
		"Send":        func() error { _, err := p.Send(ctx(t), to(0, "c")...); return err },
		"SendOffsets": func() error { return p.SendOffsets(ctx(t), "g", map[client.TopicPartition]int64{{Topic: "in"}: 1}) },
		"Commit":      func() error { return p.Commit(ctx(t)) },
		"Abort":       func() error { return p.Abort(ctx(t)) },
	} {
		if got := call(); got == nil || got.Error() != err.Error() {
			t.Errorf("%s on the fenced producer: %v, want %v", name, got, err)
		}
	}
	if n := len(tc.Calls()); n != calls {
		t.Errorf("the fenced producer made %d more coordinator calls", n-calls)
	}

	// A produce of an older epoch refused by the storage node is fatal too.
	if err := q.Begin(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Send(ctx(t), to(0, "q1")...); err != nil {
		t.Fatal(err)
	}
	r, err := c.NewTransactionalProducer(ctx(t), "tx-fenced")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Begin(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Send(ctx(t), to(0, "r1")...); err != nil {
		t.Fatal(err)
	}
	_, err = q.Send(ctx(t), to(0, "q2")...) // partition 0 already added: straight to storage
	if errs.Of(err) != errs.InvalidProducerEpoch {
		t.Fatalf("a produce at a fenced epoch: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	if got := q.Commit(ctx(t)); got == nil || got.Error() != err.Error() {
		t.Errorf("Commit after the storage node fenced the producer: %v, want %v", got, err)
	}
	_ = cl
}

// A Send whose outcome is unknown leaves only Abort: Commit refuses with
// ErrAbortRequired; after Abort the next transaction starts afresh.
func TestTransactionalProducerUnknownOutcomeRequiresAbort(t *testing.T) {
	cl, _, _, c := txnSetup(t, 1)
	p, err := c.NewTransactionalProducer(ctx(t), "tx-abort")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	st := cl.Storage[1]
	st.FailNext("out", 0, errs.Errorf(errs.MessageTooLarge, "too large"), 1)
	if _, err := p.Send(ctx(t), to(0, "refused")...); errs.Of(err) != errs.MessageTooLarge || errors.Is(err, client.ErrAbortRequired) {
		t.Fatalf("a refused Send: %v, want MESSAGE_TOO_LARGE, the transaction going on", err)
	}
	if _, err := p.Send(ctx(t), to(0, "ok")...); err != nil {
		t.Fatalf("Send after a refusal: %v", err)
	}
	release := st.Stall()
	short, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
	res, err := p.Send(short, to(0, "unknown")...)
	cancel()
	release()
	if !errors.Is(err, client.ErrAbortRequired) || len(res) != 1 || !res[0].MaybeWritten {
		t.Fatalf("a Send with no answer: %v %+v, want ErrAbortRequired and MaybeWritten", err, res)
	}
	if _, err := p.Send(ctx(t), to(0, "more")...); !errors.Is(err, client.ErrAbortRequired) {
		t.Errorf("Send after it: %v, want ErrAbortRequired", err)
	}
	if err := p.Commit(ctx(t)); !errors.Is(err, client.ErrAbortRequired) {
		t.Errorf("Commit after it: %v, want ErrAbortRequired", err)
	}
	_, before := p.ProducerIdentity()
	if err := p.Abort(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, after := p.ProducerIdentity(); after != before+1 {
		t.Errorf("epoch %d after the abort, want %d", after, before+1)
	}
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx(t), to(0, "next")...); err != nil {
		t.Fatalf("Send in the next transaction: %v", err)
	}
	if err := p.Commit(ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// A read_committed group member does not start a partition whose offset is
// pending in a transaction until the transaction ends, then starts at the
// committed offset; SeekToCommitted takes it back there after an abort.
func TestReadCommittedMemberWaitsForStableOffsets(t *testing.T) {
	_, _, _, c := txnSetup(t, 1)
	createTopic(t, c, "t", 1, nil)
	produceN(t, c, "t", 1, 10)
	p, err := c.NewTransactionalProducer(ctx(t), "tx-stable")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	tp := client.TopicPartition{Topic: "t", Partition: 0}
	if err := p.SendOffsets(ctx(t), "copier", map[client.TopicPartition]int64{tp: 4}); err != nil {
		t.Fatal(err)
	}
	gc := newMember(t, c, "copier", client.GroupConsumerConfig{Isolation: skeinv1.IsolationLevel_READ_COMMITTED})
	defer gc.Close(ctx(t))
	for range 5 {
		recs, err := gc.Poll(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) > 0 {
			t.Fatalf("read %d records from offset %d while the offset is pending", len(recs), recs[0].Offset)
		}
	}
	if err := p.Commit(ctx(t)); err != nil {
		t.Fatal(err)
	}
	first := func() int64 {
		t.Helper()
		for range 20 {
			recs, err := gc.Poll(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) > 0 {
				return recs[0].Offset
			}
		}
		t.Fatal("no records")
		return -1
	}
	if off := first(); off != 4 {
		t.Errorf("started at %d, want the committed 4", off)
	}
	gc.SeekToCommitted()
	if off := first(); off != 4 {
		t.Errorf("after SeekToCommitted started at %d, want 4", off)
	}
}

// A coordinator whose metadata has not caught up with a new topic answers
// UNKNOWN_TOPIC_OR_PARTITION for a partition the producer already sees:
// the add is asked again, and the records are written once.
func TestAddPartitionsRetriesACoordinatorBehindOnMetadata(t *testing.T) {
	cl, tc, _, c := txnSetup(t, 1)
	p, err := c.NewTransactionalProducer(ctx(t), "tx-new-topic")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	tc.FailNext(errs.Errorf(errs.UnknownTopicOrPartition, "no partition out-0"), 2)
	if _, err := p.Send(ctx(t), to(0, "v1", "v2")...); err != nil {
		t.Fatalf("send after two UNKNOWN_TOPIC_OR_PARTITION answers: %v", err)
	}
	if err := p.Commit(ctx(t)); err != nil {
		t.Fatal(err)
	}
	adds := 0
	for _, call := range tc.Calls() {
		if call == "add" {
			adds++
		}
	}
	if adds != 3 {
		t.Errorf("%d AddPartitionsToTxn calls, want 3 (two refused, one served)", adds)
	}
	if got := batchIDs(cl.Storage[1], "out", 0); len(got) != 1 {
		t.Errorf("partition batches %v, want one", got)
	}
}

// A Commit whose answer was lost may have committed: an Abort after it is
// refused (the coordinator decided the other way) rather than answered as
// if nothing was open, and the Commit tried again takes the epoch the
// coordinator gave, so the next transaction goes on.
func TestAbortAfterALostCommitIsRefused(t *testing.T) {
	_, tc, _, c := txnSetup(t, 1)
	p, err := c.NewTransactionalProducer(ctx(t), "tx-lost")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	lost := errs.Errorf(errs.CoordinatorNotAvailable, "the answer was lost")
	tc.LoseNextAnswers(lost, 1000) // the add takes effect, every answer to it is lost
	short, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
	_, err = p.Send(short, to(0, "a")...)
	cancel()
	if err == nil {
		t.Fatal("Send with its add's answers lost succeeded")
	}
	tc.KeepAnswers()
	tc.LoseNextAnswers(lost, 1000) // the commit takes effect, every answer to it is lost
	short, cancel = context.WithTimeout(ctx(t), 300*time.Millisecond)
	err = p.Commit(short)
	cancel()
	if err == nil {
		t.Fatal("Commit with its answers lost succeeded")
	}
	tc.KeepAnswers()
	if err := p.Abort(ctx(t)); errs.Of(err) != errs.InvalidTxnState {
		t.Fatalf("Abort after the lost commit: %v, want INVALID_TXN_STATE", err)
	}
	if err := p.Commit(ctx(t)); err != nil {
		t.Fatalf("Commit again: %v", err)
	}
	pid, epoch, _ := tc.Identity("tx-lost")
	if gotPID, gotEpoch := p.ProducerIdentity(); gotPID != pid || gotEpoch != epoch {
		t.Fatalf("producer at %d/%d, the coordinator at %d/%d", gotPID, gotEpoch, pid, epoch)
	}
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx(t), to(0, "next")...); err != nil {
		t.Fatalf("Send in the next transaction: %v", err)
	}
	if err := p.Commit(ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// An Abort retried after the first never reached the coordinator (nor did
// the transaction's adds) finds nothing open and closes the local
// transaction, so the producer goes on: INVALID_TXN_STATE only refuses an
// end after one of the other decision may have decided it.
func TestAbortRetriedAfterItNeverArrived(t *testing.T) {
	_, tc, _, c := txnSetup(t, 1)
	p, err := c.NewTransactionalProducer(ctx(t), "tx-unreached")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	down := errs.Errorf(errs.CoordinatorNotAvailable, "the coordinator is down")
	tc.FailNext(down, 1000) // nothing reaches it
	short, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
	_, err = p.Send(short, to(0, "a")...)
	cancel()
	if err == nil {
		t.Fatal("Send with the coordinator down succeeded")
	}
	short, cancel = context.WithTimeout(ctx(t), 300*time.Millisecond)
	err = p.Abort(short)
	cancel()
	if err == nil {
		t.Fatal("Abort with the coordinator down succeeded")
	}
	// A retry the deadline cuts short answers that its outcome is unknown
	// (REQUEST_TIMED_OUT: it may have reached the coordinator), and why it
	// was being retried.
	tc.KeepAnswers()
	tc.FailNext(down, 1)
	tc.HangNextEnds(1)
	short, cancel = context.WithTimeout(ctx(t), time.Second)
	err = p.Abort(short)
	cancel()
	if errs.Of(err) != errs.RequestTimedOut || !strings.Contains(errs.Message(err), "COORDINATOR_NOT_AVAILABLE: the coordinator is down") {
		t.Fatalf("Abort cut short while retrying: %v, want REQUEST_TIMED_OUT naming the refusal before it", err)
	}
	tc.KeepAnswers()
	if err := p.Abort(ctx(t)); err != nil {
		t.Fatalf("Abort again with the coordinator back: %v", err)
	}
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx(t), to(0, "b")...); err != nil {
		t.Fatalf("Send in the next transaction: %v", err)
	}
	if err := p.Commit(ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// SendGroupOffsets names the member that consumed the offsets: the
// coordinator takes them from that member at its current epoch, and a
// refusal leaves the transaction to be aborted.
func TestSendGroupOffsetsNamesTheMember(t *testing.T) {
	_, _, _, c := txnSetup(t, 1)
	createTopic(t, c, "t", 1, nil)
	produceN(t, c, "t", 1, 10)
	gc := newMember(t, c, "copier", client.GroupConsumerConfig{})
	defer gc.Close(ctx(t))
	for deadline := time.Now().Add(10 * time.Second); len(gc.Assignment()) == 0; {
		if _, err := gc.Poll(ctx(t)); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the member got no partition")
		}
	}
	p, err := c.NewTransactionalProducer(ctx(t), "tx-member")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tp := client.TopicPartition{Topic: "t", Partition: 0}
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	meta := gc.GroupMetadata()
	if meta.Group != "copier" || meta.MemberID == "" || meta.MemberEpoch <= 0 {
		t.Fatalf("group metadata %+v", meta)
	}
	if err := p.SendGroupOffsets(ctx(t), meta, map[client.TopicPartition]int64{tp: 3}); err != nil {
		t.Fatalf("the owner's offsets: %v", err)
	}
	if err := p.Commit(ctx(t)); err != nil {
		t.Fatal(err)
	}

	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	stale := meta
	stale.MemberEpoch += 5
	if err := p.SendGroupOffsets(ctx(t), stale, map[client.TopicPartition]int64{tp: 4}); errs.Of(err) != errs.StaleMemberEpoch {
		t.Fatalf("a stale epoch: %v, want STALE_MEMBER_EPOCH", err)
	}
	if err := p.Commit(ctx(t)); !errors.Is(err, client.ErrAbortRequired) {
		t.Errorf("Commit after a refused SendGroupOffsets: %v, want ErrAbortRequired", err)
	}
	if err := p.Abort(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := p.SendGroupOffsets(ctx(t), client.GroupMetadata{Group: "copier"}, map[client.TopicPartition]int64{tp: 4}); errs.Of(err) != errs.InvalidRequest {
		t.Errorf("no member id: %v, want INVALID_REQUEST", err)
	}
}

// A Send that wrote some of its records and failed others leaves only
// Abort (Commit would publish half of it); one refused by its records'
// checks writes nothing and the transaction goes on; a Send larger than
// max.message.bytes goes in several batches of consecutive sequences; and
// a partition without an answer fails the Send at the delivery timeout.
func TestTransactionalSendIsWholeOrAborted(t *testing.T) {
	cl, _, _, c := txnSetup(t, 2)
	createTopic(t, c, "small", 1, map[string]string{"max.message.bytes": "2000"})
	createTopic(t, c, "table", 1, map[string]string{"cleanup.policy": "compact"})
	p, err := c.NewTransactionalProducer(ctx(t), "tx-whole", client.WithTxnDeliveryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	st := cl.Storage[1]
	big := client.Record{Topic: "small", Partition: ptr(int32(0)), Value: make([]byte, 3000)}
	keyless := client.Record{Topic: "table", Value: []byte("no key")}
	for _, bad := range []client.Record{big, keyless} {
		_, err := p.Send(ctx(t), append(to(0, "beside"), bad)...)
		if err == nil || errors.Is(err, client.ErrAbortRequired) || !strings.Contains(err.Error(), "record 1") {
			t.Fatalf("a Send with a record its leader would refuse: %v, want a refusal naming record 1, the transaction going on", err)
		}
	}
	if n := len(st.Batches("out", 0)); n != 0 {
		t.Fatalf("the refused Sends wrote %d batches", n)
	}

	// One Send of 3 × 800 bytes to a topic of 2000-byte batches.
	var recs []client.Record
	for i := range 3 {
		recs = append(recs, client.Record{Topic: "small", Partition: ptr(int32(0)), Value: []byte(strings.Repeat(fmt.Sprint(i), 800))})
	}
	res, err := p.Send(ctx(t), recs...)
	if err != nil {
		t.Fatalf("a Send over max.message.bytes in all: %v", err)
	}
	if got := batchIDs(st, "small", 0); len(got) < 2 || res[2].Offset != 2 {
		t.Fatalf("batches %v, offsets %+v; want the records split over batches, offsets 0..2", got, res)
	}
	next := int32(0)
	for _, b := range st.Batches("small", 0) {
		if b.BaseSequence() != next {
			t.Errorf("batches %v: each should start at the sequence after the one before", batchIDs(st, "small", 0))
		}
		next = b.BaseSequence() + b.RecordCount()
	}

	// Partition 0 writes, partition 1's leader refuses its batch: the
	// transaction can only be aborted.
	st.FailNext("out", 1, errs.Errorf(errs.InvalidRecord, "refused"), 1)
	res, err = p.Send(ctx(t), append(to(0, "written"), to(1, "refused")...)...)
	if !errors.Is(err, client.ErrAbortRequired) || res[0].Err != nil || res[1].Err == nil || res[1].MaybeWritten {
		t.Fatalf("a Send half written: %v %+v, want ErrAbortRequired, record 0 written", err, res)
	}
	if err := p.Commit(ctx(t)); !errors.Is(err, client.ErrAbortRequired) {
		t.Errorf("Commit after a half-written Send: %v, want ErrAbortRequired", err)
	}
	if err := p.Abort(ctx(t)); err != nil {
		t.Fatal(err)
	}

	// A partition whose leader never takes the batch: the Send fails at
	// the delivery timeout, its outcome unknown.
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	st.FailNext("out", 1, errs.Errorf(errs.NotLeaderOrFollower, "moved"), 1_000_000)
	start := time.Now()
	if _, err := p.Send(ctx(t), to(1, "stuck")...); !errors.Is(err, client.ErrAbortRequired) {
		t.Errorf("a Send that never gets an answer: %v, want ErrAbortRequired", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the Send took %v past its 1 s delivery timeout", took)
	}
	st.ClearFailures("out", 1)
	if err := p.Abort(ctx(t)); err != nil {
		t.Fatal(err)
	}
}
