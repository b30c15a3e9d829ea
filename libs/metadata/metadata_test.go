package metadata

import (
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	controllerv1 "skein/gen/skein/controller/v1"
)

const (
	group = controllerv1.CoordinatorKind_COORDINATOR_KIND_GROUP
	txn   = controllerv1.CoordinatorKind_COORDINATOR_KIND_TRANSACTION
)

func TestJavaStringHashCode(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int32
	}{
		{"", 0},
		{"a", 97},
		{"Aa", 2112},
		{"BB", 2112},
		{"hello", 99162322},
		{"my-group", -1906497762},
		{"polygenelubricants", math.MinInt32},
		{"€", 8364},    // one UTF-16 unit
		{"😀", 1772899}, // a surrogate pair: 0xD83D*31 + 0xDE00
		{"consumer-group-1", 147483020},
	} {
		if got := JavaStringHashCode(tc.s); got != tc.want {
			t.Errorf("JavaStringHashCode(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
}

func TestCoordinatorPartition(t *testing.T) {
	for _, tc := range []struct {
		key        string
		partitions int32
		want       int32
	}{
		{"hello", 50, 99162322 % 50},
		{"my-group", 50, 1906497762 % 50}, // negative hash: abs first
		{"polygenelubricants", 12, 0},     // Utils.abs(MinInt32) is 0
		{"anything", 1, 0},
		{"anything", 0, -1},
		{"", 12, 0},
	} {
		if got := CoordinatorPartition(tc.key, tc.partitions); got != tc.want {
			t.Errorf("CoordinatorPartition(%q, %d) = %d, want %d", tc.key, tc.partitions, got, tc.want)
		}
	}
}

func part(topic string, p int32, leader int32, replicas ...int32) *controllerv1.MetadataRecord {
	return PartitionRecord(&controllerv1.PartitionRecord{Topic: topic, Partition: p, Replicas: replicas, Isr: replicas, Leader: leader})
}

func topic(name, id string) *controllerv1.MetadataRecord {
	return TopicRecord(&controllerv1.TopicRecord{Name: name, TopicId: id})
}

func broker(id int32, fenced bool) *controllerv1.MetadataRecord {
	return BrokerRecord(&controllerv1.BrokerRecord{Id: id, GrpcAddr: "127.0.0.1:1", BrokerEpoch: 7, Fenced: fenced})
}

func delta(v uint64, recs ...*controllerv1.MetadataRecord) *controllerv1.MetadataDelta {
	return &controllerv1.MetadataDelta{Version: v, Records: recs}
}

// base is a small cluster: brokers 1..3 (3 fenced), topic t with 2 partitions,
// partition 1 offline.
func base(t *testing.T) *Image {
	t.Helper()
	im := New("c1")
	if err := im.Apply(delta(5,
		broker(1, false), broker(2, false), broker(3, true),
		topic("t", "id-t"),
		part("t", 0, 1, 1, 2),
		part("t", 1, -1, 2, 1),
	)); err != nil {
		t.Fatal(err)
	}
	return im
}

func TestApplyAndLookups(t *testing.T) {
	im := base(t)
	if im.Version() != 5 || im.ClusterID() != "c1" {
		t.Fatalf("version %d cluster %q", im.Version(), im.ClusterID())
	}
	if got := len(im.LiveBrokers()); got != 2 {
		t.Errorf("live brokers %d, want 2", got)
	}
	if !im.IsLive(1) || im.IsLive(3) || im.IsLive(9) {
		t.Error("IsLive wrong")
	}
	if l, ok := im.Leader("t", 0); !ok || l != 1 {
		t.Errorf("leader t/0 = %d %v", l, ok)
	}
	if l, _ := im.Leader("t", 1); l != NoLeader {
		t.Errorf("leader t/1 = %d, want offline", l)
	}
	if l, e, ok := im.LeaderAndEpoch("t", 0); !ok || l != 1 || e != 0 {
		t.Errorf("LeaderAndEpoch t/0 = %d %d %v", l, e, ok)
	}
	if l, _, ok := im.LeaderAndEpoch("t", 1); ok || l != NoLeader {
		t.Errorf("LeaderAndEpoch t/1 = %d %v, want offline", l, ok)
	}
	if _, _, ok := im.LeaderAndEpoch("t", 2); ok {
		t.Error("LeaderAndEpoch of an unknown partition")
	}
	if got := im.Available("t"); len(got) != 1 || got[0] != 0 {
		t.Errorf("Available(t) = %v, want [0]", got)
	}
	if got := im.Available("nope"); len(got) != 0 {
		t.Errorf("Available(nope) = %v", got)
	}
	if p, _ := im.Partition("t", 1); p.GetTopicId() != "id-t" {
		t.Errorf("partition did not inherit the topic id: %v", p)
	}
	if tp, ok := im.TopicByID("id-t"); !ok || tp.GetName() != "t" {
		t.Error("TopicByID")
	}
	if im.OfflinePartitions() != 1 || im.UnderReplicatedPartitions() != 0 {
		t.Errorf("offline %d under-replicated %d", im.OfflinePartitions(), im.UnderReplicatedPartitions())
	}
	if _, ok := im.Partition("t", 2); ok {
		t.Error("t/2 must not exist")
	}
	// Shrink an ISR, remove the topic again: lookups follow.
	shrunk := &controllerv1.PartitionRecord{Topic: "t", Partition: 0, Replicas: []int32{1, 2}, Isr: []int32{1}, Leader: 1, PartitionEpoch: 1}
	if err := im.Apply(delta(6, PartitionRecord(shrunk))); err != nil {
		t.Fatal(err)
	}
	if im.UnderReplicatedPartitions() != 1 {
		t.Error("under-replicated after shrink")
	}
	shrunk.Isr = []int32{1, 2} // the image holds its own copy
	if p, _ := im.Partition("t", 0); len(p.GetIsr()) != 1 {
		t.Error("the image shares the caller's record")
	}
	if err := im.Apply(delta(7, RemovedTopicRecord("t", "id-t"))); err != nil {
		t.Fatal(err)
	}
	if _, ok := im.Topic("t"); ok || im.PartitionCount("t") != 0 {
		t.Error("topic survived its removal")
	}
	if _, ok := im.TopicByID("id-t"); ok {
		t.Error("topic id survived its removal")
	}
	// The name may come back under a new id.
	if err := im.Apply(delta(8, topic("t", "id-t2"), part("t", 0, 1, 1))); err != nil {
		t.Fatal(err)
	}
}

func TestApplyRefusesWithoutChange(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    *controllerv1.MetadataDelta
		want string
	}{
		{"version backwards", delta(4, broker(4, false)), "behind"},
		{"partition of unknown topic", delta(6, part("u", 0, 1, 1)), "unknown topic"},
		{"partition gap", delta(6, part("t", 3, 1, 1)), "gap"},
		{"negative partition", delta(6, part("t", -1, 1, 1)), "gap"},
		{"topic name with another id", delta(6, topic("t", "other")), "has id"},
		{"topic id under another name", delta(6, topic("u", "id-t")), "belongs to"},
		{"remove unknown topic", delta(6, RemovedTopicRecord("nope", "")), "unknown topic"},
		{"remove with wrong id", delta(6, RemovedTopicRecord("t", "x")), "has id-t"},
		{"remove unknown broker", delta(6, &controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_RemovedBroker{RemovedBroker: 9}}), "unknown broker"},
		{"empty record", delta(6, &controllerv1.MetadataRecord{}), "empty"},
		{"broker without id", delta(6, BrokerRecord(&controllerv1.BrokerRecord{Id: -1})), "valid id"},
		{"coordinator without kind", delta(6, CoordinatorRecord(&controllerv1.CoordinatorRecord{Id: 1})), "kind"},
		{"assignment without kind", delta(6, AssignmentRecord(&controllerv1.CoordinatorAssignmentRecord{Partition: 1})), "kind"},
		{"producer ids backwards", delta(6, ProducerIDsRecord(1000), ProducerIDsRecord(10)), "goes back"},
		// A valid record first, then a bad one: nothing of the delta stays.
		{"half good", delta(6, broker(4, false), part("t", 5, 1, 1)), "gap"},
		// Partitions of a topic removed earlier in the same delta.
		{"partition after removal", delta(6, RemovedTopicRecord("t", ""), part("t", 0, 1, 1)), "unknown topic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im := base(t)
			before := im.ToProto()
			err := im.Apply(tc.d)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one containing %q", err, tc.want)
			}
			if !proto.Equal(before, im.ToProto()) {
				t.Error("a refused delta changed the image")
			}
		})
	}
}

func TestSameVersionAndInDeltaOrder(t *testing.T) {
	im := base(t)
	// A command may apply its records in several steps at one version.
	if err := im.Apply(delta(5, broker(4, false))); err != nil {
		t.Fatal(err)
	}
	// Remove and re-create in one delta; the partitions start again from 0.
	if err := im.Apply(delta(6, RemovedTopicRecord("t", ""), topic("t", "id-new"), part("t", 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	if im.PartitionCount("t") != 1 {
		t.Errorf("partitions %d", im.PartitionCount("t"))
	}
}

func TestProtoRoundTripAndClone(t *testing.T) {
	im := base(t)
	if err := im.Apply(delta(9,
		CoordinatorRecord(&controllerv1.CoordinatorRecord{Id: 1, Kind: group, GrpcAddr: "g1", Alive: true}),
		CoordinatorRecord(&controllerv1.CoordinatorRecord{Id: 1, Kind: txn, GrpcAddr: "x1", Alive: true}),
		AssignmentRecord(&controllerv1.CoordinatorAssignmentRecord{Kind: group, Partition: 0, Owner: 1, CoordinatorEpoch: 3}),
		ProducerIDsRecord(2000),
	)); err != nil {
		t.Fatal(err)
	}
	p := im.ToProto()
	back, err := FromProto(p)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(p, back.ToProto()) {
		t.Fatalf("round trip differs:\n%v\n%v", p, back.ToProto())
	}
	// Partitions in any order rebuild the same image.
	shuffled := proto.CloneOf(p)
	shuffled.Partitions[0], shuffled.Partitions[1] = shuffled.Partitions[1], shuffled.Partitions[0]
	if back2, err := FromProto(shuffled); err != nil || !proto.Equal(p, back2.ToProto()) {
		t.Fatalf("shuffled partitions: %v", err)
	}
	if back.NextProducerID() != 2000 || len(back.Coordinators()) != 2 {
		t.Error("producer ids or coordinators lost")
	}
	c := im.Clone()
	if err := c.Apply(delta(10, RemovedTopicRecord("t", ""))); err != nil {
		t.Fatal(err)
	}
	if _, ok := im.Topic("t"); !ok {
		t.Error("changing a clone changed the original")
	}
	if _, err := FromProto(&controllerv1.MetadataImage{Partitions: []*controllerv1.PartitionRecord{{Topic: "x"}}}); err == nil {
		t.Error("an image with an orphan partition must be refused")
	}
}

func TestCoordinatorFor(t *testing.T) {
	im := New("c")
	recs := []*controllerv1.MetadataRecord{broker(1, false), topic(ConsumerOffsetsTopic, "co")}
	for p := range int32(4) {
		recs = append(recs, part(ConsumerOffsetsTopic, p, 1, 1))
	}
	recs = append(recs,
		CoordinatorRecord(&controllerv1.CoordinatorRecord{Id: 7, Kind: group, GrpcAddr: "127.0.0.1:7", Alive: true}),
		CoordinatorRecord(&controllerv1.CoordinatorRecord{Id: 8, Kind: group, GrpcAddr: "127.0.0.1:8", Alive: false}),
	)
	key := "hello" // 99162322 % 4 == 2
	for p := range int32(4) {
		owner := int32(7)
		if p == 2 {
			owner = 8
		}
		recs = append(recs, AssignmentRecord(&controllerv1.CoordinatorAssignmentRecord{Kind: group, Partition: p, Owner: owner, CoordinatorEpoch: p + 1}))
	}
	if err := im.Apply(delta(1, recs...)); err != nil {
		t.Fatal(err)
	}
	if got, ok := im.CoordinatorFor(group, key); ok || got.Partition != 2 {
		t.Errorf("a dead owner must not be answered: %+v %v", got, ok)
	}
	if got, ok := im.CoordinatorFor(group, "a"); !ok || got != (CoordinatorOwner{Partition: 1, NodeID: 7, Epoch: 2, GRPCAddr: "127.0.0.1:7"}) {
		t.Errorf("CoordinatorFor(a) = %+v %v", got, ok) // 97 % 4 == 1
	}
	if _, ok := im.CoordinatorFor(txn, "a"); ok {
		t.Error("no transaction topic yet")
	}
	if !IsInternalTopic(TransactionStateTopic) || IsInternalTopic("t") {
		t.Error("IsInternalTopic")
	}
}

// A client's filtered view says so through every copy of it.
func TestFilteredImageKeepsItsMark(t *testing.T) {
	im, err := FromProto(&controllerv1.MetadataImage{ClusterId: "c", Version: 3, Filtered: true})
	if err != nil {
		t.Fatal(err)
	}
	if !im.Filtered() || !im.Clone().Filtered() || !im.ToProto().GetFiltered() {
		t.Fatalf("filtered: %v, clone %v, proto %v", im.Filtered(), im.Clone().Filtered(), im.ToProto().GetFiltered())
	}
	if err := im.Apply(&controllerv1.MetadataDelta{Version: 4}); err != nil || !im.Filtered() {
		t.Fatalf("after a delta: filtered %v, %v", im.Filtered(), err)
	}
	plain, err := FromProto(&controllerv1.MetadataImage{ClusterId: "c", Version: 3})
	if err != nil || plain.Filtered() {
		t.Fatalf("an image of everything: filtered %v, %v", plain.Filtered(), err)
	}
}
