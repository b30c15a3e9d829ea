package fsm

import (
	"slices"

	"google.golang.org/protobuf/proto"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/libs/topicconfig"
)

// allPartitions lists every partition, by topic name then index.
func (t *tx) allPartitions() []*controllerv1.PartitionRecord {
	var out []*controllerv1.PartitionRecord
	for _, tp := range t.img.Topics() {
		out = append(out, t.img.Partitions(tp.GetName())...)
	}
	return out
}

// uncleanEnabled reads the topic's unclean.leader.election.enable (configs
// are validated on the way in, so Parse does not fail on a stored topic).
func (t *tx) uncleanEnabled(topic string) bool {
	tp, ok := t.img.Topic(topic)
	if !ok {
		return false
	}
	c, err := topicconfig.Parse(tp.GetConfigs())
	return err == nil && c.UncleanLeaderElection
}

func contains(s []int32, x int32) bool { return slices.Contains(s, x) }

// liveISR lists the ISR members other than except that are live, in replica
// (preference) order.
func liveISR(p *controllerv1.PartitionRecord, live func(metadata.BrokerID) bool, except metadata.BrokerID) []int32 {
	var out []int32
	for _, r := range p.GetReplicas() {
		if r != int32(except) && contains(p.GetIsr(), r) && live(metadata.BrokerID(r)) {
			out = append(out, r)
		}
	}
	return out
}

// inReplicaOrder orders isr as the replicas list does.
func inReplicaOrder(replicas, isr []int32) []int32 {
	out := make([]int32, 0, len(isr))
	for _, r := range replicas {
		if contains(isr, r) {
			out = append(out, r)
		}
	}
	return out
}

// dropReplica takes broker b out of p's ISR and leadership. When b led p,
// the first live ISR member in preference order takes over. When b was the
// last ISR member, it stays the ISR's only member and p goes offline (leader
// -1) — unless unclean is set, in which case the first live replica leads
// with an ISR of itself. It answers the new partition and whether it changed.
func dropReplica(p *controllerv1.PartitionRecord, b metadata.BrokerID, unclean bool, live func(metadata.BrokerID) bool) (*controllerv1.PartitionRecord, bool) {
	inISR, leads := contains(p.GetIsr(), int32(b)), p.GetLeader() == int32(b)
	if !inISR && !leads {
		return p, false
	}
	np := proto.CloneOf(p)
	rest := slices.DeleteFunc(slices.Clone(p.GetIsr()), func(r int32) bool { return r == int32(b) })
	switch {
	case len(rest) > 0:
		np.Isr = inReplicaOrder(p.GetReplicas(), rest)
		if leads {
			if cand := liveISR(np, live, metadata.NoLeader); len(cand) > 0 {
				np.Leader = cand[0]
			} else {
				np.Leader = int32(metadata.NoLeader)
			}
			np.LeaderEpoch++
		}
	case unclean:
		if l, ok := firstLive(p.GetReplicas(), live, b); ok {
			np.Leader, np.Isr = l, []int32{l}
			np.LeaderEpoch++
			break
		}
		fallthrough
	default:
		// b was the last in-sync replica: Kafka keeps it in the ISR so that it,
		// and only it, may lead when it comes back.
		if !leads {
			return p, false
		}
		np.Leader = int32(metadata.NoLeader)
		np.LeaderEpoch++
	}
	np.PartitionEpoch++
	return np, true
}

func firstLive(replicas []int32, live func(metadata.BrokerID) bool, except metadata.BrokerID) (int32, bool) {
	for _, r := range replicas {
		if r != int32(except) && live(metadata.BrokerID(r)) {
			return r, true
		}
	}
	return -1, false
}

// electOffline gives every offline partition a leader if it can: a live ISR
// member first; any live replica when the topic enables unclean election or
// forceUnclean says so (the ISR is then that replica alone).
func (t *tx) electOffline(forceUnclean func(topic string) bool) error {
	for _, p := range t.allPartitions() {
		if p.GetLeader() >= 0 {
			continue
		}
		np, ok := t.electFor(p, forceUnclean(p.GetTopic()) || t.uncleanEnabled(p.GetTopic()), false)
		if !ok {
			continue
		}
		if err := t.put(metadata.PartitionRecord(np)); err != nil {
			return err
		}
	}
	return nil
}

// electFor picks a leader for an offline partition. An unclean pick passes
// over a replica known to have lost its logs while another is live; only an
// unclean election an operator asked for (asked) falls back to it, since any
// replica that comes back later can only hold more.
func (t *tx) electFor(p *controllerv1.PartitionRecord, unclean, asked bool) (*controllerv1.PartitionRecord, bool) {
	np := proto.CloneOf(p)
	if cand := liveISR(p, t.eligible, metadata.NoLeader); len(cand) > 0 {
		np.Leader = cand[0]
	} else if l, ok := t.uncleanCandidate(p, asked); ok && unclean {
		np.Leader, np.Isr = l, []int32{l}
	} else {
		return p, false
	}
	np.LostIsrReplica = nil
	np.LeaderEpoch++
	np.PartitionEpoch++
	return np, true
}

// uncleanCandidate answers the first live replica in preference order,
// passing over the one that lost its logs; that one only when orLost is set
// and no other is live.
func (t *tx) uncleanCandidate(p *controllerv1.PartitionRecord, orLost bool) (int32, bool) {
	lost := metadata.NoLeader
	if l := p.GetLostIsrReplica(); l != nil {
		lost = metadata.BrokerID(l.GetBroker())
	}
	if r, ok := firstLive(p.GetReplicas(), t.eligible, lost); ok {
		return r, true
	}
	if orLost && lost != metadata.NoLeader && contains(p.GetReplicas(), int32(lost)) && t.eligible(lost) {
		return int32(lost), true
	}
	return -1, false
}

// moveLeader takes leadership away from a live leader its followers cannot
// reach: only while it still leads at the epoch the command names (a later
// election or restart makes the command moot), and only to a live ISR
// member among the candidates, so a committed record is never lost — every
// ISR member holds everything below the high watermark. The old leader
// leaves the ISR too: left in it, it would hold the high watermark back
// until the new leader's lag check removed it. Anything else is a no-op,
// not an error: the command comes from the reconciler, which proposes
// again from the next image if it still applies.
func (t *tx) moveLeader(c *controllerv1.MoveLeaderCommand) error {
	p, ok := t.img.Partition(c.GetTopic(), c.GetPartition())
	if !ok || p.GetLeader() != c.GetLeader() || p.GetLeaderEpoch() != c.GetLeaderEpoch() {
		return nil
	}
	next := int32(metadata.NoLeader)
	for _, r := range p.GetReplicas() {
		if r != c.GetLeader() && contains(p.GetIsr(), r) && contains(c.GetCandidates(), r) && t.eligible(metadata.BrokerID(r)) {
			next = r
			break
		}
	}
	if next < 0 {
		return nil
	}
	np := proto.CloneOf(p)
	np.Isr = slices.DeleteFunc(slices.Clone(p.GetIsr()), func(r int32) bool { return r == c.GetLeader() })
	np.Leader = next
	np.LeaderEpoch++
	np.PartitionEpoch++
	return t.put(metadata.PartitionRecord(np))
}

// alterPartition applies a leader's ISR changes, each fenced by the leader
// epoch and partition epoch the leader based it on.
func (t *tx) alterPartition(r *controllerv1.AlterPartitionRequest) (proto.Message, error) {
	if _, err := t.checkEpoch(r.GetBrokerId(), r.GetBrokerEpoch()); err != nil {
		return nil, err
	}
	resp := &controllerv1.AlterPartitionResponse{}
	for _, ch := range r.GetPartitions() {
		res := &controllerv1.AlterPartitionResult{Topic: ch.GetTopic(), Partition: ch.GetPartition()}
		np, err := t.checkISRChange(r.GetBrokerId(), ch)
		if err == nil && np != nil {
			err = t.put(metadata.PartitionRecord(np))
		}
		if err != nil {
			res.ErrorCode, res.ErrorMessage = code(err), errs.Message(err)
		}
		if cur, ok := t.img.Partition(ch.GetTopic(), ch.GetPartition()); ok {
			res.State = proto.CloneOf(cur)
		}
		resp.Partitions = append(resp.Partitions, res)
	}
	return resp, nil
}

// checkISRChange answers the partition as it would be after ch (nil when ch
// changes nothing) or the refusal.
func (t *tx) checkISRChange(sender int32, ch *controllerv1.PartitionIsrChange) (*controllerv1.PartitionRecord, error) {
	p, ok := t.img.Partition(ch.GetTopic(), ch.GetPartition())
	if !ok {
		return nil, errs.Errorf(errs.UnknownTopicOrPartition, "no partition %s/%d", ch.GetTopic(), ch.GetPartition())
	}
	if p.GetLeader() != sender {
		return nil, errs.Errorf(errs.NotLeaderOrFollower, "broker %d does not lead %s/%d (leader %d)", sender, ch.GetTopic(), ch.GetPartition(), p.GetLeader())
	}
	if ch.GetLeaderEpoch() != p.GetLeaderEpoch() {
		return nil, errs.Errorf(errs.FencedLeaderEpoch, "leader epoch %d is not the current %d", ch.GetLeaderEpoch(), p.GetLeaderEpoch())
	}
	if ch.GetPartitionEpoch() != p.GetPartitionEpoch() {
		return nil, errs.Errorf(errs.InvalidUpdateVersion, "partition epoch %d is not the current %d", ch.GetPartitionEpoch(), p.GetPartitionEpoch())
	}
	isr, epochs := ch.GetNewIsr(), ch.GetNewIsrBrokerEpochs()
	if len(isr) == 0 {
		return nil, errs.Errorf(errs.InvalidRequest, "empty ISR")
	}
	if len(epochs) != 0 && len(epochs) != len(isr) {
		return nil, errs.Errorf(errs.InvalidRequest, "%d broker epochs for an ISR of %d", len(epochs), len(isr))
	}
	seen := map[int32]bool{}
	for i, r := range isr {
		switch {
		case seen[r]:
			return nil, errs.Errorf(errs.InvalidRequest, "broker %d twice in the ISR", r)
		case !contains(p.GetReplicas(), r):
			return nil, errs.Errorf(errs.InvalidRequest, "broker %d is not a replica of %s/%d", r, ch.GetTopic(), ch.GetPartition())
		case !t.img.IsLive(metadata.BrokerID(r)):
			return nil, errs.Errorf(errs.ReplicaNotAvailable, "broker %d is fenced and may not join the ISR", r)
		case !contains(p.GetIsr(), r) && !t.eligible(metadata.BrokerID(r)):
			return nil, errs.Errorf(errs.ReplicaNotAvailable, "broker %d is in a controlled shutdown and may not join the ISR", r)
		}
		if len(epochs) != 0 && epochs[i] > 0 {
			// The leader judged the member by fetches it made at this
			// epoch; registered at another, it restarted since, and may
			// hold less than those fetches said.
			if b, ok := t.img.Broker(metadata.BrokerID(r)); !ok || b.GetBrokerEpoch() != epochs[i] {
				return nil, errs.Errorf(errs.ReplicaNotAvailable, "broker %d restarted since the leader saw it fetch (at broker epoch %d, now %d) and may not join the ISR on that", r, epochs[i], b.GetBrokerEpoch())
			}
		}
		seen[r] = true
	}
	if !seen[sender] {
		return nil, errs.Errorf(errs.InvalidRequest, "the new ISR must hold the leader %d", sender)
	}
	ordered := inReplicaOrder(p.GetReplicas(), isr)
	if slices.Equal(ordered, p.GetIsr()) {
		return nil, nil
	}
	np := proto.CloneOf(p)
	np.Isr = ordered
	np.PartitionEpoch++
	return np, nil
}

// electLeaders runs preferred or unclean elections on the named partitions
// (every partition when none are named; then partitions needing nothing are
// left out of the answer).
func (t *tx) electLeaders(r *controllerv1.ElectLeadersRequest) (proto.Message, error) {
	typ := r.GetType()
	if typ != controllerv1.ElectionType_ELECTION_TYPE_PREFERRED && typ != controllerv1.ElectionType_ELECTION_TYPE_UNCLEAN {
		return nil, errs.Errorf(errs.InvalidRequest, "election type %v", typ)
	}
	all := len(r.GetPartitions()) == 0
	type tp struct {
		topic string
		p     int32
	}
	var targets []tp
	resp := &controllerv1.ElectLeadersResponse{}
	if all {
		for _, p := range t.allPartitions() {
			targets = append(targets, tp{p.GetTopic(), p.GetPartition()})
		}
	} else {
		for _, x := range r.GetPartitions() {
			if _, ok := t.img.Topic(x.GetTopic()); !ok {
				resp.Results = append(resp.Results, &controllerv1.ElectionResult{Topic: x.GetTopic(), Partition: -1, Leader: -1,
					ErrorCode: code(errs.UnknownTopicOrPartition), ErrorMessage: "no topic " + x.GetTopic()})
				continue
			}
			ps := x.GetPartitions()
			if len(ps) == 0 {
				for i := range t.img.PartitionCount(x.GetTopic()) {
					ps = append(ps, i)
				}
			}
			for _, p := range ps {
				targets = append(targets, tp{x.GetTopic(), p})
			}
		}
	}
	for _, x := range targets {
		res := &controllerv1.ElectionResult{Topic: x.topic, Partition: x.p, Leader: -1}
		np, err := t.elect(x.topic, x.p, typ)
		if err == nil {
			err = t.put(metadata.PartitionRecord(np))
		}
		if all && (errs.Of(err) == errs.ElectionNotNeeded || errs.Of(err) == errs.PreferredLeaderNotAvailable) {
			continue
		}
		if err != nil {
			res.ErrorCode, res.ErrorMessage = code(err), errs.Message(err)
		}
		if cur, ok := t.img.Partition(x.topic, x.p); ok {
			res.Leader = cur.GetLeader()
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

func (t *tx) elect(topic string, partition int32, typ controllerv1.ElectionType) (*controllerv1.PartitionRecord, error) {
	p, ok := t.img.Partition(topic, partition)
	if !ok {
		return nil, errs.Errorf(errs.UnknownTopicOrPartition, "no partition %s/%d", topic, partition)
	}
	if typ == controllerv1.ElectionType_ELECTION_TYPE_UNCLEAN {
		if p.GetLeader() >= 0 {
			return nil, errs.Errorf(errs.ElectionNotNeeded, "%s/%d has leader %d", topic, partition, p.GetLeader())
		}
		np, ok := t.electFor(p, true, true)
		if !ok {
			return nil, errs.Errorf(errs.EligibleLeadersNotAvailable, "no replica of %s/%d is live", topic, partition)
		}
		return np, nil
	}
	preferred := p.GetReplicas()[0]
	if p.GetLeader() == preferred {
		return nil, errs.Errorf(errs.ElectionNotNeeded, "%s/%d is led by its preferred replica %d", topic, partition, preferred)
	}
	if !contains(p.GetIsr(), preferred) || !t.eligible(metadata.BrokerID(preferred)) {
		return nil, errs.Errorf(errs.PreferredLeaderNotAvailable, "preferred replica %d of %s/%d is not a live ISR member (or is shutting down)", preferred, topic, partition)
	}
	np := proto.CloneOf(p)
	np.Leader = preferred
	np.LeaderEpoch++
	np.PartitionEpoch++
	return np, nil
}
