package group

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"skein/libs/errs"
	"skein/services/groupcoord/internal/assign"
)

// world is a group and the clients of its members, driven by random events.
// A client remembers its epoch and what it holds; it drops everything when
// fenced or unknown, as a KIP-848 consumer does.
type world struct {
	cfg     Config
	g       *Group
	now     time.Time
	clients map[MemberID]*client
}

func newWorld() *world {
	cfg := testConfig()
	return &world{cfg: cfg, g: New(cfg, "g"), now: epoch0, clients: map[MemberID]*client{}}
}

var (
	memberIDs   = []MemberID{"m0", "m1", "m2", "m3", "m4", "m5"}
	instanceIDs = []string{"", "", "s0", "s1"}
	topicSets   = [][]string{{"t"}, {"t"}, {"t", "u"}, {"u"}}
)

// request draws the next heartbeat of a random client: a join when it is not
// in the group as far as it knows, else a heartbeat (good, stuck, or with
// another subscription), a leave or a static leave.
func (w *world) request(t *rapid.T) (req HeartbeatRequest, stuck bool) {
	id := rapid.SampledFrom(memberIDs).Draw(t, "member")
	c := w.clients[id]
	if c == nil || c.epoch <= 0 {
		return HeartbeatRequest{MemberID: id, MemberEpoch: JoinEpoch, Owned: assign.Partitions{},
			InstanceID:       rapid.SampledFrom(instanceIDs).Draw(t, "instance"),
			Topics:           rapid.SampledFrom(topicSets).Draw(t, "topics"),
			Assignor:         rapid.SampledFrom([]string{"", "", "range", "uniform"}).Draw(t, "assignor"),
			SessionTimeout:   rapid.SampledFrom([]time.Duration{0, 5 * time.Second, 20 * time.Second}).Draw(t, "session"),
			RebalanceTimeout: rapid.SampledFrom([]time.Duration{0, 5 * time.Second}).Draw(t, "rebalance")}, false
	}
	req = HeartbeatRequest{MemberID: id, MemberEpoch: c.epoch, Owned: orEmpty(c.held.Clone())}
	switch rapid.IntRange(0, 9).Draw(t, "kind") {
	case 0:
		req.MemberEpoch = LeaveEpoch
	case 1:
		req.MemberEpoch = StaticLeaveEpoch
	case 2:
		req.Topics = rapid.SampledFrom(topicSets).Draw(t, "topics")
	case 3, 4:
		stuck = true
	}
	return req, stuck
}

// deliver hands a response (or error) to the client that sent req.
func (w *world) deliver(req HeartbeatRequest, stuck bool, resp HeartbeatResponse, err error) {
	c := w.clients[req.MemberID]
	if c == nil {
		c = &client{}
		w.clients[req.MemberID] = c
	}
	switch {
	case err != nil:
		code := errs.Of(err)
		if code == errs.FencedMemberEpoch || code == errs.UnknownMemberID || code == errs.FencedInstanceID {
			*c = client{} // drop everything; the next request joins
		}
	case req.MemberEpoch < 0:
		*c = client{}
	case stuck:
		c.epoch, c.held = resp.MemberEpoch, c.held.Union(resp.Assignment)
	default:
		c.epoch, c.held = resp.MemberEpoch, resp.Assignment
	}
}

func (w *world) topics(t *rapid.T) map[string]int32 {
	m := map[string]int32{"t": rapid.Int32Range(1, 8).Draw(t, "t")}
	if n := rapid.Int32Range(0, 4).Draw(t, "u"); n > 0 {
		m["u"] = n
	}
	return m
}

// checkClients: a member's client holds nothing the group does not give it
// (assigned or pending revocation), so no two members' clients share a
// partition while the group's invariant holds.
func (w *world) checkClients(t *rapid.T) {
	for _, m := range w.g.Describe().Members {
		c := w.clients[m.ID]
		if c == nil || m.Epoch == StaticLeaveEpoch {
			continue
		}
		if !c.held.SubsetOf(m.Assigned.Union(m.Revoking)) {
			t.Fatalf("client %s holds %s, the group gives it %s + revoking %s", m.ID, c.held, m.Assigned, m.Revoking)
		}
	}
}

// settle brings every away static member back, then has every member
// heartbeat as a good client, without time passing, until the group is
// Stable; it fails when that takes more than 4 rounds.
func (w *world) settle(t *rapid.T) {
	for _, m := range w.g.Describe().Members {
		if m.Epoch != StaticLeaveEpoch {
			continue
		}
		id := m.ID + "'"
		resp, _, err := w.g.Heartbeat(HeartbeatRequest{MemberID: id, InstanceID: m.InstanceID, Topics: m.Topics, Owned: assign.Partitions{}}, w.now)
		if err != nil {
			t.Fatalf("static member %s cannot come back: %v", m.InstanceID, err)
		}
		w.clients[id] = &client{epoch: resp.MemberEpoch, held: resp.Assignment}
	}
	for round := 0; w.g.State() == Reconciling; round++ {
		if round == 4 {
			t.Fatalf("not stable after %d rounds: %+v", round, w.g.Describe())
		}
		for _, m := range w.g.Describe().Members {
			c := w.clients[m.ID]
			req := HeartbeatRequest{MemberID: m.ID, MemberEpoch: c.epoch, Owned: orEmpty(c.held.Clone())}
			resp, _, err := w.g.Heartbeat(req, w.now)
			if err != nil {
				t.Fatalf("good client %s refused: %v", m.ID, err)
			}
			w.deliver(req, false, resp, nil)
			if err := w.g.check(); err != nil {
				t.Fatalf("invariant broken while settling: %v", err)
			}
		}
	}
	for _, m := range w.g.Describe().Members {
		if !m.Assigned.Equal(m.Target) || m.Revoking.Count() > 0 || m.Epoch != w.g.Describe().AssignmentEpoch {
			t.Fatalf("member %s not at its target: %+v", m.ID, m)
		}
		if c := w.clients[m.ID]; !c.held.Equal(m.Target) {
			t.Fatalf("client %s holds %s, target %s", m.ID, c.held, m.Target)
		}
	}
}

// TestRandomEvents drives a group with random joins, heartbeats (good and
// stuck clients), leaves, static leaves, subscription and metadata changes,
// clock ticks and restores. After every event: no partition has two
// holders, clients hold only what the group gives them, the effects
// snapshot is the state. At the end, once every member heartbeats as told,
// every member holds exactly its target.
func TestRandomEvents(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := newWorld()
		topics := w.topics(t)
		w.g.SetTopics(topics)
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for range steps {
			var eff Effects
			before := w.g.Snapshot()
			switch rapid.IntRange(0, 9).Draw(t, "event") {
			case 0:
				w.now = w.now.Add(time.Duration(rapid.IntRange(0, 12).Draw(t, "seconds")) * time.Second)
				eff = w.g.Tick(w.now)
			case 1:
				topics = w.topics(t)
				eff = w.g.SetTopics(topics)
			case 2:
				g, err := Restore(w.cfg, w.g.Snapshot(), w.now)
				if err != nil {
					t.Fatalf("restore: %v", err)
				}
				w.g = g
				if e := w.g.SetTopics(topics); e.Snapshot != nil {
					t.Fatalf("SetTopics after Restore changed the group")
				}
			default:
				req, stuck := w.request(t)
				var resp HeartbeatResponse
				var err error
				resp, eff, err = w.g.Heartbeat(req, w.now)
				w.deliver(req, stuck, resp, err)
			}
			if err := w.g.check(); err != nil {
				t.Fatalf("invariant broken: %v", err)
			}
			w.checkClients(t)
			after := w.g.Snapshot()
			if eff.Snapshot != nil && !reflect.DeepEqual(*eff.Snapshot, after) || eff.Snapshot == nil && !reflect.DeepEqual(before, after) {
				t.Fatalf("effects snapshot %v does not match the state change", eff.Snapshot != nil)
			}
		}
		w.settle(t)
	})
}

// TestRestoreBehavesTheSame: a group restored from a snapshot answers every
// later event as the group that wrote it. Time passes only in a last Tick far
// beyond every deadline, since deadlines restart at a restore.
func TestRestoreBehavesTheSame(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := newWorld()
		topics := w.topics(t)
		w.g.SetTopics(topics)
		var restored *Group
		steps := rapid.IntRange(1, 50).Draw(t, "steps")
		at := rapid.IntRange(0, steps-1).Draw(t, "restore at")
		for i := range steps {
			if i == at {
				var err error
				if restored, err = Restore(w.cfg, w.g.Snapshot(), w.now); err != nil {
					t.Fatalf("restore: %v", err)
				}
				// The shell tells a restored group the metadata: what the
				// target was computed from did not change, so no rebalance.
				if eff := restored.SetTopics(topics); eff.Snapshot != nil {
					t.Fatalf("SetTopics after Restore changed the group")
				}
			}
			if rapid.IntRange(0, 9).Draw(t, "event") == 0 {
				topics = w.topics(t)
				e1 := w.g.SetTopics(topics)
				if restored != nil && !reflect.DeepEqual(restored.SetTopics(topics), e1) {
					t.Fatalf("SetTopics answered differently")
				}
				continue
			}
			req, stuck := w.request(t)
			resp, eff, err := w.g.Heartbeat(req, w.now)
			if restored != nil {
				resp2, eff2, err2 := restored.Heartbeat(req, w.now)
				if errs.Of(err) != errs.Of(err2) || !reflect.DeepEqual(resp, resp2) || !reflect.DeepEqual(eff, eff2) {
					t.Fatalf("step %d: %+v\nlive:     %+v %+v %v\nrestored: %+v %+v %v", i, req, resp, eff, err, resp2, eff2, err2)
				}
				for _, id := range memberIDs {
					for _, tp := range []assign.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "u", Partition: 1}} {
						c := w.clients[id]
						e := Epoch(1)
						if c != nil {
							e = c.epoch
						}
						if a, b := w.g.CanCommit(id, e, tp.Topic, tp.Partition), restored.CanCommit(id, e, tp.Topic, tp.Partition); errs.Of(a) != errs.Of(b) {
							t.Fatalf("CanCommit(%s, %d, %s) answered %v and %v", id, e, tp, a, b)
						}
					}
				}
			}
			w.deliver(req, stuck, resp, err)
		}
		if restored == nil {
			return
		}
		late := w.now.Add(time.Hour)
		e1, e2 := w.g.Tick(late), restored.Tick(late)
		if !reflect.DeepEqual(e1.Snapshot, e2.Snapshot) || !slices.EqualFunc(e1.Removed, e2.Removed, func(a, b Removal) bool { return a.Member == b.Member }) {
			t.Fatalf("a late Tick answered differently: %+v\n%+v", e1, e2)
		}
		if fmt.Sprint(w.g.Describe()) != fmt.Sprint(restored.Describe()) {
			t.Fatalf("different groups at the end")
		}
	})
}
