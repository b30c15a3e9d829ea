package liveness

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/membership"
	"skein/libs/metadata"
)

// Settings are the reconciler's knobs. They decide what the leader proposes;
// what a command does once proposed is the state machine's business, so
// controllers with different settings still agree on the metadata.
type Settings struct {
	// SessionTimeout: a broker that has not heartbeated for this long is fenced.
	SessionTimeout time.Duration
	// CoordinatorGrace: after becoming leader, how long a coordinator the
	// image holds alive may be absent from gossip before it is marked dead
	// (gossip needs a moment to tell a new leader who is there).
	CoordinatorGrace time.Duration
	// ConsumerOffsetsPartitions and TransactionStatePartitions size the
	// internal topics, created once InternalTopicMinBrokers brokers are live.
	ConsumerOffsetsPartitions  int32
	TransactionStatePartitions int32
	InternalTopicMinBrokers    int
	// ClusterID names the cluster at bootstrap.
	ClusterID string
	// LeaderReportTTL: how long a follower's report that it cannot reach a
	// leader counts after the heartbeat that carried it (default 2 s; the
	// reports come with every heartbeat).
	LeaderReportTTL time.Duration
	// MoveHoldoff: after leadership was moved away from a broker its
	// followers could not reach, the preferred-leader election leaves that
	// broker's preferred partitions alone for this long (default 5 min), so
	// a node that can fetch but not be fetched from does not get its
	// leaderships back every check interval only to lose them again.
	MoveHoldoff time.Duration
}

type session struct {
	epoch int64
	at    time.Time // last heartbeat (or when this controller became leader)
}

type coordKey struct {
	kind controllerv1.CoordinatorKind
	id   int32
}

type gossipCoord struct {
	addr, incarnation string
	alive             bool
}

// Tracker holds what the reconciler knows beyond the image. It is not safe
// for concurrent use; Loop guards it.
type Tracker struct {
	s           Settings
	leaderSince time.Time
	sessions    map[int32]session
	// down: brokers gossip declared dead or gone, with the incarnation the
	// event named ("" when the member did not say).
	down         map[int32]string
	shuttingDown map[int32]int64 // broker -> epoch that asked for a controlled shutdown
	coords       map[coordKey]gossipCoord
	// unreachable: by reporting broker, the leaders it said it cannot reach
	// in its latest heartbeat.
	unreachable map[int32]leaderReport
	// moved: brokers leadership was moved away from, with the broker epoch
	// it was moved from and when.
	moved map[int32]move
	// logDirFailed: brokers whose latest heartbeat said their log
	// directory failed.
	logDirFailed map[int32]bool
}

type move struct {
	epoch int64
	at    time.Time
}

type leaderReport struct {
	epoch int64 // the reporter's broker epoch
	at    time.Time
	refs  []*controllerv1.UnreachableLeader
}

// NewTracker returns a tracker with nothing seen yet.
func NewTracker(s Settings) *Tracker {
	return &Tracker{
		s:            s,
		sessions:     map[int32]session{},
		down:         map[int32]string{},
		shuttingDown: map[int32]int64{},
		coords:       map[coordKey]gossipCoord{},
		unreachable:  map[int32]leaderReport{},
		moved:        map[int32]move{},
		logDirFailed: map[int32]bool{},
	}
}

// Moved records that leadership was moved away from broker, registered
// at brokerEpoch, at now. The hold-off it starts lasts only as long as that
// registration: a broker that was moved away from because it had crashed
// (its followers report it unreachable before its session expires) comes
// back with a new epoch and gets its preferred leaderships back as usual.
func (t *Tracker) Moved(broker int32, brokerEpoch int64, now time.Time) {
	t.moved[broker] = move{epoch: brokerEpoch, at: now}
}

// BecameLeader starts every broker's session afresh at now: heartbeats went
// to the previous leader until then.
func (t *Tracker) BecameLeader(now time.Time) {
	t.leaderSince = now
	clear(t.sessions)
	clear(t.unreachable)
}

// UnreachableLeaders records, from one broker's heartbeat, the partition
// leaders it cannot reach as their follower (none: it reaches them all).
// Each heartbeat replaces the broker's previous report.
func (t *Tracker) UnreachableLeaders(id int32, epoch int64, refs []*controllerv1.UnreachableLeader, now time.Time) {
	if len(refs) == 0 {
		delete(t.unreachable, id)
		return
	}
	t.unreachable[id] = leaderReport{epoch: epoch, at: now, refs: refs}
}

// HasSession reports whether a session of this broker epoch is running.
func (t *Tracker) HasSession(id int32, epoch int64) bool {
	s, ok := t.sessions[id]
	return ok && s.epoch == epoch
}

// SessionLive reports whether the session of this broker epoch is running
// and has heard from the broker within the session timeout, and since when
// it has not.
func (t *Tracker) SessionLive(id int32, epoch int64, now time.Time) (live bool, silent time.Duration) {
	s, ok := t.sessions[id]
	if !ok || s.epoch != epoch {
		return false, 0
	}
	silent = now.Sub(s.at)
	return silent < t.s.SessionTimeout, silent
}

// Heartbeat records a broker's heartbeat.
func (t *Tracker) Heartbeat(id int32, epoch int64, now time.Time) {
	t.sessions[id] = session{epoch: epoch, at: now}
	if s, ok := t.shuttingDown[id]; ok && s != epoch {
		delete(t.shuttingDown, id)
	}
}

// LogDirFailed records what a broker's heartbeat says of its log
// directory. While it has failed, Plan fences the broker — out of every
// ISR, its leaderships moved — and its heartbeats do not unfence it; the
// first heartbeat that says the directory works again may.
func (t *Tracker) LogDirFailed(id int32, failed bool) {
	if failed {
		t.logDirFailed[id] = true
	} else {
		delete(t.logDirFailed, id)
	}
}

// ShuttingDown records that this incarnation asked to stop: its heartbeats
// no longer unfence it.
func (t *Tracker) ShuttingDown(id int32, epoch int64) { t.shuttingDown[id] = epoch }

// HeldDown reports whether gossip holds this incarnation of the broker dead
// or gone. Registering or unfencing it now would only be undone by the next
// Plan, a fence and an unfence per round for as long as the partition lasts.
func (t *Tracker) HeldDown(id int32, incarnation string) bool {
	inc, ok := t.down[id]
	return ok && (inc == "" || inc == incarnation)
}

// MayUnfence reports whether a heartbeat from this incarnation may unfence
// it: not while gossip holds it dead, not after it asked to shut down.
func (t *Tracker) MayUnfence(id int32, epoch int64, incarnation string) bool {
	if t.HeldDown(id, incarnation) {
		return false
	}
	if e, ok := t.shuttingDown[id]; ok && e == epoch {
		return false
	}
	return !t.logDirFailed[id]
}

// Gossip takes one membership event.
func (t *Tracker) Gossip(ev membership.Event) {
	m := ev.Member.Meta
	gone := ev.Type == membership.EventDead || ev.Type == membership.EventLeave
	switch m.Role {
	case membership.RoleStorage:
		// Events about one member arrive in order, so the latest decides.
		if gone {
			t.down[m.ID] = m.Incarnation
		} else {
			delete(t.down, m.ID)
		}
	case membership.RoleGroupCoordinator, membership.RoleTransactionCoordinator:
		kind := controllerv1.CoordinatorKind_COORDINATOR_KIND_GROUP
		if m.Role == membership.RoleTransactionCoordinator {
			kind = controllerv1.CoordinatorKind_COORDINATOR_KIND_TRANSACTION
		}
		t.coords[coordKey{kind, m.ID}] = gossipCoord{addr: m.GRPCAddr, incarnation: m.Incarnation, alive: !gone}
	}
}

// Plan answers the commands the leader should propose now, given the image.
func (t *Tracker) Plan(img *metadata.Image, now time.Time) []*controllerv1.Command {
	var out []*controllerv1.Command
	if img.ClusterID() == "" && t.s.ClusterID != "" {
		out = append(out, &controllerv1.Command{Command: &controllerv1.Command_Bootstrap{Bootstrap: &controllerv1.BootstrapCommand{ClusterId: t.s.ClusterID}}})
	}
	for _, b := range img.LiveBrokers() {
		id := b.GetId()
		if t.HeldDown(id, b.GetIncarnationId()) {
			out = append(out, fence(b, "gossip declared it dead or gone"))
			continue
		}
		if t.logDirFailed[id] {
			out = append(out, fence(b, "its log directory failed"))
			continue
		}
		s, ok := t.sessions[id]
		if !ok || s.epoch != b.GetBrokerEpoch() {
			// A registration this controller has not seen a heartbeat for
			// yet: its session starts now.
			t.sessions[id] = session{epoch: b.GetBrokerEpoch(), at: now}
			continue
		}
		if now.Sub(s.at) > t.s.SessionTimeout {
			out = append(out, fence(b, fmt.Sprintf("no heartbeat for %v", now.Sub(s.at).Round(time.Millisecond))))
		}
	}
	out = append(out, t.planCoordinators(img, now)...)
	out = append(out, t.planLeaderMoves(img, now)...)
	_, haveOffsets := img.Topic(metadata.ConsumerOffsetsTopic)
	_, haveTxn := img.Topic(metadata.TransactionStateTopic)
	if (!haveOffsets || !haveTxn) && len(img.LiveBrokers()) >= max(1, t.s.InternalTopicMinBrokers) {
		out = append(out, &controllerv1.Command{Command: &controllerv1.Command_CreateInternalTopics{CreateInternalTopics: &controllerv1.CreateInternalTopicsCommand{
			ConsumerOffsetsPartitions: t.s.ConsumerOffsetsPartitions, TransactionStatePartitions: t.s.TransactionStatePartitions}}})
	}
	return out
}

// Due answers the earliest moment after now at which Plan could answer
// something new with nothing but time passing — a live broker's session
// running out, the coordinators' grace after leadership ending — or the
// zero time when nothing is pending. Everything else Plan acts on arrives
// as an event (gossip, a heartbeat's report, a registration). Moments
// already past are left out: Plan has answered for them, and its commands
// are retried by the caller.
func (t *Tracker) Due(img *metadata.Image, now time.Time) time.Time {
	var due time.Time
	consider := func(at time.Time) {
		if at.After(now) && (due.IsZero() || at.Before(due)) {
			due = at
		}
	}
	for _, b := range img.LiveBrokers() {
		id := b.GetId()
		if t.HeldDown(id, b.GetIncarnationId()) || t.logDirFailed[id] {
			continue
		}
		if s, ok := t.sessions[id]; ok && s.epoch == b.GetBrokerEpoch() {
			// Plan fences once the session is strictly older than the timeout.
			consider(s.at.Add(t.s.SessionTimeout + time.Millisecond))
		}
	}
	if !t.leaderSince.IsZero() {
		consider(t.leaderSince.Add(t.s.CoordinatorGrace + time.Millisecond))
	}
	return due
}

// planLeaderMoves answers a MoveLeader for every partition whose leader a
// majority of its replicas report unreachable while the controller still
// hears from it: cut off from its followers but not from the controllers,
// such a leader is neither fenced by its session nor declared dead by
// gossip (the controllers still answer its probes), yet its followers
// cannot replicate and, most likely, its clients cannot reach it either.
// A majority of the whole replica set must agree, so that one follower cut
// off by itself cannot take leadership away from a healthy leader; only a
// live, fresh report naming the partition's current leader and leader epoch
// counts, and only reporters in the ISR count: a replica out of it — the
// old leader after a move, cut off from the new one, among them — neither
// votes nor takes over (MoveLeader checks the ISR again when applied).
func (t *Tracker) planLeaderMoves(img *metadata.Image, now time.Time) []*controllerv1.Command {
	ttl := t.s.LeaderReportTTL
	if ttl <= 0 {
		ttl = 2 * time.Second
	}
	type key struct {
		topic             string
		partition, leader int32
		epoch             int32
	}
	reporters := map[key][]int32{}
	for id, r := range t.unreachable {
		b, ok := img.Broker(metadata.BrokerID(id))
		if !ok || b.GetFenced() || b.GetBrokerEpoch() != r.epoch || now.Sub(r.at) > ttl {
			continue
		}
		for _, ref := range r.refs {
			k := key{ref.GetTopic(), ref.GetPartition(), ref.GetLeader(), ref.GetLeaderEpoch()}
			reporters[k] = append(reporters[k], id)
		}
	}
	keys := make([]key, 0, len(reporters))
	for k := range reporters {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.topic != b.topic {
			return strings.Compare(a.topic, b.topic)
		}
		return cmp.Compare(a.partition, b.partition)
	})
	var out []*controllerv1.Command
	for _, k := range keys {
		p, ok := img.Partition(k.topic, k.partition)
		if !ok || p.GetLeader() != k.leader || p.GetLeaderEpoch() != k.epoch || !img.IsLive(metadata.BrokerID(k.leader)) {
			continue
		}
		var candidates []int32
		for _, r := range reporters[k] {
			if r != k.leader && slices.Contains(p.GetIsr(), r) {
				candidates = append(candidates, r)
			}
		}
		if 2*len(candidates) <= len(p.GetReplicas()) {
			continue
		}
		slices.Sort(candidates)
		out = append(out, &controllerv1.Command{Command: &controllerv1.Command_MoveLeader{MoveLeader: &controllerv1.MoveLeaderCommand{
			Topic: k.topic, Partition: k.partition, Leader: k.leader, LeaderEpoch: k.epoch, Candidates: candidates,
			Reason: fmt.Sprintf("ISR members %v of replicas %v cannot reach it", candidates, p.GetReplicas())}}})
	}
	return out
}

func fence(b *controllerv1.BrokerRecord, reason string) *controllerv1.Command {
	return &controllerv1.Command{Command: &controllerv1.Command_FenceBroker{FenceBroker: &controllerv1.FenceBrokerCommand{
		BrokerId: b.GetId(), BrokerEpoch: b.GetBrokerEpoch(), Reason: reason}}}
}

func (t *Tracker) planCoordinators(img *metadata.Image, now time.Time) []*controllerv1.Command {
	var out []*controllerv1.Command
	change := func(kind controllerv1.CoordinatorKind, id int32, addr, inc string, alive bool) {
		out = append(out, &controllerv1.Command{Command: &controllerv1.Command_CoordinatorChange{CoordinatorChange: &controllerv1.CoordinatorChangeCommand{
			Coordinator: &controllerv1.CoordinatorRecord{Id: id, Kind: kind, GrpcAddr: addr, Alive: alive, Incarnation: inc}}}})
	}
	keys := make([]coordKey, 0, len(t.coords))
	for k := range t.coords {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b coordKey) int {
		if a.kind != b.kind {
			return int(a.kind) - int(b.kind)
		}
		return int(a.id) - int(b.id)
	})
	for _, k := range keys {
		g := t.coords[k]
		rec, ok := img.Coordinator(k.kind, k.id)
		addr, inc := g.addr, g.incarnation
		if !g.alive && ok {
			// A dead member's last address and incarnation are what the
			// image should keep.
			addr, inc = rec.GetGrpcAddr(), rec.GetIncarnation()
		}
		if !ok && !g.alive {
			continue
		}
		if !ok || rec.GetAlive() != g.alive || rec.GetGrpcAddr() != addr || rec.GetIncarnation() != inc {
			change(k.kind, k.id, addr, inc, g.alive)
		}
	}
	if now.Sub(t.leaderSince) > t.s.CoordinatorGrace {
		for _, rec := range img.Coordinators() {
			if _, seen := t.coords[coordKey{rec.GetKind(), rec.GetId()}]; !seen && rec.GetAlive() {
				change(rec.GetKind(), rec.GetId(), rec.GetGrpcAddr(), rec.GetIncarnation(), false)
			}
		}
	}
	return out
}

// PreferredElections answers the partitions led by another than their
// preferred replica while that replica is a live ISR member — except
// where leadership was moved away from that replica, at its current broker
// epoch, less than MoveHoldoff ago — grouped by topic; nil when there are
// none.
func (t *Tracker) PreferredElections(img *metadata.Image, now time.Time) []*controllerv1.TopicPartitions {
	holdoff := t.s.MoveHoldoff
	if holdoff <= 0 {
		holdoff = 5 * time.Minute
	}
	var out []*controllerv1.TopicPartitions
	for _, tp := range img.Topics() {
		var ps []int32
		for _, p := range img.Partitions(tp.GetName()) {
			pref := p.GetReplicas()[0]
			if m, ok := t.moved[pref]; ok && now.Sub(m.at) < holdoff {
				if b, ok := img.Broker(metadata.BrokerID(pref)); ok && b.GetBrokerEpoch() == m.epoch {
					continue
				}
			}
			b, _ := img.Broker(metadata.BrokerID(pref))
			if p.GetLeader() != pref && slices.Contains(p.GetIsr(), pref) && img.IsLive(metadata.BrokerID(pref)) && !b.GetInControlledShutdown() {
				ps = append(ps, p.GetPartition())
			}
		}
		if len(ps) > 0 {
			out = append(out, &controllerv1.TopicPartitions{Topic: tp.GetName(), Partitions: ps})
		}
	}
	return out
}
