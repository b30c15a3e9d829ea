package metadata

import (
	"testing"

	"google.golang.org/protobuf/proto"

	controllerv1 "skein/gen/skein/controller/v1"
)

// Any delta is applied whole or refused without a change; never a panic.
func FuzzApply(f *testing.F) {
	for _, d := range []*controllerv1.MetadataDelta{
		delta(6, broker(4, false), part("t", 2, 1, 1)),
		delta(6, RemovedTopicRecord("t", "id-t"), topic("t", "x"), part("t", 0, 1, 1)),
		delta(6, ProducerIDsRecord(5), AssignmentRecord(&controllerv1.CoordinatorAssignmentRecord{Kind: group, Partition: 3, Owner: 1})),
	} {
		b, _ := proto.Marshal(d)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var d controllerv1.MetadataDelta
		if proto.Unmarshal(data, &d) != nil {
			return
		}
		im := base(t)
		before := im.ToProto()
		if err := im.Apply(&d); err != nil {
			if !proto.Equal(before, im.ToProto()) {
				t.Fatalf("a refused delta changed the image: %v", err)
			}
			return
		}
		// What was applied survives a round trip through the image's proto.
		back, err := FromProto(im.ToProto())
		if err != nil {
			t.Fatalf("the image no longer rebuilds: %v", err)
		}
		if !proto.Equal(back.ToProto(), im.ToProto()) {
			t.Fatal("round trip differs")
		}
	})
}
