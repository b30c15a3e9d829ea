package fsm

import (
	"fmt"
	"math/rand/v2"
	"testing"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/metadata"
)

func TestEmptyCommands(t *testing.T) {
	m := New()
	cmds := []*controllerv1.Command{
		nil,
		{},
		{Command: &controllerv1.Command_Bootstrap{}},
		{Command: &controllerv1.Command_RegisterBroker{}},
		{Command: &controllerv1.Command_FenceBroker{}},
		{Command: &controllerv1.Command_UnfenceBroker{}},
		{Command: &controllerv1.Command_ControlledShutdown{}},
		{Command: &controllerv1.Command_CreateTopics{}},
		{Command: &controllerv1.Command_CreateTopics{CreateTopics: &controllerv1.CreateTopicsRequest{Topics: []*controllerv1.CreatableTopic{nil}}}},
		{Command: &controllerv1.Command_DeleteTopics{}},
		{Command: &controllerv1.Command_CreatePartitions{CreatePartitions: &controllerv1.CreatePartitionsRequest{Topics: []*controllerv1.PartitionCount{nil}}}},
		{Command: &controllerv1.Command_AlterConfigs{}},
		{Command: &controllerv1.Command_AlterPartition{}},
		{Command: &controllerv1.Command_ElectLeaders{}},
		{Command: &controllerv1.Command_ElectLeaders{ElectLeaders: &controllerv1.ElectLeadersRequest{Type: controllerv1.ElectionType_ELECTION_TYPE_PREFERRED, Partitions: []*controllerv1.TopicPartitions{nil}}}},
		{Command: &controllerv1.Command_AllocateProducerIds{}},
		{Command: &controllerv1.Command_CreateInternalTopics{}},
		{Command: &controllerv1.Command_CoordinatorChange{}},
	}
	for i, c := range cmds {
		if _, err := m.Apply(uint64(i+1), c); err == nil && i < 4 {
			t.Errorf("command %d (%v) accepted", i, c)
		}
	}
	if _, err := m.Apply(100, &controllerv1.Command{Command: &controllerv1.Command_Bootstrap{Bootstrap: &controllerv1.BootstrapCommand{ClusterId: "x"}}}); err != nil {
		t.Fatal(err)
	}
	// The first applied change was at some index; an older index is refused.
	m.Apply(150, &controllerv1.Command{Command: &controllerv1.Command_RegisterBroker{RegisterBroker: &controllerv1.RegisterBrokerRequest{BrokerId: 1, GrpcAddr: "a", IncarnationId: "i"}}})
	if _, err := m.Apply(149, &controllerv1.Command{}); err == nil {
		t.Error("an entry behind the image was applied")
	}
}

// Random command sequences keep every invariant and replay identically.
func TestRandomCommandsKeepInvariants(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		a, b := New(), New()
		topics := []string{"a", "b", "c"}
		for i := range 300 {
			cmd := randomCommand(rng, a, topics)
			ra, errA := a.Apply(uint64(i+1), cmd)
			rb, errB := b.Apply(uint64(i+1), cmd)
			if (errA == nil) != (errB == nil) || len(ra.Records) != len(rb.Records) {
				t.Fatalf("seed %d step %d: two machines disagree on %v", seed, i, cmd)
			}
			if err := checkInvariants(a.Image()); err != nil {
				t.Fatalf("seed %d step %d after %s: %v", seed, i, Describe(cmd), err)
			}
		}
		if fmt.Sprint(a.Image().ToProto()) != fmt.Sprint(b.Image().ToProto()) {
			t.Fatalf("seed %d: images differ", seed)
		}
	}
}

func randomCommand(rng *rand.Rand, m *Machine, topics []string) *controllerv1.Command {
	broker := rng.Int32N(5)
	epoch := func() int64 {
		if b, ok := m.Image().Broker(metadataID(broker)); ok && rng.IntN(10) > 0 {
			return b.GetBrokerEpoch()
		}
		return rng.Int64N(50)
	}
	topic := topics[rng.IntN(len(topics))]
	switch rng.IntN(10) {
	case 0, 1:
		return &controllerv1.Command{Command: &controllerv1.Command_RegisterBroker{RegisterBroker: &controllerv1.RegisterBrokerRequest{
			BrokerId: broker, GrpcAddr: "x", IncarnationId: fmt.Sprint(rng.IntN(3)), LogDirId: []string{"", "d0", "d1"}[rng.IntN(3)]}}}
	case 2:
		return &controllerv1.Command{Command: &controllerv1.Command_FenceBroker{FenceBroker: &controllerv1.FenceBrokerCommand{BrokerId: broker, BrokerEpoch: epoch()}}}
	case 3:
		return &controllerv1.Command{Command: &controllerv1.Command_UnfenceBroker{UnfenceBroker: &controllerv1.UnfenceBrokerCommand{BrokerId: broker, BrokerEpoch: epoch()}}}
	case 4:
		return &controllerv1.Command{Command: &controllerv1.Command_CreateTopics{CreateTopics: &controllerv1.CreateTopicsRequest{Topics: []*controllerv1.CreatableTopic{{
			Name: topic, Partitions: rng.Int32N(4), ReplicationFactor: rng.Int32N(4),
			Configs: map[string]string{"unclean.leader.election.enable": fmt.Sprint(rng.IntN(2) == 0)}}}}}}
	case 5:
		var isr []int32
		for r := range int32(5) {
			if rng.IntN(2) == 0 {
				isr = append(isr, r)
			}
		}
		p := rng.Int32N(3)
		cur, _ := m.Image().Partition(topic, p)
		return &controllerv1.Command{Command: &controllerv1.Command_AlterPartition{AlterPartition: &controllerv1.AlterPartitionRequest{
			BrokerId: cur.GetLeader(), BrokerEpoch: epochOf(m, cur.GetLeader()),
			Partitions: []*controllerv1.PartitionIsrChange{{Topic: topic, Partition: p, LeaderEpoch: cur.GetLeaderEpoch(), PartitionEpoch: cur.GetPartitionEpoch(), NewIsr: isr}}}}}
	case 6:
		return &controllerv1.Command{Command: &controllerv1.Command_ElectLeaders{ElectLeaders: &controllerv1.ElectLeadersRequest{Type: controllerv1.ElectionType(1 + rng.IntN(2))}}}
	case 7:
		return &controllerv1.Command{Command: &controllerv1.Command_ControlledShutdown{ControlledShutdown: &controllerv1.ControlledShutdownRequest{BrokerId: broker, BrokerEpoch: epoch()}}}
	case 8:
		if rng.IntN(3) == 0 {
			return &controllerv1.Command{Command: &controllerv1.Command_DeleteTopics{DeleteTopics: &controllerv1.DeleteTopicsRequest{Names: []string{topic}}}}
		}
		return &controllerv1.Command{Command: &controllerv1.Command_CreatePartitions{CreatePartitions: &controllerv1.CreatePartitionsRequest{Topics: []*controllerv1.PartitionCount{{Name: topic, Count: rng.Int32N(5)}}}}}
	default:
		if rng.IntN(2) == 0 {
			return &controllerv1.Command{Command: &controllerv1.Command_CreateInternalTopics{CreateInternalTopics: &controllerv1.CreateInternalTopicsCommand{ConsumerOffsetsPartitions: 3, TransactionStatePartitions: 2}}}
		}
		return &controllerv1.Command{Command: &controllerv1.Command_CoordinatorChange{CoordinatorChange: &controllerv1.CoordinatorChangeCommand{Coordinator: &controllerv1.CoordinatorRecord{
			Id: rng.Int32N(3), Kind: controllerv1.CoordinatorKind(1 + rng.IntN(2)), Alive: rng.IntN(2) == 0}}}}
	}
}

func metadataID(id int32) metadata.BrokerID { return metadata.BrokerID(id) }

func epochOf(m *Machine, id int32) int64 {
	b, _ := m.Image().Broker(metadataID(id))
	return b.GetBrokerEpoch()
}
