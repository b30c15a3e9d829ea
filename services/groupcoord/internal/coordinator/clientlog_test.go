package coordinator

import (
	"testing"

	"google.golang.org/protobuf/proto"

	controllerv1 "skein/gen/skein/controller/v1"
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
