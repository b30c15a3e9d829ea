package group

import (
	"slices"

	"skein/libs/errs"
	"skein/services/groupcoord/internal/assign"
)

// OffsetDelete is one OffsetDelete of the group (Kafka's, KIP-496:
// kafka-consumer-groups --delete-offsets): the partitions whose committed
// offsets to delete, and what the shell knows of them.
type OffsetDelete struct {
	// Partitions are the partitions asked, in the request's order.
	Partitions []assign.TopicPartition
	// Exists reports whether a partition exists (its topic does, and the
	// partition is within its count); nil: every one does.
	Exists func(assign.TopicPartition) bool
	// Holds reports whether the group holds something of a partition: a
	// committed offset, a transaction's pending offset or failed
	// deliveries. Nil: nothing.
	Holds func(assign.TopicPartition) bool
}

// DeleteOffsets decides an OffsetDelete, as Kafka's coordinator does. It
// answers one error per partition asked, in order:
//
//   - UNKNOWN_TOPIC_OR_PARTITION: the partition does not exist;
//   - GROUP_SUBSCRIBED_TO_TOPIC: a member of the group subscribes to the
//     partition's topic (a static member away for now included), so its
//     offset stays: the member reads from it;
//   - nil: the partition's offset is deleted, or the group had none (no
//     error either way, as Kafka answers).
//
// Effects.Drop lists the partitions the group holds something of among
// the deleted ones, for the shell to tombstone: the committed offset, and,
// as Kafka's offset tombstone does, every transaction's pending offset of
// the partition (a transaction that commits later no longer brings it
// back) and, with them, the partition's failed deliveries. The group's own
// state does not change: an empty group stays, and an active one keeps its
// members and epochs. A deleted group is GROUP_ID_NOT_FOUND, as a whole.
func (g *Group) DeleteOffsets(req OffsetDelete) ([]error, Effects, error) {
	if g.dead {
		return nil, Effects{}, errs.Errorf(errs.GroupIDNotFound, "group %q was deleted", g.id)
	}
	subscribed := map[string]bool{}
	for _, t := range g.SubscribedTopics() {
		subscribed[t] = true
	}
	out := make([]error, len(req.Partitions))
	var drop []assign.TopicPartition
	dropping := map[assign.TopicPartition]bool{} // a topic of many partitions stays linear
	for i, tp := range req.Partitions {
		switch {
		case tp.Partition < 0 || (req.Exists != nil && !req.Exists(tp)):
			out[i] = errs.Errorf(errs.UnknownTopicOrPartition, "no partition %s:%d", tp.Topic, tp.Partition)
		case subscribed[tp.Topic]:
			out[i] = errs.Errorf(errs.GroupSubscribedToTopic, "group %q has members subscribed to topic %q: its offset of partition %d stays",
				g.id, tp.Topic, tp.Partition)
		case req.Holds != nil && !dropping[tp] && req.Holds(tp):
			dropping[tp] = true
			drop = append(drop, tp)
		}
	}
	slices.SortFunc(drop, compareTP)
	return out, Effects{Drop: drop}, nil
}
