package assign

import (
	"cmp"
	"slices"
	"strings"
)

// Member is what an assignor knows of one group member.
type Member struct {
	ID MemberID
	// InstanceID is the static member's instance id, "" for a dynamic member.
	InstanceID string
	// Rack is the member's rack; no assignor here uses it yet.
	Rack string
	// Topics is the subscription.
	Topics []string
	// Current is the member's current target assignment: what a sticky
	// assignor tries to keep. Nil for a new member.
	Current Partitions
}

// Assignor computes a group's target assignment.
type Assignor interface {
	// Name is the name members ask for in server_assignor.
	Name() string
	// Assign answers a target for every member: topics maps each topic to
	// its partition count; subscribed topics it lacks get nothing. Member IDs
	// are distinct. See the package comment for the contract.
	Assign(members []Member, topics map[string]int32) map[MemberID]Partitions
}

// Names of the assignors in this package.
const (
	RangeName   = "range"
	UniformName = "uniform"
)

// Range is Kafka's RangeAssignor: topic by topic, the sorted subscribers take
// contiguous ranges, the first ones one partition more when the count does
// not divide.
type Range struct{}

// Name implements Assignor.
func (Range) Name() string { return RangeName }

// Assign implements Assignor.
func (Range) Assign(members []Member, topics map[string]int32) map[MemberID]Partitions {
	ms := sorted(members)
	out := make(map[MemberID]map[string][]int32, len(ms))
	for _, m := range ms {
		out[m.ID] = map[string][]int32{}
	}
	for _, t := range subscribedTopics(ms, topics) {
		var subs []Member
		for _, m := range ms {
			if slices.Contains(m.Topics, t) {
				subs = append(subs, m)
			}
		}
		n := int(topics[t])
		per, extra := n/len(subs), n%len(subs)
		next := 0
		for i, m := range subs {
			take := per
			if i < extra {
				take++
			}
			for p := next; p < next+take; p++ {
				out[m.ID][t] = append(out[m.ID][t], int32(p))
			}
			next += take
		}
	}
	return finish(out)
}

// Uniform is the sticky, balancing assignor: members keep their current
// partitions unless the balance needs them elsewhere. Ties are broken by the
// member order of Range, so the answer is deterministic.
type Uniform struct{}

// Name implements Assignor.
func (Uniform) Name() string { return UniformName }

// Assign implements Assignor.
//
// Three steps: keep every current partition that still exists and that the
// member still subscribes to (the first member in order keeps one that two
// claim); give every unowned partition, the most constrained first (fewest
// subscribers), to the subscriber holding the fewest; then move partitions,
// one at a time, from a member to a subscriber holding at least 2 fewer
// until no such move remains. With equal subscriptions the last step ends
// with counts within 1, and moves only what the balance needs.
func (Uniform) Assign(members []Member, topics map[string]int32) map[MemberID]Partitions {
	ms := sorted(members)
	subs := map[string][]int{} // topic → indexes into ms of its subscribers
	for i, m := range ms {
		for _, t := range m.Topics {
			if _, ok := topics[t]; ok && !slices.Contains(subs[t], i) {
				subs[t] = append(subs[t], i)
			}
		}
	}
	owner := map[TopicPartition]int{}
	held := make([][]TopicPartition, len(ms)) // sorted by compareTP
	for i, m := range ms {
		for _, tp := range m.Current.List() {
			if tp.Partition < 0 || tp.Partition >= topics[tp.Topic] || !slices.Contains(subs[tp.Topic], i) {
				continue
			}
			if _, taken := owner[tp]; taken {
				continue
			}
			owner[tp] = i
			held[i] = append(held[i], tp)
		}
	}
	var free []TopicPartition
	for _, t := range subscribedTopics(ms, topics) {
		for p := range topics[t] {
			if _, ok := owner[TopicPartition{t, p}]; !ok {
				free = append(free, TopicPartition{t, p})
			}
		}
	}
	slices.SortStableFunc(free, func(a, b TopicPartition) int {
		return cmp.Compare(len(subs[a.Topic]), len(subs[b.Topic]))
	})
	fewest := func(tp TopicPartition) int {
		best := -1
		for _, i := range subs[tp.Topic] {
			if best < 0 || len(held[i]) < len(held[best]) {
				best = i
			}
		}
		return best
	}
	give := func(tp TopicPartition, to int) {
		owner[tp] = to
		at, _ := slices.BinarySearchFunc(held[to], tp, compareTP)
		held[to] = slices.Insert(held[to], at, tp)
	}
	for _, tp := range free {
		give(tp, fewest(tp))
	}
	// Balance. Every move lowers the sum of squared counts, so this ends.
	for moved := true; moved; {
		moved = false
		donors := make([]int, len(ms))
		for i := range donors {
			donors[i] = i
		}
		slices.SortStableFunc(donors, func(a, b int) int { return cmp.Compare(len(held[b]), len(held[a])) })
		for _, d := range donors {
			// Give away the last partitions first: the first ones are the
			// ones a member kept longest in a range-like layout.
			for k := len(held[d]) - 1; k >= 0; k-- {
				tp := held[d][k]
				r := fewest(tp)
				if len(held[r])+1 < len(held[d]) {
					held[d] = slices.Delete(held[d], k, k+1)
					give(tp, r)
					moved = true
					break
				}
			}
			if moved {
				break
			}
		}
	}
	out := make(map[MemberID]Partitions, len(ms))
	for i, m := range ms {
		out[m.ID] = FromList(held[i])
	}
	return out
}

// sorted orders members as Kafka does: static members first by instance id,
// then dynamic ones by member id.
func sorted(members []Member) []Member {
	ms := slices.Clone(members)
	slices.SortFunc(ms, func(a, b Member) int {
		switch {
		case a.InstanceID != "" && b.InstanceID != "":
			if c := strings.Compare(a.InstanceID, b.InstanceID); c != 0 {
				return c
			}
		case a.InstanceID != "":
			return -1
		case b.InstanceID != "":
			return 1
		}
		return strings.Compare(string(a.ID), string(b.ID))
	})
	return ms
}

// subscribedTopics answers, sorted, the topics some member subscribes to and
// the metadata holds.
func subscribedTopics(ms []Member, topics map[string]int32) []string {
	var out []string
	for _, m := range ms {
		for _, t := range m.Topics {
			if _, ok := topics[t]; ok && !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	slices.Sort(out)
	return out
}

func finish(m map[MemberID]map[string][]int32) map[MemberID]Partitions {
	out := make(map[MemberID]Partitions, len(m))
	for id, ps := range m {
		out[id] = Of(ps)
	}
	return out
}
