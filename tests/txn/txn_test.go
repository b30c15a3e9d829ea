//go:build integration

package txn

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	controllerv1 "skein/gen/skein/controller/v1"
	txnv1 "skein/gen/skein/txn/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/libs/rpcerr"
	"skein/tests/cluster"
)

const (
	txnKind = controllerv1.CoordinatorKind_COORDINATOR_KIND_TRANSACTION
	topic   = "payments"
)

type env struct {
	t  *testing.T
	c  *cluster.Cluster
	cl *client.Client

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

func start(t *testing.T, flags ...string) *env {
	c := cluster.Start(t, cluster.Options{})
	c.StartTxnCoordinators(2, flags...)
	cl, err := client.New(client.Config{Controllers: c.ControllerAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, c: c, cl: cl, conns: map[string]*grpc.ClientConn{}}
	t.Cleanup(func() {
		cl.Close()
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, cc := range e.conns {
			cc.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: 2, ReplicationFactor: 3, Configs: map[string]string{"min.insync.replicas": "2"}}); err != nil {
		t.Fatal(err)
	}
	// Every __transaction_state partition owned before the first call.
	if _, err := cl.WaitMetadata(ctx, func(m *metadata.Image) bool {
		n := m.PartitionCount(metadata.TransactionStateTopic)
		owned := 0
		for _, a := range m.Assignments(txnKind) {
			if a.ProducerId != nil {
				owned++
			}
		}
		return n > 0 && int32(owned) == n && m.PartitionCount(topic) == 2
	}); err != nil {
		t.Fatal(err)
	}
	return e
}

// coordinator answers a client of the transaction coordinator that owns id.
func (e *env) coordinator(ctx context.Context, id string) txnv1.TransactionCoordinatorServiceClient {
	e.t.Helper()
	co, err := e.cl.FindCoordinator(ctx, client.TransactionCoordinator, id)
	if err != nil {
		e.t.Fatalf("find coordinator of %q: %v", id, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	cc, ok := e.conns[co.Addr]
	if !ok {
		cc, err = grpc.NewClient(co.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			e.t.Fatal(err)
		}
		e.conns[co.Addr] = cc
	}
	return txnv1.NewTransactionCoordinatorServiceClient(cc)
}

// call runs f against id's coordinator, finding it again while the answer
// says to ask another (a coordinator moving or loading).
func call[T any](e *env, id string, f func(context.Context, txnv1.TransactionCoordinatorServiceClient) (T, error)) (T, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		actx, acancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := f(actx, e.coordinator(ctx, id))
		acancel()
		err = rpcerr.FromStatus(err)
		switch errs.Of(err) {
		case errs.NotCoordinator, errs.CoordinatorLoadInProgress, errs.CoordinatorNotAvailable, errs.RequestTimedOut, errs.NetworkException:
			if ctx.Err() != nil {
				return resp, err
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		return resp, err
	}
}

// producer is one transactional producer's identity.
type producer struct {
	e     *env
	id    string
	pid   int64
	epoch int32
	seq   map[int32]int32
}

func (e *env) initProducer(id string, timeout time.Duration) *producer {
	e.t.Helper()
	for {
		resp, err := call(e, id, func(ctx context.Context, c txnv1.TransactionCoordinatorServiceClient) (*txnv1.InitProducerIdResponse, error) {
			return c.InitProducerId(ctx, &txnv1.InitProducerIdRequest{TransactionalId: id, TransactionTimeoutMs: int32(timeout / time.Millisecond), ProducerId: -1, ProducerEpoch: -1})
		})
		if err != nil {
			e.t.Fatalf("InitProducerId(%s): %v", id, err)
		}
		if resp.GetErrorCode() == skeinv1.ErrorCode_CONCURRENT_TRANSACTIONS {
			time.Sleep(100 * time.Millisecond) // the previous instance's transaction is being aborted
			continue
		}
		if resp.GetErrorCode() != skeinv1.ErrorCode_NONE {
			e.t.Fatalf("InitProducerId(%s): %s %s", id, resp.GetErrorCode(), resp.GetErrorMessage())
		}
		return &producer{e: e, id: id, pid: resp.GetProducerId(), epoch: resp.GetProducerEpoch(), seq: map[int32]int32{}}
	}
}

func (p *producer) addPartitions(parts ...int32) error {
	// CONCURRENT_TRANSACTIONS: the previous transaction is still completing
	// (its markers); ask again, as the client does.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := call(p.e, p.id, func(ctx context.Context, c txnv1.TransactionCoordinatorServiceClient) (*txnv1.AddPartitionsToTxnResponse, error) {
			return c.AddPartitionsToTxn(ctx, &txnv1.AddPartitionsToTxnRequest{TransactionalId: p.id, ProducerId: p.pid, ProducerEpoch: p.epoch,
				Partitions: []*txnv1.TopicPartitions{{Topic: topic, Partitions: parts}}})
		})
		if err != nil {
			return err
		}
		var first error
		for _, r := range resp.GetPartitions() {
			if r.GetErrorCode() != skeinv1.ErrorCode_NONE && first == nil {
				first = errs.Errorf(errs.ForCode(errs.Code(r.GetErrorCode())), "%s", r.GetErrorMessage())
			}
		}
		if errs.Of(first) != errs.ConcurrentTransactions || time.Now().After(deadline) {
			return first
		}
	}
}

func (p *producer) produce(part int32, values ...string) error {
	recs := make([]client.Record, len(values))
	for i, v := range values {
		recs[i] = client.Record{Value: []byte(v)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := p.e.cl.ProduceBatch(ctx, topic, part, client.AcksAll, client.BatchIdentity{
		ProducerID: p.pid, ProducerEpoch: int16(p.epoch), BaseSequence: p.seq[part], TransactionalID: p.id}, recs)
	if err == nil {
		p.seq[part] += int32(len(values))
	}
	return err
}

// end commits or aborts and takes the epoch the coordinator bumped.
func (p *producer) end(commit bool) error {
	resp, err := call(p.e, p.id, func(ctx context.Context, c txnv1.TransactionCoordinatorServiceClient) (*txnv1.EndTxnResponse, error) {
		return c.EndTxn(ctx, &txnv1.EndTxnRequest{TransactionalId: p.id, ProducerId: p.pid, ProducerEpoch: p.epoch, Committed: commit})
	})
	if err != nil {
		return err
	}
	if resp.GetErrorCode() != skeinv1.ErrorCode_NONE {
		return errs.Errorf(errs.ForCode(errs.Code(resp.GetErrorCode())), "%s", resp.GetErrorMessage())
	}
	if resp.GetProducerId() != p.pid || resp.GetProducerEpoch() != p.epoch {
		p.pid, p.epoch = resp.GetProducerId(), resp.GetProducerEpoch()
		clear(p.seq) // a new epoch starts its sequences at 0
	}
	return nil
}

// read answers the values of a partition as an isolation level sees them,
// reading up to its end (the LSO for read_committed), and that end.
func (e *env) read(part int32, iso skeinv1.IsolationLevel) ([]string, int64) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []string
	var off int64
	for {
		res, err := e.cl.Fetch(ctx, client.FetchRequest{Topic: topic, Partition: part, Offset: off, MaxBytes: 1 << 20, Isolation: iso})
		if err != nil {
			e.t.Fatalf("fetch %s-%d at %d: %v", topic, part, off, err)
		}
		for _, r := range res.Records {
			out = append(out, string(r.Value))
		}
		end := res.HighWatermark
		if iso == skeinv1.IsolationLevel_READ_COMMITTED {
			end = res.LastStableOffset
		}
		if res.NextOffset >= end || res.NextOffset == off {
			return out, end
		}
		off = res.NextOffset
	}
}

func eventually(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	end := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("waited %v for %s: %v", d, what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func equal(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// A committed transaction's records appear for read_committed readers only
// at the commit, an aborted one's never; a produce of the ended
// transaction's epoch is refused; bad calls answer their codes.
func TestCommitAbortAndFencing(t *testing.T) {
	e := start(t)
	// An idempotent producer (no transactional id) gets a fresh id from
	// any coordinator, each call another.
	seen := map[int64]bool{}
	for range 3 {
		resp, err := call(e, "idempotent", func(ctx context.Context, c txnv1.TransactionCoordinatorServiceClient) (*txnv1.InitProducerIdResponse, error) {
			return c.InitProducerId(ctx, &txnv1.InitProducerIdRequest{ProducerId: -1, ProducerEpoch: -1})
		})
		if err != nil || resp.GetErrorCode() != skeinv1.ErrorCode_NONE || resp.GetProducerEpoch() != 0 || seen[resp.GetProducerId()] {
			t.Fatalf("idempotent InitProducerId: %v %v (seen %v)", resp, err, seen)
		}
		seen[resp.GetProducerId()] = true
	}

	p := e.initProducer("billing-1", time.Minute)
	t.Logf("producer id %d epoch %d", p.pid, p.epoch)

	// Refused before anything is open.
	if err := p.end(true); errs.Of(err) != errs.InvalidTxnState {
		t.Errorf("commit with nothing in the transaction: %v, want INVALID_TXN_STATE", err)
	}

	if err := p.addPartitions(0, 1); err != nil {
		t.Fatal(err)
	}
	if err := p.produce(0, "a1", "a2"); err != nil {
		t.Fatal(err)
	}
	if err := p.produce(1, "b1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.read(0, skeinv1.IsolationLevel_READ_COMMITTED); len(got) != 0 {
		t.Errorf("read_committed sees %v before the commit", got)
	}
	if got, _ := e.read(0, skeinv1.IsolationLevel_READ_UNCOMMITTED); !equal(got, []string{"a1", "a2"}) {
		t.Errorf("read_uncommitted sees %v, want a1 a2", got)
	}
	// EndTxn from a wrong producer id or an older epoch changes nothing.
	bad := *p
	bad.pid++
	if err := bad.end(true); errs.Of(err) != errs.InvalidProducerIDMapping {
		t.Errorf("EndTxn with another producer id: %v, want INVALID_PRODUCER_ID_MAPPING", err)
	}
	oldEpoch := p.epoch
	if err := p.end(true); err != nil {
		t.Fatal(err)
	}
	if p.epoch <= oldEpoch {
		t.Errorf("epoch %d after EndTxn, want above %d", p.epoch, oldEpoch)
	}
	eventually(t, 10*time.Second, "the commit visible to read_committed", func() error {
		a, _ := e.read(0, skeinv1.IsolationLevel_READ_COMMITTED)
		b, _ := e.read(1, skeinv1.IsolationLevel_READ_COMMITTED)
		if !equal(a, []string{"a1", "a2"}) || !equal(b, []string{"b1"}) {
			return fmt.Errorf("partition 0 %v, partition 1 %v", a, b)
		}
		return nil
	})

	// A late produce of the committed transaction's epoch is refused.
	late := &producer{e: e, id: p.id, pid: p.pid, epoch: oldEpoch, seq: map[int32]int32{0: 2}}
	if err := late.produce(0, "late"); err == nil || (errs.Of(err) != errs.InvalidProducerEpoch && errs.Of(err) != errs.ProducerFenced) {
		t.Errorf("a produce of the ended transaction's epoch: %v, want INVALID_PRODUCER_EPOCH or PRODUCER_FENCED", err)
	}

	// The next transaction, aborted.
	if err := p.addPartitions(0); err != nil {
		t.Fatal(err)
	}
	if err := p.produce(0, "x1", "x2"); err != nil {
		t.Fatal(err)
	}
	if err := p.end(false); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the abort settled", func() error {
		got, lso := e.read(0, skeinv1.IsolationLevel_READ_COMMITTED)
		_, hw := e.read(0, skeinv1.IsolationLevel_READ_UNCOMMITTED)
		if !equal(got, []string{"a1", "a2"}) || lso != hw {
			return fmt.Errorf("read_committed %v, LSO %d, HW %d", got, lso, hw)
		}
		return nil
	})

	// A new instance of the id fences the old one and aborts its open
	// transaction.
	if err := p.addPartitions(1); err != nil {
		t.Fatal(err)
	}
	if err := p.produce(1, "zombie"); err != nil {
		t.Fatal(err)
	}
	q := e.initProducer("billing-1", time.Minute)
	if q.epoch <= p.epoch && q.pid == p.pid {
		t.Errorf("new instance got epoch %d, not above %d", q.epoch, p.epoch)
	}
	if err := p.addPartitions(0); errs.Of(err) != errs.ProducerFenced {
		t.Errorf("the fenced instance's AddPartitions: %v, want PRODUCER_FENCED", err)
	}
	if err := p.end(true); errs.Of(err) != errs.ProducerFenced {
		t.Errorf("the fenced instance's EndTxn: %v, want PRODUCER_FENCED", err)
	}
	eventually(t, 10*time.Second, "the zombie's transaction aborted", func() error {
		got, lso := e.read(1, skeinv1.IsolationLevel_READ_COMMITTED)
		_, hw := e.read(1, skeinv1.IsolationLevel_READ_UNCOMMITTED)
		if !equal(got, []string{"b1"}) || lso != hw {
			return fmt.Errorf("read_committed %v, LSO %d, HW %d", got, lso, hw)
		}
		return nil
	})
}

// A producer that never ends its transaction is aborted at its timeout and
// the last stable offset moves on.
func TestHungTransactionIsAbortedAtItsTimeout(t *testing.T) {
	e := start(t)
	p := e.initProducer("hung-1", 2*time.Second)
	if err := p.addPartitions(0); err != nil {
		t.Fatal(err)
	}
	if err := p.produce(0, "h1", "h2", "h3"); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if _, lso := e.read(0, skeinv1.IsolationLevel_READ_COMMITTED); lso != 0 {
		t.Fatalf("LSO %d with the transaction open, want 0", lso)
	}
	eventually(t, 30*time.Second, "the timeout abort", func() error {
		got, lso := e.read(0, skeinv1.IsolationLevel_READ_COMMITTED)
		_, hw := e.read(0, skeinv1.IsolationLevel_READ_UNCOMMITTED)
		if len(got) != 0 || lso != hw || hw == 0 {
			return fmt.Errorf("read_committed %v, LSO %d, HW %d", got, lso, hw)
		}
		return nil
	})
	t.Logf("aborted and the LSO moved %v after the transaction began (timeout 2 s)", time.Since(began).Round(100*time.Millisecond))
	if err := p.end(true); errs.Of(err) != errs.ProducerFenced && errs.Of(err) != errs.InvalidProducerEpoch {
		t.Errorf("commit after the timeout abort: %v, want PRODUCER_FENCED", err)
	}
}

// The transaction coordinator that owns an open transaction is killed; the
// other takes its partitions over and commits the transaction.
func TestTransactionSurvivesItsCoordinator(t *testing.T) {
	e := start(t)
	p := e.initProducer("failover-1", time.Minute)
	if err := p.addPartitions(0, 1); err != nil {
		t.Fatal(err)
	}
	if err := p.produce(0, "f1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	co, err := e.cl.FindCoordinator(ctx, client.TransactionCoordinator, p.id)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	for _, proc := range e.c.TxnCoords {
		if proc.GRPCAddr == co.Addr {
			e.c.Kill(proc)
			t.Logf("killed txncoord-%d, the owner of %q", proc.ID, p.id)
		}
	}
	killed := time.Now()
	if err := p.produce(1, "f2"); err != nil {
		t.Fatal(err)
	}
	if err := p.end(true); err != nil {
		t.Fatalf("commit through the new coordinator: %v", err)
	}
	t.Logf("committed through the new owner %v after the kill", time.Since(killed).Round(100*time.Millisecond))
	eventually(t, 10*time.Second, "the commit visible", func() error {
		a, _ := e.read(0, skeinv1.IsolationLevel_READ_COMMITTED)
		b, _ := e.read(1, skeinv1.IsolationLevel_READ_COMMITTED)
		if !equal(a, []string{"f1"}) || !equal(b, []string{"f2"}) {
			return fmt.Errorf("partition 0 %v, partition 1 %v", a, b)
		}
		return nil
	})
}
