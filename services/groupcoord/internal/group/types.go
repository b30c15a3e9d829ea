package group

import (
	"time"

	"skein/services/groupcoord/internal/assign"
)

// Epoch is a group, assignment or member epoch.
type Epoch int32

// Member epochs a heartbeat request carries to say what it is.
const (
	JoinEpoch        Epoch = 0  // join, or rejoin after being fenced
	LeaveEpoch       Epoch = -1 // leave the group
	StaticLeaveEpoch Epoch = -2 // a static member leaves for a while (a restart)
)

// MemberID names a member; the shell assigns one (a UUID) on a join.
type MemberID = assign.MemberID

// Config holds the coordinator's knobs; a zero field takes DefaultConfig's.
type Config struct {
	// Session timeouts a member may ask for, and the one it gets when it asks
	// for none.
	MinSessionTimeout, MaxSessionTimeout, DefaultSessionTimeout time.Duration
	// DefaultRebalanceTimeout is a member's time to revoke when it asks for none.
	DefaultRebalanceTimeout time.Duration
	// HeartbeatInterval is answered to every member whose session is at
	// least three of it; a shorter session gets a third of itself.
	HeartbeatInterval time.Duration
	// Assignors members may name; the first is the group's when none is named.
	Assignors []assign.Assignor
	// MaxSize is the most members a group holds; 0 for no limit.
	MaxSize int
}

// DefaultConfig answers Kafka-like defaults; the uniform assignor first.
func DefaultConfig() Config {
	return Config{
		MinSessionTimeout:       6 * time.Second,
		MaxSessionTimeout:       5 * time.Minute,
		DefaultSessionTimeout:   45 * time.Second,
		DefaultRebalanceTimeout: 5 * time.Minute,
		HeartbeatInterval:       5 * time.Second,
		Assignors:               []assign.Assignor{assign.Uniform{}, assign.Range{}},
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	set := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&c.MinSessionTimeout, d.MinSessionTimeout)
	set(&c.MaxSessionTimeout, d.MaxSessionTimeout)
	set(&c.DefaultSessionTimeout, d.DefaultSessionTimeout)
	set(&c.DefaultRebalanceTimeout, d.DefaultRebalanceTimeout)
	set(&c.HeartbeatInterval, d.HeartbeatInterval)
	if len(c.Assignors) == 0 {
		c.Assignors = d.Assignors
	}
	return c
}

// HeartbeatRequest is a ConsumerGroupHeartbeat, in domain types.
type HeartbeatRequest struct {
	// MemberID is required, also on a join: the shell assigns a fresh one
	// (a UUID) when the client sent none.
	MemberID    MemberID
	MemberEpoch Epoch
	// InstanceID makes the member static. On a heartbeat "" means unchanged.
	InstanceID string
	// Rack: "" means unchanged.
	Rack string
	// Timeouts: 0 means unchanged (the default on a join).
	RebalanceTimeout time.Duration
	SessionTimeout   time.Duration
	// Topics is the subscription, required on a join; empty means unchanged.
	Topics []string
	// Assignor is the server assignor the member prefers; "" means unchanged
	// (no preference on a join).
	Assignor string
	// Owned is what the member holds now; it confirms revocations. Nil means
	// not reported (confirms nothing); the shell passes the request's
	// owned_partitions, never nil, since proto3 cannot tell them apart.
	Owned assign.Partitions
}

// HeartbeatResponse answers a heartbeat.
type HeartbeatResponse struct {
	MemberID MemberID
	// MemberEpoch is the member's epoch now; -1 or -2 after a leave.
	MemberEpoch       Epoch
	HeartbeatInterval time.Duration
	// Assignment is what the member may consume now: its assigned
	// partitions, without those pending revocation. Nil after a leave.
	Assignment assign.Partitions
}

// Effects is what the shell must do after an event.
type Effects struct {
	// Snapshot, when not nil, is the new durable state: write it before
	// answering (see the package comment).
	Snapshot *Snapshot
	// Removed lists the members this event removed, in member id order.
	Removed []Removal
	// Deleted: the group is deleted; write a tombstone for its metadata and
	// its offsets, and drop the Group.
	Deleted bool
	// Drop: partitions whose committed offsets, pending transactional
	// offsets and failed deliveries to delete (DeleteOffsets): a tombstone
	// each, in the event's one write. Sorted.
	Drop []assign.TopicPartition
}

// Removal says which member left the group and why.
type Removal struct {
	Member     MemberID
	InstanceID string
	Reason     string
}

// State is the group state DescribeGroups and ListGroups show.
type State string

// The states. Kafka's Assigning never shows: targets are computed at once.
const (
	Empty       State = "Empty"       // no members
	Reconciling State = "Reconciling" // some member has not reached its target at the assignment epoch
	Stable      State = "Stable"      // every member holds exactly its target at the assignment epoch
	Dead        State = "Dead"        // deleted
)

// Description is DescribeGroups' view of a group.
type Description struct {
	GroupID         string
	State           State
	Epoch           Epoch
	AssignmentEpoch Epoch
	Assignor        string
	Members         []MemberDescription // by member id
}

// MemberDescription is one member in a Description.
type MemberDescription struct {
	ID         MemberID
	InstanceID string
	Rack       string
	// Epoch is -2 while a static member is away.
	Epoch    Epoch
	Topics   []string
	Assigned assign.Partitions
	Revoking assign.Partitions
	Target   assign.Partitions
}
