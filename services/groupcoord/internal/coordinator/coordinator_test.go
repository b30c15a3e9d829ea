package coordinator

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/services/groupcoord/internal/assign"
	"skein/services/groupcoord/internal/group"
	"skein/services/groupcoord/internal/offsetlog"
)

const nParts = 4

var topics = map[string]int32{"orders": 4, "audit": 1}

func testConfig(node int32) Config {
	var n atomic.Int64
	return Config{
		NodeID: node,
		Group: group.Config{MinSessionTimeout: 50 * time.Millisecond, DefaultSessionTimeout: 10 * time.Second,
			HeartbeatInterval: time.Second},
		WriteTimeout: 500 * time.Millisecond,
		LagInterval:  20 * time.Millisecond,
		NewMemberID:  func() string { return fmt.Sprintf("n%d-m%d", node, n.Add(1)) },
	}
}

// owning answers a view in which the node owns parts at epoch, producer id
// 100+partition.
func owning(epoch int32, parts ...int32) View {
	v := View{Partitions: nParts, Owned: map[int32]Ownership{}, Topics: topics}
	for _, p := range parts {
		v.Owned[p] = Ownership{Epoch: epoch, ProducerID: 100 + int64(p)}
	}
	return v
}

func all() []int32 { return []int32{0, 1, 2, 3} }

func start(t *testing.T, log Log, node int32, v View) *Coordinator {
	t.Helper()
	c := New(testConfig(node), log, nil)
	t.Cleanup(c.Close)
	c.OnMetadata(v)
	return c
}

// waitServing waits until the coordinator serves groupID's partition.
func waitServing(t *testing.T, c *Coordinator, groupID string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := c.partitionFor(groupID)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %q not served: %v", groupID, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func join(t *testing.T, c *Coordinator, groupID string, topics ...string) group.HeartbeatResponse {
	t.Helper()
	resp, err := c.Heartbeat(context.Background(), groupID, group.HeartbeatRequest{Topics: topics})
	if err != nil {
		t.Fatalf("join %s: %v", groupID, err)
	}
	return resp
}

func commit(c *Coordinator, groupID string, m group.MemberID, e group.Epoch, topic string, p int32, off int64) error {
	return c.CommitOffsets(context.Background(), groupID, m, e, []Commit{{Topic: topic, Partition: p, Offset: off, LeaderEpoch: 1}})[0]
}

func committed(t *testing.T, c *Coordinator, groupID, topic string, p int32) int64 {
	t.Helper()
	got, err := c.FetchOffsets(context.Background(), groupID, []assign.TopicPartition{{Topic: topic, Partition: p}}, false)
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", groupID, err)
	}
	return got[0].Offset
}

// waitLoaded waits until the coordinator serves n partitions.
func waitLoaded(t *testing.T, c *Coordinator, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(c.serving()) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d partitions loaded, want %d", len(c.serving()), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestJoinCommitFetch(t *testing.T) {
	c := start(t, newMemLog(), 1, owning(1, all()...))
	waitLoaded(t, c, nParts)
	resp := join(t, c, "app", "orders")
	if resp.MemberID == "" || resp.MemberEpoch != 1 || resp.Assignment.Count() != 4 {
		t.Fatalf("join: %+v", resp)
	}
	if err := commit(c, "app", resp.MemberID, resp.MemberEpoch, "orders", 2, 42); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, c, "app", "orders", 2); got != 42 {
		t.Fatalf("committed %d, want 42", got)
	}
	if got := committed(t, c, "app", "orders", 3); got != -1 {
		t.Fatalf("nothing committed: got %d, want -1", got)
	}
	// Per-partition refusals, the valid one committed.
	res := c.CommitOffsets(context.Background(), "app", resp.MemberID, resp.MemberEpoch, []Commit{
		{Topic: "orders", Partition: 1, Offset: 7},
		{Topic: "orders", Partition: 0, Offset: 1, Metadata: string(make([]byte, offsetlog.MaxMetadata+1))},
		{Topic: "nope", Partition: 0, Offset: 1},
		{Topic: "orders", Partition: 9, Offset: 1},
		{Topic: "audit", Partition: 0, Offset: 1}, // not subscribed, so not owned
	})
	want := []*errs.Error{errs.None, errs.OffsetMetadataTooLarge, errs.UnknownTopicOrPartition, errs.UnknownTopicOrPartition, errs.StaleMemberEpoch}
	for i, w := range want {
		if errs.Of(res[i]) != w && !(w == errs.None && res[i] == nil) {
			t.Errorf("commit %d: %v, want %s", i, res[i], w.Name)
		}
	}
	if err := commit(c, "app", resp.MemberID, resp.MemberEpoch-1, "orders", 1, 8); errs.Of(err) != errs.StaleMemberEpoch {
		t.Errorf("stale epoch: %v", err)
	}
	if err := commit(c, "app", "ghost", 1, "orders", 1, 8); errs.Of(err) != errs.UnknownMemberID {
		t.Errorf("unknown member: %v", err)
	}
	// The admin path: refused while the group has members.
	if err := commit(c, "app", "", -1, "orders", 1, 0); errs.Of(err) != errs.UnknownMemberID {
		t.Errorf("admin commit to a group with members: %v", err)
	}
	if err := c.DeleteGroup(context.Background(), "app"); errs.Of(err) != errs.NonEmptyGroup {
		t.Errorf("delete of a group with members: %v", err)
	}
	// Leave, then the admin path and delete work.
	if _, err := c.Heartbeat(context.Background(), "app", group.HeartbeatRequest{MemberID: resp.MemberID, MemberEpoch: group.LeaveEpoch}); err != nil {
		t.Fatal(err)
	}
	if err := commit(c, "app", "", -1, "orders", 1, 0); err != nil {
		t.Errorf("admin commit to an empty group: %v", err)
	}
	if got := committed(t, c, "app", "orders", 1); got != 0 {
		t.Errorf("reset offset: %d", got)
	}
	if ls := c.ListGroups(context.Background()); len(ls) != 1 || ls[0].State != group.Empty {
		t.Errorf("list: %+v", ls)
	}
	if err := c.DeleteGroup(context.Background(), "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DescribeGroup(context.Background(), "app"); errs.Of(err) != errs.GroupIDNotFound {
		t.Errorf("describe after delete: %v", err)
	}
	if got := committed(t, c, "app", "orders", 2); got != -1 {
		t.Errorf("offsets after delete: %d", got)
	}
	// Unknown groups.
	if _, err := c.Heartbeat(context.Background(), "other", group.HeartbeatRequest{MemberID: "x", MemberEpoch: 3}); errs.Of(err) != errs.UnknownMemberID {
		t.Errorf("heartbeat to an unknown group: %v", err)
	}
	if err := c.DeleteGroup(context.Background(), "other"); errs.Of(err) != errs.GroupIDNotFound {
		t.Errorf("delete of an unknown group: %v", err)
	}
	if _, err := c.Heartbeat(context.Background(), "", group.HeartbeatRequest{Topics: []string{"orders"}}); errs.Of(err) != errs.InvalidGroupID {
		t.Errorf("empty group id: %v", err)
	}
	// A refused join leaves no group behind.
	if _, err := c.Heartbeat(context.Background(), "refused", group.HeartbeatRequest{}); errs.Of(err) != errs.InvalidRequest {
		t.Errorf("join without topics: %v", err)
	}
	if _, err := c.DescribeGroup(context.Background(), "refused"); errs.Of(err) != errs.GroupIDNotFound {
		t.Errorf("a refused join created the group: %v", err)
	}
}

// TestLoad: a second coordinator taking the partitions over at a new epoch
// rebuilds every group and offset from the log, tombstones included.
func TestLoad(t *testing.T) {
	log := newMemLog()
	a := start(t, log, 1, owning(1, all()...))
	groups := []string{"g0", "g1", "g2", "g3", "g4", "gone"}
	members := map[string]group.HeartbeatResponse{}
	for i, g := range groups {
		waitServing(t, a, g)
		members[g] = join(t, a, g, "orders")
		if err := commit(a, g, members[g].MemberID, members[g].MemberEpoch, "orders", 0, int64(10*i)); err != nil {
			t.Fatal(err)
		}
		if err := commit(a, g, members[g].MemberID, members[g].MemberEpoch, "orders", 0, int64(10*i+1)); err != nil {
			t.Fatal(err)
		}
	}
	// A second member in g1: a snapshot with revocations pending.
	join(t, a, "g1", "orders")
	a.Heartbeat(context.Background(), "gone", group.HeartbeatRequest{MemberID: members["gone"].MemberID, MemberEpoch: group.LeaveEpoch})
	if err := a.DeleteGroup(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
	want := map[string]group.Description{}
	for _, g := range groups[:5] {
		d, err := a.DescribeGroup(context.Background(), g)
		if err != nil {
			t.Fatal(err)
		}
		want[g] = d
	}
	a.OnMetadata(owning(1)) // a gives everything up
	if _, err := a.partitionFor("g1"); errs.Of(err) != errs.NotCoordinator {
		t.Fatalf("after giving up: %v", err)
	}

	log.mu.Lock()
	log.hold = make(chan struct{})
	log.mu.Unlock()
	b := start(t, log, 2, owning(2, all()...))
	if _, err := b.Heartbeat(context.Background(), "g1", group.HeartbeatRequest{Topics: []string{"orders"}}); errs.Of(err) != errs.CoordinatorLoadInProgress {
		t.Fatalf("while loading: %v", err)
	}
	close(log.hold)
	for i, g := range groups[:5] {
		waitServing(t, b, g)
		d, err := b.DescribeGroup(context.Background(), g)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(d) != fmt.Sprint(want[g]) {
			t.Errorf("group %s:\n got %+v\nwant %+v", g, d, want[g])
		}
		if got := committed(t, b, g, "orders", 0); got != int64(10*i+1) {
			t.Errorf("group %s committed %d, want %d", g, got, 10*i+1)
		}
		// The member goes on at its epoch with the new coordinator.
		m := members[g]
		if _, err := b.Heartbeat(context.Background(), g, group.HeartbeatRequest{MemberID: m.MemberID, MemberEpoch: d.Members[0].Epoch, Owned: m.Assignment}); err != nil && g != "g1" {
			t.Errorf("heartbeat of %s at the new coordinator: %v", g, err)
		}
	}
	if _, err := b.DescribeGroup(context.Background(), "gone"); errs.Of(err) != errs.GroupIDNotFound {
		t.Errorf("a deleted group came back: %v", err)
	}
}

// TestFencing: an owner that missed its loss of ownership (paused, cut off)
// cannot write once the new owner loaded the partition: its commit is
// refused, it drops the partition, and the new owner never sees the commit.
func TestFencing(t *testing.T) {
	log := newMemLog()
	a := start(t, log, 1, owning(1, all()...))
	waitServing(t, a, "app")
	m := join(t, a, "app", "orders")
	if err := commit(a, "app", m.MemberID, m.MemberEpoch, "orders", 0, 5); err != nil {
		t.Fatal(err)
	}
	// b takes over; a's metadata has not caught up.
	b := start(t, log, 2, owning(2, all()...))
	waitServing(t, b, "app")
	if err := commit(a, "app", m.MemberID, m.MemberEpoch, "orders", 0, 6); errs.Of(err) != errs.NotCoordinator {
		t.Fatalf("the stale owner's commit: %v, want NOT_COORDINATOR", err)
	}
	if _, err := a.partitionFor("app"); errs.Of(err) != errs.NotCoordinator {
		t.Fatalf("the stale owner still serves the group: %v", err)
	}
	// A lagging metadata view that still names a as the owner at epoch 1
	// does not make it load (and write) again.
	a.OnMetadata(owning(1, all()...))
	if _, err := a.partitionFor("app"); errs.Of(err) != errs.NotCoordinator {
		t.Fatalf("reloaded at a fenced epoch: %v", err)
	}
	if got := committed(t, b, "app", "orders", 0); got != 5 {
		t.Fatalf("the new owner sees %d, want 5", got)
	}
	for _, e := range log.records(metadata.CoordinatorPartition("app", nParts)) {
		if k, _ := offsetlog.DecodeKey(e.Key); k.Kind == offsetlog.KindOffset {
			if o, _ := offsetlog.DecodeOffset(e.Value); o.Offset == 6 {
				t.Fatal("the fenced commit is in the log")
			}
		}
	}
}

// TestFailedWrites: a refused write changes nothing; a write of unknown
// outcome is settled (sent again, same sequence) before the next one.
func TestFailedWrites(t *testing.T) {
	log := newMemLog()
	c := start(t, log, 1, owning(1, all()...))
	waitLoaded(t, c, nParts)
	m := join(t, c, "app", "orders")

	// Refused outright: the join of a second member is undone.
	log.failWith(memFailure{err: errs.Errorf(errs.MessageTooLarge, "injected")})
	if _, err := c.Heartbeat(context.Background(), "app", group.HeartbeatRequest{Topics: []string{"orders"}}); errs.Of(err) != errs.MessageTooLarge {
		t.Fatalf("join with a failed write: %v", err)
	}
	d, _ := c.DescribeGroup(context.Background(), "app")
	if len(d.Members) != 1 || d.Epoch != 1 {
		t.Fatalf("the failed join stayed: %+v", d)
	}
	log.failWith(memFailure{err: errs.Errorf(errs.MessageTooLarge, "injected")})
	if err := commit(c, "app", m.MemberID, m.MemberEpoch, "orders", 0, 9); errs.Of(err) != errs.MessageTooLarge {
		t.Fatalf("commit with a failed write: %v", err)
	}
	if got := committed(t, c, "app", "orders", 0); got != -1 {
		t.Fatalf("a refused commit is visible: %d", got)
	}

	// Unknown outcome: it was appended, but the answer was lost.
	log.failWith(memFailure{err: errs.Errorf(errs.RequestTimedOut, "injected"), appended: true})
	if err := commit(c, "app", m.MemberID, m.MemberEpoch, "orders", 0, 10); errs.Of(err) != errs.RequestTimedOut {
		t.Fatalf("commit of unknown outcome: %v", err)
	}
	if err := commit(c, "app", m.MemberID, m.MemberEpoch, "orders", 1, 20); err != nil {
		t.Fatalf("commit after one of unknown outcome: %v", err)
	}
	if got := committed(t, c, "app", "orders", 0); got != 10 {
		t.Fatalf("the settled commit: %d, want 10", got)
	}
	// Unknown outcome, not appended: sent again, then written once.
	log.failWith(memFailure{err: errs.Errorf(errs.NotEnoughReplicas, "injected")})
	if err := commit(c, "app", m.MemberID, m.MemberEpoch, "orders", 2, 30); errs.Of(err) != errs.NotEnoughReplicas {
		t.Fatalf("commit refused for lack of replicas: %v", err)
	}
	if err := commit(c, "app", m.MemberID, m.MemberEpoch, "orders", 3, 40); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, c, "app", "orders", 2); got != 30 {
		t.Fatalf("the resent commit: %d, want 30", got)
	}
	// The log agrees: a new owner sees the same.
	b := start(t, log, 2, owning(2, all()...))
	waitServing(t, b, "app")
	for p, want := range map[int32]int64{0: 10, 1: 20, 2: 30, 3: 40} {
		if got := committed(t, b, "app", "orders", p); got != want {
			t.Errorf("partition %d at the new owner: %d, want %d", p, got, want)
		}
	}
}

// A member that keeps heartbeating while its partition of the log cannot
// be written (a write of unknown outcome waits to be settled) is not
// expired once the log comes back: only its writes waited, not its
// liveness.
func TestHeartbeatsThroughAWriteOutageKeepTheMember(t *testing.T) {
	log := newMemLog()
	c := start(t, log, 1, owning(1, all()...))
	waitLoaded(t, c, nParts)
	other := ""
	for i := 0; other == ""; i++ { // another group on the same partition
		if g := fmt.Sprintf("other-%d", i); metadata.CoordinatorPartition(g, nParts) == metadata.CoordinatorPartition("app", nParts) {
			other = g
		}
	}
	m, err := c.Heartbeat(context.Background(), "app", group.HeartbeatRequest{Topics: []string{"orders"}, SessionTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The other group's commit meets an outage: its outcome is unknown,
	// and every event of the partition waits for it to be settled.
	outage := make([]memFailure, 100000)
	for i := range outage {
		outage[i] = memFailure{err: errs.Errorf(errs.NotEnoughReplicas, "injected")}
	}
	log.failWith(outage...)
	if err := commit(c, other, "", -1, "orders", 0, 7); errs.Of(err) != errs.NotEnoughReplicas {
		t.Fatalf("commit during the outage: %v", err)
	}
	end := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(end) {
		if _, err := c.Heartbeat(context.Background(), "app", group.HeartbeatRequest{MemberID: m.MemberID, MemberEpoch: m.MemberEpoch}); err == nil {
			t.Fatal("a heartbeat was written during the outage")
		}
		time.Sleep(100 * time.Millisecond)
	}
	log.clearFailures()
	deadline := time.Now().Add(5 * time.Second)
	for committed(t, c, other, "orders", 0) != 7 {
		if time.Now().After(deadline) {
			t.Fatal("the commit of unknown outcome was not settled after the outage")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the partition's tick after the settle
	d, err := c.DescribeGroup(context.Background(), "app")
	if err != nil || len(d.Members) != 1 || d.Members[0].ID != m.MemberID {
		t.Fatalf("after the outage: %+v %v, want the member that kept heartbeating", d, err)
	}
	if _, err := c.Heartbeat(context.Background(), "app", group.HeartbeatRequest{MemberID: m.MemberID, MemberEpoch: m.MemberEpoch}); err != nil {
		t.Fatalf("a heartbeat after the outage: %v", err)
	}
}

// TestSessionExpiry: the partition's goroutine ticks the group at its
// deadline and writes the result.
func TestSessionExpiry(t *testing.T) {
	log := newMemLog()
	c := start(t, log, 1, owning(1, all()...))
	waitServing(t, c, "app")
	if _, err := c.Heartbeat(context.Background(), "app", group.HeartbeatRequest{Topics: []string{"orders"}, SessionTimeout: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	// The expiry is in the log: the group's newest snapshot has no member.
	deadline := time.Now().Add(3 * time.Second)
	for {
		var last *group.Snapshot
		for _, e := range log.records(metadata.CoordinatorPartition("app", nParts)) {
			if k, _ := offsetlog.DecodeKey(e.Key); k.Kind == offsetlog.KindGroup && k.Group == "app" {
				s, err := offsetlog.DecodeGroup("app", e.Value)
				if err != nil {
					t.Fatal(err)
				}
				last = &s
			}
		}
		if last != nil && len(last.Members) == 0 && last.Epoch == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the member did not expire: %+v", last)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d, _ := c.DescribeGroup(context.Background(), "app"); d.State != group.Empty {
		t.Fatalf("after the expiry: %+v", d)
	}
	b := start(t, log, 2, owning(2, all()...))
	waitServing(t, b, "app")
	if d, _ := b.DescribeGroup(context.Background(), "app"); d.State != group.Empty || d.Epoch != 2 {
		t.Fatalf("the expiry was not written: %+v", d)
	}
}

// TestOwnership: groups of partitions not owned answer NOT_COORDINATOR;
// a topic change reaches the groups and is written.
func TestOwnership(t *testing.T) {
	log := newMemLog()
	p := metadata.CoordinatorPartition("app", nParts)
	c := start(t, log, 1, owning(1, p))
	waitServing(t, c, "app")
	var other string
	for i := 0; other == ""; i++ {
		if g := fmt.Sprint("g", i); metadata.CoordinatorPartition(g, nParts) != p {
			other = g
		}
	}
	if _, err := c.Heartbeat(context.Background(), other, group.HeartbeatRequest{Topics: []string{"orders"}}); errs.Of(err) != errs.NotCoordinator {
		t.Fatalf("a group of another partition: %v", err)
	}
	join(t, c, "app", "orders")
	v := owning(1, p)
	v.Topics = map[string]int32{"orders": 6}
	c.OnMetadata(v)
	deadline := time.Now().Add(3 * time.Second)
	for {
		d, _ := c.DescribeGroup(context.Background(), "app")
		if d.Epoch == 2 && d.Members[0].Target.Count() == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the topic change did not reach the group: %+v", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := (&Coordinator{}).partitionFor("app"); errs.Of(err) != errs.CoordinatorNotAvailable {
		t.Errorf("before __consumer_offsets exists: %v", err)
	}
}
