package fsm

import (
	"skein/libs/metadata"
)

// Placement rules a command may name (controllerv1.Command.placement_rule).
const (
	// FirstPlacement evens out the cluster's counts alone.
	FirstPlacement uint32 = 0
	// SpreadPlacement spreads one call's partitions first.
	SpreadPlacement uint32 = 1
	// PlacementRule is the rule a leader of this build proposes with.
	PlacementRule = SpreadPlacement
)

// place chooses replicas for n new partitions of replication factor rf among
// the live brokers (rf <= live brokers, checked by the caller). Greedy and
// deterministic, spreading these n partitions first and then counting what
// the cluster already holds:
//   - the preferred leader (first replica) of each partition is the live
//     broker that is the preferred leader of the fewest of these n (then of
//     the fewest partitions in all, then holds the fewest replicas, then has
//     the lowest id), so one call's leaders spread over the brokers, and
//     the cluster's leaders even out over time;
//   - each further replica is the broker holding the fewest replicas of
//     these n (then the fewest in all), with a rack not yet used by the
//     partition when one is left (rack-aware when racks are given; brokers
//     without a rack share the rack "").
//
// So a broker that just joined, holding nothing, gets its share of a new
// topic's leaders and replicas first, not all of them.
//
// rule is the placement rule the command names: 0, the rule of entries
// written before this one, leaves out the first step (what this call
// placed), so those entries replay as they were first applied.
func place(img *metadata.Image, n, rf int, rule uint32) [][]int32 {
	spread := rule >= SpreadPlacement
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
	for _, b := range img.LiveBrokers() {
		l := &load{id: b.GetId(), rack: b.GetRack()}
		brokers = append(brokers, l)
		byID[l.id] = l
	}
	for _, tp := range img.Topics() {
		for _, p := range img.Partitions(tp.GetName()) {
			for i, r := range p.GetReplicas() {
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
	out := make([][]int32, 0, n)
	for range n {
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
		for len(replicas) < rf {
			pick(func(a, b *load) bool {
				if ua, ub := usedRacks[a.rack], usedRacks[b.rack]; ua != ub {
					return !ua
				}
				if spread && a.newReplicas != b.newReplicas {
					return a.newReplicas < b.newReplicas
				}
				return a.replicas < b.replicas
			})
		}
		out = append(out, replicas)
	}
	return out
}
