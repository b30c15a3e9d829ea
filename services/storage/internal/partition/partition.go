package partition

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"skein/libs/errs"
	"skein/libs/record"
	"skein/services/storage/internal/isr"
	"skein/services/storage/internal/producer"
)

// Log is what a replica needs of its partition log; libs/log implements it.
// The replica is the log's only writer.
// Appended is what the log stored of one batch a leader appended.
type Appended struct {
	First, Last record.Offset
	// Uncompressed is what the batch would take with its records
	// decompressed (the log decodes them to validate them).
	Uncompressed int
	// LogAppendTime is the time stamped on the batch under
	// message.timestamp.type=LogAppendTime, -1 otherwise.
	LogAppendTime int64
}

type Log interface {
	LogEndOffset() record.Offset
	LogStartOffset() record.Offset
	// AppendAsLeader assigns offsets to one batch and stamps the leader
	// epoch (and, under message.timestamp.type=LogAppendTime, the time).
	AppendAsLeader(b record.Batch, epoch record.Epoch) (Appended, error)
	// AppendAsFollower appends batches that carry the leader's offsets.
	AppendAsFollower(batches []byte) error
	// SyncIfDue applies the topic's flush.messages to the offsets below
	// next, which an append published: it returns once they are fsynced
	// when the policy asks for it. The appends do not wait for the disk;
	// the partition calls this without its lock, before it counts them
	// written.
	SyncIfDue(next record.Offset) error
	// Read returns whole batches from the one holding offset, up to maxBytes
	// (at least one batch), none at or beyond maxOffset.
	Read(offset record.Offset, maxBytes int, maxOffset record.Offset) ([]byte, error)
	// ReadInto is Read into dst's spare capacity when it has room (a new
	// buffer when not); the batches are the result, not dst. A positive
	// maxRecords also ends the read with the batch holding
	// offset+maxRecords-1.
	ReadInto(dst []byte, offset record.Offset, maxBytes int, maxOffset record.Offset, maxRecords int) ([]byte, error)
	// Truncate removes every record at or above offset.
	Truncate(offset record.Offset) error
	// TruncateFullyAndStartAt empties the log and restarts it at offset.
	TruncateFullyAndStartAt(offset record.Offset) error
	// AdvanceLogStart moves the log start offset up to offset (at most the
	// LEO; a lower one changes nothing): reads below it are refused, and
	// the segments wholly below it go at the next retention pass. It waits
	// for nothing but the log's writer (never for a compaction).
	AdvanceLogStart(offset record.Offset) error
	// EndOffsetFor answers the largest epoch <= epoch and where it ends
	// (the LEO for the latest); -1, -1 for an epoch newer than every
	// known one, or when the log knows none.
	EndOffsetFor(epoch record.Epoch) (record.Epoch, record.Offset)
	// LatestEpoch is the newest epoch of the leader-epoch cache: the last
	// batch's, or one assigned since; -1 when there is none.
	LatestEpoch() record.Epoch
	// AssignEpoch records that epoch starts at the LEO, as a new leader
	// does before it appends (an older epoch changes nothing); a
	// truncation at the LEO drops an entry no batch followed.
	AssignEpoch(epoch record.Epoch) error
	// Failed reports that a write or fsync failed: what the log holds past
	// its last good sync is not to be counted on until it is reopened.
	Failed() bool
	// DurableEnd is where the leader counts its own log toward the HW:
	// the LEO, or under flush.messages=1 the end of what is fsynced.
	DurableEnd() record.Offset
	// OffsetForTimestamp is the first offset whose timestamp >= ts.
	OffsetForTimestamp(ts int64) (offset record.Offset, timestamp int64, ok bool)
}

// ISRProposer sends a leader's ISR change to the controller (AlterPartition).
// ProposeISR must not block and must not call done before it returns (the
// replica holds its lock while proposing); done is called once, later, with
// the state the controller committed, or its refusal (with the state as it
// stands), or an error wrapping ErrISRNotSent (replaced by a newer change
// for the partition before it was sent) or ErrISRUnsure (no verdict: the
// call failed or went unanswered). A proposer that stopped (the node is
// closing) may drop it.
type ISRProposer interface {
	ProposeISR(change ISRChange, done func(State, error))
}

// The answers to an ISR change that carry no verdict from the controller.
var (
	// ErrISRNotSent: the change was replaced by a newer one for the same
	// partition before it was sent; it was never committed.
	ErrISRNotSent = errors.New("superseded by a newer ISR change for the partition before it was sent")
	// ErrISRUnsure: the call failed or went unanswered, so the controller
	// may have committed the change.
	ErrISRUnsure = errors.New("no verdict from the controller on the ISR change")
)

// ISRChange is one leader's proposed ISR, at the epochs it knows.
type ISRChange struct {
	Topic          string
	Partition      int32
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
	// BrokerEpochs names, for each member of ISR in order, the broker
	// epoch the leader saw it fetch at (0 for the leader itself, or not
	// known): the controller refuses a member registered since at another.
	BrokerEpochs []int64
}

// State is the partition as the controller's metadata has it.
type State struct {
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
}

// Config is the replica's identity and the topic configs it enforces.
type Config struct {
	Topic     string
	Partition int32
	Self      int32
	// MinInsyncReplicas refuses acks=all produces when the ISR is smaller.
	MinInsyncReplicas int
	MaxMessageBytes   int
	// Recompress is set when the topic's compression.type names a codec
	// (not "producer"): the leader stores producers' batches in Compression,
	// re-encoding those that arrive in another codec.
	Recompress  bool
	Compression record.Compression
	// ReplicaLagMax is replica.lag.time.max.ms.
	ReplicaLagMax time.Duration
	// ISRChanged, if set, is told of every change of this leader's ISR,
	// its own proposals' and the controller's (for metrics). It is called
	// with the replica's lock held.
	ISRChanged func(shrink bool)
	// Compacted is set when the topic's cleanup.policy lacks delete:
	// DeleteRecords is refused (POLICY_VIOLATION), as Kafka refuses it.
	Compacted bool
	// Truncated, if set, is called (without the replica's lock) after the
	// log was cut at either end: a follower truncated it (the recovery
	// point fell) or this leader deleted records before an offset (the
	// log start rose), and the node saves its offsets and producer state
	// at once, before the follower appends again: a producer snapshot
	// from before a cut, once the log grew back past it, would restore
	// the state of records the log no longer holds. (A follower's fetcher
	// saves the log starts it took from its leader once per round.)
	Truncated func()
}

// Role of this replica.
type Role int

// Roles.
const (
	None Role = iota
	Leader
	Follower
)

type follower struct {
	// brokerEpoch: the registration of the follower's last fetch that
	// named one.
	brokerEpoch int64
	leo         record.Offset
	// logStart is the log start offset of the follower's last fetch (-1
	// until it fetched from this leader).
	logStart     record.Offset
	lastCaughtUp time.Time
	prev         isr.FetchState
}

// waiter is an acks=all produce in purgatory, answered when the HW passes
// its last offset.
type waiter struct {
	next record.Offset // HW must reach this
	done chan error    // buffered, one value
}

// Partition is one replica of one partition. mu guards every field below it;
// the log is written only with mu held and read without it.
type Partition struct {
	log      Log
	proposer ISRProposer
	now      func() time.Time

	mu   sync.Mutex
	cfg  Config
	role Role
	st   State
	// closed: taken out of service for good; Apply and ISR answers that
	// arrive later change nothing.
	closed bool
	// 0 <= hw <= LEO. Monotonic while leader; a follower takes min(leader HW, LEO).
	hw record.Offset
	// leaderEpochStart is the LEO when this replica became leader of st.LeaderEpoch.
	leaderEpochStart record.Offset
	followers        map[int32]*follower
	// pendingISR is an ISR change sent to the controller and not settled:
	// not answered, or answered without a verdict (the call failed or timed
	// out, so the controller may have committed it). The HW counts its
	// members until a verdict, or a newer partition state, settles it.
	pendingISR []int32
	// pendingID names the proposal pendingISR holds, so that the answer of
	// an older one cannot settle it; pendingUnsure is set when its answer
	// had no verdict, and MaybeShrinkISR sends it again.
	pendingID     uint64
	pendingUnsure bool
	pendingChange ISRChange
	// expandAfter: no expansion is proposed before it (set by a refused one).
	expandAfter  time.Time
	nextProposal uint64
	producers    *producer.State
	// aborted is the aborted-transaction index, in marker order.
	aborted []AbortedTxn
	// unreplicated are the transactions whose marker is appended but not
	// yet below the HW (Kafka's unreplicatedTxns): they hold the last
	// stable offset until the HW passes their marker, so that what a
	// read_committed reader is shown never depends on a marker a new
	// leader might not have.
	unreplicated []unreplicatedTxn
	// lastSnap is the last producer snapshot taken (SnapshotProducers):
	// a cut of a transaction marker restores it and replays the log after
	// it, not the whole log.
	lastSnap ProducerSnapshot
	waiters  []*waiter
	// hwWakers are woken (and forgotten) the next time the HW moves;
	// leoWakers when the LEO does.
	hwWakers, leoWakers map[*Waker]struct{}
	// startMoved, unless nil, is closed (and cleared) when the low
	// watermark may have moved: a follower's log start, the ISR or the
	// role changed. DeleteRecords waits on it.
	startMoved chan struct{}
}

// New wraps an open log. The replica has no role until Apply gives it one.
func New(cfg Config, log Log, hw record.Offset, producers *producer.State, proposer ISRProposer, now func() time.Time) *Partition {
	if hw > log.LogEndOffset() {
		hw = log.LogEndOffset()
	}
	if hw < log.LogStartOffset() {
		hw = log.LogStartOffset()
	}
	return &Partition{
		log: log, proposer: proposer, now: now,
		cfg: cfg, hw: hw, producers: producers,
		followers: map[int32]*follower{},
	}
}

// SetConfig changes the enforced topic configs.
func (p *Partition) SetConfig(cfg Config) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cfg.Topic, cfg.Partition, cfg.Self = p.cfg.Topic, p.cfg.Partition, p.cfg.Self
	p.cfg = cfg
}

// Snapshot is a consistent view for answers and metrics.
type Snapshot struct {
	Role           Role
	State          State
	HW, LEO, Start record.Offset
	LSO            record.Offset
	// Followers' LEOs (leader only).
	FollowerLEO map[int32]record.Offset
}

// Snapshot returns the replica's current positions.
func (p *Partition) Snapshot() Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Snapshot{Role: p.role, State: p.st, HW: p.hw, LEO: p.log.LogEndOffset(), Start: p.log.LogStartOffset(), LSO: p.lsoLocked()}
	if p.role == Leader {
		s.FollowerLEO = map[int32]record.Offset{}
		for id, f := range p.followers {
			s.FollowerLEO[id] = f.leo
		}
	}
	return s
}

// ReplicaLEO is one replica's log end offset as the leader knows it.
type ReplicaLEO struct {
	Replica int32
	LEO     record.Offset
}

// ReplicaLEOs answers, on the leader, its own LEO and each follower's as of
// its latest fetch, by replica id; a follower that has not fetched since
// this replica became leader is left out. A follower answers nil.
func (p *Partition) ReplicaLEOs() []ReplicaLEO {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role != Leader {
		return nil
	}
	out := []ReplicaLEO{{Replica: p.cfg.Self, LEO: p.log.LogEndOffset()}}
	for id, f := range p.followers {
		if f.leo >= 0 {
			out = append(out, ReplicaLEO{Replica: id, LEO: f.leo})
		}
	}
	slices.SortFunc(out, func(a, b ReplicaLEO) int { return int(a.Replica) - int(b.Replica) })
	return out
}

// unreplicatedTxn is an ended transaction's first offset and its marker's.
type unreplicatedTxn struct{ first, marker record.Offset }

// lsoLocked is the last stable offset: the first offset of the oldest
// transaction that is open, or ended by a marker the HW has not passed,
// below the HW, but never below the log start (retention may have deleted
// where that transaction began, as in Kafka). Ended transactions whose
// marker the HW passed are forgotten here.
func (p *Partition) lsoLocked() record.Offset {
	first := record.Offset(p.producers.FirstUnstableOffset()) // -1: none open
	kept := p.unreplicated[:0]
	for _, u := range p.unreplicated {
		if u.marker >= p.hw {
			kept = append(kept, u)
			if first < 0 || u.first < first {
				first = u.first
			}
		}
	}
	clear(p.unreplicated[len(kept):])
	p.unreplicated = kept
	if first >= 0 && first < p.hw {
		return max(first, p.log.LogStartOffset())
	}
	return p.hw
}

// Apply takes the controller's state for this partition and makes the
// replica leader, follower or neither. It answers whether the replica became
// (or stays) a follower of a new leader epoch, which the caller turns into a
// fetcher change. A state older than the one held is ignored.
func (p *Partition) Apply(st State) (becameFollower bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	if st.LeaderEpoch < p.st.LeaderEpoch || (st.LeaderEpoch == p.st.LeaderEpoch && st.PartitionEpoch < p.st.PartitionEpoch) {
		return false
	}
	// The ISR or the role may change: a DeleteRecords waiting for the low
	// watermark looks again.
	p.notifyStartLocked()
	newEpoch := st.LeaderEpoch > p.st.LeaderEpoch || p.role == None
	settles := st.LeaderEpoch > p.st.LeaderEpoch || st.PartitionEpoch > p.st.PartitionEpoch
	isrBefore := p.st.ISR
	p.st = State{Leader: st.Leader, LeaderEpoch: st.LeaderEpoch, PartitionEpoch: st.PartitionEpoch,
		Replicas: slices.Clone(st.Replicas), ISR: slices.Clone(st.ISR)}
	if settles {
		// A newer state settles a pending ISR change: it either holds it
		// (committed) or makes it stale (the controller refuses a change
		// made at an older partition epoch). The same state again, as
		// every metadata image brings it, settles nothing: the change may
		// still be committed, and until then the HW counts its members.
		// (The HW is moved below, over the new ISR.)
		p.pendingISR, p.pendingUnsure = nil, false
	}
	switch {
	case st.Leader == p.cfg.Self && newEpoch:
		if len(isrBefore) > 0 {
			// Elected by the controller, which dropped the old leader (or
			// others) from the ISR with it: a shrink this leader counts.
			p.countISRChangeLocked(isrBefore, intersect(isrBefore, st.ISR))
		}
		p.becomeLeaderLocked()
	case st.Leader == p.cfg.Self:
		// Same epoch: an ISR change committed. The HW may move (a shrink).
		p.countISRChangeLocked(isrBefore, st.ISR)
		p.maybeAdvanceHWLocked()
		p.completeWaitersLocked()
	case slices.Contains(st.Replicas, p.cfg.Self):
		wasFollowerOfEpoch := p.role == Follower && !newEpoch
		p.role = Follower
		p.failWaitersLocked(errs.Errorf(errs.NotLeaderOrFollower, "%s-%d: leader is now broker %d", p.cfg.Topic, p.cfg.Partition, st.Leader))
		p.notifyHWLocked() // readers parked here read again, and are told
		return !wasFollowerOfEpoch
	default:
		p.role = None
		p.failWaitersLocked(errs.Errorf(errs.NotLeaderOrFollower, "%s-%d: broker %d no longer hosts this partition", p.cfg.Topic, p.cfg.Partition, p.cfg.Self))
		p.notifyHWLocked()
	}
	return false
}

// intersect answers the members of a that are in b.
func intersect(a, b []int32) []int32 {
	return slices.DeleteFunc(slices.Clone(a), func(r int32) bool { return !slices.Contains(b, r) })
}

// countISRChangeLocked tells ISRChanged of a leader's ISR going from
// before to after: whoever changed it (this leader's proposal, or the
// controller fencing a member), once, when the state that holds it is
// applied.
func (p *Partition) countISRChangeLocked(before, after []int32) {
	if p.cfg.ISRChanged == nil {
		return
	}
	if slices.ContainsFunc(before, func(r int32) bool { return !slices.Contains(after, r) }) {
		p.cfg.ISRChanged(true)
	}
	if slices.ContainsFunc(after, func(r int32) bool { return !slices.Contains(before, r) }) {
		p.cfg.ISRChanged(false)
	}
}

func (p *Partition) becomeLeaderLocked() {
	p.role = Leader
	// The new epoch starts at the LEO in the epoch cache before anything
	// is appended in it (Kafka's epoch start offset): a follower holding
	// batches of an epoch this replica never got — one its predecessor led
	// briefly — is then told where the epoch before it ends here, and cuts
	// only what follows. Without it the leader could not say, and the
	// follower would fall back on its HW. A failure marks the log failed:
	// appends are refused and the node leaves the ISRs.
	_ = p.log.AssignEpoch(record.Epoch(p.st.LeaderEpoch))
	p.leaderEpochStart = p.log.LogEndOffset()
	now := p.now()
	p.followers = map[int32]*follower{}
	for _, r := range p.st.Replicas {
		if r == p.cfg.Self {
			continue
		}
		// ISR members get the benefit of the doubt for one lag period
		// (Kafka does the same), others start never caught up.
		f := &follower{leo: -1, logStart: -1}
		if slices.Contains(p.st.ISR, r) {
			f.lastCaughtUp = now
		}
		p.followers[r] = f
	}
	p.maybeAdvanceHWLocked()
}

// checkLeaderLocked refuses a request for a replica that does not lead, or
// that carries another leader epoch (-1 skips the epoch check).
func (p *Partition) checkLeaderLocked(epoch int32) error {
	if p.role != Leader {
		return errs.Errorf(errs.NotLeaderOrFollower, "broker %d does not lead %s-%d (leader %d)", p.cfg.Self, p.cfg.Topic, p.cfg.Partition, p.st.Leader)
	}
	switch {
	case epoch < 0 || epoch == p.st.LeaderEpoch:
		return nil
	case epoch < p.st.LeaderEpoch:
		return errs.Errorf(errs.FencedLeaderEpoch, "%s-%d: leader epoch %d is older than %d", p.cfg.Topic, p.cfg.Partition, epoch, p.st.LeaderEpoch)
	default:
		return errs.Errorf(errs.UnknownLeaderEpoch, "%s-%d: leader epoch %d is newer than %d", p.cfg.Topic, p.cfg.Partition, epoch, p.st.LeaderEpoch)
	}
}

// maximalISRLocked is the ISR the HW is computed over: the committed ISR plus
// members a pending expansion adds (a pending shrink counts only once
// committed), so the HW never passes a replica the controller still counts.
func (p *Partition) maximalISRLocked() []isr.ReplicaID {
	out := make([]isr.ReplicaID, 0, len(p.st.ISR)+1)
	for _, r := range p.st.ISR {
		out = append(out, isr.ReplicaID(r))
	}
	for _, r := range p.pendingISR {
		if !slices.Contains(p.st.ISR, r) {
			out = append(out, isr.ReplicaID(r))
		}
	}
	return out
}

func (p *Partition) maybeAdvanceHWLocked() {
	if p.role != Leader {
		return
	}
	leo := map[isr.ReplicaID]isr.Offset{isr.ReplicaID(p.cfg.Self): isr.Offset(p.log.DurableEnd())}
	for id, f := range p.followers {
		if f.leo >= 0 {
			leo[isr.ReplicaID(id)] = isr.Offset(f.leo)
		}
	}
	members := p.maximalISRLocked()
	if !slices.Contains(members, isr.ReplicaID(p.cfg.Self)) {
		members = append(members, isr.ReplicaID(p.cfg.Self))
	}
	if hw, moved := isr.Advance(isr.Offset(p.hw), leo, members); moved {
		p.hw = record.Offset(hw)
		p.notifyHWLocked()
	}
}

func (p *Partition) completeWaitersLocked() {
	kept := p.waiters[:0]
	for _, w := range p.waiters {
		if p.hw < w.next {
			kept = append(kept, w)
			continue
		}
		if len(p.st.ISR) < p.cfg.MinInsyncReplicas {
			w.done <- errs.Errorf(errs.NotEnoughReplicasAfterAppend, "%s-%d: written, but the ISR %v fell below min.insync.replicas=%d", p.cfg.Topic, p.cfg.Partition, p.st.ISR, p.cfg.MinInsyncReplicas)
		} else {
			w.done <- nil
		}
	}
	p.waiters = kept
}

func (p *Partition) failWaitersLocked(err error) {
	for _, w := range p.waiters {
		w.done <- err
	}
	p.waiters = nil
}

// Close takes the replica out of service for good: it leads and follows
// nothing, produces waiting in purgatory are answered NOT_LEADER_OR_FOLLOWER,
// and neither a later Apply nor the answer to an ISR change still in flight
// brings it back.
func (p *Partition) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.role = None
	// Long polls, and DeleteRecords waiting for the low watermark, look
	// again and find the replica gone.
	p.notifyHWLocked()
	p.notifyLEOLocked()
	p.notifyStartLocked()
	p.failWaitersLocked(errs.Errorf(errs.NotLeaderOrFollower, "%s-%d: replica closed on broker %d", p.cfg.Topic, p.cfg.Partition, p.cfg.Self))
}

// TP names a partition.
type TP struct {
	Topic     string
	Partition int32
}

func (tp TP) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }
