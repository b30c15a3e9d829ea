package coordinator

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"sync"
	"time"

	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/services/txncoord/internal/txn"
)

type partState int

const (
	loading partState = iota
	serving
	failed // a write left the partition in a state only a new owner can fix
)

// partition is one owned partition of __transaction_state and its
// transactional ids.
type partition struct {
	c   *Coordinator
	id  int32
	own Ownership

	ctx    context.Context // ends when the partition is dropped
	cancel context.CancelFunc
	wakeCh chan struct{} // a deadline may have moved; capacity 1

	// writeMu serialises events that write, and the writes: the log holds
	// the states in the order they were decided.
	writeMu sync.Mutex
	seq     int32         // the next batch's base sequence; guarded by writeMu
	pending *pendingBatch // a batch whose outcome is unknown; guarded by writeMu

	mu    sync.Mutex
	state partState // guarded by mu
	// txns are the ids with a state in the log; guarded by mu, only while
	// serving. A Txn is used only under mu.
	txns map[string]*txn.Txn
	// completing: the ids whose markers a goroutine is writing; guarded by mu.
	completing map[string]bool
	stopped    bool           // no goroutine may start any more; guarded by mu
	workers    sync.WaitGroup // the marker goroutines
}

// pendingBatch is a write whose outcome is unknown: it is sent again with
// the same identity before anything else.
type pendingBatch struct {
	id     Identity
	recs   []KV
	writes []txnWrite
}

// txnWrite is one state written: the Txn whose transition it is, and the
// record.
type txnWrite struct {
	t   *txn.Txn
	rec txn.Record
}

func newPartition(c *Coordinator, id int32, own Ownership) *partition {
	ctx, cancel := context.WithCancel(c.ctx)
	return &partition{c: c, id: id, own: own, ctx: ctx, cancel: cancel, wakeCh: make(chan struct{}, 1),
		completing: map[string]bool{}}
}

func (p *partition) drop() { p.cancel() }

func (p *partition) wake() {
	select {
	case p.wakeCh <- struct{}{}:
	default:
	}
}

// ready answers nil while the partition serves, else why it does not.
func (p *partition) ready() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.readyLocked()
}

func (p *partition) readyLocked() error {
	switch {
	case p.ctx.Err() != nil || p.state == failed:
		return p.notCoordinator()
	case p.state == loading:
		return errs.Errorf(errs.CoordinatorLoadInProgress, "transaction coordinator %d is loading partition %d", p.c.cfg.NodeID, p.id)
	}
	return nil
}

func (p *partition) notCoordinator() error {
	return errs.Errorf(errs.NotCoordinator, "transaction coordinator %d no longer owns partition %d at epoch %d", p.c.cfg.NodeID, p.id, p.own.Epoch)
}

func (p *partition) identity() Identity {
	return Identity{ProducerID: p.own.ProducerID, Epoch: int16(p.own.Epoch), Sequence: p.seq}
}

// run loads the partition, resumes every id, then ticks the ids at their
// deadlines until the partition is dropped; it returns once every
// goroutine of the partition ended.
func (p *partition) run() {
	defer p.stop()
	start := time.Now()
	for attempt := 0; ; attempt++ {
		err := p.load()
		if err == nil {
			break
		}
		if p.ctx.Err() != nil {
			return
		}
		if fenced(err) {
			p.c.logger.Warn("a newer owner fenced this one while loading", "partition", p.id, "epoch", p.own.Epoch, "err", err)
			p.c.metrics.fenced.Inc()
			p.c.dropFenced(p)
			return
		}
		p.c.logger.Warn("loading partition failed, retrying", "partition", p.id, "err", err)
		if !sleepCtx(p.ctx, backoff(attempt)) {
			return
		}
	}
	p.c.metrics.loads.Inc()
	p.c.metrics.loadSeconds.Observe(time.Since(start).Seconds())
	p.mu.Lock()
	n := len(p.txns)
	p.mu.Unlock()
	p.c.logger.Info("partition loaded", "partition", p.id, "epoch", p.own.Epoch, "transactional_ids", n,
		"took", time.Since(start).Round(time.Millisecond).String())
	for _, id := range p.ids() {
		p.resume(id)
	}

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next, attention := p.nextDeadline()
		wait := time.Minute
		if !next.IsZero() {
			wait = min(max(next.Sub(p.c.cfg.Now()), 0), wait)
		}
		if attention {
			wait = min(wait, 500*time.Millisecond)
		}
		p.writeMu.Lock()
		if p.pending != nil {
			wait = min(wait, 200*time.Millisecond) // settle it even if no call comes
		}
		p.writeMu.Unlock()
		timer.Reset(wait)
		select {
		case <-p.ctx.Done():
			return
		case <-p.wakeCh:
		case <-timer.C:
			p.tick()
		}
	}
}

// stop lets no goroutine of the partition start any more and waits for
// those running (they end with the partition's context).
func (p *partition) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.workers.Wait()
}

// The owner record: the first record every owner writes to a partition, at
// its epoch. Its key version (1) is not the transaction log's (0), so the
// replay of transactional ids never takes it for one.
//
//	key    int16 version (1) | partition int32
//	value  int16 version (0) | coordinator int32 | coordinator epoch int32 | time_ms int64
const (
	ownerKeyVersion   int16 = 1
	ownerValueVersion int16 = 0
)

func ownerKey(partition int32) []byte {
	b := binary.BigEndian.AppendUint16(make([]byte, 0, 6), uint16(ownerKeyVersion))
	return binary.BigEndian.AppendUint32(b, uint32(partition))
}

func isOwnerKey(key []byte) bool {
	return len(key) >= 2 && int16(binary.BigEndian.Uint16(key)) == ownerKeyVersion
}

func ownerValue(coordinator, epoch int32, now time.Time) []byte {
	b := binary.BigEndian.AppendUint16(make([]byte, 0, 18), uint16(ownerValueVersion))
	b = binary.BigEndian.AppendUint32(b, uint32(coordinator))
	b = binary.BigEndian.AppendUint32(b, uint32(epoch))
	return binary.BigEndian.AppendUint64(b, uint64(now.UnixMilli()))
}

// load fences the previous owner with an owner record, then reads the
// partition up to past that record and rebuilds every transactional id.
func (p *partition) load() error {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	// Sequence 0 of the new epoch: a retry after an unknown outcome sends the
	// same batch again, which the storage node answers as a duplicate.
	p.seq = 0
	p.pending = nil
	rec := KV{Key: ownerKey(p.id), Value: ownerValue(p.c.cfg.NodeID, p.own.Epoch, p.c.cfg.Now())}
	ctx, cancel := context.WithTimeout(p.ctx, p.c.cfg.WriteTimeout)
	marker, err := p.c.log.Produce(ctx, p.id, p.identity(), []KV{rec})
	cancel()
	if err != nil {
		return err
	}
	p.seq = 1

	replay := txn.NewReplay(p.c.cfg.Txn)
	for offset := int64(0); offset <= marker; {
		ctx, cancel := context.WithTimeout(p.ctx, p.c.cfg.WriteTimeout)
		recs, next, _, err := p.c.log.Fetch(ctx, p.id, offset)
		cancel()
		if err != nil {
			return err
		}
		for _, e := range recs {
			if isOwnerKey(e.Key) {
				continue
			}
			if err := replay.Apply(e.Key, e.Value); err != nil {
				p.c.logger.Error("skipping a record of __transaction_state that does not decode", "partition", p.id, "offset", e.Offset, "err", err)
			}
		}
		if next <= offset && len(recs) == 0 {
			// Nothing readable yet below our own acknowledged record: the
			// leader's view is moving; ask again shortly.
			if !sleepCtx(p.ctx, 50*time.Millisecond) {
				return p.ctx.Err()
			}
		}
		offset = max(offset, next)
	}
	txns := map[string]*txn.Txn{}
	for _, t := range replay.Txns() {
		txns[t.ID()] = t
	}
	p.mu.Lock()
	p.txns, p.state = txns, serving
	p.mu.Unlock()
	return nil
}

// event is one event of a Txn: it answers the Txn's effects. alloc hands
// out a new producer id.
type event func(t *txn.Txn, now time.Time, alloc txn.Allocator) (txn.Effects, error)

// errNeedID: the event needs a new producer id, which is allocated outside
// the partition's lock before the event runs again.
var errNeedID = errors.New("a new producer id is needed")

// apply runs one event on the Txn of a transactional id (a fresh one when
// the id has no state) and, when it answers a write, writes it and
// completes it; it answers the record written (nil if none) once it is
// acknowledged. A write of unknown outcome is settled before anything else.
// ctx bounds a producer id allocation only.
func (p *partition) apply(ctx context.Context, id string, ev event) (*txn.Record, error) {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	if err := p.settle(); err != nil {
		return nil, err
	}
	fresh := txn.NoProducerID // a producer id allocated for the event's next run
	for pass := 0; ; pass++ {
		p.mu.Lock()
		if err := p.readyLocked(); err != nil {
			p.mu.Unlock()
			return nil, err
		}
		t := p.txns[id]
		if t == nil {
			t = txn.New(p.c.cfg.Txn, id) // kept only once its first state is written
		}
		needed := false
		alloc := func() (int64, error) {
			if fresh != txn.NoProducerID {
				pid := fresh
				fresh = txn.NoProducerID
				return pid, nil
			}
			needed = true
			return 0, errNeedID
		}
		eff, err := ev(t, p.c.cfg.Now(), alloc)
		if needed && errors.Is(err, errNeedID) {
			p.mu.Unlock()
			if pass > 0 {
				return nil, errs.Errorf(errs.UnknownServerError, "transactional id %q: an event asked for more than one new producer id", id)
			}
			if fresh, err = p.allocate(ctx); err != nil {
				return nil, err
			}
			continue // the state cannot have changed: writeMu is held
		}
		if err != nil {
			p.mu.Unlock()
			return nil, err
		}
		if eff.Markers != nil {
			p.startMarkersLocked(id)
		}
		if eff.Write == nil {
			p.mu.Unlock()
			return nil, nil
		}
		w := txnWrite{t: t, rec: *eff.Write}
		key, value, err := txn.Encode(w.rec)
		if err != nil {
			t.Fail()
			p.mu.Unlock()
			return nil, err
		}
		p.mu.Unlock()
		// The loop looks at the deadlines again (and at a pending write).
		defer p.wake()
		kept, err := p.write([]KV{{Key: key, Value: value}}, []txnWrite{w})
		p.mu.Lock()
		defer p.mu.Unlock()
		if err != nil {
			if !kept {
				p.failedLocked(w)
			}
			return nil, err
		}
		p.completedLocked(w)
		return &w.rec, nil
	}
}

// allocate answers a fresh producer id, giving up when ctx ends or the
// partition is dropped (writeMu is held meanwhile).
func (p *partition) allocate(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(p.ctx, cancel)()
	id, err := p.c.allocate(ctx)
	if err != nil && p.ctx.Err() != nil {
		return 0, p.notCoordinator()
	}
	return id, err
}

// completedLocked makes an acknowledged write take effect: the id is kept
// (or deleted, for a tombstone) and the markers now due are started. mu
// held.
func (p *partition) completedLocked(w txnWrite) {
	before := w.t.State()
	eff, err := w.t.Complete(w.rec)
	if err != nil {
		p.c.logger.Error("completing a written state failed", "transactional_id", w.rec.TransactionalID, "err", err)
		return
	}
	id := w.rec.TransactionalID
	if eff.Deleted {
		if p.txns[id] == w.t {
			delete(p.txns, id)
		}
		p.c.logger.Info("transactional id expired", "transactional_id", id)
		return
	}
	p.txns[id] = w.t
	switch {
	case before == txn.PrepareCommit && w.rec.State == txn.CompleteCommit:
		p.c.metrics.commits.Inc()
	case before == txn.PrepareAbort && w.rec.State == txn.CompleteAbort:
		p.c.metrics.aborts.Inc()
	}
	if eff.Markers != nil {
		p.startMarkersLocked(id)
	}
}

// failedLocked undoes the transition of a write that is not in the log.
// mu held.
func (p *partition) failedLocked(w txnWrite) {
	w.t.Fail()
	if _, ok := w.t.MarkersDue(); ok && p.txns[w.rec.TransactionalID] == w.t {
		p.startMarkersLocked(w.rec.TransactionalID)
	}
}

// write appends recs as the partition's next batch; writeMu held and
// nothing pending. kept: the outcome is unknown and the batch is pending,
// its transitions with it.
func (p *partition) write(recs []KV, writes []txnWrite) (kept bool, err error) {
	id := p.identity()
	err = p.produce(id, recs)
	switch {
	case err == nil:
		p.seq = addSeq(p.seq, len(recs))
		return false, nil
	case p.ctx.Err() != nil:
		return false, p.notCoordinator()
	case fenced(err):
		p.c.logger.Warn("a newer owner fenced this one: dropping the partition", "partition", p.id, "epoch", p.own.Epoch, "err", err)
		p.c.metrics.fenced.Inc()
		p.c.dropFenced(p)
		return false, p.notCoordinator()
	case errs.IsRetriable(err):
		p.pending = &pendingBatch{id: id, recs: recs, writes: writes}
		return true, p.unavailable(err)
	case errs.Of(err) == errs.OutOfOrderSequenceNumber:
		p.fail(err)
		return false, p.notCoordinator()
	}
	return false, err // not appended: the sequence is still free
}

// settle resolves a pending batch: sent again with the same identity, it is
// in the log once acknowledged (written then, or now), and its transitions
// complete; refused outright, they fail. writeMu held.
func (p *partition) settle() error {
	b := p.pending
	if b == nil {
		return nil
	}
	err := p.produce(b.id, b.recs)
	switch {
	case err == nil:
		p.pending = nil
		p.seq = addSeq(b.id.Sequence, len(b.recs))
		p.mu.Lock()
		for _, w := range b.writes {
			p.completedLocked(w)
		}
		p.mu.Unlock()
		return nil
	case p.ctx.Err() != nil:
		return p.notCoordinator()
	case fenced(err):
		p.c.logger.Warn("a newer owner fenced this one: dropping the partition", "partition", p.id, "epoch", p.own.Epoch, "err", err)
		p.c.metrics.fenced.Inc()
		p.c.dropFenced(p)
		return p.notCoordinator()
	case errs.IsRetriable(err):
		return p.unavailable(err)
	case errs.Of(err) == errs.OutOfOrderSequenceNumber:
		p.fail(err)
		return p.notCoordinator()
	}
	p.pending = nil // refused outright: it never reached the log
	p.mu.Lock()
	for _, w := range b.writes {
		p.failedLocked(w)
	}
	p.mu.Unlock()
	return nil
}

// unavailable is a write's retriable failure as the caller sees it
// (Kafka's coordinator answers the same).
func (p *partition) unavailable(err error) error {
	return errs.Errorf(errs.CoordinatorNotAvailable, "writing to %s-%d: %v", metadata.TransactionStateTopic, p.id, err)
}

func (p *partition) produce(id Identity, recs []KV) error {
	ctx, cancel := context.WithTimeout(p.ctx, p.c.cfg.WriteTimeout)
	defer cancel()
	start := time.Now()
	_, err := p.c.log.Produce(ctx, p.id, id, recs)
	p.c.metrics.writeSeconds.Observe(time.Since(start).Seconds())
	if err != nil && ctx.Err() != nil && p.ctx.Err() == nil && !errs.IsRetriable(err) {
		// Cut short by the timeout: the outcome is unknown.
		err = errs.Errorf(errs.RequestTimedOut, "write to partition %d: %v", p.id, err)
	}
	return err
}

// fail stops serving a partition whose producer state no longer matches
// the storage node's; a new owner (or this one after a restart) recovers it.
func (p *partition) fail(err error) {
	p.c.logger.Error("partition's producer sequence is out of step with the log: not serving it until ownership moves", "partition", p.id, "err", err)
	p.mu.Lock()
	p.state = failed
	p.mu.Unlock()
}

// fenced reports whether a write was refused because a newer owner wrote
// with a higher producer epoch.
func fenced(err error) bool {
	switch errs.Of(err) {
	case errs.InvalidProducerEpoch, errs.ProducerFenced:
		return true
	}
	return false
}

// addSeq advances a sequence by n, wrapping from MaxInt32 to 0 as the
// storage node does.
func addSeq(s int32, n int) int32 {
	if v := int64(s) + int64(n); v <= math.MaxInt32 {
		return int32(v)
	} else {
		return int32(v - math.MaxInt32 - 1)
	}
}

// resume runs Resume on an id: the markers of a PREPARE_* state, the abort
// of a PREPARE_EPOCH_FENCE.
func (p *partition) resume(id string) {
	_, err := p.apply(p.ctx, id, func(t *txn.Txn, now time.Time, _ txn.Allocator) (txn.Effects, error) {
		return t.Resume(now), nil
	})
	if err != nil && p.ctx.Err() == nil {
		p.c.logger.Warn("resuming a transactional id failed; retrying", "transactional_id", id, "err", err)
	}
}

// tick settles a pending write, resumes what needs it, and runs Tick on
// every id whose deadline has come.
func (p *partition) tick() {
	p.writeMu.Lock()
	if err := p.settle(); err != nil && p.ctx.Err() == nil {
		p.c.logger.Warn("a write of unknown outcome is still unresolved", "partition", p.id, "err", err)
	}
	p.writeMu.Unlock()
	now := p.c.cfg.Now()
	var due, fence []string
	p.mu.Lock()
	for id, t := range p.txns {
		if _, pending := t.Pending(); pending {
			continue
		}
		if _, ok := t.MarkersDue(); ok {
			p.startMarkersLocked(id) // a no-op while they are being written
		}
		if t.State() == txn.PrepareEpochFence {
			fence = append(fence, id)
		}
		if d, ok := t.NextDeadline(); ok && !d.After(now) {
			due = append(due, id)
		}
	}
	p.mu.Unlock()
	slices.Sort(fence)
	for _, id := range fence {
		p.resume(id)
	}
	slices.Sort(due)
	for _, id := range due {
		rec, err := p.apply(p.ctx, id, func(t *txn.Txn, now time.Time, _ txn.Allocator) (txn.Effects, error) {
			return t.Tick(now), nil
		})
		switch {
		case err != nil:
			if p.ctx.Err() == nil {
				p.c.logger.Warn("ticking a transactional id failed", "transactional_id", id, "err", err)
			}
		case rec != nil && rec.State == txn.PrepareAbort:
			p.c.metrics.timeouts.Inc()
			p.c.logger.Info("transaction timed out: aborting it", "transactional_id", id, "producer_id", rec.ProducerID,
				"epoch", rec.ProducerEpoch)
		}
	}
}

// nextDeadline answers the earliest deadline of the ids (zero if none),
// and whether some id needs attention the deadlines do not show (markers
// due that no goroutine writes, a fence to resume).
func (p *partition) nextDeadline() (next time.Time, attention bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, t := range p.txns {
		if d, ok := t.NextDeadline(); ok && (next.IsZero() || d.Before(next)) {
			next = d
		}
		if _, pending := t.Pending(); pending {
			continue
		}
		if _, ok := t.MarkersDue(); ok && !p.completing[id] || t.State() == txn.PrepareEpochFence {
			attention = true
		}
	}
	return next, attention
}

func (p *partition) ids() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.txns))
	for id := range p.txns {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// startMarkersLocked starts the goroutine that writes an id's markers and
// completes its transaction, unless one runs already. mu held.
func (p *partition) startMarkersLocked(id string) {
	if p.stopped || p.completing[id] || p.ctx.Err() != nil {
		return
	}
	p.completing[id] = true
	p.workers.Add(1)
	go func() {
		defer p.workers.Done()
		p.finish(id)
	}()
}

// finish writes the markers of an id's PREPARE_* state, retrying with
// backoff until they are written, then writes its COMPLETE_* state; it
// returns when no markers are due (or the partition is dropped).
func (p *partition) finish(id string) {
	var written *txn.Markers // markers written whose COMPLETE is not yet in the log
	for attempt := 0; ; {
		p.mu.Lock()
		t := p.txns[id]
		var m txn.Markers
		due, pending := false, false
		if t != nil {
			m, due = t.MarkersDue()
			_, pending = t.Pending()
		}
		if !due && !pending {
			delete(p.completing, id)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		if pending {
			// A write of unknown outcome for the id is being settled.
			if !sleepCtx(p.ctx, backoff(attempt)) {
				return
			}
			attempt++
			continue
		}
		if written == nil || !sameMarkers(*written, m) {
			if err := p.writeMarkers(m); err != nil {
				if p.ctx.Err() != nil {
					return
				}
				p.c.metrics.markerFailures.Inc()
				p.c.logger.Warn("writing transaction markers failed; retrying", "transactional_id", id, "producer_id", m.ProducerID,
					"epoch", m.ProducerEpoch, "commit", m.Commit, "attempt", attempt+1, "err", err)
				if !sleepCtx(p.ctx, backoff(attempt)) {
					return
				}
				attempt++
				continue
			}
			written = &m
		}
		_, err := p.apply(p.ctx, id, func(t *txn.Txn, now time.Time, _ txn.Allocator) (txn.Effects, error) {
			return t.MarkersWritten(now)
		})
		if err == nil {
			attempt = 0
			continue // nothing is due any more, unless a new transaction ended meanwhile
		}
		if p.ctx.Err() != nil {
			return
		}
		p.c.logger.Warn("writing a completed transaction failed; retrying", "transactional_id", id, "err", err)
		if !sleepCtx(p.ctx, backoff(attempt)) {
			return
		}
		attempt++
	}
}

// writeMarkers writes m to its partitions and to the __consumer_offsets
// partition of each of its groups, then completes the groups' offsets.
func (p *partition) writeMarkers(m txn.Markers) error {
	parts := slices.Clone(m.Partitions)
	if len(m.Groups) > 0 {
		n := p.c.currentView().OffsetsPartitions
		if n <= 0 {
			return errs.Errorf(errs.CoordinatorNotAvailable, "%s does not exist: the markers of groups %v have no partition", metadata.ConsumerOffsetsTopic, m.Groups)
		}
		for _, g := range m.Groups {
			parts = append(parts, txn.TopicPartition{Topic: metadata.ConsumerOffsetsTopic, Partition: metadata.CoordinatorPartition(g, n)})
		}
	}
	slices.SortFunc(parts, compareTP)
	parts = slices.Compact(parts)
	ctx, cancel := context.WithTimeout(p.ctx, p.c.cfg.MarkersTimeout)
	defer cancel()
	start := time.Now()
	err := p.c.markers.WriteMarkers(ctx, m.ProducerID, m.ProducerEpoch, m.Commit, p.own.Epoch, parts)
	if err == nil && len(m.Groups) > 0 && p.c.cfg.CompleteGroupOffsets != nil {
		// The groups' pending offsets follow the decision; the COMPLETE
		// state is written only after they did, so a coordinator taking
		// over repeats this (harmless) rather than skip it.
		err = p.c.cfg.CompleteGroupOffsets(ctx, m.Groups, m.ProducerID, m.ProducerEpoch, m.Commit)
	}
	p.c.metrics.markerSeconds.Observe(time.Since(start).Seconds())
	return err
}

func sameMarkers(a, b txn.Markers) bool {
	return a.TransactionalID == b.TransactionalID && a.ProducerID == b.ProducerID && a.ProducerEpoch == b.ProducerEpoch &&
		a.Commit == b.Commit && slices.Equal(a.Partitions, b.Partitions) && slices.Equal(a.Groups, b.Groups)
}

func compareTP(a, b txn.TopicPartition) int {
	switch {
	case a.Topic < b.Topic:
		return -1
	case a.Topic > b.Topic:
		return 1
	}
	return int(a.Partition) - int(b.Partition)
}

func backoff(attempt int) time.Duration {
	d := 100 * time.Millisecond
	for i := 0; i < attempt && d < 2*time.Second; i++ {
		d *= 2
	}
	return min(d, 2*time.Second)
}

// sleepCtx waits d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
