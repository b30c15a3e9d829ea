package group

import (
	"maps"
	"slices"
	"time"

	"skein/libs/errs"
	"skein/services/groupcoord/internal/assign"
)

// member is one member of the group. Durable fields are in the Snapshot;
// lastHeartbeat and revokeDeadline are not (they restart on Restore).
type member struct {
	id         MemberID
	instanceID string
	rack       string
	topics     []string // sorted, distinct, never empty
	assignor   string   // preferred server assignor, "" for none
	session    time.Duration
	rebalance  time.Duration

	// epoch <= the group's assignment epoch; prevEpoch < epoch once moved.
	epoch, prevEpoch Epoch
	// staticLeft: a static member left with -2; it keeps its partitions
	// until it comes back or its session expires.
	staticLeft bool
	// assigned ∩ revoking = ∅, and no partition of either is another
	// member's assigned or revoking.
	assigned assign.Partitions
	revoking assign.Partitions
	target   assign.Partitions

	lastHeartbeat  time.Time // or the time it left (static), joined, or was restored
	revokeDeadline time.Time // zero unless revoking is not empty
}

// Group is one consumer group's state machine. See the package comment.
type Group struct {
	cfg  Config
	id   string
	dead bool
	// epoch >= assignmentEpoch >= every member's epoch; they are equal here
	// since a bump computes the target at once.
	epoch, assignmentEpoch Epoch
	assignor               string           // the assignor of the current target
	topics                 map[string]int32 // partition counts as last set
	members                map[MemberID]*member

	// Per event: whether durable state changed, and who was removed.
	dirty   bool
	removed []Removal
}

// New answers an empty group at epoch 0.
func New(cfg Config, groupID string) *Group {
	cfg = cfg.withDefaults()
	return &Group{cfg: cfg, id: groupID, assignor: cfg.Assignors[0].Name(),
		topics: map[string]int32{}, members: map[MemberID]*member{}}
}

// ID is the group id.
func (g *Group) ID() string { return g.id }

// Epoch is the group epoch.
func (g *Group) Epoch() Epoch { return g.epoch }

// Heartbeat handles a ConsumerGroupHeartbeat: a join (epoch 0), a leave
// (-1, or -2 for a static member's temporary leave) or a heartbeat.
func (g *Group) Heartbeat(req HeartbeatRequest, now time.Time) (HeartbeatResponse, Effects, error) {
	if g.dead {
		return HeartbeatResponse{}, Effects{}, errs.Errorf(errs.GroupIDNotFound, "group %q was deleted", g.id)
	}
	if req.MemberID == "" {
		return HeartbeatResponse{}, Effects{}, errs.Errorf(errs.InvalidRequest, "no member id")
	}
	if err := checkIDs(req); err != nil {
		return HeartbeatResponse{}, Effects{}, err
	}
	g.begin()
	var resp HeartbeatResponse
	var err error
	switch {
	case req.MemberEpoch == JoinEpoch:
		resp, err = g.join(req, now)
	case req.MemberEpoch == LeaveEpoch || req.MemberEpoch == StaticLeaveEpoch:
		resp, err = g.leave(req, now)
	case req.MemberEpoch > 0:
		resp, err = g.heartbeat(req, now)
	default:
		err = errs.Errorf(errs.InvalidRequest, "member epoch %d", req.MemberEpoch)
	}
	if err != nil {
		return HeartbeatResponse{}, Effects{}, err
	}
	return resp, g.effects(), nil
}

// Touch notes a heartbeat's proof that its member is alive, apart from
// the heartbeat itself: the member's session runs from now if req is a
// heartbeat (not a join or a leave) of a member of the group at its
// current or previous epoch. It changes nothing else and answers whether
// it refreshed a session. The coordinator calls it before it waits to
// write, so that a member that keeps heartbeating is not expired while
// the group's log cannot be written.
func (g *Group) Touch(req HeartbeatRequest, now time.Time) bool {
	if g.dead || req.MemberEpoch <= JoinEpoch {
		return false
	}
	m, err := g.lookup(req)
	if err != nil || m.staticLeft {
		return false
	}
	// The epochs Heartbeat takes: the member's, or the one before it from
	// a member holding no more than its assignment (the answer that moved
	// it on was lost).
	lost := req.MemberEpoch == m.prevEpoch && req.Owned != nil && req.Owned.SubsetOf(m.assigned)
	if req.MemberEpoch != m.epoch && !lost {
		return false
	}
	if !now.Before(m.lastHeartbeat.Add(m.session)) {
		return false // its session is over; only the tick decides now
	}
	if now.After(m.lastHeartbeat) {
		m.lastHeartbeat = now
	}
	return true
}

// Bounds of the ids a member names. Every one is kept in the group's
// snapshot record, which an unbounded id would push past the size the
// offsets topic takes, wedging the group. An instance id is Kafka's
// group.instance.id: 1-249 characters of [a-zA-Z0-9._-].
const (
	MaxMemberIDLen   = 255
	MaxInstanceIDLen = 249
	MaxRackLen       = 255
)

// checkIDs refuses a member id or rack over its bound, and an instance id
// that is not Kafka's (an empty one is a dynamic member).
func checkIDs(req HeartbeatRequest) error {
	switch {
	case len(req.MemberID) > MaxMemberIDLen:
		return errs.Errorf(errs.InvalidRequest, "member id is %d bytes long, more than %d", len(req.MemberID), MaxMemberIDLen)
	case len(req.Rack) > MaxRackLen:
		return errs.Errorf(errs.InvalidRequest, "rack is %d bytes long, more than %d", len(req.Rack), MaxRackLen)
	case len(req.InstanceID) > MaxInstanceIDLen:
		return errs.Errorf(errs.InvalidRequest, "instance id is %d bytes long: want 1-%d characters of [a-zA-Z0-9._-]", len(req.InstanceID), MaxInstanceIDLen)
	}
	for _, r := range req.InstanceID {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return errs.Errorf(errs.InvalidRequest, "instance id %q: want 1-%d characters of [a-zA-Z0-9._-]", req.InstanceID, MaxInstanceIDLen)
		}
	}
	return nil
}

// settings are the member fields a request may set, validated.
type settings struct {
	topics             []string
	rack, assignor     string
	session, rebalance time.Duration
}

// validate checks a join's or heartbeat's fields and answers the member's
// settings after it; old is nil on a join of a new member.
func (g *Group) validate(req HeartbeatRequest, old *member) (settings, error) {
	s := settings{session: g.cfg.DefaultSessionTimeout, rebalance: g.cfg.DefaultRebalanceTimeout}
	if old != nil {
		s = settings{topics: old.topics, rack: old.rack, assignor: old.assignor, session: old.session, rebalance: old.rebalance}
	}
	if len(req.Topics) > 0 {
		if slices.Contains(req.Topics, "") {
			return s, errs.Errorf(errs.InvalidRequest, "an empty topic name in the subscription")
		}
		t := slices.Clone(req.Topics)
		slices.Sort(t)
		s.topics = slices.Compact(t)
	}
	if len(s.topics) == 0 {
		return s, errs.Errorf(errs.InvalidRequest, "a joining member must subscribe to at least one topic")
	}
	if req.Rack != "" {
		s.rack = req.Rack
	}
	if req.Assignor != "" {
		if g.assignorNamed(req.Assignor) == nil {
			return s, errs.Errorf(errs.UnsupportedAssignor, "unsupported server assignor %q", req.Assignor)
		}
		s.assignor = req.Assignor
	}
	if req.SessionTimeout != 0 {
		if req.SessionTimeout < g.cfg.MinSessionTimeout || req.SessionTimeout > g.cfg.MaxSessionTimeout {
			return s, errs.Errorf(errs.InvalidSessionTimeout, "session timeout %v not in [%v, %v]",
				req.SessionTimeout, g.cfg.MinSessionTimeout, g.cfg.MaxSessionTimeout)
		}
		s.session = req.SessionTimeout
	}
	if req.RebalanceTimeout < 0 {
		return s, errs.Errorf(errs.InvalidRequest, "negative rebalance timeout %v", req.RebalanceTimeout)
	}
	if req.RebalanceTimeout > 0 {
		s.rebalance = req.RebalanceTimeout
	}
	return s, nil
}

// apply sets a member's settings and reports whether the change needs a new
// target (subscription, rack or the group's assignor).
func (g *Group) apply(m *member, s settings) (rebalance bool) {
	if m.session != s.session || m.rebalance != s.rebalance {
		m.session, m.rebalance = s.session, s.rebalance
		g.dirty = true
	}
	if slices.Equal(m.topics, s.topics) && m.rack == s.rack && m.assignor == s.assignor {
		return false
	}
	m.topics, m.rack, m.assignor = s.topics, s.rack, s.assignor
	g.dirty = true
	return true
}

func (g *Group) join(req HeartbeatRequest, now time.Time) (HeartbeatResponse, error) {
	m := g.members[req.MemberID]
	if m != nil && m.instanceID != req.InstanceID {
		return HeartbeatResponse{}, errs.Errorf(errs.FencedInstanceID, "member %s is registered with instance id %q, not %q",
			m.id, m.instanceID, req.InstanceID)
	}
	if m == nil && req.InstanceID != "" {
		if old := g.byInstance(req.InstanceID); old != nil {
			if !old.staticLeft {
				return HeartbeatResponse{}, errs.Errorf(errs.UnreleasedInstanceID, "instance id %q is held by live member %s",
					req.InstanceID, old.id)
			}
			m = old // a static member back from a temporary leave, under a new member id
		}
	}
	if m == nil && g.cfg.MaxSize > 0 && len(g.members) >= g.cfg.MaxSize {
		return HeartbeatResponse{}, errs.Errorf(errs.GroupMaxSizeReached, "the group has %d member(s)", len(g.members))
	}
	s, err := g.validate(req, nil)
	if err != nil {
		return HeartbeatResponse{}, err
	}
	// Checks done; from here on the group changes.
	rebalance := false
	switch {
	case m == nil:
		m = &member{id: req.MemberID, instanceID: req.InstanceID}
		g.members[m.id] = m
		rebalance = true
	case m.staticLeft:
		// It keeps its assignment and epoch: no rebalance unless its
		// subscription changed.
		if m.id != req.MemberID {
			delete(g.members, m.id)
			m.id = req.MemberID
			g.members[m.id] = m
		}
		m.staticLeft = false
	default:
		// A known member rejoining (fenced, or restarted with its id): by
		// protocol it dropped everything, so it holds nothing now and its
		// target comes back to it without a rebalance.
		m.assigned, m.revoking, m.revokeDeadline = nil, nil, time.Time{}
		m.epoch, m.prevEpoch = 0, 0
	}
	g.dirty = true
	m.lastHeartbeat = now
	if g.apply(m, s) {
		rebalance = true
	}
	if rebalance {
		g.bump()
	}
	// A joining client holds nothing: that confirms any pending revocation.
	g.reconcile(m, assign.Partitions{}, now)
	return g.response(m), nil
}

func (g *Group) leave(req HeartbeatRequest, now time.Time) (HeartbeatResponse, error) {
	m, err := g.lookup(req)
	if err != nil {
		return HeartbeatResponse{}, err
	}
	if req.MemberEpoch == StaticLeaveEpoch {
		if m.instanceID == "" {
			return HeartbeatResponse{}, errs.Errorf(errs.InvalidRequest, "member %s has no instance id and cannot leave with epoch -2", m.id)
		}
		if !m.staticLeft {
			m.staticLeft = true
			m.lastHeartbeat = now // its session runs from now
			g.dirty = true
		}
	} else {
		g.remove(m, "left the group")
		g.bump()
	}
	return HeartbeatResponse{MemberID: m.id, MemberEpoch: req.MemberEpoch, HeartbeatInterval: g.heartbeatInterval(m)}, nil
}

// heartbeatInterval is what m is told to heartbeat at: the configured
// interval, or a third of m's session when that is shorter, so that a
// member with a short session (6 s, say, against the 5 s default) is not
// expired by one late or lost heartbeat.
func (g *Group) heartbeatInterval(m *member) time.Duration {
	if third := m.session / 3; m.session > 0 && third < g.cfg.HeartbeatInterval {
		return max(third, time.Millisecond) // answered in whole milliseconds
	}
	return g.cfg.HeartbeatInterval
}

// lookup finds the member a heartbeat or leave names and checks its
// instance id.
func (g *Group) lookup(req HeartbeatRequest) (*member, error) {
	m := g.members[req.MemberID]
	if m == nil {
		if req.InstanceID != "" {
			if other := g.byInstance(req.InstanceID); other != nil {
				return nil, errs.Errorf(errs.FencedInstanceID, "instance id %q now belongs to member %s", req.InstanceID, other.id)
			}
		}
		return nil, errs.Errorf(errs.UnknownMemberID, "member %s is not in group %q", req.MemberID, g.id)
	}
	if req.InstanceID != "" && req.InstanceID != m.instanceID {
		return nil, errs.Errorf(errs.FencedInstanceID, "member %s is registered with instance id %q, not %q",
			m.id, m.instanceID, req.InstanceID)
	}
	return m, nil
}

func (g *Group) heartbeat(req HeartbeatRequest, now time.Time) (HeartbeatResponse, error) {
	m, err := g.lookup(req)
	if err != nil {
		return HeartbeatResponse{}, err
	}
	if m.staticLeft {
		return HeartbeatResponse{}, errs.Errorf(errs.FencedMemberEpoch, "static member %s left; rejoin with epoch 0", m.id)
	}
	if req.MemberEpoch != m.epoch {
		// The previous epoch is fine when the member holds no more than
		// its assignment: the answer that moved it on was lost.
		lost := req.MemberEpoch == m.prevEpoch && req.Owned != nil && req.Owned.SubsetOf(m.assigned)
		if !lost {
			return HeartbeatResponse{}, errs.Errorf(errs.FencedMemberEpoch, "member %s is at epoch %d, not %d",
				m.id, m.epoch, req.MemberEpoch)
		}
	}
	s, err := g.validate(req, m)
	if err != nil {
		return HeartbeatResponse{}, err
	}
	m.lastHeartbeat = now
	if g.apply(m, s) {
		g.bump()
	}
	g.reconcile(m, req.Owned, now)
	return g.response(m), nil
}

func (g *Group) response(m *member) HeartbeatResponse {
	return HeartbeatResponse{MemberID: m.id, MemberEpoch: m.epoch, HeartbeatInterval: g.heartbeatInterval(m),
		Assignment: orEmpty(m.assigned.Clone())}
}

// reconcile moves a member one step toward its target (see the package
// comment); owned is what it reported holding, nil when it did not say.
func (g *Group) reconcile(m *member, owned assign.Partitions, now time.Time) {
	if m.revoking.Count() > 0 {
		if owned == nil || owned.Intersects(m.revoking) {
			return // still waiting for the member to let go
		}
		m.revoking, m.revokeDeadline = nil, time.Time{}
		g.dirty = true
	}
	if m.epoch == g.assignmentEpoch && m.assigned.Equal(m.target) {
		return
	}
	if revoke := m.assigned.Minus(m.target); revoke.Count() > 0 {
		m.assigned = m.assigned.Intersect(m.target)
		m.revoking = revoke
		m.revokeDeadline = now.Add(m.rebalance)
		g.dirty = true
		return
	}
	if missing := m.target.Minus(m.assigned); missing.Count() > 0 {
		held := g.held()
		var free []assign.TopicPartition
		for _, tp := range missing.List() {
			if _, ok := held[tp]; !ok {
				free = append(free, tp)
			}
		}
		if len(free) > 0 {
			m.assigned = m.assigned.Union(assign.FromList(free))
			g.dirty = true
		}
	}
	if m.epoch != g.assignmentEpoch {
		m.prevEpoch, m.epoch = m.epoch, g.assignmentEpoch
		g.dirty = true
	}
}

// held maps every partition some member holds (assigned or pending
// revocation) to that member.
func (g *Group) held() map[assign.TopicPartition]MemberID {
	out := map[assign.TopicPartition]MemberID{}
	for _, m := range g.members {
		for _, tp := range m.assigned.Union(m.revoking).List() {
			out[tp] = m.id
		}
	}
	return out
}

// Tick removes the members whose session expired (no heartbeat for their
// session timeout, or a static member away that long) and those still
// holding partitions to revoke past their rebalance timeout. A deadline
// expires at its instant.
func (g *Group) Tick(now time.Time) Effects {
	if g.dead {
		return Effects{}
	}
	g.begin()
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		switch {
		case !now.Before(m.lastHeartbeat.Add(m.session)):
			g.remove(m, "session expired: no heartbeat for "+now.Sub(m.lastHeartbeat).String())
		case !m.revokeDeadline.IsZero() && !now.Before(m.revokeDeadline):
			g.remove(m, "fenced: did not revoke "+m.revoking.String()+" within the rebalance timeout "+m.rebalance.String())
		}
	}
	if len(g.removed) > 0 {
		g.bump()
	}
	return g.effects()
}

// NextDeadline is when Tick next has something to do: the earliest session
// or rebalance deadline; zero when the group has no members.
func (g *Group) NextDeadline() time.Time {
	var next time.Time
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, m := range g.members {
		earlier(m.lastHeartbeat.Add(m.session))
		earlier(m.revokeDeadline)
	}
	return next
}

// SetTopics sets the partition count of every topic (topics absent from the
// map do not exist). A change to a topic some member subscribes to bumps the
// group epoch and computes a new target.
func (g *Group) SetTopics(counts map[string]int32) Effects {
	if g.dead {
		return Effects{}
	}
	g.begin()
	before := g.subscribedTopics()
	g.topics = maps.Clone(counts)
	if g.topics == nil {
		g.topics = map[string]int32{}
	}
	if !maps.Equal(before, g.subscribedTopics()) {
		g.bump()
	}
	return g.effects()
}

// CanCommit validates an offset commit of one partition. A member commits at
// its current epoch a partition it holds (assigned, or pending revocation:
// it commits before letting go). A commit with no member id and a negative
// epoch (an admin tool, or a consumer assigning partitions itself) is
// allowed only while the group has no members.
func (g *Group) CanCommit(id MemberID, epoch Epoch, topic string, partition int32) error {
	if g.dead {
		return errs.Errorf(errs.GroupIDNotFound, "group %q was deleted", g.id)
	}
	if id == "" && epoch < 0 {
		if len(g.members) == 0 {
			return nil
		}
		return errs.Errorf(errs.UnknownMemberID, "group %q has members; commit as one of them", g.id)
	}
	m := g.members[id]
	if m == nil {
		return errs.Errorf(errs.UnknownMemberID, "member %s is not in group %q", id, g.id)
	}
	if m.staticLeft || epoch != m.epoch {
		current := m.epoch
		if m.staticLeft {
			current = StaticLeaveEpoch
		}
		return errs.Errorf(errs.StaleMemberEpoch, "member %s is at epoch %d, not %d", id, current, epoch)
	}
	if !m.assigned.Contains(topic, partition) && !m.revoking.Contains(topic, partition) {
		return errs.Errorf(errs.StaleMemberEpoch, "member %s does not own %s:%d at epoch %d", id, topic, partition, epoch)
	}
	return nil
}

// Delete deletes an empty group (DeleteGroups). Every later event answers
// GROUP_ID_NOT_FOUND.
func (g *Group) Delete() (Effects, error) {
	if g.dead {
		return Effects{}, errs.Errorf(errs.GroupIDNotFound, "group %q was deleted", g.id)
	}
	if len(g.members) > 0 {
		return Effects{}, errs.Errorf(errs.NonEmptyGroup, "group %q has %d member(s)", g.id, len(g.members))
	}
	g.dead = true
	return Effects{Deleted: true}, nil
}

// State is the group's state (see State).
func (g *Group) State() State {
	switch {
	case g.dead:
		return Dead
	case len(g.members) == 0:
		return Empty
	}
	for _, m := range g.members {
		if m.epoch != g.assignmentEpoch || m.revoking.Count() > 0 || !m.assigned.Equal(m.target) {
			return Reconciling
		}
	}
	return Stable
}

// SubscribedTopics answers, sorted, the topics the group's members subscribe
// to.
func (g *Group) SubscribedTopics() []string {
	var out []string
	for _, m := range g.members {
		out = append(out, m.topics...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Describe answers DescribeGroups' view of the group.
func (g *Group) Describe() Description {
	d := Description{GroupID: g.id, State: g.State(), Epoch: g.epoch, AssignmentEpoch: g.assignmentEpoch, Assignor: g.assignor}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		e := m.epoch
		if m.staticLeft {
			e = StaticLeaveEpoch
		}
		d.Members = append(d.Members, MemberDescription{ID: m.id, InstanceID: m.instanceID, Rack: m.rack, Epoch: e,
			Topics: slices.Clone(m.topics), Assigned: orEmpty(m.assigned.Clone()), Revoking: orEmpty(m.revoking.Clone()),
			Target: orEmpty(m.target.Clone())})
	}
	return d
}

func (g *Group) begin() { g.dirty, g.removed = false, nil }

func (g *Group) effects() Effects {
	e := Effects{Removed: g.removed}
	if g.dirty {
		s := g.Snapshot()
		e.Snapshot = &s
	}
	g.begin()
	return e
}

func (g *Group) remove(m *member, reason string) {
	delete(g.members, m.id)
	g.removed = append(g.removed, Removal{Member: m.id, InstanceID: m.instanceID, Reason: reason})
	g.dirty = true
}

// bump starts a new group epoch and computes its target assignment.
func (g *Group) bump() {
	g.epoch++
	g.assignor = g.chooseAssignor()
	a := g.assignorNamed(g.assignor)
	var ms []assign.Member
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		ms = append(ms, assign.Member{ID: m.id, InstanceID: m.instanceID, Rack: m.rack, Topics: m.topics, Current: m.target})
	}
	out := a.Assign(ms, g.subscribedTopics())
	for id, m := range g.members {
		m.target = orEmpty(out[id])
	}
	g.assignmentEpoch = g.epoch
	g.dirty = true
}

// chooseAssignor answers the assignor most members prefer; a tie goes to the
// configured default, then to the first name.
func (g *Group) chooseAssignor() string {
	votes := map[string]int{}
	for _, m := range g.members {
		if m.assignor != "" && g.assignorNamed(m.assignor) != nil {
			votes[m.assignor]++
		}
	}
	best := g.cfg.Assignors[0].Name()
	for _, name := range slices.Sorted(maps.Keys(votes)) {
		if votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

func (g *Group) assignorNamed(name string) assign.Assignor {
	for _, a := range g.cfg.Assignors {
		if a.Name() == name {
			return a
		}
	}
	return nil
}

// subscribedTopics answers the partition counts of the topics some member
// subscribes to: what the target depends on.
func (g *Group) subscribedTopics() map[string]int32 {
	out := map[string]int32{}
	for _, m := range g.members {
		for _, t := range m.topics {
			if n, ok := g.topics[t]; ok {
				out[t] = n
			}
		}
	}
	return out
}

func (g *Group) byInstance(instanceID string) *member {
	for _, m := range g.members {
		if m.instanceID == instanceID {
			return m
		}
	}
	return nil
}

func orEmpty(p assign.Partitions) assign.Partitions {
	if p == nil {
		return assign.Partitions{}
	}
	return p
}
