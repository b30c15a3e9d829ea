package quorum

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/services/controller/internal/fsm"
)

// openOne opens a one-controller quorum with cfg's rule settings, closed
// when the test ends, and waits for it to lead.
func openOne(t *testing.T, cfg Config) *Node {
	t.Helper()
	peers := testPeers(t, 1)
	cfg.NodeID, cfg.Peers, cfg.DataDir, cfg.Logger = 1, peers, filepath.Join(t.TempDir(), "1"), quiet
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 300*time.Millisecond, 300*time.Millisecond, 150*time.Millisecond
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	waitLeader(t, n)
	return n
}

// lastRule answers the placement rule the node's last command names (the
// entries after it are barriers).
func lastRule(t *testing.T, n *Node) uint32 {
	t.Helper()
	var l raft.Log
	for i := n.raft.LastIndex(); ; i-- {
		if err := n.logs.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		if l.Type == raft.LogCommand {
			break
		}
	}
	var cmd controllerv1.Command
	if err := proto.Unmarshal(l.Data, &cmd); err != nil {
		t.Fatal(err)
	}
	return cmd.GetPlacementRule()
}

func TestLeaderProposesTheRuleEveryVoterApplies(t *testing.T) {
	var mu sync.Mutex
	var announced map[int32]uint32
	n := openOne(t, Config{AnnouncedRules: func() map[int32]uint32 {
		mu.Lock()
		defer mu.Unlock()
		return announced
	}})
	propose(t, n, &controllerv1.Command{Command: &controllerv1.Command_Bootstrap{Bootstrap: &controllerv1.BootstrapCommand{ClusterId: "c"}}})
	if got := lastRule(t, n); got != fsm.SpreadPlacement {
		t.Fatalf("with no voter heard from the leader proposed rule %d, want %d", got, fsm.SpreadPlacement)
	}
	mu.Lock()
	announced = map[int32]uint32{1: fsm.MaxPlacementRule}
	mu.Unlock()
	propose(t, n, registerCmd(1))
	if got := lastRule(t, n); got != fsm.MaxPlacementRule {
		t.Fatalf("with every voter announcing rule %d the leader proposed %d", fsm.MaxPlacementRule, got)
	}
	mu.Lock()
	announced = map[int32]uint32{1: fsm.SpreadPlacement}
	mu.Unlock()
	propose(t, n, registerCmd(2))
	if got := lastRule(t, n); got != fsm.SpreadPlacement {
		t.Fatalf("with a voter of an older rule the leader proposed %d", got)
	}
}

// A controller meeting an entry of a newer build's placement rule stops
// (Fatal) rather than apply it otherwise than the leader did.
func TestAnEntryOfANewerRuleStopsTheController(t *testing.T) {
	fatal := make(chan error, 1)
	n := openOne(t, Config{Fatal: func(err error) { fatal <- err }})
	propose(t, n, &controllerv1.Command{Command: &controllerv1.Command_Bootstrap{Bootstrap: &controllerv1.BootstrapCommand{ClusterId: "c"}}})
	cmd := registerCmd(1)
	cmd.PlacementRule = fsm.MaxPlacementRule + 1
	data, err := proto.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.raft.Apply(data, 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-fatal:
		if !errors.Is(err, fsm.ErrNewerRule) {
			t.Fatalf("Fatal(%v), want ErrNewerRule", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the controller went on past an entry of a newer rule")
	}
	if b := n.Image().Brokers(); len(b) != 0 {
		t.Fatalf("the entry was applied: brokers %v", b)
	}
}
