package coordinator

import (
	"context"
	"sync"
	"testing"

	txnv1 "skein/gen/skein/txn/v1"
	"skein/libs/errs"
)

func TestOpenIn(t *testing.T) {
	open := &txnv1.TransactionDescription{TransactionalId: "tx", State: "ONGOING", ProducerId: 7, ProducerEpoch: 3, Groups: []string{"app", "other"}}
	with := func(f func(d *txnv1.TransactionDescription)) *txnv1.TransactionDescription {
		d := &txnv1.TransactionDescription{TransactionalId: "tx", State: open.State, ProducerId: open.ProducerId,
			ProducerEpoch: open.ProducerEpoch, Groups: open.Groups}
		f(d)
		return d
	}
	for _, tc := range []struct {
		name  string
		d     *txnv1.TransactionDescription
		pid   int64
		epoch int16
		want  *errs.Error
	}{
		{"open, the group added", open, 7, 3, nil},
		{"ended: the epoch bumped", with(func(d *txnv1.TransactionDescription) { d.State, d.ProducerEpoch = "COMPLETE_ABORT", 4 }), 7, 3, errs.ProducerFenced},
		{"a newer transaction open", with(func(d *txnv1.TransactionDescription) { d.ProducerEpoch = 4 }), 7, 3, errs.ProducerFenced},
		{"another producer id holds it", with(func(d *txnv1.TransactionDescription) { d.ProducerId = 8 }), 7, 3, errs.ProducerFenced},
		// What a transaction coordinator that has not caught up answers:
		// retried.
		{"an epoch not seen yet", open, 7, 5, errs.CoordinatorLoadInProgress},
		{"not open yet at that epoch", with(func(d *txnv1.TransactionDescription) { d.State, d.Groups = "COMPLETE_COMMIT", nil }), 7, 3, errs.CoordinatorLoadInProgress},
		{"the group not added yet", with(func(d *txnv1.TransactionDescription) { d.Groups = []string{"other"} }), 7, 3, errs.CoordinatorLoadInProgress},
	} {
		if err := openIn(tc.d, tc.pid, tc.epoch, "app"); (tc.want == nil) != (err == nil) || err != nil && errs.Of(err) != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// fakeTxns is the transaction coordinators as VerifyOpen sees them: each
// transactional id's description, or err for all.
type fakeTxns struct {
	mu    sync.Mutex
	descs map[string]*txnv1.TransactionDescription
	err   error
	calls int
	// entered, when set, is told of each call, which then waits for
	// release before it looks.
	entered, release chan struct{}
}

func (f *fakeTxns) VerifyOpen(_ context.Context, id string, pid int64, epoch int16, group string) error {
	f.mu.Lock()
	entered, release := f.entered, f.release
	f.mu.Unlock()
	if entered != nil {
		entered <- struct{}{}
		<-release
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return f.err
	}
	d, ok := f.descs[id]
	if !ok {
		return errs.Errorf(errs.InvalidTxnState, "no transaction open")
	}
	return openIn(d, pid, epoch, group)
}

func (f *fakeTxns) set(id, state string, pid int64, epoch int32, groups ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.descs[id] = &txnv1.TransactionDescription{TransactionalId: id, State: state, ProducerId: pid, ProducerEpoch: epoch, Groups: groups}
}

func startVerifying(t *testing.T, log Log, node int32, v View, txns TxnVerifier) *Coordinator {
	t.Helper()
	cfg := testConfig(node)
	cfg.Transactions = txns
	c := New(cfg, log, nil)
	t.Cleanup(c.Close)
	c.OnMetadata(v)
	return c
}

// A TxnOffsetCommit of a transaction that ended under the group's previous
// coordinator reaches the new one late (a gateway still retrying it): the
// new coordinator never saw the completion, so it asks the transaction
// coordinator, and the offset is refused instead of staying pending for
// good, which would keep read_committed members from ever starting the
// partition.
func TestALateTxnOffsetCommitAfterAFailoverIsRefused(t *testing.T) {
	log := newMemLog()
	txns := &fakeTxns{descs: map[string]*txnv1.TransactionDescription{}}
	txns.set("tx-app", "ONGOING", 7, 3, "app")
	a := startVerifying(t, log, 1, owning(1, all()...), txns)
	waitLoaded(t, a, nParts)
	mustTxnCommit(t, a, "app", 7, 3, 0, 10)
	mustTxnCommit(t, a, "app", 7, 3, 1, 11) // the same transaction: not asked again
	if txns.calls != 1 {
		t.Fatalf("the transaction coordinator was asked %d times, want once", txns.calls)
	}
	complete(t, a, "app", 7, 4, false) // aborted, the epoch bumped
	txns.set("tx-app", "COMPLETE_ABORT", 7, 4)
	a.OnMetadata(owning(1))

	b := startVerifying(t, log, 2, owning(2, all()...), txns)
	waitLoaded(t, b, nParts)
	before := logLen(log, "app")
	if _, err := txnCommit(b, "app", 7, 3, Commit{Topic: "orders", Partition: 0, Offset: 12}); errs.Of(err) != errs.ProducerFenced {
		t.Fatalf("a late commit of the aborted transaction: %v, want PRODUCER_FENCED", err)
	}
	if n := logLen(log, "app"); n != before {
		t.Fatalf("the refused commit wrote %d records", n-before)
	}
	if got := fetchStable(t, b, "app", 0); got.Err != nil {
		t.Fatalf("a stable fetch after the refused commit: %+v", got)
	}

	// The producer's next transaction is verified and goes through; a
	// transaction coordinator that cannot be reached is a retriable error,
	// with nothing written.
	txns.set("tx-app", "ONGOING", 7, 4, "app")
	mustTxnCommit(t, b, "app", 7, 4, 0, 12)
	txns.err = errs.Errorf(errs.CoordinatorNotAvailable, "no transaction coordinator")
	before = logLen(log, "app")
	if _, err := txnCommit(b, "app", 9, 0, Commit{Topic: "orders", Partition: 2, Offset: 1}); errs.Of(err) != errs.CoordinatorNotAvailable {
		t.Fatalf("with the transaction coordinators out of reach: %v", err)
	}
	if n := logLen(log, "app"); n != before {
		t.Fatalf("an unverified commit wrote %d records", n-before)
	}
}

// A completion that comes while a TxnOffsetCommit is being checked, for a
// group the partition does not hold yet (the commit would create it), is
// not lost with the group it has no state in: the commit is refused.
func TestACompletionDuringTheCheckFencesTheCommit(t *testing.T) {
	log := newMemLog()
	txns := &fakeTxns{descs: map[string]*txnv1.TransactionDescription{}, entered: make(chan struct{}), release: make(chan struct{})}
	txns.set("tx-fresh", "ONGOING", 7, 3, "fresh")
	c := startVerifying(t, log, 1, owning(1, all()...), txns)
	waitLoaded(t, c, nParts)
	done := make(chan error, 1)
	go func() {
		_, err := txnCommit(c, "fresh", 7, 3, Commit{Topic: "orders", Partition: 0, Offset: 10})
		done <- err
	}()
	<-txns.entered // checked as open; the transaction now times out
	complete(t, c, "fresh", 7, 4, false)
	close(txns.release)
	if err := <-done; errs.Of(err) != errs.ProducerFenced {
		t.Fatalf("a commit whose transaction ended during its check: %v, want PRODUCER_FENCED", err)
	}
	if _, err := c.DescribeGroup(context.Background(), "fresh"); errs.Of(err) != errs.GroupIDNotFound {
		t.Fatalf("the refused commit left a group: %v", err)
	}
	if got := fetchStable(t, c, "fresh", 0); got.Err != nil {
		t.Fatalf("a stable fetch: %+v", got)
	}
	p, err := c.partitionFor("fresh")
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	kept, verifying := len(p.lostEnds), p.verifying
	p.mu.Unlock()
	if kept != 0 || verifying != 0 {
		t.Fatalf("after the check the partition keeps %d completions, %d checks", kept, verifying)
	}
}
