package quorum

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/services/controller/internal/fsm"
	"skein/services/controller/internal/raftstore"
)

// Config configures a Raft node.
type Config struct {
	NodeID int32
	// RaftBindAddr is where the Raft transport listens; default: this node's
	// RaftAddr in Peers (which is what the others dial).
	RaftBindAddr string
	DataDir      string
	Peers        []Peer

	// Raft timings; zero picks hashicorp/raft's defaults (1 s, 1 s, 500 ms).
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// CommitTimeout: how long the leader goes without sending a follower
	// an append when nothing new is written (zero: hashicorp/raft's 50 ms).
	// A follower learns of a commit at the next append; Propose sends one
	// at once, so this bounds only how late the followers hear of other
	// commits (a new leader's first entry, for instance).
	CommitTimeout time.Duration
	// SnapshotThreshold: entries since the last snapshot before a new one
	// (default 8192); SnapshotInterval: how often to check (default 2 min).
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	// WatchBuffer bounds each watcher's queue of deltas (default 1024).
	WatchBuffer int
	Logger      *slog.Logger
	// TLS, when set, puts the Raft transport on mutual TLS with these
	// server and client configurations.
	TLSServer, TLSClient *tls.Config

	// AnnouncedRules, when set, answers the newest placement rule each
	// controller heard from announced it applies (by node id); the leader
	// proposes the newest rule every voter applies (fsm.ProposalRule).
	AnnouncedRules func() map[int32]uint32
	// Fatal is called when this controller cannot apply the Raft log as the
	// others do (an entry of a newer build's placement rule); default: log
	// and exit with status 1. It must not return but in tests: the entry
	// is left unapplied, and the image would go on without it.
	Fatal func(err error)

	// beforeApply, when set (tests), runs before each command reaches the
	// state machine.
	beforeApply func(index uint64)
}

// Node is one controller's Raft member and metadata state.
type Node struct {
	cfg    Config
	log    *slog.Logger
	raft   *raft.Raft
	store  *raftstore.Store
	trans  *raft.NetworkTransport
	guard  *voteGuard // trans as Raft sees it
	byID   map[int32]Peer
	closed sync.Once
	// announce asks announceCommits to tell the followers of a commit now
	// (capacity 1: a burst of proposals makes one announcement).
	announce  chan struct{}
	stop      chan struct{}
	announced chan struct{} // closed when announceCommits returns
	// startIndex is the last log index on disk when the node opened: until
	// it is applied, the image lags what this node already acknowledged.
	startIndex uint64
	logs       raft.LogStore // store, behind a cache of recent entries
	snaps      raft.SnapshotStore
	// fsmIndex is the index of the last entry the state machine has taken
	// (a command, applied or refused, or a snapshot). Raft's AppliedIndex
	// counts entries handed to the state machine's goroutine, which may
	// not have run them yet.
	fsmIndex atomic.Uint64
	// rule is the placement rule of the last proposal (logged when it changes).
	rule atomic.Uint32

	mu      sync.Mutex // guards machine, hub and frozen
	machine *fsm.Machine
	hub     hub
	// frozen is the last copy Image handed out, and what it copied.
	frozen struct {
		of, img *metadata.Image
	}
}

// Open starts the Raft node: it opens (or creates) the stores under
// DataDir, bootstraps the cluster from Peers on first start, and replays
// the snapshot and log on later ones.
func Open(cfg Config) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.WatchBuffer <= 0 {
		cfg.WatchBuffer = 1024
	}
	n := &Node{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "raft"),
		byID:    map[int32]Peer{},
		machine: fsm.New(),
		hub:     hub{subs: map[*Subscription]struct{}{}, buffer: cfg.WatchBuffer},
	}
	var self *Peer
	for i, p := range cfg.Peers {
		n.byID[p.ID] = p
		if p.ID == cfg.NodeID {
			self = &cfg.Peers[i]
		}
	}
	if self == nil {
		return nil, fmt.Errorf("quorum: node %d is not in the peer list %s", cfg.NodeID, FormatPeers(cfg.Peers))
	}
	if cfg.RaftBindAddr == "" {
		cfg.RaftBindAddr = self.RaftAddr
	}
	hl := hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: lineWriter{n.log}, DisableTime: true})

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(strconv.Itoa(int(cfg.NodeID)))
	rc.Logger = hl
	if cfg.HeartbeatTimeout > 0 {
		rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	}
	if cfg.ElectionTimeout > 0 {
		rc.ElectionTimeout = cfg.ElectionTimeout
	}
	if cfg.LeaderLeaseTimeout > 0 {
		rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	}
	if cfg.CommitTimeout > 0 {
		rc.CommitTimeout = cfg.CommitTimeout
	}
	if rc.LeaderLeaseTimeout > rc.HeartbeatTimeout {
		rc.LeaderLeaseTimeout = rc.HeartbeatTimeout
	}
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
		rc.TrailingLogs = min(rc.TrailingLogs, cfg.SnapshotThreshold)
	}
	if cfg.SnapshotInterval > 0 {
		rc.SnapshotInterval = cfg.SnapshotInterval
	}

	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	store, err := raftstore.Open(filepath.Join(cfg.DataDir, "raft"), cfg.Logger)
	if err != nil {
		return nil, err
	}
	n.store = store
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 2, hl)
	if err != nil {
		store.Close()
		return nil, err
	}
	n.snaps = snaps
	advertise, err := net.ResolveTCPAddr("tcp", self.RaftAddr)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("quorum: raft address %q: %w", self.RaftAddr, err)
	}
	var trans *raft.NetworkTransport
	if cfg.TLSServer != nil {
		var stream *tlsStream
		if stream, err = newTLSStream(cfg.RaftBindAddr, advertise, cfg.TLSServer, cfg.TLSClient, n.log); err == nil {
			trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: stream, MaxPool: 3, Timeout: 2 * time.Second, Logger: hl})
		}
	} else {
		trans, err = raft.NewTCPTransportWithLogger(cfg.RaftBindAddr, advertise, 3, 2*time.Second, hl)
	}
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("quorum: raft transport: %w", err)
	}
	n.trans = trans

	if n.startIndex, err = store.LastIndex(); err != nil {
		n.closeStores()
		return nil, err
	}
	existing, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		n.closeStores()
		return nil, err
	}
	_, err = os.Stat(filepath.Join(cfg.DataDir, rejoinMarker))
	catchingUp := err == nil
	if !existing && len(cfg.Peers) > 1 {
		if err := markCatchingUp(cfg.DataDir); err != nil {
			n.closeStores()
			return nil, fmt.Errorf("quorum: %w", err)
		}
		catchingUp = true
	}
	if catchingUp {
		n.log.Info("this controller started on an empty data directory (or has not caught up since): "+
			"until a leader brings it up to date it votes only in a new quorum's first election, "+
			"so that a controller that lost its directory cannot elect one missing what it had acknowledged", "data_dir", cfg.DataDir)
	}
	n.guard = guardVotes(trans, rc.LocalID, cfg.DataDir, catchingUp, func() uint64 {
		last, _ := store.LastIndex()
		if metas, err := snaps.List(); err == nil && len(metas) > 0 {
			last = max(last, metas[0].Index)
		}
		return last
	}, n.log)
	if !existing {
		var servers []raft.Server
		for _, p := range cfg.Peers {
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(strconv.Itoa(int(p.ID))), Address: raft.ServerAddress(p.RaftAddr)})
		}
		if err := raft.BootstrapCluster(rc, store, store, snaps, n.guard, raft.Configuration{Servers: servers}); err != nil {
			n.closeStores()
			return nil, fmt.Errorf("quorum: bootstrap: %w", err)
		}
	}
	// Recent entries are served from memory: the leader reads the entry
	// before each append it sends, and a follower reads back what it just
	// stored to apply it.
	if n.logs, err = raft.NewLogCache(512, store); err != nil {
		n.closeStores()
		return nil, err
	}
	r, err := raft.NewRaft(rc, (*raftFSM)(n), n.logs, store, snaps, n.guard)
	if err != nil {
		n.closeStores()
		return nil, fmt.Errorf("quorum: %w", err)
	}
	n.raft = r
	if existing {
		if f := r.GetConfiguration(); f.Error() == nil {
			if diff := PeersDiffer(f.Configuration().Servers, cfg.Peers); diff != "" {
				n.log.Warn("the --peers list differs from the Raft configuration in the data directory, which is what this controller runs by: "+diff,
					"data_dir", cfg.DataDir)
			}
		}
	}
	n.announce, n.stop, n.announced = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	go n.announceCommits()
	return n, nil
}

// announceCommits appends an empty entry (a Raft barrier) after proposals
// commit. Sending it carries the leader's commit index, so the followers
// apply a proposal, and its watchers see it, one round trip after the
// leader did rather than at the next commit timeout.
func (n *Node) announceCommits() {
	defer close(n.announced)
	for {
		select {
		case <-n.stop:
			return
		case <-n.announce:
		}
		if n.IsLeader() {
			_ = n.raft.Barrier(time.Second).Error() // leadership lost or shut down: nothing to tell
		}
	}
}

func (n *Node) closeStores() {
	if n.guard != nil {
		n.guard.Close()
	} else if n.trans != nil {
		n.trans.Close()
	}
	n.store.Close()
}

// Close shuts Raft down (without handing leadership over; the others elect
// a new leader after their election timeout) and closes the stores.
func (n *Node) Close() error {
	var err error
	n.closed.Do(func() {
		close(n.stop)
		err = n.raft.Shutdown().Error()
		<-n.announced
		n.closeStores()
	})
	return err
}

// ID is this node's id.
func (n *Node) ID() int32 { return n.cfg.NodeID }

// Peers lists the quorum.
func (n *Node) Peers() []Peer { return n.cfg.Peers }

// IsLeader reports whether this node is the Raft leader now.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// LeaderCh signals leadership gained (true) or lost (false); only the
// latest change waits for a slow reader. It has one reader: the liveness
// loop.
func (n *Node) LeaderCh() <-chan bool { return n.raft.LeaderCh() }

// InContact reports whether this node's metadata is current: it leads (a
// leader cut off from the quorum steps down within its lease), or it heard
// from the leader within the last d.
func (n *Node) InContact(d time.Duration) bool {
	switch n.raft.State() {
	case raft.Leader:
		return true
	case raft.Follower:
		return time.Since(n.raft.LastContact()) < d
	}
	return false
}

// Leader answers the leader's id and gRPC address, if one is known.
func (n *Node) Leader() (Peer, bool) {
	_, id := n.raft.LeaderWithID()
	if id == "" {
		return Peer{}, false
	}
	i, err := strconv.Atoi(string(id))
	if err != nil {
		return Peer{}, false
	}
	p, ok := n.byID[int32(i)]
	return p, ok
}

// CaughtUp reports whether this node's image is as recent as the cluster's
// commit it knows of: a leader is known, everything known committed is
// applied, and so is everything that was in the log when the node started
// (after a restart the commit index is only learnt from the leader, so an
// empty image must not pass for the cluster's state).
func (n *Node) CaughtUp() bool {
	if _, ok := n.Leader(); !ok {
		return false
	}
	applied := n.raft.AppliedIndex()
	return applied >= n.raft.CommitIndex() && applied >= n.startIndex && n.drained(applied)
}

// CatchingUp reports whether this controller started on an empty data
// directory and has not yet caught up with a leader (it votes for no
// candidate behind what that leader committed meanwhile).
func (n *Node) CatchingUp() bool { return n.guard.catchingUp() }

// Settled is CaughtUp without the start-index condition: the entries past
// it may have been truncated by a new leader and never come back.
func (n *Node) Settled() bool {
	_, ok := n.Leader()
	applied := n.raft.AppliedIndex()
	return ok && applied >= n.raft.CommitIndex() && n.drained(applied)
}

// drained reports whether the state machine has run every command up to
// applied. Raft marks entries applied once they are queued for the state
// machine; right after a restart thousands may be queued while the image
// still shows the first few. Entries after the last command the machine
// took that are not commands (a new leader's no-op, barriers,
// configuration changes) never reach it, so they are looked up in the log.
func (n *Node) drained(applied uint64) bool {
	taken := n.fsmIndex.Load()
	for i := applied; i > taken; i-- {
		var l raft.Log
		if err := n.logs.GetLog(i, &l); err != nil {
			return true // compacted: it is in the snapshot the machine restored
		}
		if l.Type == raft.LogCommand {
			return false
		}
	}
	return true
}

// State is the Raft state: Follower, Candidate, Leader or Shutdown.
func (n *Node) State() string { return n.raft.State().String() }

// CommitIndex and AppliedIndex are Raft's.
func (n *Node) CommitIndex() uint64  { return n.raft.CommitIndex() }
func (n *Node) AppliedIndex() uint64 { return n.raft.AppliedIndex() }

// Barrier waits until every entry committed before it is applied here: a
// new leader calls it before deciding anything from its image.
func (n *Node) Barrier(timeout time.Duration) error { return n.raft.Barrier(timeout).Error() }

// Snapshot forces a snapshot (tests and operators).
func (n *Node) Snapshot() error { return n.raft.Snapshot().Error() }

// LeadershipTransfer hands leadership to another voter (graceful shutdown).
func (n *Node) LeadershipTransfer() error { return n.raft.LeadershipTransfer().Error() }

// Read runs fn with the current image, under the state lock: fn must be
// quick and must not keep the image.
func (n *Node) Read(fn func(img *metadata.Image)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	fn(n.machine.Image())
}

// Image answers a copy of the current image that nothing changes (the
// machine changes its own image in place, under the state lock): for a
// reader that keeps it, such as the authorizer, which caches per image. A
// copy is made once per version.
func (n *Node) Image() *metadata.Image {
	n.mu.Lock()
	defer n.mu.Unlock()
	cur := n.machine.Image()
	if f := n.frozen; f.of == cur && f.img.Version() == cur.Version() && f.img.ClusterID() == cur.ClusterID() {
		return f.img
	}
	n.frozen.of, n.frozen.img = cur, cur.Clone()
	return n.frozen.img
}

func (n *Node) imageLocked() *controllerv1.MetadataImage { return n.machine.Image().ToProto() }

// Propose commits cmd through Raft and answers what applying it did. Off the
// leader, or when leadership is lost before the commit is known, it answers
// NOT_CONTROLLER (retriable; the entry may still have been committed).
func (n *Node) Propose(ctx context.Context, cmd *controllerv1.Command) (fsm.Result, error) {
	if !n.IsLeader() {
		return fsm.Result{}, errs.Errorf(errs.NotController, "controller %d is not the leader", n.cfg.NodeID)
	}
	// Every entry names the placement rule it is to be applied with.
	cmd.PlacementRule = n.proposalRule()
	data, err := proto.Marshal(cmd)
	if err != nil {
		return fsm.Result{}, errs.Errorf(errs.InvalidRequest, "command: %v", err)
	}
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout <= 0 {
		return fsm.Result{}, errs.Errorf(errs.RequestTimedOut, "no time left to propose")
	}
	f := n.raft.Apply(data, timeout)
	if err := f.Error(); err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
			errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrRaftShutdown):
			return fsm.Result{}, errs.Errorf(errs.NotController, "%v", err)
		case errors.Is(err, raft.ErrEnqueueTimeout):
			return fsm.Result{}, errs.Errorf(errs.RequestTimedOut, "%v", err)
		}
		return fsm.Result{}, errs.Errorf(errs.UnknownServerError, "raft: %v", err)
	}
	select {
	case n.announce <- struct{}{}:
	default: // one is pending already
	}
	res, ok := f.Response().(applyResult)
	if !ok {
		return fsm.Result{}, errs.Errorf(errs.UnknownServerError, "raft answered %T", f.Response())
	}
	return res.Result, res.err
}

// proposalRule answers the placement rule to propose with: the newest one
// every voter (of --peers and of the Raft configuration) applies.
func (n *Node) proposalRule() uint32 {
	voters := make([]int32, 0, len(n.cfg.Peers))
	for _, p := range n.cfg.Peers {
		voters = append(voters, p.ID)
	}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			if id, err := strconv.ParseInt(string(s.ID), 10, 32); err == nil && !slices.Contains(voters, int32(id)) {
				voters = append(voters, int32(id))
			}
		}
	}
	var announced map[int32]uint32
	if n.cfg.AnnouncedRules != nil {
		announced = n.cfg.AnnouncedRules()
	}
	rule := fsm.ProposalRule(voters, announced)
	if old := n.rule.Swap(rule + 1); old != rule+1 { // stored plus one: 0 is "none yet"
		n.log.Info("new partitions are placed by the newest rule every controller applies",
			"placement_rule", rule, "this_build_applies", fsm.MaxPlacementRule, "announced", announced)
	}
	return rule
}

type applyResult struct {
	fsm.Result
	err error
}

// raftFSM is the Node seen as a raft.FSM.
type raftFSM Node

func (f *raftFSM) Apply(l *raft.Log) any {
	n := (*Node)(f)
	// Recorded last, after the state lock is released: whoever sees the
	// index sees the image with the entry in it.
	defer n.fsmIndex.Store(l.Index)
	var cmd controllerv1.Command
	if err := proto.Unmarshal(l.Data, &cmd); err != nil {
		return applyResult{err: errs.Errorf(errs.InvalidRequest, "entry %d is not a command: %v", l.Index, err)}
	}
	if n.cfg.beforeApply != nil {
		n.cfg.beforeApply(l.Index)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	res, err := n.machine.Apply(l.Index, &cmd)
	if errors.Is(err, fsm.ErrNewerRule) {
		err = fmt.Errorf("%w; start this controller with a build as new as the one that wrote the entry", err)
		if n.cfg.Fatal != nil {
			n.cfg.Fatal(err)
		} else {
			n.log.Error("stopping: this controller cannot apply the Raft log as the others do", "err", err)
			os.Exit(1)
		}
		return applyResult{err: errs.Errorf(errs.UnknownServerError, "%v", err)}
	}
	if len(res.Records) > 0 {
		n.hub.publish(&controllerv1.MetadataDelta{Version: l.Index, Records: res.Records})
	}
	if err != nil && errs.Of(err) == errs.UnknownServerError {
		n.log.Error("applying a command failed", "index", l.Index, "command", fsm.Describe(&cmd), "err", err)
	}
	for _, r := range res.Records {
		// Only set, in the record that empties the ISR: nothing else
		// changes such a partition until its replica or an election.
		if lost := r.GetPartition().GetLostIsrReplica(); lost != nil {
			n.log.Warn("partition offline: its last in-sync replica lost its logs", "topic", r.GetPartition().GetTopic(), "partition", r.GetPartition().GetPartition(),
				"broker", lost.GetBroker(), "lost_log_dir_id", lost.GetLogDirId(), "index", l.Index)
		}
	}
	return applyResult{Result: res, err: err}
}

func (f *raftFSM) Snapshot() (raft.FSMSnapshot, error) {
	n := (*Node)(f)
	n.mu.Lock()
	img := n.imageLocked()
	n.mu.Unlock()
	b, err := proto.Marshal(img)
	if err != nil {
		return nil, err
	}
	return snapshot(b), nil
}

func (f *raftFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	var img controllerv1.MetadataImage
	if err := proto.Unmarshal(b, &img); err != nil {
		return fmt.Errorf("quorum: snapshot is not a metadata image: %w", err)
	}
	m, err := fsm.Restore(&img)
	if err != nil {
		return err
	}
	n := (*Node)(f)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.machine = m
	n.hub.reset(img.GetVersion())
	// Raft restores the newest snapshot in the store: at startup, and when
	// the leader installs one, which is written to the store first.
	if metas, err := n.snaps.List(); err == nil && len(metas) > 0 {
		n.fsmIndex.Store(max(n.fsmIndex.Load(), metas[0].Index))
	}
	return nil
}

type snapshot []byte

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := io.Copy(sink, bytes.NewReader(s)); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (snapshot) Release() {}

// lineWriter sends hclog's lines to slog.
type lineWriter struct{ l *slog.Logger }

func (w lineWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	switch {
	case strings.Contains(line, "[ERROR]"):
		w.l.Error(line)
	case strings.Contains(line, "[WARN]") && (strings.Contains(line, "last-leader-id= ") || strings.HasSuffix(line, "last-leader-id=")):
		// The first election of a node that has known no leader yet
		// (every start): nothing went wrong.
		w.l.Info(line)
	case strings.Contains(line, "[WARN]"):
		w.l.Warn(line)
	default:
		w.l.Info(line)
	}
	return len(p), nil
}
