package coordinator

import (
	"context"
	"maps"
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
	topics := c.topics()
	admin := member == "" && epoch < 0
	var valid []int
	err = p.update(groupID, admin, func(gs *groupState, now time.Time) (change, error) {
		ch := change{offsets: map[assign.TopicPartition]offsetlog.Offset{}}
		for i, cm := range commits {
			switch n, ok := topics[cm.Topic]; {
			case len(cm.Metadata) > offsetlog.MaxMetadata:
				out[i] = errs.Errorf(errs.OffsetMetadataTooLarge, "offset metadata of %d bytes: at most %d", len(cm.Metadata), offsetlog.MaxMetadata)
			case !ok || cm.Partition < 0 || cm.Partition >= n:
				out[i] = errs.Errorf(errs.UnknownTopicOrPartition, "no partition %s:%d", cm.Topic, cm.Partition)
			case cm.Offset < 0:
				out[i] = errs.Errorf(errs.InvalidRequest, "negative offset %d for %s:%d", cm.Offset, cm.Topic, cm.Partition)
			default:
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

// Committed is a committed offset; Offset is -1 when none is.
type Committed struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// FetchOffsets answers a group's committed offsets of the given partitions,
// or of every partition with one when tps is empty.
func (c *Coordinator) FetchOffsets(ctx context.Context, groupID string, tps []assign.TopicPartition) ([]Committed, error) {
	p, err := c.partitionFor(groupID)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.readyLocked(); err != nil {
		return nil, err
	}
	var offsets map[assign.TopicPartition]offsetlog.Offset
	if gs := p.groups[groupID]; gs != nil {
		offsets = gs.offsets
	}
	if len(tps) == 0 {
		tps = slices.SortedFunc(maps.Keys(offsets), compareTP)
	}
	out := make([]Committed, 0, len(tps))
	for _, tp := range tps {
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
