package group

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"skein/libs/errs"
	"skein/services/groupcoord/internal/assign"
)

func mustHeartbeat(t *testing.T, g *Group, req HeartbeatRequest, now time.Time) HeartbeatResponse {
	t.Helper()
	resp, _, err := g.Heartbeat(req, now)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestNextDeadline(t *testing.T) {
	g := New(testConfig(), "g")
	if !g.NextDeadline().IsZero() {
		t.Fatal("an empty group has a deadline")
	}
	g.SetTopics(map[string]int32{"t": 2})
	mustHeartbeat(t, g, HeartbeatRequest{MemberID: "a", Topics: []string{"t"}, SessionTimeout: 20 * time.Second}, epoch0)
	mustHeartbeat(t, g, HeartbeatRequest{MemberID: "b", Topics: []string{"t"}, RebalanceTimeout: 5 * time.Second}, epoch0.Add(time.Second))
	if got, want := g.NextDeadline(), epoch0.Add(11*time.Second); !got.Equal(want) {
		t.Fatalf("next deadline %v, want b's session end %v", got, want)
	}
	// a is asked to revoke at 2s (deadline 32s, the default rebalance
	// timeout) and its session now ends at 22s; b heartbeats at 3s, so b's
	// session end, 13s, comes first.
	mustHeartbeat(t, g, HeartbeatRequest{MemberID: "a", MemberEpoch: 1, Owned: assign.Partitions{}}, epoch0.Add(2*time.Second))
	mustHeartbeat(t, g, HeartbeatRequest{MemberID: "b", MemberEpoch: 2, Owned: assign.Partitions{}}, epoch0.Add(3*time.Second))
	if got, want := g.NextDeadline(), epoch0.Add(13*time.Second); !got.Equal(want) {
		t.Fatalf("next deadline %v, want %v", got, want)
	}
	if eff := g.Tick(g.NextDeadline().Add(-time.Nanosecond)); len(eff.Removed) != 0 {
		t.Fatalf("removed before the deadline: %+v", eff.Removed)
	}
	if eff := g.Tick(g.NextDeadline()); len(eff.Removed) != 1 || eff.Removed[0].Member != "b" || eff.Snapshot == nil {
		t.Fatalf("at the deadline: %+v", eff)
	}
}

// Touch keeps a heartbeating member's session alive without changing the
// group, and only for a heartbeat the group would take as its member's.
func TestTouch(t *testing.T) {
	g := New(testConfig(), "g")
	g.SetTopics(map[string]int32{"t": 2})
	mustHeartbeat(t, g, HeartbeatRequest{MemberID: "a", Topics: []string{"t"}, SessionTimeout: 10 * time.Second}, epoch0)
	mustHeartbeat(t, g, HeartbeatRequest{MemberID: "s", InstanceID: "i", Topics: []string{"t"}, SessionTimeout: 10 * time.Second}, epoch0)
	epochBefore := g.Epoch()
	later := epoch0.Add(8 * time.Second)
	for _, tc := range []struct {
		name string
		req  HeartbeatRequest
		want bool
	}{
		{"a heartbeat at the member's epoch", HeartbeatRequest{MemberID: "a", MemberEpoch: 1}, true},
		{"a static member's heartbeat", HeartbeatRequest{MemberID: "s", InstanceID: "i", MemberEpoch: 2}, true},
		{"a join", HeartbeatRequest{MemberID: "a", MemberEpoch: JoinEpoch}, false},
		{"a leave", HeartbeatRequest{MemberID: "a", MemberEpoch: LeaveEpoch}, false},
		{"an unknown member", HeartbeatRequest{MemberID: "z", MemberEpoch: 1}, false},
		{"a fenced epoch", HeartbeatRequest{MemberID: "a", MemberEpoch: 7}, false},
		{"another instance id", HeartbeatRequest{MemberID: "s", InstanceID: "j", MemberEpoch: 2}, false},
	} {
		if got := g.Touch(tc.req, later); got != tc.want {
			t.Errorf("%s: Touch = %v, want %v", tc.name, got, tc.want)
		}
	}
	if g.Epoch() != epochBefore {
		t.Fatalf("Touch moved the group epoch from %d to %d", epochBefore, g.Epoch())
	}
	// Both sessions now run from 8s: nothing expires at 10s, both at 18s.
	if eff := g.Tick(epoch0.Add(10 * time.Second)); len(eff.Removed) != 0 {
		t.Fatalf("removed at 10s after a touch at 8s: %+v", eff.Removed)
	}
	if eff := g.Tick(epoch0.Add(18 * time.Second)); len(eff.Removed) != 2 {
		t.Fatalf("at 18s: %+v, want both sessions expired", eff.Removed)
	}

	// A session already over is not renewed, even before the tick removes
	// the member.
	h := New(testConfig(), "h")
	h.SetTopics(map[string]int32{"t": 2})
	mustHeartbeat(t, h, HeartbeatRequest{MemberID: "a", Topics: []string{"t"}, SessionTimeout: 10 * time.Second}, epoch0)
	if h.Touch(HeartbeatRequest{MemberID: "a", MemberEpoch: 1}, epoch0.Add(10*time.Second)) {
		t.Fatal("Touch renewed a session that had run out")
	}
	if eff := h.Tick(epoch0.Add(10 * time.Second)); len(eff.Removed) != 1 {
		t.Fatalf("the expired member stayed: %+v", eff)
	}
}

func TestRestoreRefusesBrokenSnapshots(t *testing.T) {
	g := New(testConfig(), "g")
	g.SetTopics(map[string]int32{"t": 2})
	mustHeartbeat(t, g, HeartbeatRequest{MemberID: "a", Topics: []string{"t"}}, epoch0)
	mustHeartbeat(t, g, HeartbeatRequest{MemberID: "b", Topics: []string{"t"}}, epoch0)
	good := g.Snapshot()
	for name, breakIt := range map[string]func(s *Snapshot){
		"two holders":         func(s *Snapshot) { s.Members[1].Assigned = s.Members[0].Assigned.Clone() },
		"member epoch ahead":  func(s *Snapshot) { s.Members[0].Epoch = s.AssignmentEpoch + 1 },
		"duplicate member":    func(s *Snapshot) { s.Members[1].ID = s.Members[0].ID },
		"target not existing": func(s *Snapshot) { s.Members[0].Target = assign.Of(map[string][]int32{"t": {9}}) },
		"same instance twice": func(s *Snapshot) { s.Members[0].InstanceID, s.Members[1].InstanceID = "i", "i" },
	} {
		s := good
		s.Members = append([]MemberSnapshot(nil), good.Members...)
		breakIt(&s)
		if _, err := Restore(testConfig(), s, epoch0); errs.Of(err) != errs.UnknownServerError {
			t.Errorf("%s: Restore answered %v", name, err)
		}
	}
	if _, err := Restore(testConfig(), good, epoch0); err != nil {
		t.Fatal(err)
	}
}

// The shell picks the snapshot's encoding; JSON must at least round-trip.
func TestSnapshotJSON(t *testing.T) {
	g := New(testConfig(), "g")
	g.SetTopics(map[string]int32{"t": 3})
	mustHeartbeat(t, g, HeartbeatRequest{MemberID: "a", InstanceID: "i", Rack: "r1", Topics: []string{"t"}, Assignor: "range"}, epoch0)
	mustHeartbeat(t, g, HeartbeatRequest{MemberID: "b", Topics: []string{"t"}}, epoch0)
	mustHeartbeat(t, g, HeartbeatRequest{MemberID: "a", MemberEpoch: 1, Owned: assign.Partitions{}}, epoch0)
	s := g.Snapshot()
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Snapshot
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip:\n%+v\n%+v", s, back)
	}
}

// Example shows the calls a shell makes: a join, the heartbeat loop, a
// commit check, and the tick.
func Example() {
	g := New(DefaultConfig(), "orders-app")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g.SetTopics(map[string]int32{"orders": 4}) // from the metadata image

	// A join: the shell assigned the member id.
	resp, eff, err := g.Heartbeat(HeartbeatRequest{MemberID: "m-1", Topics: []string{"orders"}}, now)
	fmt.Println(resp.MemberEpoch, resp.Assignment, eff.Snapshot != nil, err)

	// A second member: m-1 is asked to revoke half, then confirms.
	g.Heartbeat(HeartbeatRequest{MemberID: "m-2", Topics: []string{"orders"}}, now)
	resp, _, _ = g.Heartbeat(HeartbeatRequest{MemberID: "m-1", MemberEpoch: 1, Owned: resp.Assignment}, now)
	fmt.Println(resp.MemberEpoch, resp.Assignment)
	resp, _, _ = g.Heartbeat(HeartbeatRequest{MemberID: "m-1", MemberEpoch: 1, Owned: resp.Assignment}, now)
	fmt.Println(resp.MemberEpoch, resp.Assignment)
	resp, _, _ = g.Heartbeat(HeartbeatRequest{MemberID: "m-2", MemberEpoch: 2, Owned: assign.Partitions{}}, now)
	fmt.Println(resp.MemberEpoch, resp.Assignment, g.State())

	// OffsetCommit: per partition.
	fmt.Println(g.CanCommit("m-2", 2, "orders", 3), errs.Of(g.CanCommit("m-2", 1, "orders", 3)).Name)

	// The clock: m-2 heartbeats on, m-1 stops.
	g.Heartbeat(HeartbeatRequest{MemberID: "m-2", MemberEpoch: 2, Owned: resp.Assignment}, now.Add(10*time.Second))
	eff = g.Tick(g.NextDeadline())
	fmt.Println(eff.Removed[0].Member, eff.Removed[0].Reason)
	// Output:
	// 1 orders:0,1,2,3 true <nil>
	// 1 orders:0,1
	// 2 orders:0,1
	// 2 orders:2,3 Stable
	// <nil> STALE_MEMBER_EPOCH
	// m-1 session expired: no heartbeat for 45s
}

// The ids a member names are bounded where the coordinator takes them, not
// only at the gateway: a client talking to the coordinator could otherwise
// grow the group's snapshot past what the offsets topic takes.
func TestHeartbeatBoundsTheIDs(t *testing.T) {
	g := New(testConfig(), "g")
	for _, tc := range []struct {
		name string
		req  HeartbeatRequest
		ok   bool
	}{
		{"Kafka's longest instance id", HeartbeatRequest{MemberID: "a", InstanceID: strings.Repeat("i", MaxInstanceIDLen)}, true},
		{"a longer instance id", HeartbeatRequest{MemberID: "b", InstanceID: strings.Repeat("i", MaxInstanceIDLen+1)}, false},
		{"an instance id with a slash", HeartbeatRequest{MemberID: "c", InstanceID: "ns/pod-0"}, false},
		{"an instance id with a NUL", HeartbeatRequest{MemberID: "d", InstanceID: "x\x00"}, false},
		{"a member id of 256 bytes", HeartbeatRequest{MemberID: MemberID(strings.Repeat("m", MaxMemberIDLen+1))}, false},
		{"a rack of 256 bytes", HeartbeatRequest{MemberID: "e", Rack: strings.Repeat("r", MaxRackLen+1)}, false},
	} {
		tc.req.Topics = []string{"t"}
		_, _, err := g.Heartbeat(tc.req, time.Unix(100, 0))
		if tc.ok != (err == nil) || (err != nil && errs.Of(err) != errs.InvalidRequest) {
			t.Errorf("%s: %v, want ok %v or INVALID_REQUEST", tc.name, err, tc.ok)
		}
	}
}
