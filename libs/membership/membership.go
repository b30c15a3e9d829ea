package membership

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Role is the kind of process a member is.
type Role string

// The roles of Skein's processes.
const (
	RoleController             Role = "controller"
	RoleStorage                Role = "storage"
	RoleGroupCoordinator       Role = "groupcoord"
	RoleTransactionCoordinator Role = "txncoord"
	RoleGateway                Role = "gateway"
)

// Meta is what a member tells the others about itself; it travels as JSON in
// memberlist's node meta (at most 512 bytes).
type Meta struct {
	Role     Role   `json:"role"`
	ID       int32  `json:"id"`
	GRPCAddr string `json:"grpc,omitempty"`
	HTTPAddr string `json:"http,omitempty"`
	RaftAddr string `json:"raft,omitempty"`
	// Incarnation is the process start's id (a storage node passes the one it
	// registers with), so an event about an old incarnation can be told apart.
	Incarnation string `json:"inc,omitempty"`
	// PlacementRule is, for a controller, the newest rule for placing new
	// partitions its build applies (0: a build that does not say).
	PlacementRule uint32 `json:"placement,omitempty"`
}

// State is a member's state as gossip sees it.
type State int

// The states of a member.
const (
	StateAlive State = iota
	StateSuspect
	StateDead
	StateLeft
)

func (s State) String() string {
	switch s {
	case StateAlive:
		return "alive"
	case StateSuspect:
		return "suspect"
	case StateDead:
		return "dead"
	case StateLeft:
		return "left"
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// Member is one process of the cluster.
type Member struct {
	Name  string // unique node name, "<role>-<id>" by default
	Addr  string // gossip address, host:port
	Meta  Meta
	State State

	since time.Time // when this node saw State begin
}

// EventType is what happened to a member.
type EventType int

// The event types.
const (
	EventJoin EventType = iota + 1
	EventUpdate
	EventLeave // left gracefully
	EventDead  // failed: stopped answering probes
)

func (t EventType) String() string {
	switch t {
	case EventJoin:
		return "join"
	case EventUpdate:
		return "update"
	case EventLeave:
		return "leave"
	case EventDead:
		return "dead"
	}
	return "event(" + strconv.Itoa(int(t)) + ")"
}

// Event is one change of one member.
type Event struct {
	Type   EventType
	Member Member
}

// Timings are memberlist's failure-detection knobs.
type Timings struct {
	// ProbeInterval: each member probes one other member this often.
	ProbeInterval time.Duration
	// ProbeTimeout: how long to wait for a probe's ack before indirect probes.
	ProbeTimeout time.Duration
	// SuspicionMult: a suspect is declared dead after about
	// SuspicionMult * ProbeInterval (scaled by log10 of the cluster size),
	// sooner when other members confirm the suspicion.
	SuspicionMult int
	// SuspicionMaxTimeoutMult bounds the suspicion timeout before
	// confirmations: at most SuspicionMaxTimeoutMult times the minimum.
	SuspicionMaxTimeoutMult int
	// GossipInterval and GossipNodes: how often and to how many members
	// updates are pushed.
	GossipInterval time.Duration
	GossipNodes    int
	// PushPullInterval: full state exchange with one random member.
	PushPullInterval time.Duration
	// TCPTimeout bounds joins and push-pull exchanges.
	TCPTimeout time.Duration
	// DeadNodeReclaimTime: after this, a dead member's name may come back at
	// another address (a restarted process on a new port or IP).
	DeadNodeReclaimTime time.Duration
	// GossipToTheDeadTime: how long updates are still gossiped to a member
	// declared dead. memberlist probes and push-pulls only live members, so
	// after this the two sides of a healed partition never talk again by
	// themselves: the reconnect loop (below) is what brings them back.
	GossipToTheDeadTime time.Duration
	// ReconnectInterval is the first pause of the reconnect loop: while a
	// member is held dead (for less than ReconnectTimeout) or fewer members
	// are alive than expected, this node joins the seeds and the dead
	// members' last addresses again, doubling the pause up to
	// ReconnectMaxInterval. One exchange that lifts a partition needs two
	// rounds (the first makes each side refute the other's death notice, the
	// second carries the refutation), so a healed partition is whole again
	// within about 2 × ReconnectMaxInterval.
	ReconnectInterval    time.Duration
	ReconnectMaxInterval time.Duration
	// ReconnectTimeout: a member dead for longer is given up on (a
	// decommissioned node is not dialled forever).
	ReconnectTimeout time.Duration
}

// FastTimings detects a killed member in about 1-2 s on loopback or a LAN:
// it is probed within a few 200 ms rounds, suspected after a 100 ms timeout
// and declared dead after a 600-1200 ms suspicion. News (a death, a new
// member) is pushed to 4 members every 200 ms, so it reaches a cluster of
// a dozen in a few rounds; a shorter interval wakes every idle member more
// often for nothing.
func FastTimings() Timings {
	return Timings{
		ProbeInterval:           200 * time.Millisecond,
		ProbeTimeout:            100 * time.Millisecond,
		SuspicionMult:           3,
		SuspicionMaxTimeoutMult: 2,
		GossipInterval:          200 * time.Millisecond,
		GossipNodes:             4,
		PushPullInterval:        5 * time.Second,
		TCPTimeout:              time.Second,
		DeadNodeReclaimTime:     time.Second,
		GossipToTheDeadTime:     6 * time.Second,
		ReconnectInterval:       time.Second,
		ReconnectMaxInterval:    4 * time.Second,
		ReconnectTimeout:        24 * time.Hour,
	}
}

// Config configures Start.
type Config struct {
	// NodeName must be unique in the cluster; default "<role>-<id>".
	NodeName string
	// BindAddr is the gossip host:port (UDP and TCP); port 0 picks a free one.
	BindAddr string
	// AdvertiseAddr is the host:port others reach this member at; default BindAddr.
	AdvertiseAddr string
	// Seeds are members to join, as host:port; names are resolved again on
	// every attempt, so a seed that comes back at another IP is found.
	// Unreachable ones are retried by the reconnect loop.
	Seeds []string
	// ExpectedMembers, when set, answers how many members (this one
	// included) should be alive; while fewer are, the reconnect loop joins
	// the seeds again. A controller expects its peers, for instance.
	ExpectedMembers func() int
	Meta            Meta
	// Timings default to FastTimings when ProbeInterval is zero.
	Timings Timings
	// Logger receives memberlist's warnings and errors; default slog.Default().
	Logger *slog.Logger
	// Transport carries gossip; default memberlist's UDP+TCP transport on
	// BindAddr. Fault-injection tests pass one that can cut links.
	Transport memberlist.Transport
	// SecretKey, when set (16, 24 or 32 bytes), encrypts and authenticates
	// every gossip message with AES-GCM: a member without the key is
	// neither heard nor understood (see ReadKeyFile).
	SecretKey []byte
}

// ReadKeyFile reads a gossip key: a file holding the key in base64 (16,
// 24 or 32 bytes once decoded), as `skein dev --secure` writes one.
func ReadKeyFile(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gossip key: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		return nil, fmt.Errorf("gossip key %s: not base64: %w", path, err)
	}
	if n := len(key); n != 16 && n != 24 && n != 32 {
		return nil, fmt.Errorf("gossip key %s: %d bytes, want 16, 24 or 32", path, n)
	}
	return key, nil
}

// Node is this process's membership in the gossip cluster.
type Node struct {
	list   *memberlist.Memberlist
	name   string
	logger *slog.Logger

	metaMu sync.Mutex // guards meta
	meta   []byte

	addr     string   // our gossip address, read once at Start
	seeds    []string // the configured seeds, this node's own address removed
	expected func() int
	timings  Timings

	mu      sync.Mutex        // guards members
	members map[string]Member // every other member ever seen, by name, in its last known state

	queue  *queue
	events chan Event
	stop   chan struct{}
	wg     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// Start joins the gossip cluster: it binds, announces Meta, and joins Seeds.
func Start(cfg Config) (*Node, error) {
	if cfg.NodeName == "" {
		cfg.NodeName = fmt.Sprintf("%s-%d", cfg.Meta.Role, cfg.Meta.ID)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Timings.ProbeInterval == 0 {
		cfg.Timings = FastTimings()
	}
	cfg.Timings = cfg.Timings.withDefaults()
	meta, err := encodeMeta(cfg.Meta, false)
	if err != nil {
		return nil, err
	}
	var host string
	var port int
	if cfg.Transport == nil {
		var err error
		if host, port, err = splitHostPort(cfg.BindAddr); err != nil {
			return nil, fmt.Errorf("membership: bind address: %w", err)
		}
	}
	n := &Node{
		name:     cfg.NodeName,
		logger:   cfg.Logger.With("component", "membership"),
		meta:     meta,
		members:  map[string]Member{},
		queue:    newQueue(),
		events:   make(chan Event),
		stop:     make(chan struct{}),
		expected: cfg.ExpectedMembers,
		timings:  cfg.Timings,
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.NodeName
	mc.BindAddr, mc.BindPort = host, port
	if cfg.AdvertiseAddr != "" {
		ah, ap, err := splitHostPort(cfg.AdvertiseAddr)
		if err != nil {
			return nil, fmt.Errorf("membership: advertise address: %w", err)
		}
		mc.AdvertiseAddr, mc.AdvertisePort = ah, ap
	}
	t := cfg.Timings
	mc.ProbeInterval, mc.ProbeTimeout = t.ProbeInterval, t.ProbeTimeout
	mc.SuspicionMult, mc.SuspicionMaxTimeoutMult = t.SuspicionMult, t.SuspicionMaxTimeoutMult
	mc.GossipInterval, mc.GossipNodes = t.GossipInterval, t.GossipNodes
	mc.PushPullInterval, mc.TCPTimeout = t.PushPullInterval, t.TCPTimeout
	mc.DeadNodeReclaimTime = t.DeadNodeReclaimTime
	if len(cfg.SecretKey) > 0 {
		mc.SecretKey = cfg.SecretKey
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	mc.GossipToTheDeadTime = t.GossipToTheDeadTime
	mc.Transport = cfg.Transport
	if mc.Transport == nil {
		tr, err := newTransport(host, port, n.logger)
		if err != nil {
			return nil, err
		}
		if port == 0 { // as memberlist does with a port it picked itself
			mc.BindPort = tr.tcp.Addr().(*net.TCPAddr).Port
			mc.AdvertisePort = mc.BindPort
		}
		mc.Transport = tr
	}
	// Gossip messages are a few hundred bytes on a LAN: compressing each
	// one (LZW) cost more CPU than anything else an idle controller did.
	mc.EnableCompression = false
	mc.Delegate = delegate{n}
	mc.Events = eventDelegate{n}
	mc.Logger = log.New(logWriter{n.logger}, "", 0)
	n.wg.Add(1)
	go n.pump()
	list, err := memberlist.Create(mc)
	if err != nil {
		if cfg.Transport == nil {
			_ = mc.Transport.Shutdown() // ours; memberlist may not have shut it down
		}
		close(n.stop)
		n.wg.Wait()
		return nil, fmt.Errorf("membership: %w", err)
	}
	n.list = list
	// memberlist hands out pointers to nodes it keeps changing under its own
	// lock; read ours once, before anyone knows us.
	n.addr = list.LocalNode().Address()
	n.seeds = slices.DeleteFunc(slices.Clone(cfg.Seeds), func(s string) bool { return s == "" || s == n.Addr() })
	if len(n.seeds) > 0 {
		if _, err := list.Join(n.seeds); err != nil {
			// Usual when a cluster starts together: the reconnect loop
			// warns if nobody answers for long.
			n.logger.Info("no gossip seed answered yet; retrying in the background", "seeds", n.seeds, "err", err)
		}
	}
	n.wg.Add(1)
	go n.reconnect()
	return n, nil
}

func (t Timings) withDefaults() Timings {
	f := FastTimings()
	if t.GossipToTheDeadTime <= 0 {
		t.GossipToTheDeadTime = 10 * t.ProbeInterval * time.Duration(max(1, t.SuspicionMult))
	}
	if t.ReconnectInterval <= 0 {
		t.ReconnectInterval = f.ReconnectInterval
	}
	if t.ReconnectMaxInterval < t.ReconnectInterval {
		t.ReconnectMaxInterval = max(t.ReconnectInterval, f.ReconnectMaxInterval)
	}
	if t.ReconnectTimeout <= 0 {
		t.ReconnectTimeout = f.ReconnectTimeout
	}
	return t
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port in %q", addr)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}

// reconnect is the loop that heals partitions, as Serf's reconnector does:
// memberlist stops talking to a member GossipToTheDeadTime after declaring
// it dead, so without this two sides of a healed cut would stay apart for
// good. While something is missing it joins the seeds (resolved again) and
// the dead members' last addresses, backing off from ReconnectInterval to
// ReconnectMaxInterval; when nothing is missing it checks every
// ReconnectInterval.
func (n *Node) reconnect() {
	defer n.wg.Done()
	pause := n.timings.ReconnectInterval
	var lastWarn time.Time
	for {
		select {
		case <-n.stop:
			return
		case <-time.After(pause):
		}
		targets, why := n.missing(time.Now())
		if len(targets) == 0 {
			pause = n.timings.ReconnectInterval
			continue
		}
		joined, err := n.list.Join(targets)
		switch {
		case joined > 0:
			n.logger.Debug("gossip reconnect exchanged state", "why", why, "answered", joined, "tried", len(targets))
		case time.Since(lastWarn) >= time.Minute:
			// One line a minute while cut off, not one per attempt.
			lastWarn = time.Now()
			n.logger.Warn("gossip reconnect: nobody answered; retrying", "why", why, "tried", targets, "err", err)
		}
		pause = min(2*pause, n.timings.ReconnectMaxInterval)
	}
}

// missing answers whom to join now, and why: every member held dead for
// less than ReconnectTimeout (its last address), then the seeds when fewer
// members are alive than expected (or than the seeds promise).
func (n *Node) missing(now time.Time) (targets []string, why string) {
	alive := 1
	var dead []string
	n.mu.Lock()
	for _, m := range n.members {
		switch {
		case m.State == StateAlive:
			alive++
		case m.State == StateDead && now.Sub(m.since) < n.timings.ReconnectTimeout:
			dead = append(dead, m.Addr)
		}
	}
	n.mu.Unlock()
	want := 0
	if n.expected != nil {
		want = n.expected()
	}
	if len(n.seeds) > 0 && alive == 1 {
		want = max(want, 2) // seeded, yet alone
	}
	// The dead members' last addresses come first: they are addresses, not
	// names. Seeds are names, and right after a heal the resolver may still
	// be unreachable (Docker's embedded DNS was, for half a minute once);
	// memberlist tries the targets in order, each name waiting out its
	// lookup, so names first could delay the rejoin by that long.
	if len(dead) > 0 {
		slices.Sort(dead)
		targets = append(targets, slices.Compact(dead)...)
		why = fmt.Sprintf("%d members held dead", len(dead))
	}
	if alive < want {
		targets = append(targets, n.seeds...)
		why = strings.TrimPrefix(why+fmt.Sprintf("; %d of %d members alive", alive, want), "; ")
	}
	return targets, why
}

// Name is this member's node name.
func (n *Node) Name() string { return n.name }

// Addr is this member's gossip address (with the port picked, when it was 0).
func (n *Node) Addr() string { return n.addr }

// Events delivers changes of other members, in order; closed by Close.
func (n *Node) Events() <-chan Event { return n.events }

// Members returns the members believed alive, this one included, by name.
func (n *Node) Members() []Member {
	n.metaMu.Lock()
	self := Member{Name: n.name, Addr: n.addr, State: StateAlive}
	self.Meta, _ = decodeMeta(n.meta)
	n.metaMu.Unlock()
	out := []Member{self}
	n.mu.Lock()
	for _, m := range n.members {
		if m.State == StateAlive {
			out = append(out, m)
		}
	}
	n.mu.Unlock()
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Lookup answers the member with role and id as this node last saw it:
// itself (alive), or another in its last known state. ok is false for a
// member gossip has never seen.
func (n *Node) Lookup(role Role, id int32) (m Member, ok bool) {
	n.metaMu.Lock()
	self, _ := decodeMeta(n.meta)
	n.metaMu.Unlock()
	if self.Role == role && self.ID == id {
		return Member{Name: n.name, Addr: n.addr, Meta: self, State: StateAlive}, true
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, mem := range n.members {
		if mem.Meta.Role != role || mem.Meta.ID != id {
			continue
		}
		// A restarted process may come back under another name while
		// its old one is still to be declared dead: an alive entry wins,
		// then the latest.
		better := mem.State == StateAlive && m.State != StateAlive || (mem.State == StateAlive) == (m.State == StateAlive) && mem.since.After(m.since)
		if !ok || better {
			m, ok = mem, true
		}
	}
	return m, ok
}

// UpdateMeta changes what this member tells the others and gossips it.
func (n *Node) UpdateMeta(m Meta) error {
	b, err := encodeMeta(m, false)
	if err != nil {
		return err
	}
	n.metaMu.Lock()
	n.meta = b
	n.metaMu.Unlock()
	return n.list.UpdateNode(5 * time.Second)
}

// Close leaves the cluster gracefully (others see EventLeave at once rather
// than EventDead after the suspicion timeout), waiting up to timeout for the
// leave to be gossiped, then stops and closes Events. The leave takes two
// broadcasts, each sent with the next gossip round: give it two gossip
// intervals at least.
func (n *Node) Close(timeout time.Duration) error {
	n.closeOnce.Do(func() {
		deadline := time.Now().Add(timeout)
		// memberlist reports a leave and a death alike (NotifyLeave, with the
		// state out of reach), so first gossip a meta that says we are
		// leaving: the others report EventLeave, and at once.
		n.metaMu.Lock()
		meta, _ := decodeMeta(n.meta)
		n.meta, _ = encodeMeta(meta, true)
		n.metaMu.Unlock()
		updateErr := n.list.UpdateNode(timeout / 2)
		// The leave gets what the update left of timeout.
		leaveErr := errors.Join(updateErr, n.list.Leave(max(time.Until(deadline), time.Millisecond)))
		n.closeErr = errors.Join(leaveErr, n.list.Shutdown())
		close(n.stop)
		n.wg.Wait()
	})
	return n.closeErr
}

// Kill stops gossiping without saying goodbye, as a crash would: the others
// declare this member dead after their suspicion timeout. For tests and
// fault injection.
func (n *Node) Kill() error {
	n.closeOnce.Do(func() {
		n.closeErr = n.list.Shutdown()
		close(n.stop)
		n.wg.Wait()
	})
	return n.closeErr
}

// wireMeta is Meta plus the leaving mark Close gossips before it leaves.
type wireMeta struct {
	Meta
	Leaving bool `json:"leaving,omitempty"`
}

func encodeMeta(m Meta, leaving bool) ([]byte, error) {
	b, err := json.Marshal(wireMeta{Meta: m, Leaving: leaving})
	if err != nil {
		return nil, err
	}
	if len(b) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("membership: node meta is %d bytes, the limit is %d", len(b), memberlist.MetaMaxSize)
	}
	return b, nil
}

// decodeMeta reads a member's meta; unreadable meta yields an empty role (the
// member still counts).
func decodeMeta(b []byte) (Meta, bool) {
	var w wireMeta
	_ = json.Unmarshal(b, &w)
	return w.Meta, w.Leaving
}

// pump moves events from the unbounded queue to the events channel.
func (n *Node) pump() {
	defer n.wg.Done()
	defer close(n.events)
	for {
		ev, ok := n.queue.pop(n.stop)
		if !ok {
			return
		}
		select {
		case n.events <- ev:
		case <-n.stop:
			return
		}
	}
}

// notify runs inside memberlist's callbacks, under its lock: m may be read
// here and nowhere later.
func (n *Node) notify(t EventType, m *memberlist.Node) {
	if m.Name == n.name {
		return
	}
	meta, leaving := decodeMeta(m.Meta)
	mem := Member{Name: m.Name, Addr: m.Address(), Meta: meta, State: StateAlive, since: time.Now()}
	n.mu.Lock()
	defer n.mu.Unlock()
	prev, known := n.members[m.Name]
	switch {
	case t == EventJoin:
	case leaving || t == EventLeave:
		if known && prev.State == StateLeft {
			return // already reported when the leaving mark arrived
		}
		t, mem.State = EventLeave, StateLeft
	case t == EventDead:
		mem.State = StateDead
	}
	n.members[m.Name] = mem
	n.queue.push(Event{Type: t, Member: mem})
}

type delegate struct{ n *Node }

func (d delegate) NodeMeta(limit int) []byte {
	d.n.metaMu.Lock()
	defer d.n.metaMu.Unlock()
	return slices.Clone(d.n.meta)
}
func (delegate) NotifyMsg([]byte)                           {}
func (delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (delegate) LocalState(join bool) []byte                { return nil }
func (delegate) MergeRemoteState(buf []byte, join bool)     {}

type eventDelegate struct{ n *Node }

func (d eventDelegate) NotifyJoin(m *memberlist.Node)   { d.n.notify(EventJoin, m) }
func (d eventDelegate) NotifyUpdate(m *memberlist.Node) { d.n.notify(EventUpdate, m) }
func (d eventDelegate) NotifyLeave(m *memberlist.Node)  { d.n.notify(EventDead, m) }

// queue is an unbounded FIFO: memberlist's callbacks must not block on a slow
// consumer, and dropping a Dead event would hide a failure.
type queue struct {
	mu    sync.Mutex // guards items
	items []Event
	ready chan struct{} // holds a token while items is not empty
}

func newQueue() *queue { return &queue{ready: make(chan struct{}, 1)} }

func (q *queue) push(e Event) {
	q.mu.Lock()
	q.items = append(q.items, e)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *queue) pop(stop <-chan struct{}) (Event, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			e := q.items[0]
			q.items = q.items[1:]
			more := len(q.items) > 0
			q.mu.Unlock()
			if more {
				select {
				case q.ready <- struct{}{}:
				default:
				}
			}
			return e, true
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-stop:
			return Event{}, false
		}
	}
}

// logWriter forwards memberlist's "[LEVEL] memberlist: ..." lines to slog,
// dropping DEBUG. A failure on this node's own closed socket (memberlist's
// probes racing the node's graceful stop) is logged at debug: it is the
// stop, not a fault an operator filtering for errors should see.
type logWriter struct{ l *slog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	switch {
	case strings.HasPrefix(line, "[DEBUG]"):
	case strings.Contains(line, "use of closed network connection"):
		w.l.Debug(strings.TrimSpace(line[strings.IndexByte(line, ']')+1:]))
	case strings.HasPrefix(line, "[ERR]"):
		w.l.Error(strings.TrimSpace(strings.TrimPrefix(line, "[ERR]")))
	case strings.HasPrefix(line, "[WARN]"):
		w.l.Warn(strings.TrimSpace(strings.TrimPrefix(line, "[WARN]")))
	case strings.HasPrefix(line, "[INFO]"):
		w.l.Info(strings.TrimSpace(strings.TrimPrefix(line, "[INFO]")))
	default:
		w.l.Info(line)
	}
	return len(p), nil
}
