package fsm

import (
	"cmp"
	"slices"

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
// it back as leader — unless it comes back with another data directory
// than it had (see forgetLostLogs).
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
		if lost := old.GetLogDirId(); lost != "" && r.GetLogDirId() != "" && lost != r.GetLogDirId() {
			if err := t.forgetLostLogs(id, lost); err != nil {
				return nil, err
			}
		}
	}
	if r.GetLogDirId() != "" {
		if err := t.restoreFoundLogs(id, r.GetLogDirId()); err != nil {
			return nil, err
		}
	}
	old, _ := t.img.Broker(id)
	rec := &controllerv1.BrokerRecord{
		Id:            r.GetBrokerId(),
		GrpcAddr:      r.GetGrpcAddr(),
		HttpAddr:      r.GetHttpAddr(),
		Rack:          r.GetRack(),
		BrokerEpoch:   epoch,
		IncarnationId: r.GetIncarnationId(),
		// A broker that sends no id (an older binary) keeps the one on record.
		LogDirId: cmp.Or(r.GetLogDirId(), old.GetLogDirId()),
		// The same incarnation registering again (a retry that crossed its
		// controlled shutdown) is still stopping.
		InControlledShutdown: old.GetInControlledShutdown() && old.GetIncarnationId() == r.GetIncarnationId(),
	}
	if old == nil || !proto.Equal(old, rec) {
		if err := t.put(metadata.BrokerRecord(rec)); err != nil {
			return nil, err
		}
	}
	if err := t.electOffline(func(string) bool { return false }); err != nil {
		return nil, err
	}
	return &controllerv1.RegisterBrokerResponse{BrokerEpoch: epoch, Version: uint64(t.img.Version())}, nil
}

// forgetLostLogs handles a broker back with another data directory than
// lostDir (a replaced disk, a volume that was not kept or not mounted): the
// records its logs held are not there. Fencing took it out of every ISR it
// shared, but a partition whose last in-sync replica it was kept it as the
// ISR's only member, to lead again on its return, and leading with an empty
// log would truncate every follower and lose every record acknowledged.
// Such a partition's ISR is emptied instead, and the lost replica recorded:
// it stays offline until the directory comes back (restoreFoundLogs) or an
// unclean election, the operator's call (or the topic's
// unclean.leader.election.enable), picks another replica knowing records
// may be lost.
func (t *tx) forgetLostLogs(id metadata.BrokerID, lostDir string) error {
	for _, p := range t.allPartitions() {
		if p.GetLeader() >= 0 || !slices.Equal(p.GetIsr(), []int32{int32(id)}) {
			continue
		}
		np := proto.CloneOf(p)
		np.Isr = []int32{}
		np.LostIsrReplica = &controllerv1.LostReplica{Broker: int32(id), LogDirId: lostDir}
		np.PartitionEpoch++
		if err := t.put(metadata.PartitionRecord(np)); err != nil {
			return err
		}
	}
	return nil
}

// restoreFoundLogs gives a broker back its ISR place in the offline
// partitions whose last in-sync replica it was, when it returns with the
// data directory it had then (the disk that was missing is back).
func (t *tx) restoreFoundLogs(id metadata.BrokerID, dir string) error {
	for _, p := range t.allPartitions() {
		lost := p.GetLostIsrReplica()
		if lost == nil || lost.GetBroker() != int32(id) || lost.GetLogDirId() != dir {
			continue
		}
		np := proto.CloneOf(p)
		np.Isr, np.LostIsrReplica = []int32{int32(id)}, nil
		np.PartitionEpoch++
		if err := t.put(metadata.PartitionRecord(np)); err != nil {
			return err
		}
	}
	return nil
}

// eligible reports whether broker b may be elected or join an ISR: live,
// and not in a controlled shutdown.
func (t *tx) eligible(b metadata.BrokerID) bool {
	r, ok := t.img.Broker(b)
	return ok && t.img.IsLive(b) && !r.GetInControlledShutdown()
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
		np, changed := dropReplica(p, id, t.uncleanEnabled(p.GetTopic()), t.eligible)
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
// Until it registers again it is marked in controlled shutdown: no election
// picks it and no ISR takes it back (Kafka's KIP-841), which its fetches
// would otherwise earn it, leaving acks=all writes waiting for a process
// about to stop.
func (t *tx) controlledShutdown(r *controllerv1.ControlledShutdownRequest) (proto.Message, error) {
	if _, err := t.checkEpoch(r.GetBrokerId(), r.GetBrokerEpoch()); err != nil {
		return nil, err
	}
	id := metadata.BrokerID(r.GetBrokerId())
	if b, _ := t.img.Broker(id); !b.GetInControlledShutdown() {
		nb := proto.CloneOf(b)
		nb.InControlledShutdown = true
		if err := t.put(metadata.BrokerRecord(nb)); err != nil {
			return nil, err
		}
	}
	remaining := int32(0)
	for _, p := range t.allPartitions() {
		if !contains(p.GetIsr(), int32(id)) && p.GetLeader() != int32(id) {
			continue
		}
		others := liveISR(p, t.eligible, id)
		if len(others) == 0 {
			if p.GetLeader() == int32(id) {
				remaining++
			}
			continue
		}
		np, _ := dropReplica(p, id, false, t.eligible)
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
