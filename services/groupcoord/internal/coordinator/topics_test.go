package coordinator

import (
	"bytes"
	"context"
	"testing"
	"time"

	"skein/libs/errs"
	"skein/services/groupcoord/internal/assign"
	"skein/services/groupcoord/internal/offsetlog"
)

// topicView answers a view at version in which the node owns every
// partition at epoch, with the topics of ids (orders: 4 partitions, audit:
// 1) under those ids.
func topicView(version uint64, epoch int32, ids map[string]string) View {
	v := owning(epoch, all()...)
	v.Version, v.Topics, v.TopicIDs = version, map[string]int32{}, ids
	for name := range ids {
		v.Topics[name] = topics[name]
	}
	return v
}

// eventually waits for cond, failing with what after a while.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fetchAll answers a group's committed offsets by partition.
func fetchAll(t *testing.T, c *Coordinator, groupID string) map[assign.TopicPartition]int64 {
	t.Helper()
	got, err := c.FetchOffsets(context.Background(), groupID, nil, false)
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", groupID, err)
	}
	out := map[assign.TopicPartition]int64{}
	for _, o := range got {
		out[assign.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o.Offset
	}
	return out
}

// stable answers a stable fetch of one partition: its offset, or the
// error of a partition with offsets pending in a transaction.
func stable(t *testing.T, c *Coordinator, groupID, topic string, p int32) (int64, error) {
	t.Helper()
	got, err := c.FetchOffsets(context.Background(), groupID, []assign.TopicPartition{{Topic: topic, Partition: p}}, true)
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", groupID, err)
	}
	return got[0].Offset, got[0].Err
}

// TestDeletedTopic: once the metadata no longer has a topic, or has it
// under a new id (deleted and created again), every group's committed and
// pending offsets of it are tombstoned, and a new owner loading the log
// sees them gone too; offsets of other topics, and those committed to the
// topic created again, stay.
func TestDeletedTopic(t *testing.T) {
	ctx := context.Background()
	log := newMemLog()
	c := start(t, log, 1, topicView(1, 1, map[string]string{"orders": "orders-1", "audit": "audit-1"}))
	waitLoaded(t, c, nParts)
	m := join(t, c, "app", "orders", "audit")
	for _, cm := range []Commit{{Topic: "orders", Partition: 2, Offset: 1000}, {Topic: "audit", Partition: 0, Offset: 5}} {
		if err := commit(c, "app", m.MemberID, m.MemberEpoch, cm.Topic, cm.Partition, cm.Offset); err != nil {
			t.Fatal(err)
		}
	}
	// A group holding nothing but an offset of the topic.
	if err := commit(c, "tool", "", -1, "orders", 1, 7); err != nil {
		t.Fatal(err)
	}
	// Offsets pending in a transaction.
	res, err := c.TxnCommitOffsets(ctx, TxnCommit{TransactionalID: "tx", GroupID: "txn", ProducerID: 42, ProducerEpoch: 1,
		Commits: []Commit{{Topic: "orders", Partition: 3, Offset: 9}, {Topic: "audit", Partition: 0, Offset: 3}}})
	if err != nil || res[0] != nil || res[1] != nil {
		t.Fatalf("txn commit: %v %v", res, err)
	}

	// orders is deleted. Its offsets are not answered from then on, even
	// before the groups' tombstones are written.
	c.OnMetadata(topicView(2, 1, map[string]string{"audit": "audit-1"}))
	if got := fetchAll(t, c, "app"); len(got) != 1 {
		t.Fatalf("app's offsets right after orders was deleted: %v, want audit:0 only", got)
	}
	if off, err := stable(t, c, "txn", "orders", 3); off != -1 || err != nil {
		t.Fatalf("the deleted topic's pending offset right after: %d %v, want none", off, err)
	}
	eventually(t, "the deleted topic's offset is not tombstoned", func() bool { return tombstoned(log, offsetlog.OffsetKey("app", "orders", 2)) })
	eventually(t, "the group of the deleted topic's offset only is still there", func() bool {
		_, err := c.DescribeGroup(ctx, "tool")
		return errs.Of(err) == errs.GroupIDNotFound
	})
	eventually(t, "the deleted topic's pending offset is not tombstoned", func() bool {
		return tombstoned(log, offsetlog.PendingKey("txn", 42, "orders", 3))
	})
	if got := fetchAll(t, c, "app"); len(got) != 1 || got[assign.TopicPartition{Topic: "audit", Partition: 0}] != 5 {
		t.Fatalf("app's offsets after orders was deleted: %v, want audit:0 at 5 only", got)
	}
	if _, err := stable(t, c, "txn", "audit", 0); errs.Of(err) != errs.UnstableOffsetCommit {
		t.Fatalf("the pending offset of audit: %v, want UNSTABLE_OFFSET_COMMIT", err)
	}

	// orders is created again; offsets are committed to it; then it is
	// deleted and created once more, the coordinator seeing only its new id.
	c.OnMetadata(topicView(3, 1, map[string]string{"orders": "orders-3", "audit": "audit-1"}))
	eventually(t, "the topic created again is not committable", func() bool { return commit(c, "tool", "", -1, "orders", 1, 8) == nil })
	if err := commit(c, "tool", "", -1, "audit", 0, 4); err != nil {
		t.Fatal(err)
	}
	c.OnMetadata(topicView(5, 1, map[string]string{"orders": "orders-5", "audit": "audit-1"}))
	eventually(t, "the offset of the topic's previous incarnation is still committed", func() bool { return committed(t, c, "tool", "orders", 1) == -1 })
	if err := commit(c, "tool", "", -1, "orders", 0, 11); err != nil {
		t.Fatal(err)
	}
	// A view older than the one taken (a controller lagging behind) does
	// not take audit away.
	c.OnMetadata(topicView(4, 1, map[string]string{"orders": "orders-5"}))
	if err := commit(c, "tool", "", -1, "orders", 2, 12); err != nil {
		t.Fatal(err)
	}
	want := map[assign.TopicPartition]int64{{Topic: "orders", Partition: 0}: 11, {Topic: "orders", Partition: 2}: 12, {Topic: "audit", Partition: 0}: 4}
	if got := fetchAll(t, c, "tool"); len(got) != len(want) || got[assign.TopicPartition{Topic: "orders", Partition: 0}] != 11 ||
		got[assign.TopicPartition{Topic: "orders", Partition: 2}] != 12 || got[assign.TopicPartition{Topic: "audit", Partition: 0}] != 4 {
		t.Fatalf("tool's offsets: %v, want %v", got, want)
	}

	// A new owner loading the log sees the same.
	last := topicView(6, 1, map[string]string{"orders": "orders-5", "audit": "audit-1"})
	last.Owned = nil // c gives everything up
	c.OnMetadata(last)
	b := start(t, log, 2, topicView(6, 2, map[string]string{"orders": "orders-5", "audit": "audit-1"}))
	waitLoaded(t, b, nParts)
	if got := fetchAll(t, b, "app"); len(got) != 1 || got[assign.TopicPartition{Topic: "audit", Partition: 0}] != 5 {
		t.Errorf("app's offsets at the new owner: %v, want audit:0 at 5 only", got)
	}
	if got := fetchAll(t, b, "tool"); len(got) != len(want) || got[assign.TopicPartition{Topic: "orders", Partition: 0}] != 11 ||
		got[assign.TopicPartition{Topic: "orders", Partition: 2}] != 12 || got[assign.TopicPartition{Topic: "audit", Partition: 0}] != 4 {
		t.Errorf("tool's offsets at the new owner: %v, want %v", got, want)
	}
	if off, err := stable(t, b, "txn", "orders", 3); err != nil || off != -1 {
		t.Errorf("the deleted topic's pending offset at the new owner: %d %v", off, err)
	}
	if _, err := stable(t, b, "txn", "audit", 0); errs.Of(err) != errs.UnstableOffsetCommit {
		t.Errorf("the pending offset of audit at the new owner: %v, want UNSTABLE_OFFSET_COMMIT", err)
	}
}

// tombstoned reports whether the last record of key in the log is a
// tombstone.
func tombstoned(log *memLog, key []byte) bool {
	found := false
	for part := range int32(nParts) {
		for _, e := range log.records(part) {
			if bytes.Equal(e.Key, key) {
				found = e.Value == nil
			}
		}
	}
	return found
}

// A group that refuses a topic change outright (its write too large, say)
// is asked again after a pause, not in a loop that rewrites every group of
// the partition as fast as the log answers.
func TestRefusedTopicChangeIsRetriedAfterAPause(t *testing.T) {
	log := newMemLog()
	ids := map[string]string{"orders": "id-orders", "audit": "id-audit"}
	c := start(t, log, 1, topicView(1, 1, ids))
	waitLoaded(t, c, nParts)
	join(t, c, "app", "orders", "audit")
	refusals := make([]memFailure, 1000)
	for i := range refusals {
		refusals[i] = memFailure{err: errs.Errorf(errs.MessageTooLarge, "injected")}
	}
	log.failWith(refusals...)
	c.OnMetadata(topicView(2, 1, map[string]string{"orders": "id-orders"})) // audit deleted
	time.Sleep(1500 * time.Millisecond)
	log.mu.Lock()
	used := len(refusals) - len(log.failNext)
	log.mu.Unlock()
	log.clearFailures()
	if used < 1 || used > 6 {
		t.Fatalf("%d writes refused in 1.5 s, want the change tried about once a second", used)
	}
	// Once the log takes it, the change lands.
	eventually(t, "the deleted topic leaves the group", func() bool {
		d, err := c.DescribeGroup(context.Background(), "app")
		return err == nil && len(d.Members) == 1 && d.Members[0].Target.Count() == 4
	})
}
