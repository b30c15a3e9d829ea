package client

import (
	"fmt"
	"testing"

	controllerv1 "skein/gen/skein/controller/v1"
)

func topicRec(name, id string, cfg map[string]string) *controllerv1.MetadataRecord {
	return &controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_Topic{Topic: &controllerv1.TopicRecord{Name: name, TopicId: id, Configs: cfg}}}
}

func partRec(topic string, p, leader int32) *controllerv1.MetadataRecord {
	return &controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_Partition{Partition: &controllerv1.PartitionRecord{Topic: topic, Partition: p, Leader: leader, Replicas: []int32{leader}}}}
}

func brokerRec(id int32, fenced bool) *controllerv1.MetadataRecord {
	return &controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_Broker{Broker: &controllerv1.BrokerRecord{Id: id, GrpcAddr: fmt.Sprintf("b%d", id), Fenced: fenced}}}
}

// describe renders what lookups see, for table comparison.
func describe(m *Metadata) string {
	s := fmt.Sprintf("v%d brokers:", m.Version())
	for _, b := range m.LiveBrokers() {
		s += fmt.Sprintf(" %d", b.GetId())
	}
	for _, t := range m.Topics() {
		s += fmt.Sprintf(" %s(%s)[", t.GetName(), t.GetTopicId())
		for i := int32(0); i < m.PartitionCount(t.GetName()); i++ {
			l, _, ok := m.Leader(t.GetName(), i)
			if !ok {
				s += "-"
			} else {
				s += fmt.Sprint(l)
			}
		}
		s += "]"
	}
	return s
}

func TestMetadataApply(t *testing.T) {
	base := MetadataFromImage(&controllerv1.MetadataImage{
		ClusterId: "c", Version: 10,
		Brokers:    []*controllerv1.BrokerRecord{{Id: 1}, {Id: 2}},
		Topics:     []*controllerv1.TopicRecord{{Name: "a", TopicId: "A"}},
		Partitions: []*controllerv1.PartitionRecord{{Topic: "a", Partition: 0, Leader: 1}, {Topic: "a", Partition: 1, Leader: 2}},
	})
	for _, tc := range []struct {
		name string
		recs []*controllerv1.MetadataRecord
		want string
	}{
		{"nothing", nil, "v11 brokers: 1 2 a(A)[12]"},
		{"leader change", []*controllerv1.MetadataRecord{partRec("a", 1, 1)}, "v11 brokers: 1 2 a(A)[11]"},
		{"offline partition", []*controllerv1.MetadataRecord{partRec("a", 0, -1)}, "v11 brokers: 1 2 a(A)[-2]"},
		{"new topic with partitions", []*controllerv1.MetadataRecord{topicRec("b", "B", nil), partRec("b", 0, 2)}, "v11 brokers: 1 2 a(A)[12] b(B)[2]"},
		{"partitions before their topic", []*controllerv1.MetadataRecord{partRec("b", 0, 2), topicRec("b", "B", nil)}, "v11 brokers: 1 2 a(A)[12] b(B)[2]"},
		{"grown topic", []*controllerv1.MetadataRecord{partRec("a", 2, 1)}, "v11 brokers: 1 2 a(A)[121]"},
		{"removed topic", []*controllerv1.MetadataRecord{{Record: &controllerv1.MetadataRecord_RemovedTopic{RemovedTopic: &controllerv1.RemovedTopicRecord{Name: "a", TopicId: "A"}}}}, "v11 brokers: 1 2"},
		{"removal of an older incarnation is ignored", []*controllerv1.MetadataRecord{{Record: &controllerv1.MetadataRecord_RemovedTopic{RemovedTopic: &controllerv1.RemovedTopicRecord{Name: "a", TopicId: "OLD"}}}}, "v11 brokers: 1 2 a(A)[12]"},
		{"recreated under a new id drops the old partitions", []*controllerv1.MetadataRecord{topicRec("a", "A2", nil), partRec("a", 0, 2)}, "v11 brokers: 1 2 a(A2)[2]"},
		{"fenced and removed brokers", []*controllerv1.MetadataRecord{brokerRec(2, true), brokerRec(3, false), {Record: &controllerv1.MetadataRecord_RemovedBroker{RemovedBroker: 1}}}, "v11 brokers: 3 a(A)[12]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, err := base.Apply(&controllerv1.MetadataDelta{Version: 11, Records: tc.recs})
			if err != nil {
				t.Fatal(err)
			}
			if got := describe(next); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			if got := describe(base); got != "v10 brokers: 1 2 a(A)[12]" {
				t.Errorf("Apply changed the old snapshot: %s", got)
			}
		})
	}
	if _, err := base.Apply(&controllerv1.MetadataDelta{Version: 9}); err == nil {
		t.Error("a delta behind the snapshot must be refused")
	}
}

func TestMetadataCoordinators(t *testing.T) {
	group, txn := controllerv1.CoordinatorKind_COORDINATOR_KIND_GROUP, controllerv1.CoordinatorKind_COORDINATOR_KIND_TRANSACTION
	base := MetadataFromImage(&controllerv1.MetadataImage{
		Version:      1,
		Coordinators: []*controllerv1.CoordinatorRecord{{Id: 1, Kind: group, GrpcAddr: "g1"}, {Id: 1, Kind: txn, GrpcAddr: "t1"}},
		CoordinatorAssignments: []*controllerv1.CoordinatorAssignmentRecord{
			{Kind: group, Partition: 1, Owner: 1, CoordinatorEpoch: 1}, {Kind: group, Partition: 0, Owner: 1, CoordinatorEpoch: 1}},
	})
	if c, ok := base.Coordinator(txn, 1); !ok || c.GetGrpcAddr() != "t1" {
		t.Fatalf("one id, two kinds: %v %v", c, ok)
	}
	next, err := base.Apply(&controllerv1.MetadataDelta{Version: 2, Records: []*controllerv1.MetadataRecord{
		{Record: &controllerv1.MetadataRecord_CoordinatorAssignment{CoordinatorAssignment: &controllerv1.CoordinatorAssignmentRecord{Kind: group, Partition: 1, Owner: 2, CoordinatorEpoch: 2}}},
		{Record: &controllerv1.MetadataRecord_Coordinator{Coordinator: &controllerv1.CoordinatorRecord{Id: 2, Kind: group, GrpcAddr: "g2"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	render := func(m *Metadata) string {
		s := ""
		for _, a := range m.CoordinatorAssignments(group) {
			s += fmt.Sprintf("%d:%d@%d ", a.GetPartition(), a.GetOwner(), a.GetCoordinatorEpoch())
		}
		for _, c := range m.Coordinators() {
			s += fmt.Sprintf("%v/%d ", c.GetKind(), c.GetId())
		}
		return s
	}
	if got, want := render(next), "0:1@1 1:2@2 COORDINATOR_KIND_GROUP/1 COORDINATOR_KIND_GROUP/2 COORDINATOR_KIND_TRANSACTION/1 "; got != want {
		t.Errorf("after the delta: %q, want %q", got, want)
	}
	if got, want := render(base), "0:1@1 1:1@1 COORDINATOR_KIND_GROUP/1 COORDINATOR_KIND_TRANSACTION/1 "; got != want {
		t.Errorf("Apply changed the old snapshot: %q, want %q", got, want)
	}
	if len(next.CoordinatorAssignments(txn)) != 0 {
		t.Error("no transaction assignments were given")
	}
}
