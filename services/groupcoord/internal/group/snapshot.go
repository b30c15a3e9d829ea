package group

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"skein/libs/errs"
	"skein/services/groupcoord/internal/assign"
)

// Snapshot is a group's durable state: what the shell persists (one record
// per group, keyed by group id, in a compacted topic) and Restore rebuilds
// from. It is plain data; the shell chooses the encoding. It holds the group
// epoch, the assignor and target assignment, and every member's
// subscription, instance id, epochs and current assignment (a new
// coordinator must know who holds what, or it could give a partition to a
// second member).
type Snapshot struct {
	GroupID         string
	Epoch           Epoch
	AssignmentEpoch Epoch
	Assignor        string
	// Topics: the partition counts of the subscribed topics the target was
	// computed from, so that a new coordinator's SetTopics only rebalances
	// when they really changed.
	Topics  map[string]int32
	Members []MemberSnapshot // by member id
}

// MemberSnapshot is one member's durable state.
type MemberSnapshot struct {
	ID               MemberID
	InstanceID       string
	Rack             string
	Topics           []string
	Assignor         string
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	Epoch            Epoch
	PreviousEpoch    Epoch
	StaticLeft       bool // a static member away after a leave with -2
	Assigned         assign.Partitions
	Revoking         assign.Partitions
	Target           assign.Partitions
}

// Snapshot answers the group's durable state (a deep copy).
func (g *Group) Snapshot() Snapshot {
	s := Snapshot{GroupID: g.id, Epoch: g.epoch, AssignmentEpoch: g.assignmentEpoch, Assignor: g.assignor,
		Topics: g.subscribedTopics(), Members: []MemberSnapshot{}}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		s.Members = append(s.Members, MemberSnapshot{ID: m.id, InstanceID: m.instanceID, Rack: m.rack,
			Topics: slices.Clone(m.topics), Assignor: m.assignor, SessionTimeout: m.session, RebalanceTimeout: m.rebalance,
			Epoch: m.epoch, PreviousEpoch: m.prevEpoch, StaticLeft: m.staticLeft,
			Assigned: orEmpty(m.assigned.Clone()), Revoking: orEmpty(m.revoking.Clone()), Target: orEmpty(m.target.Clone())})
	}
	return s
}

// Restore rebuilds a group from a snapshot. Every member's session, and the
// rebalance timeout of every member with partitions pending revocation,
// starts at now. It refuses (UNKNOWN_SERVER_ERROR) a snapshot that breaks
// the group's invariants. Call SetTopics next with the current metadata.
func Restore(cfg Config, s Snapshot, now time.Time) (*Group, error) {
	g := New(cfg, s.GroupID)
	g.epoch, g.assignmentEpoch, g.assignor = s.Epoch, s.AssignmentEpoch, s.Assignor
	g.topics = maps.Clone(s.Topics)
	if g.topics == nil {
		g.topics = map[string]int32{}
	}
	for _, ms := range s.Members {
		if _, dup := g.members[ms.ID]; dup {
			return nil, errs.Errorf(errs.UnknownServerError, "group %q snapshot: member %s twice", s.GroupID, ms.ID)
		}
		m := &member{id: ms.ID, instanceID: ms.InstanceID, rack: ms.Rack, topics: slices.Clone(ms.Topics), assignor: ms.Assignor,
			session: ms.SessionTimeout, rebalance: ms.RebalanceTimeout, epoch: ms.Epoch, prevEpoch: ms.PreviousEpoch,
			staticLeft: ms.StaticLeft, assigned: orEmpty(ms.Assigned.Clone()), revoking: orEmpty(ms.Revoking.Clone()),
			target: orEmpty(ms.Target.Clone()), lastHeartbeat: now}
		if m.revoking.Count() > 0 {
			m.revokeDeadline = now.Add(m.rebalance)
		}
		g.members[m.id] = m
	}
	if g.assignorNamed(g.assignor) == nil {
		// Configured away since the snapshot was written: the target stays
		// valid, the next rebalance uses an assignor this coordinator has.
		g.assignor = g.chooseAssignor()
	}
	if err := g.check(); err != nil {
		return nil, errs.Errorf(errs.UnknownServerError, "group %q snapshot: %v", s.GroupID, err)
	}
	return g, nil
}

// check verifies the group's invariants; tests call it after every step.
func (g *Group) check() error {
	if g.assignmentEpoch > g.epoch || g.assignmentEpoch < 0 {
		return fmt.Errorf("assignment epoch %d, group epoch %d", g.assignmentEpoch, g.epoch)
	}
	if g.assignorNamed(g.assignor) == nil {
		return fmt.Errorf("unknown assignor %q", g.assignor)
	}
	held := map[assign.TopicPartition]MemberID{}
	targeted := map[assign.TopicPartition]MemberID{}
	instances := map[string]MemberID{}
	topics := g.subscribedTopics()
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		if m.id != id || id == "" {
			return fmt.Errorf("member %q filed as %q", m.id, id)
		}
		if m.epoch < 0 || m.epoch > g.assignmentEpoch || m.prevEpoch < 0 || m.prevEpoch > m.epoch {
			return fmt.Errorf("member %s at epoch %d (previous %d), assignment epoch %d", id, m.epoch, m.prevEpoch, g.assignmentEpoch)
		}
		if len(m.topics) == 0 || !slices.IsSorted(m.topics) {
			return fmt.Errorf("member %s subscribes to %v", id, m.topics)
		}
		if m.session <= 0 || m.rebalance <= 0 {
			return fmt.Errorf("member %s has timeouts %v/%v", id, m.session, m.rebalance)
		}
		if m.instanceID != "" {
			if other, dup := instances[m.instanceID]; dup {
				return fmt.Errorf("instance id %q held by %s and %s", m.instanceID, other, id)
			}
			instances[m.instanceID] = id
		} else if m.staticLeft {
			return fmt.Errorf("dynamic member %s marked as a static member away", id)
		}
		if m.assigned.Intersects(m.revoking) {
			return fmt.Errorf("member %s has %s both assigned and pending revocation", id, m.assigned.Intersect(m.revoking))
		}
		if (m.revoking.Count() > 0) != !m.revokeDeadline.IsZero() {
			return fmt.Errorf("member %s revoking %s with deadline %v", id, m.revoking, m.revokeDeadline)
		}
		for _, tp := range m.assigned.Union(m.revoking).List() {
			if other, dup := held[tp]; dup {
				return fmt.Errorf("%s held by both %s and %s", tp, other, id)
			}
			held[tp] = id
		}
		for _, tp := range m.target.List() {
			if other, dup := targeted[tp]; dup {
				return fmt.Errorf("%s in the targets of both %s and %s", tp, other, id)
			}
			targeted[tp] = id
			if !slices.Contains(m.topics, tp.Topic) || tp.Partition < 0 || tp.Partition >= topics[tp.Topic] {
				return fmt.Errorf("%s in the target of %s, which does not subscribe to it or it does not exist", tp, id)
			}
		}
	}
	return nil
}
