package partition

import (
	"context"
	"errors"
	"sort"
	"time"

	"skein/libs/errs"
	"skein/libs/record"
	"skein/services/storage/internal/producer"
)

// AbortedTxn is one aborted transaction: read_committed consumers drop the
// producer's records from FirstOffset up to the abort marker.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset record.Offset
	LastOffset  record.Offset // the abort marker's offset
}

// WriteMarker appends a transaction commit or abort marker for a producer as
// leader and waits until the ISR has it. The producer's open transaction
// ends there, which moves the LSO.
func (p *Partition) WriteMarker(ctx context.Context, producerID int64, producerEpoch int16, commit bool, coordinatorEpoch int32, timestamp int64) (record.Offset, error) {
	m := record.Marker{Type: record.ControlAbort, CoordinatorEpoch: coordinatorEpoch}
	if commit {
		m.Type = record.ControlCommit
	}
	batch, _, err := record.BuildMarker(nil, producerID, producerEpoch, m, timestamp)
	if err != nil {
		return -1, err
	}
	p.mu.Lock()
	if err := p.checkLeaderLocked(-1); err != nil {
		p.mu.Unlock()
		return -1, err
	}
	if e, ok := p.producers.Get(producerID); ok {
		var err error
		switch {
		case producerEpoch < e.Epoch:
			err = errs.Errorf(errs.InvalidProducerEpoch, "marker for producer %d epoch %d: current epoch %d", producerID, producerEpoch, e.Epoch)
		case producerEpoch == e.Epoch && e.TxnFirstOffset >= 0:
			// A transaction's marker carries the epoch after its batches'
			// (the coordinator bumps it as it ends one): this one is a
			// late copy for a transaction that ended here before, and
			// would end the one now open.
			err = errs.Errorf(errs.InvalidProducerEpoch, "marker for producer %d epoch %d: the transaction open here since offset %d is at that epoch; its marker comes at a later one",
				producerID, producerEpoch, e.TxnFirstOffset)
		case coordinatorEpoch < e.CoordinatorEpoch:
			err = errs.Errorf(errs.TransactionCoordinatorFenced, "marker for producer %d from coordinator epoch %d: epoch %d wrote here since", producerID, coordinatorEpoch, e.CoordinatorEpoch)
		}
		if err != nil {
			p.mu.Unlock()
			return -1, err
		}
	}
	a, err := p.log.AppendAsLeader(batch, record.Epoch(p.st.LeaderEpoch))
	first := a.First
	if err != nil {
		p.mu.Unlock()
		return -1, errs.Errorf(errs.KafkaStorageError, "%s-%d: marker append: %v", p.cfg.Topic, p.cfg.Partition, err)
	}
	p.noteMarkerLocked(producerID, producerEpoch, commit, coordinatorEpoch, first, timestamp)
	p.notifyLEOLocked()
	p.maybeAdvanceHWLocked()
	w := &waiter{next: first + 1, done: make(chan error, 1)}
	p.waiters = append(p.waiters, w)
	p.completeWaitersLocked()
	p.mu.Unlock()
	if err := p.log.SyncIfDue(first + 1); err != nil {
		p.dropWaiter(w)
		return -1, errs.Errorf(errs.KafkaStorageError, "%s-%d: marker append: %v", p.cfg.Topic, p.cfg.Partition, err)
	}
	p.afterSync() // under flush.messages=1 the HW waited for the sync
	select {
	case err := <-w.done:
		return first, err
	case <-ctx.Done():
		p.dropWaiter(w)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return first, errs.Errorf(errs.RequestTimedOut, "%s-%d: marker at %d not replicated in time", p.cfg.Topic, p.cfg.Partition, first)
		}
		return first, ctx.Err()
	}
}

func (p *Partition) noteMarkerLocked(pid int64, epoch int16, commit bool, coordinatorEpoch int32, at record.Offset, ts int64) {
	lso := p.lsoLocked()
	began := p.producers.Marker(pid, epoch, coordinatorEpoch, int64(at), ts)
	if !commit && began >= 0 {
		p.aborted = append(p.aborted, AbortedTxn{ProducerID: pid, FirstOffset: record.Offset(began), LastOffset: at})
	}
	if began >= 0 && at >= p.hw {
		p.unreplicated = append(p.unreplicated, unreplicatedTxn{first: record.Offset(began), marker: at})
	}
	if p.lsoLocked() != lso {
		// read_committed readers wait on the HW's wakers: the last
		// stable offset moved without it.
		p.notifyHWLocked()
	}
}

// AbortedBetween lists aborted transactions that overlap [from, to): what a
// read_committed consumer needs to drop records of the range it fetched.
func (p *Partition) AbortedBetween(from, to record.Offset) []AbortedTxn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.abortedBetweenLocked(from, to)
}

func (p *Partition) abortedBetweenLocked(from, to record.Offset) []AbortedTxn {
	var out []AbortedTxn
	for _, a := range p.aborted {
		if a.LastOffset >= from && a.FirstOffset < to {
			out = append(out, a)
		}
	}
	return out
}

// AbortedBelow answers whether a transactional batch of producerID at an
// offset below to belongs to an aborted transaction, from the aborted
// transactions overlapping [0, to), read at the first question: what
// compaction, which stops below the last stable offset (where every
// transaction has ended), needs to remove aborted records and compact
// committed ones. A producer's aborted transactions are in offset order,
// so each question is a binary search.
func (p *Partition) AbortedBelow(to record.Offset) func(producerID int64, offset record.Offset) bool {
	var byProducer map[int64][]AbortedTxn
	return func(pid int64, off record.Offset) bool {
		if byProducer == nil {
			byProducer = map[int64][]AbortedTxn{}
			for _, a := range p.AbortedBetween(0, to) {
				byProducer[a.ProducerID] = append(byProducer[a.ProducerID], a)
			}
		}
		list := byProducer[pid]
		i := sort.Search(len(list), func(i int) bool { return list[i].LastOffset >= off })
		return i < len(list) && list[i].FirstOffset <= off
	}
}

// ForgetAbortedBelow drops the aborted transactions that end below the log
// start: no record of theirs is left to read or compact (Kafka deletes a
// segment's aborted-transaction index with it).
func (p *Partition) ForgetAbortedBelow() {
	p.mu.Lock()
	defer p.mu.Unlock()
	start := p.log.LogStartOffset()
	kept := p.aborted[:0]
	for _, a := range p.aborted {
		if a.LastOffset >= start {
			kept = append(kept, a)
		}
	}
	clear(p.aborted[len(kept):])
	p.aborted = kept
}

// ProducerSnapshot is the replica's producer state and aborted-transaction
// index as of offset Next (the LEO when it was taken): restoring it and
// replaying the log from Next rebuilds the state without reading the log
// from its start.
type ProducerSnapshot struct {
	Next      record.Offset `json:"next"`
	Producers []byte        `json:"producers"`
	Aborted   []AbortedTxn  `json:"aborted"`
}

// SnapshotProducers takes a consistent snapshot.
func (p *Partition) SnapshotProducers() ProducerSnapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastSnap = ProducerSnapshot{Next: p.log.LogEndOffset(), Producers: p.producers.Snapshot(), Aborted: append([]AbortedTxn(nil), p.aborted...)}
	return p.lastSnap
}

// ExpireProducers forgets the producers without an open transaction that
// wrote nothing here for maxAge (producer.State.Expire; now is the caller's
// clock) and answers how many.
func (p *Partition) ExpireProducers(now time.Time, maxAge time.Duration) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.producers.Expire(now.UnixMilli(), maxAge.Milliseconds())
}

// RestoreProducers installs a snapshot and replays the log after it. A
// snapshot the log does not reach (its tail was cut in recovery) or that
// predates the log start is not used: the state is rebuilt from the log,
// and used is false. The caller must then replace the stored snapshot
// before the log grows past it again: restored later, it would bring back
// the producers and aborted transactions of the records that were cut.
func (p *Partition) RestoreProducers(s ProducerSnapshot) (used bool, err error) {
	if s.Next > p.log.LogEndOffset() || s.Next < p.log.LogStartOffset() {
		return false, p.Recover(p.log.LogStartOffset())
	}
	ps, err := producer.Restore(s.Producers)
	if err != nil {
		return false, p.Recover(p.log.LogStartOffset())
	}
	p.mu.Lock()
	p.producers, p.aborted, p.unreplicated = ps, append([]AbortedTxn(nil), s.Aborted...), nil
	p.lastSnap = s
	p.mu.Unlock()
	return true, p.Recover(s.Next)
}

// Producers answers the producer state of the partition this replica
// leads (Kafka's DescribeProducers), by producer id:
// NOT_LEADER_OR_FOLLOWER on a follower, FENCED_ or UNKNOWN_LEADER_EPOCH
// for another leader epoch (-1 skips the check). The oldest open
// transaction's start offset is the partition's last stable offset, unless
// the HW is below it.
func (p *Partition) Producers(leaderEpoch int32) ([]producer.Description, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkLeaderLocked(leaderEpoch); err != nil {
		return nil, err
	}
	return p.producers.Describe(), nil
}
