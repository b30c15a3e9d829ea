package coordinator

import (
	"context"
	"maps"
	"math"
	"slices"
	"time"

	"skein/libs/errs"
	"skein/services/groupcoord/internal/assign"
	"skein/services/groupcoord/internal/group"
	"skein/services/groupcoord/internal/offsetlog"
)

// Heartbeat handles a ConsumerGroupHeartbeat of a group: a join (epoch 0;
// a member id is generated when the request has none), a heartbeat or a
// leave. It answers once the group's new state is written.
func (c *Coordinator) Heartbeat(ctx context.Context, groupID string, req group.HeartbeatRequest) (group.HeartbeatResponse, error) {
	p, err := c.partitionFor(groupID)
	if err != nil {
		return group.HeartbeatResponse{}, err
	}
	if req.MemberEpoch == group.JoinEpoch && req.MemberID == "" {
		req.MemberID = group.MemberID(c.cfg.NewMemberID())
	}
	// The member is alive whether or not the log can take its heartbeat's
	// changes now: a write outage must not expire the members that kept
	// heartbeating through it.
	p.touch(groupID, req)
	var resp group.HeartbeatResponse
	err = p.update(groupID, req.MemberEpoch == group.JoinEpoch, func(gs *groupState, now time.Time) (change, error) {
		r, eff, err := gs.g.Heartbeat(req, now)
		if err != nil {
			return change{}, err
		}
		resp = r
		for _, rm := range eff.Removed {
			c.logger.Info("member removed", "group", groupID, "member", rm.Member, "instance_id", rm.InstanceID, "reason", rm.Reason)
		}
		return change{snapshot: eff.Snapshot}, nil
	})
	if err == errNoGroup {
		err = errs.Errorf(errs.UnknownMemberID, "member %s is not in group %q: the group does not exist", req.MemberID, groupID)
	}
	return resp, err
}

// Commit is one partition's offset to commit.
type Commit struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// CommitOffsets commits offsets for a member at its epoch (or, with no
// member id and a negative epoch, for an admin tool while the group has no
// members) and answers one error per commit, nil for the committed ones.
func (c *Coordinator) CommitOffsets(ctx context.Context, groupID string, member group.MemberID, epoch group.Epoch, commits []Commit) []error {
	out := make([]error, len(commits))
	fill := func(err error) []error {
		for i := range out {
			if out[i] == nil {
				out[i] = err
			}
		}
		return out
	}
	p, err := c.partitionFor(groupID)
	if err != nil {
		return fill(err)
	}
	admin := member == "" && epoch < 0
	var valid []int
	err = p.update(groupID, admin, func(gs *groupState, now time.Time) (change, error) {
		ch := change{offsets: map[assign.TopicPartition]offsetlog.Offset{}}
		for i, cm := range commits {
			if out[i] = checkCommit(gs.topics, cm); out[i] == nil {
				out[i] = gs.g.CanCommit(member, epoch, cm.Topic, cm.Partition)
			}
			if out[i] == nil {
				valid = append(valid, i)
				ch.offsets[assign.TopicPartition{Topic: cm.Topic, Partition: cm.Partition}] = offsetlog.Offset{
					Offset: cm.Offset, LeaderEpoch: cm.LeaderEpoch, Metadata: cm.Metadata, CommitTime: now}
			}
		}
		return ch, nil
	})
	if err == errNoGroup {
		err = errs.Errorf(errs.UnknownMemberID, "member %s is not in group %q: the group does not exist", member, groupID)
	}
	if err != nil {
		for _, i := range valid {
			out[i] = err
		}
		return fill(err)
	}
	return out
}

// checkCommit validates one partition's offset against the topics.
func checkCommit(topics *topicSet, cm Commit) error {
	switch {
	case len(cm.Metadata) > offsetlog.MaxMetadata:
		return errs.Errorf(errs.OffsetMetadataTooLarge, "offset metadata of %d bytes: at most %d", len(cm.Metadata), offsetlog.MaxMetadata)
	case !topics.has(assign.TopicPartition{Topic: cm.Topic, Partition: cm.Partition}):
		return errs.Errorf(errs.UnknownTopicOrPartition, "no partition %s:%d", cm.Topic, cm.Partition)
	case cm.Offset < 0:
		return errs.Errorf(errs.InvalidRequest, "negative offset %d for %s:%d", cm.Offset, cm.Topic, cm.Partition)
	}
	return nil
}

// TxnCommit is a TxnOffsetCommit: offsets a producer's transaction commits
// to a group.
type TxnCommit struct {
	TransactionalID string
	GroupID         string
	ProducerID      int64
	ProducerEpoch   int32
	Commits         []Commit
	// Member, when set, is the member that consumed the offsets and its
	// epoch (Kafka's TxnOffsetCommit member fields): each commit must then
	// pass group.Group.CanCommit for it, as its plain commit would.
	Member *TxnMember
}

// TxnMember names the member a transaction's offsets come from.
type TxnMember struct {
	ID    group.MemberID
	Epoch group.Epoch
}

// TxnCommitOffsets records a transaction's offsets as pending for (group,
// producer id): written to the log, not visible to FetchOffsets until
// CompleteTxnOffsets commits them (see group.TxnOffsets.Commit for the
// epoch rules). It answers an error per commit (the partition's own
// refusal: its topic or partition does not exist, a negative offset,
// metadata too large; the valid ones are recorded) and an error for the
// request as a whole (an empty group id, a group another coordinator owns,
// an empty transactional id or offset list, a producer id or epoch out of
// range or fenced, a failed write), which applies to every commit the
// first does not refuse.
//
// Without a member, as Kafka's TxnOffsetCommit without member fields, it
// is accepted whether or not the group has members, and for a group that
// does not exist yet (the group then exists, Empty, holding only the
// pending offsets). With one, each offset is refused unless that member,
// at that epoch, owns its partition (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH),
// so a consumer whose partitions moved to another member while it worked
// cannot commit over their new owner's offsets through its transaction.
func (c *Coordinator) TxnCommitOffsets(ctx context.Context, req TxnCommit) ([]error, error) {
	out := make([]error, len(req.Commits))
	switch {
	case len(req.Commits) == 0:
		return out, errs.Errorf(errs.InvalidRequest, "no offsets to commit")
	case req.TransactionalID == "":
		return out, errs.Errorf(errs.InvalidRequest, "empty transactional id")
	case req.ProducerID < 0 || req.ProducerEpoch < 0 || req.ProducerEpoch > math.MaxInt16:
		return out, errs.Errorf(errs.InvalidRequest, "producer id %d, epoch %d", req.ProducerID, req.ProducerEpoch)
	case req.ProducerEpoch > group.MaxTxnEpoch:
		return out, errs.Errorf(errs.InvalidProducerEpoch, "producer epoch %d is never handed to a producer", req.ProducerEpoch)
	}
	p, err := c.partitionFor(req.GroupID)
	if err != nil {
		return out, err
	}
	if c.cfg.Transactions != nil {
		known, err := p.knowsProducer(req.GroupID, req.ProducerID)
		if err == nil && !known {
			// A completion that comes meanwhile is remembered by the group,
			// or by the partition while the check lasts, and Commit below
			// sees it.
			p.beginVerify()
			defer p.endVerify()
			err = c.cfg.Transactions.VerifyOpen(ctx, req.TransactionalID, req.ProducerID, int16(req.ProducerEpoch), req.GroupID)
		}
		if err != nil {
			return out, err
		}
	}
	offsets := map[assign.TopicPartition]offsetlog.Offset{}
	err = p.update(req.GroupID, true, func(gs *groupState, now time.Time) (change, error) {
		if e, ok := p.lostEndLocked(req.GroupID, req.ProducerID); ok && int16(req.ProducerEpoch) < e {
			return change{}, errs.Errorf(errs.ProducerFenced, "producer %d at epoch %d: its transaction ended (completed at epoch %d) while this commit was checked", req.ProducerID, req.ProducerEpoch, e)
		}
		for i, cm := range req.Commits {
			if out[i] = checkCommit(gs.topics, cm); out[i] == nil && req.Member != nil {
				out[i] = gs.g.CanCommit(req.Member.ID, req.Member.Epoch, cm.Topic, cm.Partition)
			}
			if out[i] == nil {
				offsets[assign.TopicPartition{Topic: cm.Topic, Partition: cm.Partition}] = offsetlog.Offset{
					Offset: cm.Offset, LeaderEpoch: cm.LeaderEpoch, Metadata: cm.Metadata, CommitTime: now}
			}
		}
		if len(offsets) == 0 {
			return change{}, nil
		}
		tch, err := gs.txns.Commit(req.ProducerID, int16(req.ProducerEpoch), offsets)
		if err != nil {
			return change{}, err
		}
		return change{txn: &tch}, nil
	})
	return out, err
}

// CompleteTxnOffsets ends a transaction's offsets in a group, once the
// transaction coordinator has written the transaction's markers: at the
// markers' producer id and epoch, committed or not. With committed, the
// producer's pending offsets older than epoch become the group's committed
// offsets; either way they are dropped (see group.TxnOffsets.Complete for
// the epoch rule). It answers nil when there is nothing to complete (a
// retry, a group with nothing pending, a group that does not exist), and
// an error only when the request should be retried (NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, a failed write) or is malformed (an empty
// group id, a producer id or epoch out of range).
func (c *Coordinator) CompleteTxnOffsets(ctx context.Context, groupID string, pid int64, epoch int32, committed bool) error {
	if pid < 0 || epoch < 0 || epoch > math.MaxInt16 {
		return errs.Errorf(errs.InvalidRequest, "producer id %d, epoch %d", pid, epoch)
	}
	p, err := c.partitionFor(groupID)
	if err != nil {
		return err
	}
	err = p.update(groupID, false, func(gs *groupState, _ time.Time) (change, error) {
		tch, err := gs.txns.Complete(pid, int16(epoch), committed)
		if err != nil {
			return change{}, err
		}
		if stale := gs.supersededCommits(pid, tch.Commit); len(stale) > 0 {
			// A plain commit came after the transaction's offsets (the
			// partition's new owner, say): it is the newer, and stays.
			tch.Commit = maps.Clone(tch.Commit)
			for _, tp := range stale {
				delete(tch.Commit, tp)
			}
			c.logger.Info("a transaction's offsets were committed over by a later commit, which stays", "group", groupID,
				"producer_id", pid, "partitions", len(stale))
		}
		if !tch.Writes() {
			if top, ok := gs.txns.Epoch(pid); ok {
				c.logger.Info("a completion older than the producer's pending offsets leaves them", "group", groupID,
					"producer_id", pid, "epoch", epoch, "pending_epoch", top)
			}
			gs.txns.Apply(tch) // only remembers the completion's epoch
			return change{}, nil
		}
		return change{offsets: tch.Commit, txn: &tch}, nil
	})
	if err == errNoGroup {
		// Nothing pending: nothing to do but remember the completion for
		// a TxnOffsetCommit being checked (which would create the group).
		p.mu.Lock()
		p.noteLostEndLocked(groupID, pid, int16(epoch))
		p.mu.Unlock()
		return nil
	}
	return err
}

// Committed is a committed offset; Offset is -1 when none is. Err, when
// not nil, is the partition's refusal (UNSTABLE_OFFSET_COMMIT).
type Committed struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	Err         error
}

// FetchOffsets answers a group's committed offsets of the given partitions,
// or of every partition with one when tps is empty. Offsets pending in a
// transaction are never answered; with requireStable a partition that has
// some answers UNSTABLE_OFFSET_COMMIT (retriable) instead of its committed
// offset.
func (c *Coordinator) FetchOffsets(ctx context.Context, groupID string, tps []assign.TopicPartition, requireStable bool) ([]Committed, error) {
	p, err := c.partitionFor(groupID)
	if err != nil {
		return nil, err
	}
	current := c.currentTopics()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.readyLocked(); err != nil {
		return nil, err
	}
	var offsets map[assign.TopicPartition]offsetlog.Offset
	var txns *group.TxnOffsets
	// gone: what the group holds of a topic deleted since it was last
	// checked, which its next event tombstones: not answered meanwhile.
	gone := func(assign.TopicPartition) bool { return false }
	if gs := p.groups[groupID]; gs != nil {
		offsets, txns = gs.offsets, &gs.txns
		if gs.topics != current {
			gone = func(tp assign.TopicPartition) bool { return current.gone(gs.topics, tp) }
		}
	}
	if len(tps) == 0 {
		for _, tp := range slices.SortedFunc(maps.Keys(offsets), compareTP) {
			if !gone(tp) {
				tps = append(tps, tp)
			}
		}
	}
	out := make([]Committed, 0, len(tps))
	for _, tp := range tps {
		if gone(tp) {
			out = append(out, Committed{Topic: tp.Topic, Partition: tp.Partition, Offset: -1, LeaderEpoch: -1})
			continue
		}
		if requireStable && txns != nil && txns.Has(tp) {
			out = append(out, Committed{Topic: tp.Topic, Partition: tp.Partition, Offset: -1, LeaderEpoch: -1,
				Err: errs.Errorf(errs.UnstableOffsetCommit, "group %q has an offset of %s pending in a transaction", groupID, tp)})
			continue
		}
		o, ok := offsets[tp]
		if !ok {
			out = append(out, Committed{Topic: tp.Topic, Partition: tp.Partition, Offset: -1, LeaderEpoch: -1})
			continue
		}
		out = append(out, Committed{Topic: tp.Topic, Partition: tp.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata})
	}
	return out, nil
}

// Listing is one group in ListGroups.
type Listing struct {
	GroupID string
	State   group.State
	Members int
}

// ListGroups lists the groups of every partition loaded here, by group id.
func (c *Coordinator) ListGroups(ctx context.Context) []Listing {
	var out []Listing
	for _, p := range c.serving() {
		p.mu.Lock()
		for id, gs := range p.groups {
			d := gs.g.Describe()
			out = append(out, Listing{GroupID: id, State: d.State, Members: len(d.Members)})
		}
		p.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Listing) int {
		if a.GroupID < b.GroupID {
			return -1
		}
		if a.GroupID > b.GroupID {
			return 1
		}
		return 0
	})
	return out
}

// DescribeGroup describes a group; GROUP_ID_NOT_FOUND when it has neither
// state nor offsets here.
func (c *Coordinator) DescribeGroup(ctx context.Context, groupID string) (group.Description, error) {
	p, err := c.partitionFor(groupID)
	if err != nil {
		return group.Description{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.readyLocked(); err != nil {
		return group.Description{}, err
	}
	gs := p.groups[groupID]
	if gs == nil {
		return group.Description{}, errs.Errorf(errs.GroupIDNotFound, "group %q does not exist", groupID)
	}
	return gs.g.Describe(), nil
}

// DeleteGroup deletes an empty group and its committed offsets
// (NON_EMPTY_GROUP while it has members).
func (c *Coordinator) DeleteGroup(ctx context.Context, groupID string) error {
	p, err := c.partitionFor(groupID)
	if err != nil {
		return err
	}
	err = p.update(groupID, false, func(gs *groupState, _ time.Time) (change, error) {
		eff, err := gs.g.Delete()
		if err != nil {
			return change{}, err
		}
		return change{deleted: eff.Deleted}, nil
	})
	if err == errNoGroup {
		err = errs.Errorf(errs.GroupIDNotFound, "group %q does not exist", groupID)
	}
	return err
}

// DeleteOffsets deletes a group's committed offsets of partitions (Kafka's
// OffsetDelete, group.Group.DeleteOffsets): those of a topic no member of
// the group subscribes to go, with the transactions' pending offsets and
// the failed deliveries of those partitions, as tombstones in one write;
// the others stay. It answers an error per partition (nil: deleted, or
// nothing was committed; GROUP_SUBSCRIBED_TO_TOPIC,
// UNKNOWN_TOPIC_OR_PARTITION: kept) and an error for the request as a
// whole (an empty group id, a group that does not exist, NOT_COORDINATOR,
// a failed write: nothing deleted). A deleted offset does not come back
// after a failover: the loader reads the tombstones too.
func (c *Coordinator) DeleteOffsets(ctx context.Context, groupID string, tps []assign.TopicPartition) ([]error, error) {
	p, err := c.partitionFor(groupID)
	if err != nil {
		return nil, err
	}
	var out []error
	var dropped []assign.TopicPartition
	err = p.update(groupID, false, func(gs *groupState, _ time.Time) (change, error) {
		res, eff, err := gs.g.DeleteOffsets(group.OffsetDelete{Partitions: tps, Exists: gs.topics.has, Holds: gs.holds})
		if err != nil {
			return change{}, err
		}
		out, dropped = res, eff.Drop
		return change{snapshot: eff.Snapshot, drop: eff.Drop}, nil
	})
	if err == errNoGroup {
		err = errs.Errorf(errs.GroupIDNotFound, "group %q does not exist", groupID)
	}
	if err != nil {
		return nil, err
	}
	if len(dropped) > 0 {
		c.metrics.deletedOffsets.Add(float64(len(dropped)))
		c.logger.Info("offsets deleted", "group", groupID, "partitions", len(dropped))
	}
	return out, nil
}
