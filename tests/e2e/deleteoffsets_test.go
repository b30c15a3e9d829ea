//go:build integration

package e2e

import (
	"fmt"
	"maps"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestDeleteOffsets: Kafka's OffsetDelete over REST on a real cluster. A
// member commits; deleting the offsets of the topic it reads keeps them
// (GROUP_SUBSCRIBED_TO_TOPIC); once it left they go, partition by
// partition, the group's coordinator SIGKILLed in between does not bring
// one back, the description no longer lists them, and a new member starts
// from its auto_offset_reset rather than from the deleted offsets.
func TestDeleteOffsets(t *testing.T) {
	d := ownDev(t)
	c := restClient(d)
	ctx := testCtx(t, 4*time.Minute)
	const topic, group = "e2e-deloffs", "e2e-deloffs-group"
	createTopic(ctx, t, c, topic, 2, 3, map[string]string{"min.insync.replicas": "2"})
	var recs []ProduceRecord
	for p := range int32(2) {
		for i := range 5 {
			recs = append(recs, ProduceRecord{Value: ptr(fmt.Sprintf("%d-%d", p, i)), Partition: ptr(p)})
		}
	}
	var pr ProduceResponse
	if err := c.Call(ctx, "POST", "/v1/topics/"+topic+"/records", ProduceRequest{Records: recs}, &pr); err != nil {
		t.Fatal(err)
	}
	for _, r := range pr.Results {
		if r.ErrorCode != "NONE" {
			t.Fatalf("produce: %+v", r)
		}
	}

	join := func() restMember {
		t.Helper()
		var m restMember
		if err := callRetrying(ctx, t, c, "POST", "/v1/groups/"+group+"/members",
			map[string]any{"topics": []string{topic}, "auto_offset_reset": "earliest", "session_timeout_ms": 60000}, &m); err != nil {
			t.Fatalf("join: %v", err)
		}
		return m
	}
	// firstRead fetches as m until it has read from both partitions, and
	// answers the first offset it read of each.
	firstRead := func(m *restMember) map[int32]int64 {
		t.Helper()
		first := map[int32]int64{}
		var positions []restPosition
		for deadline := time.Now().Add(30 * time.Second); len(first) < 2; {
			if time.Now().After(deadline) {
				t.Fatalf("the member read only %v within 30 s", first)
			}
			var f groupFetch
			body := map[string]any{"member_epoch": m.Epoch, "max_wait_ms": 500}
			if positions != nil {
				body["positions"] = positions
			}
			if err := callRetrying(ctx, t, c, "POST", "/v1/groups/"+group+"/members/"+m.ID+"/records", body, &f); err != nil {
				t.Fatalf("fetch: %v", err)
			}
			m.Epoch, positions = f.MemberEpoch, f.Positions
			for _, r := range f.Records {
				if _, ok := first[r.Partition]; !ok {
					first[r.Partition] = int64(r.Offset)
				}
			}
		}
		return first
	}
	committed := func() map[int32]int64 {
		t.Helper()
		var out struct {
			Offsets []restPosition `json:"offsets"`
		}
		if err := callRetrying(ctx, t, c, "GET", "/v1/groups/"+group+"/offsets", nil, &out); err != nil {
			t.Fatalf("offsets: %v", err)
		}
		got := map[int32]int64{}
		for _, o := range out.Offsets {
			if o.Topic == topic {
				got[o.Partition] = int64(o.Offset)
			}
		}
		return got
	}
	type result struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		ErrorCode string `json:"error_code"`
		Message   string `json:"message"`
	}
	deleteOffsets := func(query string) []string {
		t.Helper()
		var out struct {
			Results []result `json:"results"`
		}
		if err := callRetrying(ctx, t, c, "DELETE", "/v1/groups/"+group+"/offsets?"+query, nil, &out); err != nil {
			t.Fatalf("delete offsets ?%s: %v", query, err)
		}
		var got []string
		for _, r := range out.Results {
			if r.Topic != topic || (r.ErrorCode != "NONE" && r.Message == "") {
				t.Errorf("delete offsets ?%s answered %+v", query, r)
			}
			got = append(got, fmt.Sprintf("%d=%s", r.Partition, r.ErrorCode))
		}
		return got
	}

	// A member reads from the start and commits 3 and 4.
	m := join()
	if got := firstRead(&m); !maps.Equal(got, map[int32]int64{0: 0, 1: 0}) {
		t.Fatalf("the first member started at %v, want 0 on both (earliest)", got)
	}
	if err := callRetrying(ctx, t, c, "POST", "/v1/groups/"+group+"/offsets", map[string]any{"member_id": m.ID, "member_epoch": m.Epoch,
		"offsets": []map[string]any{{"topic": topic, "partition": 0, "offset": 3}, {"topic": topic, "partition": 1, "offset": 4}}}, nil); err != nil {
		t.Fatalf("commit: %v", err)
	}
	want := map[int32]int64{0: 3, 1: 4}
	if got := committed(); !maps.Equal(got, want) {
		t.Fatalf("committed %v, want %v", got, want)
	}

	// While it reads the topic, its offsets stay.
	if got := deleteOffsets("topic=" + topic); !slices.Equal(got, []string{"0=GROUP_SUBSCRIBED_TO_TOPIC", "1=GROUP_SUBSCRIBED_TO_TOPIC"}) {
		t.Fatalf("delete of the active group's topic: %v", got)
	}
	if got := committed(); !maps.Equal(got, want) {
		t.Fatalf("committed after the refused deletion: %v, want %v", got, want)
	}

	// Once it left, partition 0's offset goes, and stays gone when the
	// group's coordinator is SIGKILLed and another one loads the group.
	if err := callRetrying(ctx, t, c, "DELETE", "/v1/groups/"+group+"/members/"+m.ID, nil, nil); err != nil {
		t.Fatalf("leave: %v", err)
	}
	if got := deleteOffsets("topic=" + topic + "&partition=0"); !slices.Equal(got, []string{"0=NONE"}) {
		t.Fatalf("delete of partition 0 in the empty group: %v", got)
	}
	want = map[int32]int64{1: 4}
	if got := committed(); !maps.Equal(got, want) {
		t.Fatalf("committed after deleting partition 0: %v, want %v", got, want)
	}
	owner := groupOwner(t, d, group)
	if err := syscall.Kill(owner.PID, syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL %s-%d: %v", owner.Role, owner.ID, err)
	}
	t.Logf("SIGKILLed the group's coordinator, %s-%d (pid %d)", owner.Role, owner.ID, owner.PID)
	if got := committed(); !maps.Equal(got, want) {
		t.Fatalf("committed at the next coordinator: %v, want %v", got, want)
	}

	// The rest of the topic, at the new coordinator: no offset is left to
	// list, and the group is still there, empty.
	if got := deleteOffsets("topic=" + topic); !slices.Equal(got, []string{"0=NONE", "1=NONE"}) {
		t.Fatalf("delete of the whole topic: %v", got)
	}
	if got := committed(); len(got) != 0 {
		t.Fatalf("committed after deleting the topic's offsets: %v", got)
	}
	var desc struct {
		State   string         `json:"state"`
		Offsets []restPosition `json:"offsets"`
	}
	if err := callRetrying(ctx, t, c, "GET", "/v1/groups/"+group, nil, &desc); err != nil {
		t.Fatalf("describe: %v", err)
	}
	if desc.State != "EMPTY" || len(desc.Offsets) != 0 {
		t.Fatalf("the description after the deletion: %+v", desc)
	}

	// A new member starts at its auto_offset_reset (earliest), not at 3
	// and 4.
	m2 := join()
	if got := firstRead(&m2); !maps.Equal(got, map[int32]int64{0: 0, 1: 0}) {
		t.Fatalf("the new member started at %v, want 0 on both (earliest)", got)
	}
}
