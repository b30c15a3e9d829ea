package coordinator

import (
	"context"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"skein/libs/errs"
	"skein/services/groupcoord/internal/assign"
	"skein/services/groupcoord/internal/delivery"
	"skein/services/groupcoord/internal/group"
	"skein/services/groupcoord/internal/offsetlog"
)

type partState int

const (
	loading partState = iota
	serving
	failed // a write left the partition in a state only a new owner can fix
)

// partition is one owned partition of __consumer_offsets and its groups.
type partition struct {
	c   *Coordinator
	id  int32
	own Ownership

	ctx    context.Context // ends when the partition is dropped
	cancel context.CancelFunc
	topics chan struct{} // a topic metadata change to apply; capacity 1
	wakeCh chan struct{} // a deadline may have moved; capacity 1

	// writeMu serialises events that write, and the writes: the log holds
	// them in the order they were applied.
	writeMu sync.Mutex
	seq     int32         // the next batch's base sequence; guarded by writeMu
	pending *pendingBatch // a batch whose outcome is unknown; guarded by writeMu

	// nackMu serialises nacks (each one reads, decides, writes and may
	// dead-letter with I/O between its writes), so two nacks of a record
	// never count or dead-letter it twice at once.
	nackMu sync.Mutex

	mu     sync.Mutex
	state  partState              // guarded by mu
	groups map[string]*groupState // guarded by mu; only while serving
	order  uint64                 // the last log order given (groupState.offsetOrder); guarded by mu
	// verifying counts the TxnOffsetCommits between their check with the
	// transaction coordinator and their write; while any is, lostEnds
	// keeps the completions the groups' own memory cannot (of a group the
	// partition does not hold, or deleted by it), so that Commit still
	// sees one that came during the check. Guarded by mu; nil when
	// verifying is 0.
	verifying int
	lostEnds  map[producerOfGroup]int16
	// retryTopics: when to apply the topics again to the groups, after a
	// group failed to take them; zero when none did. The run goroutine's.
	retryTopics time.Time
}

// pendingBatch is a write whose outcome is unknown: it is sent again with
// the same identity before anything else.
type pendingBatch struct {
	id      Identity
	recs    []KV
	changes []pendingChange
}

type pendingChange struct {
	groupID string
	ch      change
}

// groupState is one group: its state machine, the last snapshot written,
// its committed offsets, its transactions' pending offsets, its records'
// failed deliveries and its settings (only acknowledged ones).
type groupState struct {
	g          *group.Group
	written    *group.Snapshot // nil: no group metadata record in the log
	offsets    map[assign.TopicPartition]offsetlog.Offset
	txns       group.TxnOffsets
	deliveries map[assign.TopicPartition]delivery.Partition // never an empty partition
	config     map[string]string                            // the settings set; nil: none
	// topics: the topics the group's offsets, pending offsets and
	// deliveries were last checked against (dropDeleted), which its events
	// validate partitions by; nil when not since it was loaded.
	topics *topicSet
	// since: when this coordinator took the group over (loaded or created
	// it); lastSubscribed: per topic, when a member was last seen
	// subscribing to it. The offset retention counts from them (group.Expiry).
	since          time.Time
	lastSubscribed map[string]time.Time
	// offsetOrder and pendingOrder: where each committed offset, and each
	// producer's pending offset, was written in the partition's log, as a
	// count that follows the log's order (live and on load). A
	// transaction's completion commits a pending offset only over a
	// committed offset written before it, as Kafka does: a plain commit
	// made after the transaction's TxnOffsetCommit stays.
	offsetOrder  map[assign.TopicPartition]uint64
	pendingOrder map[pendingKey]uint64
}

// noteWritten notes the log order of the offsets and pending offsets a
// change wrote, and forgets those it deleted. mu held.
func (gs *groupState) noteWritten(ch change, next func() uint64) {
	if gs.offsetOrder == nil {
		gs.offsetOrder = map[assign.TopicPartition]uint64{}
	}
	if gs.pendingOrder == nil {
		gs.pendingOrder = map[pendingKey]uint64{}
	}
	for _, tp := range ch.drop {
		delete(gs.offsetOrder, tp)
		for pk := range gs.pendingOrder {
			if pk.tp == tp {
				delete(gs.pendingOrder, pk)
			}
		}
	}
	for _, tp := range slices.SortedFunc(maps.Keys(ch.offsets), compareTP) {
		gs.offsetOrder[tp] = next()
	}
	if t := ch.txn; t != nil {
		for _, tp := range t.Drop {
			delete(gs.pendingOrder, pendingKey{t.ProducerID, tp})
		}
		for _, tp := range slices.SortedFunc(maps.Keys(t.Put), compareTP) {
			gs.pendingOrder[pendingKey{t.ProducerID, tp}] = next()
		}
	}
}

// supersededCommits answers the partitions of a transaction's completion
// whose committed offset was written after the producer's pending offset:
// the completion leaves those as they are. mu held.
func (gs *groupState) supersededCommits(pid int64, commit map[assign.TopicPartition]offsetlog.Offset) []assign.TopicPartition {
	var out []assign.TopicPartition
	for tp := range commit {
		if gs.offsetOrder[tp] > gs.pendingOrder[pendingKey{pid, tp}] {
			out = append(out, tp)
		}
	}
	slices.SortFunc(out, compareTP)
	return out
}

// clearCommitted adds to ch the failed deliveries its committed offsets
// clear: whatever commits an offset (a member, an offset reset, a
// transaction's completion, a dead-lettering), the entries of the records
// it moves the group past go (delivery.Partition.Committed), so a replay
// after an offset reset starts them at attempt 1 again. They go in the
// commit's own batch: the log never holds the commit without them, and an
// owner that replays it rebuilds the same counts. mu held.
func (gs *groupState) clearCommitted(ch *change) {
	if ch.deleted {
		return
	}
	cleared := map[assign.TopicPartition]delivery.Partition{}
	for tp, o := range ch.offsets {
		d, set := ch.deliveries[tp]
		if !set {
			d = gs.deliveries[tp]
		}
		if len(d) == 0 {
			continue
		}
		prev := int64(-1)
		if old, ok := gs.offsets[tp]; ok {
			prev = old.Offset
		}
		if nd, changed := d.Committed(prev, o.Offset); changed {
			cleared[tp] = nd
		}
	}
	if len(cleared) > 0 {
		ch.deliveries = maps.Clone(ch.deliveries)
		if ch.deliveries == nil {
			ch.deliveries = cleared
		} else {
			maps.Copy(ch.deliveries, cleared)
		}
	}
}

// noteSubscribed notes that the group's members subscribe to their topics
// at now (lastSubscribed).
func (gs *groupState) noteSubscribed(now time.Time) {
	for _, t := range gs.g.SubscribedTopics() {
		if gs.lastSubscribed == nil {
			gs.lastSubscribed = map[string]time.Time{}
		}
		gs.lastSubscribed[t] = now
	}
}

// holds reports whether the group holds anything of a partition: a
// committed offset, a transaction's pending offset, failed deliveries.
// mu held.
func (gs *groupState) holds(tp assign.TopicPartition) bool {
	_, committed := gs.offsets[tp]
	_, failed := gs.deliveries[tp]
	return committed || failed || gs.txns.Has(tp)
}

// durable reports whether the log holds anything of the group.
func (gs *groupState) durable() bool {
	return gs.written != nil || len(gs.offsets) > 0 || !gs.txns.Empty() || len(gs.deliveries) > 0 || gs.config != nil
}

// change is what one event writes for one group.
type change struct {
	snapshot *group.Snapshot
	offsets  map[assign.TopicPartition]offsetlog.Offset
	deleted  bool // tombstones for the group, every offset and every pending offset it has
	// txn: pending offsets a transaction puts or drops (its committed
	// offsets are in offsets).
	txn *group.TxnChange
	// deliveries: partitions whose failed deliveries change (an empty one
	// is dropped: a tombstone).
	deliveries map[assign.TopicPartition]delivery.Partition
	// configSet: config is the group's new settings (empty: a tombstone).
	configSet bool
	config    map[string]string
	// drop: partitions whose offsets go (their topic was deleted, their
	// offsets expired or were deleted): tombstones for their committed
	// offsets, the pending offsets of every producer and their deliveries.
	drop []assign.TopicPartition
}

func (ch change) empty() bool {
	return ch.snapshot == nil && len(ch.offsets) == 0 && !ch.deleted && (ch.txn == nil || !ch.txn.Writes()) &&
		len(ch.deliveries) == 0 && !ch.configSet && len(ch.drop) == 0
}

func newPartition(c *Coordinator, id int32, own Ownership) *partition {
	ctx, cancel := context.WithCancel(c.ctx)
	return &partition{c: c, id: id, own: own, ctx: ctx, cancel: cancel,
		topics: make(chan struct{}, 1), wakeCh: make(chan struct{}, 1)}
}

func (p *partition) drop() { p.cancel() }

func (p *partition) topicsChanged() { signal(p.topics) }
func (p *partition) wake()          { signal(p.wakeCh) }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
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
		return errs.Errorf(errs.CoordinatorLoadInProgress, "coordinator %d is loading partition %d", p.c.cfg.NodeID, p.id)
	}
	return nil
}

func (p *partition) notCoordinator() error {
	return errs.Errorf(errs.NotCoordinator, "coordinator %d no longer owns partition %d at epoch %d", p.c.cfg.NodeID, p.id, p.own.Epoch)
}

func (p *partition) identity() Identity {
	return Identity{ProducerID: p.own.ProducerID, Epoch: int16(p.own.Epoch), Sequence: p.seq}
}

// run loads the partition, then ticks its groups, applies topic changes and
// the offset retention until the partition is dropped.
func (p *partition) run() {
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
	n := len(p.groups)
	p.mu.Unlock()
	p.c.logger.Info("partition loaded", "partition", p.id, "epoch", p.own.Epoch, "groups", n, "took", time.Since(start).Round(time.Millisecond).String())
	p.applyTopics()

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	nextSweep := p.c.cfg.Now().Add(p.c.cfg.RetentionCheckInterval)
	for {
		if now := p.c.cfg.Now(); !now.Before(nextSweep) {
			p.expireOffsets()
			nextSweep = now.Add(p.c.cfg.RetentionCheckInterval)
		}
		now := p.c.cfg.Now()
		next := p.nextDeadline()
		wait := nextSweep.Sub(now)
		if !next.IsZero() {
			wait = min(wait, max(next.Sub(now), 0))
		}
		if !p.retryTopics.IsZero() {
			wait = min(wait, max(p.retryTopics.Sub(now), 0))
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
		case <-p.topics:
			p.applyTopics()
		case <-p.wakeCh:
		case <-timer.C:
			if !p.retryTopics.IsZero() && !p.c.cfg.Now().Before(p.retryTopics) {
				p.applyTopics()
			}
			p.tick()
		}
	}
}

// load fences the previous owner with an owner record, then reads the
// partition up to past that record and rebuilds every group.
func (p *partition) load() error {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	// Sequence 0 of the new epoch: a retry after an unknown outcome sends the
	// same batch again, which the storage node answers as a duplicate.
	p.seq = 0
	p.pending = nil
	rec := KV{Key: offsetlog.OwnerKey(p.id), Value: offsetlog.EncodeOwner(offsetlog.Owner{Coordinator: p.c.cfg.NodeID, Epoch: p.own.Epoch, Time: p.c.cfg.Now()})}
	ctx, cancel := context.WithTimeout(p.ctx, p.c.cfg.WriteTimeout)
	marker, err := p.c.log.Produce(ctx, p.id, p.identity(), []KV{rec})
	cancel()
	if err != nil {
		return err
	}
	p.seq = 1

	st := newLoadState()
	for offset := int64(0); offset <= marker; {
		ctx, cancel := context.WithTimeout(p.ctx, p.c.cfg.WriteTimeout)
		recs, next, _, err := p.c.log.Fetch(ctx, p.id, offset)
		cancel()
		if err != nil {
			return err
		}
		for _, e := range recs {
			if err := st.apply(e.KV); err != nil {
				p.c.logger.Error("skipping a record of __consumer_offsets that does not decode", "partition", p.id, "offset", e.Offset, "err", err)
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
	groups := map[string]*groupState{}
	now := p.c.cfg.Now()
	for _, id := range st.groupIDs() {
		gs := &groupState{offsets: st.offsets[id], deliveries: st.deliveries[id], config: st.configs[id],
			offsetOrder: st.offsetOrder[id], pendingOrder: st.pendingOrder[id]}
		if gs.offsets == nil {
			gs.offsets = map[assign.TopicPartition]offsetlog.Offset{}
		}
		if gs.deliveries == nil {
			gs.deliveries = map[assign.TopicPartition]delivery.Partition{}
		}
		for pk, po := range st.pending[id] {
			gs.txns.Load(pk.pid, pk.tp, po)
		}
		if snap, ok := st.snaps[id]; ok {
			g, err := group.Restore(p.c.cfg.Group, snap, now)
			if err != nil {
				p.c.logger.Error("group snapshot does not restore: the group starts empty", "group", id, "err", err)
			} else {
				gs.g, gs.written = g, &snap
			}
		}
		if gs.g == nil {
			gs.g = group.New(p.c.cfg.Group, id)
		}
		gs.since = now
		groups[id] = gs
	}
	p.mu.Lock()
	p.groups, p.state, p.order = groups, serving, st.order
	p.mu.Unlock()
	return nil
}

// loadState folds records into the newest state per key.
type loadState struct {
	// order counts the offset and pending records applied, in log order
	// (groupState.offsetOrder, pendingOrder).
	order        uint64
	offsetOrder  map[string]map[assign.TopicPartition]uint64
	pendingOrder map[string]map[pendingKey]uint64
	snaps        map[string]group.Snapshot
	offsets      map[string]map[assign.TopicPartition]offsetlog.Offset
	pending      map[string]map[pendingKey]offsetlog.Pending
	deliveries   map[string]map[assign.TopicPartition]delivery.Partition
	configs      map[string]map[string]string
}

type pendingKey struct {
	pid int64
	tp  assign.TopicPartition
}

func newLoadState() *loadState {
	return &loadState{offsetOrder: map[string]map[assign.TopicPartition]uint64{}, pendingOrder: map[string]map[pendingKey]uint64{},
		snaps: map[string]group.Snapshot{}, offsets: map[string]map[assign.TopicPartition]offsetlog.Offset{},
		pending: map[string]map[pendingKey]offsetlog.Pending{}, deliveries: map[string]map[assign.TopicPartition]delivery.Partition{},
		configs: map[string]map[string]string{}}
}

func (st *loadState) apply(r KV) error {
	k, err := offsetlog.DecodeKey(r.Key)
	if err != nil {
		return err
	}
	switch k.Kind {
	case offsetlog.KindGroup:
		if r.Value == nil {
			delete(st.snaps, k.Group)
			return nil
		}
		s, err := offsetlog.DecodeGroup(k.Group, r.Value)
		if err != nil {
			return err
		}
		st.snaps[k.Group] = s
	case offsetlog.KindOffset:
		tp := assign.TopicPartition{Topic: k.Topic, Partition: k.Partition}
		if r.Value == nil {
			delete(st.offsets[k.Group], tp)
			delete(st.offsetOrder[k.Group], tp)
			if len(st.offsets[k.Group]) == 0 {
				delete(st.offsets, k.Group)
			}
			return nil
		}
		o, err := offsetlog.DecodeOffset(r.Value)
		if err != nil {
			return err
		}
		if st.offsets[k.Group] == nil {
			st.offsets[k.Group] = map[assign.TopicPartition]offsetlog.Offset{}
		}
		st.offsets[k.Group][tp] = o
		if st.offsetOrder[k.Group] == nil {
			st.offsetOrder[k.Group] = map[assign.TopicPartition]uint64{}
		}
		st.order++
		st.offsetOrder[k.Group][tp] = st.order
	case offsetlog.KindPending:
		pk := pendingKey{pid: k.ProducerID, tp: assign.TopicPartition{Topic: k.Topic, Partition: k.Partition}}
		if r.Value == nil {
			delete(st.pending[k.Group], pk)
			delete(st.pendingOrder[k.Group], pk)
			if len(st.pending[k.Group]) == 0 {
				delete(st.pending, k.Group)
			}
			return nil
		}
		po, err := offsetlog.DecodePending(r.Value)
		if err != nil {
			return err
		}
		if st.pending[k.Group] == nil {
			st.pending[k.Group] = map[pendingKey]offsetlog.Pending{}
		}
		st.pending[k.Group][pk] = po
		if st.pendingOrder[k.Group] == nil {
			st.pendingOrder[k.Group] = map[pendingKey]uint64{}
		}
		st.order++
		st.pendingOrder[k.Group][pk] = st.order
	case offsetlog.KindDelivery:
		tp := assign.TopicPartition{Topic: k.Topic, Partition: k.Partition}
		if r.Value == nil {
			delete(st.deliveries[k.Group], tp)
			if len(st.deliveries[k.Group]) == 0 {
				delete(st.deliveries, k.Group)
			}
			return nil
		}
		d, err := offsetlog.DecodeDeliveries(r.Value)
		if err != nil {
			return err
		}
		if st.deliveries[k.Group] == nil {
			st.deliveries[k.Group] = map[assign.TopicPartition]delivery.Partition{}
		}
		st.deliveries[k.Group][tp] = d
	case offsetlog.KindConfig:
		if r.Value == nil {
			delete(st.configs, k.Group)
			return nil
		}
		m, err := offsetlog.DecodeConfig(r.Value)
		if err != nil {
			return err
		}
		st.configs[k.Group] = m
	}
	return nil
}

func (st *loadState) groupIDs() []string {
	ids := slices.Collect(maps.Keys(st.snaps))
	ids = slices.AppendSeq(ids, maps.Keys(st.offsets))
	ids = slices.AppendSeq(ids, maps.Keys(st.pending))
	ids = slices.AppendSeq(ids, maps.Keys(st.deliveries))
	ids = slices.AppendSeq(ids, maps.Keys(st.configs))
	slices.Sort(ids)
	return slices.Compact(ids)
}

// encode renders a group's change as records: a group record, offset
// records, pending offset records and their tombstones, tombstones for the
// partitions dropped, or tombstones for the group, its offsets and its
// pending offsets (gs: what the log holds).
func encode(groupID string, ch change, gs *groupState) []KV {
	var recs []KV
	if ch.deleted {
		for _, tp := range slices.SortedFunc(maps.Keys(gs.offsets), compareTP) {
			recs = append(recs, KV{Key: offsetlog.OffsetKey(groupID, tp.Topic, tp.Partition)})
		}
		for _, pid := range gs.txns.Producers() {
			for _, tp := range slices.SortedFunc(maps.Keys(gs.txns.Pending(pid)), compareTP) {
				recs = append(recs, KV{Key: offsetlog.PendingKey(groupID, pid, tp.Topic, tp.Partition)})
			}
		}
		for _, tp := range slices.SortedFunc(maps.Keys(gs.deliveries), compareTP) {
			recs = append(recs, KV{Key: offsetlog.DeliveryKey(groupID, tp.Topic, tp.Partition)})
		}
		if gs.config != nil {
			recs = append(recs, KV{Key: offsetlog.ConfigKey(groupID)})
		}
		return append(recs, KV{Key: offsetlog.GroupKey(groupID)})
	}
	for _, tp := range ch.drop {
		if _, ok := gs.offsets[tp]; ok {
			recs = append(recs, KV{Key: offsetlog.OffsetKey(groupID, tp.Topic, tp.Partition)})
		}
	}
	for _, pid := range gs.txns.Producers() {
		pending := gs.txns.Pending(pid)
		for _, tp := range ch.drop {
			if _, ok := pending[tp]; ok {
				recs = append(recs, KV{Key: offsetlog.PendingKey(groupID, pid, tp.Topic, tp.Partition)})
			}
		}
	}
	for _, tp := range ch.drop {
		if _, ok := gs.deliveries[tp]; ok {
			recs = append(recs, KV{Key: offsetlog.DeliveryKey(groupID, tp.Topic, tp.Partition)})
		}
	}
	for _, tp := range slices.SortedFunc(maps.Keys(ch.offsets), compareTP) {
		recs = append(recs, KV{Key: offsetlog.OffsetKey(groupID, tp.Topic, tp.Partition), Value: offsetlog.EncodeOffset(ch.offsets[tp])})
	}
	if t := ch.txn; t != nil {
		for _, tp := range slices.SortedFunc(maps.Keys(t.Put), compareTP) {
			recs = append(recs, KV{Key: offsetlog.PendingKey(groupID, t.ProducerID, tp.Topic, tp.Partition), Value: offsetlog.EncodePending(t.Put[tp])})
		}
		for _, tp := range t.Drop {
			recs = append(recs, KV{Key: offsetlog.PendingKey(groupID, t.ProducerID, tp.Topic, tp.Partition)})
		}
	}
	for _, tp := range slices.SortedFunc(maps.Keys(ch.deliveries), compareTP) {
		kv := KV{Key: offsetlog.DeliveryKey(groupID, tp.Topic, tp.Partition)}
		if d := ch.deliveries[tp]; len(d) > 0 {
			kv.Value = offsetlog.EncodeDeliveries(d)
		}
		recs = append(recs, kv)
	}
	if ch.configSet {
		kv := KV{Key: offsetlog.ConfigKey(groupID)}
		if len(ch.config) > 0 {
			kv.Value = offsetlog.EncodeConfig(ch.config)
		}
		recs = append(recs, kv)
	}
	if ch.snapshot != nil {
		recs = append(recs, KV{Key: offsetlog.GroupKey(groupID), Value: offsetlog.EncodeGroup(*ch.snapshot)})
	}
	return recs
}

func newGroupState(cfg group.Config, groupID string) *groupState {
	return &groupState{g: group.New(cfg, groupID), offsets: map[assign.TopicPartition]offsetlog.Offset{},
		deliveries: map[assign.TopicPartition]delivery.Partition{}}
}

func compareTP(a, b assign.TopicPartition) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return int(a.Partition - b.Partition)
}

// touch refreshes the session of the member a heartbeat comes from
// (group.Group.Touch) before the heartbeat waits for the partition's
// writes: an earlier write of unknown outcome may hold every event of the
// partition up until the log can be written again.
func (p *partition) touch(groupID string, req group.HeartbeatRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if gs := p.groups[groupID]; gs != nil {
		gs.g.Touch(req, p.c.cfg.Now())
	}
}

// producerOfGroup keys lostEnds.
type producerOfGroup struct {
	group string
	pid   int64
}

// beginVerify and endVerify bracket a TxnOffsetCommit's check with the
// transaction coordinator and its write.
func (p *partition) beginVerify() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.verifying++
}

func (p *partition) endVerify() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.verifying--; p.verifying == 0 {
		p.lostEnds = nil
	}
}

// noteLostEndLocked keeps a completion of pid in groupID at epoch that the
// group will not remember, while a check may need it. mu held.
func (p *partition) noteLostEndLocked(groupID string, pid int64, epoch int16) {
	if p.verifying == 0 {
		return
	}
	if p.lostEnds == nil {
		p.lostEnds = map[producerOfGroup]int16{}
	}
	k := producerOfGroup{groupID, pid}
	if e, ok := p.lostEnds[k]; !ok || epoch > e {
		p.lostEnds[k] = epoch
	}
}

// lostEndLocked answers the epoch of a completion of pid in groupID that
// noteLostEndLocked kept. mu held.
func (p *partition) lostEndLocked(groupID string, pid int64) (int16, bool) {
	e, ok := p.lostEnds[producerOfGroup{groupID, pid}]
	return e, ok
}

// knowsProducer reports whether groupID holds anything of producer pid
// (group.TxnOffsets.Knows); false for a group the partition does not hold.
func (p *partition) knowsProducer(groupID string, pid int64) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.readyLocked(); err != nil {
		return false, err
	}
	gs := p.groups[groupID]
	return gs != nil && gs.txns.Knows(pid), nil
}

// errNoGroup: an event for a group the partition does not hold.
var errNoGroup = errs.Errorf(errs.GroupIDNotFound, "no such group")

// update runs one event: fn applies it to the group (under mu) and answers
// the change to write; update writes it, with the failed deliveries its
// commits clear (clearCommitted), and, once acknowledged, applies it to
// the durable view (written snapshot, offsets, deliveries). On a failed
// write the group is restored from its last written snapshot. With create,
// a group the partition does not hold starts empty (and is kept only if
// the event succeeds).
func (p *partition) update(groupID string, create bool, fn func(gs *groupState, now time.Time) (change, error)) error {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	if err := p.settle(); err != nil {
		return err
	}
	topics := p.c.currentTopics()
	if err := p.dropDeleted(groupID, topics); err != nil {
		return err
	}
	p.mu.Lock()
	if err := p.readyLocked(); err != nil {
		p.mu.Unlock()
		return err
	}
	gs, known := p.groups[groupID]
	if !known {
		if !create {
			p.mu.Unlock()
			return errNoGroup
		}
		gs = newGroupState(p.c.cfg.Group, groupID)
		gs.topics = topics
		gs.since = p.c.cfg.Now()
		gs.g.SetTopics(topics.counts)
	}
	before := gs.g.Epoch()
	now := p.c.cfg.Now()
	gs.noteSubscribed(now) // before the event, which may remove members
	ch, err := fn(gs, now)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	gs.clearCommitted(&ch)
	recs := encode(groupID, ch, gs)
	if !known {
		if len(recs) == 0 {
			p.mu.Unlock()
			return nil // nothing to keep of a group that never reached the log
		}
		p.groups[groupID] = gs
	}
	p.mu.Unlock()
	if gs.g.Epoch() != before {
		p.c.metrics.rebalances.Inc()
	}
	defer p.wake()
	if len(recs) == 0 {
		return nil
	}
	if err := p.write(recs, []pendingChange{{groupID, ch}}); err != nil {
		p.mu.Lock()
		p.rollback(groupID, gs)
		p.mu.Unlock()
		return err
	}
	p.mu.Lock()
	p.acknowledged(groupID, gs, ch, false)
	p.mu.Unlock()
	return nil
}

// acknowledged applies a written change to a group's durable view; with
// restore (a pending batch found written later) the group is rebuilt from
// the snapshot too. mu held.
func (p *partition) acknowledged(groupID string, gs *groupState, ch change, restore bool) {
	if ch.deleted {
		if p.groups[groupID] == gs {
			delete(p.groups, groupID)
		}
		return
	}
	gs.noteWritten(ch, func() uint64 { p.order++; return p.order })
	if len(ch.drop) > 0 {
		for _, tp := range ch.drop {
			delete(gs.offsets, tp)
			delete(gs.deliveries, tp)
		}
		for _, pid := range gs.txns.Producers() {
			pending := gs.txns.Pending(pid)
			var drop []assign.TopicPartition
			for _, tp := range ch.drop {
				if _, ok := pending[tp]; ok {
					drop = append(drop, tp)
				}
			}
			if len(drop) > 0 {
				gs.txns.Apply(group.TxnChange{ProducerID: pid, Drop: drop})
			}
		}
		if !gs.durable() && len(gs.g.Describe().Members) == 0 && p.groups[groupID] == gs {
			// The dropped partitions were all the log had of the group.
			delete(p.groups, groupID)
			return
		}
	}
	maps.Copy(gs.offsets, ch.offsets)
	for tp, d := range ch.deliveries {
		if len(d) == 0 {
			delete(gs.deliveries, tp)
		} else {
			gs.deliveries[tp] = d
		}
	}
	if ch.configSet {
		gs.config = nil
		if len(ch.config) > 0 {
			gs.config = maps.Clone(ch.config)
		}
	}
	if ch.txn != nil {
		gs.txns.Apply(*ch.txn)
		if !gs.durable() && len(gs.g.Describe().Members) == 0 && p.groups[groupID] == gs {
			// An aborted transaction was all the log had of the group.
			delete(p.groups, groupID)
			if ch.txn.Ended > 0 {
				p.noteLostEndLocked(groupID, ch.txn.ProducerID, ch.txn.Ended)
			}
		}
	}
	if ch.snapshot != nil {
		gs.written = ch.snapshot
		if restore {
			if g, err := group.Restore(p.c.cfg.Group, *ch.snapshot, p.c.cfg.Now()); err == nil {
				gs.g = g
			}
		}
	}
}

// rollback restores a group whose write failed to its last written state.
// mu held.
func (p *partition) rollback(groupID string, gs *groupState) {
	if p.groups[groupID] != gs {
		return
	}
	if !gs.durable() {
		delete(p.groups, groupID) // it never reached the log
		return
	}
	gs.g = group.New(p.c.cfg.Group, groupID)
	if gs.written != nil {
		g, err := group.Restore(p.c.cfg.Group, *gs.written, p.c.cfg.Now())
		if err == nil {
			gs.g = g
		}
	}
	p.topicsChanged() // the restored group may predate a topic change
}

// dropDeleted drops what a group holds of partitions that no longer exist
// under topics — its committed offsets, pending offsets and deliveries of a
// deleted topic, as Kafka deletes a deleted partition's offsets — with
// tombstones written as one batch, unless the group was already checked
// against topics. A topic deleted and created again under its name has a
// new id: what the group holds of the old one is dropped too, when the
// group was checked against the old one (the log does not keep topic ids:
// a group just loaded is checked against no topics, and only the
// partitions missing from topics are dropped of it). update calls it before
// every event, so an event never sees what a deleted topic left, and the
// events of a group are validated against the topics it was checked
// against (gs.topics). writeMu held and nothing pending.
func (p *partition) dropDeleted(groupID string, topics *topicSet) error {
	p.mu.Lock()
	gs := p.groups[groupID]
	if p.readyLocked() != nil || gs == nil || gs.topics == topics {
		p.mu.Unlock()
		return nil
	}
	seen := map[assign.TopicPartition]bool{}
	for tp := range gs.offsets {
		seen[tp] = true
	}
	for _, pid := range gs.txns.Producers() {
		for tp := range gs.txns.Pending(pid) {
			seen[tp] = true
		}
	}
	for tp := range gs.deliveries {
		seen[tp] = true
	}
	var ch change
	for _, tp := range slices.SortedFunc(maps.Keys(seen), compareTP) {
		if topics.gone(gs.topics, tp) {
			ch.drop = append(ch.drop, tp)
		}
	}
	if len(ch.drop) == 0 {
		gs.topics = topics
		p.mu.Unlock()
		return nil
	}
	recs := encode(groupID, ch, gs)
	p.mu.Unlock()
	if err := p.write(recs, []pendingChange{{groupID, ch}}); err != nil {
		return err
	}
	p.c.logger.Info("dropped the offsets of deleted topics", "group", groupID, "partitions", len(ch.drop))
	p.mu.Lock()
	p.acknowledged(groupID, gs, ch, false)
	gs.topics = topics
	p.mu.Unlock()
	return nil
}

// write appends recs as the partition's next batch; writeMu held and
// nothing pending.
func (p *partition) write(recs []KV, changes []pendingChange) error {
	id := p.identity()
	err := p.produce(id, recs)
	switch {
	case err == nil:
		p.seq = addSeq(p.seq, len(recs))
		return nil
	case p.ctx.Err() != nil:
		return p.notCoordinator()
	case fenced(err):
		p.c.logger.Warn("a newer owner fenced this one: dropping the partition", "partition", p.id, "epoch", p.own.Epoch, "err", err)
		p.c.metrics.fenced.Inc()
		p.c.dropFenced(p)
		return p.notCoordinator()
	case errs.IsRetriable(err):
		p.pending = &pendingBatch{id: id, recs: recs, changes: changes}
		return err
	case errs.Of(err) == errs.OutOfOrderSequenceNumber:
		p.fail(err)
		return p.notCoordinator()
	}
	return err // not appended: the sequence is still free
}

// settle resolves a pending batch: sent again with the same identity, it is
// in the log once acknowledged (written then, or now), and its changes are
// applied as the loader would. writeMu held.
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
		for _, pc := range b.changes {
			gs := p.groups[pc.groupID]
			if gs == nil {
				gs = newGroupState(p.c.cfg.Group, pc.groupID)
				gs.since = p.c.cfg.Now()
				p.groups[pc.groupID] = gs
			}
			p.acknowledged(pc.groupID, gs, pc.ch, true)
		}
		p.mu.Unlock()
		p.topicsChanged()
		return nil
	case p.ctx.Err() != nil:
		return p.notCoordinator()
	case fenced(err):
		p.c.metrics.fenced.Inc()
		p.c.dropFenced(p)
		return p.notCoordinator()
	case errs.IsRetriable(err):
		return err
	case errs.Of(err) == errs.OutOfOrderSequenceNumber:
		p.fail(err)
		return p.notCoordinator()
	}
	p.pending = nil // refused outright: it never reached the log
	return nil
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

// applyTopics brings every group in line with the current topics: it
// drops what they hold of deleted topics (update) and passes them the
// partition counts.
// topicsRetry is how long a partition waits before it applies the topics
// again to a group that failed to take them.
const topicsRetry = time.Second

func (p *partition) applyTopics() {
	p.retryTopics = time.Time{}
	for _, id := range p.groupIDs() {
		err := p.update(id, false, func(gs *groupState, _ time.Time) (change, error) {
			return change{snapshot: gs.g.SetTopics(gs.topics.counts).Snapshot}, nil
		})
		if err != nil && err != errNoGroup && p.ctx.Err() == nil {
			p.c.logger.Warn("applying topic metadata to a group failed: trying again in a second", "group", id, "err", err)
			p.retryTopics = p.c.cfg.Now().Add(topicsRetry)
		}
	}
	if !p.retryTopics.IsZero() {
		// The failed write's rollback asked for another pass at once; the
		// retry is that pass, after a pause.
		select {
		case <-p.topics:
		default:
		}
	}
}

// expireOffsets applies the offset retention to every group: what a group
// holds of the partitions group.Expiry finds expired is dropped, with
// tombstones; an empty group left with nothing but its settings goes as a
// whole, as Kafka deletes an empty group whose offsets are all gone. A
// group with settings (set by an operator) stays, without its offsets.
func (p *partition) expireOffsets() {
	for _, id := range p.groupIDs() {
		var expired int
		var deleted bool
		err := p.update(id, false, func(gs *groupState, now time.Time) (change, error) {
			subscribed := map[string]bool{}
			for _, t := range gs.g.SubscribedTopics() {
				subscribed[t] = true
			}
			e := group.Expiry{Now: now, Retention: p.c.cfg.OffsetsRetention, Offsets: gs.offsets,
				Held: slices.SortedFunc(maps.Keys(gs.deliveries), compareTP), Subscribed: subscribed,
				Pending: gs.txns.Has, LastSubscribed: gs.lastSubscribed, Since: gs.since}
			drop := e.Expired()
			left := len(gs.offsets) + len(gs.deliveries)
			for _, tp := range drop {
				if _, ok := gs.offsets[tp]; ok {
					left--
				}
				if _, ok := gs.deliveries[tp]; ok {
					left--
				}
			}
			expired = len(drop)
			if gs.g.State() == group.Empty && left == 0 && gs.txns.Empty() && gs.config == nil {
				eff, err := gs.g.Delete()
				if err != nil {
					return change{}, err
				}
				deleted = eff.Deleted
				return change{deleted: eff.Deleted}, nil
			}
			return change{drop: drop}, nil
		})
		switch {
		case err != nil && err != errNoGroup && !errs.IsRetriable(err):
			// This group's write is refused (too large, say): the others'
			// expiry goes on without it.
			if p.ctx.Err() == nil {
				p.c.logger.Warn("expiring a group's offsets failed: it is tried again at the next check", "group", id, "err", err)
			}
		case err != nil && err != errNoGroup:
			if p.ctx.Err() == nil {
				// The next check tries again; meanwhile the run loop ticks
				// the groups rather than waiting on the log group by group.
				p.c.logger.Warn("expiring a group's offsets failed: the rest waits for the next check", "group", id, "err", err)
			}
			return
		case err != nil:
		case deleted:
			p.c.metrics.expiredOffsets.Add(float64(expired))
			p.c.metrics.expiredGroups.Inc()
			p.c.logger.Info("empty group deleted: nothing of it was left once its offsets expired", "group", id, "partitions", expired,
				"retention", p.c.cfg.OffsetsRetention.String())
		case expired > 0:
			p.c.metrics.expiredOffsets.Add(float64(expired))
			p.c.logger.Info("offsets expired", "group", id, "partitions", expired, "retention", p.c.cfg.OffsetsRetention.String())
		}
	}
}

// tick runs Tick on every group whose deadline has come.
func (p *partition) tick() {
	now := p.c.cfg.Now()
	p.mu.Lock()
	var due []string
	for id, gs := range p.groups {
		if d := gs.g.NextDeadline(); !d.IsZero() && !d.After(now) {
			due = append(due, id)
		}
	}
	p.mu.Unlock()
	p.writeMu.Lock()
	if err := p.settle(); err != nil && p.ctx.Err() == nil {
		p.c.logger.Warn("a write of unknown outcome is still unresolved", "partition", p.id, "err", err)
	}
	p.writeMu.Unlock()
	slices.Sort(due)
	for _, id := range due {
		err := p.update(id, false, func(gs *groupState, now time.Time) (change, error) {
			eff := gs.g.Tick(now)
			for _, r := range eff.Removed {
				p.c.logger.Info("member removed", "group", id, "member", r.Member, "instance_id", r.InstanceID, "reason", r.Reason)
			}
			return change{snapshot: eff.Snapshot}, nil
		})
		if err != nil && err != errNoGroup && p.ctx.Err() == nil {
			p.c.logger.Warn("ticking a group failed", "group", id, "err", err)
		}
	}
}

func (p *partition) nextDeadline() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	var next time.Time
	for _, gs := range p.groups {
		if d := gs.g.NextDeadline(); !d.IsZero() && (next.IsZero() || d.Before(next)) {
			next = d
		}
	}
	return next
}

func (p *partition) groupIDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.groups))
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
