package partition

import (
	"errors"
	"slices"
	"time"

	"skein/libs/errs"
	"skein/libs/record"
	"skein/services/storage/internal/isr"
	"skein/services/storage/internal/producer"
)

// FollowerFetch is one follower's fetch of this partition from the leader.
// FetchOffset is the follower's LEO: everything below it is acknowledged.
type FollowerFetch struct {
	ReplicaID int32
	// BrokerEpoch is the follower's registration the fetch was made under
	// (0: not known); an ISR change names the one each member fetched at.
	BrokerEpoch      int64
	FetchOffset      record.Offset
	LastFetchedEpoch record.Epoch // -1 for an empty follower log
	// LogStartOffset is the follower's (-1: not known), for the low
	// watermark DeleteRecords waits for.
	LogStartOffset     record.Offset
	CurrentLeaderEpoch int32
	MaxBytes           int
	// Buf, when it has room, holds the answer's batches (appended to it):
	// a caller that is done with each answer before the next reuses it.
	Buf []byte
	// Waker, unless nil, is registered (WakeOnLEO) before the read, under
	// the same lock.
	Waker *Waker
}

// FollowerFetchResult is the leader's answer.
type FollowerFetchResult struct {
	Records        []byte
	HW             record.Offset
	LogStartOffset record.Offset
	LSO            record.Offset
	// Diverging is set when the follower must truncate to DivergingEnd before
	// fetching again (its log holds an epoch the leader's does not, or holds
	// the epoch past where it ended on the leader).
	Diverging      bool
	DivergingEpoch record.Epoch
	DivergingEnd   record.Offset
}

// ServeFollower answers a follower's fetch as leader: it records the
// follower's LEO (moving the HW and answering produces in purgatory), may
// propose the follower's return to the ISR, and reads from FetchOffset.
func (p *Partition) ServeFollower(f FollowerFetch) (FollowerFetchResult, error) {
	p.mu.Lock()
	if f.Waker != nil {
		p.leoWakers = register(p.leoWakers, p, f.Waker)
	}
	if err := p.checkLeaderLocked(f.CurrentLeaderEpoch); err != nil {
		p.mu.Unlock()
		return FollowerFetchResult{}, err
	}
	fs, ok := p.followers[f.ReplicaID]
	if !ok {
		p.mu.Unlock()
		return FollowerFetchResult{}, errs.Errorf(errs.NotLeaderOrFollower, "broker %d is not a replica of %s-%d", f.ReplicaID, p.cfg.Topic, p.cfg.Partition)
	}
	res := FollowerFetchResult{HW: p.hw, LogStartOffset: p.log.LogStartOffset()}
	if f.LastFetchedEpoch >= 0 && f.FetchOffset > 0 {
		epoch, end := p.log.EndOffsetFor(f.LastFetchedEpoch)
		if epoch != f.LastFetchedEpoch || end < f.FetchOffset {
			res.Diverging, res.DivergingEpoch, res.DivergingEnd = true, epoch, end
			if end < 0 || epoch < 0 {
				res.DivergingEnd = p.log.LogStartOffset()
			}
			p.mu.Unlock()
			return res, nil
		}
	}
	leo := p.log.LogEndOffset()
	if f.FetchOffset > leo || f.FetchOffset < p.log.LogStartOffset() {
		p.mu.Unlock()
		return res, errs.Errorf(errs.OffsetOutOfRange, "%s-%d: follower %d fetch offset %d outside [%d, %d]", p.cfg.Topic, p.cfg.Partition, f.ReplicaID, f.FetchOffset, p.log.LogStartOffset(), leo)
	}
	now := p.now()
	fs.lastCaughtUp = isr.CaughtUp(fs.lastCaughtUp, fs.prev, isr.Offset(f.FetchOffset), isr.Offset(leo), now)
	fs.prev = isr.FetchState{At: now, LeaderLEO: isr.Offset(leo)}
	fs.leo = f.FetchOffset
	if f.LogStartOffset != fs.logStart {
		fs.logStart = f.LogStartOffset
		p.notifyStartLocked()
	}
	if f.BrokerEpoch > 0 {
		fs.brokerEpoch = f.BrokerEpoch
	}
	// Most fetches of a follower of many partitions are of idle ones: the
	// HW, already at the LEO, cannot move, and a follower in the ISR
	// cannot be added to it.
	if p.hw < leo {
		p.maybeAdvanceHWLocked()
		p.completeWaitersLocked()
	}
	if !slices.Contains(p.st.ISR, f.ReplicaID) {
		p.maybeExpandISRLocked(f.ReplicaID)
	}
	res.HW, res.LSO = p.hw, p.lsoLocked()
	p.mu.Unlock()

	if f.FetchOffset == leo || f.MaxBytes <= 0 {
		return res, nil
	}
	data, err := p.log.ReadInto(f.Buf, f.FetchOffset, f.MaxBytes, leo, 0)
	if err != nil {
		return res, err
	}
	res.Records = data
	return res, nil
}

// ResetToLeaderStart handles a follower whose fetch offset fell below the
// leader's log start (retention deleted what it still needed): its log is
// emptied and restarts at the leader's log start offset, as Kafka does.
func (p *Partition) ResetToLeaderStart(epoch int32, fetchOffset, leaderStart record.Offset) error {
	p.mu.Lock()
	if p.role != Follower || p.st.LeaderEpoch != epoch || p.log.LogEndOffset() != fetchOffset || fetchOffset >= leaderStart {
		p.mu.Unlock()
		return nil
	}
	if err := p.log.TruncateFullyAndStartAt(leaderStart); err != nil {
		p.mu.Unlock()
		return errs.Errorf(errs.KafkaStorageError, "%s-%d: restart log at %d: %v", p.cfg.Topic, p.cfg.Partition, leaderStart, err)
	}
	p.producers.TruncateTo(0)
	p.aborted, p.unreplicated, p.lastSnap = nil, nil, ProducerSnapshot{}
	p.hw = leaderStart
	onTruncate := p.cfg.Truncated
	p.mu.Unlock()
	if onTruncate != nil {
		onTruncate()
	}
	return nil
}

// FollowerState is where this follower fetches from next.
type FollowerState struct {
	Leader             int32
	CurrentLeaderEpoch int32
	FetchOffset        record.Offset
	LastFetchedEpoch   record.Epoch
	LogStartOffset     record.Offset
}

// FollowerState answers the position to fetch from; ok is false when the
// replica is not a follower.
func (p *Partition) FollowerState() (FollowerState, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role != Follower || p.log.Failed() {
		// A failed log fetches nothing more: a fetch would report as
		// written what a failed write or fsync may have lost. The node
		// leaves the ISRs, and the log is reopened from the disk.
		return FollowerState{}, false
	}
	return FollowerState{
		Leader: p.st.Leader, CurrentLeaderEpoch: p.st.LeaderEpoch,
		FetchOffset: p.log.LogEndOffset(), LastFetchedEpoch: p.log.LatestEpoch(), LogStartOffset: p.log.LogStartOffset(),
	}, true
}

// ApplyFetched applies the leader's answer to a fetch made at epoch: it
// truncates a diverged tail or appends the batches, and takes the leader's
// HW (capped at its own LEO). A stale answer (the replica moved on) is ignored.
func (p *Partition) ApplyFetched(epoch int32, fetchOffset record.Offset, res FollowerFetchResult) error {
	_, err := p.ApplyFetchedCut(epoch, fetchOffset, res)
	return err
}

// Cut is a follower's truncation: its log ended at From and ends at To.
type Cut struct{ From, To record.Offset }

// ApplyFetchedCut is ApplyFetched, answering the truncation it made, if any
// (nil when the log was not cut).
func (p *Partition) ApplyFetchedCut(epoch int32, fetchOffset record.Offset, res FollowerFetchResult) (*Cut, error) {
	p.mu.Lock()
	leo := p.log.LogEndOffset()
	syncTo, err := p.applyFetchedLocked(epoch, fetchOffset, res)
	var cut *Cut
	if now := p.log.LogEndOffset(); now < leo {
		cut = &Cut{From: leo, To: now}
	}
	truncated := cut != nil
	onTruncate := p.cfg.Truncated
	p.mu.Unlock()
	if truncated && onTruncate != nil {
		onTruncate()
	}
	if syncTo == 0 {
		return cut, err
	}
	// flush.messages, outside the lock: the follower's next fetch, which
	// tells the leader it has these offsets, goes out only after it (also
	// when the answer then failed: what was appended before is reported).
	if serr := p.log.SyncIfDue(syncTo); serr != nil {
		return cut, errs.Errorf(errs.KafkaStorageError, "%s-%d: follower append: %v", p.cfg.Topic, p.cfg.Partition, serr)
	}
	return cut, err
}

// divergenceEndLocked answers where a follower truncates to when the
// leader says its log diverged (Kafka's follower truncation): the leader
// names the largest epoch it shares with this log that is not newer than
// the follower's last, and where that epoch ends on the leader. This log
// keeps its own copy of that epoch only up to where the epoch ends here;
// when it has no such epoch it cuts after its own largest older one and
// asks again. An answer with no epoch (the leader could not say) cuts
// back to the HW, which every ISR member holds.
func (p *Partition) divergenceEndLocked(res FollowerFetchResult) record.Offset {
	leo := p.log.LogEndOffset()
	if res.DivergingEpoch < 0 || res.DivergingEnd < 0 {
		return min(p.hw, leo)
	}
	epoch, end := p.log.EndOffsetFor(res.DivergingEpoch)
	switch {
	case epoch < 0 || end < 0:
		// This log knows no epoch that old: the leader's end stands.
		return min(res.DivergingEnd, leo)
	case epoch != res.DivergingEpoch:
		return min(end, leo)
	default:
		return min(end, res.DivergingEnd, leo)
	}
}

// applyFetchedLocked is ApplyFetched under p.mu; syncTo is the LEO after
// an append (0 when nothing was appended).
func (p *Partition) applyFetchedLocked(epoch int32, fetchOffset record.Offset, res FollowerFetchResult) (syncTo record.Offset, damaged error) {
	if p.role != Follower || p.st.LeaderEpoch != epoch || p.log.LogEndOffset() != fetchOffset {
		return 0, nil
	}
	if res.Diverging {
		to := p.divergenceEndLocked(res)
		markers, err := p.holdsMarkersLocked(to)
		if err != nil {
			return 0, err
		}
		if err := p.log.Truncate(to); err != nil {
			return 0, errs.Errorf(errs.KafkaStorageError, "%s-%d: truncate to %d: %v", p.cfg.Topic, p.cfg.Partition, to, err)
		}
		if p.hw > to {
			p.hw = to
		}
		if p.lastSnap.Next > to {
			p.lastSnap = ProducerSnapshot{} // it holds what was cut
		}
		if markers {
			// A cut marker reopens the transaction it ended (and may undo
			// an epoch bump): what the log now holds is replayed, as a
			// restart would, rather than patched: from the last producer
			// snapshot below the cut, else from the log's start.
			return 0, p.replayFromSnapshotLocked(to)
		}
		p.producers.TruncateTo(int64(to))
		kept := p.aborted[:0]
		for _, a := range p.aborted {
			if a.LastOffset < to {
				kept = append(kept, a)
			}
		}
		p.aborted = kept
		unrep := p.unreplicated[:0]
		for _, u := range p.unreplicated {
			if u.marker < to {
				unrep = append(unrep, u)
			}
		}
		p.unreplicated = unrep
		return 0, nil
	}
	if len(res.Records) > 0 {
		// Only whole batches: a leader answer cut mid-batch is trimmed.
		it := record.NewBatchIter(res.Records)
		it.AllowPartial = true
		end := 0
		var metas []parsed
		for it.Next() {
			b := it.Batch()
			if err := b.Verify(); err != nil {
				// The leader's copy of this batch is damaged: the whole
				// batches before it are taken (a replica catching up from
				// such a leader gets that far), and the fetch fails here.
				damaged = errs.Errorf(errs.CorruptMessage, "%s-%d: the leader's batch at offset %d failed its check: %v",
					p.cfg.Topic, p.cfg.Partition, b.BaseOffset(), errs.Message(err))
				break
			}
			if b.PartitionLeaderEpoch() > record.Epoch(epoch) {
				// No leader at this epoch wrote it: the leader changed
				// while it read (a newer leader's batch now stands where
				// the old one's did). Taking it would stamp the newer
				// epoch on a log that may still hold the old one's
				// divergent records, which the next fetch could no longer
				// tell.
				return 0, errs.Errorf(errs.FencedLeaderEpoch, "%s-%d: the batch at %d carries leader epoch %d, above the epoch %d it was fetched at",
					p.cfg.Topic, p.cfg.Partition, b.BaseOffset(), b.PartitionLeaderEpoch(), epoch)
			}
			metas = append(metas, parsed{b: b})
			end = it.Pos()
		}
		if err := it.Err(); err != nil && damaged == nil {
			return 0, err
		}
		if end > 0 {
			if err := p.log.AppendAsFollower(res.Records[:end]); err != nil {
				return 0, errs.Errorf(errs.KafkaStorageError, "%s-%d: follower append: %v", p.cfg.Topic, p.cfg.Partition, err)
			}
			for _, m := range metas {
				p.replayLocked(m.b)
			}
			p.notifyLEOLocked()
			syncTo = p.log.LogEndOffset()
		}
	}
	hw := min(res.HW, p.log.LogEndOffset())
	if hw > p.hw {
		p.hw = hw
		p.notifyHWLocked()
	}
	// The leader's records deleted before its log start go here too (as
	// Kafka's follower takes the leader's log start offset), never past
	// what this replica knows committed. The fetcher saves the new start
	// before its next fetch reports it.
	if start := min(res.LogStartOffset, p.hw); start > p.log.LogStartOffset() {
		if err := p.log.AdvanceLogStart(start); err != nil {
			return syncTo, errs.Errorf(errs.KafkaStorageError, "%s-%d: delete records before %d: %v", p.cfg.Topic, p.cfg.Partition, start, err)
		}
	}
	return syncTo, damaged
}

// replayLocked applies an appended batch to the producer state and the
// aborted-transaction index; used by followers and by recovery, so both
// rebuild what the leader has.
func (p *Partition) replayLocked(b record.Batch) {
	pid := b.ProducerID()
	if pid < 0 {
		return
	}
	if b.IsControl() {
		var it record.RecordIter
		commit, coordEpoch := true, int32(0)
		if it.Reset(b) == nil && it.Next() {
			if m, err := record.ParseMarker(it.Record()); err == nil {
				commit, coordEpoch = m.Type == record.ControlCommit, m.CoordinatorEpoch
			}
		}
		p.noteMarkerLocked(pid, b.ProducerEpoch(), commit, coordEpoch, b.BaseOffset(), b.MaxTimestamp())
		return
	}
	p.producers.Append(producer.Batch{ProducerID: pid, Epoch: b.ProducerEpoch(), FirstSeq: b.BaseSequence(), Records: b.LastOffsetDelta() + 1, Transactional: b.IsTransactional(), LogAppendTime: b.LogAppendTime()},
		int64(b.BaseOffset()), int64(b.LastOffset()), b.MaxTimestamp())
}

// Recover rebuilds producer state and the aborted-transaction index from the
// log, from offset from to its end (on open, before the replica serves).
func (p *Partition) Recover(from record.Offset) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.recoverLocked(from)
}

// holdsMarkersLocked reports whether the log holds a transaction marker at
// or above from.
func (p *Partition) holdsMarkersLocked(from record.Offset) (bool, error) {
	found := false
	err := p.eachBatchLocked(from, func(b record.Batch) bool {
		found = b.IsControl()
		return !found
	})
	if err != nil {
		return false, errs.Errorf(errs.KafkaStorageError, "%s-%d: reading from %d: %v", p.cfg.Topic, p.cfg.Partition, from, err)
	}
	return found, nil
}

// recoverLocked is Recover under p.mu.
func (p *Partition) recoverLocked(from record.Offset) error {
	return p.eachBatchLocked(from, func(b record.Batch) bool {
		p.replayLocked(b)
		return true
	})
}

// replayFromSnapshotLocked rebuilds the producer state and the aborted
// index of a log just cut to end: from the last snapshot taken, when the
// log still holds everything after it and the HW has passed it (the
// replay notes the markers above the HW as not yet replicated, which the
// snapshot does not hold), else from the log's start (which takes as long
// as reading the whole log, with p.mu held).
func (p *Partition) replayFromSnapshotLocked(end record.Offset) error {
	p.unreplicated = nil
	start := p.log.LogStartOffset()
	if s := p.lastSnap; s.Producers != nil && s.Next <= end && s.Next <= p.hw && s.Next >= start {
		if ps, err := producer.Restore(s.Producers); err == nil {
			p.producers, p.aborted = ps, nil
			for _, a := range s.Aborted {
				if a.LastOffset >= start {
					p.aborted = append(p.aborted, a)
				}
			}
			return p.recoverLocked(s.Next)
		}
	}
	p.producers, p.aborted = producer.New(), nil
	return p.recoverLocked(start)
}

// eachBatchLocked calls fn with every batch of the log from the one holding
// from to the end, in order, until fn answers false.
func (p *Partition) eachBatchLocked(from record.Offset, fn func(record.Batch) bool) error {
	l := p.log
	for off := from; off < l.LogEndOffset(); {
		data, err := l.Read(off, 1<<20, l.LogEndOffset())
		if err != nil {
			return err
		}
		it := record.NewBatchIter(data)
		it.AllowPartial = true
		moved := false
		for it.Next() {
			b := it.Batch()
			if b.LastOffset() < off {
				continue
			}
			if !fn(b) {
				return nil
			}
			off = b.NextOffset()
			moved = true
		}
		if err := it.Err(); err != nil {
			return err
		}
		if !moved {
			break
		}
	}
	return nil
}

// MaybeShrinkISR proposes removing followers that have not caught up within
// replica.lag.time.max.ms. Called periodically by the replica manager.
func (p *Partition) MaybeShrinkISR() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role != Leader {
		return
	}
	if p.pendingISR != nil {
		if p.pendingUnsure {
			// The last answer had no verdict: ask again, the same change
			// with the same broker epochs (a member restarted since is
			// refused). Committed already, it is refused as stale, with the
			// state that holds it.
			p.sendLocked(p.pendingChange)
		}
		return
	}
	shrink, _ := isr.Evaluate(p.now(), p.followerViewLocked(), isr.Offset(p.hw), isr.Offset(p.leaderEpochStart), p.cfg.ReplicaLagMax)
	if len(shrink) > 0 {
		p.proposeLocked(isr.Apply(toIDs(p.st.ISR), shrink, nil))
	}
}

// maybeExpandISRLocked proposes adding replica, which has just fetched, to
// the ISR once it caught up. Only the replica that fetched: another one
// outside the ISR may have stopped fetching at a LEO that is still high
// enough (the HW does not move while the ISR is too small for acks=all),
// and the controller would refuse the whole change if it is fenced, or
// let in a replica that is gone (Kafka expands by the fetching follower).
func (p *Partition) maybeExpandISRLocked(replica int32) {
	if p.pendingISR != nil || p.now().Before(p.expandAfter) {
		return
	}
	_, expand := isr.Evaluate(p.now(), p.followerViewLocked(), isr.Offset(p.hw), isr.Offset(p.leaderEpochStart), p.cfg.ReplicaLagMax)
	if slices.Contains(expand, isr.ReplicaID(replica)) {
		p.proposeLocked(isr.Apply(toIDs(p.st.ISR), nil, []isr.ReplicaID{isr.ReplicaID(replica)}))
	}
}

func (p *Partition) followerViewLocked() []isr.Follower {
	out := make([]isr.Follower, 0, len(p.followers))
	for id, f := range p.followers {
		out = append(out, isr.Follower{ID: isr.ReplicaID(id), LEO: isr.Offset(f.leo), LastCaughtUp: f.lastCaughtUp, InISR: slices.Contains(p.st.ISR, id)})
	}
	return out
}

func toIDs(in []int32) []isr.ReplicaID {
	out := make([]isr.ReplicaID, len(in))
	for i, r := range in {
		out[i] = isr.ReplicaID(r)
	}
	return out
}

// proposeLocked hands an ISR change to the node's proposer; the answer (or
// the metadata stream, whichever comes first) applies it.
func (p *Partition) proposeLocked(next []isr.ReplicaID) {
	if p.proposer == nil {
		return
	}
	newISR := make([]int32, len(next))
	epochs := make([]int64, len(next))
	for i, r := range next {
		newISR[i] = int32(r)
		if f, ok := p.followers[int32(r)]; ok {
			epochs[i] = f.brokerEpoch
		}
	}
	if !slices.Contains(newISR, p.cfg.Self) {
		return // the leader never proposes an ISR without itself
	}
	p.sendLocked(ISRChange{Topic: p.cfg.Topic, Partition: p.cfg.Partition, LeaderEpoch: p.st.LeaderEpoch, PartitionEpoch: p.st.PartitionEpoch,
		ISR: newISR, BrokerEpochs: epochs})
}

// sendLocked hands change to the proposer as the pending change; the
// answer settles it, or, without a verdict, leaves it pending and unsure.
func (p *Partition) sendLocked(change ISRChange) {
	newISR := change.ISR
	p.nextProposal++
	id := p.nextProposal
	p.pendingISR, p.pendingChange, p.pendingID, p.pendingUnsure = newISR, change, id, false
	le, pe := change.LeaderEpoch, change.PartitionEpoch
	p.proposer.ProposeISR(change, func(st State, err error) {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		mine := p.pendingISR != nil && p.pendingID == id
		switch {
		case errors.Is(err, ErrISRNotSent):
			// Replaced by a newer proposal before it was sent: that one's
			// answer settles what is pending.
			p.mu.Unlock()
			return
		case errors.Is(err, ErrISRUnsure):
			// The controller may have committed it: its members still
			// count, and MaybeShrinkISR asks again.
			if mine {
				p.pendingUnsure = true
			}
			p.mu.Unlock()
			return
		case err != nil:
			// Refused. When the controller's state is newer than the one
			// the change was made at, applying it settles the change (a
			// resend of a change already committed is refused this way);
			// at the same epochs the refusal itself does: nothing commits
			// this proposal now.
			newer := st.LeaderEpoch > le || (st.LeaderEpoch == le && st.PartitionEpoch > pe)
			if mine && !newer {
				p.clearPendingISRLocked()
				if len(change.ISR) > len(p.st.ISR) {
					// A refused expansion (a member fenced, shutting down,
					// or restarted) is not proposed again at every fetch of
					// a follower that goes on fetching: a second's pause.
					p.expandAfter = p.now().Add(time.Second)
				}
			}
			p.mu.Unlock()
			if newer {
				p.Apply(st)
			}
			return
		}
		p.mu.Unlock()
		p.Apply(st) // counts the change, unless the metadata applied it first
	})
}

// clearPendingISRLocked forgets the pending ISR change; the HW, which
// counted its members, may move.
func (p *Partition) clearPendingISRLocked() {
	if p.pendingISR == nil {
		return
	}
	p.pendingISR, p.pendingUnsure = nil, false
	p.maybeAdvanceHWLocked()
	p.completeWaitersLocked()
	p.notifyStartLocked() // a refused expansion no longer holds the low watermark
}
