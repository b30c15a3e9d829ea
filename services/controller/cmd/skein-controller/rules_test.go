package main

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"skein/libs/loopback"
	"skein/libs/membership"
	"skein/services/controller/internal/fsm"
	"skein/services/controller/internal/quorum"
)

// announcedRules reads the rules the peers announce in gossip: a controller
// of this build announces its own, one that announces none (an earlier
// build) and one gossip never saw are left out, as are members that are not
// controllers.
func TestAnnouncedRules(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	addrs := loopback.Addrs(t, 3)
	start := func(addr string, meta membership.Meta, seeds ...string) *membership.Node {
		t.Helper()
		n, err := membership.Start(membership.Config{BindAddr: addr, Seeds: seeds, Meta: meta, Logger: quiet, Timings: membership.FastTimings()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Kill() })
		return n
	}
	self := start(addrs[0], membership.Meta{Role: membership.RoleController, ID: 1, PlacementRule: fsm.MaxPlacementRule})
	start(addrs[1], membership.Meta{Role: membership.RoleController, ID: 2}, addrs[0])
	start(addrs[2], membership.Meta{Role: membership.RoleStorage, ID: 3, PlacementRule: fsm.MaxPlacementRule}, addrs[0])
	peers := []quorum.Peer{{ID: 1}, {ID: 2}, {ID: 3}, {ID: 4}}
	deadline := time.Now().Add(10 * time.Second)
	for len(self.Members()) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("gossip did not join: %v", self.Members())
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := announcedRules(self, peers)
	if len(got) != 1 || got[1] != fsm.MaxPlacementRule {
		t.Fatalf("announcedRules = %v, want only controller 1 at %d", got, fsm.MaxPlacementRule)
	}
	if got := fsm.ProposalRule([]int32{1, 2, 3, 4}, got); got != fsm.SpreadPlacement {
		t.Fatalf("with voters of earlier builds the rule is %d", got)
	}
	if got := announcedRules(nil, peers); got != nil {
		t.Fatalf("without gossip: %v", got)
	}
}
