package liveness

import (
	"context"
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
	return fsm.Result{}, nil
}

// A follower's loop ticks slowly; winning leadership wakes it at once, and
// from then on it checks sessions every Tick: a broker that never
// heartbeats is fenced a session after the leadership began.
func TestLoopWakesOnLeadershipAndChecksSessionsWhileLeading(t *testing.T) {
	node := &fakeNode{c: newCluster(t, 1), leaderCh: make(chan bool, 1)}
	s := settings
	s.SessionTimeout = 100 * time.Millisecond
	l := New(Config{Settings: s, Tick: 10 * time.Millisecond, FollowerTick: time.Hour}, node)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx, nil) }()
	defer func() { cancel(); <-done }()

	time.Sleep(300 * time.Millisecond)
	if f := node.fenced(); len(f) != 0 {
		t.Fatalf("a follower fenced brokers: %v", f)
	}
	node.leader.Store(true)
	node.leaderCh <- true
	deadline := time.Now().Add(5 * time.Second)
	for len(node.fenced()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the new leader never fenced a broker with no heartbeat: it did not wake on leadership, or did not tick while leading")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if f := node.fenced(); len(f) != 1 || f[0] != 1 {
		t.Fatalf("fenced %v, want broker 1 once", f)
	}
}
