package fsm

import (
	"google.golang.org/protobuf/proto"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/errs"
	"skein/libs/metadata"
)

// registerBroker registers a broker. The same incarnation re-registering keeps
// its epoch; a new incarnation (a restarted process) first loses everything
// the old one held — leaderships and ISR places, as if fenced — then gets a
// new epoch: the entry's index, which only grows. Either way the broker ends
// unfenced, and partitions left offline with it as their last ISR member get
// it back as leader.
func (t *tx) registerBroker(r *controllerv1.RegisterBrokerRequest) (proto.Message, error) {
	switch {
	case r.GetBrokerId() < 0:
		return nil, errs.Errorf(errs.InvalidRequest, "broker id %d is negative", r.GetBrokerId())
	case r.GetGrpcAddr() == "":
		return nil, errs.Errorf(errs.InvalidRequest, "broker %d registers without a gRPC address", r.GetBrokerId())
	case r.GetIncarnationId() == "":
		return nil, errs.Errorf(errs.InvalidRequest, "broker %d registers without an incarnation id", r.GetBrokerId())
	}
	id := metadata.BrokerID(r.GetBrokerId())
	epoch := int64(t.version)
	if old, ok := t.img.Broker(id); ok {
		if old.GetIncarnationId() == r.GetIncarnationId() {
			epoch = old.GetBrokerEpoch()
		} else if err := t.fence(id, "re-registered with a new incarnation"); err != nil {
			return nil, err
		}
	}
	rec := &controllerv1.BrokerRecord{
		Id:            r.GetBrokerId(),
		GrpcAddr:      r.GetGrpcAddr(),
		HttpAddr:      r.GetHttpAddr(),
		Rack:          r.GetRack(),
		BrokerEpoch:   epoch,
		IncarnationId: r.GetIncarnationId(),
	}
	if old, ok := t.img.Broker(id); !ok || !proto.Equal(old, rec) {
		if err := t.put(metadata.BrokerRecord(rec)); err != nil {
			return nil, err
		}
	}
	if err := t.electOffline(func(string) bool { return false }); err != nil {
		return nil, err
	}
	return &controllerv1.RegisterBrokerResponse{BrokerEpoch: epoch, Version: uint64(t.img.Version())}, nil
}

// checkEpoch answers the broker's record when epoch is its current one.
func (t *tx) checkEpoch(id int32, epoch int64) (*controllerv1.BrokerRecord, error) {
	b, ok := t.img.Broker(metadata.BrokerID(id))
	if !ok {
		return nil, errs.Errorf(errs.BrokerIDNotRegistered, "broker %d is not registered", id)
	}
	if b.GetBrokerEpoch() != epoch {
		return nil, errs.Errorf(errs.StaleBrokerEpoch, "broker %d epoch %d is not the current %d", id, epoch, b.GetBrokerEpoch())
	}
	return b, nil
}

func (t *tx) fenceBroker(c *controllerv1.FenceBrokerCommand) error {
	if _, err := t.checkEpoch(c.GetBrokerId(), c.GetBrokerEpoch()); err != nil {
		return err
	}
	return t.fence(metadata.BrokerID(c.GetBrokerId()), c.GetReason())
}

// fence marks a broker fenced, takes it out of every ISR and moves its
// leaderships to the rest of the ISR (see dropReplica). Fencing a fenced
// broker changes nothing.
func (t *tx) fence(id metadata.BrokerID, _ string) error {
	b, ok := t.img.Broker(id)
	if !ok {
		return nil
	}
	if !b.GetFenced() {
		nb := proto.CloneOf(b)
		nb.Fenced = true
		if err := t.put(metadata.BrokerRecord(nb)); err != nil {
			return err
		}
	}
	for _, p := range t.allPartitions() {
		np, changed := dropReplica(p, id, t.uncleanEnabled(p.GetTopic()), t.img.IsLive)
		if changed {
			if err := t.put(metadata.PartitionRecord(np)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t *tx) unfenceBroker(c *controllerv1.UnfenceBrokerCommand) error {
	b, err := t.checkEpoch(c.GetBrokerId(), c.GetBrokerEpoch())
	if err != nil {
		return err
	}
	if b.GetFenced() {
		nb := proto.CloneOf(b)
		nb.Fenced = false
		if err := t.put(metadata.BrokerRecord(nb)); err != nil {
			return err
		}
	}
	return t.electOffline(func(string) bool { return false })
}

// controlledShutdown moves a stopping broker's leaderships to other live ISR
// members and takes it out of the ISRs it can leave. Partitions where it is
// the only live ISR member stay with it (remaining_leaderships); once there
// are none it is fenced, so it is offered nothing more before it stops.
func (t *tx) controlledShutdown(r *controllerv1.ControlledShutdownRequest) (proto.Message, error) {
	if _, err := t.checkEpoch(r.GetBrokerId(), r.GetBrokerEpoch()); err != nil {
		return nil, err
	}
	id := metadata.BrokerID(r.GetBrokerId())
	remaining := int32(0)
	for _, p := range t.allPartitions() {
		if !contains(p.GetIsr(), int32(id)) && p.GetLeader() != int32(id) {
			continue
		}
		others := liveISR(p, t.img.IsLive, id)
		if len(others) == 0 {
			if p.GetLeader() == int32(id) {
				remaining++
			}
			continue
		}
		np, _ := dropReplica(p, id, false, t.img.IsLive)
		if err := t.put(metadata.PartitionRecord(np)); err != nil {
			return nil, err
		}
	}
	if remaining == 0 {
		if err := t.fence(id, "controlled shutdown"); err != nil {
			return nil, err
		}
	}
	return &controllerv1.ControlledShutdownResponse{RemainingLeaderships: remaining}, nil
}

func (t *tx) allocateProducerIDs(r *controllerv1.AllocateProducerIdsRequest) (proto.Message, error) {
	count := r.GetCount()
	if count == 0 {
		count = 1000
	}
	if count < 0 || count > maxProducerIDBlock {
		return nil, errs.Errorf(errs.InvalidRequest, "producer id block of %d: want 1..%d", count, maxProducerIDBlock)
	}
	if r.GetBrokerEpoch() > 0 {
		if _, err := t.checkEpoch(r.GetNodeId(), r.GetBrokerEpoch()); err != nil {
			return nil, err
		}
	}
	first := t.img.NextProducerID()
	if err := t.put(metadata.ProducerIDsRecord(first + int64(count))); err != nil {
		return nil, err
	}
	return &controllerv1.AllocateProducerIdsResponse{FirstProducerId: first, Count: count}, nil
}

const maxProducerIDBlock = 1_000_000
