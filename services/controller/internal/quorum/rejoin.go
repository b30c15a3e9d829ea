package quorum

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"skein/libs/durable"
)

// A controller started on an empty data directory cannot tell a new quorum
// from one whose members already committed entries it has lost with its
// disk. Raft counts on a voter keeping what it acknowledged: a voter that
// lost its log and votes for a lagging candidate can make with it a
// majority that elects the candidate, and the entries only the third
// controller holds are then overwritten. So a controller that started on an
// empty directory (and until it has caught up, across restarts: the marker
// file says so) refuses every vote but those of a new quorum's first
// election, whose candidates hold nothing but the bootstrap configuration
// (once it has seen that the quorum holds more, not those either), and
// those of candidates at least as up to date as what a leader had
// committed when first heard from, until a leader has brought its log up
// to that; nor does it stand for election itself then (its own vote would
// count for it). The other two controllers elect a leader
// without it meanwhile, and it catches up from that leader as any follower
// does. A controller that leads (a new quorum's first leader) is caught up.

// rejoinMarker names the file present while a controller that started on
// an empty data directory has not caught up.
const rejoinMarker = "catching-up"

// bootstrapIndex is the index of the configuration entry a new quorum's
// members write when they bootstrap: a candidate whose log ends there
// holds nothing anyone committed.
const bootstrapIndex = 1

// catchUp is the pure state of a controller catching up after starting on
// an empty directory.
type catchUp struct {
	// target is the index the log must reach (0: no leader heard from
	// yet); targetTerm the term of the append or snapshot it was learnt
	// from (a later leader's replaces it: a deposed leader cut off from
	// the others may not know what the quorum committed since).
	target, targetTerm uint64
	// history: some controller holds more than the bootstrap entry, so
	// this is not a new quorum (two controllers that both lost their
	// directories must not elect one of them).
	history bool
}

// vote reports whether a vote (or pre-vote) request from a candidate whose
// log ends at lastLogIndex, of lastLogTerm, may reach Raft: a new
// quorum's first election, or a candidate at least as up to date as the
// target (its entries of the target's term came from that term's leader,
// which held the target; a later term's leader held everything committed
// before it).
func (c *catchUp) vote(lastLogIndex, lastLogTerm uint64) bool {
	if lastLogIndex <= bootstrapIndex {
		return !c.history
	}
	return c.target != 0 && (lastLogTerm > c.targetTerm || lastLogTerm == c.targetTerm && lastLogIndex >= c.target)
}

// candidate takes what a vote request says of the candidate's log; it
// reports whether the state changed.
func (c *catchUp) candidate(lastLogIndex uint64) bool {
	if lastLogIndex <= bootstrapIndex || c.history {
		return false
	}
	c.history = true
	return true
}

// learn takes what a leader's append says of its log: term, the last index
// it sends or refers to, and its commit index. The first append of a
// leader's term refers to the end of its log when it was elected, which
// holds everything committed before. It reports whether the target moved.
func (c *catchUp) learn(term, last, commit uint64) bool {
	if c.target != 0 && term <= c.targetTerm {
		return false
	}
	c.target, c.targetTerm, c.history = max(last, commit), term, true
	return true
}

// snapshot takes a leader's snapshot ending at index: it can only raise a
// target an append set (a snapshot ends wherever the leader last took
// one, below what it has committed since).
func (c *catchUp) snapshot(index uint64) bool {
	if c.target == 0 || index <= c.target {
		return false
	}
	c.target, c.history = index, true
	return true
}

// done reports whether a log ending at last has caught up.
func (c *catchUp) done(last uint64) bool {
	return c.target != 0 && last >= c.target
}

// voteGuard is the Raft transport of a controller catching up: it answers
// the vote requests catchUp refuses and hands everything else to Raft.
type voteGuard struct {
	*raft.NetworkTransport
	in     <-chan raft.RPC
	out    chan raft.RPC
	stop   chan struct{}
	header raft.RPCHeader
	// last answers the index this controller's log (or snapshot) ends at.
	last   func() uint64
	marker string
	log    *slog.Logger

	mu       sync.Mutex
	active   bool
	state    catchUp
	leading  atomic.Bool // set once this controller sends appends: it leads
	stopOnce sync.Once
	done     chan struct{} // closed when run returns
}

// guardVotes wraps trans. active: the controller starts catching up (its
// directory was empty, or it had not caught up when it stopped).
func guardVotes(trans *raft.NetworkTransport, self raft.ServerID, dataDir string, active bool, last func() uint64, log *slog.Logger) *voteGuard {
	g := &voteGuard{
		done:             make(chan struct{}),
		NetworkTransport: trans,
		in:               trans.Consumer(),
		out:              make(chan raft.RPC),
		stop:             make(chan struct{}),
		header:           raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(self), Addr: []byte(trans.LocalAddr())},
		last:             last,
		marker:           filepath.Join(dataDir, rejoinMarker),
		log:              log,
		active:           active,
	}
	if active {
		g.state = readMarker(g.marker)
	}
	go g.run()
	return g
}

// Consumer is what Raft reads its requests from.
func (g *voteGuard) Consumer() <-chan raft.RPC { return g.out }

// Close stops handing requests over (and waits for the one in hand),
// then closes the transport.
func (g *voteGuard) Close() error {
	g.stopOnce.Do(func() { close(g.stop) })
	<-g.done
	return g.NetworkTransport.Close()
}

// RequestVote asks target for its vote, unless this controller must not
// stand: then the answer is a refusal, and it cannot win.
func (g *voteGuard) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if !g.mayStand(args.LastLogIndex, args.LastLogTerm) {
		*resp = raft.RequestVoteResponse{RPCHeader: g.header, Term: args.Term}
		return nil
	}
	return g.NetworkTransport.RequestVote(id, target, args, resp)
}

// RequestPreVote is RequestVote's pre-vote.
func (g *voteGuard) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if !g.mayStand(args.LastLogIndex, args.LastLogTerm) {
		*resp = raft.RequestPreVoteResponse{RPCHeader: g.header, Term: args.Term}
		return nil
	}
	return g.NetworkTransport.RequestPreVote(id, target, args, resp)
}

// AppendEntries sends a leader's append: a controller that sends them
// leads, and is caught up.
func (g *voteGuard) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if !g.leading.Load() {
		g.leading.Store(true)
		g.mu.Lock()
		if g.active {
			g.finish("this controller leads")
		}
		g.mu.Unlock()
	}
	return g.NetworkTransport.AppendEntries(id, target, args, resp)
}

// mayStand reports whether this controller, its log ending at lastLogIndex
// of lastLogTerm, may ask for votes: by the rule of the votes it gives.
func (g *voteGuard) mayStand(lastLogIndex, lastLogTerm uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.active || g.caughtUp() || g.state.vote(lastLogIndex, lastLogTerm)
}

// catchingUp reports whether the catch-up is still on.
func (g *voteGuard) catchingUp() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.active
}

func (g *voteGuard) run() {
	defer close(g.done)
	for {
		var rpc raft.RPC
		select {
		case rpc = <-g.in:
		case <-g.stop:
			return
		}
		if g.refuse(rpc) {
			continue
		}
		select {
		case g.out <- rpc:
		case <-g.stop:
			return
		}
	}
}

// refuse answers rpc itself, refused, when it is a vote the controller
// must not give; it learns the catch-up target from a leader's requests.
func (g *voteGuard) refuse(rpc raft.RPC) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.active {
		return false
	}
	switch req := rpc.Command.(type) {
	case *raft.RequestVoteRequest:
		if g.state.candidate(req.LastLogIndex) {
			g.save()
		}
		if g.caughtUp() || g.state.vote(req.LastLogIndex, req.LastLogTerm) {
			return false
		}
		rpc.Respond(&raft.RequestVoteResponse{RPCHeader: g.header, Term: req.Term}, nil)
		return true
	case *raft.RequestPreVoteRequest:
		if g.state.candidate(req.LastLogIndex) {
			g.save()
		}
		if g.caughtUp() || g.state.vote(req.LastLogIndex, req.LastLogTerm) {
			return false
		}
		rpc.Respond(&raft.RequestPreVoteResponse{RPCHeader: g.header, Term: req.Term}, nil)
		return true
	case *raft.AppendEntriesRequest:
		if g.state.learn(req.Term, req.PrevLogEntry+uint64(len(req.Entries)), req.LeaderCommitIndex) {
			g.save()
		}
		g.caughtUp()
	case *raft.InstallSnapshotRequest:
		if g.state.snapshot(req.LastLogIndex) {
			g.save()
		}
		g.caughtUp()
	}
	return false
}

// caughtUp ends the catch-up once the log has reached the target.
func (g *voteGuard) caughtUp() bool {
	last := g.last()
	if !g.state.done(last) {
		return false
	}
	g.finish("caught up with the leader", "index", last, "target", g.state.target)
	return true
}

// finish ends the catch-up; g.mu is held.
func (g *voteGuard) finish(why string, args ...any) {
	if err := os.Remove(g.marker); err != nil && !errors.Is(err, os.ErrNotExist) {
		// Still marked: after a restart it catches up again first.
		g.log.Warn("could not remove the catching-up marker", "path", g.marker, "err", err)
	}
	g.active = false
	g.log.Info("caught up after starting on an empty data directory: voting again ("+why+")", args...)
}

// save writes the target into the marker, so that a restart before the
// end of the catch-up does not learn a lower one from a later message.
func (g *voteGuard) save() {
	if err := writeMarker(g.marker, g.state); err != nil {
		// Learnt again after a restart, from the leader's next term.
		g.log.Warn("could not save the catch-up target", "path", g.marker, "err", err)
	}
}

// markCatchingUp writes the marker, on disk before the bootstrap is.
func markCatchingUp(dataDir string) error {
	return writeMarker(filepath.Join(dataDir, rejoinMarker), catchUp{})
}

// writeMarker writes the marker with c's state, synced, whole or not at
// all.
func writeMarker(path string, c catchUp) error {
	history := 0
	if c.history {
		history = 1
	}
	return durable.WriteFile(path, fmt.Appendf(nil, "%d %d %d\n", c.target, c.targetTerm, history))
}

// readMarker reads the state a marker holds (none if it cannot be read).
func readMarker(path string) catchUp {
	var c catchUp
	b, err := os.ReadFile(path)
	if err != nil {
		return c
	}
	var history int
	if _, err := fmt.Sscanf(string(b), "%d %d %d", &c.target, &c.targetTerm, &history); err != nil {
		return catchUp{}
	}
	c.history = history == 1
	return c
}
