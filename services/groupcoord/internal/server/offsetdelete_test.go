package server

import (
	"context"
	"fmt"
	"testing"

	groupv1 "skein/gen/skein/group/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/acl"
)

// TestOffsetDelete: as Kafka's OffsetDelete, delete on the group or the
// whole request is refused, read on a topic or its partitions keep their
// offsets (TOPIC_AUTHORIZATION_FAILED each); the coordinator decides the
// rest per partition, in the request's order.
func TestOffsetDelete(t *testing.T) {
	az := testAuthorizer(t,
		allow("User:deleter", acl.Group, "app", acl.Delete), allow("User:deleter", acl.Topic, "audit", acl.Read),
		allow("User:reader", acl.Group, "app", acl.Read), allow("User:reader", acl.Topic, "*", acl.Read),
	)
	s := newServerWith(t, az, map[string]int32{"orders": 2, "audit": 1})
	ctx := context.Background() // plaintext: no ACLs
	for _, o := range []*groupv1.PartitionOffset{{Topic: "orders", Partition: 0, Offset: 3}, {Topic: "audit", Partition: 0, Offset: 4}} {
		cr, err := s.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: "app", MemberEpoch: -1, Offsets: []*groupv1.PartitionOffset{o}})
		if err != nil || cr.GetPartitions()[0].GetErrorCode() != skeinv1.ErrorCode_NONE {
			t.Fatalf("commit %v: %v %v", o, cr, err)
		}
	}
	if hb, err := s.ConsumerGroupHeartbeat(ctx, &groupv1.ConsumerGroupHeartbeatRequest{GroupId: "app", SubscribedTopics: []string{"orders"}}); err != nil || hb.GetErrorCode() != skeinv1.ErrorCode_NONE {
		t.Fatalf("join: %v %v", hb, err)
	}
	committed := func(topic string) int64 {
		t.Helper()
		fr, err := s.OffsetFetch(ctx, &groupv1.OffsetFetchRequest{GroupId: "app", Partitions: []*groupv1.TopicPartitions{{Topic: topic, Partitions: []int32{0}}}})
		if err != nil || fr.GetErrorCode() != skeinv1.ErrorCode_NONE {
			t.Fatalf("fetch: %v %v", fr, err)
		}
		return fr.GetOffsets()[0].GetOffset()
	}
	both := &groupv1.OffsetDeleteRequest{GroupId: "app", Partitions: []*groupv1.TopicPartitions{
		{Topic: "orders", Partitions: []int32{0, 5}}, {Topic: "audit", Partitions: []int32{0}}}}
	results := func(r *groupv1.OffsetDeleteResponse) string {
		out := ""
		for _, p := range r.GetPartitions() {
			if p.GetErrorCode() != skeinv1.ErrorCode_NONE && p.GetErrorMessage() == "" {
				t.Errorf("%s:%d refused without a message", p.GetTopic(), p.GetPartition())
			}
			out += fmt.Sprintf("%s:%d=%s ", p.GetTopic(), p.GetPartition(), p.GetErrorCode())
		}
		return out
	}

	// Without delete on the group, nothing is decided.
	for _, who := range []string{"User:bob", "User:reader"} {
		r, err := s.OffsetDelete(viaGateway(who), both)
		if err != nil || r.GetErrorCode() != skeinv1.ErrorCode_GROUP_AUTHORIZATION_FAILED || r.GetErrorMessage() == "" || len(r.GetPartitions()) != 0 {
			t.Errorf("as %s: %v %v", who, r, err)
		}
	}
	// Delete on the group, read on audit only: orders is refused, audit goes.
	r, err := s.OffsetDelete(viaGateway("User:deleter"), both)
	if want := "orders:0=TOPIC_AUTHORIZATION_FAILED orders:5=TOPIC_AUTHORIZATION_FAILED audit:0=NONE "; err != nil || r.GetErrorCode() != skeinv1.ErrorCode_NONE || results(r) != want {
		t.Fatalf("as the deleter: %v %v, want %s", results(r), err, want)
	}
	if got := committed("audit"); got != -1 {
		t.Errorf("audit:0 after its deletion: %d", got)
	}
	// Everything allowed: the coordinator keeps the subscribed topic's
	// offsets and knows no partition 5.
	r, err = s.OffsetDelete(viaGateway("User:admin"), both)
	if want := "orders:0=GROUP_SUBSCRIBED_TO_TOPIC orders:5=UNKNOWN_TOPIC_OR_PARTITION audit:0=NONE "; err != nil || r.GetErrorCode() != skeinv1.ErrorCode_NONE || results(r) != want {
		t.Fatalf("as a super user: %v %v, want %s", results(r), err, want)
	}
	if got := committed("orders"); got != 3 {
		t.Errorf("orders:0 of the subscribed topic: %d, want 3", got)
	}
	// The group as a whole.
	for name, tc := range map[string]struct {
		group string
		want  skeinv1.ErrorCode
	}{
		"an unknown group": {"ghost", skeinv1.ErrorCode_GROUP_ID_NOT_FOUND},
		"no group id":      {"", skeinv1.ErrorCode_INVALID_GROUP_ID},
	} {
		r, err := s.OffsetDelete(ctx, &groupv1.OffsetDeleteRequest{GroupId: tc.group, Partitions: both.GetPartitions()})
		if err != nil || r.GetErrorCode() != tc.want || len(r.GetPartitions()) != 0 {
			t.Errorf("%s: %v %v, want %s", name, r, err, tc.want)
		}
	}
}
