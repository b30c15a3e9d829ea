package liveness

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/errs"
	"skein/libs/membership"
	"skein/libs/metadata"
	"skein/services/controller/internal/fsm"
)

// Node is what the loop needs of the Raft node.
type Node interface {
	IsLeader() bool
	// LeaderCh signals leadership gained (true) or lost (false); a slow
	// reader sees the latest change.
	LeaderCh() <-chan bool
	Barrier(timeout time.Duration) error
	Read(fn func(img *metadata.Image))
	Propose(ctx context.Context, cmd *controllerv1.Command) (fsm.Result, error)
}

// Config configures Loop.
type Config struct {
	Settings
	// Tick: how soon a leader that proposed something (or could not catch
	// up) looks again, to retry what failed (default 100 ms).
	Tick time.Duration
	// Idle: the longest the loop sleeps with nothing due (default 1 s).
	// A leader otherwise wakes when a session could run out (Tracker.Due),
	// on gossip events, on heartbeats that report something, on
	// registrations and on leadership changes, so an idle cluster's
	// leading controller is not woken ten times a second for nothing; this
	// only bounds how long anything else goes unnoticed.
	Idle time.Duration
	// LeaderImbalanceCheckInterval: how often preferred replicas get their
	// leadership back (default 10 s).
	LeaderImbalanceCheckInterval time.Duration
	Logger                       *slog.Logger
	// Registerer receives the fence and unfence counters (optional).
	Registerer prometheus.Registerer
}

// Loop is the reconciler's shell.
type Loop struct {
	cfg  Config
	node Node
	log  *slog.Logger
	poke chan struct{} // holds a token while the loop should look again

	mu sync.Mutex // guards t
	t  *Tracker

	fences, unfences, moves *prometheus.CounterVec
}

// New returns a loop; Run starts it.
func New(cfg Config, node Node) *Loop {
	if cfg.Tick <= 0 {
		cfg.Tick = 100 * time.Millisecond
	}
	if cfg.Idle <= 0 {
		cfg.Idle = time.Second
	}
	if cfg.LeaderImbalanceCheckInterval <= 0 {
		cfg.LeaderImbalanceCheckInterval = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l := &Loop{cfg: cfg, node: node, log: cfg.Logger.With("component", "liveness"), t: NewTracker(cfg.Settings), poke: make(chan struct{}, 1),
		fences: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skein_controller_broker_fences_total",
			Help: "Fence commands this controller committed as leader, per broker."}, []string{"broker"}),
		unfences: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skein_controller_broker_unfences_total",
			Help: "Commands this controller committed as leader that unfenced a broker (a heartbeat or a registration), per broker."}, []string{"broker"}),
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skein_controller_leader_moves_total",
			Help: "Partition leaderships this controller, as leader, moved away from a live broker that a majority of the partition's replicas reported unreachable, per broker."}, []string{"broker"}),
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(l.fences, l.unfences, l.moves)
	}
	return l
}

// wake makes the loop look again soon; it never blocks.
func (l *Loop) wake() {
	select {
	case l.poke <- struct{}{}:
	default:
	}
}

// Unfenced counts a committed command that unfenced the broker.
func (l *Loop) Unfenced(id int32) { l.unfences.WithLabelValues(strconv.Itoa(int(id))).Inc() }

// HeldDown reports whether gossip holds this incarnation of the broker dead.
func (l *Loop) HeldDown(id int32, incarnation string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.t.HeldDown(id, incarnation)
}

// SessionLive reports whether the broker's session of this epoch runs and
// has heard from it within the session timeout, and since when it has not.
func (l *Loop) SessionLive(id int32, epoch int64) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.t.SessionLive(id, epoch, time.Now())
}

// Heartbeat records a broker's heartbeat (the gRPC shell calls it).
func (l *Loop) Heartbeat(id int32, epoch int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.t.HasSession(id, epoch) {
		// A new registration: the internal topics may be due.
		l.wake()
	}
	l.t.Heartbeat(id, epoch, time.Now())
}

// UnreachableLeaders records the leaders a broker's heartbeat says it
// cannot reach as their follower.
func (l *Loop) UnreachableLeaders(id int32, epoch int64, refs []*controllerv1.UnreachableLeader) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(refs) > 0 {
		l.wake()
	}
	l.t.UnreachableLeaders(id, epoch, refs, time.Now())
}

// LogDirFailed records whether a broker's heartbeat says its log directory
// failed.
func (l *Loop) LogDirFailed(id int32, failed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if failed {
		l.wake()
	}
	l.t.LogDirFailed(id, failed)
}

// ShuttingDown records a broker's controlled shutdown.
func (l *Loop) ShuttingDown(id int32, epoch int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.wake()
	l.t.ShuttingDown(id, epoch)
}

// MayUnfence reports whether a heartbeat may unfence the broker.
func (l *Loop) MayUnfence(id int32, epoch int64, incarnation string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.t.MayUnfence(id, epoch, incarnation)
}

// Run feeds gossip events to the tracker and, while leader, proposes what
// it plans, until ctx ends. events may be nil (no gossip).
func (l *Loop) Run(ctx context.Context, events <-chan membership.Event) {
	timer := time.NewTimer(l.cfg.Idle)
	defer timer.Stop()
	rebalance := time.NewTicker(l.cfg.LeaderImbalanceCheckInterval)
	defer rebalance.Stop()
	leaderCh := l.node.LeaderCh()
	leading := false
	for {
		elect := false
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			l.log.Info("gossip", "event", ev.Type.String(), "member", ev.Member.Name, "role", ev.Member.Meta.Role, "id", ev.Member.Meta.ID)
			l.mu.Lock()
			l.t.Gossip(ev)
			l.mu.Unlock()
			// Act on a death now rather than at the next tick.
		case <-leaderCh:
		case <-l.poke:
		case <-timer.C:
		case <-rebalance.C:
			elect = true
		}
		timer.Reset(l.step(ctx, &leading, elect))
	}
}

// step plans and proposes once, if leading, and answers how long the loop
// may sleep before it should look again.
func (l *Loop) step(ctx context.Context, leading *bool, elect bool) time.Duration {
	if !l.node.IsLeader() {
		*leading = false
		return l.cfg.Idle
	}
	if !*leading {
		if err := l.node.Barrier(5 * time.Second); err != nil {
			l.log.Warn("new leader could not catch up", "err", err)
			return l.cfg.Tick
		}
		l.mu.Lock()
		l.t.BecameLeader(time.Now())
		l.mu.Unlock()
		*leading = true
		l.log.Info("leading: broker sessions start now")
	}
	var cmds []*controllerv1.Command
	// The broker epoch each leader moved away from had when the move
	// was planned: by the time the move is committed the broker may
	// have registered again, and its new incarnation is not held off.
	moveFrom := map[int32]int64{}
	l.node.Read(func(img *metadata.Image) {
		l.mu.Lock()
		cmds = l.t.Plan(img, time.Now())
		for _, c := range cmds {
			if m := c.GetMoveLeader(); m != nil {
				if b, ok := img.Broker(metadata.BrokerID(m.GetLeader())); ok {
					moveFrom[m.GetLeader()] = b.GetBrokerEpoch()
				}
			}
		}
		var preferred []*controllerv1.TopicPartitions
		if elect {
			preferred = l.t.PreferredElections(img, time.Now())
		}
		l.mu.Unlock()
		if len(preferred) > 0 {
			cmds = append(cmds, &controllerv1.Command{Command: &controllerv1.Command_ElectLeaders{ElectLeaders: &controllerv1.ElectLeadersRequest{
				Type: controllerv1.ElectionType_ELECTION_TYPE_PREFERRED, Partitions: preferred}}})
		}
	})
	for _, cmd := range cmds {
		l.propose(ctx, cmd, moveFrom)
	}
	if len(cmds) > 0 {
		// Look again soon: a proposal may have failed, or its effect may
		// call for more.
		return l.cfg.Tick
	}
	wait := l.cfg.Idle
	l.node.Read(func(img *metadata.Image) {
		l.mu.Lock()
		defer l.mu.Unlock()
		now := time.Now()
		if due := l.t.Due(img, now); !due.IsZero() {
			wait = min(wait, due.Sub(now))
		}
	})
	return wait
}

// propose commits cmd; moveFrom holds, for a MoveLeader, the broker epoch
// of the leader it moves from as of planning.
func (l *Loop) propose(ctx context.Context, cmd *controllerv1.Command, moveFrom map[int32]int64) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := l.node.Propose(ctx, cmd)
	switch {
	case err == nil:
		l.log.Info("proposed", "command", fsm.Describe(cmd))
		if f := cmd.GetFenceBroker(); f != nil {
			l.fences.WithLabelValues(strconv.Itoa(int(f.GetBrokerId()))).Inc()
		}
		if m := cmd.GetMoveLeader(); m != nil {
			l.moves.WithLabelValues(strconv.Itoa(int(m.GetLeader()))).Inc()
			l.mu.Lock()
			l.t.Moved(m.GetLeader(), moveFrom[m.GetLeader()], time.Now())
			l.mu.Unlock()
		}
	case errs.Of(err) == errs.StaleBrokerEpoch:
		// The broker re-registered meanwhile: nothing to fence.
	default:
		l.log.Warn("proposal failed", "command", fsm.Describe(cmd), "err", err)
	}
}
