package fetcher

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	storagev1 "skein/gen/skein/storage/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/grpcopt"
	"skein/libs/record"
	"skein/services/storage/internal/partition"
)

// Config tunes the fetch rounds.
type Config struct {
	Self        int32
	BrokerEpoch func() int64
	// MaxWait is how long the leader may hold a round with no new data
	// (default 500 ms, replica.fetch.wait.max.ms). New data answers a round
	// at once, and a partition this node starts to follow ends the round in
	// flight. A leader silent for MaxWait + ReportAfter is reported
	// unreachable, so a longer wait also reports it later.
	MaxWait time.Duration
	// MaxBytes bounds one answer; PartitionMaxBytes one partition's share.
	MaxBytes          int
	PartitionMaxBytes int
	// Backoff after a failed round or a broken stream.
	Backoff time.Duration
	// ReportAfter: a leader that has left a fetch round unanswered for
	// MaxWait plus this long (or could not be reached for as long) is
	// reported unreachable for its partitions by Unreachable (default 1 s).
	ReportAfter time.Duration
	// SaveStarts, if set, saves the log start offsets of partitions that
	// took a higher one from their leader in a round, at once and in one
	// write, before the next round reports them to the leader: a
	// DeleteRecords the leader answers is then on the disk of every ISR
	// member.
	SaveStarts func([]partition.TP)
}

// Dialer returns a connection to a broker, or false when its address is
// not known (yet).
type Dialer func(broker int32) (*grpc.ClientConn, bool)

// Manager owns the fetcher goroutines.
type Manager struct {
	cfg  Config
	dial Dialer
	log  *slog.Logger

	mu      sync.Mutex
	threads map[int32]*thread // by leader broker
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

type thread struct {
	leader int32
	// waiting: since when (unix nanoseconds) this thread has been waiting
	// for an answer from the leader — from the first round sent (or the
	// first failure to reach it) after the last answer; 0 after an answer.
	// The follower's own time applying an answer does not count.
	waiting atomic.Int64
	// asked: the partitions, with their leader epochs, of the last round
	// sent, for Unreachable, which must not wait on a partition's lock.
	asked atomic.Pointer[[]Silent]
	mu    sync.Mutex
	parts map[partition.TP]*partition.Partition
	wake  chan struct{}
	// grown is signalled when a partition new to this thread is added: the
	// round in flight does not ask for it, and its leader may hold that
	// round for MaxWait, so the stream is restarted with a round that does.
	grown  chan struct{}
	cancel context.CancelFunc
	// failed: the last failure to apply an answer logged per partition,
	// so that one that repeats every round is logged once a minute.
	// Touched only by the thread's own loop.
	failed map[partition.TP]loggedFailure
}

type loggedFailure struct {
	msg string
	at  time.Time
}

// failureRepeatLog is how often a failure that repeats every round, with
// the same message, is logged again.
const failureRepeatLog = time.Minute

// shouldLog reports whether the failure err of tp is logged now: a new
// one, one that changed, or one last logged failureRepeatLog ago. A nil
// err forgets tp's.
func (th *thread) shouldLog(tp partition.TP, err error, now time.Time) bool {
	if err == nil {
		delete(th.failed, tp)
		return false
	}
	if th.failed == nil {
		th.failed = map[partition.TP]loggedFailure{}
	}
	last, ok := th.failed[tp]
	if ok && last.msg == err.Error() && now.Sub(last.at) < failureRepeatLog {
		return false
	}
	th.failed[tp] = loggedFailure{msg: err.Error(), at: now}
	return true
}

// New returns a manager with no fetchers.
func New(cfg Config, dial Dialer, log *slog.Logger) *Manager {
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 500 * time.Millisecond
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 16 << 20
	}
	if cfg.PartitionMaxBytes <= 0 {
		cfg.PartitionMaxBytes = 4 << 20
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 100 * time.Millisecond
	}
	if cfg.ReportAfter <= 0 {
		cfg.ReportAfter = time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{cfg: cfg, dial: dial, log: log, threads: map[int32]*thread{}, ctx: ctx, cancel: cancel}
}

// Follow makes tp fetched from leader (moving it off another leader's stream).
func (m *Manager) Follow(tp partition.TP, p *partition.Partition, leader int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, th := range m.threads {
		if id != leader {
			th.remove(tp)
		}
	}
	th, ok := m.threads[leader]
	if !ok {
		ctx, cancel := context.WithCancel(m.ctx)
		th = &thread{leader: leader, parts: map[partition.TP]*partition.Partition{}, wake: make(chan struct{}, 1), grown: make(chan struct{}, 1), cancel: cancel}
		m.threads[leader] = th
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.run(ctx, th)
		}()
	}
	th.add(tp, p)
}

// Unfollow stops fetching tp.
func (m *Manager) Unfollow(tp partition.TP) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, th := range m.threads {
		th.remove(tp)
	}
}

// Silent is a partition whose leader has not answered this follower for a
// while.
type Silent struct {
	TP          partition.TP
	Leader      int32
	LeaderEpoch int32
	For         time.Duration
}

// Unreachable lists the partitions of the last round sent to each leader
// that has left the rounds unanswered (or could not be reached) for
// MaxWait + ReportAfter, with the leader epochs this follower knew. The
// broker's heartbeat carries the list to the controller, which moves
// leadership away from a leader a majority of its replicas cannot reach.
// It reads only what each round published: no partition lock, so a
// partition stalled on its disk does not hold the heartbeat back.
//
// Silence counts from resumed when that is later (zero: never): the time
// this process was seen running again after it did not run for a while.
// Its own stall is not its leaders' silence; the answers they sent
// meanwhile wait unread, and a round that broke during it is redialled.
func (m *Manager) Unreachable(now, resumed time.Time) []Silent {
	m.mu.Lock()
	threads := make([]*thread, 0, len(m.threads))
	for _, th := range m.threads {
		threads = append(threads, th)
	}
	m.mu.Unlock()
	var out []Silent
	for _, th := range threads {
		since := th.waiting.Load()
		if since == 0 {
			continue
		}
		from := time.Unix(0, since)
		if resumed.After(from) {
			from = resumed
		}
		silent := now.Sub(from) - m.cfg.MaxWait
		asked := th.asked.Load()
		if silent < m.cfg.ReportAfter || asked == nil {
			continue
		}
		for _, s := range *asked {
			s.For = silent
			out = append(out, s)
		}
	}
	return out
}

// Close stops every fetcher and waits for them.
func (m *Manager) Close() {
	m.cancel()
	m.wg.Wait()
}

func (th *thread) add(tp partition.TP, p *partition.Partition) {
	th.mu.Lock()
	_, had := th.parts[tp]
	th.parts[tp] = p
	th.mu.Unlock()
	if had {
		return
	}
	for _, c := range []chan struct{}{th.wake, th.grown} {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

func (th *thread) remove(tp partition.TP) {
	th.mu.Lock()
	delete(th.parts, tp)
	th.mu.Unlock()
}

type pos struct {
	p  *partition.Partition
	fs partition.FollowerState
}

// snapshot lists in out (emptied first) the partitions still following
// this leader and where each fetches from.
func (th *thread) snapshot(out map[partition.TP]pos) {
	clear(out)
	th.mu.Lock()
	defer th.mu.Unlock()
	for tp, p := range th.parts {
		fs, ok := p.FollowerState()
		if !ok || fs.Leader != th.leader {
			continue
		}
		out[tp] = pos{p, fs}
	}
}

func (m *Manager) run(ctx context.Context, th *thread) {
	for ctx.Err() == nil {
		err := m.stream(ctx, th)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errGrown) {
			// The round in flight was abandoned, not left unanswered.
			th.waiting.Store(0)
			continue
		}
		if err != nil {
			th.waiting.CompareAndSwap(0, time.Now().UnixNano())
			m.log.Debug("replication stream to leader ended", "leader", th.leader, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(m.cfg.Backoff):
		}
	}
}

// errGrown ends a stream whose thread was given a new partition.
var errGrown = errors.New("a partition was added to the fetch session")

// stream runs fetch rounds on one stream until it breaks, or until a
// partition new to the thread is added (errGrown): the leader answers a
// round early only for data in the partitions it asked for, so a new
// partition would otherwise wait out the round in flight, and acks=all
// writes to it with it (a new topic, or a leadership that just moved).
// Ending the stream is how the round is given up: the leader keeps no
// state of an unanswered round, as every round names its fetch offsets.
func (m *Manager) stream(ctx context.Context, th *thread) (err error) {
	cc, ok := m.dial(th.leader)
	if !ok {
		return errs.Errorf(errs.BrokerNotAvailable, "no address for leader %d", th.leader)
	}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// Signals from before this stream are for partitions its first round
	// asks for already.
	select {
	case <-th.grown:
	default:
	}
	go func() {
		select {
		case <-sctx.Done():
		case <-th.grown:
			cancel(errGrown)
		}
	}()
	defer func() {
		if context.Cause(sctx) == errGrown && ctx.Err() == nil {
			err = errGrown
		}
	}()
	stream, err := storagev1.NewStorageServiceClient(cc).Replicate(sctx)
	if err != nil {
		return err
	}
	// Every round reuses the map of its partitions and their entries of
	// the request: a round's request is marshalled by Send, and its map
	// used by round, before the next round fills them again.
	parts := map[partition.TP]pos{}
	var states []*storagev1.ReplicaFetchState
	for {
		th.snapshot(parts)
		if len(parts) == 0 {
			// Nothing asked is nothing to report.
			th.waiting.Store(0)
			th.asked.Store(nil)
			select {
			case <-ctx.Done():
				return nil
			case <-th.wake:
				continue
			case <-time.After(time.Second):
				continue
			}
		}
		req := &storagev1.ReplicateRequest{
			ReplicaId: m.cfg.Self, BrokerEpoch: m.cfg.BrokerEpoch(),
			MaxWaitMs: int32(m.cfg.MaxWait / time.Millisecond), MaxBytes: int32(m.cfg.MaxBytes), PartitionMaxBytes: int32(m.cfg.PartitionMaxBytes),
		}
		asked := make([]Silent, 0, len(parts))
		for len(states) < len(parts) {
			states = append(states, &storagev1.ReplicaFetchState{})
		}
		req.Partitions = states[:0:len(parts)]
		for tp, x := range parts {
			st := states[len(req.Partitions)]
			*st = storagev1.ReplicaFetchState{
				Topic: tp.Topic, Partition: tp.Partition, FetchOffset: int64(x.fs.FetchOffset),
				LastFetchedEpoch: int32(x.fs.LastFetchedEpoch), CurrentLeaderEpoch: x.fs.CurrentLeaderEpoch, LogStartOffset: int64(x.fs.LogStartOffset),
			}
			req.Partitions = append(req.Partitions, st)
			asked = append(asked, Silent{TP: tp, Leader: th.leader, LeaderEpoch: x.fs.CurrentLeaderEpoch})
		}
		th.asked.Store(&asked)
		th.waiting.CompareAndSwap(0, time.Now().UnixNano())
		if err := stream.Send(req); err != nil {
			return err
		}
		if stop, err := m.round(ctx, th, stream, parts); stop || err != nil {
			return err
		}
	}
}

// round receives and applies one answer; stop is true when ctx ended during
// a backoff. The answer's batches are decoded into a pooled buffer, given
// back once they are appended: applying them writes them to the log and
// keeps no reference to them.
func (m *Manager) round(ctx context.Context, th *thread, stream storagev1.StorageService_ReplicateClient, parts map[partition.TP]pos) (stop bool, err error) {
	resp := &storagev1.ReplicateResponse{}
	reply := &grpcopt.Pooled{Msg: resp}
	defer reply.Release()
	if err := stream.RecvMsg(reply); err != nil {
		return false, err
	}
	th.waiting.Store(0)
	backoff := false
	var rose []partition.TP // partitions whose leader's log start is above theirs
	for _, r := range resp.GetPartitions() {
		tp := partition.TP{Topic: r.GetTopic(), Partition: r.GetPartition()}
		x, ok := parts[tp]
		if !ok {
			continue
		}
		if code := r.GetErrorCode(); code == skeinv1.ErrorCode_OFFSET_OUT_OF_RANGE && x.fs.FetchOffset < record.Offset(r.GetLogStartOffset()) {
			// Retention on the leader passed this follower: restart at the
			// leader's log start.
			if err := x.p.ResetToLeaderStart(x.fs.CurrentLeaderEpoch, x.fs.FetchOffset, record.Offset(r.GetLogStartOffset())); err != nil {
				m.log.Error("resetting follower log", "partition", tp, "err", err)
				backoff = true
			}
			continue
		}
		if code := r.GetErrorCode(); code != 0 {
			// NOT_LEADER / FENCED / UNKNOWN_LEADER_EPOCH: the metadata
			// stream will move the partition; until then do not spin.
			backoff = true
			m.log.Debug("replica fetch refused", "partition", tp, "leader", th.leader, "code", errs.ForCode(errs.Code(code)).Name, "msg", r.GetErrorMessage())
			continue
		}
		res := partition.FollowerFetchResult{
			Records: r.GetRecords(), HW: record.Offset(r.GetHighWatermark()), LogStartOffset: record.Offset(r.GetLogStartOffset()), LSO: record.Offset(r.GetLastStableOffset()),
		}
		if d := r.GetDivergingEpoch(); d != nil {
			res.Diverging, res.DivergingEpoch, res.DivergingEnd = true, record.Epoch(d.GetEpoch()), record.Offset(d.GetEndOffset())
		}
		if res.LogStartOffset > x.fs.LogStartOffset {
			rose = append(rose, tp)
		}
		spans := startAppendSpans(res.Records, m.cfg.Self, tp)
		cut, err := x.p.ApplyFetchedCut(x.fs.CurrentLeaderEpoch, x.fs.FetchOffset, res)
		for _, s := range spans {
			s.End()
		}
		if th.shouldLog(tp, err, time.Now()) {
			m.log.Error("applying fetched batches failed", "partition", tp, "err", err, "repeats", "logged once a minute while the same failure repeats")
		}
		if err != nil {
			backoff = true
		}
		if cut != nil {
			// A follower's log cut back: records it held are gone from
			// it. Said once per cut, for an operator tracing a loss.
			m.log.Warn("truncated the log where it diverged from the leader's", "partition", tp, "leader", th.leader,
				"leader_epoch", x.fs.CurrentLeaderEpoch, "from", int64(cut.From), "to", int64(cut.To))
		}
	}
	// Saved before anything else runs: a thread this partition moves to
	// (a new leader) reports its start in its next fetch.
	if len(rose) > 0 && m.cfg.SaveStarts != nil {
		m.cfg.SaveStarts(rose)
	}
	if backoff {
		select {
		case <-ctx.Done():
			return true, nil
		case <-time.After(m.cfg.Backoff):
		}
	}
	return false, nil
}
