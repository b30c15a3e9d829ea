package liveness

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/metadata"
	"skein/services/controller/internal/fsm"
)

// fakeNode is a Raft node whose leadership the test flips.
type fakeNode struct {
	c        *cluster
	leader   atomic.Bool
	leaderCh chan bool

	mu       sync.Mutex
	proposed []*controllerv1.Command
	// afterPropose, when set, runs after each proposal is applied, under mu.
	afterPropose func(cmd *controllerv1.Command)
}

func (n *fakeNode) IsLeader() bool                { return n.leader.Load() }
func (n *fakeNode) LeaderCh() <-chan bool         { return n.leaderCh }
func (n *fakeNode) Barrier(time.Duration) error   { return nil }
func (n *fakeNode) Read(fn func(*metadata.Image)) { n.mu.Lock(); defer n.mu.Unlock(); fn(n.c.img()) }
func (n *fakeNode) fenced() []int32               { n.mu.Lock(); defer n.mu.Unlock(); return fences(n.proposed) }
func (n *fakeNode) Propose(_ context.Context, cmd *controllerv1.Command) (fsm.Result, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.proposed = append(n.proposed, cmd)
	n.c.apply(cmd)
	if n.afterPropose != nil {
		n.afterPropose(cmd)
	}
	return fsm.Result{}, nil
}

// runLoop runs a loop on node until the test ends.
func runLoop(t *testing.T, cfg Config, node Node) *Loop {
	l := New(cfg, node)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx, nil) }()
	t.Cleanup(func() { cancel(); <-done })
	return l
}

// A follower's loop sleeps; winning leadership wakes it at once, and the
// moment a session runs out wakes it again: a broker that never heartbeats
// is fenced a session after the leadership began, though neither Tick nor
// Idle ever fires, and not before.
func TestLoopWakesOnLeadershipAndWhenASessionRunsOut(t *testing.T) {
	node := &fakeNode{c: newCluster(t, 1), leaderCh: make(chan bool, 1)}
	s := settings
	s.SessionTimeout = 200 * time.Millisecond
	runLoop(t, Config{Settings: s, Tick: time.Hour, Idle: time.Hour}, node)

	time.Sleep(300 * time.Millisecond)
	if f := node.fenced(); len(f) != 0 {
		t.Fatalf("a follower fenced brokers: %v", f)
	}
	won := time.Now()
	node.leader.Store(true)
	node.leaderCh <- true
	deadline := won.Add(5 * time.Second)
	for len(node.fenced()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the new leader never fenced a broker with no heartbeat: it did not wake on leadership, or not when the session ran out")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if took := time.Since(won); took < s.SessionTimeout {
		t.Fatalf("fenced %v after leadership began, before the %v session ran out", took, s.SessionTimeout)
	}
	if f := node.fenced(); len(f) != 1 || f[0] != 1 {
		t.Fatalf("fenced %v, want broker 1 once", f)
	}
}

// Heartbeats keep a session alive however long the leader sleeps between
// them; when they stop, the broker is fenced a session after the last one.
func TestLoopFencesASessionAfterItsLastHeartbeat(t *testing.T) {
	node := &fakeNode{c: newCluster(t, 1), leaderCh: make(chan bool, 1)}
	s := settings
	s.SessionTimeout = 150 * time.Millisecond
	l := runLoop(t, Config{Settings: s, Tick: time.Hour, Idle: time.Hour}, node)
	var epoch int64
	node.Read(func(img *metadata.Image) { b, _ := img.Broker(1); epoch = b.GetBrokerEpoch() })
	node.leader.Store(true)
	node.leaderCh <- true
	for range 10 { // 500 ms of heartbeats, each well inside the session
		l.Heartbeat(1, epoch)
		time.Sleep(50 * time.Millisecond)
	}
	if f := node.fenced(); len(f) != 0 {
		t.Fatalf("fenced %v while it heartbeated", f)
	}
	last := time.Now()
	l.Heartbeat(1, epoch)
	for len(node.fenced()) == 0 {
		if time.Since(last) > 5*time.Second {
			t.Fatal("the broker was never fenced after its heartbeats stopped")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if took := time.Since(last); took < s.SessionTimeout {
		t.Fatalf("fenced %v after the last heartbeat, inside the %v session", took, s.SessionTimeout)
	}
}

// A leader its followers could not reach loses its leaderships and is held
// off its preferred ones for a while, at the broker epoch it had when the
// move was planned. When it registers again right after the move is
// committed, before the loop looks at the metadata again, the new
// incarnation is not held off: it gets its preferred leadership back at
// the next check.
func TestMoveHoldsOffOnlyTheIncarnationMovedFrom(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	c.apply(&controllerv1.Command{Command: &controllerv1.Command_CreateTopics{CreateTopics: &controllerv1.CreateTopicsRequest{
		Topics: []*controllerv1.CreatableTopic{{Name: "t", Partitions: 1, ReplicationFactor: 3}}}}})
	if p, _ := c.img().Partition("t", 0); p.GetLeader() != 1 {
		t.Fatalf("leader %d, want 1", p.GetLeader())
	}
	node := &fakeNode{c: c, leaderCh: make(chan bool, 1)}
	node.afterPropose = func(cmd *controllerv1.Command) {
		if cmd.GetMoveLeader() != nil {
			c.apply(&controllerv1.Command{Command: &controllerv1.Command_RegisterBroker{RegisterBroker: &controllerv1.RegisterBrokerRequest{
				BrokerId: 1, GrpcAddr: "b", IncarnationId: "inc-2"}}})
		}
	}
	s := settings
	s.SessionTimeout = time.Hour
	l := runLoop(t, Config{Settings: s, Tick: 10 * time.Millisecond, Idle: time.Hour, LeaderImbalanceCheckInterval: 20 * time.Millisecond}, node)
	node.leader.Store(true)
	node.leaderCh <- true
	time.Sleep(100 * time.Millisecond) // reports before leadership are forgotten

	proposedOf := func(pick func(*controllerv1.Command) bool) int {
		node.mu.Lock()
		defer node.mu.Unlock()
		n := 0
		for _, cmd := range node.proposed {
			if pick(cmd) {
				n++
			}
		}
		return n
	}
	node.Read(func(img *metadata.Image) {
		for _, id := range []int32{2, 3} {
			b, _ := img.Broker(metadata.BrokerID(id))
			l.Heartbeat(id, b.GetBrokerEpoch())
			l.UnreachableLeaders(id, b.GetBrokerEpoch(), []*controllerv1.UnreachableLeader{{Topic: "t", Partition: 0, Leader: 1, LeaderEpoch: 0, SilentMs: 1500}})
		}
	})
	deadline := time.Now().Add(5 * time.Second)
	for proposedOf(func(c *controllerv1.Command) bool { return c.GetMoveLeader() != nil }) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("leadership was never moved from the unreachable leader")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The new incarnation catches up and is back in the ISR.
	node.mu.Lock()
	p, _ := c.img().Partition("t", 0)
	if p.GetLeader() == 1 || slices.Contains(p.GetIsr(), 1) {
		node.mu.Unlock()
		t.Fatalf("after the move: %v", p)
	}
	lb, _ := c.img().Broker(metadata.BrokerID(p.GetLeader()))
	c.apply(&controllerv1.Command{Command: &controllerv1.Command_AlterPartition{AlterPartition: &controllerv1.AlterPartitionRequest{BrokerId: p.GetLeader(), BrokerEpoch: lb.GetBrokerEpoch(),
		Partitions: []*controllerv1.PartitionIsrChange{{Topic: "t", Partition: 0, LeaderEpoch: p.GetLeaderEpoch(), PartitionEpoch: p.GetPartitionEpoch(), NewIsr: append(slices.Clone(p.GetIsr()), 1)}}}}})
	node.mu.Unlock()
	for proposedOf(func(c *controllerv1.Command) bool { return c.GetElectLeaders() != nil }) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the re-registered broker was held off its preferred leadership by the move from its previous incarnation")
		}
		time.Sleep(10 * time.Millisecond)
	}
	node.mu.Lock()
	defer node.mu.Unlock()
	if p, _ := c.img().Partition("t", 0); p.GetLeader() != 1 {
		t.Fatalf("after the preferred election: %v", p)
	}
}
