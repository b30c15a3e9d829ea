package group

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"skein/libs/errs"
	"skein/services/groupcoord/internal/assign"
)

// parseTPs reads "t:p t:p ..." ("" for none).
func parseTPs(t *testing.T, spec string) []assign.TopicPartition {
	t.Helper()
	var out []assign.TopicPartition
	for _, f := range strings.Fields(spec) {
		var topic string
		var p int32
		if _, err := fmt.Sscanf(strings.Replace(f, ":", " ", 1), "%s %d", &topic, &p); err != nil {
			t.Fatalf("bad partition %q: %v", f, err)
		}
		out = append(out, assign.TopicPartition{Topic: topic, Partition: p})
	}
	return out
}

// TestDeleteOffsets: Kafka's OffsetDelete rule, per partition asked.
func TestDeleteOffsets(t *testing.T) {
	topics := map[string]int32{"a": 2, "b": 2, "c": 1}
	exists := func(tp assign.TopicPartition) bool { return tp.Partition >= 0 && tp.Partition < topics[tp.Topic] }
	// Setups of the group, by name.
	setups := map[string]func(t *testing.T, g *Group){
		"empty": func(*testing.T, *Group) {},
		"member on a": func(t *testing.T, g *Group) {
			mustHeartbeat(t, g, HeartbeatRequest{MemberID: "m1", Topics: []string{"a"}}, epoch0)
		},
		"members on a and on b,c": func(t *testing.T, g *Group) {
			mustHeartbeat(t, g, HeartbeatRequest{MemberID: "m1", Topics: []string{"a"}}, epoch0)
			mustHeartbeat(t, g, HeartbeatRequest{MemberID: "m2", Topics: []string{"b", "c"}}, epoch0)
		},
		"static member on a, away": func(t *testing.T, g *Group) {
			mustHeartbeat(t, g, HeartbeatRequest{MemberID: "s1", InstanceID: "i1", Topics: []string{"a"}}, epoch0)
			mustHeartbeat(t, g, HeartbeatRequest{MemberID: "s1", InstanceID: "i1", MemberEpoch: StaticLeaveEpoch}, epoch0)
		},
		"member on a, left": func(t *testing.T, g *Group) {
			r := mustHeartbeat(t, g, HeartbeatRequest{MemberID: "m1", Topics: []string{"a"}}, epoch0)
			mustHeartbeat(t, g, HeartbeatRequest{MemberID: "m1", MemberEpoch: LeaveEpoch, Owned: r.Assignment}, epoch0)
		},
	}
	cases := []struct {
		name, setup string
		ask         string // the partitions asked, in order
		held        string // what the group holds: offsets, pending offsets, deliveries
		want        []*errs.Error
		drop        string
	}{
		{"an empty group deletes what it holds", "empty", "a:0 a:1", "a:0 a:1 b:0",
			[]*errs.Error{errs.None, errs.None}, "a:0 a:1"},
		{"nothing committed is no error and nothing to write", "empty", "a:0 b:1", "",
			[]*errs.Error{errs.None, errs.None}, ""},
		{"a subscribed topic keeps its offsets", "member on a", "a:0 a:1", "a:0 a:1",
			[]*errs.Error{errs.GroupSubscribedToTopic, errs.GroupSubscribedToTopic}, ""},
		{"an active group deletes the offsets of a topic it does not read", "member on a", "a:1 b:0 b:1", "a:1 b:0",
			[]*errs.Error{errs.GroupSubscribedToTopic, errs.None, errs.None}, "b:0"},
		{"any member's subscription counts", "members on a and on b,c", "a:0 b:0 c:0", "a:0 b:0 c:0",
			[]*errs.Error{errs.GroupSubscribedToTopic, errs.GroupSubscribedToTopic, errs.GroupSubscribedToTopic}, ""},
		{"a static member away still subscribes", "static member on a, away", "a:0", "a:0",
			[]*errs.Error{errs.GroupSubscribedToTopic}, ""},
		{"once the member left, its topic's offsets go", "member on a, left", "a:0 a:1", "a:0 a:1",
			[]*errs.Error{errs.None, errs.None}, "a:0 a:1"},
		{"unknown partitions and topics", "empty", "a:2 nope:0 a:-1 b:1", "a:2 nope:0 b:1",
			[]*errs.Error{errs.UnknownTopicOrPartition, errs.UnknownTopicOrPartition, errs.UnknownTopicOrPartition, errs.None}, "b:1"},
		{"an unknown partition of a subscribed topic is unknown first", "member on a", "a:5", "",
			[]*errs.Error{errs.UnknownTopicOrPartition}, ""},
		{"a partition asked twice is dropped once", "empty", "b:1 b:1", "b:1",
			[]*errs.Error{errs.None, errs.None}, "b:1"},
		{"dropped in topic and partition order", "empty", "c:0 b:1 a:1 b:0", "a:1 b:0 b:1 c:0",
			[]*errs.Error{errs.None, errs.None, errs.None, errs.None}, "a:1 b:0 b:1 c:0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := New(testConfig(), "g")
			g.SetTopics(topics)
			setups[c.setup](t, g)
			before := g.Snapshot()
			held := parseTPs(t, c.held)
			res, eff, err := g.DeleteOffsets(OffsetDelete{Partitions: parseTPs(t, c.ask), Exists: exists,
				Holds: func(tp assign.TopicPartition) bool { return slices.Contains(held, tp) }})
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != len(c.want) {
				t.Fatalf("%d results, want %d", len(res), len(c.want))
			}
			for i, w := range c.want {
				if got := errs.Of(res[i]); got != w || (res[i] == nil) != (w == errs.None) {
					t.Errorf("partition %d: %v, want %s", i, res[i], w.Name)
				}
			}
			if want := parseTPs(t, c.drop); !slices.Equal(eff.Drop, want) {
				t.Errorf("drop %v, want %v", eff.Drop, want)
			}
			// The group itself does not change: nothing to write of it.
			if eff.Snapshot != nil || eff.Deleted || len(eff.Removed) > 0 {
				t.Errorf("effects beyond the drop: %+v", eff)
			}
			if after := g.Snapshot(); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("the group changed:\n%+v\n%+v", before, after)
			}
		})
	}
}

func TestDeleteOffsetsOfADeletedGroup(t *testing.T) {
	g := New(testConfig(), "g")
	if _, err := g.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.DeleteOffsets(OffsetDelete{Partitions: parseTPs(t, "a:0")}); errs.Of(err) != errs.GroupIDNotFound {
		t.Fatalf("delete offsets of a deleted group: %v", err)
	}
	// Without Exists and Holds every partition exists and nothing is held.
	h := New(testConfig(), "h")
	res, eff, err := h.DeleteOffsets(OffsetDelete{Partitions: parseTPs(t, "x:3")})
	if err != nil || len(res) != 1 || res[0] != nil || len(eff.Drop) != 0 {
		t.Fatalf("bare request: %v %+v %v", res, eff, err)
	}
}
