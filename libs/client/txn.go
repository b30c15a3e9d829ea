package client

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	controllerv1 "skein/gen/skein/controller/v1"
	groupv1 "skein/gen/skein/group/v1"
	txnv1 "skein/gen/skein/txn/v1"
	"skein/libs/errs"
	"skein/libs/rpcerr"
)

// Transactions reaches the transaction coordinators: it finds the one that
// owns a transactional id (cached per id, looked up again when the answer
// says it lives elsewhere or its owner is loading) and calls
// TransactionCoordinatorService there, retrying with backoff while the id
// moves, and retrying CONCURRENT_TRANSACTIONS (the previous transaction is
// still completing) until ctx ends. It is safe for concurrent use.
type Transactions struct {
	c *Client

	owners *ownerCache // by transactional id

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn // by address; guarded by mu
}

// Transactions returns a new handle on the transaction coordinators; Close
// it when done.
func (c *Client) Transactions() *Transactions {
	return &Transactions{c: c, conns: map[string]*grpc.ClientConn{}, owners: newOwnerCache(TransactionCoordinator, "transactional id")}
}

// Close closes the coordinator connections.
func (t *Transactions) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, cc := range t.conns {
		cc.Close()
	}
	t.conns = map[string]*grpc.ClientConn{}
	return nil
}

func (t *Transactions) conn(addr string) (txnv1.TransactionCoordinatorServiceClient, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cc, ok := t.conns[addr]
	if !ok {
		var err error
		if cc, err = grpc.NewClient(addr, t.c.dialOptions()...); err != nil {
			return nil, err
		}
		t.conns[addr] = cc
	}
	return txnv1.NewTransactionCoordinatorServiceClient(cc), nil
}

// call runs fn against the id's coordinator; fn answers the call's error,
// including one carried in the answer.
func (t *Transactions) call(ctx context.Context, id string, fn func(context.Context, txnv1.TransactionCoordinatorServiceClient) error, also ...*errs.Error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultAPITimeout)
		defer cancel()
	}
	var cause error // the last retriable refusal, for a retry the deadline cuts short
	for attempt := 0; ; attempt++ {
		co, err := t.owners.owner(ctx, t.c, id)
		if err == nil {
			var cl txnv1.TransactionCoordinatorServiceClient
			if cl, err = t.conn(co.Addr); err == nil {
				err = t.c.callOwner(ctx, TransactionCoordinator, co, func(ctx context.Context) error { return fn(ctx, cl) })
			}
			if err != nil {
				err = rpcerr.FromStatus(err)
				if coordinatorErr(err) {
					t.owners.forget(id, co)
				}
			}
		}
		if err != nil && cause != nil && errs.Of(err) == errs.RequestTimedOut {
			// The call the deadline cut short (ours, or the server's
			// copy of it, which may fire first) says only that, and its
			// outcome is unknown: it may have reached the coordinator.
			// The refusal before it says why it was being retried.
			return errs.Errorf(errs.RequestTimedOut, "%s; the attempt before it was refused: %s: %s", errs.Message(err), errs.Of(cause).Name, errs.Message(cause))
		}
		concurrent := errs.Of(err) == errs.ConcurrentTransactions
		if err == nil || !(concurrent || coordinatorErr(err) || slices.Contains(also, errs.Of(err))) || ctx.Err() != nil {
			return err
		}
		cause = err
		t.c.log.DebugContext(ctx, "transaction coordinator call failed, retrying", "transactional_id", id, "err", err)
		wait := min(t.c.backoff(attempt), time.Second)
		if concurrent {
			// The previous transaction is completing (its markers and the
			// COMPLETE state, a few milliseconds): ask again soon, as
			// Kafka's producer does, rather than at the retry backoff.
			wait = min(concurrentBackoff<<min(attempt, 5), 100*time.Millisecond)
		}
		if sleep(ctx, wait) != nil {
			return err // nothing was sent since: the refusal is the answer
		}
	}
}

// concurrentBackoff is the first wait after CONCURRENT_TRANSACTIONS.
const concurrentBackoff = 2 * time.Millisecond

// InitProducerID answers the producer id and epoch of a transactional id:
// a new id gets a fresh producer id; a known one gets its epoch bumped,
// which fences every older producer of the id and aborts the transaction
// one of them left open. An empty id is an idempotent producer: a fresh
// producer id at epoch 0 from this client's block. timeout is the
// transaction timeout (0: the coordinator's default of 1 minute).
func (t *Transactions) InitProducerID(ctx context.Context, id string, timeout time.Duration) (int64, int16, error) {
	if id == "" {
		pid, err := t.c.AllocateProducerID(ctx)
		return pid, 0, err
	}
	if timeout <= 0 {
		timeout = time.Minute
	}
	var resp *txnv1.InitProducerIdResponse
	err := t.call(ctx, id, func(ctx context.Context, cl txnv1.TransactionCoordinatorServiceClient) error {
		var err error
		resp, err = cl.InitProducerId(ctx, &txnv1.InitProducerIdRequest{TransactionalId: id, TransactionTimeoutMs: int32(timeout / time.Millisecond), ProducerId: -1, ProducerEpoch: -1})
		if err != nil {
			return err
		}
		return codeErr(resp.GetErrorCode(), resp.GetErrorMessage())
	})
	if err != nil {
		return -1, -1, err
	}
	return resp.GetProducerId(), int16(resp.GetProducerEpoch()), nil
}

// AddPartitions adds partitions to the id's open transaction (opening one
// if none is), answering the first partition's refusal.
func (t *Transactions) AddPartitions(ctx context.Context, id string, pid int64, epoch int16, parts []TopicPartition) error {
	byTopic := map[string]*txnv1.TopicPartitions{}
	var req txnv1.AddPartitionsToTxnRequest
	req.TransactionalId, req.ProducerId, req.ProducerEpoch = id, pid, int32(epoch)
	for _, p := range parts {
		tp, ok := byTopic[p.Topic]
		if !ok {
			tp = &txnv1.TopicPartitions{Topic: p.Topic}
			byTopic[p.Topic] = tp
			req.Partitions = append(req.Partitions, tp)
		}
		tp.Partitions = append(tp.Partitions, p.Partition)
	}
	// The caller found the partitions in its metadata: a coordinator that
	// does not know one yet has not seen the topic's creation, so it is
	// asked again (retriable, as Kafka's producer retries it) until ctx
	// ends.
	return t.call(ctx, id, func(ctx context.Context, cl txnv1.TransactionCoordinatorServiceClient) error {
		resp, err := cl.AddPartitionsToTxn(ctx, &req)
		if err != nil {
			return err
		}
		for _, r := range resp.GetPartitions() {
			if err := codeErr(r.GetErrorCode(), r.GetErrorMessage()); err != nil {
				return err
			}
		}
		return nil
	}, errs.UnknownTopicOrPartition)
}

// AddOffsets adds a group's offsets to the id's open transaction; the
// offsets themselves go to the group's coordinator with TxnCommitOffsets.
func (t *Transactions) AddOffsets(ctx context.Context, id string, pid int64, epoch int16, group string) error {
	return t.call(ctx, id, func(ctx context.Context, cl txnv1.TransactionCoordinatorServiceClient) error {
		resp, err := cl.AddOffsetsToTxn(ctx, &txnv1.AddOffsetsToTxnRequest{TransactionalId: id, ProducerId: pid, ProducerEpoch: int32(epoch), GroupId: group})
		if err != nil {
			return err
		}
		return codeErr(resp.GetErrorCode(), resp.GetErrorMessage())
	})
}

// End commits or aborts the id's open transaction and answers the producer
// id and epoch of the producer's next transaction (every end bumps the
// epoch).
func (t *Transactions) End(ctx context.Context, id string, pid int64, epoch int16, commit bool) (int64, int16, error) {
	var resp *txnv1.EndTxnResponse
	err := t.call(ctx, id, func(ctx context.Context, cl txnv1.TransactionCoordinatorServiceClient) error {
		var err error
		resp, err = cl.EndTxn(ctx, &txnv1.EndTxnRequest{TransactionalId: id, ProducerId: pid, ProducerEpoch: int32(epoch), Committed: commit})
		if err != nil {
			return err
		}
		return codeErr(resp.GetErrorCode(), resp.GetErrorMessage())
	})
	if err != nil {
		return -1, -1, err
	}
	return resp.GetProducerId(), int16(resp.GetProducerEpoch()), nil
}

// TxnCommitOffsets records a transaction's offsets for a group at the
// group's coordinator; they become the group's committed offsets only when
// the transaction commits. It answers the per-partition results.
func (g *Groups) TxnCommitOffsets(ctx context.Context, req *groupv1.TxnOffsetCommitRequest) ([]*groupv1.PartitionResult, error) {
	var resp *groupv1.TxnOffsetCommitResponse
	err := g.call(ctx, req.GetGroupId(), func(ctx context.Context, cl groupv1.GroupCoordinatorServiceClient) error {
		var err error
		if resp, err = cl.TxnOffsetCommit(ctx, req); err != nil {
			return err
		}
		return allMoved(resp.GetPartitions())
	})
	if err != nil {
		return nil, err
	}
	return resp.GetPartitions(), nil
}

// CompleteTxnOffsets tells a group's coordinator that a transaction of the
// producer ended: committed, its pending offsets (written with an epoch
// below epoch) become the group's committed offsets; aborted, they are
// dropped. Repeating it is harmless. The transaction coordinator calls it
// for every group of a transaction, after the markers.
func (g *Groups) CompleteTxnOffsets(ctx context.Context, group string, pid int64, epoch int16, commit bool) error {
	return g.call(ctx, group, func(ctx context.Context, cl groupv1.GroupCoordinatorServiceClient) error {
		_, err := cl.CompleteTxnOffsets(ctx, &groupv1.CompleteTxnOffsetsRequest{GroupId: group, ProducerId: pid, ProducerEpoch: int32(epoch), Committed: commit})
		return err
	})
}

// Describe answers a transactional id's state from its coordinator
// (Kafka's DescribeTransactions): TRANSACTIONAL_ID_NOT_FOUND for an id with
// no state, TRANSACTIONAL_ID_AUTHORIZATION_FAILED for one the caller may
// not describe.
func (t *Transactions) Describe(ctx context.Context, id string) (*txnv1.TransactionDescription, error) {
	var d *txnv1.TransactionDescription
	err := t.call(ctx, id, func(ctx context.Context, cl txnv1.TransactionCoordinatorServiceClient) error {
		resp, err := cl.DescribeTransactions(ctx, &txnv1.DescribeTransactionsRequest{TransactionalIds: []string{id}})
		if err != nil {
			return err
		}
		for _, td := range resp.GetTransactions() {
			if td.GetTransactionalId() == id {
				d = td
				return codeErr(td.GetErrorCode(), "transactional id "+id)
			}
		}
		return errs.Errorf(errs.TransactionalIDNotFound, "transactional id %q was not described", id)
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// List lists the transactional ids of every live transaction coordinator
// in the metadata (Kafka's ListTransactions, which the admin client sends
// to every broker), by id, keeping those in one of states and of one of
// pids (an empty filter keeps all); the second answer is the state filters
// the coordinators do not know.
func (t *Transactions) List(ctx context.Context, states []string, pids []int64) ([]*txnv1.TransactionListing, []string, error) {
	if err := t.c.WaitReady(ctx); err != nil {
		return nil, nil, err
	}
	var addrs []string
	for _, co := range t.c.Metadata().Coordinators() {
		if co.GetKind() == controllerv1.CoordinatorKind_COORDINATOR_KIND_TRANSACTION && co.GetAlive() && co.GetGrpcAddr() != "" {
			addrs = append(addrs, co.GetGrpcAddr())
		}
	}
	if len(addrs) == 0 {
		return nil, nil, errs.Errorf(errs.CoordinatorNotAvailable, "no live transaction coordinator in the metadata")
	}
	seen := map[string]*txnv1.TransactionListing{}
	var unknown []string
	for _, addr := range addrs {
		cl, err := t.conn(addr)
		if err != nil {
			return nil, nil, err
		}
		resp, err := cl.ListTransactions(ctx, &txnv1.ListTransactionsRequest{StateFilters: states, ProducerIdFilters: pids})
		if err != nil {
			return nil, nil, rpcerr.FromStatus(err)
		}
		for _, l := range resp.GetTransactions() {
			seen[l.GetTransactionalId()] = l
		}
		for _, u := range resp.GetUnknownStateFilters() {
			if !slices.Contains(unknown, u) {
				unknown = append(unknown, u)
			}
		}
	}
	out := make([]*txnv1.TransactionListing, 0, len(seen))
	for _, l := range seen {
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b *txnv1.TransactionListing) int {
		return strings.Compare(a.GetTransactionalId(), b.GetTransactionalId())
	})
	return out, unknown, nil
}
