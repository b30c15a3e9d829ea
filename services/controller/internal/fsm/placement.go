package fsm

import (
	"slices"

	"skein/libs/metadata"
)

// Placement rules a command may name (controllerv1.Command.placement_rule).
const (
	// FirstPlacement evens out the cluster's counts alone.
	FirstPlacement uint32 = 0
	// SpreadPlacement spreads one call's partitions first.
	SpreadPlacement uint32 = 1
	// ShiftedPlacement also spreads each leader's partitions' followers,
	// so a failed broker's leaderships go to several brokers, not one.
	ShiftedPlacement uint32 = 2
	// MaxPlacementRule is the newest rule this build applies.
	MaxPlacementRule = ShiftedPlacement
)

// ProposalRule answers the placement rule a leader proposes with: the newest
// one that every voter applies, so no controller places an entry otherwise
// than the leader did. announced holds, for each voter heard from, the newest
// rule its build applies; a voter not heard from (down, or of a build that
// does not announce it) counts as applying SpreadPlacement, the rule of
// every build before the announcement.
func ProposalRule(voters []int32, announced map[int32]uint32) uint32 {
	rule := MaxPlacementRule
	for _, v := range voters {
		a, ok := announced[v]
		if !ok {
			a = SpreadPlacement
		}
		rule = min(rule, a)
	}
	return rule
}

// place chooses replicas for n new partitions of replication factor rf among
// the live brokers (rf <= live brokers, checked by the caller). Greedy and
// deterministic, spreading these n partitions first and then counting what
// the cluster already holds:
//   - the preferred leader (first replica) of each partition is the live
//     broker that is the preferred leader of the fewest of these n (then of
//     the fewest partitions in all, then holds the fewest replicas, then has
//     the lowest id), so one call's leaders spread over the brokers, and
//     the cluster's leaders even out over time;
//   - from ShiftedPlacement on, when the brokers have no racks (or all
//     the same), the followers are Kafka's shifted followers: they go round
//     the brokers (by id) from the leader, starting one further on each
//     round of as many partitions as brokers. On three brokers, broker 1's
//     partitions alternate their second replica between 2 and 3, so when 1
//     fails its leaderships go half to each, not all to the lowest id, and
//     every broker holds as many of the call's replicas as the others;
//   - otherwise each further replica is the broker holding the fewest
//     replicas of these n (then the fewest in all), with a rack not yet
//     used by the partition when one is left (rack-aware when racks are
//     given; brokers without a rack share the rack "").
//
// So a broker that just joined, holding nothing, gets its share of a new
// topic's leaders and replicas first, not all of them.
//
// rule is the placement rule the command names: 0, the rule of entries
// written before this one, leaves out the first step (what this call
// placed), so those entries replay as they were first applied.
func place(img *metadata.Image, n, rf int, rule uint32) [][]int32 {
	spread := rule >= SpreadPlacement
	shifted := rule >= ShiftedPlacement
	type load struct {
		id       int32
		rack     string
		leaders  int
		replicas int
		// newLeaders and newReplicas count what this call placed.
		newLeaders, newReplicas int
	}
	var brokers []*load
	byID := map[int32]*load{}
	// calls stands for the calls that placed partitions before this one
	// (the topics there are): each starts its followers one further on.
	calls := len(img.Topics())
	// behind counts the partitions that hold a follower at a place behind a
	// leader (ShiftedPlacement, in a last, partial round).
	type slot struct {
		leader, follower int32
		at               int
	}
	behind := map[slot]int{}
	for _, b := range img.LiveBrokers() {
		l := &load{id: b.GetId(), rack: b.GetRack()}
		brokers = append(brokers, l)
		byID[l.id] = l
	}
	for _, tp := range img.Topics() {
		for _, p := range img.Partitions(tp.GetName()) {
			rs := p.GetReplicas()
			for i, r := range rs {
				if i > 0 {
					behind[slot{rs[0], r, i}]++
				}
				if l, ok := byID[r]; ok {
					l.replicas++
					if i == 0 {
						l.leaders++
					}
				}
			}
		}
	}
	racks := map[string]bool{}
	for _, b := range brokers {
		racks[b.rack] = true
	}
	// From ShiftedPlacement on, with one rack (or none), followers go round
	// the brokers (by id) from their leader, shifted by one more each round
	// of len(brokers) partitions, and the first round's shift by one more
	// than the last call's: Kafka's shifted followers, with every broker
	// holding as many of the call's replicas as the others (±1).
	// A last round of fewer partitions than brokers places its followers as
	// below, among the brokers holding the fewest of the call's replicas
	// the one least often at that place behind the leader, so the call's
	// replicas stay even.
	ring := shifted && len(racks) == 1
	rounds := n / len(brokers) * len(brokers) // partitions in whole rounds
	out := make([][]int32, 0, n)
	for i := range n {
		var replicas []int32
		used := map[int32]bool{}
		usedRacks := map[string]bool{}
		pick := func(better func(a, b *load) bool) {
			var best *load
			for _, b := range brokers { // ascending id: ties go to the lowest
				if used[b.id] {
					continue
				}
				if best == nil || better(b, best) {
					best = b
				}
			}
			used[best.id] = true
			usedRacks[best.rack] = true
			best.replicas++
			best.newReplicas++
			replicas = append(replicas, best.id)
			if len(usedRacks) == len(racks) {
				clear(usedRacks) // every rack holds a replica: start a new round
			}
		}
		pick(func(a, b *load) bool {
			if spread && a.newLeaders != b.newLeaders {
				return a.newLeaders < b.newLeaders
			}
			if a.leaders != b.leaders {
				return a.leaders < b.leaders
			}
			return a.replicas < b.replicas
		})
		byID[replicas[0]].leaders++
		byID[replicas[0]].newLeaders++
		if ring && rf > 1 && i < rounds {
			at := slices.IndexFunc(brokers, func(b *load) bool { return b.id == replicas[0] })
			nb := len(brokers)
			shift := calls + i/nb
			for j := 0; len(replicas) < rf; j++ {
				b := brokers[(at+1+(shift+j)%(nb-1))%nb]
				b.replicas++
				b.newReplicas++
				replicas = append(replicas, b.id)
			}
		}
		for len(replicas) < rf {
			pick(func(a, b *load) bool {
				if ua, ub := usedRacks[a.rack], usedRacks[b.rack]; ua != ub {
					return !ua
				}
				if spread && a.newReplicas != b.newReplicas {
					return a.newReplicas < b.newReplicas
				}
				if ring {
					at := len(replicas)
					if ba, bb := behind[slot{replicas[0], a.id, at}], behind[slot{replicas[0], b.id, at}]; ba != bb {
						return ba < bb
					}
				}
				return a.replicas < b.replicas
			})
		}
		for at, r := range replicas[1:] {
			behind[slot{replicas[0], r, at + 1}]++
		}
		out = append(out, replicas)
	}
	return out
}
