package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	txnv1 "skein/gen/skein/txn/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/services/txncoord/internal/txn"
)

// metric answers the value of a counter or gauge registered on reg.
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		m := mf.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			return c.GetValue()
		}
		return m.GetGauge().GetValue()
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func offsetsTP(group string) string {
	return fmt.Sprintf("%s:%d", metadata.ConsumerOffsetsTopic, metadata.CoordinatorPartition(group, offsetsParts))
}

// TestCommitAndAbort: the happy paths. Every state is in the log before
// the answer, EndTxn answers the bumped epoch, the markers go out at that
// epoch to every partition and to the group's __consumer_offsets
// partition, and COMPLETE follows.
func TestCommitAndAbort(t *testing.T) {
	e := newEnv(t)
	m := &fakeMarkers{}
	reg := prometheus.NewRegistry()
	c := e.start(1, m, owning(3, all()...), NewMetrics(reg))
	id := "app-tx"
	eventually(t, "every partition loaded", func() bool { return len(c.serving()) == nParts })

	pid, epoch := initTxn(t, c, id, 60_000)
	if pid != 1000 || epoch != 0 {
		t.Fatalf("InitProducerId: %d/%d, want 1000/0", pid, epoch)
	}
	mustAdd(t, c, id, pid, epoch, tp("u", 1), tp("t", 1), tp("t", 0))
	mustAdd(t, c, id, pid, epoch, tp("t", 1)) // in already: nothing written
	if row, err := addOffsets(c, id, pid, int32(epoch), "g1"); err != nil || row != errs.None {
		t.Fatalf("AddOffsetsToTxn: %v %v", row, err)
	}
	e.clock.Add(1500 * time.Millisecond)
	if g := c.gauges(); g.open != 1 || g.oldest != 1.5 || g.ids != 1 || g.owned != nParts {
		t.Fatalf("gauges with one open transaction: %+v", g)
	}
	d := describe(c, id)
	wantParts := "__consumer_offsets:" + fmt.Sprint(metadata.CoordinatorPartition("g1", offsetsParts))
	if d.GetState() != "ONGOING" || d.GetProducerId() != pid || d.GetProducerEpoch() != 0 || d.GetTransactionTimeoutMs() != 60_000 ||
		d.GetStartTimeMs() != newClock().Now().UnixMilli() || len(d.GetPartitions()) != 3 ||
		fmt.Sprintf("%s:%d", d.GetPartitions()[0].GetTopic(), d.GetPartitions()[0].GetPartitions()[0]) != wantParts ||
		fmt.Sprint(d.GetPartitions()[1].GetPartitions()) != "[0 1]" || d.GetPartitions()[2].GetTopic() != "u" ||
		!slices.Equal(d.GetGroups(), []string{"g1"}) {
		t.Fatalf("describe: %v", d)
	}
	resp, row, err := endTxn(c, id, pid, int32(epoch), true)
	if err != nil || row != errs.None || resp.GetProducerId() != pid || resp.GetProducerEpoch() != 1 {
		t.Fatalf("EndTxn commit: %v %v %v", resp, row, err)
	}
	waitState(t, c, id, txn.CompleteCommit)
	want := []markerCall{{pid, 1, true, 3, offsetsTP("g1") + ";t:0,1;u:1"}}
	if got := m.written(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("markers:\n got %v\nwant %v", got, want)
	}

	// The next transaction, aborted, at the epoch EndTxn answered.
	mustAdd(t, c, id, pid, 1, tp("t", 2))
	resp, row, err = endTxn(c, id, pid, 1, false)
	if err != nil || row != errs.None || resp.GetProducerEpoch() != 2 {
		t.Fatalf("EndTxn abort: %v %v %v", resp, row, err)
	}
	waitState(t, c, id, txn.CompleteAbort)
	want = append(want, markerCall{pid, 2, false, 3, "t:2"})
	if got := m.written(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("markers:\n got %v\nwant %v", got, want)
	}
	wantLog := []string{"EMPTY/0", "ONGOING/0", "ONGOING/0", "PREPARE_COMMIT/1", "COMPLETE_COMMIT/1", "ONGOING/1", "PREPARE_ABORT/2", "COMPLETE_ABORT/2"}
	for i := range wantLog {
		wantLog[i] = id + " " + wantLog[i]
	}
	if got := states(t, e.log, partitionOf(id)); !slices.Equal(got, wantLog) {
		t.Fatalf("log:\n got %v\nwant %v", got, wantLog)
	}
	// Every write went under the partition's producer id at the coordinator
	// epoch, sequences in order.
	for i, r := range e.log.records(partitionOf(id)) {
		if r.id.ProducerID != 100+int64(partitionOf(id)) || r.id.Epoch != 3 || r.id.Sequence != int32(i) {
			t.Fatalf("record %d written as %+v", i, r.id)
		}
	}
	if g := c.gauges(); g.open != 0 || g.oldest != 0 {
		t.Fatalf("gauges with none open: %+v", g)
	}
	for name, want := range map[string]float64{"skein_txncoord_commits_total": 1, "skein_txncoord_aborts_total": 1,
		"skein_txncoord_timeouts_total": 0, "skein_txncoord_open_transactions": 0, "skein_txncoord_partitions_owned": nParts} {
		if got := metric(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// A producer that lost the answer of its EndTxn retries it and gets the
	// same answer, with nothing written.
	n := totalSize(e.log)
	resp, row, err = endTxn(c, id, pid, 1, false)
	if err != nil || row != errs.None || resp.GetProducerEpoch() != 2 || totalSize(e.log) != n {
		t.Fatalf("retried EndTxn: %v %v %v", resp, row, err)
	}
	// The listing: every id with a state, filtered by state and producer id.
	initTxn(t, c, "idle", 60_000)
	for _, tc := range []struct {
		states []txn.State
		pids   []int64
		want   string
	}{
		{nil, nil, "[{app-tx 1000 COMPLETE_ABORT} {idle 1001 EMPTY}]"},
		{[]txn.State{txn.CompleteAbort}, nil, "[{app-tx 1000 COMPLETE_ABORT}]"},
		{[]txn.State{txn.Empty, txn.CompleteAbort}, []int64{1001}, "[{idle 1001 EMPTY}]"},
		{[]txn.State{txn.PrepareCommit}, nil, "[]"},
		{nil, []int64{7}, "[]"},
	} {
		if got := fmt.Sprint(c.ListTransactions(tc.states, tc.pids)); got != tc.want {
			t.Errorf("list %v %v: %s, want %s", tc.states, tc.pids, got, tc.want)
		}
	}

}

// TestIdempotentProducer: without a transactional id any coordinator
// answers a fresh producer id at epoch 0 and keeps nothing.
func TestIdempotentProducer(t *testing.T) {
	e := newEnv(t)
	c := e.start(1, &fakeMarkers{}, View{}, nil) // owns nothing; __transaction_state does not even exist
	for want := int64(1000); want < 1003; want++ {
		resp, err := c.InitProducerId(context.Background(), &txnv1.InitProducerIdRequest{ProducerId: -1, ProducerEpoch: -1})
		if err != nil || resp.GetErrorCode() != skeinv1.ErrorCode_NONE || resp.GetProducerId() != want || resp.GetProducerEpoch() != 0 {
			t.Fatalf("idempotent InitProducerId: %v %v, want %d/0", resp, err, want)
		}
	}
	if n := totalSize(e.log); n != 0 {
		t.Fatalf("%d records written for idempotent producers", n)
	}
	// A transactional id needs __transaction_state.
	if _, err := c.InitProducerId(context.Background(), &txnv1.InitProducerIdRequest{TransactionalId: "x", TransactionTimeoutMs: 1000}); errs.Of(err) != errs.CoordinatorNotAvailable {
		t.Fatalf("transactional id before %s exists: %v", metadata.TransactionStateTopic, err)
	}
	// No producer id to be had: retriable, as a Go error.
	cfg := e.config(2)
	cfg.AllocateProducerID = func(context.Context) (int64, error) { return 0, errs.Errorf(errs.NotController, "no leader") }
	c2 := New(cfg, e.log, &fakeMarkers{}, nil)
	defer c2.Close()
	if _, err := c2.InitProducerId(context.Background(), &txnv1.InitProducerIdRequest{}); errs.Of(err) != errs.CoordinatorNotAvailable {
		t.Fatalf("allocation failure: %v", err)
	}
}

// TestNotCoordinator: ids of partitions not owned answer NOT_COORDINATOR,
// as Go errors (per id in DescribeTransactions); so does an id of a
// partition given up.
func TestNotCoordinator(t *testing.T) {
	e := newEnv(t)
	mine := idOn(1)
	other := idOn(2)
	c := e.start(1, &fakeMarkers{}, owning(1, 1), nil)
	waitServing(t, c, mine)
	pid, epoch := initTxn(t, c, mine, 1000)
	n := totalSize(e.log)

	check := func(id string) {
		t.Helper()
		ctx := context.Background()
		_, err := c.InitProducerId(ctx, &txnv1.InitProducerIdRequest{TransactionalId: id, TransactionTimeoutMs: 1000, ProducerId: -1, ProducerEpoch: -1})
		if errs.Of(err) != errs.NotCoordinator {
			t.Errorf("InitProducerId of %s: %v", id, err)
		}
		if _, err := addParts(c, id, pid, int32(epoch), tp("t", 0)); errs.Of(err) != errs.NotCoordinator {
			t.Errorf("AddPartitionsToTxn of %s: %v", id, err)
		}
		if _, err := addOffsets(c, id, pid, int32(epoch), "g"); errs.Of(err) != errs.NotCoordinator {
			t.Errorf("AddOffsetsToTxn of %s: %v", id, err)
		}
		if _, _, err := endTxn(c, id, pid, int32(epoch), true); errs.Of(err) != errs.NotCoordinator {
			t.Errorf("EndTxn of %s: %v", id, err)
		}
		if d := describe(c, id); rowOf(d.GetErrorCode()) != errs.NotCoordinator {
			t.Errorf("DescribeTransactions of %s: %v", id, d)
		}
	}
	check(other)
	c.OnMetadata(owning(1)) // the partition moves away
	check(mine)
	if got := totalSize(e.log); got != n {
		t.Fatalf("%d records written by refused calls", got-n)
	}
}

// TestLoadInProgress: while a partition loads, its ids answer
// COORDINATOR_LOAD_IN_PROGRESS; then the state written before is there.
func TestLoadInProgress(t *testing.T) {
	e := newEnv(t)
	id := "loading"
	a := e.start(1, &fakeMarkers{}, owning(1, all()...), nil)
	waitServing(t, a, id)
	pid, epoch := initTxn(t, a, id, 1000)
	mustAdd(t, a, id, pid, epoch, tp("t", 3))
	a.OnMetadata(owning(1))

	hold := make(chan struct{})
	e.log.setHold(hold)
	b := e.start(2, &fakeMarkers{}, owning(2, all()...), nil)
	_, err := b.InitProducerId(context.Background(), &txnv1.InitProducerIdRequest{TransactionalId: id, TransactionTimeoutMs: 1000, ProducerId: -1, ProducerEpoch: -1})
	if errs.Of(err) != errs.CoordinatorLoadInProgress {
		t.Fatalf("InitProducerId while loading: %v", err)
	}
	if _, err := addParts(b, id, pid, int32(epoch), tp("t", 0)); errs.Of(err) != errs.CoordinatorLoadInProgress {
		t.Fatalf("AddPartitionsToTxn while loading: %v", err)
	}
	if d := describe(b, id); rowOf(d.GetErrorCode()) != errs.CoordinatorLoadInProgress {
		t.Fatalf("DescribeTransactions while loading: %v", d)
	}
	close(hold)
	waitServing(t, b, id)
	if d := describe(b, id); d.GetState() != "ONGOING" || d.GetProducerId() != pid || len(d.GetPartitions()) != 1 {
		t.Fatalf("after the load: %v", d)
	}
	mustAdd(t, b, id, pid, epoch, tp("t", 2))
}

// TestFailoverInPrepareCommit: the coordinator fails over while the
// markers of a commit are being written. The new owner (a higher epoch, on
// the same log) finishes the markers at the transaction's epoch under its
// own coordinator epoch and completes; the old owner's writes are then
// refused by the log and it drops the partition.
func TestFailoverInPrepareCommit(t *testing.T) {
	e := newEnv(t)
	ma := &fakeMarkers{hold: make(chan struct{})}
	a := e.start(1, ma, owning(1, all()...), nil)
	id := "failover"
	waitServing(t, a, id)
	pid, epoch := initTxn(t, a, id, 60_000)
	mustAdd(t, a, id, pid, epoch, tp("t", 0), tp("u", 0))
	if row, err := addOffsets(a, id, pid, int32(epoch), "g"); err != nil || row != errs.None {
		t.Fatal(row, err)
	}
	resp, row, err := endTxn(a, id, pid, int32(epoch), true)
	if err != nil || row != errs.None || resp.GetProducerEpoch() != 1 {
		t.Fatalf("EndTxn: %v %v %v", resp, row, err)
	}
	eventually(t, "markers attempted", func() bool { return ma.tries() > 0 })
	if d := describe(a, id); d.GetState() != "PREPARE_COMMIT" {
		t.Fatalf("while the markers hang: %v", d)
	}

	mb := &fakeMarkers{}
	b := e.start(2, mb, owning(2, all()...), nil)
	waitState(t, b, id, txn.CompleteCommit)
	want := []markerCall{{pid, 1, true, 2, offsetsTP("g") + ";t:0;u:0"}}
	if got := mb.written(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the new owner's markers:\n got %v\nwant %v", got, want)
	}
	// The producer goes on with the new owner at the bumped epoch.
	mustAdd(t, b, id, pid, 1, tp("t", 1))

	// The old owner's markers come through now; its COMPLETE is refused.
	close(ma.hold)
	eventually(t, "the old owner dropping the partition", func() bool {
		_, err := a.partitionFor(id)
		return errs.Of(err) == errs.NotCoordinator
	})
	// Its write to another partition (it does not know it lost) is refused
	// too, and it does not load again at its epoch from a lagging view.
	other := idOn((partitionOf(id)+1)%nParts, id)
	_, err = a.InitProducerId(context.Background(), &txnv1.InitProducerIdRequest{TransactionalId: other, TransactionTimeoutMs: 1000, ProducerId: -1, ProducerEpoch: -1})
	if errs.Of(err) != errs.NotCoordinator {
		t.Fatalf("the old owner's InitProducerId: %v", err)
	}
	a.OnMetadata(owning(1, all()...))
	if _, err := a.partitionFor(id); errs.Of(err) != errs.NotCoordinator {
		t.Fatalf("reloaded at a fenced epoch: %v", err)
	}

	wantLog := []string{"EMPTY/0", "ONGOING/0", "ONGOING/0", "PREPARE_COMMIT/1", "COMPLETE_COMMIT/1", "ONGOING/1"}
	for i := range wantLog {
		wantLog[i] = id + " " + wantLog[i]
	}
	if got := states(t, e.log, partitionOf(id)); !slices.Equal(got, wantLog) {
		t.Fatalf("log:\n got %v\nwant %v", got, wantLog)
	}
	// Nothing of the old owner after the new owner's owner record.
	for _, p := range all() {
		owned := false
		for _, r := range e.log.records(p) {
			owned = owned || isOwnerKey(r.Key) && r.id.Epoch == 2
			if owned && r.id.Epoch != 2 {
				t.Fatalf("partition %d: a write of epoch %d after the new owner's record", p, r.id.Epoch)
			}
		}
	}
	if n := len(states(t, e.log, partitionOf(other))); n != 0 {
		t.Fatalf("the fenced InitProducerId wrote %d records", n)
	}
}

// TestMarkersRetried: markers that fail are retried with backoff until
// written; then the transaction completes.
func TestMarkersRetried(t *testing.T) {
	e := newEnv(t)
	m := &fakeMarkers{fail: 3}
	reg := prometheus.NewRegistry()
	c := e.start(1, m, owning(1, all()...), NewMetrics(reg))
	id := "retry"
	waitServing(t, c, id)
	pid, epoch := initTxn(t, c, id, 60_000)
	mustAdd(t, c, id, pid, epoch, tp("t", 0))
	if _, row, err := endTxn(c, id, pid, int32(epoch), true); err != nil || row != errs.None {
		t.Fatal(row, err)
	}
	waitState(t, c, id, txn.CompleteCommit)
	if m.tries() != 4 || len(m.written()) != 1 {
		t.Fatalf("%d attempts, %d written: want 4 and 1", m.tries(), len(m.written()))
	}
	if got := metric(t, reg, "skein_txncoord_marker_failures_total"); got != 3 {
		t.Fatalf("marker failures: %v", got)
	}
}

// TestTimeoutAbort: a transaction older than its timeout is aborted at a
// bumped epoch (its producer is fenced), markers and all; an id idle for
// the expiration is deleted.
func TestTimeoutAbort(t *testing.T) {
	e := newEnv(t)
	m := &fakeMarkers{}
	reg := prometheus.NewRegistry()
	cfg := e.config(1)
	cfg.Txn.IDExpiration = time.Hour
	c := New(cfg, e.log, m, NewMetrics(reg))
	t.Cleanup(c.Close)
	c.OnMetadata(owning(1, all()...))
	id := "slow"
	waitServing(t, c, id)
	pid, epoch := initTxn(t, c, id, 1000)
	mustAdd(t, c, id, pid, epoch, tp("t", 0), tp("u", 1))

	e.clock.Add(999 * time.Millisecond)
	c.wakeAll()
	time.Sleep(50 * time.Millisecond)
	if d := describe(c, id); d.GetState() != "ONGOING" {
		t.Fatalf("before the timeout: %v", d)
	}
	e.clock.Add(time.Millisecond)
	c.wakeAll()
	waitState(t, c, id, txn.CompleteAbort)
	want := []markerCall{{pid, 1, false, 1, "t:0;u:1"}}
	if got := m.written(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("markers:\n got %v\nwant %v", got, want)
	}
	for name, want := range map[string]float64{"skein_txncoord_timeouts_total": 1, "skein_txncoord_aborts_total": 1, "skein_txncoord_commits_total": 0} {
		if got := metric(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// The producer of the aborted transaction is fenced.
	n := totalSize(e.log)
	if _, row, err := endTxn(c, id, pid, int32(epoch), true); err != nil || row != errs.ProducerFenced {
		t.Fatalf("EndTxn of the timed-out producer: %v %v", row, err)
	}
	if rows, err := addParts(c, id, pid, int32(epoch), tp("t", 1)); err != nil || rows[0] != errs.ProducerFenced {
		t.Fatalf("AddPartitionsToTxn of the timed-out producer: %v %v", rows, err)
	}
	if totalSize(e.log) != n {
		t.Fatal("a fenced producer's call wrote")
	}

	// Idle for the expiration: the id is deleted (a tombstone).
	e.clock.Add(time.Hour)
	c.wakeAll()
	eventually(t, "the id's expiry", func() bool { return rowOf(describe(c, id).GetErrorCode()) == errs.TransactionalIDNotFound })
	got := states(t, e.log, partitionOf(id))
	if got[len(got)-1] != id+" -" {
		t.Fatalf("no tombstone: %v", got)
	}
	// The id starts afresh, with a new producer id.
	if pid2, epoch2 := initTxn(t, c, id, 1000); pid2 == pid || epoch2 != 0 {
		t.Fatalf("after the expiry: %d/%d", pid2, epoch2)
	}
}

// TestFencedZombie: a new instance of a producer (InitProducerId while a
// transaction is open) aborts the open transaction at a bumped epoch; the
// old instance's calls answer PRODUCER_FENCED, during the abort and after,
// and write nothing.
func TestFencedZombie(t *testing.T) {
	e := newEnv(t)
	m := &fakeMarkers{hold: make(chan struct{})}
	c := e.start(1, m, owning(1, all()...), nil)
	id := "zombie"
	waitServing(t, c, id)
	pid, epoch := initTxn(t, c, id, 60_000)
	mustAdd(t, c, id, pid, epoch, tp("t", 3))

	resp, err := c.InitProducerId(context.Background(), &txnv1.InitProducerIdRequest{TransactionalId: id, TransactionTimeoutMs: 60_000, ProducerId: -1, ProducerEpoch: -1})
	if err != nil || rowOf(resp.GetErrorCode()) != errs.ConcurrentTransactions {
		t.Fatalf("InitProducerId of the new instance during a transaction: %v %v", resp, err)
	}
	zombie := func(when string) {
		t.Helper()
		n := totalSize(e.log)
		if rows, err := addParts(c, id, pid, int32(epoch), tp("t", 0)); err != nil || rows[0] != errs.ProducerFenced {
			t.Errorf("%s: the zombie's AddPartitionsToTxn: %v %v", when, rows, err)
		}
		if row, err := addOffsets(c, id, pid, int32(epoch), "g"); err != nil || row != errs.ProducerFenced {
			t.Errorf("%s: the zombie's AddOffsetsToTxn: %v %v", when, row, err)
		}
		if _, row, err := endTxn(c, id, pid, int32(epoch), true); err != nil || row != errs.ProducerFenced {
			t.Errorf("%s: the zombie's EndTxn: %v %v", when, row, err)
		}
		if totalSize(e.log) != n {
			t.Errorf("%s: the zombie's calls wrote", when)
		}
	}
	eventually(t, "markers attempted", func() bool { return m.tries() > 0 })
	if d := describe(c, id); d.GetState() != "PREPARE_ABORT" || d.GetProducerEpoch() != 1 {
		t.Fatalf("during the fence: %v", d)
	}
	zombie("during the abort")
	// The new instance retries while the abort completes.
	resp, err = c.InitProducerId(context.Background(), &txnv1.InitProducerIdRequest{TransactionalId: id, TransactionTimeoutMs: 60_000, ProducerId: -1, ProducerEpoch: -1})
	if err != nil || rowOf(resp.GetErrorCode()) != errs.ConcurrentTransactions {
		t.Fatalf("InitProducerId while the abort completes: %v %v", resp, err)
	}
	close(m.hold)
	waitState(t, c, id, txn.CompleteAbort)
	if got, want := fmt.Sprint(m.written()), fmt.Sprint([]markerCall{{pid, 1, false, 1, "t:3"}}); got != want {
		t.Fatalf("markers: %s, want %s", got, want)
	}
	pid2, epoch2 := initTxn(t, c, id, 60_000)
	if pid2 != pid || epoch2 != 2 {
		t.Fatalf("the new instance: %d/%d, want %d/2", pid2, epoch2, pid)
	}
	zombie("after the abort")
	mustAdd(t, c, id, pid2, epoch2, tp("t", 0))
}

// TestBadInput: each bad request is refused with its code and writes
// nothing.
func TestBadInput(t *testing.T) {
	e := newEnv(t)
	c := e.start(1, &fakeMarkers{}, owning(1, all()...), nil)
	id, empty := "bad", "bad-empty"
	waitServing(t, c, id)
	waitServing(t, c, empty)
	pid, epoch := initTxn(t, c, id, 60_000)
	mustAdd(t, c, id, pid, epoch, tp("t", 0))
	emptyPID, emptyEpoch := initTxn(t, c, empty, 60_000)
	n := totalSize(e.log)
	ctx := context.Background()

	initRow := func(req *txnv1.InitProducerIdRequest) *errs.Error {
		resp, err := c.InitProducerId(ctx, req)
		if err != nil {
			return errs.Of(err)
		}
		if resp.GetErrorCode() != skeinv1.ErrorCode_NONE && (resp.GetProducerId() != -1 || resp.GetProducerEpoch() != -1) {
			t.Errorf("a refused InitProducerId answers %d/%d", resp.GetProducerId(), resp.GetProducerEpoch())
		}
		return rowOf(resp.GetErrorCode())
	}
	endRow := func(id string, pid int64, epoch int32, commit bool) *errs.Error {
		_, row, err := endTxn(c, id, pid, epoch, commit)
		if err != nil {
			return errs.Of(err)
		}
		return row
	}
	addRows := func(id string, pid int64, epoch int32, parts ...txn.TopicPartition) string {
		rows, err := addParts(c, id, pid, epoch, parts...)
		if err != nil {
			return "go:" + errs.Of(err).Name
		}
		var names []string
		for _, r := range rows {
			names = append(names, r.Name)
		}
		return strings.Join(names, ",")
	}
	offsetsRow := func(id string, pid int64, epoch int32, group string) *errs.Error {
		row, err := addOffsets(c, id, pid, epoch, group)
		if err != nil {
			return errs.Of(err)
		}
		return row
	}
	cases := []struct {
		what string
		got  any
		want any
	}{
		{"InitProducerId timeout 0", initRow(&txnv1.InitProducerIdRequest{TransactionalId: id, ProducerId: -1, ProducerEpoch: -1}), errs.InvalidTransactionTimeout},
		{"InitProducerId timeout too long", initRow(&txnv1.InitProducerIdRequest{TransactionalId: id, TransactionTimeoutMs: 16 * 60_000, ProducerId: -1, ProducerEpoch: -1}), errs.InvalidTransactionTimeout},
		{"InitProducerId epoch -5", initRow(&txnv1.InitProducerIdRequest{TransactionalId: id, TransactionTimeoutMs: 1000, ProducerId: -1, ProducerEpoch: -5}), errs.InvalidRequest},
		{"InitProducerId pid without epoch", initRow(&txnv1.InitProducerIdRequest{TransactionalId: id, TransactionTimeoutMs: 1000, ProducerId: pid, ProducerEpoch: -1}), errs.InvalidRequest},
		{"InitProducerId old pair", initRow(&txnv1.InitProducerIdRequest{TransactionalId: empty, TransactionTimeoutMs: 1000, ProducerId: emptyPID + 100, ProducerEpoch: 0}), errs.ProducerFenced},

		{"AddPartitions no transactional id", addRows("", pid, int32(epoch), tp("t", 1)), "INVALID_REQUEST"},
		{"AddPartitions no partitions", addRows(id, pid, int32(epoch)), "go:INVALID_REQUEST"},
		{"AddPartitions unknown", addRows(id, pid, int32(epoch), tp("nope", 0), tp("t", 4), tp("t", -1)), "UNKNOWN_TOPIC_OR_PARTITION,UNKNOWN_TOPIC_OR_PARTITION,UNKNOWN_TOPIC_OR_PARTITION"},
		{"AddPartitions internal", addRows(id, pid, int32(epoch), tp(metadata.TransactionStateTopic, 0)), "INVALID_TOPIC_EXCEPTION"},
		{"AddPartitions wrong producer id", addRows(id, pid+1, int32(epoch), tp("t", 1), tp("u", 0)), "INVALID_PRODUCER_ID_MAPPING,INVALID_PRODUCER_ID_MAPPING"},
		{"AddPartitions epoch too new", addRows(id, pid, int32(epoch)+1, tp("t", 1)), "PRODUCER_FENCED"},
		{"AddPartitions epoch out of range", addRows(id, pid, 1<<16, tp("t", 1)), "INVALID_REQUEST"},
		{"AddPartitions unknown id", addRows("nobody", pid, 0, tp("t", 1)), "INVALID_PRODUCER_ID_MAPPING"},

		{"AddOffsets no transactional id", offsetsRow("", pid, int32(epoch), "g"), errs.InvalidRequest},
		{"AddOffsets no group", offsetsRow(id, pid, int32(epoch), ""), errs.InvalidGroupID},
		{"AddOffsets wrong producer id", offsetsRow(id, pid+1, int32(epoch), "g"), errs.InvalidProducerIDMapping},

		{"EndTxn no transactional id", endRow("", pid, int32(epoch), true), errs.InvalidRequest},
		{"EndTxn wrong producer id", endRow(id, pid+1, int32(epoch), true), errs.InvalidProducerIDMapping},
		{"EndTxn epoch too new", endRow(id, pid, int32(epoch)+1, true), errs.ProducerFenced},
		{"EndTxn negative epoch", endRow(id, pid, -1, true), errs.InvalidRequest},
		{"EndTxn commit of nothing", endRow(empty, emptyPID, int32(emptyEpoch), true), errs.InvalidTxnState},
		{"EndTxn abort of nothing", endRow(empty, emptyPID, int32(emptyEpoch), false), errs.InvalidTxnState},
		{"EndTxn unknown id", endRow("nobody", pid, 0, true), errs.InvalidProducerIDMapping},
	}
	for _, tc := range cases {
		if fmt.Sprint(tc.got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %v, want %v", tc.what, tc.got, tc.want)
		}
	}
	if d := describe(c, "nobody"); rowOf(d.GetErrorCode()) != errs.TransactionalIDNotFound || d.GetState() != "DEAD" {
		t.Errorf("describe of an unknown id: %v", d)
	}
	if d := describe(c, ""); rowOf(d.GetErrorCode()) != errs.InvalidRequest {
		t.Errorf("describe of an empty id: %v", d)
	}
	if got := totalSize(e.log); got != n {
		t.Fatalf("bad input wrote %d records", got-n)
	}
	if d := describe(c, id); d.GetState() != "ONGOING" || len(d.GetPartitions()) != 1 || d.GetProducerEpoch() != 0 {
		t.Fatalf("bad input changed the transaction: %v", d)
	}
	// A request with good and bad partitions adds the good ones.
	if got := addRows(id, pid, int32(epoch), tp("t", 1), tp("nope", 1)); got != "NONE,UNKNOWN_TOPIC_OR_PARTITION" {
		t.Fatalf("mixed partitions: %s", got)
	}
	if d := describe(c, id); fmt.Sprint(d.GetPartitions()[0].GetPartitions()) != "[0 1]" {
		t.Fatalf("after the mixed request: %v", d)
	}
}

// TestWriteFailures: a write refused outright changes nothing; one of
// unknown outcome answers COORDINATOR_NOT_AVAILABLE and is settled (sent
// again with its sequence) before the next event.
func TestWriteFailures(t *testing.T) {
	e := newEnv(t)
	m := &fakeMarkers{}
	c := e.start(1, m, owning(1, all()...), nil)
	id := "flaky"
	waitServing(t, c, id)
	// Every partition has written its owner record: no load of another
	// partition takes the failures injected below for its own write.
	eventually(t, "every partition's owner record", func() bool {
		for _, p := range all() {
			if e.log.size(p) == 0 {
				return false
			}
		}
		return true
	})
	pid, epoch := initTxn(t, c, id, 60_000)
	n := e.log.size(partitionOf(id))

	// Refused outright.
	e.log.failWith(memFailure{err: errs.Errorf(errs.MessageTooLarge, "injected")})
	if rows, err := addParts(c, id, pid, int32(epoch), tp("t", 0)); err != nil || rows[0] != errs.MessageTooLarge {
		t.Fatalf("a refused write: %v %v", rows, err)
	}
	if d := describe(c, id); d.GetState() != "EMPTY" || e.log.size(partitionOf(id)) != n {
		t.Fatalf("after a refused write: %v", d)
	}

	// Appended, but the answer was lost.
	e.log.failWith(memFailure{err: errs.Errorf(errs.RequestTimedOut, "injected"), appended: true})
	if _, err := addParts(c, id, pid, int32(epoch), tp("t", 0)); errs.Of(err) != errs.CoordinatorNotAvailable {
		t.Fatalf("a write of unknown outcome: %v", err)
	}
	// The retry settles it (sent again: a duplicate) and finds it done.
	mustAdd(t, c, id, pid, epoch, tp("t", 0))
	if got := states(t, e.log, partitionOf(id)); fmt.Sprint(got) != fmt.Sprint([]string{id + " EMPTY/0", id + " ONGOING/0"}) {
		t.Fatalf("log: %v", got)
	}

	// Not appended, retriable: EndTxn answers COORDINATOR_NOT_AVAILABLE, and
	// so does its retry while the pending write, which goes first, still
	// fails; then the partition's loop settles it (it is written once) and
	// the transaction completes.
	e.log.failWith(memFailure{err: errs.Errorf(errs.NotEnoughReplicas, "injected")}, memFailure{err: errs.Errorf(errs.NotEnoughReplicas, "injected")})
	if _, _, err := endTxn(c, id, pid, int32(epoch), true); errs.Of(err) != errs.CoordinatorNotAvailable {
		t.Fatalf("EndTxn with an unknown outcome: %v", err)
	}
	if _, _, err := endTxn(c, id, pid, int32(epoch), true); errs.Of(err) != errs.CoordinatorNotAvailable {
		t.Fatalf("EndTxn while the outcome is still unknown: %v", err)
	}
	if d := describe(c, id); d.GetState() != "ONGOING" {
		t.Fatalf("while the outcome is unknown: %v", d)
	}
	waitState(t, c, id, txn.CompleteCommit)
	// The producer retries its EndTxn: the decision was written once.
	resp, row, err := endTxn(c, id, pid, int32(epoch), true)
	if err != nil || row != errs.None || resp.GetProducerEpoch() != 1 {
		t.Fatalf("retried EndTxn: %v %v %v", resp, row, err)
	}
	want := []string{id + " EMPTY/0", id + " ONGOING/0", id + " PREPARE_COMMIT/1", id + " COMPLETE_COMMIT/1"}
	if got := states(t, e.log, partitionOf(id)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("log:\n got %v\nwant %v", got, want)
	}
	if len(m.written()) != 1 {
		t.Fatalf("markers: %v", m.written())
	}
}

// TestResumeEpochFence: a log whose latest record of an id is
// PREPARE_EPOCH_FENCE (a foreign coordinator's) is resumed to the abort at
// its epoch: PREPARE_ABORT, markers, COMPLETE_ABORT.
func TestResumeEpochFence(t *testing.T) {
	e := newEnv(t)
	id := "fenced-elsewhere"
	start := newClock().Now().Add(-time.Minute)
	rec := txn.Record{TransactionalID: id, ProducerID: 77, ProducerEpoch: 4, PrevProducerID: txn.NoProducerID, PrevProducerEpoch: txn.NoEpoch,
		NextProducerID: txn.NoProducerID, Timeout: time.Minute, State: txn.PrepareEpochFence, Partitions: []txn.TopicPartition{tp("t", 2)},
		StartTime: start, UpdateTime: start}
	key, value, err := txn.Encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.log.Produce(context.Background(), partitionOf(id), Identity{ProducerID: 5, Epoch: 0}, []KV{{key, value}}); err != nil {
		t.Fatal(err)
	}
	m := &fakeMarkers{}
	c := e.start(1, m, owning(1, all()...), nil)
	waitState(t, c, id, txn.CompleteAbort)
	if got, want := fmt.Sprint(m.written()), fmt.Sprint([]markerCall{{77, 4, false, 1, "t:2"}}); got != want {
		t.Fatalf("markers: %s, want %s", got, want)
	}
	want := []string{id + " PREPARE_EPOCH_FENCE/4", id + " PREPARE_ABORT/4", id + " COMPLETE_ABORT/4"}
	if got := states(t, e.log, partitionOf(id)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("log:\n got %v\nwant %v", got, want)
	}
}

// TestClose: Close ends every goroutine, markers hanging included.
func TestClose(t *testing.T) {
	e := newEnv(t)
	m := &fakeMarkers{hold: make(chan struct{})}
	c := New(e.config(1), e.log, m, nil)
	c.OnMetadata(owning(1, all()...))
	id := "closing"
	waitServing(t, c, id)
	pid, epoch := initTxn(t, c, id, 60_000)
	mustAdd(t, c, id, pid, epoch, tp("t", 0))
	if _, row, err := endTxn(c, id, pid, int32(epoch), false); err != nil || row != errs.None {
		t.Fatal(row, err)
	}
	eventually(t, "markers attempted", func() bool { return m.tries() > 0 })
	done := make(chan struct{})
	go func() {
		c.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return while markers hang")
	}
	if _, err := c.partitionFor(id); errs.Of(err) != errs.NotCoordinator {
		t.Fatalf("after Close: %v", err)
	}
	c.OnMetadata(owning(1, all()...)) // ignored after Close
	if _, err := c.partitionFor(id); errs.Of(err) != errs.NotCoordinator {
		t.Fatalf("OnMetadata after Close: %v", err)
	}
}

// TestExhaustedEpoch: an EndTxn at the last epoch a producer is given
// answers a new producer id at epoch 0; the markers go out under the old
// id at the epoch no producer holds, and COMPLETE moves the id over.
func TestExhaustedEpoch(t *testing.T) {
	e := newEnv(t)
	id := "old-timer"
	start := newClock().Now().Add(-time.Second)
	rec := txn.Record{TransactionalID: id, ProducerID: 77, ProducerEpoch: txn.MaxHandedEpoch, PrevProducerID: txn.NoProducerID,
		PrevProducerEpoch: txn.NoEpoch, NextProducerID: txn.NoProducerID, Timeout: time.Minute, State: txn.Ongoing,
		Partitions: []txn.TopicPartition{tp("t", 0)}, StartTime: start, UpdateTime: start}
	key, value, err := txn.Encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.log.Produce(context.Background(), partitionOf(id), Identity{ProducerID: 5, Epoch: 0}, []KV{{key, value}}); err != nil {
		t.Fatal(err)
	}
	m := &fakeMarkers{}
	c := e.start(1, m, owning(1, all()...), nil)
	waitServing(t, c, id)
	resp, row, err := endTxn(c, id, 77, int32(txn.MaxHandedEpoch), true)
	if err != nil || row != errs.None || resp.GetProducerId() != 1000 || resp.GetProducerEpoch() != 0 {
		t.Fatalf("EndTxn at the exhausted epoch: %v %v %v", resp, row, err)
	}
	d := waitState(t, c, id, txn.CompleteCommit)
	if d.GetProducerId() != 1000 || d.GetProducerEpoch() != 0 {
		t.Fatalf("after the commit: %v", d)
	}
	if got, want := fmt.Sprint(m.written()), fmt.Sprint([]markerCall{{77, 32767, true, 1, "t:0"}}); got != want {
		t.Fatalf("markers: %s, want %s", got, want)
	}
	mustAdd(t, c, id, 1000, 0, tp("t", 1))
}

// TestConcurrentProducers: producers of many ids run transactions at once
// (run with -race); every one ends with its markers, and a new owner
// reads the same states back.
func TestConcurrentProducers(t *testing.T) {
	e := newEnv(t)
	m := &fakeMarkers{}
	reg := prometheus.NewRegistry()
	c := e.start(1, m, owning(1, all()...), NewMetrics(reg))
	const producers, rounds = 8, 5
	ids := make([]string, producers)
	for i := range ids {
		ids[i] = fmt.Sprint("p-", i)
		waitServing(t, c, ids[i])
	}
	errc := make(chan error, producers)
	for i, id := range ids {
		go func() {
			errc <- func() error {
				resp, err := c.InitProducerId(context.Background(), &txnv1.InitProducerIdRequest{TransactionalId: id, TransactionTimeoutMs: 60_000, ProducerId: -1, ProducerEpoch: -1})
				if err != nil || resp.GetErrorCode() != skeinv1.ErrorCode_NONE {
					return fmt.Errorf("%s: init: %v %v", id, resp, err)
				}
				pid, epoch := resp.GetProducerId(), int16(resp.GetProducerEpoch())
				for r := range rounds {
					// The previous transaction may still be completing.
					for {
						rows, err := addParts(c, id, pid, int32(epoch), tp("t", int32(r%4)), tp("u", int32(i%2)))
						if err != nil {
							return fmt.Errorf("%s: add: %v", id, err)
						}
						if rows[0] == errs.ConcurrentTransactions {
							time.Sleep(time.Millisecond)
							continue
						}
						if rows[0] != errs.None || rows[1] != errs.None {
							return fmt.Errorf("%s: add: %v", id, rows)
						}
						break
					}
					if r%2 == 0 {
						if row, err := addOffsets(c, id, pid, int32(epoch), fmt.Sprint("g", i)); err != nil || row != errs.None {
							return fmt.Errorf("%s: offsets: %v %v", id, row, err)
						}
					}
					resp, row, err := endTxn(c, id, pid, int32(epoch), r%3 != 0)
					if err != nil || row != errs.None {
						return fmt.Errorf("%s: end: %v %v", id, row, err)
					}
					epoch = int16(resp.GetProducerEpoch())
				}
				return nil
			}()
		}()
	}
	for range producers {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		d := waitState(t, c, id, txn.CompleteCommit) // the last round commits
		if d.GetProducerEpoch() != rounds {
			t.Fatalf("%s: %v", id, d)
		}
	}
	if n := len(m.written()); n != producers*rounds {
		t.Fatalf("%d markers written, want %d", n, producers*rounds)
	}
	commits := metric(t, reg, "skein_txncoord_commits_total")
	aborts := metric(t, reg, "skein_txncoord_aborts_total")
	if commits != producers*3 || aborts != producers*2 {
		t.Fatalf("commits %v aborts %v", commits, aborts)
	}
	c.OnMetadata(owning(1))
	b := e.start(2, &fakeMarkers{}, owning(2, all()...), nil)
	for _, id := range ids {
		waitServing(t, b, id)
		if d := describe(b, id); d.GetState() != "COMPLETE_COMMIT" || d.GetProducerEpoch() != rounds {
			t.Fatalf("%s at the new owner: %v", id, d)
		}
	}
}
