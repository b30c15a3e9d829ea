package client

import (
	"context"

	groupv1 "skein/gen/skein/group/v1"
	"skein/libs/errs"
)

// noteDeliveries takes the failed deliveries a heartbeat answered: the
// coordinator's view replaces this member's.
func (g *GroupConsumer) noteDeliveries(ds []*groupv1.PartitionDeliveries) {
	g.failed = map[TopicPartition]map[int64]int32{}
	for _, d := range ds {
		m := map[int64]int32{}
		for _, r := range d.GetRecords() {
			m[r.GetOffset()] = r.GetFailed()
		}
		g.failed[TopicPartition{d.GetTopic(), d.GetPartition()}] = m
	}
}

// DeliveryAttempt answers which delivery to the group a record of an owned
// partition is: 1 for the first, 1 + its failed deliveries (nacks) after.
func (g *GroupConsumer) DeliveryAttempt(tp TopicPartition, offset int64) int32 {
	return g.failed[tp][offset] + 1
}

// Seek makes the next Poll read an owned partition from offset (Kafka's
// seek): a partition whose position went out of range under ResetNone,
// say.
func (g *GroupConsumer) Seek(tp TopicPartition, offset int64) error {
	ps := g.owned[tp]
	if ps == nil {
		return errs.Errorf(errs.StaleMemberEpoch, "member %s does not own %s:%d", g.memberID, tp.Topic, tp.Partition)
	}
	if offset < 0 {
		return errs.Errorf(errs.InvalidRequest, "offset %d is negative", offset)
	}
	ps.pos = offset
	delete(g.followAfter, tp) // read at once, not after a failed stream's pause
	return nil
}

// Nack tells the coordinator that the record at offset of an owned
// partition could not be processed. The partition's position goes back to
// the record (it and the records after it are delivered again, in order),
// or, once the record reached the group's max.delivery.attempts and went
// to the dead-letter topic, to the record after it (the group's committed
// offset is past it already). A refusal is the error and changes nothing.
func (g *GroupConsumer) Nack(ctx context.Context, tp TopicPartition, offset int64, reason string) (*groupv1.NackResponse, error) {
	if g.closed {
		return nil, errClosed
	}
	if g.owned[tp] == nil {
		return nil, errs.Errorf(errs.StaleMemberEpoch, "member %s does not own %s:%d", g.memberID, tp.Topic, tp.Partition)
	}
	resp, err := g.groups.Nack(ctx, &groupv1.NackRequest{GroupId: g.cfg.Group, MemberId: g.memberID, MemberEpoch: g.epoch,
		Topic: tp.Topic, Partition: tp.Partition, Offset: offset, Reason: reason})
	if err != nil {
		return nil, err
	}
	ps := g.owned[tp]
	if ps == nil {
		return resp, nil // revoked meanwhile (a callback): nothing to move
	}
	ps.pos = resp.GetNextOffset()
	if g.failed == nil {
		g.failed = map[TopicPartition]map[int64]int32{}
	}
	if resp.GetDeadLettered() {
		delete(g.failed[tp], offset)
		ps.committed = max(ps.committed, resp.GetNextOffset())
		return resp, nil
	}
	if g.failed[tp] == nil {
		g.failed[tp] = map[int64]int32{}
	}
	g.failed[tp][offset] = resp.GetFailedDeliveries()
	return resp, nil
}
