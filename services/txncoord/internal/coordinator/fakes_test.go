package coordinator

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	txnv1 "skein/gen/skein/txn/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/services/txncoord/internal/txn"
)

// markerCall is one WriteMarkers that succeeded.
type markerCall struct {
	ProducerID       int64
	Epoch            int16
	Commit           bool
	CoordinatorEpoch int32
	Partitions       string // txn.FormatPartitions
}

func (m markerCall) String() string {
	return fmt.Sprintf("pid=%d epoch=%d commit=%v coord=%d %s", m.ProducerID, m.Epoch, m.Commit, m.CoordinatorEpoch, m.Partitions)
}

// fakeMarkers records the markers written; it can fail the next attempts
// and hold every attempt until released.
type fakeMarkers struct {
	mu       sync.Mutex
	calls    []markerCall
	attempts int
	fail     int           // the next fail attempts answer an error
	hold     chan struct{} // when not nil, attempts wait for it to close (or ctx to end)
}

func (f *fakeMarkers) WriteMarkers(ctx context.Context, producerID int64, epoch int16, commit bool, coordinatorEpoch int32, partitions []txn.TopicPartition) error {
	f.mu.Lock()
	f.attempts++
	hold := f.hold
	if f.fail > 0 {
		f.fail--
		f.mu.Unlock()
		return errs.Errorf(errs.NotLeaderOrFollower, "injected marker failure")
	}
	f.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return errs.Errorf(errs.RequestTimedOut, "held: %v", ctx.Err())
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, markerCall{producerID, epoch, commit, coordinatorEpoch, txn.FormatPartitions(partitions)})
	return nil
}

func (f *fakeMarkers) written() []markerCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeMarkers) tries() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts
}

// clock is a fake clock that moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

const (
	nParts       = 4 // partitions of __transaction_state
	offsetsParts = 5 // partitions of __consumer_offsets
)

var topics = map[string]int32{"t": 4, "u": 2}

// owning answers a view in which the node owns parts at epoch, producer id
// 100+partition.
func owning(epoch int32, parts ...int32) View {
	v := View{Partitions: nParts, OffsetsPartitions: offsetsParts, Topics: topics, Owned: map[int32]Ownership{}, Registered: true}
	for _, p := range parts {
		v.Owned[p] = Ownership{Epoch: epoch, ProducerID: 100 + int64(p)}
	}
	return v
}

func all() []int32 { return []int32{0, 1, 2, 3} }

// env is one test cluster: a log, a clock and a producer id counter shared
// by its coordinators.
type env struct {
	t     *testing.T
	log   *memLog
	clock *clock
	pids  atomic.Int64
}

func newEnv(t *testing.T) *env {
	e := &env{t: t, log: newMemLog(), clock: newClock()}
	e.pids.Store(999)
	return e
}

func (e *env) config(node int32) Config {
	return Config{
		NodeID:             node,
		Now:                e.clock.Now,
		WriteTimeout:       500 * time.Millisecond,
		MarkersTimeout:     2 * time.Second,
		AllocateProducerID: func(context.Context) (int64, error) { return e.pids.Add(1), nil },
		Logger:             slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// start runs a coordinator with markers m, metrics registered on a fresh
// registry when metrics is not nil.
func (e *env) start(node int32, m Markers, v View, metrics *Metrics) *Coordinator {
	e.t.Helper()
	c := New(e.config(node), e.log, m, metrics)
	e.t.Cleanup(c.Close)
	c.OnMetadata(v)
	return c
}

// partitionOf answers the __transaction_state partition of an id.
func partitionOf(id string) int32 { return metadata.CoordinatorPartition(id, nParts) }

// idOn answers a transactional id on partition p (other than not).
func idOn(p int32, not ...string) string {
	for i := 0; ; i++ {
		id := fmt.Sprint("tx-", i)
		if partitionOf(id) == p && !slices.Contains(not, id) {
			return id
		}
	}
}

// eventually polls cond until it holds (5 s).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitServing(t *testing.T, c *Coordinator, id string) {
	t.Helper()
	var err error
	eventually(t, "serving "+id, func() bool { _, err = c.partitionFor(id); return err == nil })
}

func rowOf(code skeinv1.ErrorCode) *errs.Error { return errs.ForCode(errs.Code(code)) }

func initTxn(t *testing.T, c *Coordinator, id string, timeoutMs int32) (int64, int16) {
	t.Helper()
	resp, err := c.InitProducerId(context.Background(), &txnv1.InitProducerIdRequest{TransactionalId: id, TransactionTimeoutMs: timeoutMs,
		ProducerId: -1, ProducerEpoch: -1})
	if err != nil || resp.GetErrorCode() != skeinv1.ErrorCode_NONE {
		t.Fatalf("InitProducerId %s: %v %v %s", id, err, resp.GetErrorCode(), resp.GetErrorMessage())
	}
	return resp.GetProducerId(), int16(resp.GetProducerEpoch())
}

// addParts adds partitions ("t:0") and answers each one's row.
func addParts(c *Coordinator, id string, pid int64, epoch int32, parts ...txn.TopicPartition) ([]*errs.Error, error) {
	req := &txnv1.AddPartitionsToTxnRequest{TransactionalId: id, ProducerId: pid, ProducerEpoch: epoch}
	for _, p := range parts {
		req.Partitions = append(req.Partitions, &txnv1.TopicPartitions{Topic: p.Topic, Partitions: []int32{p.Partition}})
	}
	resp, err := c.AddPartitionsToTxn(context.Background(), req)
	if err != nil {
		return nil, err
	}
	out := make([]*errs.Error, len(resp.GetPartitions()))
	for i, r := range resp.GetPartitions() {
		out[i] = rowOf(r.GetErrorCode())
	}
	return out, nil
}

// mustAdd adds partitions and fails the test unless every one is added.
func mustAdd(t *testing.T, c *Coordinator, id string, pid int64, epoch int16, parts ...txn.TopicPartition) {
	t.Helper()
	rows, err := addParts(c, id, pid, int32(epoch), parts...)
	if err != nil {
		t.Fatalf("AddPartitionsToTxn %s: %v", id, err)
	}
	for i, r := range rows {
		if r != errs.None {
			t.Fatalf("AddPartitionsToTxn %s %v: %s", id, parts[i], r.Name)
		}
	}
}

func addOffsets(c *Coordinator, id string, pid int64, epoch int32, group string) (*errs.Error, error) {
	resp, err := c.AddOffsetsToTxn(context.Background(), &txnv1.AddOffsetsToTxnRequest{TransactionalId: id, ProducerId: pid, ProducerEpoch: epoch, GroupId: group})
	if err != nil {
		return nil, err
	}
	return rowOf(resp.GetErrorCode()), nil
}

func endTxn(c *Coordinator, id string, pid int64, epoch int32, commit bool) (*txnv1.EndTxnResponse, *errs.Error, error) {
	resp, err := c.EndTxn(context.Background(), &txnv1.EndTxnRequest{TransactionalId: id, ProducerId: pid, ProducerEpoch: epoch, Committed: commit})
	if err != nil {
		return nil, nil, err
	}
	return resp, rowOf(resp.GetErrorCode()), nil
}

func describe(c *Coordinator, id string) *txnv1.TransactionDescription {
	resp, _ := c.DescribeTransactions(context.Background(), &txnv1.DescribeTransactionsRequest{TransactionalIds: []string{id}})
	return resp.GetTransactions()[0]
}

func waitState(t *testing.T, c *Coordinator, id string, state txn.State) *txnv1.TransactionDescription {
	t.Helper()
	var d *txnv1.TransactionDescription
	eventually(t, fmt.Sprintf("%s in %s", id, state), func() bool {
		d = describe(c, id)
		return d.GetErrorCode() == skeinv1.ErrorCode_NONE && d.GetState() == string(state)
	})
	return d
}

func tp(topic string, p int32) txn.TopicPartition {
	return txn.TopicPartition{Topic: topic, Partition: p}
}

// states answers the transaction records of a partition as "id STATE/epoch"
// ("id -" for a tombstone), owner records left out.
func states(t *testing.T, log *memLog, partition int32) []string {
	t.Helper()
	var out []string
	for _, e := range log.records(partition) {
		if isOwnerKey(e.Key) {
			continue
		}
		r, err := txn.Decode(e.Key, e.Value)
		if err != nil {
			t.Fatalf("offset %d: %v", e.Offset, err)
		}
		if r.State == txn.Dead {
			out = append(out, r.TransactionalID+" -")
			continue
		}
		out = append(out, fmt.Sprintf("%s %s/%d", r.TransactionalID, r.State, r.ProducerEpoch))
	}
	return out
}

// totalSize answers the transaction records in every partition of the log.
// Owner records are left out: a coordinator writes one as it takes each
// partition, and partitions other than those a test waited for may still
// be loading while it counts.
func totalSize(log *memLog) int {
	n := 0
	for p := int32(0); p < nParts; p++ {
		for _, e := range log.records(p) {
			if !isOwnerKey(e.Key) {
				n++
			}
		}
	}
	return n
}
