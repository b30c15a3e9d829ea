package txn

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"skein/libs/errs"
)

// The scenarios in testdata/*.txt drive the Txn of one transactional id
// ("tx"), one command per line. The interpreter also plays the shell and
// the producers: a write answered by an event is acknowledged at once
// (Complete) unless the command says hold; the log holds every acknowledged
// record, as bytes; a producer (a client name) remembers the id and epoch
// it was last answered and sends them unless told otherwise.
//
//	config [max-timeout=D] [expiration=D]    (first line only; defaults 15m, 24h)
//	pids N|fail                        the next producer id the allocator hands out (first 1000),
//	                                   or an allocator that fails (COORDINATOR_NOT_AVAILABLE)
//	init C [timeout=D] [expect=P/E|held] [lost] [hold]
//	                                   InitProducerId (timeout 1m); expect=held sends C's pair;
//	                                   lost: the answer never reaches C
//	add C t:0,1;u:2 [pid=N] [epoch=N] [hold]     AddPartitions with C's pair unless given
//	offsets C GROUP [pid=N] [epoch=N] [hold]     AddOffsets
//	end C commit|abort [pid=N] [epoch=N] [lost] [hold]   EndTxn
//	markers [hold]                     the shell wrote the markers due: MarkersWritten
//	tick [D] [hold]                    move the clock by D (default 0), then Tick
//	complete | fail                    the held write is acknowledged / failed
//	failover [hold]                    a new coordinator: replay the log's bytes, then Resume
//	load state=S pid=N epoch=N [prev=P/E] [next=N] [timeout=D] [partitions=..] [groups=..] [start=D]
//	                                   the log becomes this one record (times since the start), then failover
//	expect txn [state=S] [pending=S|-] [pid=N] [epoch=N] [prev=P/E|-] [next=N|-] [partitions=..|-]
//	           [groups=g,h|-] [start=D|-] [timeout=D]
//	expect reply pid=N epoch=N | expect reply error=CODE     the last InitProducerId or EndTxn
//	expect client C pid=N epoch=N
//	expect wrote S|-                   the state the last command wrote (or holds), or nothing
//	expect markers commit|abort|- [pid=N] [epoch=N] [partitions=..] [groups=..]   MarkersDue now
//	expect deadline D|-                NextDeadline, as time since the start
//	expect deleted yes|no              whether the id is gone (its tombstone acknowledged)
//	expect-error CODE                  the last command was refused with CODE
//
// After every command: the invariants hold; a refused command, or one that
// answers no write, changed nothing; the durable state survives Encode and
// Decode, and is exactly what replaying the log gives.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScenario(t, f) })
	}
}

const txnID = "tx"

var epoch0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type client struct {
	pid   int64
	epoch int16
}

// held is a write the shell has not had acknowledged yet, and the answer
// waiting for it.
type held struct {
	rec    Record
	client string
	reply  *Reply
	lost   bool
}

type scenario struct {
	t       *testing.T
	cfg     Config
	txn     *Txn
	now     time.Time
	log     [][2][]byte
	clients map[string]*client
	nextPID int64
	pidFail bool
	held    *held
	reply   *Reply
	wrote   *Record
	deleted bool
	lastErr error
	checked bool // the last error was expected
	where   string
}

func runScenario(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := &scenario{t: t, cfg: Config{IDExpiration: 24 * time.Hour}, now: epoch0, clients: map[string]*client{}, nextPID: 1000, checked: true}
	s.txn = New(s.cfg, txnID)
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

func (s *scenario) pair(v string) pair {
	id, e, ok := strings.Cut(v, "/")
	if !ok {
		s.fatalf("not a pair P/E: %q", v)
	}
	return pair{s.int(id), int16(s.int(e))}
}

// parts parses "t:0,1;u:2" ("-" for none) into sorted partitions.
func (s *scenario) parts(v string) []TopicPartition {
	if v == "" || v == "-" {
		return nil
	}
	var out []TopicPartition
	for _, part := range strings.Split(v, ";") {
		topic, list, ok := strings.Cut(part, ":")
		if !ok {
			s.fatalf("cannot parse partitions %q", v)
		}
		for _, n := range strings.Split(list, ",") {
			out = append(out, TopicPartition{Topic: topic, Partition: int32(s.int(n))})
		}
	}
	return out
}

func (s *scenario) client(name string) *client {
	c := s.clients[name]
	if c == nil {
		c = &client{pid: NoProducerID, epoch: NoEpoch}
		s.clients[name] = c
	}
	return c
}

// producer answers the pair a command sends: the client's, or pid=/epoch=.
func (s *scenario) producer(name string, args map[string]string) (int64, int16) {
	c := s.client(name)
	pid, epoch := c.pid, c.epoch
	if v, ok := args["pid"]; ok {
		pid = s.int(v)
	}
	if v, ok := args["epoch"]; ok {
		epoch = int16(s.int(v))
	}
	return pid, epoch
}

func (s *scenario) alloc() (int64, error) {
	if s.pidFail {
		return 0, errs.Errorf(errs.CoordinatorNotAvailable, "no producer ids")
	}
	s.nextPID++
	return s.nextPID - 1, nil
}

func (s *scenario) run(f []string) {
	s.t.Helper()
	args := kv(f[1:])
	_, hold := args["hold"]
	_, lost := args["lost"]
	before, beforePending := s.txn.Record(), s.pendingOf()
	s.lastErr, s.reply, s.wrote = nil, nil, nil
	var eff Effects
	var reply *Reply
	who := ""
	event := true // an event of the machine (not the shell's completion)
	switch f[0] {
	case "config":
		if len(s.log) > 0 {
			s.fatalf("config comes first")
		}
		for k, v := range args {
			switch k {
			case "max-timeout":
				s.cfg.MaxTimeout = s.dur(v)
			case "expiration":
				s.cfg.IDExpiration = s.dur(v)
			default:
				s.fatalf("unknown config %s", k)
			}
		}
		s.txn = New(s.cfg, txnID)
		return
	case "pids":
		s.pidFail = f[1] == "fail"
		if !s.pidFail {
			s.nextPID = s.int(f[1])
		}
		return
	case "init":
		who = f[1]
		req := InitRequest{Timeout: time.Minute, ExpectedProducerID: NoProducerID, ExpectedEpoch: NoEpoch}
		if v, ok := args["timeout"]; ok {
			req.Timeout = s.dur(v)
		}
		switch v := args["expect"]; v {
		case "", "-":
		case "held":
			c := s.client(who)
			req.ExpectedProducerID, req.ExpectedEpoch = c.pid, c.epoch
		default:
			p := s.pair(v)
			req.ExpectedProducerID, req.ExpectedEpoch = p.id, p.epoch
		}
		var r Reply
		r, eff, s.lastErr = s.txn.InitProducerId(req, s.now, s.alloc)
		reply = &r
	case "add":
		who = f[1]
		pid, epoch := s.producer(who, args)
		eff, s.lastErr = s.txn.AddPartitions(pid, epoch, s.parts(f[2]), s.now)
	case "offsets":
		who = f[1]
		pid, epoch := s.producer(who, args)
		eff, s.lastErr = s.txn.AddOffsets(pid, epoch, f[2], s.now)
	case "end":
		who = f[1]
		pid, epoch := s.producer(who, args)
		if f[2] != "commit" && f[2] != "abort" {
			s.fatalf("end commit|abort")
		}
		var r Reply
		r, eff, s.lastErr = s.txn.EndTxn(pid, epoch, f[2] == "commit", s.now, s.alloc)
		reply = &r
	case "markers":
		eff, s.lastErr = s.txn.MarkersWritten(s.now)
	case "tick":
		if len(f) > 1 && !strings.Contains(f[1], "=") && f[1] != "hold" {
			s.now = s.now.Add(s.dur(f[1]))
		}
		eff = s.txn.Tick(s.now)
	case "complete", "fail":
		event = false
		if s.held == nil {
			s.fatalf("no write is held")
		}
		h := s.held
		s.held = nil
		if f[0] == "fail" {
			s.txn.Fail()
		} else {
			s.acknowledge(h)
		}
	case "failover":
		event = false
		s.failover(hold)
	case "load":
		event = false
		rec := Record{TransactionalID: txnID, ProducerID: s.int(args["pid"]), ProducerEpoch: int16(s.int(args["epoch"])),
			PrevProducerID: NoProducerID, PrevProducerEpoch: NoEpoch, NextProducerID: NoProducerID, Timeout: time.Minute,
			State: State(args["state"]), Partitions: s.parts(args["partitions"]), UpdateTime: ms(s.now)}
		if v, ok := args["prev"]; ok {
			p := s.pair(v)
			rec.PrevProducerID, rec.PrevProducerEpoch = p.id, p.epoch
		}
		if v, ok := args["next"]; ok {
			rec.NextProducerID = s.int(v)
		}
		if v, ok := args["timeout"]; ok {
			rec.Timeout = s.dur(v)
		}
		if v, ok := args["groups"]; ok {
			rec.Groups = strings.Split(v, ",")
		}
		if v, ok := args["start"]; ok {
			rec.StartTime = epoch0.Add(s.dur(v))
		}
		key, value, err := Encode(rec)
		if err != nil {
			s.fatalf("load: %v", err)
		}
		s.log = [][2][]byte{{key, value}}
		s.failover(hold)
	default:
		s.fatalf("unknown command %s", f[0])
	}
	if event {
		s.reply = reply
		if s.lastErr != nil && (eff.Write != nil || eff.Markers != nil || eff.Deleted) {
			s.fatalf("a refused event answered effects: %+v", eff)
		}
		if eff.Markers != nil || eff.Deleted {
			s.fatalf("an event answered markers or a deletion: %+v", eff)
		}
		if eff.Write != nil {
			if s.held != nil {
				s.fatalf("a second write while one is held")
			}
			s.wrote = eff.Write
			s.held = &held{rec: *eff.Write, client: who, reply: reply, lost: lost}
			if !hold {
				h := s.held
				s.held = nil
				s.acknowledge(h)
			}
		} else if s.lastErr == nil && reply != nil {
			s.deliver(who, reply, lost)
		}
		if s.lastErr != nil || eff.Write == nil {
			if !s.txn.Record().Equal(before) || !pendingEqual(s.pendingOf(), beforePending) {
				s.fatalf("the state changed without a write (or on a refusal):\n%+v\n%+v", before, s.txn.Record())
			}
		}
	}
	s.checked = s.lastErr == nil
	s.checkStep()
}

func (s *scenario) pendingOf() *Record {
	if r, ok := s.txn.Pending(); ok {
		return &r
	}
	return nil
}

func pendingEqual(a, b *Record) bool {
	return a == nil && b == nil || a != nil && b != nil && a.Equal(*b)
}

// acknowledge plays the shell once a write is acknowledged: the record goes
// to the log, the Txn completes it, the waiting answer goes out.
func (s *scenario) acknowledge(h *held) {
	s.t.Helper()
	key, value, err := Encode(h.rec)
	if err != nil {
		s.fatalf("encode the written record: %v", err)
	}
	s.log = append(s.log, [2][]byte{key, value})
	eff, err := s.txn.Complete(h.rec)
	if err != nil {
		s.fatalf("complete: %v", err)
	}
	if eff.Write != nil {
		s.fatalf("complete answered a write")
	}
	if due, ok := s.txn.MarkersDue(); ok != (eff.Markers != nil) || ok && !markersEqual(due, *eff.Markers) {
		s.fatalf("complete answered markers %+v, due %+v", eff.Markers, due)
	}
	if eff.Deleted {
		s.deleted = true
		s.txn = New(s.cfg, txnID) // the shell drops it; the id is unknown now
	}
	if h.reply != nil {
		s.deliver(h.client, h.reply, h.lost)
	}
}

func (s *scenario) deliver(who string, r *Reply, lost bool) {
	if lost || r.Err != nil || who == "" {
		return
	}
	c := s.client(who)
	c.pid, c.epoch = r.ProducerID, r.ProducerEpoch
}

func markersEqual(a, b Markers) bool {
	return a.TransactionalID == b.TransactionalID && a.ProducerID == b.ProducerID && a.ProducerEpoch == b.ProducerEpoch &&
		a.Commit == b.Commit && slices.Equal(a.Partitions, b.Partitions) && slices.Equal(a.Groups, b.Groups)
}

// failover plays a new coordinator: it reads the log's bytes from the
// start, then does what Resume says.
func (s *scenario) failover(hold bool) {
	s.t.Helper()
	if s.held != nil {
		s.fatalf("failover with a write held: complete or fail it first")
	}
	p := NewReplay(s.cfg)
	for _, r := range s.log {
		if err := p.Apply(r[0], r[1]); err != nil {
			s.fatalf("replay: %v", err)
		}
	}
	s.txn = New(s.cfg, txnID)
	if txns := p.Txns(); len(txns) == 1 {
		s.txn = txns[0]
	}
	eff := s.txn.Resume(s.now)
	if eff.Markers != nil {
		if due, ok := s.txn.MarkersDue(); !ok || !markersEqual(due, *eff.Markers) {
			s.fatalf("resume answered markers %+v, due %+v", eff.Markers, due)
		}
	}
	if eff.Write != nil {
		s.wrote = eff.Write
		s.held = &held{rec: *eff.Write}
		if !hold {
			h := s.held
			s.held = nil
			s.acknowledge(h)
		}
	}
}

// checkStep checks what must hold after every command.
func (s *scenario) checkStep() {
	s.t.Helper()
	if err := s.txn.check(); err != nil {
		s.fatalf("invariant broken: %v", err)
	}
	rec := s.txn.Record()
	p := NewReplay(s.cfg)
	for _, r := range s.log {
		if err := p.Apply(r[0], r[1]); err != nil {
			s.fatalf("replay: %v", err)
		}
	}
	txns := p.Txns()
	if !s.txn.Exists() {
		if len(txns) != 0 {
			s.fatalf("the log holds %+v, the Txn does not exist", txns[0].Record())
		}
		return
	}
	if len(txns) != 1 || !txns[0].Record().Equal(rec) {
		s.fatalf("the log does not give the durable state %+v", rec)
	}
	key, value, err := Encode(rec)
	if err != nil {
		s.fatalf("encode: %v", err)
	}
	got, err := Decode(key, value)
	if err != nil || !got.Equal(rec) {
		s.fatalf("Decode(Encode()) = %+v, %v; want %+v", got, err, rec)
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

func (s *scenario) check(what, got, want string) {
	s.t.Helper()
	if got != want {
		s.fatalf("%s: got %s, want %s", what, got, want)
	}
}

func fmtPair(id int64, epoch int16) string {
	if id == NoProducerID {
		return "-"
	}
	return fmt.Sprintf("%d/%d", id, epoch)
}

func (s *scenario) since(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Sub(epoch0).String()
}

func (s *scenario) expect(f []string) {
	s.t.Helper()
	if len(f) == 0 {
		s.fatalf("expect what?")
	}
	args := kv(f[1:])
	switch f[0] {
	case "txn":
		d, r := s.txn.Describe(), s.txn.Record()
		for k, v := range args {
			var got string
			switch k {
			case "state":
				got = string(d.State)
			case "pending":
				got = string(d.Pending)
				if got == "" {
					got = "-"
				}
			case "pid":
				got = strconv.FormatInt(d.ProducerID, 10)
			case "epoch":
				got = strconv.Itoa(int(d.ProducerEpoch))
			case "prev":
				got = fmtPair(r.PrevProducerID, r.PrevProducerEpoch)
			case "next":
				got = "-"
				if r.NextProducerID != NoProducerID {
					got = strconv.FormatInt(r.NextProducerID, 10)
				}
			case "partitions":
				got, v = FormatPartitions(d.Partitions), FormatPartitions(s.parts(v))
			case "groups":
				got = strings.Join(d.Groups, ",")
				if got == "" {
					got = "-"
				}
			case "start":
				got = s.since(d.StartTime)
				if v != "-" {
					v = s.dur(v).String()
				}
			case "timeout":
				got, v = d.Timeout.String(), s.dur(v).String()
			default:
				s.fatalf("unknown txn field %s", k)
			}
			s.check("txn "+k, got, v)
		}
	case "reply":
		if s.reply == nil {
			s.fatalf("the last command answered no reply")
		}
		for k, v := range args {
			switch k {
			case "pid":
				s.check("reply pid", strconv.FormatInt(s.reply.ProducerID, 10), v)
			case "epoch":
				s.check("reply epoch", strconv.Itoa(int(s.reply.ProducerEpoch)), v)
			case "error":
				want := errs.ForName(v)
				if want == nil || !errors.Is(s.reply.Err, want) {
					s.fatalf("reply error: got %v, want %s", s.reply.Err, v)
				}
			default:
				s.fatalf("unknown reply field %s", k)
			}
		}
		if _, ok := args["error"]; !ok && s.reply.Err != nil {
			s.fatalf("reply error: %v", s.reply.Err)
		}
	case "client":
		c := s.client(f[1])
		args = kv(f[2:])
		for k, v := range args {
			switch k {
			case "pid":
				s.check(f[1]+" pid", strconv.FormatInt(c.pid, 10), v)
			case "epoch":
				s.check(f[1]+" epoch", strconv.Itoa(int(c.epoch)), v)
			default:
				s.fatalf("unknown client field %s", k)
			}
		}
	case "wrote":
		got := "-"
		if s.wrote != nil {
			got = string(s.wrote.State)
		}
		s.check("wrote", got, f[1])
	case "markers":
		m, ok := s.txn.MarkersDue()
		if f[1] == "-" {
			if ok {
				s.fatalf("markers due: %+v", m)
			}
			return
		}
		if !ok {
			s.fatalf("no markers due (state %s)", s.txn.State())
		}
		s.check("markers", map[bool]string{true: "commit", false: "abort"}[m.Commit], f[1])
		args = kv(f[2:])
		for k, v := range args {
			switch k {
			case "pid":
				s.check("markers pid", strconv.FormatInt(m.ProducerID, 10), v)
			case "epoch":
				s.check("markers epoch", strconv.Itoa(int(m.ProducerEpoch)), v)
			case "partitions":
				s.check("markers partitions", FormatPartitions(m.Partitions), FormatPartitions(s.parts(v)))
			case "groups":
				s.check("markers groups", strings.Join(m.Groups, ","), v)
			default:
				s.fatalf("unknown markers field %s", k)
			}
		}
	case "deadline":
		d, ok := s.txn.NextDeadline()
		got := "-"
		if ok {
			got = s.since(d)
		}
		want := f[1]
		if want != "-" {
			want = s.dur(want).String()
		}
		s.check("deadline", got, want)
	case "deleted":
		s.check("deleted", map[bool]string{true: "yes", false: "no"}[s.deleted], f[1])
	default:
		s.fatalf("unknown expect %s", f[0])
	}
}
