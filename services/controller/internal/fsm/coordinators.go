package fsm

import (
	"slices"

	"google.golang.org/protobuf/proto"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/errs"
	"skein/libs/metadata"
)

// coordinatorChange records a coordinator process joining, moving or dying,
// then reassigns its kind's internal partitions.
func (t *tx) coordinatorChange(c *controllerv1.CoordinatorChangeCommand) error {
	rec := c.GetCoordinator()
	if _, ok := metadata.InternalTopic(rec.GetKind()); !ok || rec.GetId() < 0 {
		return errs.Errorf(errs.InvalidRequest, "coordinator without a kind or with a negative id")
	}
	if old, ok := t.img.Coordinator(rec.GetKind(), rec.GetId()); !ok || !proto.Equal(old, rec) {
		if err := t.put(metadata.CoordinatorRecord(rec)); err != nil {
			return err
		}
	}
	return t.rebalanceCoordinators(rec.GetKind())
}

// rebalanceCoordinators gives every partition of the kind's internal topic a
// live owner, spread evenly (counts differ by at most one), moving as few
// partitions as it can: an owner keeps what it has up to its share; what a
// dead owner held, and the excess of the overloaded, goes to the least
// loaded. Every change of owner bumps the partition's coordinator epoch.
// With no live coordinator of the kind, owners become -1.
func (t *tx) rebalanceCoordinators(kind controllerv1.CoordinatorKind) error {
	topic, _ := metadata.InternalTopic(kind)
	n := int(t.img.PartitionCount(topic))
	if n == 0 {
		return nil
	}
	var live []int32
	for _, c := range t.img.Coordinators() {
		if c.GetKind() == kind && c.GetAlive() {
			live = append(live, c.GetId())
		}
	}
	owner := make([]int32, n)
	current := make([]int32, n)
	count := map[int32]int{}
	for p := range n {
		current[p] = -1
		if a, ok := t.img.Assignment(kind, int32(p)); ok {
			current[p] = a.GetOwner()
		}
		owner[p] = -1
		if slices.Contains(live, current[p]) {
			count[current[p]]++
		}
	}
	if len(live) > 0 {
		// Shares: n/k each, one more for the first n%k of the live
		// coordinators ordered by what they hold now (most first), so the
		// extra places go where partitions already are.
		order := slices.Clone(live)
		slices.SortStableFunc(order, func(a, b int32) int { return count[b] - count[a] })
		share := map[int32]int{}
		for i, id := range order {
			share[id] = n / len(live)
			if i < n%len(live) {
				share[id]++
			}
		}
		held := map[int32]int{}
		for p := range n {
			if o := current[p]; slices.Contains(live, o) && held[o] < share[o] {
				owner[p] = o
				held[o]++
			}
		}
		for p := range n {
			if owner[p] >= 0 {
				continue
			}
			best := int32(-1)
			for _, id := range live { // ascending id
				if held[id] < share[id] && (best < 0 || held[id] < held[best]) {
					best = id
				}
			}
			owner[p] = best
			held[best]++
		}
	}
	var recs []*controllerv1.MetadataRecord
	for p := range n {
		a, ok := t.img.Assignment(kind, int32(p))
		switch {
		case !ok:
			epoch := int32(0)
			if owner[p] >= 0 {
				epoch = 1
			}
			recs = append(recs, metadata.AssignmentRecord(&controllerv1.CoordinatorAssignmentRecord{Kind: kind, Partition: int32(p), Owner: owner[p], CoordinatorEpoch: epoch}))
		case a.GetOwner() != owner[p]:
			recs = append(recs, metadata.AssignmentRecord(&controllerv1.CoordinatorAssignmentRecord{Kind: kind, Partition: int32(p), Owner: owner[p], CoordinatorEpoch: a.GetCoordinatorEpoch() + 1}))
		}
	}
	return t.put(recs...)
}
