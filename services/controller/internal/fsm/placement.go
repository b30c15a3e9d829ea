package fsm

import (
	"skein/libs/metadata"
)

// place chooses replicas for n new partitions of replication factor rf among
// the live brokers (rf <= live brokers, checked by the caller). Greedy and
// deterministic, counting what the cluster already holds:
//   - the preferred leader (first replica) of each partition is the live
//     broker that is the preferred leader of the fewest partitions (then
//     holds the fewest replicas, then has the lowest id), so leaders spread
//     evenly over the brokers and over time;
//   - each further replica is the broker holding the fewest replicas, with
//     a rack not yet used by the partition when one is left (rack-aware
//     when racks are given; brokers without a rack share the rack "").
func place(img *metadata.Image, n, rf int) [][]int32 {
	type load struct {
		id       int32
		rack     string
		leaders  int
		replicas int
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
			replicas = append(replicas, best.id)
			if len(usedRacks) == len(racks) {
				clear(usedRacks) // every rack holds a replica: start a new round
			}
		}
		pick(func(a, b *load) bool {
			if a.leaders != b.leaders {
				return a.leaders < b.leaders
			}
			return a.replicas < b.replicas
		})
		byID[replicas[0]].leaders++
		for len(replicas) < rf {
			pick(func(a, b *load) bool {
				if ua, ub := usedRacks[a.rack], usedRacks[b.rack]; ua != ub {
					return !ua
				}
				return a.replicas < b.replicas
			})
		}
		out = append(out, replicas)
	}
	return out
}
