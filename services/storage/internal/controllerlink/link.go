package controllerlink

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	grpcmd "google.golang.org/grpc/metadata"

	controllerv1 "skein/gen/skein/controller/v1"
	controllerv1grpc "skein/gen/skein/controller/v1/controllerv1grpc"
	"skein/libs/errs"
	"skein/libs/grpcopt"
	"skein/libs/metadata"
	"skein/libs/metadata/watch"
	"skein/libs/rpcerr"
	"skein/services/storage/internal/partition"
)

// Config names the broker and its controllers.
type Config struct {
	BrokerID    int32
	GRPCAddr    string
	HTTPAddr    string
	Rack        string
	Controllers []string
	// LogDirID is the data directory's id (package dirid), sent with every
	// registration.
	LogDirID string
	// ClusterID, if set, answers the cluster this node's partition
	// directories were made for ("" while none was made), sent with every
	// registration: controllers of another cluster refuse the node.
	ClusterID func() string
	// HeartbeatInterval is how often the session is renewed (default
	// DefaultHeartbeatInterval).
	HeartbeatInterval time.Duration
}

// DefaultHeartbeatInterval renews a session four times within the
// controllers' default session timeout (2 s). Heartbeats also carry a
// follower's report of a leader it cannot reach, and the controllers move
// that leader's partitions once a majority has reported: a longer interval
// would keep writers waiting longer when a leader is cut off from its
// followers alone.
const DefaultHeartbeatInterval = 500 * time.Millisecond

// Link is the broker's controller session.
type Link struct {
	cfg         Config
	log         *slog.Logger
	incarnation string
	conns       []*grpc.ClientConn
	next        atomic.Int64 // index of the controller to try first
	epoch       atomic.Int64 // broker epoch, 0 before registration
	applied     atomic.Uint64
	// shutdown is set once ControlledShutdown was asked: the fence that
	// follows is the one this broker asked for, and registering again
	// would undo it (make it live, electable and an ISR member again).
	shutdown atomic.Bool
	// now is the clock the heartbeat loop reads to tell a stall of this
	// process (time.Now; tests replace it).
	now func() time.Time
}

// New dials (lazily) every controller.
func New(cfg Config, log *slog.Logger) (*Link, error) {
	if len(cfg.Controllers) == 0 {
		return nil, fmt.Errorf("no controller addresses")
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	l := &Link{cfg: cfg, log: log, incarnation: hex.EncodeToString(id[:]), now: time.Now}
	for _, addr := range cfg.Controllers {
		cc, err := grpc.NewClient(addr, grpcopt.Dial()...)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("controller %s: %w", addr, err)
		}
		l.conns = append(l.conns, cc)
	}
	return l, nil
}

// Close closes the connections.
func (l *Link) Close() {
	for _, c := range l.conns {
		c.Close()
	}
}

// Incarnation is this process's registration id; gossip carries it too, so a
// late death notice about an earlier process cannot fence this one.
func (l *Link) Incarnation() string { return l.incarnation }

// BrokerEpoch is the epoch of the current registration (0 before one).
func (l *Link) BrokerEpoch() int64 { return l.epoch.Load() }

// call runs fn against the controllers in turn, starting with the one that
// answered last, until one answers with something other than a transport
// failure or NOT_CONTROLLER. A follower controller passes a broker's call on to the
// Raft leader and names it in a response header: the next call goes to the
// leader directly when it is one of the configured addresses.
func (l *Link) call(ctx context.Context, fn func(c controllerv1grpc.ControllerServiceClient, opts ...grpc.CallOption) error) error {
	var last error
	for i := 0; i < len(l.conns); i++ {
		idx := (int(l.next.Load()) + i) % len(l.conns)
		var hdr grpcmd.MD
		err := rpcerr.FromStatus(fn(controllerv1grpc.NewControllerServiceClient(l.conns[idx]), grpc.Header(&hdr)))
		if err == nil || !errs.IsRetriable(err) {
			l.next.Store(int64(l.leaderIndex(hdr, idx)))
			return err
		}
		last = err
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return last
}

// leaderIndex is the index of the controller hdr names as the leader, or
// idx when it names none of the configured ones.
func (l *Link) leaderIndex(hdr grpcmd.MD, idx int) int {
	v := hdr.Get(metadata.ControllerLeaderHeader)
	if len(v) != 1 {
		return idx
	}
	for i, addr := range l.cfg.Controllers {
		if addr == v[0] {
			return i
		}
	}
	return idx
}

// Register registers the broker, retrying until ctx ends. A refusal (the
// controllers cannot reach this node's gossip yet, after a partition) backs
// off from 300 ms to 5 s, and is logged once per distinct answer and then at
// most every 30 s, not once per attempt.
func (l *Link) Register(ctx context.Context) error {
	pause := 300 * time.Millisecond
	var lastMsg string
	var lastLog time.Time
	for {
		if l.shutdown.Load() {
			// A registration would make a stopping broker live again.
			return fmt.Errorf("the broker is shutting down: not registering again")
		}
		var resp *controllerv1.RegisterBrokerResponse
		err := l.call(ctx, func(c controllerv1grpc.ControllerServiceClient, opts ...grpc.CallOption) error {
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			var err error
			req := &controllerv1.RegisterBrokerRequest{
				BrokerId: l.cfg.BrokerID, GrpcAddr: l.cfg.GRPCAddr, HttpAddr: l.cfg.HTTPAddr, Rack: l.cfg.Rack, IncarnationId: l.incarnation, LogDirId: l.cfg.LogDirID,
			}
			if l.cfg.ClusterID != nil {
				req.ClusterId = l.cfg.ClusterID()
			}
			resp, err = c.RegisterBroker(rctx, req, opts...)
			return err
		})
		if err == nil {
			l.epoch.Store(resp.GetBrokerEpoch())
			l.log.Info("registered with the controller", "broker_epoch", resp.GetBrokerEpoch())
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err() // stopping: not a failure to report
		}
		if msg := err.Error(); msg != lastMsg || time.Since(lastLog) >= 30*time.Second {
			lastMsg, lastLog = msg, time.Now()
			l.log.Warn("broker registration failed; retrying with backoff", "err", err, "next_try_in", pause)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// Heartbeat renews the session until ctx ends; a fenced answer (the
// controller declared this incarnation dead) registers again. Each
// heartbeat carries what unreachable answers (may be nil): the partitions
// whose leader this broker, as follower, cannot reach; and what
// logDirFailed answers (may be nil): whether the log directory failed.
// While it has, the controller keeps the broker fenced, and the broker
// waits for its directory rather than registering again.
//
// A heartbeat whose tick comes more than three intervals after the one
// before (a heartbeat's call to a controller takes at most two) finds that
// this process did not run for a while: stopped, frozen, starved of CPU. unreachable is then given
// the time it ran again, from which its followers' silence counts: its own
// stall is not its leaders' silence.
func (l *Link) Heartbeat(ctx context.Context, unreachable func(resumed time.Time) []*controllerv1.UnreachableLeader, logDirFailed func() bool) {
	t := time.NewTicker(l.cfg.HeartbeatInterval)
	defer t.Stop()
	var prev, resumed time.Time // the previous tick; when the process last ran again after a stall
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := l.now()
		if gap := now.Sub(prev); !prev.IsZero() && gap > 3*l.cfg.HeartbeatInterval {
			resumed = now
			l.log.Warn("heartbeat late: this node did not run for a while (stopped, frozen or starved of CPU); its followers count their leaders' silence from now",
				"since_last_heartbeat", gap.Round(time.Millisecond))
		}
		prev = now
		var resp *controllerv1.BrokerHeartbeatResponse
		req := &controllerv1.BrokerHeartbeatRequest{BrokerId: l.cfg.BrokerID, BrokerEpoch: l.epoch.Load(), AppliedVersion: l.applied.Load()}
		if unreachable != nil {
			req.UnreachableLeaders = unreachable(resumed)
		}
		if logDirFailed != nil {
			req.LogDirFailed = logDirFailed()
		}
		err := l.call(ctx, func(c controllerv1grpc.ControllerServiceClient, opts ...grpc.CallOption) error {
			hctx, cancel := context.WithTimeout(ctx, l.cfg.HeartbeatInterval*2)
			defer cancel()
			var err error
			resp, err = c.BrokerHeartbeat(hctx, req, opts...)
			return err
		})
		switch {
		case err == nil && resp.GetFenced() && req.GetLogDirFailed():
			// Fenced for its own failed directory: registering again
			// would change nothing until the directory works.
		case l.shutdown.Load():
			// Shutting down: stay fenced, as the controlled shutdown left it.
		case errs.Of(err) == errs.StaleBrokerEpoch || errs.Of(err) == errs.BrokerIDNotRegistered || (err == nil && resp.GetFenced()):
			why := "the heartbeat's answer says fenced (the session ran out, or gossip declared this node dead)"
			if err != nil {
				why = err.Error()
			}
			l.log.Warn("broker fenced by the controller; registering again", "reason", why)
			if err := l.Register(ctx); err != nil {
				return
			}
			prev = time.Time{} // the registration's wait is not a stall
		case err != nil && ctx.Err() == nil:
			l.log.Debug("heartbeat failed", "err", err)
		}
	}
}

// Watch follows the metadata stream until ctx ends (through
// libs/metadata/watch: a fresh image from each controller, the next one when
// a stream fails or falls silent), calling onImage with a private copy of
// every new version.
func (l *Link) Watch(ctx context.Context, onImage func(*metadata.Image)) {
	ctrls := make([]watch.Controller, len(l.conns))
	for i, cc := range l.conns {
		ctrls[i] = watch.Controller{Addr: l.cfg.Controllers[i], Client: controllerv1grpc.NewControllerServiceClient(cc)}
	}
	watch.Run(ctx, watch.Config{
		Controllers: ctrls, Start: int(l.next.Load()), NodeID: l.cfg.BrokerID, Logger: l.log,
	}, func(im *metadata.Image) {
		l.applied.Store(uint64(im.Version()))
		onImage(im)
	})
}

// AlterPartition sends ISR changes in one AlterPartition call (an
// isrsender.AlterFunc). It answers each change's state and error in order;
// a partition the controller did not answer is an error of its own.
func (l *Link) AlterPartition(ctx context.Context, changes []partition.ISRChange) ([]partition.State, []error, error) {
	req := &controllerv1.AlterPartitionRequest{BrokerId: l.cfg.BrokerID, BrokerEpoch: l.epoch.Load()}
	for _, c := range changes {
		req.Partitions = append(req.Partitions, &controllerv1.PartitionIsrChange{
			Topic: c.Topic, Partition: c.Partition, LeaderEpoch: c.LeaderEpoch, PartitionEpoch: c.PartitionEpoch, NewIsr: c.ISR,
			NewIsrBrokerEpochs: c.BrokerEpochs})
	}
	var resp *controllerv1.AlterPartitionResponse
	err := l.call(ctx, func(c controllerv1grpc.ControllerServiceClient, opts ...grpc.CallOption) error {
		var err error
		resp, err = c.AlterPartition(ctx, req, opts...)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	type tp struct {
		topic string
		part  int32
	}
	byTP := make(map[tp]*controllerv1.AlterPartitionResult, len(resp.GetPartitions()))
	for _, r := range resp.GetPartitions() {
		byTP[tp{r.GetTopic(), r.GetPartition()}] = r
	}
	states, errors := make([]partition.State, len(changes)), make([]error, len(changes))
	for i, c := range changes {
		r, ok := byTP[tp{c.Topic, c.Partition}]
		switch {
		case !ok:
			errors[i] = fmt.Errorf("%w: %w", partition.ErrISRUnsure, errs.Errorf(errs.UnknownServerError, "AlterPartition did not answer %s-%d", c.Topic, c.Partition))
		case r.GetErrorCode() != 0:
			states[i] = StateOf(r.GetState())
			errors[i] = errs.Errorf(errs.ForCode(errs.Code(r.GetErrorCode())), "%s", r.GetErrorMessage())
		default:
			states[i] = StateOf(r.GetState())
		}
	}
	return states, errors, nil
}

// StateOf converts a partition record to the replica's view.
func StateOf(p *controllerv1.PartitionRecord) partition.State {
	return partition.State{Leader: p.GetLeader(), LeaderEpoch: p.GetLeaderEpoch(), PartitionEpoch: p.GetPartitionEpoch(), Replicas: p.GetReplicas(), ISR: p.GetIsr()}
}

// ControlledShutdown asks the controller to move leadership away, waiting up
// to ctx for it to finish.
func (l *Link) ControlledShutdown(ctx context.Context) (remaining int32, err error) {
	l.shutdown.Store(true)
	err = l.call(ctx, func(c controllerv1grpc.ControllerServiceClient, opts ...grpc.CallOption) error {
		resp, err := c.ControlledShutdown(ctx, &controllerv1.ControlledShutdownRequest{BrokerId: l.cfg.BrokerID, BrokerEpoch: l.epoch.Load()}, opts...)
		remaining = resp.GetRemainingLeaderships()
		return err
	})
	return remaining, err
}

// Conns is a cache of client connections to other brokers by address.
type Conns struct {
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
	opts  []grpc.DialOption
}

// NewConns returns an empty cache dialing with opts.
func NewConns(opts ...grpc.DialOption) *Conns {
	return &Conns{conns: map[string]*grpc.ClientConn{}, opts: opts}
}

// Get returns the connection to addr, dialing it lazily.
func (c *Conns) Get(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc, ok := c.conns[addr]; ok {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, c.opts...)
	if err != nil {
		return nil, err
	}
	c.conns[addr] = cc
	return cc, nil
}

// Close closes every connection.
func (c *Conns) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cc := range c.conns {
		cc.Close()
	}
	c.conns = map[string]*grpc.ClientConn{}
}
