package fsm

import (
	"errors"
	"fmt"
	"strconv"
	"testing"

	controllerv1 "skein/gen/skein/controller/v1"
)

// brokersOf answers a machine of this build's rule with brokers 1..n
// registered, and a function that creates a topic on it.
func brokersOf(t *testing.T, n int) (*Machine, func(name string, partitions, rf int)) {
	m := New()
	index := uint64(0)
	apply := func(cmd *controllerv1.Command) {
		t.Helper()
		index++
		cmd.PlacementRule = MaxPlacementRule
		if _, err := m.Apply(index, cmd); err != nil {
			t.Fatal(err)
		}
	}
	apply(&controllerv1.Command{Command: &controllerv1.Command_Bootstrap{Bootstrap: &controllerv1.BootstrapCommand{ClusterId: "test"}}})
	for b := 1; b <= n; b++ {
		apply(&controllerv1.Command{Command: &controllerv1.Command_RegisterBroker{RegisterBroker: &controllerv1.RegisterBrokerRequest{
			BrokerId: int32(b), GrpcAddr: "127.0.0.1:" + strconv.Itoa(b), IncarnationId: "inc", LogDirId: "dir"}}})
	}
	return m, func(name string, partitions, rf int) {
		t.Helper()
		apply(&controllerv1.Command{Command: &controllerv1.Command_CreateTopics{CreateTopics: &controllerv1.CreateTopicsRequest{
			Topics: []*controllerv1.CreatableTopic{{Name: name, Partitions: int32(partitions), ReplicationFactor: int32(rf)}}}}})
	}
}

// TestFailedBrokersLeadershipsSpread checks what the shifted followers are
// for: when a broker fails, the partitions it led go to their second
// replicas, and no other broker takes more than one more of them than
// another does (two, when a last round of fewer partitions than brokers is
// placed to keep the replicas even); and each broker holds as many of the
// topic's replicas as another, ±1.
func TestFailedBrokersLeadershipsSpread(t *testing.T) {
	for _, brokers := range []int{3, 4, 5, 6, 9} {
		for _, rf := range []int{2, 3} {
			for _, partitions := range []int{brokers, brokers + 1, 2 * brokers, 4*brokers + 1, 50} {
				t.Run(fmt.Sprintf("%d brokers, RF %d, %d partitions", brokers, rf, partitions), func(t *testing.T) {
					m, create := brokersOf(t, brokers)
					create("t", partitions, rf)
					// takeover[failed][next] counts the partitions failed leads
					// whose second replica is next.
					takeover := map[int32]map[int32]int{}
					for _, p := range m.Image().Partitions("t") {
						r := p.GetReplicas()
						if takeover[r[0]] == nil {
							takeover[r[0]] = map[int32]int{}
						}
						takeover[r[0]][r[1]]++
					}
					held := map[int32]int{}
					for _, p := range m.Image().Partitions("t") {
						for _, r := range p.GetReplicas() {
							held[r]++
						}
					}
					lo, hi := partitions*rf, 0
					for b := int32(1); b <= int32(brokers); b++ {
						lo, hi = min(lo, held[b]), max(hi, held[b])
					}
					if hi-lo > 1 {
						t.Errorf("replicas held by each broker uneven: %v", held)
					}
					for failed, next := range takeover {
						lo, hi := partitions, 0
						for b := int32(1); b <= int32(brokers); b++ {
							if b != failed {
								lo, hi = min(lo, next[b]), max(hi, next[b])
							}
						}
						if slack := min(1, partitions%brokers) + 1; hi-lo > slack {
							t.Errorf("broker %d failing hands its leaderships to %v: uneven", failed, next)
						}
					}
				})
			}
		}
	}
}

// The same across calls: 24 topics created one after another, each call's
// followers starting one further round the brokers than the last's. Rule 1
// gave each leader the same second replica in every topic.
func TestFailedBrokersLeadershipsSpreadOverManyTopics(t *testing.T) {
	for _, brokers := range []int{3, 4, 5, 6} {
		for _, rf := range []int{2, 3} {
			for _, size := range []int{1, 2, 3, 6, 7} {
				t.Run(fmt.Sprintf("%d brokers, RF %d, topics of %d", brokers, rf, size), func(t *testing.T) {
					m, create := brokersOf(t, brokers)
					takeover := map[int32]map[int32]int{}
					for k := range 24 {
						name := fmt.Sprint("t", k)
						create(name, size, rf)
						for _, p := range m.Image().Partitions(name) {
							r := p.GetReplicas()
							if takeover[r[0]] == nil {
								takeover[r[0]] = map[int32]int{}
							}
							takeover[r[0]][r[1]]++
						}
					}
					for failed, next := range takeover {
						total, lo, hi := 0, 1<<30, 0
						for b := int32(1); b <= int32(brokers); b++ {
							if b != failed {
								total += next[b]
								lo, hi = min(lo, next[b]), max(hi, next[b])
							}
						}
						// even: each other broker's share, were they equal.
						even := float64(total) / float64(brokers-1)
						if even < 1 && hi > 1 || even >= 1 && (3*float64(lo) < even || float64(hi) > 2*even+2) {
							t.Errorf("broker %d failing hands its %d leaderships to %v: uneven", failed, total, next)
						}
					}
				})
			}
		}
	}
}

func TestProposalRule(t *testing.T) {
	for _, tc := range []struct {
		name      string
		voters    []int32
		announced map[int32]uint32
		want      uint32
	}{
		{"every voter of this build", []int32{1, 2, 3}, map[int32]uint32{1: MaxPlacementRule, 2: MaxPlacementRule, 3: MaxPlacementRule}, MaxPlacementRule},
		{"one voter not heard from", []int32{1, 2, 3}, map[int32]uint32{1: MaxPlacementRule, 2: MaxPlacementRule}, SpreadPlacement},
		{"no gossip", []int32{1, 2, 3}, nil, SpreadPlacement},
		{"a voter of a newer build", []int32{1, 2}, map[int32]uint32{1: MaxPlacementRule, 2: MaxPlacementRule + 1}, MaxPlacementRule},
		{"a voter of an older build that announces", []int32{1, 2}, map[int32]uint32{1: MaxPlacementRule, 2: SpreadPlacement}, SpreadPlacement},
		{"announcements from non-voters do not count", []int32{1}, map[int32]uint32{1: MaxPlacementRule, 9: SpreadPlacement}, MaxPlacementRule},
	} {
		if got := ProposalRule(tc.voters, tc.announced); got != tc.want {
			t.Errorf("%s: ProposalRule = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// An entry naming a rule newer than this build's changes nothing.
func TestNewerRuleIsNotApplied(t *testing.T) {
	m := New()
	before := m.Image().Version()
	_, err := m.Apply(1, &controllerv1.Command{PlacementRule: MaxPlacementRule + 1,
		Command: &controllerv1.Command_Bootstrap{Bootstrap: &controllerv1.BootstrapCommand{ClusterId: "test"}}})
	if err == nil || !errors.Is(err, ErrNewerRule) {
		t.Fatalf("Apply = %v, want ErrNewerRule", err)
	}
	if m.Image().Version() != before || m.Image().ClusterID() != "" {
		t.Fatalf("the image changed: version %d, cluster %q", m.Image().Version(), m.Image().ClusterID())
	}
}
