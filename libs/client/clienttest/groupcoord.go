package clienttest

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	controllerv1 "skein/gen/skein/controller/v1"
	groupv1 "skein/gen/skein/group/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/rpcerr"
)

// GroupCoordinator is a fake group coordinator that owns every group it is
// asked about. It follows the GroupCoordinatorService contract as the real
// one does (KIP-848 style): server-side assignment, incremental moves — a
// partition reaches its new owner only after the old one confirmed the
// revocation by a heartbeat whose owned partitions lack it — member epochs,
// strict commits. Assignment is a sticky, balanced spread over the members
// for both "range" and "uniform". Sessions expire lazily, on the next call
// after the deadline. Offsets live in memory.
type GroupCoordinator struct {
	groupv1.UnimplementedGroupCoordinatorServiceServer

	ctrl *Controller

	mu sync.Mutex
	// HeartbeatInterval is answered to members (default 200 ms).
	HeartbeatInterval time.Duration
	// MinSession and MaxSession bound the session timeouts members may ask
	// for; DefaultSession is the one they get when they ask for none.
	MinSession, MaxSession, DefaultSession time.Duration
	groups                                 map[string]*fakeGroup
	fail                                   []error       // answered (and consumed) by the next calls
	commits                                int           // OffsetCommit calls
	stalled                                chan struct{} // OffsetCommit waits while set (Stall)
}

// Stall makes OffsetCommit calls wait, as a paused coordinator's would,
// until release is called or their context ends.
func (g *GroupCoordinator) Stall() (release func()) {
	ch := make(chan struct{})
	g.mu.Lock()
	g.stalled = ch
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.stalled = nil
			g.mu.Unlock()
			close(ch)
		})
	}
}

type fakeGroup struct {
	epoch    int32
	assignor string
	members  map[string]*fakeMember
	offsets  map[tp]*groupv1.CommittedOffset
	pending  map[int64]map[tp]int64 // transactional offsets by producer id
}

type fakeMember struct {
	id, instance string
	topics       []string
	session      time.Duration
	epoch, prev  int32
	assigned     map[tp]bool
	revoking     map[tp]bool
	target       map[tp]bool
	last         time.Time
}

// NewGroupCoordinator returns a coordinator that reads partition counts from
// ctrl.
func NewGroupCoordinator(ctrl *Controller) *GroupCoordinator {
	return &GroupCoordinator{
		ctrl: ctrl, HeartbeatInterval: 200 * time.Millisecond,
		MinSession: 100 * time.Millisecond, MaxSession: 5 * time.Minute, DefaultSession: 45 * time.Second,
		groups: map[string]*fakeGroup{},
	}
}

// FailNext makes the next n calls answer err (a gRPC status of its row).
func (g *GroupCoordinator) FailNext(err error, n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for range n {
		g.fail = append(g.fail, err)
	}
}

// Commits counts OffsetCommit calls that reached the group state.
func (g *GroupCoordinator) Commits() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.commits
}

// SetHeartbeatInterval sets the interval answered to members from their
// next heartbeat on.
func (g *GroupCoordinator) SetHeartbeatInterval(d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.HeartbeatInterval = d
}

// Expire removes a member at once, as a session expiry would.
func (g *GroupCoordinator) Expire(group, member string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gr := g.groups[group]; gr != nil && gr.members[member] != nil {
		delete(gr.members, member)
		g.bumpLocked(gr)
	}
}

// Committed answers a committed offset, -1 when none.
func (g *GroupCoordinator) Committed(group, topic string, partition int32) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gr := g.groups[group]; gr != nil {
		if o := gr.offsets[tp{topic, partition}]; o != nil {
			return o.GetOffset()
		}
	}
	return -1
}

// Members answers each member's assigned partitions (without those pending
// revocation), by member id.
func (g *GroupCoordinator) Members(group string) map[string][]int32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string][]int32{}
	if gr := g.groups[group]; gr != nil {
		for id, m := range gr.members {
			out[id] = []int32{}
			for p := range m.assigned {
				out[id] = append(out[id], p.partition)
			}
			slices.Sort(out[id])
		}
	}
	return out
}

func (g *GroupCoordinator) failed() error {
	if len(g.fail) == 0 {
		return nil
	}
	err := g.fail[0]
	g.fail = g.fail[1:]
	return rpcerr.ToGRPC(err)
}

// expireLocked removes members whose session ended.
func (g *GroupCoordinator) expireLocked(now time.Time) {
	for _, gr := range g.groups {
		gone := false
		for id, m := range gr.members {
			if !now.Before(m.last.Add(m.session)) {
				delete(gr.members, id)
				gone = true
			}
		}
		if gone {
			g.bumpLocked(gr)
		}
	}
}

// bumpLocked starts a new group epoch with a new target: each member keeps
// what it targets now up to its quota, and the rest goes to members with room.
func (g *GroupCoordinator) bumpLocked(gr *fakeGroup) {
	gr.epoch++
	ids := slices.Sorted(maps.Keys(gr.members))
	if len(ids) == 0 {
		return
	}
	var all []tp
	topics := map[string]bool{}
	for _, m := range gr.members {
		for _, t := range m.topics {
			topics[t] = true
		}
	}
	for _, t := range slices.Sorted(maps.Keys(topics)) {
		for p := range g.ctrl.partitionCount(t) {
			all = append(all, tp{t, p})
		}
	}
	quota := map[string]int{}
	for i, id := range ids {
		quota[id] = len(all) / len(ids)
		if i < len(all)%len(ids) {
			quota[id]++
		}
	}
	taken := map[tp]bool{}
	next := map[string]map[tp]bool{}
	for _, id := range ids {
		m := gr.members[id]
		next[id] = map[tp]bool{}
		for _, p := range sortedTPs(m.target) {
			if len(next[id]) < quota[id] && slices.Contains(m.topics, p.topic) && p.partition < g.ctrl.partitionCount(p.topic) {
				next[id][p], taken[p] = true, true
			}
		}
	}
	for _, p := range all {
		if taken[p] {
			continue
		}
		for _, id := range ids {
			if len(next[id]) < quota[id] && slices.Contains(gr.members[id].topics, p.topic) {
				next[id][p], taken[p] = true, true
				break
			}
		}
	}
	for _, id := range ids {
		gr.members[id].target = next[id]
	}
}

func sortedTPs(s map[tp]bool) []tp {
	out := slices.Collect(maps.Keys(s))
	slices.SortFunc(out, func(a, b tp) int {
		if c := cmp.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return cmp.Compare(a.partition, b.partition)
	})
	return out
}

func toTopicPartitions(s map[tp]bool) []*groupv1.TopicPartitions {
	out := []*groupv1.TopicPartitions{}
	for _, p := range sortedTPs(s) {
		if n := len(out); n > 0 && out[n-1].Topic == p.topic {
			out[n-1].Partitions = append(out[n-1].Partitions, p.partition)
			continue
		}
		out = append(out, &groupv1.TopicPartitions{Topic: p.topic, Partitions: []int32{p.partition}})
	}
	return out
}

func fromTopicPartitions(tps []*groupv1.TopicPartitions) map[tp]bool {
	out := map[tp]bool{}
	for _, t := range tps {
		for _, p := range t.GetPartitions() {
			out[tp{t.GetTopic(), p}] = true
		}
	}
	return out
}

// heldLocked answers the partitions some member holds or is revoking.
func heldLocked(gr *fakeGroup) map[tp]bool {
	out := map[tp]bool{}
	for _, m := range gr.members {
		for p := range m.assigned {
			out[p] = true
		}
		for p := range m.revoking {
			out[p] = true
		}
	}
	return out
}

// reconcileLocked moves a member one step toward its target.
func reconcileLocked(gr *fakeGroup, m *fakeMember, owned map[tp]bool) {
	if len(m.revoking) > 0 {
		for p := range owned {
			if m.revoking[p] {
				return // not confirmed yet
			}
		}
		m.revoking = map[tp]bool{}
	}
	revoke := map[tp]bool{}
	for p := range m.assigned {
		if !m.target[p] {
			revoke[p] = true
		}
	}
	if len(revoke) > 0 {
		for p := range revoke {
			delete(m.assigned, p)
		}
		m.revoking = revoke
		return
	}
	held := heldLocked(gr)
	for p := range m.target {
		if !m.assigned[p] && !held[p] {
			m.assigned[p] = true
		}
	}
	if m.epoch != gr.epoch {
		m.prev, m.epoch = m.epoch, gr.epoch
	}
}

func (g *GroupCoordinator) hbErr(err error) *groupv1.ConsumerGroupHeartbeatResponse {
	return &groupv1.ConsumerGroupHeartbeatResponse{ErrorCode: skeinv1.ErrorCode(errs.CodeOf(err)), ErrorMessage: errs.Message(err)}
}

// ConsumerGroupHeartbeat joins, heartbeats or leaves.
func (g *GroupCoordinator) ConsumerGroupHeartbeat(_ context.Context, req *groupv1.ConsumerGroupHeartbeatRequest) (*groupv1.ConsumerGroupHeartbeatResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.failed(); err != nil {
		return nil, err
	}
	now := time.Now()
	g.expireLocked(now)
	gr := g.groups[req.GetGroupId()]
	id := req.GetMemberId()
	switch e := req.GetMemberEpoch(); {
	case e == 0:
		if len(req.GetSubscribedTopics()) == 0 {
			return g.hbErr(errs.Errorf(errs.InvalidRequest, "a joining member must subscribe to at least one topic")), nil
		}
		if a := req.GetServerAssignor(); a != "" && a != "range" && a != "uniform" {
			return g.hbErr(errs.Errorf(errs.InvalidRequest, "unsupported server assignor %q", a)), nil
		}
		session := g.DefaultSession
		if s := time.Duration(req.GetSessionTimeoutMs()) * time.Millisecond; s != 0 {
			if s < g.MinSession || s > g.MaxSession {
				return g.hbErr(errs.Errorf(errs.InvalidSessionTimeout, "session timeout %v not in [%v, %v]", s, g.MinSession, g.MaxSession)), nil
			}
			session = s
		}
		if id == "" {
			id = fmt.Sprintf("member-%d", time.Now().UnixNano())
		}
		if gr == nil {
			gr = &fakeGroup{members: map[string]*fakeMember{}, offsets: map[tp]*groupv1.CommittedOffset{}}
			g.groups[req.GetGroupId()] = gr
		}
		if inst := req.GetInstanceId(); inst != "" {
			for _, o := range gr.members {
				if o.instance == inst && o.id != id {
					return g.hbErr(errs.Errorf(errs.UnreleasedInstanceID, "instance id %q is held by %s", inst, o.id)), nil
				}
			}
		}
		topics := slices.Sorted(slices.Values(req.GetSubscribedTopics()))
		m := gr.members[id]
		if m == nil {
			m = &fakeMember{id: id, instance: req.GetInstanceId(), assigned: map[tp]bool{}, revoking: map[tp]bool{}, target: map[tp]bool{}}
			gr.members[id] = m
			m.topics, m.session, m.last = topics, session, now
			if req.GetServerAssignor() != "" {
				gr.assignor = req.GetServerAssignor()
			}
			g.bumpLocked(gr)
		} else {
			m.assigned, m.revoking, m.epoch, m.prev = map[tp]bool{}, map[tp]bool{}, 0, 0
			m.session, m.last = session, now
			if !slices.Equal(m.topics, topics) {
				m.topics = topics
				g.bumpLocked(gr)
			}
		}
		reconcileLocked(gr, m, map[tp]bool{})
		return g.answer(gr, m), nil
	case e == -1 || e == -2:
		if gr == nil || gr.members[id] == nil {
			return g.hbErr(errs.Errorf(errs.UnknownMemberID, "member %s is not in group %q", id, req.GetGroupId())), nil
		}
		delete(gr.members, id)
		g.bumpLocked(gr)
		return &groupv1.ConsumerGroupHeartbeatResponse{MemberId: id, MemberEpoch: e, HeartbeatIntervalMs: int32(g.HeartbeatInterval / time.Millisecond)}, nil
	case e > 0:
		if gr == nil || gr.members[id] == nil {
			return g.hbErr(errs.Errorf(errs.UnknownMemberID, "member %s is not in group %q", id, req.GetGroupId())), nil
		}
		m := gr.members[id]
		owned := fromTopicPartitions(req.GetOwnedPartitions())
		if e != m.epoch {
			lost := e == m.prev
			for p := range owned {
				lost = lost && m.assigned[p]
			}
			if !lost {
				return g.hbErr(errs.Errorf(errs.FencedMemberEpoch, "member %s is at epoch %d, not %d", id, m.epoch, e)), nil
			}
		}
		m.last = now
		reconcileLocked(gr, m, owned)
		return g.answer(gr, m), nil
	}
	return g.hbErr(errs.Errorf(errs.InvalidRequest, "member epoch %d", req.GetMemberEpoch())), nil
}

func (g *GroupCoordinator) answer(gr *fakeGroup, m *fakeMember) *groupv1.ConsumerGroupHeartbeatResponse {
	return &groupv1.ConsumerGroupHeartbeatResponse{MemberId: m.id, MemberEpoch: m.epoch,
		HeartbeatIntervalMs: int32(g.HeartbeatInterval / time.Millisecond), Assignment: toTopicPartitions(m.assigned)}
}

// OffsetCommit commits each partition the member holds at its epoch.
func (g *GroupCoordinator) OffsetCommit(ctx context.Context, req *groupv1.OffsetCommitRequest) (*groupv1.OffsetCommitResponse, error) {
	g.mu.Lock()
	if ch := g.stalled; ch != nil {
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		g.mu.Lock()
	}
	defer g.mu.Unlock()
	if err := g.failed(); err != nil {
		return nil, err
	}
	g.expireLocked(time.Now())
	g.commits++
	gr := g.groups[req.GetGroupId()]
	if gr == nil && req.GetMemberId() == "" && req.GetMemberEpoch() < 0 {
		gr = &fakeGroup{members: map[string]*fakeMember{}, offsets: map[tp]*groupv1.CommittedOffset{}}
		g.groups[req.GetGroupId()] = gr
	}
	out := &groupv1.OffsetCommitResponse{}
	for _, o := range req.GetOffsets() {
		var err error
		p := tp{o.GetTopic(), o.GetPartition()}
		switch m := gr.memberOrNil(req.GetMemberId()); {
		case gr == nil:
			err = errs.Errorf(errs.UnknownMemberID, "group %q does not exist", req.GetGroupId())
		case req.GetMemberId() == "" && req.GetMemberEpoch() < 0:
			if len(gr.members) > 0 {
				err = errs.Errorf(errs.UnknownMemberID, "group %q has members; commit as one of them", req.GetGroupId())
			}
		case m == nil || m.epoch != req.GetMemberEpoch() || (!m.assigned[p] && !m.revoking[p]):
			err = memberCommitErr(m, req.GetGroupId(), req.GetMemberId(), req.GetMemberEpoch(), p)
		case len(o.GetMetadata()) > 4096:
			err = errs.Errorf(errs.OffsetMetadataTooLarge, "metadata of %d bytes", len(o.GetMetadata()))
		}
		if err == nil {
			gr.offsets[p] = &groupv1.CommittedOffset{Topic: p.topic, Partition: p.partition, Offset: o.GetOffset(), Metadata: o.GetMetadata()}
		}
		out.Partitions = append(out.Partitions, &groupv1.PartitionResult{Topic: p.topic, Partition: p.partition,
			ErrorCode: skeinv1.ErrorCode(errs.CodeOf(err)), ErrorMessage: errs.Message(err)})
	}
	return out, nil
}

// memberCommitErr answers why member m (nil: not in the group) may not
// commit p at epoch, nil when it may.
func memberCommitErr(m *fakeMember, group, id string, epoch int32, p tp) error {
	switch {
	case m == nil:
		return errs.Errorf(errs.UnknownMemberID, "member %s is not in group %q", id, group)
	case m.epoch != epoch:
		return errs.Errorf(errs.StaleMemberEpoch, "member %s is at epoch %d, not %d", m.id, m.epoch, epoch)
	case !m.assigned[p] && !m.revoking[p]:
		return errs.Errorf(errs.StaleMemberEpoch, "member %s does not own %s:%d", m.id, p.topic, p.partition)
	}
	return nil
}

func (gr *fakeGroup) memberOrNil(id string) *fakeMember {
	if gr == nil {
		return nil
	}
	return gr.members[id]
}

// OffsetFetch answers committed offsets (-1 for none).
func (g *GroupCoordinator) OffsetFetch(_ context.Context, req *groupv1.OffsetFetchRequest) (*groupv1.OffsetFetchResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.failed(); err != nil {
		return nil, err
	}
	gr := g.groups[req.GetGroupId()]
	out := &groupv1.OffsetFetchResponse{}
	if len(req.GetPartitions()) == 0 {
		if gr != nil {
			for _, p := range sortedTPs(keysOf(gr.offsets)) {
				out.Offsets = append(out.Offsets, gr.offsets[p])
			}
		}
		return out, nil
	}
	for _, p := range sortedTPs(fromTopicPartitions(req.GetPartitions())) {
		o := &groupv1.CommittedOffset{Topic: p.topic, Partition: p.partition, Offset: -1}
		if gr != nil && gr.offsets[p] != nil {
			o = gr.offsets[p]
		}
		if req.GetRequireStable() && gr != nil && gr.hasPending(p) {
			o = &groupv1.CommittedOffset{Topic: p.topic, Partition: p.partition, Offset: -1, ErrorCode: skeinv1.ErrorCode_UNSTABLE_OFFSET_COMMIT}
		}
		out.Offsets = append(out.Offsets, o)
	}
	return out, nil
}

func keysOf(m map[tp]*groupv1.CommittedOffset) map[tp]bool {
	out := map[tp]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

func (gr *fakeGroup) state() string {
	if len(gr.members) == 0 {
		return "Empty"
	}
	for _, m := range gr.members {
		if m.epoch != gr.epoch || len(m.revoking) > 0 || !maps.Equal(m.assigned, m.target) {
			return "Reconciling"
		}
	}
	return "Stable"
}

// ListGroups lists every group.
func (g *GroupCoordinator) ListGroups(context.Context, *groupv1.ListGroupsRequest) (*groupv1.ListGroupsResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.failed(); err != nil {
		return nil, err
	}
	g.expireLocked(time.Now())
	out := &groupv1.ListGroupsResponse{}
	for _, id := range slices.Sorted(maps.Keys(g.groups)) {
		gr := g.groups[id]
		out.Groups = append(out.Groups, &groupv1.GroupListing{GroupId: id, State: gr.state(), Members: int32(len(gr.members))})
	}
	return out, nil
}

// DescribeGroups describes groups; an unknown one is GROUP_ID_NOT_FOUND.
func (g *GroupCoordinator) DescribeGroups(_ context.Context, req *groupv1.DescribeGroupsRequest) (*groupv1.DescribeGroupsResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.failed(); err != nil {
		return nil, err
	}
	g.expireLocked(time.Now())
	out := &groupv1.DescribeGroupsResponse{}
	for _, id := range req.GetGroupIds() {
		gr := g.groups[id]
		if gr == nil {
			out.Groups = append(out.Groups, &groupv1.GroupDescription{GroupId: id, ErrorCode: skeinv1.ErrorCode_GROUP_ID_NOT_FOUND, State: "Dead"})
			continue
		}
		assignor := gr.assignor
		if assignor == "" {
			assignor = "uniform"
		}
		d := &groupv1.GroupDescription{GroupId: id, State: gr.state(), GroupEpoch: gr.epoch, AssignmentEpoch: gr.epoch, Assignor: assignor}
		for _, mid := range slices.Sorted(maps.Keys(gr.members)) {
			m := gr.members[mid]
			// As the real coordinator: the assignment is what the member
			// holds, the partitions being revoked included.
			holds := maps.Clone(m.assigned)
			maps.Copy(holds, m.revoking)
			d.Members = append(d.Members, &groupv1.MemberDescription{MemberId: m.id, InstanceId: m.instance, MemberEpoch: m.epoch,
				SubscribedTopics: m.topics, Assignment: toTopicPartitions(holds), TargetAssignment: toTopicPartitions(m.target),
				Revoking: toTopicPartitions(m.revoking)})
		}
		out.Groups = append(out.Groups, d)
	}
	return out, nil
}

// DeleteGroups deletes empty groups and their offsets.
func (g *GroupCoordinator) DeleteGroups(_ context.Context, req *groupv1.DeleteGroupsRequest) (*groupv1.DeleteGroupsResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.failed(); err != nil {
		return nil, err
	}
	g.expireLocked(time.Now())
	out := &groupv1.DeleteGroupsResponse{}
	for _, id := range req.GetGroupIds() {
		var err error
		switch gr := g.groups[id]; {
		case gr == nil:
			err = errs.Errorf(errs.GroupIDNotFound, "group %q does not exist", id)
		case len(gr.members) > 0:
			err = errs.Errorf(errs.NonEmptyGroup, "group %q has %d members", id, len(gr.members))
		default:
			delete(g.groups, id)
		}
		out.Groups = append(out.Groups, &groupv1.GroupResult{GroupId: id, ErrorCode: skeinv1.ErrorCode(errs.CodeOf(err)), ErrorMessage: errs.Message(err)})
	}
	return out, nil
}

// OffsetDelete deletes committed offsets of partitions whose topic no
// member subscribes to, with their pending offsets; the others answer
// GROUP_SUBSCRIBED_TO_TOPIC or UNKNOWN_TOPIC_OR_PARTITION.
func (g *GroupCoordinator) OffsetDelete(_ context.Context, req *groupv1.OffsetDeleteRequest) (*groupv1.OffsetDeleteResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.failed(); err != nil {
		return nil, err
	}
	g.expireLocked(time.Now())
	gr := g.groups[req.GetGroupId()]
	if gr == nil {
		return &groupv1.OffsetDeleteResponse{ErrorCode: skeinv1.ErrorCode_GROUP_ID_NOT_FOUND, ErrorMessage: fmt.Sprintf("group %q does not exist", req.GetGroupId())}, nil
	}
	subscribed := map[string]bool{}
	for _, m := range gr.members {
		for _, t := range m.topics {
			subscribed[t] = true
		}
	}
	out := &groupv1.OffsetDeleteResponse{}
	for _, t := range req.GetPartitions() {
		for _, p := range t.GetPartitions() {
			var err error
			switch {
			case p < 0 || p >= g.ctrl.partitionCount(t.GetTopic()):
				err = errs.Errorf(errs.UnknownTopicOrPartition, "no partition %s:%d", t.GetTopic(), p)
			case subscribed[t.GetTopic()]:
				err = errs.Errorf(errs.GroupSubscribedToTopic, "group %q has members subscribed to topic %q", req.GetGroupId(), t.GetTopic())
			default:
				delete(gr.offsets, tp{t.GetTopic(), p})
				for _, offs := range gr.pending {
					delete(offs, tp{t.GetTopic(), p})
				}
			}
			out.Partitions = append(out.Partitions, &groupv1.PartitionResult{Topic: t.GetTopic(), Partition: p,
				ErrorCode: skeinv1.ErrorCode(errs.CodeOf(err)), ErrorMessage: errs.Message(err)})
		}
	}
	return out, nil
}

// partitionCount answers a topic's partition count (0 when unknown).
func (c *Controller) partitionCount(topic string) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int32(len(c.partitions[topic]))
}

// AddGroupCoordinator registers a live group coordinator at addr.
func (c *Controller) AddGroupCoordinator(id int32, addr string) {
	c.addCoordinator(id, controllerv1.CoordinatorKind_COORDINATOR_KIND_GROUP, addr)
}

// addCoordinator registers a live coordinator of a kind at addr.
func (c *Controller) addCoordinator(id int32, kind controllerv1.CoordinatorKind, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := &controllerv1.CoordinatorRecord{Id: id, Kind: kind, GrpcAddr: addr, Alive: true}
	c.coords[id] = r
	c.publishLocked(&controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_Coordinator{Coordinator: r}})
}

// SetCoordinatorFor makes FindCoordinator answer coordinator id for key.
func (c *Controller) SetCoordinatorFor(key string, id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.coordFor[key] = id
}

// FindCoordinator answers the coordinator set for the key, else the
// coordinator of the asked kind with the lowest id.
func (c *Controller) FindCoordinator(_ context.Context, req *controllerv1.FindCoordinatorRequest) (*controllerv1.FindCoordinatorResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.coordFor[req.GetKey()]
	if !ok {
		var ids []int32
		for _, cid := range slices.Sorted(maps.Keys(c.coords)) {
			if k := req.GetKind(); k == controllerv1.CoordinatorKind_COORDINATOR_KIND_UNSPECIFIED || c.coords[cid].GetKind() == k {
				ids = append(ids, cid)
			}
		}
		if len(ids) == 0 {
			return nil, rpcerr.ToGRPC(errs.Errorf(errs.CoordinatorNotAvailable, "no coordinator"))
		}
		id = ids[0]
	}
	r := c.coords[id]
	if r == nil {
		return nil, rpcerr.ToGRPC(errs.Errorf(errs.CoordinatorNotAvailable, "no coordinator %d", id))
	}
	return &controllerv1.FindCoordinatorResponse{NodeId: id, GrpcAddr: r.GetGrpcAddr(), CoordinatorEpoch: c.coordEpoch}, nil
}

// MoveCoordinatorFor makes coordinator id the owner of key, as a failover
// does: FindCoordinator answers it from now on, and the metadata names it
// the owner of partition 0 of its kind's internal topic at a new
// coordinator epoch.
func (c *Controller) MoveCoordinatorFor(key string, id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.coordFor[key] = id
	c.coordEpoch++
	a := &controllerv1.CoordinatorAssignmentRecord{Kind: c.coords[id].GetKind(), Partition: 0, Owner: id, CoordinatorEpoch: c.coordEpoch}
	c.assigns[a.GetKind()] = a
	c.publishLocked(&controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_CoordinatorAssignment{CoordinatorAssignment: a}})
}

// TxnOffsetCommit keeps a transaction's offsets pending until the
// transaction coordinator completes the transaction (Groups of a
// TxnCoordinator).
func (g *GroupCoordinator) TxnOffsetCommit(_ context.Context, req *groupv1.TxnOffsetCommitRequest) (*groupv1.TxnOffsetCommitResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.failed(); err != nil {
		return nil, err
	}
	gr := g.groups[req.GetGroupId()]
	if gr == nil {
		gr = &fakeGroup{members: map[string]*fakeMember{}, offsets: map[tp]*groupv1.CommittedOffset{}}
		g.groups[req.GetGroupId()] = gr
	}
	if gr.pending == nil {
		gr.pending = map[int64]map[tp]int64{}
	}
	if gr.pending[req.GetProducerId()] == nil {
		gr.pending[req.GetProducerId()] = map[tp]int64{}
	}
	out := &groupv1.TxnOffsetCommitResponse{}
	for _, o := range req.GetOffsets() {
		// Offsets that name their member are that member's to commit.
		var err error
		p := tp{o.GetTopic(), o.GetPartition()}
		if req.GetMemberId() != "" {
			err = memberCommitErr(gr.memberOrNil(req.GetMemberId()), req.GetGroupId(), req.GetMemberId(), req.GetMemberEpoch(), p)
		}
		if err == nil {
			gr.pending[req.GetProducerId()][p] = o.GetOffset()
		}
		out.Partitions = append(out.Partitions, &groupv1.PartitionResult{Topic: p.topic, Partition: p.partition,
			ErrorCode: skeinv1.ErrorCode(errs.CodeOf(err)), ErrorMessage: errs.Message(err)})
	}
	return out, nil
}

// CompleteTxn commits or drops a producer's pending offsets of a group, as
// the transaction coordinator does when the transaction ends.
func (g *GroupCoordinator) CompleteTxn(group string, pid int64, commit bool) {
	g.completeTxn(group, pid, commit)
}

// completeTxn commits or drops a producer's pending offsets.
func (g *GroupCoordinator) completeTxn(group string, pid int64, commit bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gr := g.groups[group]
	if gr == nil {
		return
	}
	if commit {
		for p, off := range gr.pending[pid] {
			gr.offsets[p] = &groupv1.CommittedOffset{Topic: p.topic, Partition: p.partition, Offset: off}
		}
	}
	delete(gr.pending, pid)
}

func (gr *fakeGroup) hasPending(p tp) bool {
	for _, offs := range gr.pending {
		if _, ok := offs[p]; ok {
			return true
		}
	}
	return false
}
