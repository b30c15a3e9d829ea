package coordinator

import (
	"context"
	"maps"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/client"
	"skein/libs/client/clienttest"
	"skein/libs/metadata"
)

func TestViewOf(t *testing.T) {
	group := controllerv1.CoordinatorKind_COORDINATOR_KIND_GROUP
	image := func(inc string, alive bool) *metadata.Image {
		return fromProto(t, &controllerv1.MetadataImage{
			Version: 1,
			Topics:  []*controllerv1.TopicRecord{{Name: "__consumer_offsets", TopicId: "o"}, {Name: "orders", TopicId: "x"}},
			Partitions: []*controllerv1.PartitionRecord{
				{Topic: "__consumer_offsets", Partition: 0}, {Topic: "__consumer_offsets", Partition: 1}, {Topic: "__consumer_offsets", Partition: 2},
				{Topic: "orders", Partition: 0}},
			Coordinators: []*controllerv1.CoordinatorRecord{
				{Id: 1, Kind: group, Alive: alive, Incarnation: inc},
				{Id: 1, Kind: controllerv1.CoordinatorKind_COORDINATOR_KIND_TRANSACTION, Alive: true, Incarnation: "txn"}},
			CoordinatorAssignments: []*controllerv1.CoordinatorAssignmentRecord{
				{Kind: group, Partition: 0, Owner: 1, CoordinatorEpoch: 3, ProducerId: proto.Int64(40)},
				{Kind: group, Partition: 1, Owner: 2, CoordinatorEpoch: 1, ProducerId: proto.Int64(41)},
				{Kind: group, Partition: 2, Owner: 1, CoordinatorEpoch: 1}, // no producer id yet
				{Kind: controllerv1.CoordinatorKind_COORDINATOR_KIND_TRANSACTION, Partition: 1, Owner: 1, CoordinatorEpoch: 1, ProducerId: proto.Int64(50)},
			},
		})
	}
	v := ViewOf(image("me", true), 1, "me")
	if !v.Registered || v.Partitions != 3 || len(v.Owned) != 1 || v.Owned[0] != (Ownership{Epoch: 3, ProducerID: 40}) || v.Topics["orders"] != 1 ||
		v.TopicIDs["orders"] != "x" || v.Version != 1 {
		t.Fatalf("view: %+v", v)
	}
	// Another incarnation of this id (a newer process, or the metadata has
	// not seen this one yet), or a dead record: nothing is served.
	for _, m := range []*metadata.Image{image("other", true), image("me", false)} {
		if v := ViewOf(m, 1, "me"); v.Registered || len(v.Owned) != 0 {
			t.Errorf("view of a record not this process's: %+v", v)
		}
	}
}

func fromProto(t *testing.T, p *controllerv1.MetadataImage) *metadata.Image {
	t.Helper()
	im, err := metadata.FromProto(p)
	if err != nil {
		t.Fatal(err)
	}
	return im
}

// The dead-letter topic the coordinator creates keeps its source's
// retention: what the topic's owner chose for these records.
func TestEnsureTopicKeepsTheSourceRetention(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c, err := client.New(client.Config{Controllers: []string{cl.ControllerAddr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.CreateTopic(ctx, client.TopicSpec{Name: "payments", Partitions: 2, ReplicationFactor: 1,
		Configs: map[string]string{"retention.ms": "2592000000", "retention.bytes": "1073741824", "segment.ms": "60000"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, client.TopicSpec{Name: "plain", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitMetadata(ctx, func(m *metadata.Image) bool { return m.PartitionCount("payments") > 0 && m.PartitionCount("plain") > 0 }); err != nil {
		t.Fatal(err)
	}
	l := ClientLog{C: c}
	for _, tc := range []struct {
		dlq, like string
		want      map[string]string
	}{
		{"payments.dlq", "payments", map[string]string{"retention.ms": "2592000000", "retention.bytes": "1073741824"}},
		{"plain.dlq", "plain", map[string]string{}},
	} {
		n, err := l.EnsureTopic(ctx, tc.dlq, tc.like)
		if err != nil || n != c.Metadata().PartitionCount(tc.like) {
			t.Fatalf("EnsureTopic %s: %d %v", tc.dlq, n, err)
		}
		rec, ok := c.Metadata().Topic(tc.dlq)
		if !ok {
			t.Fatalf("%s is not in the metadata", tc.dlq)
		}
		got := map[string]string{}
		maps.Copy(got, rec.GetConfigs())
		if !maps.Equal(got, tc.want) {
			t.Errorf("%s created with %v, want %v", tc.dlq, got, tc.want)
		}
	}
}
