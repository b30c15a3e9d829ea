package group

import (
	"maps"
	"math"
	"slices"
	"time"

	"skein/libs/errs"
	"skein/services/groupcoord/internal/assign"
)

// Offset is an offset a commit carries; once committed, what OffsetFetch
// answers.
type Offset struct {
	Offset      int64
	LeaderEpoch int32 // -1 when unknown
	Metadata    string
	CommitTime  time.Time // millisecond precision once written
}

// PendingOffset is an offset a transaction committed (TxnOffsetCommit) and
// that is not the group's yet: Epoch is the producer epoch of the
// TxnOffsetCommit that put it.
type PendingOffset struct {
	Epoch int16
	Offset
}

// TxnOffsets is one group's transactional offset commits: per producer id,
// the offsets its open transaction committed to the group, pending until
// the transaction coordinator completes the transaction here. It is plain
// state with no I/O; its zero value is empty and ready.
//
// Like the shell's committed offsets, it holds only what the log holds:
// Commit and Complete decide and answer a TxnChange without changing
// anything, the shell writes the change and calls Apply once the write is
// acknowledged. The one exception is the memory of ended transactions
// (see Complete), which is not durable.
type TxnOffsets struct {
	pending map[int64]map[assign.TopicPartition]PendingOffset
	// ended: per producer id, the highest epoch a completion came with
	// since this coordinator loaded the group. Not durable.
	ended map[int64]int16
}

// TxnChange is what one TxnOffsetCommit or CompleteTxnOffsets changes in a
// group: records to write, then Apply.
type TxnChange struct {
	ProducerID int64
	// Put: pending offsets to write (a pending record each).
	Put map[assign.TopicPartition]PendingOffset
	// Drop: pending offsets to delete (a tombstone each), in order.
	Drop []assign.TopicPartition
	// Commit: offsets that become the group's committed offsets (an offset
	// commit record each).
	Commit map[assign.TopicPartition]Offset
	// Ended: the epoch of a completion, remembered (in memory) to refuse a
	// late TxnOffsetCommit of the ended transaction; 0 for none.
	Ended int16
}

// Writes reports whether the change has records to write.
func (ch TxnChange) Writes() bool { return len(ch.Put) > 0 || len(ch.Drop) > 0 || len(ch.Commit) > 0 }

// MaxTxnEpoch is the highest producer epoch a TxnOffsetCommit may carry.
// The transaction coordinator never hands out math.MaxInt16: it is the
// epoch of the markers (and of CompleteTxnOffsets) of a transaction that
// ends at an exhausted epoch.
const MaxTxnEpoch = math.MaxInt16 - 1

// Commit decides a TxnOffsetCommit of producer pid at epoch: offsets
// become pending for (this group, pid), not visible to OffsetFetch. The
// epoch is checked against what the group holds of pid:
//
//   - below the epoch of pid's pending offsets, or below the epoch of a
//     completion of pid seen since the group was loaded (the transaction
//     ended; this is a late or replayed request of it): PRODUCER_FENCED;
//   - above the epoch of pid's pending offsets: a new transaction of the
//     producer (the old one's completion never came here): its offsets
//     replace the old ones, which are dropped;
//   - equal: the same transaction commits more offsets; a partition
//     committed again takes the newer offset.
//
// A pid or epoch out of range is INVALID_REQUEST, MaxInt16 (never held by
// a producer) INVALID_PRODUCER_EPOCH. Offsets are validated by the caller
// (topics, negative offsets, metadata size).
func (t *TxnOffsets) Commit(pid int64, epoch int16, offsets map[assign.TopicPartition]Offset) (TxnChange, error) {
	switch {
	case pid < 0:
		return TxnChange{}, errs.Errorf(errs.InvalidRequest, "producer id %d", pid)
	case epoch < 0:
		return TxnChange{}, errs.Errorf(errs.InvalidRequest, "producer epoch %d", epoch)
	case epoch > MaxTxnEpoch:
		return TxnChange{}, errs.Errorf(errs.InvalidProducerEpoch, "producer epoch %d is never handed to a producer", epoch)
	}
	if e, ok := t.ended[pid]; ok && epoch < e {
		return TxnChange{}, errs.Errorf(errs.ProducerFenced, "producer %d at epoch %d: its transaction ended (completed at epoch %d)", pid, epoch, e)
	}
	cur := t.pending[pid]
	if top, ok := topEpoch(cur); ok && epoch < top {
		return TxnChange{}, errs.Errorf(errs.ProducerFenced, "producer %d at epoch %d: it has offsets pending at epoch %d", pid, epoch, top)
	}
	ch := TxnChange{ProducerID: pid, Put: map[assign.TopicPartition]PendingOffset{}}
	for tp, o := range offsets {
		ch.Put[tp] = PendingOffset{Epoch: epoch, Offset: o}
	}
	for tp, po := range cur {
		if _, put := ch.Put[tp]; !put && po.Epoch < epoch {
			ch.Drop = append(ch.Drop, tp)
		}
	}
	slices.SortFunc(ch.Drop, compareTP)
	return ch, nil
}

// Complete decides a CompleteTxnOffsets of producer pid at epoch, which the
// transaction coordinator sends once the markers of pid's transaction are
// written, at the markers' epoch: the transaction's epoch bumped, so
// always above the epoch its TxnOffsetCommits carried. The rule:
//
//	a pending offset of pid is the completed transaction's iff its epoch < epoch
//
// Those are dropped and, with commit, become the group's committed
// offsets. Pending offsets at epoch or above belong to a later transaction
// of the producer (this is a late or retried completion of an older one)
// and stay. With nothing to apply the answer is the same (idempotent: a
// retry after a lost answer, or after a failover, changes nothing), and
// the completion's epoch is remembered to fence a late TxnOffsetCommit of
// the ended transaction (Commit).
//
// A pid or epoch out of range is INVALID_REQUEST.
func (t *TxnOffsets) Complete(pid int64, epoch int16, commit bool) (TxnChange, error) {
	if pid < 0 || epoch < 0 {
		return TxnChange{}, errs.Errorf(errs.InvalidRequest, "producer id %d, epoch %d", pid, epoch)
	}
	ch := TxnChange{ProducerID: pid, Ended: epoch}
	for _, tp := range slices.SortedFunc(maps.Keys(t.pending[pid]), compareTP) {
		po := t.pending[pid][tp]
		if po.Epoch >= epoch {
			continue
		}
		ch.Drop = append(ch.Drop, tp)
		if commit {
			if ch.Commit == nil {
				ch.Commit = map[assign.TopicPartition]Offset{}
			}
			ch.Commit[tp] = po.Offset
		}
	}
	return ch, nil
}

// Apply applies a change once its records are written (or right away when
// it writes none).
func (t *TxnOffsets) Apply(ch TxnChange) {
	for _, tp := range ch.Drop {
		t.drop(ch.ProducerID, tp)
	}
	for tp, po := range ch.Put {
		t.Load(ch.ProducerID, tp, po)
	}
	if ch.Ended > 0 {
		if t.ended == nil {
			t.ended = map[int64]int16{}
		}
		t.ended[ch.ProducerID] = max(t.ended[ch.ProducerID], ch.Ended)
	}
}

// Load puts one pending offset read back from the log.
func (t *TxnOffsets) Load(pid int64, tp assign.TopicPartition, po PendingOffset) {
	if t.pending == nil {
		t.pending = map[int64]map[assign.TopicPartition]PendingOffset{}
	}
	if t.pending[pid] == nil {
		t.pending[pid] = map[assign.TopicPartition]PendingOffset{}
	}
	t.pending[pid][tp] = po
}

func (t *TxnOffsets) drop(pid int64, tp assign.TopicPartition) {
	delete(t.pending[pid], tp)
	if len(t.pending[pid]) == 0 {
		delete(t.pending, pid)
	}
}

// Empty reports whether no offsets are pending.
func (t *TxnOffsets) Empty() bool { return len(t.pending) == 0 }

// Has reports whether some transaction has an offset of tp pending.
func (t *TxnOffsets) Has(tp assign.TopicPartition) bool {
	for _, offs := range t.pending {
		if _, ok := offs[tp]; ok {
			return true
		}
	}
	return false
}

// Knows reports whether the group holds anything of pid: offsets pending,
// or a completion seen since the group was loaded. When it does not, Commit
// cannot tell a late TxnOffsetCommit of a transaction that ended under
// another coordinator (whose completion this one never saw) from the first
// of an open one; the caller asks the transaction coordinator first.
func (t *TxnOffsets) Knows(pid int64) bool {
	_, ended := t.ended[pid]
	return ended || len(t.pending[pid]) > 0
}

// Producers answers the producer ids with pending offsets, in order.
func (t *TxnOffsets) Producers() []int64 { return slices.Sorted(maps.Keys(t.pending)) }

// Epoch answers the epoch of pid's pending offsets (the highest, should
// they differ); false when it has none.
func (t *TxnOffsets) Epoch(pid int64) (int16, bool) { return topEpoch(t.pending[pid]) }

// Pending answers pid's pending offsets (a copy).
func (t *TxnOffsets) Pending(pid int64) map[assign.TopicPartition]PendingOffset {
	return maps.Clone(t.pending[pid])
}

func topEpoch(offs map[assign.TopicPartition]PendingOffset) (int16, bool) {
	top, ok := int16(0), false
	for _, po := range offs {
		if !ok || po.Epoch > top {
			top, ok = po.Epoch, true
		}
	}
	return top, ok
}

func compareTP(a, b assign.TopicPartition) int {
	switch {
	case a.Topic < b.Topic:
		return -1
	case a.Topic > b.Topic:
		return 1
	}
	return int(a.Partition) - int(b.Partition)
}
