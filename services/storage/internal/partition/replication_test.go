package partition

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"skein/libs/errs"
	"skein/libs/record"
	"skein/services/storage/internal/producer"
)

// cluster is three replicas of one partition wired through an in-memory
// "transport" that the test drives step by step: fetch(id) is one follower
// fetch round trip; cut links fail it. The fake controller commits ISR
// changes with Kafka's epoch checks and pushes the new state to every
// replica, as the metadata stream would.
type cluster struct {
	t        *testing.T
	mu       sync.Mutex
	clock    time.Time
	state    State
	logs     map[int32]*memLog
	replicas map[int32]*Partition
	cut      map[int32]bool
	minISR   int
	// held: when set, ISR proposals are not answered but sent here.
	held chan func()
	// proposals counts the ISR changes proposed; with lostAnswer set, the
	// fake controller commits a change but its answer is lost (no verdict,
	// ErrISRUnsure) and the metadata does not bring it yet.
	proposals  int
	lostAnswer bool
	// brokerEpochs, when set, is each broker's registration: fetches carry
	// it, and the fake controller refuses an ISR member named at another
	// (as the real one does).
	brokerEpochs map[int32]int64
	// fenced brokers may not join an ISR.
	fenced map[int32]bool
}

func newCluster(t *testing.T, minISR int) *cluster {
	c := &cluster{t: t, clock: time.Unix(1_000_000, 0), logs: map[int32]*memLog{}, replicas: map[int32]*Partition{}, cut: map[int32]bool{}, minISR: minISR}
	c.state = State{Leader: 1, LeaderEpoch: 0, PartitionEpoch: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}
	for _, id := range []int32{1, 2, 3} {
		c.logs[id] = &memLog{}
		cfg := Config{Topic: "t", Partition: 0, Self: id, MinInsyncReplicas: minISR, MaxMessageBytes: 1 << 20, ReplicaLagMax: 10 * time.Second}
		c.replicas[id] = New(cfg, c.logs[id], 0, producer.New(), c, c.now)
	}
	c.push()
	return c
}

func (c *cluster) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clock
}

func (c *cluster) advance(d time.Duration) {
	c.mu.Lock()
	c.clock = c.clock.Add(d)
	c.mu.Unlock()
}

func (c *cluster) push() {
	c.mu.Lock()
	st := c.state
	c.mu.Unlock()
	for _, id := range []int32{1, 2, 3} {
		c.replicas[id].Apply(st)
	}
}

// ProposeISR sends the change to the fake controller from a goroutine of
// its own, as the node's proposer answers from its own.
func (c *cluster) ProposeISR(ch ISRChange, done func(State, error)) {
	c.mu.Lock()
	c.proposals++
	lost := c.lostAnswer
	c.mu.Unlock()
	if lost {
		go func() {
			c.commit(ch)
			done(State{}, fmt.Errorf("%w: %w", ErrISRUnsure, context.DeadlineExceeded))
		}()
		return
	}
	answer := func() { done(c.alter(ch)) }
	if c.held != nil {
		c.held <- answer
		return
	}
	go answer()
}

// alter is the fake controller's AlterPartition: commit, then push the
// state to every replica as the metadata stream would.
func (c *cluster) alter(ch ISRChange) (State, error) {
	st, err := c.commit(ch)
	if err == nil {
		c.push()
	}
	return st, err
}

// commit is alter without the push.
func (c *cluster) commit(ch ISRChange) (State, error) {
	leaderEpoch, partitionEpoch, isr := ch.LeaderEpoch, ch.PartitionEpoch, ch.ISR
	c.mu.Lock()
	for _, r := range isr {
		if c.fenced[r] && !slices.Contains(c.state.ISR, r) {
			st := c.state
			c.mu.Unlock()
			return st, errs.Errorf(errs.ReplicaNotAvailable, "broker %d is fenced", r)
		}
	}
	for i, e := range ch.BrokerEpochs {
		if e > 0 && c.brokerEpochs != nil && c.brokerEpochs[isr[i]] != e {
			st := c.state
			c.mu.Unlock()
			return st, errs.Errorf(errs.ReplicaNotAvailable, "broker %d restarted since", isr[i])
		}
	}
	if leaderEpoch != c.state.LeaderEpoch {
		st := c.state
		c.mu.Unlock()
		return st, errs.Errorf(errs.FencedLeaderEpoch, "stale leader epoch")
	}
	if partitionEpoch != c.state.PartitionEpoch {
		st := c.state
		c.mu.Unlock()
		return st, errs.Errorf(errs.InvalidUpdateVersion, "stale partition epoch")
	}
	c.state.ISR = slices.Clone(isr)
	c.state.PartitionEpoch++
	st := c.state
	c.mu.Unlock()
	return st, nil
}

// elect makes id the leader with a new epoch; the ISR keeps only live members.
func (c *cluster) elect(id int32, isr []int32) {
	c.mu.Lock()
	c.state.Leader = id
	c.state.LeaderEpoch++
	c.state.PartitionEpoch++
	c.state.ISR = slices.Clone(isr)
	c.mu.Unlock()
	c.push()
}

func (c *cluster) fetch(id int32) error {
	if c.cut[id] {
		return errs.Errorf(errs.NetworkException, "link to %d cut", id)
	}
	f := c.replicas[id]
	fs, ok := f.FollowerState()
	if !ok {
		return fmt.Errorf("%d is not a follower", id)
	}
	if c.cut[fs.Leader] {
		return errs.Errorf(errs.NetworkException, "leader %d cut off", fs.Leader)
	}
	c.mu.Lock()
	epoch := c.brokerEpochs[id]
	c.mu.Unlock()
	res, err := c.replicas[fs.Leader].ServeFollower(FollowerFetch{ReplicaID: id, BrokerEpoch: epoch, FetchOffset: fs.FetchOffset, LastFetchedEpoch: fs.LastFetchedEpoch, LogStartOffset: fs.LogStartOffset, CurrentLeaderEpoch: fs.CurrentLeaderEpoch, MaxBytes: 1 << 20})
	if err != nil {
		return err
	}
	return f.ApplyFetched(fs.CurrentLeaderEpoch, fs.FetchOffset, res)
}

// replicate runs fetch rounds for every live follower until nothing moves.
func (c *cluster) replicate() {
	for round := 0; round < 10; round++ {
		for _, id := range []int32{1, 2, 3} {
			if _, ok := c.replicas[id].FollowerState(); ok && !c.cut[id] {
				_ = c.fetch(id)
			}
		}
	}
}

func batchOf(t *testing.T, opts record.BatchOptions, values ...string) []byte {
	t.Helper()
	b := record.NewBuilder(opts)
	for _, v := range values {
		b.Append(1_700_000_000_000, []byte("k"), []byte(v))
	}
	batch, _, err := b.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	return batch
}

func plain(t *testing.T, values ...string) []byte {
	return batchOf(t, record.DefaultBatchOptions(), values...)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

type produceOutcome struct {
	res ProduceResult
	err error
}

func produceAsync(p *Partition, acks int, data []byte, timeout time.Duration) chan produceOutcome {
	out := make(chan produceOutcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		r, err := p.Produce(ctx, acks, -1, data)
		out <- produceOutcome{r, err}
	}()
	return out
}

func TestAcksAllWaitsForTheISR(t *testing.T) {
	c := newCluster(t, 2)
	done := produceAsync(c.replicas[1], AcksAll, plain(t, "a", "b"), 5*time.Second)
	select {
	case o := <-done:
		t.Fatalf("answered before any follower fetched: %+v", o)
	case <-time.After(20 * time.Millisecond):
	}
	// First fetches carry the data; the followers' next fetch offsets acknowledge it.
	c.fetch(2)
	c.fetch(3)
	if hw := c.replicas[1].Snapshot().HW; hw != 0 {
		t.Fatalf("HW %d before followers acknowledged", hw)
	}
	c.fetch(2)
	select {
	case <-done:
		t.Fatal("answered while follower 3 (in the ISR) had not acknowledged")
	case <-time.After(20 * time.Millisecond):
	}
	c.fetch(3)
	o := <-done
	if o.err != nil || o.res.BaseOffset != 0 || o.res.LastOffset != 1 {
		t.Fatalf("produce: %+v", o)
	}
	if hw := c.replicas[1].Snapshot().HW; hw != 2 {
		t.Fatalf("leader HW %d, want 2", hw)
	}
	// Followers learn the HW on their next fetch.
	c.replicate()
	for _, id := range []int32{2, 3} {
		if s := c.replicas[id].Snapshot(); s.HW != 2 || s.LEO != 2 {
			t.Errorf("follower %d: HW %d LEO %d", id, s.HW, s.LEO)
		}
	}
}

func TestAcksOneAndZeroDoNotWait(t *testing.T) {
	c := newCluster(t, 2)
	for _, acks := range []int{AcksLeader, AcksNone} {
		r, err := c.replicas[1].Produce(context.Background(), acks, -1, plain(t, "x"))
		if err != nil {
			t.Fatalf("acks=%d: %v", acks, err)
		}
		if r.BaseOffset < 0 {
			t.Fatalf("acks=%d: offset %d", acks, r.BaseOffset)
		}
	}
	if c.replicas[1].Snapshot().HW != 0 {
		t.Error("HW moved with no follower acknowledgement")
	}
}

func TestLaggingFollowerLeavesISRAndMinISRRefuses(t *testing.T) {
	c := newCluster(t, 2)
	c.cut[2], c.cut[3] = true, true
	// acks=1 writes still land on the leader.
	if _, err := c.replicas[1].Produce(context.Background(), AcksLeader, -1, plain(t, "a")); err != nil {
		t.Fatal(err)
	}
	c.advance(11 * time.Second)
	c.replicas[1].MaybeShrinkISR()
	eventually(t, "ISR shrink to [1]", func() bool { return slices.Equal(c.replicas[1].Snapshot().State.ISR, []int32{1}) })

	// acks=all is now refused before anything is appended.
	leo := c.replicas[1].Snapshot().LEO
	_, err := c.replicas[1].Produce(context.Background(), AcksAll, -1, plain(t, "b"))
	if !errors.Is(err, errs.NotEnoughReplicas) {
		t.Fatalf("acks=all with ISR below min: %v", err)
	}
	if got := c.replicas[1].Snapshot().LEO; got != leo {
		t.Fatalf("refused produce changed the log: LEO %d -> %d", leo, got)
	}
	// The leader alone moves the HW over the shrunk ISR.
	if hw := c.replicas[1].Snapshot().HW; hw != leo {
		t.Fatalf("HW %d, want %d after shrink", hw, leo)
	}

	// Follower 2 reconnects, catches up to the HW and is proposed back.
	c.cut[2] = false
	c.replicate()
	eventually(t, "ISR expand to [1 2]", func() bool { return slices.Equal(c.replicas[1].Snapshot().State.ISR, []int32{1, 2}) })
	done := produceAsync(c.replicas[1], AcksAll, plain(t, "c"), 5*time.Second)
	eventually(t, "produce appended", func() bool { return c.replicas[1].Snapshot().LEO == leo+1 })
	c.replicate()
	if o := <-done; o.err != nil {
		t.Fatalf("acks=all after expand: %v", o.err)
	}
}

func TestShrinkWhileWaitingIsNotEnoughReplicasAfterAppend(t *testing.T) {
	c := newCluster(t, 3)
	c.cut[3] = true
	done := produceAsync(c.replicas[1], AcksAll, plain(t, "a"), 5*time.Second)
	eventually(t, "append", func() bool { return c.replicas[1].Snapshot().LEO == 1 })
	c.fetch(2)
	c.fetch(2)
	c.advance(11 * time.Second)
	c.fetch(2) // keeps 2 caught up at the new time
	c.replicas[1].MaybeShrinkISR()
	o := <-done
	if !errors.Is(o.err, errs.NotEnoughReplicasAfterAppend) {
		t.Fatalf("want NOT_ENOUGH_REPLICAS_AFTER_APPEND, got %v", o.err)
	}
}

func TestTimeoutInPurgatory(t *testing.T) {
	c := newCluster(t, 2)
	o := <-produceAsync(c.replicas[1], AcksAll, plain(t, "a"), 30*time.Millisecond)
	if !errors.Is(o.err, errs.RequestTimedOut) {
		t.Fatalf("want REQUEST_TIMED_OUT, got %v", o.err)
	}
	if c.replicas[1].Snapshot().LEO != 1 {
		t.Fatal("the batch stays in the leader's log (as Kafka: the client retries idempotently)")
	}
}

func TestTwoQuickFailoversLeaveReplicasIdenticalBelowHW(t *testing.T) {
	c := newCluster(t, 1)
	// Committed on all three.
	done := produceAsync(c.replicas[1], AcksAll, plain(t, "c0", "c1"), 5*time.Second)
	eventually(t, "append", func() bool { return c.replicas[1].Snapshot().LEO == 2 })
	c.replicate()
	if o := <-done; o.err != nil {
		t.Fatal(o.err)
	}
	// Leader 1 takes writes that reach only follower 2, then dies.
	c.cut[3] = true
	c.replicas[1].Produce(context.Background(), AcksLeader, -1, plain(t, "u2"))
	c.fetch(2)
	c.replicas[1].Produce(context.Background(), AcksLeader, -1, plain(t, "u3"))
	c.cut[1] = true
	// Replica 3 (in the ISR, behind) becomes leader: u2 and u3 were never committed.
	c.cut[3] = false
	c.elect(3, []int32{2, 3})
	c.replicas[3].Produce(context.Background(), AcksLeader, -1, plain(t, "e1a"))
	c.replicate() // 2 truncates its u2 and fetches e1a
	// A second failover right away: 2 leads, 1 comes back and must drop u2, u3.
	c.elect(2, []int32{2, 3})
	c.replicas[2].Produce(context.Background(), AcksLeader, -1, plain(t, "e2a"))
	c.cut[1] = false
	c.replicate()

	want := []string{"c0", "c1", "e1a", "e2a"}
	for _, id := range []int32{1, 2, 3} {
		if got := c.logs[id].values(); !slices.Equal(got, want) {
			t.Errorf("replica %d log %v, want %v", id, got, want)
		}
	}
	// And the epoch caches agree, so a later failover truncates correctly too.
	for _, id := range []int32{1, 3} {
		if !slices.Equal(c.logs[id].epochs, c.logs[2].epochs) {
			t.Errorf("replica %d epochs %v, leader %v", id, c.logs[id].epochs, c.logs[2].epochs)
		}
	}
}

func TestIdempotentRetryAnsweredWithOriginalOffsets(t *testing.T) {
	c := newCluster(t, 1)
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 42, 0, 0
	first := batchOf(t, opts, "a", "b")
	r1, err := c.replicas[1].Produce(context.Background(), AcksLeader, -1, first)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.replicas[1].Produce(context.Background(), AcksLeader, -1, first)
	if err != nil || r2.BaseOffset != r1.BaseOffset || r2.LastOffset != r1.LastOffset {
		t.Fatalf("retry: %+v %v, original %+v", r2, err, r1)
	}
	if leo := c.replicas[1].Snapshot().LEO; leo != 2 {
		t.Fatalf("retry was written twice: LEO %d", leo)
	}
	opts.BaseSequence = 5
	if _, err := c.replicas[1].Produce(context.Background(), AcksLeader, -1, batchOf(t, opts, "gap")); !errors.Is(err, errs.OutOfOrderSequenceNumber) {
		t.Fatalf("gap: %v", err)
	}
	// Followers replay the producer state: after a failover the new leader
	// still recognizes the retry.
	c.replicate()
	c.elect(2, []int32{1, 2, 3})
	r3, err := c.replicas[2].Produce(context.Background(), AcksLeader, -1, first)
	if err != nil || r3.BaseOffset != r1.BaseOffset {
		t.Fatalf("retry after failover: %+v %v", r3, err)
	}
	if got := c.logs[2].values(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("new leader log %v", got)
	}
}

// A producer id idle for the expiration is forgotten: its retry is then
// written as a new batch (as in Kafka), while one writing on is kept.
func TestIdleProducerIDsExpire(t *testing.T) {
	c := newCluster(t, 1)
	leader := c.replicas[1]
	idle, busy := record.DefaultBatchOptions(), record.DefaultBatchOptions()
	idle.ProducerID, busy.ProducerID = 42, 43
	idle.ProducerEpoch, busy.ProducerEpoch = 0, 0
	idle.BaseSequence, busy.BaseSequence = 0, 0
	first := batchOf(t, idle, "a")
	if _, err := leader.Produce(context.Background(), AcksLeader, -1, first); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Produce(context.Background(), AcksLeader, -1, batchOf(t, busy, "b")); err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	if n := leader.ExpireProducers(t0, time.Hour); n != 0 {
		t.Fatalf("expired %d producers that just wrote", n)
	}
	busy.BaseSequence = 1
	if _, err := leader.Produce(context.Background(), AcksLeader, -1, batchOf(t, busy, "c")); err != nil {
		t.Fatal(err)
	}
	if n := leader.ExpireProducers(t0.Add(time.Hour), time.Hour); n != 1 {
		t.Fatalf("expired %d producers after an hour, want the idle one", n)
	}
	if _, err := leader.Produce(context.Background(), AcksLeader, -1, first); err != nil {
		t.Fatal(err)
	}
	if got := c.logs[1].values(); !slices.Equal(got, []string{"a", "b", "c", "a"}) {
		t.Fatalf("log %v: the forgotten producer's retry is written again", got)
	}
	// The producer that wrote within the hour still has its window.
	if r, err := leader.Produce(context.Background(), AcksLeader, -1, batchOf(t, busy, "c")); err != nil || r.BaseOffset != 2 {
		t.Fatalf("retry of a kept producer: %+v %v, want the original offset 2", r, err)
	}
}

func TestBadProducesLeaveTheLogUnchanged(t *testing.T) {
	c := newCluster(t, 1)
	leader := c.replicas[1]
	leader.Produce(context.Background(), AcksLeader, -1, plain(t, "ok"))
	good := plain(t, "x")
	corrupt := append([]byte(nil), good...)
	corrupt[len(corrupt)-1] ^= 0xff
	oversized := plain(t, string(make([]byte, 2<<20)))
	two := append(append([]byte(nil), good...), good...)
	for _, tc := range []struct {
		name   string
		acks   int
		epoch  int32
		data   []byte
		target int32
		want   *errs.Error
	}{
		{"corrupt crc", AcksLeader, -1, corrupt, 1, errs.CorruptMessage},
		{"truncated batch", AcksLeader, -1, good[:len(good)-3], 1, errs.CorruptMessage},
		{"empty", AcksLeader, -1, nil, 1, errs.CorruptMessage},
		{"oversized", AcksLeader, -1, oversized, 1, errs.MessageTooLarge},
		{"two batches", AcksLeader, -1, two, 1, errs.InvalidRecord},
		{"bad acks", 5, -1, good, 1, errs.InvalidRequiredAcks},
		{"not leader", AcksLeader, -1, good, 2, errs.NotLeaderOrFollower},
	} {
		before := c.logs[1].values()
		_, err := c.replicas[tc.target].Produce(context.Background(), tc.acks, tc.epoch, tc.data)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %s", tc.name, err, tc.want.Name)
		}
		if after := c.logs[1].values(); !slices.Equal(before, after) {
			t.Errorf("%s: log changed %v -> %v", tc.name, before, after)
		}
	}
	c.elect(1, []int32{1, 2, 3}) // epoch 1
	if _, err := leader.Produce(context.Background(), AcksLeader, 0, good); !errors.Is(err, errs.FencedLeaderEpoch) {
		t.Errorf("stale epoch: %v", err)
	}
	if _, err := leader.Produce(context.Background(), AcksLeader, 9, good); !errors.Is(err, errs.UnknownLeaderEpoch) {
		t.Errorf("future epoch: %v", err)
	}
	if _, err := leader.Produce(context.Background(), AcksLeader, 1, good); err != nil {
		t.Errorf("current epoch: %v", err)
	}
}

func TestConsumerFetchBelowHWOnly(t *testing.T) {
	c := newCluster(t, 1)
	leader := c.replicas[1]
	leader.Produce(context.Background(), AcksLeader, -1, plain(t, "a"))
	res, err := leader.Fetch(0, 1<<20, false, -1)
	if err != nil || len(res.Records) != 0 || res.HW != 0 {
		t.Fatalf("record above the HW was served: %+v %v", res, err)
	}
	w := NewWaker()
	leader.WakeOnHW(w)
	c.replicate()
	select {
	case <-w.C():
	default:
		t.Fatal("a waker registered with WakeOnHW was not woken when the HW moved")
	}
	res, err = leader.Fetch(0, 1<<20, false, -1)
	if err != nil || len(res.Records) == 0 || res.HW != 1 {
		t.Fatalf("committed record not served: %+v %v", res, err)
	}
	if _, err := leader.Fetch(5, 1<<20, false, -1); !errors.Is(err, errs.OffsetOutOfRange) {
		t.Fatalf("offset above LEO: %v", err)
	}
	if _, err := c.replicas[2].Fetch(0, 1<<20, false, -1); !errors.Is(err, errs.NotLeaderOrFollower) {
		t.Fatalf("fetch from follower: %v", err)
	}
}

func TestFollowerBehindLeaderLogStartRestartsThere(t *testing.T) {
	c := newCluster(t, 1)
	c.cut[3] = true
	for i := 0; i < 5; i++ {
		c.replicas[1].Produce(context.Background(), AcksLeader, -1, plain(t, fmt.Sprint(i)))
	}
	c.replicate()
	// Retention on the leader removes offsets 0..2 that follower 3 never got.
	c.logs[1].deleteBefore(3)
	c.cut[3] = false
	if err := c.fetch(3); !errors.Is(err, errs.OffsetOutOfRange) {
		t.Fatalf("fetch below the leader's log start: %v", err)
	}
	fs, _ := c.replicas[3].FollowerState()
	if err := c.replicas[3].ResetToLeaderStart(fs.CurrentLeaderEpoch, fs.FetchOffset, 3); err != nil {
		t.Fatal(err)
	}
	c.replicate()
	if got := c.logs[3].values(); !slices.Equal(got, []string{"3", "4"}) {
		t.Fatalf("follower log after restart at the leader's start: %v", got)
	}
	if s := c.replicas[3].Snapshot(); s.Start != 3 || s.LEO != 5 {
		t.Fatalf("follower start %d LEO %d", s.Start, s.LEO)
	}
}

// Links that drop and delay answers: a dropped answer is simply fetched
// again (the fetch offset is the acknowledgement, so nothing is counted
// twice), and an answer delayed past a leader change is ignored.
func TestDroppedAndDelayedAnswers(t *testing.T) {
	c := newCluster(t, 1)
	leader := c.replicas[1]
	leader.Produce(context.Background(), AcksLeader, -1, plain(t, "a"))

	// Dropped: follower 2's answer is lost on the way back.
	fs, _ := c.replicas[2].FollowerState()
	if _, err := leader.ServeFollower(FollowerFetch{ReplicaID: 2, FetchOffset: fs.FetchOffset, LastFetchedEpoch: fs.LastFetchedEpoch, CurrentLeaderEpoch: fs.CurrentLeaderEpoch, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	c.replicate()
	if got := c.logs[2].values(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after a dropped answer follower 2 has %v", got)
	}

	// Delayed: follower 3 fetched from leader 1 at epoch 0; the answer
	// arrives after 2 became leader at epoch 1 and 3 already follows it.
	leader.Produce(context.Background(), AcksLeader, -1, plain(t, "b-uncommitted"))
	fs3, _ := c.replicas[3].FollowerState()
	late, err := leader.ServeFollower(FollowerFetch{ReplicaID: 3, FetchOffset: fs3.FetchOffset, LastFetchedEpoch: fs3.LastFetchedEpoch, CurrentLeaderEpoch: fs3.CurrentLeaderEpoch, MaxBytes: 1 << 20})
	if err != nil || len(late.Records) == 0 {
		t.Fatalf("leader answer: %v %v", late, err)
	}
	c.cut[1] = true
	c.elect(2, []int32{2, 3})
	c.replicas[2].Produce(context.Background(), AcksLeader, -1, plain(t, "c"))
	if err := c.replicas[3].ApplyFetched(fs3.CurrentLeaderEpoch, fs3.FetchOffset, late); err != nil {
		t.Fatal(err)
	}
	c.replicate()
	if got := c.logs[3].values(); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("follower 3 applied a stale answer: %v", got)
	}
}

// A replica closed while its ISR change is at the controller stays closed
// when the answer arrives — committed, with a newer partition epoch that
// names it leader — and when the metadata pushes that state: it leads
// nothing, and a produce is refused.
func TestClosedReplicaStaysClosedWhenItsISRChangeIsAnswered(t *testing.T) {
	c := newCluster(t, 1)
	c.held = make(chan func(), 1)
	c.cut[3] = true
	c.advance(11 * time.Second)
	leader := c.replicas[1]
	leader.MaybeShrinkISR()
	var answer func()
	select {
	case answer = <-c.held:
	case <-time.After(5 * time.Second):
		t.Fatal("no ISR proposal")
	}
	leader.Close()
	answer() // commits ISR [1] at partition epoch 1 and pushes it to every replica
	c.mu.Lock()
	st := c.state
	c.mu.Unlock()
	if !slices.Equal(st.ISR, []int32{1}) || st.PartitionEpoch != 1 {
		t.Fatalf("the fake controller did not commit the change: %+v", st)
	}
	if s := leader.Snapshot(); s.Role != None {
		t.Errorf("closed replica's role %v after its ISR change was answered, want None", s.Role)
	}
	leader.Apply(State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 2, Replicas: []int32{1, 2, 3}, ISR: []int32{1}})
	if s := leader.Snapshot(); s.Role != None {
		t.Errorf("closed replica's role %v after a newer leader epoch naming it, want None", s.Role)
	}
	if _, err := leader.Produce(context.Background(), AcksLeader, -1, plain(t, "after close")); errs.Of(err) != errs.NotLeaderOrFollower {
		t.Errorf("produce to a closed replica: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
}

func TestReplicaLEOsFollowFetches(t *testing.T) {
	c := newCluster(t, 1)
	leader := c.replicas[1]
	// Before any fetch the leader knows only its own LEO.
	if got, want := leader.ReplicaLEOs(), []ReplicaLEO{{1, 0}}; !slices.Equal(got, want) {
		t.Fatalf("before fetches: %v, want %v", got, want)
	}
	if _, err := leader.Produce(context.Background(), AcksLeader, -1, plain(t, "a", "b", "c")); err != nil {
		t.Fatal(err)
	}
	// Follower 2 fetches twice (the second fetch acknowledges the data),
	// follower 3 only once (it asked from 0 and has not acknowledged).
	for _, id := range []int32{2, 2, 3} {
		if err := c.fetch(id); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := leader.ReplicaLEOs(), []ReplicaLEO{{1, 3}, {2, 3}, {3, 0}}; !slices.Equal(got, want) {
		t.Fatalf("after fetches: %v, want %v", got, want)
	}
	// Follower 3 falls behind: it stays at its last known LEO.
	c.cut[3] = true
	if _, err := leader.Produce(context.Background(), AcksLeader, -1, plain(t, "d")); err != nil {
		t.Fatal(err)
	}
	c.replicate()
	if got, want := leader.ReplicaLEOs(), []ReplicaLEO{{1, 4}, {2, 4}, {3, 0}}; !slices.Equal(got, want) {
		t.Fatalf("with 3 cut off: %v, want %v", got, want)
	}
	if got := c.replicas[2].ReplicaLEOs(); got != nil {
		t.Fatalf("a follower answered %v", got)
	}
}

// An answer to a produce, at every acks, and a follower's next fetch come
// only after the log was asked to apply flush.messages to what they wrote;
// an fsync that fails answers KAFKA_STORAGE_ERROR and leaves no waiter
// behind.
func TestProduceAndFollowerAppendSyncBeforeTheyCount(t *testing.T) {
	c := newCluster(t, 2)
	leader := c.logs[1]
	for i, acks := range []int{AcksNone, AcksLeader} {
		r, err := c.replicas[1].Produce(context.Background(), acks, -1, plain(t, "x", "y"))
		if err != nil {
			t.Fatalf("acks=%d: %v", acks, err)
		}
		if want := record.Offset(2*i + 2); r.LastOffset+1 != want || leader.synced != want {
			t.Fatalf("acks=%d: last offset %d, synced to %d, want %d", acks, r.LastOffset, leader.synced, want)
		}
	}
	done := produceAsync(c.replicas[1], AcksAll, plain(t, "z"), 5*time.Second)
	eventually(t, "the append", func() bool { return c.replicas[1].Snapshot().LEO == 5 })
	c.replicate()
	if o := <-done; o.err != nil || o.res.LastOffset != 4 {
		t.Fatalf("acks=all: %+v", o)
	}
	if leader.synced != 5 {
		t.Fatalf("acks=all answered with the leader synced to %d, want 5", leader.synced)
	}
	for _, id := range []int32{2, 3} {
		if got := c.logs[id].synced; got != 5 {
			t.Fatalf("follower %d synced to %d, want 5", id, got)
		}
	}

	leader.mu.Lock()
	leader.syncErr = errs.Errorf(errs.KafkaStorageError, "fsync: input/output error")
	leader.mu.Unlock()
	o := <-produceAsync(c.replicas[1], AcksAll, plain(t, "w"), 5*time.Second)
	if errs.Of(o.err) != errs.KafkaStorageError {
		t.Fatalf("produce with a failing fsync: %v, want KAFKA_STORAGE_ERROR", o.err)
	}
	c.replicas[1].mu.Lock()
	waiting := len(c.replicas[1].waiters)
	c.replicas[1].mu.Unlock()
	if waiting != 0 {
		t.Fatalf("%d waiters left after the failed fsync", waiting)
	}

	c.logs[2].mu.Lock()
	c.logs[2].syncErr = errs.Errorf(errs.KafkaStorageError, "fsync: input/output error")
	c.logs[2].mu.Unlock()
	if err := c.fetch(2); errs.Of(err) != errs.KafkaStorageError {
		t.Fatalf("follower append with a failing fsync: %v, want KAFKA_STORAGE_ERROR", err)
	}
	// The failed log fetches no more: a next fetch would tell the leader
	// follower 2 holds what its failed fsync may have lost.
	if _, ok := c.replicas[2].FollowerState(); ok {
		t.Fatal("a follower whose log failed still fetches")
	}
	if err := c.fetch(2); err == nil {
		t.Fatal("a follower whose log failed fetched")
	}
	for _, r := range c.replicas[1].ReplicaLEOs() {
		if r.Replica == 2 && r.LEO != 5 {
			t.Fatalf("the leader counts follower 2 at %d after its fsync failed, want 5", r.LEO)
		}
	}
}

// A follower joining the ISR counts toward the HW from the moment the
// leader proposes it until the proposal is settled. A metadata image that
// brings the partition's state unchanged (any change elsewhere in the
// cluster does) settles nothing: with the proposal still at the
// controller, an acks=all produce must wait for the joining follower,
// which the controller may make an ISR member, electable, behind the HW.
func TestPendingISRExpansionCountsUntilSettled(t *testing.T) {
	c := newCluster(t, 1)
	c.elect(1, []int32{1})
	leader := c.replicas[1]
	if _, err := leader.Produce(context.Background(), AcksLeader, -1, plain(t, "a")); err != nil {
		t.Fatal(err)
	}
	c.held = make(chan func(), 4)
	c.fetch(2)
	c.fetch(2) // caught up: the leader proposes ISR [1 2]
	var answer func()
	select {
	case answer = <-c.held:
	case <-time.After(5 * time.Second):
		t.Fatal("no ISR proposal")
	}
	c.push() // the same state again
	done := produceAsync(leader, AcksAll, plain(t, "b"), 5*time.Second)
	select {
	case o := <-done:
		t.Fatalf("acks=all answered (%+v) while follower 2, proposed for the ISR, lacked the record", o)
	case <-time.After(50 * time.Millisecond):
	}
	answer() // committed: ISR [1 2]
	if st := leader.Snapshot().State; !slices.Equal(st.ISR, []int32{1, 2}) {
		t.Fatalf("ISR %v after the commit, want [1 2]", st.ISR)
	}
	select {
	case o := <-done:
		t.Fatalf("acks=all answered (%+v) before ISR member 2 had the record", o)
	case <-time.After(20 * time.Millisecond):
	}
	c.fetch(2)
	c.fetch(2)
	if o := <-done; o.err != nil || o.res.BaseOffset != 1 {
		t.Fatalf("acks=all after follower 2 fetched: %+v", o)
	}
}

// An ISR change whose answer is lost (the call timed out after the
// controller committed it) stays pending: its members count toward the HW,
// and the leader asks again until a verdict comes. The resend, at the old
// partition epoch, is refused with the state that holds the change.
func TestISRChangeWithoutAVerdictIsAskedAgain(t *testing.T) {
	c := newCluster(t, 1)
	c.elect(1, []int32{1})
	leader := c.replicas[1]
	if _, err := leader.Produce(context.Background(), AcksLeader, -1, plain(t, "a")); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.lostAnswer = true
	c.mu.Unlock()
	c.fetch(2)
	c.fetch(2) // the leader proposes ISR [1 2]; the controller commits it, the answer is lost
	eventually(t, "the lost answer", func() bool {
		leader.mu.Lock()
		defer leader.mu.Unlock()
		return leader.pendingUnsure
	})
	done := produceAsync(leader, AcksAll, plain(t, "b"), 5*time.Second)
	select {
	case o := <-done:
		t.Fatalf("acks=all answered (%+v) while follower 2, perhaps in the ISR, lacked the record", o)
	case <-time.After(50 * time.Millisecond):
	}
	c.mu.Lock()
	c.lostAnswer = false
	c.mu.Unlock()
	leader.MaybeShrinkISR() // the housekeeping tick: asks again
	eventually(t, "the committed ISR at the leader", func() bool {
		return slices.Equal(leader.Snapshot().State.ISR, []int32{1, 2})
	})
	c.mu.Lock()
	n, pe := c.proposals, c.state.PartitionEpoch
	c.mu.Unlock()
	if n != 2 || pe != 2 {
		t.Fatalf("%d proposals, partition epoch %d: want the change proposed twice and committed once (epoch 2)", n, pe)
	}
	select {
	case o := <-done:
		t.Fatalf("acks=all answered (%+v) before ISR member 2 had the record", o)
	case <-time.After(20 * time.Millisecond):
	}
	c.fetch(2)
	c.fetch(2)
	if o := <-done; o.err != nil || o.res.BaseOffset != 1 {
		t.Fatalf("acks=all after follower 2 fetched: %+v", o)
	}
}

// A new leader's epoch starts at its LEO before it appends: asked about
// the epoch its predecessor led briefly, whose batch it never got, it
// answers the epoch before and where that ends, and the follower holding
// that batch cuts only it.
func TestNewLeaderPlacesAnEpochItNeverGot(t *testing.T) {
	c := newCluster(t, 1)
	if _, err := c.replicas[1].Produce(context.Background(), AcksLeader, -1, plain(t, "a", "b")); err != nil {
		t.Fatal(err)
	}
	c.replicate()
	c.elect(1, []int32{1, 2, 3}) // leader epoch 1
	if _, err := c.replicas[1].Produce(context.Background(), AcksLeader, -1, plain(t, "c")); err != nil {
		t.Fatal(err)
	}
	c.fetch(3) // only follower 3 gets c, of epoch 1
	truncations := 0
	c.replicas[3].mu.Lock()
	cfg := c.replicas[3].cfg
	c.replicas[3].mu.Unlock()
	cfg.Truncated = func() { truncations++ }
	c.replicas[3].SetConfig(cfg)
	c.cut[1] = true
	c.elect(2, []int32{2, 3}) // leader epoch 2; replica 2 has no batch of epoch 1
	if e, end, err := c.replicas[2].EndOffsetForEpoch(1, 2); err != nil || e != 0 || end != 2 {
		t.Fatalf("the new leader's answer for epoch 1: (%d, %d, %v), want (0, 2): epoch 0 ends at 2", e, end, err)
	}
	if err := c.fetch(3); err != nil {
		t.Fatal(err)
	}
	if got := c.logs[3].values(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("follower 3 after the diverging answer: %v, want [a b]", got)
	}
	if truncations != 1 {
		t.Fatalf("the node was told of %d truncations, want 1 (it saves the lowered recovery point at once)", truncations)
	}
	if _, err := c.replicas[2].Produce(context.Background(), AcksLeader, -1, plain(t, "d")); err != nil {
		t.Fatal(err)
	}
	c.replicate()
	for _, id := range []int32{2, 3} {
		if got := c.logs[id].values(); !slices.Equal(got, []string{"a", "b", "d"}) {
			t.Fatalf("replica %d: %v, want [a b d]", id, got)
		}
	}
}

// A follower whose log holds an epoch the leader's does not, past a shared
// older epoch that ends earlier in its own log than in the leader's, cuts
// back to where that epoch ends in its own log and fetches the leader's
// records; cutting only to the leader's end would keep the foreign records
// and answer the same divergence for ever.
func TestFollowerCutsToItsOwnEndOfTheSharedEpoch(t *testing.T) {
	c := newCluster(t, 1)
	if _, err := c.replicas[1].Produce(context.Background(), AcksLeader, -1, plain(t, "a", "b")); err != nil {
		t.Fatal(err)
	}
	c.replicate()
	if _, err := c.replicas[1].Produce(context.Background(), AcksLeader, -1, plain(t, "c", "d")); err != nil {
		t.Fatal(err)
	}
	c.fetch(2)                   // replica 2 has a b c d, all of epoch 0; replica 3 only a b
	c.elect(3, []int32{1, 2, 3}) // epoch 1: replica 3 leads from offset 2
	if _, err := c.replicas[3].Produce(context.Background(), AcksLeader, -1, plain(t, "e", "f")); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		c.fetch(1) // replica 1 cuts c d and takes e f (epoch 1)
	}
	if got := c.logs[1].values(); !slices.Equal(got, []string{"a", "b", "e", "f"}) {
		t.Fatalf("replica 1 following replica 3: %v", got)
	}
	c.cut[3] = true
	c.elect(2, []int32{1, 2}) // epoch 2: replica 2 (a b c d of epoch 0) leads
	for range 5 {
		if err := c.fetch(1); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.logs[1].values(); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("replica 1 following replica 2: %v, want [a b c d]", got)
	}
}

// Under flush.messages=1 the leader counts its own log toward the HW only
// once it is fsynced, as Kafka's leader flushes before its HW moves: a
// leader alone in the ISR does not let consumers read a record that is on
// no disk yet, and the produce is answered once it is.
func TestHWWaitsForTheLeadersSyncUnderFlushMessagesOne(t *testing.T) {
	c := newCluster(t, 1)
	c.elect(1, []int32{1})
	leader, l := c.replicas[1], c.logs[1]
	gate := make(chan struct{})
	l.mu.Lock()
	l.everyMessage, l.syncGate = true, gate
	l.mu.Unlock()
	for i, acks := range []int{AcksAll, AcksLeader} {
		at := record.Offset(i) // the record's offset
		done := produceAsync(leader, acks, plain(t, "a"), 5*time.Second)
		eventually(t, "the append", func() bool { return leader.Snapshot().LEO == at+1 })
		if hw := leader.Snapshot().HW; hw != at {
			t.Fatalf("acks=%d: HW %d before the fsync, want %d", acks, hw, at)
		}
		if r, err := leader.Fetch(at, 1<<20, false, -1); err != nil || len(r.Records) > 0 {
			t.Fatalf("acks=%d: a consumer read %d bytes not yet fsynced (%v)", acks, len(r.Records), err)
		}
		select {
		case o := <-done:
			t.Fatalf("acks=%d: answered (%+v) before the fsync", acks, o)
		case <-time.After(20 * time.Millisecond):
		}
		close(gate)
		if o := <-done; o.err != nil {
			t.Fatalf("acks=%d: %v", acks, o.err)
		}
		if hw := leader.Snapshot().HW; hw != at+1 {
			t.Fatalf("acks=%d: HW %d after the fsync, want %d", acks, hw, at+1)
		}
		gate = make(chan struct{})
		l.mu.Lock()
		l.syncGate = gate
		l.mu.Unlock()
	}
	close(gate)
}

// An ISR change names the broker epoch each member fetched at. A follower
// that restarts (a new registration) while the change's answer is lost is
// not added on the resend: the resend names the epoch the leader judged it
// by, the controller refuses it, and the leader forgets the change.
func TestISRResendNamesTheEpochTheMemberFetchedAt(t *testing.T) {
	c := newCluster(t, 1)
	c.mu.Lock()
	c.brokerEpochs = map[int32]int64{1: 10, 2: 20, 3: 30}
	c.mu.Unlock()
	c.elect(1, []int32{1})
	leader := c.replicas[1]
	if _, err := leader.Produce(context.Background(), AcksLeader, -1, plain(t, "a")); err != nil {
		t.Fatal(err)
	}
	c.held = make(chan func(), 4)
	c.fetch(2)
	c.fetch(2) // caught up at broker epoch 20: the leader proposes ISR [1 2]
	var answer func()
	select {
	case answer = <-c.held:
	case <-time.After(5 * time.Second):
		t.Fatal("no ISR proposal")
	}
	_ = answer // lost: never answered
	leader.mu.Lock()
	change := leader.pendingChange
	leader.pendingUnsure = true // as an answer without a verdict leaves it
	leader.mu.Unlock()
	if !slices.Equal(change.ISR, []int32{1, 2}) || !slices.Equal(change.BrokerEpochs, []int64{0, 20}) {
		t.Fatalf("proposed %v at broker epochs %v, want [1 2] at [0 20]", change.ISR, change.BrokerEpochs)
	}
	// Broker 2 restarts: registered again at epoch 21, with an empty log.
	c.mu.Lock()
	c.brokerEpochs[2] = 21
	c.mu.Unlock()
	c.held = nil
	if err := c.logs[2].TruncateFullyAndStartAt(0); err != nil {
		t.Fatal(err)
	}
	c.replicas[2].mu.Lock()
	c.replicas[2].hw = 0
	c.replicas[2].mu.Unlock()
	c.fetch(2)              // from offset 0, at epoch 21
	leader.MaybeShrinkISR() // the housekeeping tick resends the change
	eventually(t, "the refusal", func() bool {
		leader.mu.Lock()
		defer leader.mu.Unlock()
		return leader.pendingISR == nil
	})
	if st := leader.Snapshot().State; !slices.Equal(st.ISR, []int32{1}) {
		t.Fatalf("ISR %v after the resend, want [1]: the restarted broker joined on its old fetches", st.ISR)
	}
}

// A leader under flush.messages=1 whose log holds a tail not yet known to
// be fsynced (recovered after a restart) and no produce to sync it: the
// housekeeping tick's SyncTail fsyncs it, and the HW moves over it.
func TestSyncTailMovesTheHWOverARecoveredTail(t *testing.T) {
	c := newCluster(t, 1)
	c.elect(1, []int32{1})
	leader, l := c.replicas[1], c.logs[1]
	if _, err := leader.Produce(context.Background(), AcksLeader, -1, plain(t, "a", "b")); err != nil {
		t.Fatal(err)
	}
	// From now on the log counts only what is fsynced, and what it holds
	// was never synced under that rule: as a recovered tail.
	l.mu.Lock()
	l.everyMessage, l.synced = true, 0
	l.mu.Unlock()
	c.replicas[1].mu.Lock()
	c.replicas[1].hw = 0
	c.replicas[1].mu.Unlock()
	if err := leader.SyncTail(); err != nil {
		t.Fatal(err)
	}
	if s := leader.Snapshot(); s.HW != 2 || l.synced != 2 {
		t.Fatalf("after SyncTail: HW %d, synced to %d; want 2 and 2", s.HW, l.synced)
	}
	if err := leader.SyncTail(); err != nil { // nothing to do
		t.Fatal(err)
	}
	// Durable already (another fsync made it so, and moved no HW): the
	// tick moves the HW without a sync of its own.
	if _, err := leader.Produce(context.Background(), AcksNone, -1, plain(t, "c")); err != nil {
		t.Fatal(err)
	}
	c.replicas[1].mu.Lock()
	c.replicas[1].hw = 2
	c.replicas[1].mu.Unlock()
	if err := leader.SyncTail(); err != nil {
		t.Fatal(err)
	}
	if s := leader.Snapshot(); s.HW != 3 {
		t.Fatalf("after SyncTail over a durable tail: HW %d, want 3", s.HW)
	}
}

// A refused expansion is not proposed again at every fetch of the
// follower: a second passes first.
func TestRefusedExpansionWaitsBeforeItIsProposedAgain(t *testing.T) {
	c := newCluster(t, 1)
	c.elect(1, []int32{1})
	leader := c.replicas[1]
	if _, err := leader.Produce(context.Background(), AcksLeader, -1, plain(t, "a")); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.fenced = map[int32]bool{2: true} // as a broker in controlled shutdown that still fetches
	c.mu.Unlock()
	proposals := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.proposals
	}
	c.fetch(2)
	c.fetch(2) // caught up: proposed, and refused
	eventually(t, "the refusal", func() bool {
		leader.mu.Lock()
		defer leader.mu.Unlock()
		return leader.pendingISR == nil && proposals() == 1
	})
	for range 3 {
		c.fetch(2)
	}
	if n := proposals(); n != 1 {
		t.Fatalf("%d proposals within a second of a refused one, want 1", n)
	}
	c.advance(time.Second)
	c.mu.Lock()
	c.fenced = nil
	c.mu.Unlock()
	c.fetch(2)
	eventually(t, "ISR [1 2]", func() bool { return slices.Equal(leader.Snapshot().State.ISR, []int32{1, 2}) })
}

// A follower that comes back rejoins the ISR on its own fetches although
// another replica outside the ISR, gone and fenced, stopped at a LEO that
// is still at the HW (acks=all writes are refused while the ISR is too
// small, so the HW does not move): the leader proposes only the replica
// that fetched, and the controller does not refuse the change for the other.
func TestRejoiningFollowerIsNotHeldBackByAGoneOne(t *testing.T) {
	c := newCluster(t, 2)
	done := produceAsync(c.replicas[1], AcksAll, plain(t, "a"), 5*time.Second)
	eventually(t, "produce appended", func() bool { return c.replicas[1].Snapshot().LEO == 1 })
	c.replicate() // every replica has offset 0: LEO 1, the HW
	if o := <-done; o.err != nil {
		t.Fatal(o.err)
	}
	c.cut[2], c.cut[3] = true, true
	c.fenced = map[int32]bool{3: true}
	c.advance(11 * time.Second)
	c.replicas[1].MaybeShrinkISR()
	eventually(t, "ISR shrink to [1]", func() bool { return slices.Equal(c.replicas[1].Snapshot().State.ISR, []int32{1}) })

	c.cut[2] = false
	// The controller answers proposals on a goroutine of its own: fetch,
	// let time pass beyond any wait before a refused change is proposed
	// again, and look, until the ISR has 2 or a few seconds passed.
	deadline := time.Now().Add(3 * time.Second)
	for !slices.Equal(c.replicas[1].Snapshot().State.ISR, []int32{1, 2}) && time.Now().Before(deadline) {
		c.replicate()
		c.advance(2 * time.Second)
		time.Sleep(5 * time.Millisecond)
	}
	if isr := c.replicas[1].Snapshot().State.ISR; !slices.Equal(isr, []int32{1, 2}) {
		t.Fatalf("ISR %v with follower 2 back, want [1 2]", isr)
	}
	done = produceAsync(c.replicas[1], AcksAll, plain(t, "b"), 5*time.Second)
	eventually(t, "produce appended", func() bool { return c.replicas[1].Snapshot().LEO == 2 })
	c.replicate()
	if o := <-done; o.err != nil {
		t.Fatalf("acks=all with two of three replicas back: %v", o.err)
	}
}

// A follower refuses an answer holding a batch of a leader epoch above the
// one it fetched at: the leader it asked changed while it read, and the
// batch is the next leader's.
func TestFollowerRefusesABatchOfANewerEpoch(t *testing.T) {
	c := newCluster(t, 1)
	f := c.replicas[2]
	o := record.DefaultBatchOptions()
	o.PartitionLeaderEpoch = 1
	newer := batchOf(t, o, "the next leader's")
	err := f.ApplyFetched(0, 0, FollowerFetchResult{Records: newer, HW: 1, LogStartOffset: 0})
	if !errors.Is(err, errs.FencedLeaderEpoch) {
		t.Fatalf("a batch of epoch 1 fetched at epoch 0: %v, want FENCED_LEADER_EPOCH", err)
	}
	if s := f.Snapshot(); s.LEO != 0 || s.HW != 0 {
		t.Fatalf("LEO %d HW %d after the refused answer, want 0 and 0", s.LEO, s.HW)
	}
	// The leader's own batch goes in.
	if err := f.ApplyFetched(0, 0, FollowerFetchResult{Records: plain(t, "the leader's"), HW: 1}); err != nil {
		t.Fatal(err)
	}
	if s := f.Snapshot(); s.LEO != 1 {
		t.Fatalf("LEO %d after the leader's batch, want 1", s.LEO)
	}
}

// Every change of a leader's ISR is counted once, as the state that holds
// it is applied: the leader's own proposals (whose state both the answer
// and the metadata bring) and the controller's (a fenced member removed).
func TestISRChangesAreCountedOnce(t *testing.T) {
	c := newCluster(t, 1)
	var mu sync.Mutex
	shrinks, expands := 0, 0
	cfg := Config{MinInsyncReplicas: 1, MaxMessageBytes: 1 << 20, ReplicaLagMax: 10 * time.Second, ISRChanged: func(shrink bool) {
		mu.Lock()
		defer mu.Unlock()
		if shrink {
			shrinks++
		} else {
			expands++
		}
	}}
	c.replicas[1].SetConfig(cfg)
	counts := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return shrinks, expands
	}
	// The leader shrinks its ISR: counted once, though the answer and the
	// metadata both apply the new state.
	c.cut[3] = true
	c.advance(11 * time.Second)
	c.fetch(2)
	c.replicas[1].MaybeShrinkISR()
	eventually(t, "ISR shrink to [1 2]", func() bool { return slices.Equal(c.replicas[1].Snapshot().State.ISR, []int32{1, 2}) })
	c.push()
	if s, e := counts(); s != 1 || e != 0 {
		t.Fatalf("after the leader's shrink: %d shrinks, %d expands; want 1, 0", s, e)
	}
	// The controller fences broker 2: its state comes with the metadata.
	c.mu.Lock()
	c.state.PartitionEpoch++
	c.state.ISR = []int32{1}
	c.mu.Unlock()
	c.push()
	c.push()
	if s, e := counts(); s != 2 || e != 0 {
		t.Fatalf("after the controller's shrink: %d shrinks, %d expands; want 2, 0", s, e)
	}
	// Broker 3 catches up and is proposed back.
	c.cut[3] = false
	eventually(t, "ISR expand", func() bool {
		c.replicate()
		return slices.Contains(c.replicas[1].Snapshot().State.ISR, 3)
	})
	c.push()
	if s, e := counts(); s != 2 || e < 1 {
		t.Fatalf("after the expansion: %d shrinks, %d expands; want 2 and at least 1", s, e)
	}
	// Broker 2 is elected in place of 1, which the controller drops from
	// the ISR: the new leader counts the shrink.
	c.replicas[2].SetConfig(cfg)
	s0, _ := counts()
	c.mu.Lock()
	c.state.Leader, c.state.LeaderEpoch, c.state.PartitionEpoch = 2, c.state.LeaderEpoch+1, c.state.PartitionEpoch+1
	c.state.ISR = slices.DeleteFunc(slices.Clone(c.state.ISR), func(r int32) bool { return r == 1 })
	c.mu.Unlock()
	c.push()
	c.push()
	if s, _ := counts(); s != s0+1 {
		t.Fatalf("a new leader elected without the old one: %d shrinks counted, want 1", s-s0)
	}
}

// A new leader whose HW, kept from its time as a follower, is below where
// its epoch began answers the latest offset, and a lookup by time that
// finds nothing below that HW, with OFFSET_NOT_AVAILABLE until the ISR has
// fetched in the new epoch: it never answers an end below one its
// predecessor gave. The log start, and a time found below the HW, are
// answered at once.
func TestNewLeaderListsNoOffsetBelowItsEpochStart(t *testing.T) {
	c := newCluster(t, 1)
	for _, v := range []string{"a", "b"} {
		if _, err := c.replicas[1].Produce(context.Background(), AcksLeader, -1, plain(t, v)); err != nil {
			t.Fatal(err)
		}
	}
	c.replicate()
	// Replica 3 stops fetching; 1 and 2 take a third record, which the HW
	// cannot pass while 3 is in the ISR.
	c.cut[3] = true
	if _, err := c.replicas[1].Produce(context.Background(), AcksLeader, -1, plain(t, "c")); err != nil {
		t.Fatal(err)
	}
	c.replicate()
	if off, _, _, err := c.replicas[1].ListOffset(-1, false, -1); err != nil || off != 2 {
		t.Fatalf("latest on leader 1: %d, %v; want 2", off, err)
	}

	c.elect(2, []int32{2, 3})
	leader := c.replicas[2]
	if s := leader.Snapshot(); s.HW > 2 || s.LEO != 3 {
		t.Fatalf("new leader: HW %d, LEO %d; want the HW at most 2 and the LEO 3", s.HW, s.LEO)
	}
	for _, tc := range []struct {
		ts            int64
		readCommitted bool
	}{{-1, false}, {-1, true}, {time.Now().Add(time.Hour).UnixMilli(), false}} {
		if off, _, _, err := leader.ListOffset(tc.ts, tc.readCommitted, -1); errs.Of(err) != errs.OffsetNotAvailable {
			t.Errorf("ListOffset(%d, read_committed %v) before the ISR fetched in epoch 1: %d, %v; want OFFSET_NOT_AVAILABLE", tc.ts, tc.readCommitted, off, err)
		}
	}
	if off, _, _, err := leader.ListOffset(-2, false, -1); err != nil || off != 0 {
		t.Errorf("earliest: %d, %v; want 0", off, err)
	}
	if off, _, _, err := leader.ListOffset(0, false, -1); err != nil || off != 0 {
		t.Errorf("first offset at or after time 0: %d, %v; want 0", off, err)
	}

	c.cut[3] = false
	c.replicate()
	if off, _, _, err := leader.ListOffset(-1, false, -1); err != nil || off != 3 {
		t.Errorf("latest once the ISR fetched in epoch 1: %d, %v; want 3", off, err)
	}
	if off, _, _, err := leader.ListOffset(time.Now().Add(time.Hour).UnixMilli(), false, -1); err != nil || off != -1 {
		t.Errorf("a time after every record, once caught up: %d, %v; want -1", off, err)
	}
}

// A leader's answer holding a damaged batch: the follower takes the whole
// batches before it (so a replica catching up from such a leader gets that
// far, and reports it) and fails the fetch with CORRUPT_MESSAGE naming the
// batch, instead of refusing the whole answer.
func TestFollowerTakesTheBatchesBeforeADamagedOne(t *testing.T) {
	c := newCluster(t, 1)
	f := c.replicas[2]
	var data []byte
	for i, v := range []string{"a", "b", "c"} {
		b := record.Batch(plain(t, v))
		b.SetBaseOffset(record.Offset(i))
		data = append(data, b...)
	}
	data[len(data)-2] ^= 0xff // inside the third batch's checked bytes
	fs, ok := f.FollowerState()
	if !ok {
		t.Fatal("replica 2 is not a follower")
	}
	err := f.ApplyFetched(fs.CurrentLeaderEpoch, fs.FetchOffset, FollowerFetchResult{Records: data, HW: 3})
	if errs.Of(err) != errs.CorruptMessage || !strings.Contains(err.Error(), "at offset 2") {
		t.Fatalf("applying an answer with a damaged third batch: %v, want CORRUPT_MESSAGE naming offset 2", err)
	}
	if s := f.Snapshot(); s.LEO != 2 || s.HW != 2 {
		t.Errorf("follower after the answer: LEO %d, HW %d; want both 2 (the two whole batches before the damaged one)", s.LEO, s.HW)
	}
	if got := c.logs[2].values(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("follower's log %v, want [a b]", got)
	}
}
