package client

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	groupv1 "skein/gen/skein/group/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
)

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Auto offset reset policies: where a partition with no committed offset
// (or one out of range) starts. ResetNone starts it nowhere: the member's
// Poll fails with OFFSET_OUT_OF_RANGE naming the partitions (Kafka's
// auto.offset.reset=none), until an offset is committed for one without
// (the group's offsets reset while it is empty), or Seek moves one out of
// range.
const (
	ResetEarliest = "earliest"
	ResetLatest   = "latest"
	ResetNone     = "none"
)

// GroupConsumerConfig configures a GroupConsumer. Group and Topics are
// required; zero values of the rest take the coordinator's or the defaults.
type GroupConsumerConfig struct {
	Group  string
	Topics []string
	// InstanceID makes the member static: Close leaves with epoch -2 and a
	// restart with the same id within the session timeout takes its
	// partitions back without a rebalance.
	InstanceID string
	// MemberID is the member id to join with; a fresh random one when empty.
	MemberID string
	// SessionTimeout and RebalanceTimeout: 0 takes the coordinator's defaults.
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	// Assignor is the server assignor the member prefers: "range" or
	// "uniform"; "" for the group's.
	Assignor string
	// AutoOffsetReset is ResetEarliest, ResetLatest (the default) or
	// ResetNone.
	AutoOffsetReset string
	Isolation       skeinv1.IsolationLevel
	// MaxRecords caps the records of one Poll (default 500).
	MaxRecords int
	// MaxWait is how long a Poll long-polls for records (default 500 ms); it
	// is cut short when a heartbeat falls due.
	MaxWait time.Duration
	// MinBytes makes a Poll wait, up to MaxWait, until the owned partitions
	// have at least this many bytes of record batches in all
	// (fetch.min.bytes; 0 or 1: answer as soon as there is a record).
	MinBytes int32
	// OnAssigned is called from Poll with the partitions the member starts
	// consuming; OnRevoked with those it gives up (the positions are then
	// committed, commit-on-revoke, unless ManualCommit); OnLost with those
	// taken from it after it was fenced or expired (nothing is committed:
	// another member may own them). OnLost nil falls back to OnRevoked.
	OnAssigned func(context.Context, []TopicPartition)
	OnRevoked  func(context.Context, []TopicPartition)
	OnLost     func(context.Context, []TopicPartition)
	// ManualCommit: the member commits nothing by itself, neither the
	// positions of the partitions it gives up nor at Close (Kafka's
	// enable.auto.commit=false): only Commit and CommitSync commit. Set it
	// when offsets are committed in transactions (a consume-transform-
	// produce loop with TransactionalProducer.SendGroupOffsets): otherwise
	// a Close after an aborted transaction, or a rebalance in the middle of
	// one, commits positions past records whose output was never
	// committed, and the group skips them. OnRevoked is the place to end
	// the transaction of the partitions going away.
	ManualCommit bool
}

// partState is the consumer's view of one owned partition.
type partState struct {
	pos       int64 // the next offset to hand out; -1 until resolved
	committed int64 // the last offset this member committed or found committed; -1 none
}

// GroupConsumer is a member of a consumer group, as Kafka's consumer under
// the KIP-848 protocol: the coordinator assigns partitions; Poll heartbeats
// on the interval the coordinator answers, reconciles the assignment
// (revoked partitions are committed, then dropped, and the drop confirmed
// by an immediate heartbeat; assigned ones start at their committed offset
// or at AutoOffsetReset) and reads the partitions it owns, each through a
// Follow stream from its leader that stays open from Poll to Poll.
//
// Poll, Commit, CommitSync and Close must be called from one goroutine, and
// Poll often enough that heartbeats keep within the session timeout: a
// member that stops polling is expired and its partitions move on. The
// positions Poll advances past every record it returns; CommitSync commits
// them, so records processed before a commit are not read again by the
// group after a rebalance or a restart (at-least-once otherwise).
type GroupConsumer struct {
	c      *Client
	groups *Groups
	cfg    GroupConsumerConfig

	memberID string
	epoch    int32 // 0: not joined
	interval time.Duration
	nextHB   time.Time
	owned    map[TopicPartition]*partState
	closed   bool
	// failed: the failed deliveries of records of owned partitions, by
	// offset, as the last heartbeat (or this member's nacks) said.
	failed map[TopicPartition]map[int64]int32

	// follows: the Follow stream of each owned partition with a position
	// (groupfollow.go); stopped: streams cancelled that may not have ended
	// yet; followAfter: when a partition whose stream failed may have
	// another; inbox: the streams' answers.
	follows     map[TopicPartition]*follower
	stopped     []*follower
	followAfter map[TopicPartition]time.Time
	inbox       chan followAnswer
	// wake: see Wake.
	wake chan struct{}
	// stuck: under ResetNone, a partition whose position is out of range.
	stuck *stuckPosition
}

// stuckPosition is an owned partition's position out of range under
// ResetNone, and the error Poll answers while the position stays there.
type stuckPosition struct {
	tp  TopicPartition
	pos int64
	err error
}

// NewGroupConsumer makes a group consumer; it joins on the first Poll.
func (c *Client) NewGroupConsumer(cfg GroupConsumerConfig) (*GroupConsumer, error) {
	if cfg.Group == "" {
		return nil, errs.Errorf(errs.InvalidGroupID, "no group id")
	}
	if len(cfg.Topics) == 0 {
		return nil, errs.Errorf(errs.InvalidRequest, "a group consumer needs at least one topic")
	}
	switch cfg.AutoOffsetReset {
	case "":
		cfg.AutoOffsetReset = ResetLatest
	case ResetEarliest, ResetLatest, ResetNone:
	default:
		return nil, errs.Errorf(errs.InvalidRequest, "auto offset reset %q: want earliest, latest or none", cfg.AutoOffsetReset)
	}
	if cfg.MinBytes < 0 {
		return nil, errs.Errorf(errs.InvalidRequest, "min bytes must not be negative, got %d", cfg.MinBytes)
	}
	if cfg.MaxRecords <= 0 {
		cfg.MaxRecords = 500
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 500 * time.Millisecond
	}
	if cfg.MemberID == "" {
		cfg.MemberID = NewMemberID()
	}
	return &GroupConsumer{c: c, groups: c.Groups(), cfg: cfg, memberID: cfg.MemberID, owned: map[TopicPartition]*partState{},
		follows: map[TopicPartition]*follower{}, followAfter: map[TopicPartition]time.Time{}, wake: make(chan struct{}, 1)}, nil
}

// NewMemberID answers a fresh random member id (32 hex digits). Members
// name themselves so that a retried join is the same member, not a second.
func NewMemberID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Group is the group's id.
func (g *GroupConsumer) Group() string { return g.cfg.Group }

// MemberID is the member's id.
func (g *GroupConsumer) MemberID() string { return g.memberID }

// MemberEpoch is the member's epoch; 0 before it joined.
func (g *GroupConsumer) MemberEpoch() int32 { return g.epoch }

// GroupMetadata is the member as a transaction's offsets name it
// (TransactionalProducer.SendGroupOffsets), as Kafka's
// consumer.groupMetadata().
func (g *GroupConsumer) GroupMetadata() GroupMetadata {
	return GroupMetadata{Group: g.cfg.Group, MemberID: g.memberID, MemberEpoch: g.epoch}
}

// HeartbeatInterval is the interval the coordinator last answered.
func (g *GroupConsumer) HeartbeatInterval() time.Duration { return g.interval }

// Assignment answers the partitions the member owns, sorted.
func (g *GroupConsumer) Assignment() []TopicPartition {
	return sortTPs(slices.Collect(maps.Keys(g.owned)))
}

// Position answers where the member reads a partition next (-1: not yet
// known, or not owned).
func (g *GroupConsumer) Position(tp TopicPartition) int64 {
	if ps := g.owned[tp]; ps != nil && ps.pos >= 0 {
		return ps.pos
	}
	return -1
}

func sortTPs(tps []TopicPartition) []TopicPartition {
	slices.SortFunc(tps, func(a, b TopicPartition) int {
		if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
	return tps
}

// ToTopicPartitions groups partitions by topic, in the coordinator's form.
func ToTopicPartitions(tps []TopicPartition) []*groupv1.TopicPartitions {
	out := []*groupv1.TopicPartitions{}
	for _, tp := range sortTPs(slices.Clone(tps)) {
		if n := len(out); n > 0 && out[n-1].Topic == tp.Topic {
			out[n-1].Partitions = append(out[n-1].Partitions, tp.Partition)
			continue
		}
		out = append(out, &groupv1.TopicPartitions{Topic: tp.Topic, Partitions: []int32{tp.Partition}})
	}
	return out
}

// FromTopicPartitions flattens the coordinator's form, sorted.
func FromTopicPartitions(tps []*groupv1.TopicPartitions) []TopicPartition {
	var out []TopicPartition
	for _, t := range tps {
		for _, p := range t.GetPartitions() {
			out = append(out, TopicPartition{t.GetTopic(), p})
		}
	}
	return sortTPs(out)
}

var errClosed = errors.New("the group consumer is closed")

// Poll heartbeats when one is due, reconciles the assignment, and answers
// records of the owned partitions: at most MaxRecords, waiting up to MaxWait
// when there are none. It answers no records and no error when the member
// owns nothing yet.
func (g *GroupConsumer) Poll(ctx context.Context) ([]ConsumedRecord, error) {
	if g.closed {
		return nil, errClosed
	}
	if err := g.maybeHeartbeat(ctx); err != nil {
		return nil, err
	}
	if err := g.resolvePositions(ctx); err != nil {
		return nil, err
	}
	if st := g.stuck; st != nil {
		if ps := g.owned[st.tp]; ps != nil && ps.pos == st.pos {
			// As Kafka's poll throws OffsetOutOfRangeException until the
			// position is set again: the other partitions wait too.
			return nil, st.err
		}
		g.stuck = nil
	}
	g.syncFollows(ctx)
	wait := min(g.cfg.MaxWait, max(time.Until(g.nextHB), 0))
	if !g.anyPositioned() {
		// Nothing owned, or no position known yet.
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-g.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return nil, nil
	}
	return g.pollFollowed(ctx, wait)
}

// Wake makes a Poll that waits for records return now with what it has
// (a Wake while no Poll waits makes the next one return without waiting).
// Unlike the other methods it may be called from any goroutine: a caller
// that has other work for the Poll's goroutine (a commit its client asked
// for, say) need not wait for MaxWait to pass.
func (g *GroupConsumer) Wake() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// anyPositioned reports whether some owned partition can be fetched.
func (g *GroupConsumer) anyPositioned() bool {
	for _, ps := range g.owned {
		if ps.pos >= 0 {
			return true
		}
	}
	return false
}

// maybeHeartbeat heartbeats when one is due (or the member has not joined),
// again at once while partitions are being revoked, so that a revocation
// is confirmed in the same Poll.
func (g *GroupConsumer) maybeHeartbeat(ctx context.Context) error {
	for range 4 {
		if g.epoch > 0 && time.Now().Before(g.nextHB) {
			return nil
		}
		revoked, err := g.heartbeat(ctx)
		if err != nil {
			return err
		}
		if !revoked && g.epoch > 0 {
			return nil
		}
	}
	return nil
}

// heartbeat sends one heartbeat (a join at epoch 0) and reconciles its
// answer; revoked says partitions were given up and should be confirmed.
func (g *GroupConsumer) heartbeat(ctx context.Context) (revoked bool, err error) {
	req := &groupv1.ConsumerGroupHeartbeatRequest{
		GroupId: g.cfg.Group, MemberId: g.memberID, MemberEpoch: g.epoch, InstanceId: g.cfg.InstanceID,
		OwnedPartitions: ToTopicPartitions(slices.Collect(maps.Keys(g.owned))),
	}
	if g.epoch == 0 {
		req.SubscribedTopics = g.cfg.Topics
		req.ServerAssignor = g.cfg.Assignor
		req.SessionTimeoutMs = int32(g.cfg.SessionTimeout / time.Millisecond)
		req.RebalanceTimeoutMs = int32(g.cfg.RebalanceTimeout / time.Millisecond)
	}
	resp, err := g.groups.Heartbeat(ctx, req)
	switch errs.Of(err) {
	case errs.None:
	case errs.UnknownMemberID, errs.FencedMemberEpoch:
		// The group no longer counts us in (expired, fenced): what we own
		// may be someone else's now. Drop it uncommitted and rejoin.
		g.c.log.InfoContext(ctx, "group member fenced, rejoining", "group", g.cfg.Group, "member", g.memberID, "err", err)
		g.lose(ctx)
		g.epoch = 0
		return true, nil
	default:
		return false, err
	}
	g.epoch = resp.GetMemberEpoch()
	g.interval = time.Duration(resp.GetHeartbeatIntervalMs()) * time.Millisecond
	if g.interval <= 0 {
		g.interval = time.Second
	}
	g.nextHB = time.Now().Add(g.interval)
	g.noteDeliveries(resp.GetDeliveries())
	return g.reconcile(ctx, FromTopicPartitions(resp.GetAssignment())), nil
}

// reconcile moves the owned set to the answered assignment: revoked
// partitions are committed and dropped, new ones start unresolved.
func (g *GroupConsumer) reconcile(ctx context.Context, assignment []TopicPartition) (revoked bool) {
	want := map[TopicPartition]bool{}
	for _, tp := range assignment {
		want[tp] = true
	}
	var gone, added []TopicPartition
	for tp := range g.owned {
		if !want[tp] {
			gone = append(gone, tp)
		}
	}
	for _, tp := range assignment {
		if g.owned[tp] == nil {
			added = append(added, tp)
		}
	}
	if len(gone) > 0 {
		gone = sortTPs(gone)
		if g.cfg.OnRevoked != nil {
			g.cfg.OnRevoked(ctx, gone)
		}
		if g.cfg.ManualCommit {
			// Committed by the caller (in OnRevoked), or in a transaction.
		} else if err := g.commitPositions(ctx, gone); err != nil {
			g.c.log.WarnContext(ctx, "commit on revoke failed", "group", g.cfg.Group, "partitions", gone, "err", err)
		}
		for _, tp := range gone {
			delete(g.owned, tp)
		}
	}
	if len(added) > 0 {
		for _, tp := range added {
			g.owned[tp] = &partState{pos: -1, committed: -1}
		}
		if g.cfg.OnAssigned != nil {
			g.cfg.OnAssigned(ctx, added)
		}
	}
	return len(gone) > 0
}

// lose drops every owned partition without committing.
func (g *GroupConsumer) lose(ctx context.Context) {
	if len(g.owned) == 0 {
		return
	}
	lost := g.Assignment()
	g.owned = map[TopicPartition]*partState{}
	switch {
	case g.cfg.OnLost != nil:
		g.cfg.OnLost(ctx, lost)
	case g.cfg.OnRevoked != nil:
		g.cfg.OnRevoked(ctx, lost)
	}
}

// resolvePositions gives every owned partition without a position its
// committed offset, or the AutoOffsetReset one.
func (g *GroupConsumer) resolvePositions(ctx context.Context) error {
	// -1: not started, its committed offset first; -2: out of range (its
	// reset put off), the reset policy's offset alone. Either waits out a
	// pause after a try that could not be had.
	var todo []TopicPartition
	outOfRange := false
	now := time.Now()
	for tp, ps := range g.owned {
		switch {
		case now.Before(g.followAfter[tp]):
		case ps.pos == -1:
			todo = append(todo, tp)
		case ps.pos == -2:
			outOfRange = true
		}
	}
	if outOfRange {
		if err := g.resetPositions(ctx, func(ps *partState) bool { return ps.pos == -2 }); err != nil {
			return err
		}
	}
	if len(todo) == 0 {
		return nil
	}
	// A read_committed member asks for stable offsets, as Kafka's consumer
	// does: a partition whose offset is pending in a transaction answers
	// UNSTABLE_OFFSET_COMMIT and waits (unfetched) for a later Poll, rather
	// than starting before what the transaction will commit.
	stable := g.cfg.Isolation == skeinv1.IsolationLevel_READ_COMMITTED
	offs, err := g.groups.fetchOffsets(ctx, g.cfg.Group, ToTopicPartitions(todo), stable)
	if err != nil {
		return err
	}
	asked := map[*partState]bool{}
	for _, tp := range todo {
		asked[g.owned[tp]] = true
	}
	unstable := map[*partState]bool{}
	for _, o := range offs {
		ps := g.owned[TopicPartition{o.GetTopic(), o.GetPartition()}]
		switch {
		case ps == nil:
		case o.GetErrorCode() == skeinv1.ErrorCode_UNSTABLE_OFFSET_COMMIT:
			unstable[ps] = true
		case o.GetErrorCode() != skeinv1.ErrorCode_NONE:
			// Not known: never a reset in its place, which could skip
			// or repeat what the group committed. Tried again after a
			// pause, unless it will not pass.
			err := codeErr(o.GetErrorCode(), fmt.Sprintf("the committed offset of %s-%d: %s", o.GetTopic(), o.GetPartition(), errs.ForCode(errs.Code(o.GetErrorCode())).Desc))
			if !errs.IsRetriable(err) {
				return err
			}
			unstable[ps] = true
			g.followAfter[TopicPartition{o.GetTopic(), o.GetPartition()}] = time.Now().Add(followRetry)
			g.c.log.WarnContext(ctx, "the committed offset of an owned partition could not be read", "group", g.cfg.Group,
				"topic", o.GetTopic(), "partition", o.GetPartition(), "err", err)
		case o.GetOffset() >= 0:
			ps.pos, ps.committed = o.GetOffset(), o.GetOffset()
		}
	}
	return g.resetPositions(ctx, func(ps *partState) bool { return ps.pos == -1 && asked[ps] && !unstable[ps] })
}

// SeekToCommitted makes every owned partition start again, at the next
// Poll, from the group's committed offset (or AutoOffsetReset): what a
// consume-process-produce loop does after its transaction aborted, so
// that the records the transaction consumed are read again.
func (g *GroupConsumer) SeekToCommitted() {
	for _, ps := range g.owned {
		ps.pos = -1
	}
}

// resetPositions moves the partitions that need it to AutoOffsetReset, or,
// under ResetNone, fails naming them.
func (g *GroupConsumer) resetPositions(ctx context.Context, need func(*partState) bool) error {
	spec := LatestOffset
	if g.cfg.AutoOffsetReset == ResetEarliest {
		spec = EarliestOffset
	}
	byTopic := map[string][]int32{}
	var none []TopicPartition
	for tp, ps := range g.owned {
		if need(ps) {
			byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
			none = append(none, tp)
		}
	}
	if g.cfg.AutoOffsetReset == ResetNone && len(none) > 0 {
		return NoResetError(g.cfg.Group, none)
	}
	// A partition whose offset cannot be had now (no leader, say) stays
	// unstarted and is tried again after a pause, while the others are
	// read, as Kafka's consumer goes on with the partitions it can reach;
	// a refusal that will not pass (not authorized) fails the call.
	later := func(tp TopicPartition, err error) error {
		if !errs.IsRetriable(err) {
			return err
		}
		// Told at debug level: tried every pause while it lasts, and a
		// partition without a leader is the metadata's news already.
		g.c.log.DebugContext(ctx, "an owned partition's start offset is not available yet: reading the others", "group", g.cfg.Group,
			"topic", tp.Topic, "partition", tp.Partition, "reset", g.cfg.AutoOffsetReset, "err", err)
		g.followAfter[tp] = time.Now().Add(followRetry)
		return nil
	}
	for topic, parts := range byTopic {
		parts, leaderless := SplitByLeader(g.c.Metadata(), topic, parts)
		for _, p := range leaderless {
			_ = later(TopicPartition{topic, p}, errs.Errorf(errs.LeaderNotAvailable, "%s-%d has no leader", topic, p))
		}
		if len(parts) == 0 {
			continue
		}
		offs, err := g.c.ListOffsets(ctx, topic, parts, spec, g.cfg.Isolation)
		if err != nil {
			for _, p := range parts {
				if err := later(TopicPartition{topic, p}, err); err != nil {
					return err
				}
			}
			continue
		}
		for _, o := range offs {
			tp := TopicPartition{topic, o.Partition}
			if o.Err != nil {
				if err := later(tp, o.Err); err != nil {
					return err
				}
				continue
			}
			g.owned[tp].pos = o.Offset
		}
	}
	return nil
}

// NoResetError is OFFSET_OUT_OF_RANGE for the partitions of tps that have
// no committed offset in group while its member's auto offset reset is
// ResetNone (Kafka's NoOffsetForPartitionException).
func NoResetError(group string, tps []TopicPartition) error {
	tps = slices.Clone(tps)
	slices.SortFunc(tps, func(a, b TopicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	const shown = 10
	names := make([]string, 0, min(len(tps), shown))
	for _, tp := range tps[:min(len(tps), shown)] {
		names = append(names, fmt.Sprintf("%s:%d", tp.Topic, tp.Partition))
	}
	list := strings.Join(names, ", ")
	if len(tps) > shown {
		list += fmt.Sprintf(" and %d more", len(tps)-shown)
	}
	return errs.Errorf(errs.OffsetOutOfRange, "group %q has no committed offset for %s and auto offset reset is none: commit offsets for them (or reset the group's offsets) first", group, list)
}

// FetchAnswer is one partition's part of FetchAny.
type FetchAnswer struct {
	Request FetchRequest
	Records []ConsumedRecord
	// Next is where the partition's next fetch starts: past the records
	// answered, or Request.Offset when there were none.
	Next int64
	// Err is the partition's failure (OFFSET_OUT_OF_RANGE, say); nil for a
	// fetch cut short because another partition answered first.
	Err error
}

// FetchAny reads several partitions at once, each long-polling up to its
// MaxWait, and answers once the partitions have answered records of at
// least minBytes in all (their batches' bytes, as a leader's min_bytes
// counts them; 0 or 1: as soon as any partition has a record), once
// maxRecords records have come back (0: no cap), or once MaxWait has
// passed, with what there is then. A partition answers as soon as it has
// anything, and reads on from there while the total falls short, so bytes
// spread over several partitions, and over several leaders, count together.
// The requests' MinBytes is not used. At most maxRecords records come back
// in all, in request order; answers are in request order.
func (c *Client) FetchAny(ctx context.Context, reqs []FetchRequest, maxRecords int, minBytes int32) []FetchAnswer {
	var wait time.Duration
	for _, r := range reqs {
		wait = max(wait, r.MaxWait)
	}
	start := time.Now()
	fctx, cancel := context.WithTimeout(ctx, wait+DefaultRequestTimeout)
	defer cancel()
	var mu sync.Mutex
	bytes, records := 0, 0
	// took adds one answer to the totals and reports whether the call has
	// enough.
	took := func(res *FetchResult) bool {
		mu.Lock()
		defer mu.Unlock()
		bytes, records = bytes+res.Bytes, records+len(res.Records)
		return records > 0 && bytes >= int(minBytes) || maxRecords > 0 && records >= maxRecords
	}
	answers := make([]FetchAnswer, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = c.fetchUntil(fctx, req, start.Add(req.MaxWait), took, cancel)
		}()
	}
	wg.Wait()
	n := 0
	for i := range answers {
		a := &answers[i]
		cut := errors.Is(a.Err, context.Canceled) || errs.Of(a.Err) == errs.RequestTimedOut
		if a.Err != nil && cut && ctx.Err() == nil {
			a.Err = nil // cut short by another partition's answer
		}
		if maxRecords > 0 && n+len(a.Records) > maxRecords {
			a.Records = a.Records[:maxRecords-n]
			if len(a.Records) > 0 {
				a.Next = a.Records[len(a.Records)-1].Offset + 1
			} else {
				a.Next = a.Request.Offset
			}
		}
		n += len(a.Records)
	}
	return answers
}

// fetchUntil is one partition's part of FetchAny: it fetches from
// req.Offset, then on from each answer's next offset, until took says the
// call has enough (then it cancels the others), the partition has
// req.MaxRecords, a long poll ends empty, or the deadline passes. An error
// after some progress ends the reads and keeps what was read: the position
// moves past it, and the next call meets the error again.
func (c *Client) fetchUntil(ctx context.Context, req FetchRequest, deadline time.Time, took func(*FetchResult) bool, cancel func()) FetchAnswer {
	a := FetchAnswer{Request: req, Next: req.Offset}
	r := req
	r.MinBytes = 1
	for {
		res, err := c.Fetch(ctx, r)
		if err != nil {
			if a.Next == req.Offset {
				a.Err = err
			}
			return a
		}
		a.Records = append(a.Records, res.Records...)
		a.Next = res.NextOffset
		if took(res) {
			cancel()
			return a
		}
		left := time.Until(deadline)
		if left <= 0 || res.NextOffset == r.Offset {
			return a // the long poll waited its time, or the wait is over
		}
		if r.MaxRecords > 0 {
			if r.MaxRecords -= len(res.Records); r.MaxRecords <= 0 {
				return a
			}
		}
		r.Offset, r.MaxWait = res.NextOffset, left
	}
}

// Commit commits the given offsets (the next offset to read, as Kafka) of
// partitions the member owns, at its epoch. It answers the first
// partition's refusal, if any (STALE_MEMBER_EPOCH for a partition the member
// no longer owns, say); the others are committed.
func (g *GroupConsumer) Commit(ctx context.Context, offsets map[TopicPartition]int64) error {
	if len(offsets) == 0 {
		return nil
	}
	req := &groupv1.OffsetCommitRequest{GroupId: g.cfg.Group, MemberId: g.memberID, MemberEpoch: g.epoch}
	for _, tp := range sortTPs(slices.Collect(maps.Keys(offsets))) {
		req.Offsets = append(req.Offsets, &groupv1.PartitionOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: offsets[tp]})
	}
	results, err := g.groups.CommitOffsets(ctx, req)
	if err != nil {
		return err
	}
	var first error
	for _, r := range results {
		tp := TopicPartition{r.GetTopic(), r.GetPartition()}
		if err := codeErr(r.GetErrorCode(), r.GetErrorMessage()); err != nil {
			first = cmp.Or(first, err)
			continue
		}
		if ps := g.owned[tp]; ps != nil {
			ps.committed = offsets[tp]
		}
	}
	return first
}

// CommitSync commits the position of every owned partition that moved since
// its last commit.
func (g *GroupConsumer) CommitSync(ctx context.Context) error {
	return g.commitPositions(ctx, g.Assignment())
}

func (g *GroupConsumer) commitPositions(ctx context.Context, tps []TopicPartition) error {
	offsets := map[TopicPartition]int64{}
	for _, tp := range tps {
		if ps := g.owned[tp]; ps != nil && ps.pos >= 0 && ps.pos != ps.committed {
			offsets[tp] = ps.pos
		}
	}
	return g.Commit(ctx, offsets)
}

// Close gives up every partition (OnRevoked, then their positions are
// committed, unless ManualCommit) and leaves the group: with epoch -1, or -2 for a static member,
// whose partitions then wait for it for its session timeout.
func (g *GroupConsumer) Close(ctx context.Context) error { return g.close(ctx, true) }

// Leave is Close without the commit: for a caller that hands the records
// Poll returns on to someone else (a stream's client), who commits what it
// processed itself. A position Poll moved past is not committed here, so
// records that were returned but never processed are read again by the
// partition's next owner.
func (g *GroupConsumer) Leave(ctx context.Context) error { return g.close(ctx, false) }

// Drop stops the consumer and lets go of what it holds (its reads from
// the partitions' leaders, its coordinator connections) without leaving
// the group or committing: for a member that another consumer has taken
// over under the same member id, which goes on being the member.
func (g *GroupConsumer) Drop() {
	if g.closed {
		return
	}
	g.closed = true
	g.stopFollows()
	g.groups.Close()
}

func (g *GroupConsumer) close(ctx context.Context, commit bool) error {
	if g.closed {
		return nil
	}
	g.closed = true
	g.stopFollows()
	defer g.groups.Close()
	if g.epoch <= 0 {
		return nil
	}
	var first error
	if all := g.Assignment(); len(all) > 0 {
		if g.cfg.OnRevoked != nil {
			g.cfg.OnRevoked(ctx, all)
		}
		if commit && !g.cfg.ManualCommit {
			first = g.commitPositions(ctx, all)
		}
	}
	epoch := int32(-1)
	if g.cfg.InstanceID != "" {
		epoch = -2
	}
	_, err := g.groups.Heartbeat(ctx, &groupv1.ConsumerGroupHeartbeatRequest{
		GroupId: g.cfg.Group, MemberId: g.memberID, MemberEpoch: epoch, InstanceId: g.cfg.InstanceID})
	if errs.Of(err) == errs.UnknownMemberID {
		// The member is out of the group already, which is what leaving
		// asks for: its session ran out, or a retried leave's first try
		// was answered and the answer lost.
		err = nil
	}
	g.owned = map[TopicPartition]*partState{}
	g.epoch = 0
	return cmp.Or(first, err)
}
