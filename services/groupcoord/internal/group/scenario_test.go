package group

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"skein/libs/errs"
	"skein/services/groupcoord/internal/assign"
)

// The scenarios in testdata/*.txt drive one group, one command per line.
// Member names are member ids; the interpreter also plays each member's
// client: it remembers the epoch and the partitions the client was last
// answered, and a heartbeat sends them unless told otherwise.
//
//	config [session-min=D] [session-max=D] [session=D] [rebalance=D] [heartbeat=D] [max-size=N] [assignors=uniform,range]
//	                                  (first line only; defaults: 5s..60s, session 10s, rebalance 30s)
//	topics t=6 u=3                    SetTopics (every topic; absent ones do not exist)
//	join c1 topics=t,u [instance=i] [rack=r] [assignor=range] [session=D] [rebalance=D]
//	heartbeat c1 [epoch=N] [owned=t:0,1|-] [topics=..] [instance=i] [rack=r] [assignor=..] [session=D] [rebalance=D] [stuck]
//	                                  (stuck: the client keeps what it was told to revoke)
//	leave c1 [static] [instance=i]    epoch -1, or -2 with static
//	tick [D]                          move the clock by D (default 0), then Tick
//	commit c1 t:0 [epoch=N]           CanCommit at the client's epoch unless given; - for no member id
//	settle                            every member present heartbeats as a good client, in id order,
//	                                  until the group is Stable (at most 5 rounds), or fail
//	restore                           replace the group by Restore(Snapshot(), now)
//	delete                            Delete
//	expect c1 [epoch=N] [assigned=..] [revoking=..] [target=..] [held=..]   (held: the client's view)
//	expect gone c1                    c1 is not a member
//	expect reply [epoch=N] [assignment=..] [interval=D]
//	expect group [epoch=N] [state=S] [assignor=A] [members=N]
//	expect owners t c1,c1,-,c2        holder (assigned or revoking) of t:0, t:1, ...
//	expect removed c1,c2|-            the members the last command removed
//	expect persisted yes|no           whether the last command answered a snapshot
//	expect-error CODE                 the last command failed with CODE
//
// After every command: the group's invariants hold (check), the snapshot
// answered (if any) is the group's state and none is answered when the
// durable state did not change, Restore(Snapshot()) gives the same durable
// state, and no member loses a partition that was in its target before and
// after the command (what does not move keeps being consumed).
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScenario(t, f) })
	}
}

type client struct {
	epoch Epoch
	held  assign.Partitions
}

type scenario struct {
	t       *testing.T
	cfg     Config
	g       *Group
	now     time.Time
	clients map[MemberID]*client
	reply   HeartbeatResponse
	eff     Effects
	lastErr error
	checked bool // the last error was expected
	where   string
	joined  MemberID // the member the last command (re)joined, exempt from the keep check
}

var epoch0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testConfig() Config {
	return Config{MinSessionTimeout: 5 * time.Second, MaxSessionTimeout: time.Minute, DefaultSessionTimeout: 10 * time.Second,
		DefaultRebalanceTimeout: 30 * time.Second, HeartbeatInterval: 3 * time.Second}
}

func runScenario(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := &scenario{t: t, cfg: testConfig(), now: epoch0, clients: map[MemberID]*client{}, checked: true}
	s.g = New(s.cfg, "g")
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s.where = fmt.Sprintf("%s:%d: %s", file, i+1, line)
		f := strings.Fields(line)
		switch f[0] {
		case "expect-error":
			s.expectError(f[1:])
		case "expect":
			s.expect(f[1:])
		default:
			if !s.checked {
				t.Fatalf("%s: the command before failed unexpectedly: %v", s.where, s.lastErr)
			}
			s.run(f)
		}
	}
	if !s.checked {
		t.Fatalf("%s: the last command failed unexpectedly: %v", s.where, s.lastErr)
	}
}

func (s *scenario) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("%s: %s", s.where, fmt.Sprintf(format, args...))
}

func kv(args []string) map[string]string {
	m := map[string]string{}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		m[k] = v
	}
	return m
}

func (s *scenario) dur(v string) time.Duration {
	d, err := time.ParseDuration(v)
	if err != nil {
		s.fatalf("not a duration: %q", v)
	}
	return d
}

func (s *scenario) int(v string) int64 {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		s.fatalf("not a number: %q", v)
	}
	return n
}

func (s *scenario) parts(v string) assign.Partitions {
	p, err := assign.ParsePartitions(v)
	if err != nil {
		s.fatalf("%v", err)
	}
	return p
}

func (s *scenario) client(id MemberID) *client {
	c := s.clients[id]
	if c == nil {
		c = &client{}
		s.clients[id] = c
	}
	return c
}

func (s *scenario) run(f []string) {
	s.t.Helper()
	args := kv(f[1:])
	before := s.g.Snapshot()
	s.lastErr, s.eff, s.joined = nil, Effects{}, ""
	switch f[0] {
	case "config":
		if s.g.Epoch() != 0 {
			s.fatalf("config comes first")
		}
		for k, v := range args {
			switch k {
			case "session-min":
				s.cfg.MinSessionTimeout = s.dur(v)
			case "session-max":
				s.cfg.MaxSessionTimeout = s.dur(v)
			case "session":
				s.cfg.DefaultSessionTimeout = s.dur(v)
			case "rebalance":
				s.cfg.DefaultRebalanceTimeout = s.dur(v)
			case "heartbeat":
				s.cfg.HeartbeatInterval = s.dur(v)
			case "max-size":
				s.cfg.MaxSize = int(s.int(v))
			case "assignors":
				s.cfg.Assignors = nil
				for _, name := range strings.Split(v, ",") {
					a := map[string]assign.Assignor{"range": assign.Range{}, "uniform": assign.Uniform{}}[name]
					if a == nil {
						s.fatalf("no assignor %q", name)
					}
					s.cfg.Assignors = append(s.cfg.Assignors, a)
				}
			default:
				s.fatalf("unknown config %s", k)
			}
		}
		s.g = New(s.cfg, "g")
		before = s.g.Snapshot()
	case "topics":
		counts := map[string]int32{}
		for k, v := range args {
			counts[k] = int32(s.int(v))
		}
		s.eff = s.g.SetTopics(counts)
	case "join", "heartbeat", "leave":
		s.heartbeat(f[0], MemberID(f[1]), f[2:], args)
	case "tick":
		if len(f) > 1 {
			s.now = s.now.Add(s.dur(f[1]))
		}
		s.eff = s.g.Tick(s.now)
	case "commit":
		if f[1] == "-" { // no member: an admin commit
			f[1] = ""
		}
		c := s.client(MemberID(f[1]))
		tp := s.parts(f[2]).List()
		if len(tp) != 1 {
			s.fatalf("commit takes one partition")
		}
		e := c.epoch
		if v, ok := args["epoch"]; ok {
			e = Epoch(s.int(v))
		}
		s.lastErr = s.g.CanCommit(MemberID(f[1]), e, tp[0].Topic, tp[0].Partition)
	case "settle":
		s.settle()
	case "restore":
		g, err := Restore(s.cfg, s.g.Snapshot(), s.now)
		if err != nil {
			s.fatalf("restore: %v", err)
		}
		s.g = g
	case "delete":
		s.eff, s.lastErr = s.g.Delete()
	default:
		s.fatalf("unknown command %s", f[0])
	}
	s.checked = s.lastErr == nil
	s.checkStep(before)
}

func (s *scenario) heartbeat(cmd string, id MemberID, raw []string, args map[string]string) {
	c := s.client(id)
	req := HeartbeatRequest{MemberID: id, MemberEpoch: c.epoch, Owned: c.held.Clone(), InstanceID: args["instance"],
		Rack: args["rack"], Assignor: args["assignor"]}
	if req.Owned == nil {
		req.Owned = assign.Partitions{}
	}
	switch cmd {
	case "join":
		req.MemberEpoch, req.Owned = JoinEpoch, assign.Partitions{}
		s.joined = id
	case "leave":
		req.MemberEpoch = LeaveEpoch
		if _, ok := args["static"]; ok {
			req.MemberEpoch = StaticLeaveEpoch
		}
	}
	if v, ok := args["topics"]; ok {
		req.Topics = strings.Split(v, ",")
	}
	if v, ok := args["epoch"]; ok {
		req.MemberEpoch = Epoch(s.int(v))
	}
	if v, ok := args["owned"]; ok {
		req.Owned = s.parts(v)
	}
	if v, ok := args["session"]; ok {
		req.SessionTimeout = s.dur(v)
	}
	if v, ok := args["rebalance"]; ok {
		req.RebalanceTimeout = s.dur(v)
	}
	_, stuck := args["stuck"]
	s.reply, s.eff, s.lastErr = s.g.Heartbeat(req, s.now)
	if s.lastErr != nil {
		return
	}
	switch {
	case req.MemberEpoch < 0:
		delete(s.clients, id)
	case stuck:
		c.epoch, c.held = s.reply.MemberEpoch, c.held.Union(s.reply.Assignment)
	default:
		c.epoch, c.held = s.reply.MemberEpoch, s.reply.Assignment
	}
}

// settle plays every member present as a good client until the group is
// Stable.
func (s *scenario) settle() {
	persisted := false
	defer func() {
		s.eff = Effects{}
		if persisted {
			snap := s.g.Snapshot()
			s.eff.Snapshot = &snap
		}
	}()
	for range 5 {
		if s.g.State() == Stable || s.g.State() == Empty {
			return
		}
		for _, m := range s.g.Describe().Members {
			if m.Epoch == StaticLeaveEpoch {
				continue
			}
			s.heartbeat("heartbeat", m.ID, nil, map[string]string{})
			if s.lastErr != nil {
				s.fatalf("settle: %s: %v", m.ID, s.lastErr)
			}
			persisted = persisted || s.eff.Snapshot != nil
			if err := s.g.check(); err != nil {
				s.fatalf("settle: invariant broken: %v", err)
			}
		}
	}
	if s.g.State() != Stable {
		s.fatalf("settle: still %s after 5 rounds: %+v", s.g.State(), s.g.Describe())
	}
}

// checkStep checks what must hold after every command.
func (s *scenario) checkStep(before Snapshot) {
	s.t.Helper()
	if err := s.g.check(); err != nil {
		s.fatalf("invariant broken: %v", err)
	}
	after := s.g.Snapshot()
	if s.eff.Snapshot != nil && !reflect.DeepEqual(*s.eff.Snapshot, after) {
		s.fatalf("the snapshot answered is not the group's state:\n%+v\n%+v", *s.eff.Snapshot, after)
	}
	if s.eff.Snapshot == nil && !reflect.DeepEqual(before, after) {
		s.fatalf("durable state changed but no snapshot was answered:\n%+v\n%+v", before, after)
	}
	r, err := Restore(s.cfg, after, s.now)
	if err != nil {
		s.fatalf("restore: %v", err)
	}
	if got := r.Snapshot(); !reflect.DeepEqual(got, after) {
		s.fatalf("Restore(Snapshot()) differs:\n%+v\n%+v", got, after)
	}
	// A deleted group is written as a tombstone, never restored.
	if s.g.State() != Dead && !reflect.DeepEqual(r.Describe(), s.g.Describe()) {
		s.fatalf("Restore(Snapshot()) describes differently")
	}
	// What stays in a member's target stays in its assignment.
	was := map[MemberID]MemberSnapshot{}
	for _, m := range before.Members {
		was[m.ID] = m
	}
	for _, m := range after.Members {
		old, ok := was[m.ID]
		if !ok || m.ID == s.joined {
			continue
		}
		if lost := old.Assigned.Intersect(old.Target).Intersect(m.Target).Minus(m.Assigned); lost.Count() > 0 {
			s.fatalf("%s lost %s, which stayed in its target", m.ID, lost)
		}
	}
}

func (s *scenario) expectError(args []string) {
	if len(args) != 1 {
		s.fatalf("expect-error takes one code")
	}
	want := errs.ForName(args[0])
	if want == nil {
		s.fatalf("unknown error code %s", args[0])
	}
	if errs.Of(s.lastErr) != want {
		s.fatalf("want %s, got %v", args[0], s.lastErr)
	}
	s.checked = true
}

func (s *scenario) member(id string) (MemberDescription, bool) {
	for _, m := range s.g.Describe().Members {
		if string(m.ID) == id {
			return m, true
		}
	}
	return MemberDescription{}, false
}

func (s *scenario) expectParts(what string, got assign.Partitions, want string) {
	s.t.Helper()
	if w := s.parts(want); !got.Equal(w) {
		s.fatalf("%s: got %s, want %s", what, got, w)
	}
}

func (s *scenario) expect(f []string) {
	s.t.Helper()
	if len(f) == 0 {
		s.fatalf("expect what?")
	}
	args := kv(f[1:])
	switch f[0] {
	case "group":
		d := s.g.Describe()
		for k, v := range args {
			var got string
			switch k {
			case "epoch":
				got = strconv.Itoa(int(d.Epoch))
			case "state":
				got = string(d.State)
			case "assignor":
				got = d.Assignor
			case "members":
				got = strconv.Itoa(len(d.Members))
			default:
				s.fatalf("unknown group field %s", k)
			}
			if got != v {
				s.fatalf("group %s: got %s, want %s", k, got, v)
			}
		}
	case "gone":
		if _, ok := s.member(f[1]); ok {
			s.fatalf("%s is still a member", f[1])
		}
	case "reply":
		for k, v := range args {
			switch k {
			case "epoch":
				if s.reply.MemberEpoch != Epoch(s.int(v)) {
					s.fatalf("reply epoch: got %d, want %s", s.reply.MemberEpoch, v)
				}
			case "assignment":
				s.expectParts("reply assignment", s.reply.Assignment, v)
			case "interval":
				if s.reply.HeartbeatInterval != s.dur(v) {
					s.fatalf("reply interval: got %v", s.reply.HeartbeatInterval)
				}
			default:
				s.fatalf("unknown reply field %s", k)
			}
		}
	case "owners":
		d := s.g.Describe()
		n := int32(len(strings.Split(f[2], ",")))
		var got []string
		for p := range n {
			owner := "-"
			for _, m := range d.Members {
				if m.Assigned.Contains(f[1], p) || m.Revoking.Contains(f[1], p) {
					owner = string(m.ID)
				}
			}
			got = append(got, owner)
		}
		if strings.Join(got, ",") != f[2] {
			s.fatalf("owners of %s: got %s", f[1], strings.Join(got, ","))
		}
	case "removed":
		var got []string
		for _, r := range s.eff.Removed {
			got = append(got, string(r.Member))
		}
		if g := strings.Join(got, ","); g != f[1] && !(g == "" && f[1] == "-") {
			s.fatalf("removed: got %q (%+v)", g, s.eff.Removed)
		}
	case "persisted":
		if got := s.eff.Snapshot != nil; got != (f[1] == "yes") {
			s.fatalf("persisted: got %v", got)
		}
	default:
		m, ok := s.member(f[0])
		if !ok {
			s.fatalf("no member %s", f[0])
		}
		for k, v := range args {
			switch k {
			case "epoch":
				if m.Epoch != Epoch(s.int(v)) {
					s.fatalf("%s epoch: got %d, want %s", m.ID, m.Epoch, v)
				}
			case "assigned":
				s.expectParts(f[0]+" assigned", m.Assigned, v)
			case "revoking":
				s.expectParts(f[0]+" revoking", m.Revoking, v)
			case "target":
				s.expectParts(f[0]+" target", m.Target, v)
			case "held":
				s.expectParts(f[0]+" held by the client", s.client(m.ID).held, v)
			default:
				s.fatalf("unknown member field %s", k)
			}
		}
	}
}
