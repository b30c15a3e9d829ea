package txn

import (
	"fmt"
	"math"
	"slices"
	"time"

	"skein/libs/errs"
)

// Txn is the state machine of one transactional id. See the package comment.
type Txn struct {
	cfg Config
	rec Record
	// pending is the state being written, nil when none; pendingState is
	// what Describe shows for it (PREPARE_EPOCH_FENCE for a fence).
	pending      *Record
	pendingState State
}

// New answers the Txn of a transactional id the coordinator does not know:
// no producer id yet, nothing written. Only InitProducerId moves it on;
// every other event answers INVALID_PRODUCER_ID_MAPPING.
func New(cfg Config, transactionalID string) *Txn {
	return &Txn{cfg: cfg.withDefaults(), rec: Record{TransactionalID: transactionalID, ProducerID: NoProducerID,
		ProducerEpoch: NoEpoch, PrevProducerID: NoProducerID, PrevProducerEpoch: NoEpoch, NextProducerID: NoProducerID, State: Empty}}
}

// Load answers the Txn whose latest record is rec (read back from the log).
// It refuses (CORRUPT_MESSAGE) a record this package would never write, and
// a DEAD one (a tombstone: the id does not exist). Call Resume next.
func Load(cfg Config, rec Record) (*Txn, error) {
	if err := validate(rec); err != nil {
		return nil, err
	}
	if rec.State == Dead {
		return nil, errs.Errorf(errs.CorruptMessage, "transactional id %q: a DEAD record is a tombstone, not a state", rec.TransactionalID)
	}
	return &Txn{cfg: cfg.withDefaults(), rec: rec.clone()}, nil
}

// ID is the transactional id.
func (t *Txn) ID() string { return t.rec.TransactionalID }

// State is the durable state (a pending transition is not in it).
func (t *Txn) State() State { return t.rec.State }

// Record answers the durable state (a deep copy).
func (t *Txn) Record() Record { return t.rec.clone() }

// Pending answers the record being written, if a transition is pending.
func (t *Txn) Pending() (Record, bool) {
	if t.pending == nil {
		return Record{}, false
	}
	return t.pending.clone(), true
}

// Exists reports whether the id has a written, live state: false for a Txn
// from New whose InitProducerId is not complete, and after it expired.
func (t *Txn) Exists() bool { return t.rec.ProducerID != NoProducerID && t.rec.State != Dead }

// MarkersDue answers the markers to write while the state is PREPARE_* and
// no transition is pending.
func (t *Txn) MarkersDue() (Markers, bool) {
	if t.pending != nil || !t.rec.State.preparing() {
		return Markers{}, false
	}
	return Markers{TransactionalID: t.rec.TransactionalID, ProducerID: t.rec.ProducerID, ProducerEpoch: t.rec.ProducerEpoch,
		Commit: t.rec.State == PrepareCommit, Partitions: slices.Clone(t.rec.Partitions), Groups: slices.Clone(t.rec.Groups)}, true
}

// Describe answers DescribeTransactions' view.
func (t *Txn) Describe() Description {
	_, due := t.MarkersDue()
	var pending State
	if t.pending != nil {
		pending = t.pendingState
	}
	r := t.rec
	return Description{TransactionalID: r.TransactionalID, State: r.State, Pending: pending, ProducerID: r.ProducerID,
		ProducerEpoch: r.ProducerEpoch, Timeout: r.Timeout, StartTime: r.StartTime, UpdateTime: r.UpdateTime,
		Partitions: slices.Clone(r.Partitions), Groups: slices.Clone(r.Groups), MarkersDue: due}
}

// ms answers t in whole milliseconds, UTC: the precision of the record
// format, so that a record read back equals the one written.
func ms(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }

// begin makes next the pending transition and answers the write.
func (t *Txn) begin(next Record, shown State) Effects {
	t.pending, t.pendingState = &next, shown
	w := next.clone()
	return Effects{Write: &w}
}

func concurrent(t *Txn, what string) error {
	if t.pending != nil {
		return errs.Errorf(errs.ConcurrentTransactions, "transactional id %q: %s while the transition to %s is being written",
			t.rec.TransactionalID, what, t.pendingState)
	}
	return errs.Errorf(errs.ConcurrentTransactions, "transactional id %q: %s while in %s", t.rec.TransactionalID, what, t.rec.State)
}

func allocate(alloc Allocator, current int64) (int64, error) {
	if alloc == nil {
		return 0, errs.Errorf(errs.UnknownServerError, "a new producer id is needed and no allocator was given")
	}
	id, err := alloc()
	if err != nil {
		return 0, err
	}
	if id < 0 || id == current {
		return 0, errs.Errorf(errs.UnknownServerError, "the allocator answered producer id %d", id)
	}
	return id, nil
}

func validString(what, s string) error {
	if s == "" {
		return fmt.Errorf("an empty %s", what)
	}
	if len(s) > maxString {
		return fmt.Errorf("a %s of %d bytes (at most %d)", what, len(s), maxString)
	}
	return nil
}

// InitProducerId gives the transactional id's producer its producer id and
// epoch, fencing every older producer of the id. See the package comment.
func (t *Txn) InitProducerId(req InitRequest, now time.Time, alloc Allocator) (Reply, Effects, error) {
	if err := validString("transactional id", t.rec.TransactionalID); err != nil {
		return Reply{}, Effects{}, errs.Errorf(errs.InvalidRequest, "%v", err)
	}
	if req.Timeout < time.Millisecond || req.Timeout > t.cfg.MaxTimeout || req.Timeout > math.MaxInt32*time.Millisecond {
		return Reply{}, Effects{}, errs.Errorf(errs.InvalidTransactionTimeout, "transaction timeout %v not in [1ms, %v]", req.Timeout, t.cfg.MaxTimeout)
	}
	expected := pair{req.ExpectedProducerID, req.ExpectedEpoch}
	hasExpected := expected != noPair
	if hasExpected && (expected.id < 0 || expected.epoch < 0) {
		return Reply{}, Effects{}, errs.Errorf(errs.InvalidRequest, "expected producer id %d and epoch %d: both or neither must be -1",
			expected.id, expected.epoch)
	}
	if t.pending != nil {
		return Reply{}, Effects{}, concurrent(t, "InitProducerId")
	}
	timeout := req.Timeout.Truncate(time.Millisecond)
	now = ms(now)
	r := t.rec
	if !t.Exists() {
		// A new id (or one that expired): a new producer id at epoch 0. An
		// expected pair is accepted as Kafka does (a producer moving from
		// idempotent to transactional), and forgotten.
		id, err := allocate(alloc, NoProducerID)
		if err != nil {
			return Reply{}, Effects{}, err
		}
		next := Record{TransactionalID: r.TransactionalID, ProducerID: id, ProducerEpoch: 0, PrevProducerID: NoProducerID,
			PrevProducerEpoch: NoEpoch, NextProducerID: NoProducerID, Timeout: timeout, State: Empty, UpdateTime: now}
		return Reply{ProducerID: id, ProducerEpoch: 0}, t.begin(next, Empty), nil
	}
	if hasExpected {
		cur := r.producer()
		switch {
		case expected == cur:
			// The producer recovers with the pair it holds: bump it.
		case r.hasPrev() && expected == r.prev():
			if r.State == Empty {
				// The answer to this very request was lost: answer it again.
				return Reply{ProducerID: cur.id, ProducerEpoch: cur.epoch}, Effects{}, nil
			}
			// The producer lost the answer of its EndTxn (or of the fence
			// it asked for): it still holds the pair it named then.
		case expected.id != cur.id:
			return Reply{}, Effects{}, errs.Errorf(errs.ProducerFenced, "transactional id %q: producer id %d is no longer the id's (now %d)",
				r.TransactionalID, expected.id, cur.id)
		case expected.epoch < cur.epoch:
			return Reply{}, Effects{}, errs.Errorf(errs.ProducerFenced, "transactional id %q: producer %d epoch %d was fenced by epoch %d",
				r.TransactionalID, expected.id, expected.epoch, cur.epoch)
		default:
			return Reply{}, Effects{}, errs.Errorf(errs.ProducerFenced, "transactional id %q: producer %d epoch %d was never given (current %d)",
				r.TransactionalID, expected.id, expected.epoch, cur.epoch)
		}
	}
	prev := noPair
	if hasExpected {
		prev = expected
	}
	switch r.State {
	case Empty, CompleteCommit, CompleteAbort:
		next := r.clone()
		next.State, next.Partitions, next.Groups, next.StartTime = Empty, nil, nil, time.Time{}
		next.Timeout, next.UpdateTime = timeout, now
		next.PrevProducerID, next.PrevProducerEpoch, next.NextProducerID = prev.id, prev.epoch, NoProducerID
		if r.ProducerEpoch >= MaxHandedEpoch {
			id, err := allocate(alloc, r.ProducerID)
			if err != nil {
				return Reply{}, Effects{}, err
			}
			next.ProducerID, next.ProducerEpoch = id, 0
		} else {
			next.ProducerEpoch++
		}
		return Reply{ProducerID: next.ProducerID, ProducerEpoch: next.ProducerEpoch}, t.begin(next, Empty), nil
	case Ongoing:
		// Fence the producer of the open transaction: abort it at a bumped
		// epoch (the markers carry it, so the old producer's writes are
		// refused everywhere). The caller retries once it is complete and
		// gets a second bump then.
		next := r.clone()
		next.State, next.ProducerEpoch, next.UpdateTime = PrepareAbort, r.ProducerEpoch+1, now
		next.PrevProducerID, next.PrevProducerEpoch = prev.id, prev.epoch
		return Reply{Err: errs.Errorf(errs.ConcurrentTransactions, "transactional id %q: the open transaction of producer %d epoch %d is being aborted; retry",
			r.TransactionalID, r.ProducerID, r.ProducerEpoch)}, t.begin(next, PrepareEpochFence), nil
	default: // PREPARE_*
		return Reply{}, Effects{}, concurrent(t, "InitProducerId")
	}
}

// checkProducer checks that pid and epoch are the pair the producer of the
// id holds now.
func (t *Txn) checkProducer(pid int64, epoch int16) error {
	if !t.Exists() {
		return errs.Errorf(errs.InvalidProducerIDMapping, "transactional id %q has no producer id", t.rec.TransactionalID)
	}
	cur := t.rec.producer()
	switch {
	case pid != cur.id:
		return errs.Errorf(errs.InvalidProducerIDMapping, "transactional id %q: producer id %d is not the id's (%d)", t.rec.TransactionalID, pid, cur.id)
	case epoch > MaxHandedEpoch:
		// Only markers are written at math.MaxInt16 (a fence or timeout
		// abort at an exhausted epoch): no producer was given it.
		return errs.Errorf(errs.InvalidProducerEpoch, "transactional id %q: producer %d epoch %d is never given", t.rec.TransactionalID, pid, epoch)
	case epoch < cur.epoch:
		return errs.Errorf(errs.ProducerFenced, "transactional id %q: producer %d epoch %d was fenced by epoch %d", t.rec.TransactionalID, pid, epoch, cur.epoch)
	case epoch > cur.epoch:
		// Not this id's producer either way: Kafka's coordinator answers
		// PRODUCER_FENCED for any epoch that is not the current one.
		return errs.Errorf(errs.ProducerFenced, "transactional id %q: producer %d epoch %d was never given (current %d)",
			t.rec.TransactionalID, pid, epoch, cur.epoch)
	}
	return nil
}

// AddPartitions adds partitions to the transaction, opening one if none is
// open. Adding only partitions already in it answers no write.
func (t *Txn) AddPartitions(pid int64, epoch int16, partitions []TopicPartition, now time.Time) (Effects, error) {
	if len(partitions) == 0 {
		return Effects{}, errs.Errorf(errs.InvalidRequest, "no partitions to add")
	}
	for _, p := range partitions {
		if err := validString("topic name", p.Topic); err != nil {
			return Effects{}, errs.Errorf(errs.InvalidRequest, "%v", err)
		}
		if p.Partition < 0 {
			return Effects{}, errs.Errorf(errs.InvalidRequest, "partition %d of topic %q", p.Partition, p.Topic)
		}
	}
	return t.add(pid, epoch, partitions, nil, now)
}

// AddOffsets adds the offsets of a consumer group to the transaction
// (TxnOffsetCommit follows), opening one if none is open. The shell maps
// the group to its __consumer_offsets partition; markers go there too.
func (t *Txn) AddOffsets(pid int64, epoch int16, group string, now time.Time) (Effects, error) {
	if err := validString("group id", group); err != nil {
		return Effects{}, errs.Errorf(errs.InvalidGroupID, "%v", err)
	}
	return t.add(pid, epoch, nil, []string{group}, now)
}

func (t *Txn) add(pid int64, epoch int16, partitions []TopicPartition, groups []string, now time.Time) (Effects, error) {
	if t.pending != nil {
		return Effects{}, concurrent(t, "adding to the transaction")
	}
	if err := t.checkProducer(pid, epoch); err != nil {
		return Effects{}, err
	}
	r := t.rec
	next := r.clone()
	switch r.State {
	case Ongoing:
		next.Partitions = sortedPartitions(append(next.Partitions, partitions...))
		next.Groups = sortedStrings(append(next.Groups, groups...))
		if slices.Equal(next.Partitions, r.Partitions) && slices.Equal(next.Groups, r.Groups) {
			return Effects{}, nil // all in already
		}
	case Empty, CompleteCommit, CompleteAbort:
		next.State, next.StartTime = Ongoing, ms(now)
		next.Partitions, next.Groups = sortedPartitions(partitions), sortedStrings(groups)
		next.PrevProducerID, next.PrevProducerEpoch = NoProducerID, NoEpoch
	default: // PREPARE_*: the previous transaction is completing
		return Effects{}, concurrent(t, "adding to the transaction")
	}
	next.UpdateTime = ms(now)
	return t.begin(next, Ongoing), nil
}

// EndTxn commits or aborts the open transaction: it moves to PREPARE_* at
// a bumped epoch (KIP-890), which the reply gives the producer. See the
// package comment for retries and refusals.
func (t *Txn) EndTxn(pid int64, epoch int16, commit bool, now time.Time, alloc Allocator) (Reply, Effects, error) {
	if t.pending != nil {
		return Reply{}, Effects{}, concurrent(t, "EndTxn")
	}
	if !t.Exists() {
		return Reply{}, Effects{}, errs.Errorf(errs.InvalidProducerIDMapping, "transactional id %q has no producer id", t.rec.TransactionalID)
	}
	r := t.rec
	verb := map[bool]string{true: "commit", false: "abort"}[commit]
	if decided, ok := r.State.decision(); ok && r.hasPrev() && (pair{pid, epoch}) == r.prev() {
		// The producer retries the EndTxn that made this state.
		if decided != commit {
			return Reply{}, Effects{}, errs.Errorf(errs.InvalidTxnState, "transactional id %q: cannot %s, the transaction is in %s",
				r.TransactionalID, verb, r.State)
		}
		cur := r.producer()
		return Reply{ProducerID: cur.id, ProducerEpoch: cur.epoch}, Effects{}, nil
	}
	if err := t.checkProducer(pid, epoch); err != nil {
		return Reply{}, Effects{}, err
	}
	switch r.State {
	case Ongoing:
		next := r.clone()
		next.State = PrepareAbort
		if commit {
			next.State = PrepareCommit
		}
		next.PrevProducerID, next.PrevProducerEpoch = pid, epoch
		next.ProducerEpoch = epoch + 1
		if epoch >= MaxHandedEpoch {
			id, err := allocate(alloc, r.ProducerID)
			if err != nil {
				return Reply{}, Effects{}, err
			}
			next.NextProducerID = id
		}
		next.UpdateTime = ms(now)
		cur := next.producer()
		return Reply{ProducerID: cur.id, ProducerEpoch: cur.epoch}, t.begin(next, next.State), nil
	case PrepareCommit, PrepareAbort:
		if decided, _ := r.State.decision(); decided == commit {
			return Reply{}, Effects{}, concurrent(t, verb)
		}
		return Reply{}, Effects{}, errs.Errorf(errs.InvalidTxnState, "transactional id %q: cannot %s, the transaction is in %s",
			r.TransactionalID, verb, r.State)
	case PrepareEpochFence:
		return Reply{}, Effects{}, concurrent(t, verb)
	default: // EMPTY, COMPLETE_*: nothing was added since the last one
		return Reply{}, Effects{}, errs.Errorf(errs.InvalidTxnState, "transactional id %q: cannot %s, no transaction is open (%s)",
			r.TransactionalID, verb, r.State)
	}
}

// MarkersWritten says the markers of MarkersDue are written: PREPARE_X
// moves to COMPLETE_X, and the producer id changes to the next one if the
// EndTxn exhausted the epoch.
func (t *Txn) MarkersWritten(now time.Time) (Effects, error) {
	if t.pending != nil {
		return Effects{}, concurrent(t, "markers written")
	}
	r := t.rec
	if !r.State.preparing() {
		return Effects{}, errs.Errorf(errs.InvalidTxnState, "transactional id %q: no markers are due in %s", r.TransactionalID, r.State)
	}
	next := r.clone()
	next.State = CompleteAbort
	if r.State == PrepareCommit {
		next.State = CompleteCommit
	}
	next.Partitions, next.Groups = nil, nil
	if r.NextProducerID != NoProducerID {
		next.ProducerID, next.ProducerEpoch, next.NextProducerID = r.NextProducerID, 0, NoProducerID
	}
	next.UpdateTime = ms(now)
	return t.begin(next, next.State), nil
}

// Tick aborts an open transaction older than its timeout (at a bumped
// epoch: its producer is fenced), and deletes an id idle for
// Config.IDExpiration. Nothing happens while a transition is pending. Call
// it at NextDeadline.
func (t *Txn) Tick(now time.Time) Effects {
	if t.pending != nil || !t.Exists() {
		return Effects{}
	}
	r := t.rec
	switch r.State {
	case Ongoing:
		if now.Before(r.StartTime.Add(r.Timeout)) {
			return Effects{}
		}
		next := r.clone()
		next.State, next.ProducerEpoch, next.UpdateTime = PrepareAbort, r.ProducerEpoch+1, ms(now)
		return t.begin(next, PrepareAbort)
	case Empty, CompleteCommit, CompleteAbort:
		if now.Before(r.UpdateTime.Add(t.cfg.IDExpiration)) {
			return Effects{}
		}
		next := r.clone()
		next.State, next.UpdateTime = Dead, ms(now)
		return t.begin(next, Dead)
	}
	return Effects{}
}

// NextDeadline answers when Tick has something to do, if ever (as things
// stand: any event may move it).
func (t *Txn) NextDeadline() (time.Time, bool) {
	if t.pending != nil || !t.Exists() {
		return time.Time{}, false
	}
	switch t.rec.State {
	case Ongoing:
		return t.rec.StartTime.Add(t.rec.Timeout), true
	case Empty, CompleteCommit, CompleteAbort:
		return t.rec.UpdateTime.Add(t.cfg.IDExpiration), true
	}
	return time.Time{}, false
}

// Resume answers what a Txn just loaded from the log needs: the markers of
// a PREPARE_* state, or, for a PREPARE_EPOCH_FENCE record, the transition
// to PREPARE_ABORT at the fenced epoch (the markers follow its Complete).
func (t *Txn) Resume(now time.Time) Effects {
	if t.pending != nil {
		return Effects{}
	}
	if m, ok := t.MarkersDue(); ok {
		return Effects{Markers: &m}
	}
	if t.rec.State == PrepareEpochFence {
		next := t.rec.clone()
		next.State, next.UpdateTime = PrepareAbort, ms(now)
		return t.begin(next, PrepareAbort)
	}
	return Effects{}
}

// Complete makes the pending transition take effect: rec, the record the
// shell wrote, is acknowledged. It answers the markers now due (the new
// state is PREPARE_*) or Deleted (the id expired).
func (t *Txn) Complete(rec Record) (Effects, error) {
	if t.pending == nil {
		return Effects{}, errs.Errorf(errs.UnknownServerError, "transactional id %q: no transition is pending", t.rec.TransactionalID)
	}
	if !rec.Equal(*t.pending) {
		return Effects{}, errs.Errorf(errs.UnknownServerError, "transactional id %q: the record written is not the pending transition's",
			t.rec.TransactionalID)
	}
	t.rec, t.pending, t.pendingState = *t.pending, nil, ""
	if t.rec.State == Dead {
		return Effects{Deleted: true}, nil
	}
	if m, ok := t.MarkersDue(); ok {
		return Effects{Markers: &m}, nil
	}
	return Effects{}, nil
}

// Fail drops the pending transition: its write failed, the state stays as
// it was. The shell answers the waiting request the write's error.
func (t *Txn) Fail() {
	t.pending, t.pendingState = nil, ""
}

// check verifies the Txn's invariants; tests call it after every step.
func (t *Txn) check() error {
	if t.rec.ProducerID == NoProducerID {
		fresh := New(t.cfg, t.rec.TransactionalID).rec
		if !t.rec.Equal(fresh) {
			return fmt.Errorf("a Txn without a producer id is not fresh: %+v", t.rec)
		}
	} else if err := validate(t.rec); err != nil {
		return err
	}
	if t.pending != nil {
		if err := validate(*t.pending); err != nil {
			return fmt.Errorf("pending: %w", err)
		}
		if t.pending.TransactionalID != t.rec.TransactionalID {
			return fmt.Errorf("pending record of %q", t.pending.TransactionalID)
		}
		if t.pendingState == "" {
			return fmt.Errorf("a pending transition shows no state")
		}
	}
	return nil
}
