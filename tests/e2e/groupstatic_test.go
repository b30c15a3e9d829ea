//go:build integration

package e2e

import (
	"slices"
	"testing"
	"time"
)

// A static member (joined with an instance id) that leaves over REST
// leaves for now, as a Kafka consumer with a group.instance.id does on
// close: its partitions wait for it, and a member joining with its
// instance id takes them back at once, with no rebalance.
func TestStaticMemberTakesItsPartitionsBack(t *testing.T) {
	d := devCluster(t)
	c := restClient(d)
	ctx := testCtx(t, 2*time.Minute)
	const topic, group = "e2e-static", "e2e-static-group"
	createTopic(ctx, t, c, topic, 4, 3, nil)

	join := func(instance, id string) restMember {
		t.Helper()
		var m restMember
		if err := callRetrying(ctx, t, c, "POST", "/v1/groups/"+group+"/members", map[string]any{"topics": []string{topic},
			"instance_id": instance, "member_id": id, "session_timeout_ms": 60000}, &m); err != nil {
			t.Fatalf("join as %s: %v", instance, err)
		}
		return m
	}
	// fetch is one heartbeat of m: it answers the partitions m owns.
	fetch := func(m *restMember) []int32 {
		t.Helper()
		var f groupFetch
		if err := callRetrying(ctx, t, c, "POST", "/v1/groups/"+group+"/members/"+m.ID+"/records",
			map[string]any{"member_epoch": m.Epoch, "max_records": 1, "max_wait_ms": 100}, &f); err != nil {
			t.Fatalf("fetch of %s: %v", m.ID, err)
		}
		m.Epoch = f.MemberEpoch
		var owned []int32
		for _, p := range f.Positions {
			owned = append(owned, p.Partition)
		}
		slices.Sort(owned)
		return owned
	}
	groupEpoch := func() int32 {
		t.Helper()
		var g struct {
			GroupEpoch int32 `json:"group_epoch"`
		}
		if err := callRetrying(ctx, t, c, "GET", "/v1/groups/"+group, nil, &g); err != nil {
			t.Fatal(err)
		}
		return g.GroupEpoch
	}

	a, b := join("instance-a", "static-a1"), join("instance-b", "static-b1")
	var ownedA, ownedB []int32
	for deadline := time.Now().Add(45 * time.Second); ; {
		ownedA, ownedB = fetch(&a), fetch(&b)
		if len(ownedA) == 2 && len(ownedB) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the two members never split the 4 partitions: %v and %v", ownedA, ownedB)
		}
		time.Sleep(200 * time.Millisecond)
	}
	epoch := groupEpoch()
	if err := c.Call(ctx, "DELETE", "/v1/groups/"+group+"/members/"+a.ID, nil, nil); err != nil {
		t.Fatalf("the static member's leave: %v", err)
	}
	// Its partitions are not handed to the other member meanwhile.
	for range 5 {
		if got := fetch(&b); !slices.Equal(got, ownedB) {
			t.Fatalf("while the static member is away, the other owns %v, want %v", got, ownedB)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Back under a new member id: the same partitions, the same group epoch.
	a2 := join("instance-a", "static-a2")
	if got := fetch(&a2); !slices.Equal(got, ownedA) {
		t.Errorf("the static member back owns %v, want its %v", got, ownedA)
	}
	if got := groupEpoch(); got != epoch {
		t.Errorf("group epoch %d after the static member came back, want %d (no rebalance)", got, epoch)
	}
	if got := fetch(&b); !slices.Equal(got, ownedB) {
		t.Errorf("the other member owns %v after the return, want %v", got, ownedB)
	}
}
