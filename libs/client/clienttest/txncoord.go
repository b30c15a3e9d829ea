package clienttest

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	controllerv1 "skein/gen/skein/controller/v1"
	txnv1 "skein/gen/skein/txn/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/rpcerr"
)

// TxnCoordinator is a fake transaction coordinator that owns every
// transactional id. It keeps each id's producer id, epoch and open
// transaction in memory with the real one's checks (PRODUCER_FENCED for an
// older epoch, INVALID_PRODUCER_ID_MAPPING for another producer id,
// INVALID_TXN_STATE for an end with nothing in the transaction) and bumps
// the epoch at every InitProducerId and EndTxn. It writes no markers; a
// committed transaction's offsets go to Groups, when set.
type TxnCoordinator struct {
	txnv1.UnimplementedTransactionCoordinatorServiceServer

	ctrl *Controller
	// Groups, when set, gets a transaction's pending offsets applied or
	// dropped at its end.
	Groups *GroupCoordinator

	mu    sync.Mutex
	ids   map[string]*fakeTxn
	fail  []error
	lose  []error
	hang  int      // EndTxn calls still to hold until their caller gives up
	calls []string // "init", "add", "offsets", "end"
	adds  [][]string
}

type fakeTxn struct {
	pid   int64
	epoch int16
	open  bool
	// ended: the epoch an EndTxn was made at (-1: none), and its decision,
	// for a retry of it.
	ended     int16
	committed bool
	parts     map[tp]bool
	groups    map[string]bool
	timeout   int32
	start     int64 // when the open transaction opened, in Unix ms
}

// NewTxnCoordinator returns a coordinator that takes producer ids from ctrl.
func NewTxnCoordinator(ctrl *Controller) *TxnCoordinator {
	return &TxnCoordinator{ctrl: ctrl, ids: map[string]*fakeTxn{}}
}

// StartTxnCoordinator serves a fake transaction coordinator, registered
// with the controller as coordinator id, and answers it with its address.
func (c *Cluster) StartTxnCoordinator(t testing.TB, id int32) (*TxnCoordinator, string) {
	t.Helper()
	tc := NewTxnCoordinator(c.Controller)
	addr := serve(t, func(s *grpc.Server) { txnv1.RegisterTransactionCoordinatorServiceServer(s, tc) })
	c.Controller.addCoordinator(id, controllerv1.CoordinatorKind_COORDINATOR_KIND_TRANSACTION, addr)
	return tc, addr
}

// FailNext makes the next n calls answer err (a gRPC status of its row).
func (tc *TxnCoordinator) FailNext(err error, n int) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	for range n {
		tc.fail = append(tc.fail, err)
	}
}

// LoseNextAnswers makes the next n calls take effect but answer err, as
// when the answer is lost on its way (a gRPC status of its row).
func (tc *TxnCoordinator) LoseNextAnswers(err error, n int) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	for range n {
		tc.lose = append(tc.lose, err)
	}
}

// KeepAnswers drops what LoseNextAnswers left to lose and FailNext left
// to fail: calls are served and answered again.
func (tc *TxnCoordinator) KeepAnswers() {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.lose, tc.fail = nil, nil
}

// lost answers the error that replaces the answer of a call that took
// effect, if its answer is to be lost.
func (tc *TxnCoordinator) lost() error {
	if len(tc.lose) == 0 {
		return nil
	}
	err := tc.lose[0]
	tc.lose = tc.lose[1:]
	return rpcerr.ToGRPC(err)
}

// Fence bumps an id's epoch, as a new instance of the producer would
// (aborting its open transaction).
func (tc *TxnCoordinator) Fence(id string) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if x := tc.ids[id]; x != nil {
		x.epoch++
		x.ended = -1
		tc.endLocked(id, x, false)
	}
}

// Calls answers the calls served so far, by kind: "init", "add" (one per
// AddPartitionsToTxn), "offsets", "end", "describe", "list".
func (tc *TxnCoordinator) Calls() []string {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return slices.Clone(tc.calls)
}

// Adds answers the partitions of each AddPartitionsToTxn, as "topic-p".
func (tc *TxnCoordinator) Adds() [][]string {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return slices.Clone(tc.adds)
}

// Identity answers an id's producer id and epoch and whether a transaction
// is open.
func (tc *TxnCoordinator) Identity(id string) (int64, int16, bool) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if x := tc.ids[id]; x != nil {
		return x.pid, x.epoch, x.open
	}
	return -1, -1, false
}

func (tc *TxnCoordinator) failed(call string) error {
	tc.calls = append(tc.calls, call)
	if len(tc.fail) > 0 {
		err := tc.fail[0]
		tc.fail = tc.fail[1:]
		return rpcerr.ToGRPC(err)
	}
	return nil
}

// check answers the error for a request naming pid and epoch.
func (tc *TxnCoordinator) check(id string, pid int64, epoch int32) (*fakeTxn, error) {
	x := tc.ids[id]
	switch {
	case x == nil || x.pid != pid:
		return nil, errs.Errorf(errs.InvalidProducerIDMapping, "transactional id %q has another producer id", id)
	case int16(epoch) < x.epoch:
		return nil, errs.Errorf(errs.ProducerFenced, "epoch %d is older than %d", epoch, x.epoch)
	case int16(epoch) > x.epoch:
		return nil, errs.Errorf(errs.InvalidProducerEpoch, "epoch %d is newer than %d", epoch, x.epoch)
	}
	return x, nil
}

func (tc *TxnCoordinator) endLocked(id string, x *fakeTxn, commit bool) {
	if tc.Groups != nil {
		for g := range x.groups {
			tc.Groups.completeTxn(g, x.pid, commit)
		}
	}
	x.open, x.parts, x.groups = false, map[tp]bool{}, map[string]bool{}
}

// InitProducerId gives a new id a producer id at epoch 0 and bumps a known
// one's epoch, aborting its open transaction.
func (tc *TxnCoordinator) InitProducerId(_ context.Context, req *txnv1.InitProducerIdRequest) (*txnv1.InitProducerIdResponse, error) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if err := tc.failed("init"); err != nil {
		return nil, err
	}
	id := req.GetTransactionalId()
	x := tc.ids[id]
	if x == nil {
		tc.ctrl.mu.Lock()
		pid := tc.ctrl.nextPID
		tc.ctrl.nextPID++
		tc.ctrl.mu.Unlock()
		x = &fakeTxn{pid: pid, parts: map[tp]bool{}, groups: map[string]bool{}, ended: -1}
		tc.ids[id] = x
	} else {
		x.epoch++
		x.ended = -1
		tc.endLocked(id, x, false)
	}
	x.timeout = req.GetTransactionTimeoutMs()
	return &txnv1.InitProducerIdResponse{ProducerId: x.pid, ProducerEpoch: int32(x.epoch)}, nil
}

// AddPartitionsToTxn opens a transaction or adds to the open one.
func (tc *TxnCoordinator) AddPartitionsToTxn(_ context.Context, req *txnv1.AddPartitionsToTxnRequest) (*txnv1.AddPartitionsToTxnResponse, error) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if err := tc.failed("add"); err != nil {
		return nil, err
	}
	x, err := tc.check(req.GetTransactionalId(), req.GetProducerId(), req.GetProducerEpoch())
	resp := &txnv1.AddPartitionsToTxnResponse{}
	var names []string
	for _, t := range req.GetPartitions() {
		for _, p := range t.GetPartitions() {
			r := &txnv1.PartitionResult{Topic: t.GetTopic(), Partition: p}
			if err != nil {
				r.ErrorCode, r.ErrorMessage = skeinv1.ErrorCode(errs.CodeOf(err)), errs.Message(err)
			} else {
				if !x.open {
					x.start = time.Now().UnixMilli()
				}
				x.open, x.ended = true, -1
				x.parts[tp{t.GetTopic(), p}] = true
			}
			names = append(names, t.GetTopic()+"-"+strconv.Itoa(int(p)))
			resp.Partitions = append(resp.Partitions, r)
		}
	}
	tc.adds = append(tc.adds, names)
	if err := tc.lost(); err != nil {
		return nil, err
	}
	return resp, nil
}

// AddOffsetsToTxn adds a group to the open transaction (opening one).
func (tc *TxnCoordinator) AddOffsetsToTxn(_ context.Context, req *txnv1.AddOffsetsToTxnRequest) (*txnv1.AddOffsetsToTxnResponse, error) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if err := tc.failed("offsets"); err != nil {
		return nil, err
	}
	x, err := tc.check(req.GetTransactionalId(), req.GetProducerId(), req.GetProducerEpoch())
	if err != nil {
		return &txnv1.AddOffsetsToTxnResponse{ErrorCode: skeinv1.ErrorCode(errs.CodeOf(err)), ErrorMessage: errs.Message(err)}, nil
	}
	if !x.open {
		x.start = time.Now().UnixMilli()
	}
	x.open, x.ended = true, -1
	x.groups[req.GetGroupId()] = true
	return &txnv1.AddOffsetsToTxnResponse{}, nil
}

// EndTxn ends the open transaction and answers the bumped epoch.
// HangNextEnds makes the next n EndTxn calls that FailNext does not fail
// wait, unanswered, until their callers give up (a coordinator stuck on a
// write).
func (tc *TxnCoordinator) HangNextEnds(n int) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.hang += n
}

func (tc *TxnCoordinator) EndTxn(ctx context.Context, req *txnv1.EndTxnRequest) (*txnv1.EndTxnResponse, error) {
	tc.mu.Lock()
	if err := tc.failed("end"); err != nil {
		tc.mu.Unlock()
		return nil, err
	}
	if tc.hang > 0 {
		tc.hang--
		tc.mu.Unlock()
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	defer tc.mu.Unlock()
	id := req.GetTransactionalId()
	if x := tc.ids[id]; x != nil && x.pid == req.GetProducerId() && x.ended >= 0 && int16(req.GetProducerEpoch()) == x.ended {
		// A retry of the EndTxn that ended the last transaction: the same
		// decision answers the pair it gave, the other is refused.
		if req.GetCommitted() != x.committed {
			return &txnv1.EndTxnResponse{ErrorCode: skeinv1.ErrorCode(errs.CodeOf(errs.InvalidTxnState)), ErrorMessage: fmt.Sprintf("transactional id %q: its last transaction was decided the other way", id)}, nil
		}
		if err := tc.lost(); err != nil {
			return nil, err
		}
		return &txnv1.EndTxnResponse{ProducerId: x.pid, ProducerEpoch: int32(x.epoch)}, nil
	}
	x, err := tc.check(id, req.GetProducerId(), req.GetProducerEpoch())
	if err == nil && !x.open {
		err = errs.Errorf(errs.InvalidTxnState, "transactional id %q has nothing in its transaction", id)
	}
	if err != nil {
		return &txnv1.EndTxnResponse{ErrorCode: skeinv1.ErrorCode(errs.CodeOf(err)), ErrorMessage: errs.Message(err)}, nil
	}
	tc.endLocked(id, x, req.GetCommitted())
	x.ended, x.committed = x.epoch, req.GetCommitted()
	x.epoch++
	if err := tc.lost(); err != nil {
		return nil, err
	}
	return &txnv1.EndTxnResponse{ProducerId: x.pid, ProducerEpoch: int32(x.epoch)}, nil
}

// state answers an id's state as the real coordinator names it.
func (x *fakeTxn) state() string {
	switch {
	case x.open:
		return "ONGOING"
	case x.ended >= 0 && x.committed:
		return "COMPLETE_COMMIT"
	case x.ended >= 0:
		return "COMPLETE_ABORT"
	}
	return "EMPTY"
}

// DescribeTransactions describes ids, TRANSACTIONAL_ID_NOT_FOUND for one
// never initialized. Groups are listed by name only (no
// __consumer_offsets partition).
func (tc *TxnCoordinator) DescribeTransactions(_ context.Context, req *txnv1.DescribeTransactionsRequest) (*txnv1.DescribeTransactionsResponse, error) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if err := tc.failed("describe"); err != nil {
		return nil, err
	}
	resp := &txnv1.DescribeTransactionsResponse{}
	for _, id := range req.GetTransactionalIds() {
		x := tc.ids[id]
		if x == nil {
			resp.Transactions = append(resp.Transactions, &txnv1.TransactionDescription{TransactionalId: id,
				ErrorCode: skeinv1.ErrorCode_TRANSACTIONAL_ID_NOT_FOUND, State: "DEAD", ProducerId: -1, ProducerEpoch: -1, StartTimeMs: -1})
			continue
		}
		d := &txnv1.TransactionDescription{TransactionalId: id, State: x.state(), ProducerId: x.pid, ProducerEpoch: int32(x.epoch),
			TransactionTimeoutMs: x.timeout, StartTimeMs: -1}
		if x.open {
			d.StartTimeMs = x.start
		}
		parts := slices.Collect(maps.Keys(x.parts))
		slices.SortFunc(parts, func(a, b tp) int { return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition)) })
		for _, p := range parts {
			if n := len(d.Partitions); n == 0 || d.Partitions[n-1].GetTopic() != p.topic {
				d.Partitions = append(d.Partitions, &txnv1.TopicPartitions{Topic: p.topic})
			}
			last := d.Partitions[len(d.Partitions)-1]
			last.Partitions = append(last.Partitions, p.partition)
		}
		d.Groups = slices.Sorted(maps.Keys(x.groups))
		resp.Transactions = append(resp.Transactions, d)
	}
	return resp, nil
}

// ListTransactions lists every id, filtered as the real coordinator does
// (state names as it spells them).
func (tc *TxnCoordinator) ListTransactions(_ context.Context, req *txnv1.ListTransactionsRequest) (*txnv1.ListTransactionsResponse, error) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if err := tc.failed("list"); err != nil {
		return nil, err
	}
	resp := &txnv1.ListTransactionsResponse{}
	for _, id := range slices.Sorted(maps.Keys(tc.ids)) {
		x := tc.ids[id]
		if (len(req.GetStateFilters()) > 0 && !slices.Contains(req.GetStateFilters(), x.state())) ||
			(len(req.GetProducerIdFilters()) > 0 && !slices.Contains(req.GetProducerIdFilters(), x.pid)) {
			continue
		}
		resp.Transactions = append(resp.Transactions, &txnv1.TransactionListing{TransactionalId: id, ProducerId: x.pid, State: x.state()})
	}
	return resp, nil
}
