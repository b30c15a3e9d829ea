package liveness

import (
	"slices"
	"testing"
	"time"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/membership"
	"skein/libs/metadata"
	"skein/services/controller/internal/fsm"
)

type cluster struct {
	t     *testing.T
	m     *fsm.Machine
	index uint64
}

func newCluster(t *testing.T, brokers ...int32) *cluster {
	c := &cluster{t: t, m: fsm.New()}
	c.apply(&controllerv1.Command{Command: &controllerv1.Command_Bootstrap{Bootstrap: &controllerv1.BootstrapCommand{ClusterId: "c"}}})
	for _, id := range brokers {
		c.apply(&controllerv1.Command{Command: &controllerv1.Command_RegisterBroker{RegisterBroker: &controllerv1.RegisterBrokerRequest{
			BrokerId: id, GrpcAddr: "a", IncarnationId: "inc"}}})
	}
	return c
}

func (c *cluster) apply(cmd *controllerv1.Command) {
	c.t.Helper()
	c.index++
	if _, err := c.m.Apply(c.index, cmd); err != nil {
		c.t.Fatalf("%s: %v", fsm.Describe(cmd), err)
	}
}

func (c *cluster) img() *metadata.Image { return c.m.Image() }

func fences(cmds []*controllerv1.Command) []int32 {
	var out []int32
	for _, c := range cmds {
		if f := c.GetFenceBroker(); f != nil {
			out = append(out, f.GetBrokerId())
		}
	}
	return out
}

var settings = Settings{SessionTimeout: 2 * time.Second, CoordinatorGrace: 5 * time.Second, ConsumerOffsetsPartitions: 4, TransactionStatePartitions: 2, InternalTopicMinBrokers: 3}

func TestSessionExpiry(t *testing.T) {
	c := newCluster(t, 1, 2)
	tr := NewTracker(settings)
	t0 := time.Unix(1000, 0)
	tr.BecameLeader(t0)
	if f := fences(tr.Plan(c.img(), t0)); len(f) != 0 {
		t.Fatalf("fenced at once: %v", f)
	}
	b1, _ := c.img().Broker(1)
	tr.Heartbeat(1, b1.GetBrokerEpoch(), t0.Add(1500*time.Millisecond))
	if f := fences(tr.Plan(c.img(), t0.Add(2*time.Second))); len(f) != 0 {
		t.Fatalf("fenced within the session: %v", f)
	}
	// Broker 2 never heartbeated since t0; broker 1 did at t0+1.5s.
	if f := fences(tr.Plan(c.img(), t0.Add(2100*time.Millisecond))); len(f) != 1 || f[0] != 2 {
		t.Fatalf("want broker 2 fenced, got %v", f)
	}
	if f := fences(tr.Plan(c.img(), t0.Add(3600*time.Millisecond))); len(f) != 2 {
		t.Fatalf("want both fenced, got %v", f)
	}
	// A heartbeat from an old epoch does not keep the current one alive.
	tr.Heartbeat(1, 999, t0.Add(3600*time.Millisecond))
	if f := fences(tr.Plan(c.img(), t0.Add(3700*time.Millisecond))); len(f) != 1 || f[0] != 2 {
		t.Fatalf("broker 1's session restarts when its epoch changes; want only 2 fenced: %v", f)
	}
	// A new leader gives everyone a fresh session.
	tr.BecameLeader(t0.Add(10 * time.Second))
	if f := fences(tr.Plan(c.img(), t0.Add(11*time.Second))); len(f) != 0 {
		t.Fatalf("fenced right after becoming leader: %v", f)
	}
}

func storageEvent(typ membership.EventType, id int32, inc string) membership.Event {
	return membership.Event{Type: typ, Member: membership.Member{Name: "s", Meta: membership.Meta{Role: membership.RoleStorage, ID: id, Incarnation: inc}}}
}

func TestGossipFencesAndBlocksUnfence(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	tr := NewTracker(settings)
	now := time.Unix(1000, 0)
	tr.BecameLeader(now)
	tr.Gossip(storageEvent(membership.EventDead, 2, "inc"))
	tr.Gossip(storageEvent(membership.EventLeave, 3, "older-incarnation"))
	if f := fences(tr.Plan(c.img(), now)); len(f) != 1 || f[0] != 2 {
		t.Fatalf("want broker 2 fenced (3's event named another incarnation), got %v", f)
	}
	if tr.MayUnfence(2, 3, "inc") {
		t.Error("a broker gossip holds dead was allowed to unfence")
	}
	tr.Gossip(storageEvent(membership.EventJoin, 2, "inc"))
	if !tr.MayUnfence(2, 3, "inc") {
		t.Error("a broker back in gossip may unfence")
	}
	tr.ShuttingDown(1, 2)
	if tr.MayUnfence(1, 2, "inc") {
		t.Error("a broker shutting down was allowed to unfence")
	}
	tr.Heartbeat(1, 50, now) // a new incarnation
	if !tr.MayUnfence(1, 50, "inc2") {
		t.Error("the next incarnation may unfence")
	}
}

// A broker whose heartbeat says its log directory failed is fenced at
// once, though its session is fresh, and stays fenced until a heartbeat
// says the directory works again.
func TestLogDirFailureFencesUntilRecovered(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	tr := NewTracker(settings)
	now := time.Unix(1000, 0)
	tr.BecameLeader(now)
	b2, _ := c.img().Broker(2)
	tr.Heartbeat(2, b2.GetBrokerEpoch(), now)
	tr.LogDirFailed(2, true)
	if f := fences(tr.Plan(c.img(), now.Add(100*time.Millisecond))); len(f) != 1 || f[0] != 2 {
		t.Fatalf("want broker 2 fenced for its failed log directory, got %v", f)
	}
	if tr.MayUnfence(2, b2.GetBrokerEpoch(), "inc") {
		t.Error("a broker whose log directory failed was allowed to unfence")
	}
	tr.LogDirFailed(2, false)
	if !tr.MayUnfence(2, b2.GetBrokerEpoch(), "inc") {
		t.Error("a broker whose log directory works again may unfence")
	}
	tr.Heartbeat(2, b2.GetBrokerEpoch(), now.Add(200*time.Millisecond))
	if f := fences(tr.Plan(c.img(), now.Add(300*time.Millisecond))); len(f) != 0 {
		t.Fatalf("fenced after its directory recovered: %v", f)
	}
}

func coordEvent(typ membership.EventType, role membership.Role, id int32, addr string) membership.Event {
	return membership.Event{Type: typ, Member: membership.Member{Name: "c", Meta: membership.Meta{Role: role, ID: id, GRPCAddr: addr}}}
}

func TestCoordinatorsAndInternalTopics(t *testing.T) {
	c := newCluster(t, 1, 2)
	tr := NewTracker(settings)
	now := time.Unix(1000, 0)
	tr.BecameLeader(now)
	if cmds := tr.Plan(c.img(), now); len(cmds) != 0 {
		t.Fatalf("two brokers, min three: nothing to do, got %v", cmds)
	}
	c.apply(&controllerv1.Command{Command: &controllerv1.Command_RegisterBroker{RegisterBroker: &controllerv1.RegisterBrokerRequest{BrokerId: 3, GrpcAddr: "a", IncarnationId: "i"}}})
	tr.Gossip(coordEvent(membership.EventJoin, membership.RoleGroupCoordinator, 7, "g7"))
	tr.Gossip(coordEvent(membership.EventJoin, membership.RoleTransactionCoordinator, 7, "x7"))
	cmds := tr.Plan(c.img(), now)
	if len(cmds) != 3 || cmds[0].GetCoordinatorChange() == nil || cmds[1].GetCoordinatorChange() == nil || cmds[2].GetCreateInternalTopics() == nil {
		t.Fatalf("want two coordinator changes and the internal topics, got %v", cmds)
	}
	for _, cmd := range cmds {
		c.apply(cmd)
	}
	if cmds := tr.Plan(c.img(), now); len(cmds) != 0 {
		t.Fatalf("all done, got %v", cmds)
	}
	if o, ok := c.img().CoordinatorFor(controllerv1.CoordinatorKind_COORDINATOR_KIND_GROUP, "g"); !ok || o.NodeID != 7 || o.GRPCAddr != "g7" {
		t.Fatalf("coordinator for g: %+v %v", o, ok)
	}
	// Death in gossip.
	tr.Gossip(coordEvent(membership.EventDead, membership.RoleGroupCoordinator, 7, "g7"))
	cmds = tr.Plan(c.img(), now)
	if len(cmds) != 1 || cmds[0].GetCoordinatorChange().GetCoordinator().GetAlive() {
		t.Fatalf("want coordinator 7 marked dead, got %v", cmds)
	}
	c.apply(cmds[0])
	// Back with a new incarnation, then restarted (another incarnation while
	// alive): each is a change, and the restart bumps the epochs of what it
	// owns.
	back := coordEvent(membership.EventJoin, membership.RoleGroupCoordinator, 7, "g7")
	back.Member.Meta.Incarnation = "i1"
	tr.Gossip(back)
	for _, cmd := range tr.Plan(c.img(), now) {
		c.apply(cmd)
	}
	a0, _ := c.img().Assignment(controllerv1.CoordinatorKind_COORDINATOR_KIND_GROUP, 0)
	back.Type, back.Member.Meta.Incarnation = membership.EventUpdate, "i2"
	tr.Gossip(back)
	cmds = tr.Plan(c.img(), now)
	if len(cmds) != 1 || cmds[0].GetCoordinatorChange().GetCoordinator().GetIncarnation() != "i2" {
		t.Fatalf("want the new incarnation recorded, got %v", cmds)
	}
	c.apply(cmds[0])
	if a1, _ := c.img().Assignment(controllerv1.CoordinatorKind_COORDINATOR_KIND_GROUP, 0); a1.GetCoordinatorEpoch() != a0.GetCoordinatorEpoch()+1 ||
		a1.GetOwner() != 7 || a1.GetProducerId() != a0.GetProducerId() {
		t.Fatalf("after a restart: %v, before %v", a1, a0)
	}
	back.Type = membership.EventDead
	tr.Gossip(back)
	for _, cmd := range tr.Plan(c.img(), now) {
		c.apply(cmd)
	}
	// A new leader that never heard of transaction coordinator 7 marks it
	// dead only after the grace period.
	tr2 := NewTracker(settings)
	tr2.BecameLeader(now)
	if cmds := tr2.Plan(c.img(), now.Add(time.Second)); len(cmds) != 0 {
		t.Fatalf("within the grace: %v", cmds)
	}
	cmds = tr2.Plan(c.img(), now.Add(6*time.Second))
	cmds = slices.DeleteFunc(cmds, func(c *controllerv1.Command) bool { return c.GetFenceBroker() != nil }) // no heartbeats here
	if len(cmds) != 1 || cmds[0].GetCoordinatorChange().GetCoordinator().GetKind() != controllerv1.CoordinatorKind_COORDINATOR_KIND_TRANSACTION {
		t.Fatalf("after the grace: %v", cmds)
	}
}

func TestBootstrapAndPreferred(t *testing.T) {
	tr := NewTracker(Settings{ClusterID: "dev", InternalTopicMinBrokers: 3})
	m := fsm.New()
	cmds := tr.Plan(m.Image(), time.Now())
	if len(cmds) != 1 || cmds[0].GetBootstrap().GetClusterId() != "dev" {
		t.Fatalf("want the bootstrap, got %v", cmds)
	}
	c := newCluster(t, 1, 2)
	c.apply(&controllerv1.Command{Command: &controllerv1.Command_CreateTopics{CreateTopics: &controllerv1.CreateTopicsRequest{
		Topics: []*controllerv1.CreatableTopic{{Name: "t", Partitions: 1, ReplicationFactor: 2}}}}})
	if len(tr.PreferredElections(c.img(), time.Now())) != 0 {
		t.Error("a fresh topic is led by its preferred replicas")
	}
	b1, _ := c.img().Broker(1)
	c.apply(&controllerv1.Command{Command: &controllerv1.Command_FenceBroker{FenceBroker: &controllerv1.FenceBrokerCommand{BrokerId: 1, BrokerEpoch: b1.GetBrokerEpoch()}}})
	c.apply(&controllerv1.Command{Command: &controllerv1.Command_UnfenceBroker{UnfenceBroker: &controllerv1.UnfenceBrokerCommand{BrokerId: 1, BrokerEpoch: b1.GetBrokerEpoch()}}})
	if len(tr.PreferredElections(c.img(), time.Now())) != 0 {
		t.Error("broker 1 is not back in the ISR yet")
	}
	p, _ := c.img().Partition("t", 0)
	b2, _ := c.img().Broker(2)
	c.apply(&controllerv1.Command{Command: &controllerv1.Command_AlterPartition{AlterPartition: &controllerv1.AlterPartitionRequest{BrokerId: 2, BrokerEpoch: b2.GetBrokerEpoch(),
		Partitions: []*controllerv1.PartitionIsrChange{{Topic: "t", Partition: 0, LeaderEpoch: p.GetLeaderEpoch(), PartitionEpoch: p.GetPartitionEpoch(), NewIsr: []int32{1, 2}}}}}})
	if got := tr.PreferredElections(c.img(), time.Now()); len(got) != 1 || got[0].GetTopic() != "t" || !slices.Equal(got[0].GetPartitions(), []int32{0}) {
		t.Errorf("broker 1 is back in the ISR: leadership should move back; got %v", got)
	}
	// Unless leadership was moved away from broker 1 a moment ago: a node
	// its followers could not reach does not get it back at once.
	b1, _ = c.img().Broker(1)
	tr.Moved(1, b1.GetBrokerEpoch(), time.Now())
	if got := tr.PreferredElections(c.img(), time.Now()); len(got) != 0 {
		t.Errorf("preferred election right after a move: %v", got)
	}
	if got := tr.PreferredElections(c.img(), time.Now().Add(6*time.Minute)); len(got) != 1 {
		t.Errorf("no preferred election once the hold-off passed: %v", got)
	}
	// A move from a broker that then crashed and registered again (a new
	// broker epoch) holds nothing off: its followers could not reach it
	// because it was down, and the new process is reachable.
	c.apply(&controllerv1.Command{Command: &controllerv1.Command_RegisterBroker{RegisterBroker: &controllerv1.RegisterBrokerRequest{
		BrokerId: 1, GrpcAddr: "b", IncarnationId: "inc-2"}}})
	if nb, _ := c.img().Broker(1); nb.GetBrokerEpoch() == b1.GetBrokerEpoch() {
		t.Fatalf("re-registration kept broker epoch %d", nb.GetBrokerEpoch())
	}
	p, _ = c.img().Partition("t", 0)
	c.apply(&controllerv1.Command{Command: &controllerv1.Command_AlterPartition{AlterPartition: &controllerv1.AlterPartitionRequest{BrokerId: 2, BrokerEpoch: b2.GetBrokerEpoch(),
		Partitions: []*controllerv1.PartitionIsrChange{{Topic: "t", Partition: 0, LeaderEpoch: p.GetLeaderEpoch(), PartitionEpoch: p.GetPartitionEpoch(), NewIsr: []int32{1, 2}}}}}})
	if p, _ = c.img().Partition("t", 0); p.GetLeader() != 2 || !slices.Contains(p.GetIsr(), 1) {
		t.Fatalf("want broker 1 back in the ISR under leader 2 after its restart, got %v", p)
	}
	if got := tr.PreferredElections(c.img(), time.Now()); len(got) != 1 {
		t.Errorf("a restarted broker is held off by a move from its previous registration: %v", got)
	}
}

// moves lists the MoveLeader commands of a plan as "topic/partition from->candidates".
func moves(cmds []*controllerv1.Command) []*controllerv1.MoveLeaderCommand {
	var out []*controllerv1.MoveLeaderCommand
	for _, c := range cmds {
		if m := c.GetMoveLeader(); m != nil {
			out = append(out, m)
		}
	}
	return out
}

func TestLeaderUnreachableFromItsFollowers(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ref := func(leader, epoch int32) []*controllerv1.UnreachableLeader {
		return []*controllerv1.UnreachableLeader{{Topic: "t", Partition: 0, Leader: leader, LeaderEpoch: epoch, SilentMs: 1500}}
	}
	for _, tc := range []struct {
		name string
		rf   int32
		// isr, when set, is the partition's ISR (the leader, broker 1, in it).
		isr     []int32
		reports map[int32][]*controllerv1.UnreachableLeader
		age     time.Duration // how old the reports are at Plan
		fence   int32         // a broker fenced before Plan
		// staleIncarnation: this reporter's report carries a broker epoch
		// that is not its current one.
		staleIncarnation int32
		want             []int32 // candidates of the MoveLeader; nil: no move
	}{
		{name: "both followers of three report", rf: 3, reports: map[int32][]*controllerv1.UnreachableLeader{2: ref(1, 0), 3: ref(1, 0)}, want: []int32{2, 3}},
		{name: "one follower of three is a minority", rf: 3, reports: map[int32][]*controllerv1.UnreachableLeader{2: ref(1, 0)}},
		{name: "the leader's own report does not count", rf: 3, reports: map[int32][]*controllerv1.UnreachableLeader{1: ref(1, 0), 2: ref(1, 0)}},
		{name: "a report for another leader epoch", rf: 3, reports: map[int32][]*controllerv1.UnreachableLeader{2: ref(1, 0), 3: ref(1, 7)}},
		{name: "a report naming another leader", rf: 3, reports: map[int32][]*controllerv1.UnreachableLeader{2: ref(1, 0), 3: ref(2, 0)}},
		{name: "a report from an older incarnation of the reporter", rf: 3, reports: map[int32][]*controllerv1.UnreachableLeader{2: ref(1, 0), 3: ref(1, 0)}, staleIncarnation: 3},
		{name: "stale reports", rf: 3, reports: map[int32][]*controllerv1.UnreachableLeader{2: ref(1, 0), 3: ref(1, 0)}, age: 3 * time.Second},
		{name: "a fenced reporter", rf: 3, reports: map[int32][]*controllerv1.UnreachableLeader{2: ref(1, 0), 3: ref(1, 0)}, fence: 3},
		{name: "an out-of-sync reporter does not count", rf: 3, isr: []int32{1, 2}, reports: map[int32][]*controllerv1.UnreachableLeader{2: ref(1, 0), 3: ref(1, 0)}},
		{name: "only out-of-sync reporters", rf: 3, isr: []int32{1}, reports: map[int32][]*controllerv1.UnreachableLeader{2: ref(1, 0), 3: ref(1, 0)}},
		{name: "two of two is no majority without the leader", rf: 2, reports: map[int32][]*controllerv1.UnreachableLeader{2: ref(1, 0)}},
		{name: "three of five", rf: 5, reports: map[int32][]*controllerv1.UnreachableLeader{2: ref(1, 0), 4: ref(1, 0), 5: ref(1, 0)}, want: []int32{2, 4, 5}},
		{name: "two of five", rf: 5, reports: map[int32][]*controllerv1.UnreachableLeader{2: ref(1, 0), 4: ref(1, 0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			brokers := []int32{1, 2, 3, 4, 5}[:tc.rf]
			c := newCluster(t, brokers...)
			c.apply(&controllerv1.Command{Command: &controllerv1.Command_CreateTopics{CreateTopics: &controllerv1.CreateTopicsRequest{
				Topics: []*controllerv1.CreatableTopic{{Name: "t", Partitions: 1, ReplicationFactor: tc.rf}}}}})
			if tc.isr != nil {
				p, _ := c.img().Partition("t", 0)
				b1, _ := c.img().Broker(1)
				c.apply(&controllerv1.Command{Command: &controllerv1.Command_AlterPartition{AlterPartition: &controllerv1.AlterPartitionRequest{BrokerId: 1, BrokerEpoch: b1.GetBrokerEpoch(),
					Partitions: []*controllerv1.PartitionIsrChange{{Topic: "t", Partition: 0, LeaderEpoch: p.GetLeaderEpoch(), PartitionEpoch: p.GetPartitionEpoch(), NewIsr: tc.isr}}}}})
			}
			if p, _ := c.img().Partition("t", 0); p.GetLeader() != 1 {
				t.Fatalf("leader %d, want 1", p.GetLeader())
			}
			tr := NewTracker(settings)
			tr.BecameLeader(t0)
			for id, refs := range tc.reports {
				b, _ := c.img().Broker(metadata.BrokerID(id))
				epoch := b.GetBrokerEpoch()
				if id == tc.staleIncarnation {
					epoch--
				}
				tr.Heartbeat(id, epoch, t0)
				tr.UnreachableLeaders(id, epoch, refs, t0)
			}
			if tc.fence != 0 {
				b, _ := c.img().Broker(metadata.BrokerID(tc.fence))
				c.apply(&controllerv1.Command{Command: &controllerv1.Command_FenceBroker{FenceBroker: &controllerv1.FenceBrokerCommand{BrokerId: tc.fence, BrokerEpoch: b.GetBrokerEpoch()}}})
			}
			got := moves(tr.Plan(c.img(), t0.Add(tc.age)))
			if tc.want == nil {
				if len(got) != 0 {
					t.Fatalf("moved: %v", got)
				}
				return
			}
			if len(got) != 1 || got[0].GetLeader() != 1 || got[0].GetLeaderEpoch() != 0 || !slices.Equal(got[0].GetCandidates(), tc.want) {
				t.Fatalf("moves %v, want one from broker 1 at epoch 0 to %v", got, tc.want)
			}
			// Applied, the partition has a new leader; the same reports no
			// longer match it.
			c.apply(&controllerv1.Command{Command: &controllerv1.Command_MoveLeader{MoveLeader: got[0]}})
			p, _ := c.img().Partition("t", 0)
			if p.GetLeader() != tc.want[0] || slices.Contains(p.GetIsr(), 1) || p.GetLeaderEpoch() != 1 {
				t.Fatalf("after the move: leader %d isr %v epoch %d", p.GetLeader(), p.GetIsr(), p.GetLeaderEpoch())
			}
			if again := moves(tr.Plan(c.img(), t0)); len(again) != 0 {
				t.Fatalf("moved again: %v", again)
			}
			// The old leader, cut off from the new one and out of the ISR,
			// reports it together with one follower: no majority of the ISR.
			old, _ := c.img().Broker(1)
			tr.UnreachableLeaders(1, old.GetBrokerEpoch(), ref(p.GetLeader(), p.GetLeaderEpoch()), t0)
			tr.UnreachableLeaders(tc.want[len(tc.want)-1], 0, nil, t0)
			if other := tc.want[len(tc.want)-1]; other != p.GetLeader() {
				ob, _ := c.img().Broker(metadata.BrokerID(other))
				tr.UnreachableLeaders(other, ob.GetBrokerEpoch(), ref(p.GetLeader(), p.GetLeaderEpoch()), t0)
			}
			if again := moves(tr.Plan(c.img(), t0)); len(again) != 0 && tc.rf == 3 {
				t.Fatalf("the ex-leader's report moved the new leader: %v", again)
			}
			// A new controller leader forgets every report.
			tr.BecameLeader(t0)
			if len(tr.unreachable) != 0 {
				t.Fatalf("reports kept across a leader change: %v", tr.unreachable)
			}
			for id, refs := range tc.reports {
				tr.UnreachableLeaders(id, 0, refs, t0)
			}
			// A heartbeat without reports withdraws them.
			for id := range tc.reports {
				tr.UnreachableLeaders(id, 0, nil, t0)
			}
			if len(tr.unreachable) != 0 {
				t.Fatalf("reports left: %v", tr.unreachable)
			}
		})
	}
}

// Due names the next moment Plan's answer can change by time alone, and
// Plan acting at that moment (not a millisecond before) is what makes it
// right: a loop that sleeps until Due misses no expiry.
func TestDueIsWhenPlanNextChanges(t *testing.T) {
	c := newCluster(t, 1, 2)
	b1, _ := c.img().Broker(1)
	b2, _ := c.img().Broker(2)
	t0 := time.Unix(1000, 0)
	ms := time.Millisecond
	// lead is the loop's first look as leader: Plan starts the session of
	// every broker it has not heard from.
	lead := func(tr *Tracker) { tr.BecameLeader(t0); tr.Plan(c.img(), t0) }
	for _, tc := range []struct {
		name  string
		setup func(tr *Tracker)
		now   time.Time
		want  time.Time // zero: nothing pending
	}{
		{"not leading, no sessions", func(*Tracker) {}, t0, time.Time{}},
		{"fresh leader: the sessions it started, before the coordinators' grace", lead, t0,
			t0.Add(settings.SessionTimeout + ms)},
		{"the older of two heartbeats", func(tr *Tracker) {
			lead(tr)
			tr.Heartbeat(1, b1.GetBrokerEpoch(), t0.Add(900*ms))
			tr.Heartbeat(2, b2.GetBrokerEpoch(), t0.Add(400*ms))
		}, t0.Add(time.Second), t0.Add(400*ms + settings.SessionTimeout + ms)},
		{"a session of another epoch does not count", func(tr *Tracker) {
			lead(tr)
			tr.Heartbeat(1, b1.GetBrokerEpoch(), t0.Add(900*ms))
			tr.Heartbeat(2, 999, t0.Add(400*ms))
		}, t0.Add(time.Second), t0.Add(900*ms + settings.SessionTimeout + ms)},
		{"expired sessions are past: the coordinators' grace is next", lead,
			t0.Add(3 * time.Second), t0.Add(settings.CoordinatorGrace + ms)},
		{"everything past", lead, t0.Add(time.Minute), time.Time{}},
		{"a broker whose directory failed is fenced already", func(tr *Tracker) {
			lead(tr)
			tr.Heartbeat(1, b1.GetBrokerEpoch(), t0.Add(900*ms))
			tr.Heartbeat(2, b2.GetBrokerEpoch(), t0.Add(400*ms))
			tr.LogDirFailed(2, true)
		}, t0.Add(time.Second), t0.Add(900*ms + settings.SessionTimeout + ms)},
	} {
		tr := NewTracker(settings)
		tc.setup(tr)
		got := tr.Due(c.img(), tc.now)
		if !got.Equal(tc.want) {
			t.Errorf("%s: due %v, want %v", tc.name, got.Sub(t0), tc.want.Sub(t0))
			continue
		}
		if got.IsZero() || got.Sub(t0) >= settings.CoordinatorGrace {
			continue
		}
		before := len(fences(tr.Plan(c.img(), got.Add(-ms))))
		if at := len(fences(tr.Plan(c.img(), got))); at <= before {
			t.Errorf("%s: Plan fences %d at the due moment, %d a millisecond before: want more", tc.name, at, before)
		}
	}
}

// A session is live while its broker epoch's last heartbeat is within the
// session timeout: what decides whether another process may take its id.
func TestSessionLive(t *testing.T) {
	tr := NewTracker(Settings{SessionTimeout: 2 * time.Second})
	t0 := time.Unix(1000, 0)
	tr.Heartbeat(4, 7, t0)
	for _, tc := range []struct {
		epoch  int64
		at     time.Duration
		live   bool
		silent time.Duration
	}{
		{7, time.Second, true, time.Second},
		{7, 2*time.Second - time.Millisecond, true, 2*time.Second - time.Millisecond},
		{7, 2 * time.Second, false, 2 * time.Second},
		{6, time.Second, false, 0}, // another registration's epoch
	} {
		if live, silent := tr.SessionLive(4, tc.epoch, t0.Add(tc.at)); live != tc.live || silent != tc.silent {
			t.Errorf("epoch %d at +%v: %v, %v; want %v, %v", tc.epoch, tc.at, live, silent, tc.live, tc.silent)
		}
	}
	if live, _ := tr.SessionLive(5, 7, t0); live {
		t.Error("a broker never heard from is live")
	}
}
