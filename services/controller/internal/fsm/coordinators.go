package fsm

import (
	"slices"

	"google.golang.org/protobuf/proto"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/errs"
	"skein/libs/metadata"
)

// coordinatorChange records a coordinator process joining, moving, dying or
// restarting, then reassigns its kind's internal partitions. A live
// coordinator seen with a new incarnation is a new process: the partitions
// it owns get a new coordinator epoch, as if they had moved, so the new
// process writes them under a new producer epoch from sequence 0.
func (t *tx) coordinatorChange(c *controllerv1.CoordinatorChangeCommand) error {
	rec := c.GetCoordinator()
	if _, ok := metadata.InternalTopic(rec.GetKind()); !ok || rec.GetId() < 0 {
		return errs.Errorf(errs.InvalidRequest, "coordinator without a kind or with a negative id")
	}
	restarted := int32(-1)
	if old, ok := t.img.Coordinator(rec.GetKind(), rec.GetId()); !ok || !proto.Equal(old, rec) {
		if ok && old.GetAlive() && rec.GetAlive() && old.GetIncarnation() != rec.GetIncarnation() {
			restarted = rec.GetId()
		}
		if err := t.put(metadata.CoordinatorRecord(rec)); err != nil {
			return err
		}
	}
	return t.rebalanceCoordinators(rec.GetKind(), restarted)
}

// rebalanceCoordinators gives every partition of the kind's internal topic a
// live owner, spread evenly (counts differ by at most one), moving as few
// partitions as it can: an owner keeps what it has up to its share; what a
// dead owner held, and the excess of the overloaded, goes to the least
// loaded. Every change of owner bumps the partition's coordinator epoch, and
// so does a restart of the owner (restarted, -1 for none). With no live
// coordinator of the kind, owners become -1. Each partition gets a producer
// id once, from the producer id space, which all its owners write through.
func (t *tx) rebalanceCoordinators(kind controllerv1.CoordinatorKind, restarted int32) error {
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
	nextPID := t.img.NextProducerID()
	for p := range n {
		a, ok := t.img.Assignment(kind, int32(p))
		next := &controllerv1.CoordinatorAssignmentRecord{Kind: kind, Partition: int32(p), Owner: owner[p]}
		switch {
		case !ok:
			if owner[p] >= 0 {
				next.CoordinatorEpoch = 1
			}
		case a.GetOwner() != owner[p] || (owner[p] >= 0 && owner[p] == restarted):
			next.CoordinatorEpoch = a.GetCoordinatorEpoch() + 1
		case a.ProducerId == nil:
			next.CoordinatorEpoch = a.GetCoordinatorEpoch() // written before producer ids: give it one
		default:
			continue
		}
		if ok && a.ProducerId != nil {
			next.ProducerId = proto.Int64(a.GetProducerId())
		} else {
			next.ProducerId = proto.Int64(nextPID)
			nextPID++
		}
		recs = append(recs, metadata.AssignmentRecord(next))
	}
	if nextPID != t.img.NextProducerID() {
		recs = append(recs, metadata.ProducerIDsRecord(nextPID))
	}
	return t.put(recs...)
}
