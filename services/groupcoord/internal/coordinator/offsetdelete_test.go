package coordinator

import (
	"context"
	"slices"
	"testing"

	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/services/groupcoord/internal/assign"
	"skein/services/groupcoord/internal/group"
)

func deleteOffsets(c *Coordinator, groupID string, tps ...assign.TopicPartition) ([]error, error) {
	return c.DeleteOffsets(context.Background(), groupID, tps)
}

func tpOf(topic string, p int32) assign.TopicPartition {
	return assign.TopicPartition{Topic: topic, Partition: p}
}

// codes renders per-partition results as error names.
func codes(res []error) []string {
	out := make([]string, len(res))
	for i, err := range res {
		out[i] = errs.Of(err).Name
	}
	return out
}

// TestDeleteOffsets: OffsetDelete on an active group deletes the offsets
// of a topic no member subscribes to, pending transactional offsets
// included, and keeps those of its subscribed topic; once the member left
// those go too. What is deleted stays deleted for a coordinator that takes
// the group over.
func TestDeleteOffsets(t *testing.T) {
	log := newMemLog()
	a := start(t, log, 1, owning(1, all()...))
	waitServing(t, a, "app")
	// Offsets of both topics while the group is empty, then a member that
	// reads orders only.
	for _, cm := range []struct {
		topic string
		p     int32
		off   int64
	}{{"orders", 0, 5}, {"orders", 1, 6}, {"audit", 0, 7}} {
		if err := commit(a, "app", "", -1, cm.topic, cm.p, cm.off); err != nil {
			t.Fatal(err)
		}
	}
	// A transaction's offset of audit:0 pending, and one of orders:2.
	if res, err := txnCommit(a, "app", 7001, 0, Commit{Topic: "audit", Partition: 0, Offset: 9}, Commit{Topic: "orders", Partition: 2, Offset: 11}); err != nil || res[0] != nil || res[1] != nil {
		t.Fatalf("txn commit: %v %v", res, err)
	}
	m := join(t, a, "app", "orders")
	from := len(log.records(metadata.CoordinatorPartition("app", nParts)))

	res, err := deleteOffsets(a, "app", tpOf("orders", 0), tpOf("audit", 0), tpOf("nope", 0), tpOf("orders", 9), tpOf("audit", 0))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"GROUP_SUBSCRIBED_TO_TOPIC", "NONE", "UNKNOWN_TOPIC_OR_PARTITION", "UNKNOWN_TOPIC_OR_PARTITION", "NONE"}
	if got := codes(res); !slices.Equal(got, want) {
		t.Fatalf("delete on the active group: %v, want %v", got, want)
	}
	// One write: the committed and the pending offset of audit:0.
	if got, want := written(t, log, "app", from), []string{"offset audit:0 tombstone", "pending 7001 audit:0 tombstone"}; !slices.Equal(got, want) {
		t.Fatalf("written %q, want %q", got, want)
	}
	if got := committed(t, a, "app", "audit", 0); got != -1 {
		t.Errorf("audit:0 after its deletion: %d", got)
	}
	if got := committed(t, a, "app", "orders", 0); got != 5 {
		t.Errorf("orders:0, subscribed, after the deletion: %d, want 5", got)
	}
	d, err := a.DescribeGroup(context.Background(), "app")
	if err != nil || len(d.Members) != 1 || d.Epoch != m.MemberEpoch {
		t.Fatalf("the group changed: %+v %v", d, err)
	}
	// The transaction commits after the deletion: audit:0 does not come
	// back (its pending offset went with it), orders:2 is committed.
	complete(t, a, "app", 7001, 1, true)
	if got := committed(t, a, "app", "audit", 0); got != -1 {
		t.Errorf("the transaction's commit brought audit:0 back: %d", got)
	}
	if got := committed(t, a, "app", "orders", 2); got != 11 {
		t.Errorf("orders:2 of the transaction: %d, want 11", got)
	}

	// The member leaves: the group is empty, and every offset may go.
	if _, err := a.Heartbeat(context.Background(), "app", group.HeartbeatRequest{MemberID: m.MemberID, MemberEpoch: group.LeaveEpoch}); err != nil {
		t.Fatal(err)
	}
	if res, err := deleteOffsets(a, "app", tpOf("orders", 0), tpOf("orders", 1)); err != nil || res[0] != nil || res[1] != nil {
		t.Fatalf("delete on the empty group: %v %v", res, err)
	}
	for p, want := range map[int32]int64{0: -1, 1: -1, 2: 11} {
		if got := committed(t, a, "app", "orders", p); got != want {
			t.Errorf("orders:%d after the deletion: %d, want %d", p, got, want)
		}
	}
	// Nothing committed any more: no error, nothing written.
	from = len(log.records(metadata.CoordinatorPartition("app", nParts)))
	if res, err := deleteOffsets(a, "app", tpOf("orders", 0), tpOf("audit", 0)); err != nil || res[0] != nil || res[1] != nil {
		t.Fatalf("delete of offsets already gone: %v %v", res, err)
	}
	if got := written(t, log, "app", from); len(got) != 0 {
		t.Errorf("a deletion of nothing wrote %q", got)
	}
	// The group stays, empty, with orders:2.
	if d, err := a.DescribeGroup(context.Background(), "app"); err != nil || d.State != group.Empty {
		t.Fatalf("after the deletions: %+v %v", d, err)
	}

	// A coordinator that takes the partitions over reads the tombstones:
	// nothing deleted comes back.
	a.OnMetadata(owning(1))
	b := start(t, log, 2, owning(2, all()...))
	waitServing(t, b, "app")
	for _, c := range []struct {
		topic string
		p     int32
		want  int64
	}{{"orders", 0, -1}, {"orders", 1, -1}, {"orders", 2, 11}, {"audit", 0, -1}} {
		if got := committed(t, b, "app", c.topic, c.p); got != c.want {
			t.Errorf("%s:%d at the new owner: %d, want %d", c.topic, c.p, got, c.want)
		}
	}
	if d, err := b.DescribeGroup(context.Background(), "app"); err != nil || d.State != group.Empty {
		t.Errorf("the group at the new owner: %+v %v", d, err)
	}
}

// The group is refused as a whole when it does not exist or its id is
// empty; a failed write deletes nothing; a group that held nothing but the
// deleted offsets is gone with them.
func TestDeleteOffsetsRefusals(t *testing.T) {
	log := newMemLog()
	c := start(t, log, 1, owning(1, all()...))
	waitLoaded(t, c, nParts)
	if _, err := deleteOffsets(c, "ghost", tpOf("orders", 0)); errs.Of(err) != errs.GroupIDNotFound {
		t.Errorf("an unknown group: %v", err)
	}
	if _, err := deleteOffsets(c, "", tpOf("orders", 0)); errs.Of(err) != errs.InvalidGroupID {
		t.Errorf("an empty group id: %v", err)
	}
	if err := commit(c, "simple", "", -1, "orders", 0, 3); err != nil {
		t.Fatal(err)
	}
	log.failWith(memFailure{err: errs.Errorf(errs.MessageTooLarge, "injected")})
	if _, err := deleteOffsets(c, "simple", tpOf("orders", 0)); errs.Of(err) != errs.MessageTooLarge {
		t.Fatalf("a deletion whose write fails: %v", err)
	}
	if got := committed(t, c, "simple", "orders", 0); got != 3 {
		t.Fatalf("a failed deletion deleted: %d", got)
	}
	if res, err := deleteOffsets(c, "simple", tpOf("orders", 0)); err != nil || res[0] != nil {
		t.Fatalf("the deletion again: %v %v", res, err)
	}
	if _, err := c.DescribeGroup(context.Background(), "simple"); errs.Of(err) != errs.GroupIDNotFound {
		t.Errorf("a group left with nothing: %v, want GROUP_ID_NOT_FOUND", err)
	}
	if _, err := deleteOffsets(c, "simple", tpOf("orders", 0)); errs.Of(err) != errs.GroupIDNotFound {
		t.Errorf("a deletion in the group gone: %v", err)
	}
}
