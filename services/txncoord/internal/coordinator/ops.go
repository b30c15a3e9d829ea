package coordinator

import (
	"context"
	"math"
	"slices"
	"strings"
	"time"

	txnv1 "skein/gen/skein/txn/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/services/txncoord/internal/txn"
)

// redirect reports whether err sends the caller to another coordinator (or
// to this one later): the errors the methods answer as Go errors.
func redirect(err error) bool {
	switch errs.Of(err) {
	case errs.NotCoordinator, errs.CoordinatorLoadInProgress, errs.CoordinatorNotAvailable:
		return true
	}
	return false
}

// code answers an error's ErrorCode and message (NONE and "" for nil).
func code(err error) (skeinv1.ErrorCode, string) {
	if err == nil {
		return skeinv1.ErrorCode_NONE, ""
	}
	return skeinv1.ErrorCode(errs.CodeOf(err)), errs.Message(err)
}

// allocate answers a fresh producer id; COORDINATOR_NOT_AVAILABLE when none
// can be had now.
func (c *Coordinator) allocate(ctx context.Context) (int64, error) {
	if c.cfg.AllocateProducerID == nil {
		return 0, errs.Errorf(errs.CoordinatorNotAvailable, "transaction coordinator %d has no producer id allocator", c.cfg.NodeID)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.WriteTimeout)
	defer cancel()
	id, err := c.cfg.AllocateProducerID(ctx)
	if err != nil {
		return 0, errs.Errorf(errs.CoordinatorNotAvailable, "no producer id could be allocated: %v", err)
	}
	if id < 0 {
		return 0, errs.Errorf(errs.CoordinatorNotAvailable, "the producer id allocator answered %d", id)
	}
	return id, nil
}

// epoch16 answers a request's producer epoch as the int16 it is on the
// wire of records, INVALID_REQUEST when it cannot be one.
func epoch16(e int32) (int16, error) {
	if e < 0 || e > math.MaxInt16 {
		return 0, errs.Errorf(errs.InvalidRequest, "producer epoch %d is not in [0, %d]", e, math.MaxInt16)
	}
	return int16(e), nil
}

// InitProducerId gives a producer its producer id and epoch. Without a
// transactional id it is an idempotent producer: a fresh producer id at
// epoch 0, from any coordinator, with no state kept. With one, the id's
// state machine answers (fencing older producers of the id), once its new
// state is written.
func (c *Coordinator) InitProducerId(ctx context.Context, req *txnv1.InitProducerIdRequest) (*txnv1.InitProducerIdResponse, error) {
	fail := func(err error) (*txnv1.InitProducerIdResponse, error) {
		if redirect(err) {
			return nil, err
		}
		ec, msg := code(err)
		return &txnv1.InitProducerIdResponse{ErrorCode: ec, ErrorMessage: msg, ProducerId: txn.NoProducerID, ProducerEpoch: int32(txn.NoEpoch)}, nil
	}
	id := req.GetTransactionalId()
	if id == "" {
		pid, err := c.allocate(ctx)
		if err != nil {
			return fail(err)
		}
		return &txnv1.InitProducerIdResponse{ProducerId: pid, ProducerEpoch: 0}, nil
	}
	expectedEpoch := req.GetProducerEpoch()
	if expectedEpoch < int32(txn.NoEpoch) || expectedEpoch > math.MaxInt16 {
		return fail(errs.Errorf(errs.InvalidRequest, "producer epoch %d is not in [-1, %d]", expectedEpoch, math.MaxInt16))
	}
	p, err := c.partitionFor(id)
	if err != nil {
		return fail(err)
	}
	ireq := txn.InitRequest{Timeout: time.Duration(req.GetTransactionTimeoutMs()) * time.Millisecond,
		ExpectedProducerID: req.GetProducerId(), ExpectedEpoch: int16(expectedEpoch)}
	var reply txn.Reply
	_, err = p.apply(ctx, id, func(t *txn.Txn, now time.Time, alloc txn.Allocator) (txn.Effects, error) {
		r, eff, err := t.InitProducerId(ireq, now, alloc)
		reply = r
		return eff, err
	})
	if err == nil {
		err = reply.Err
	}
	if err != nil {
		return fail(err)
	}
	return &txnv1.InitProducerIdResponse{ProducerId: reply.ProducerID, ProducerEpoch: int32(reply.ProducerEpoch)}, nil
}

// AddPartitionsToTxn adds partitions to the producer's transaction, opening
// one if none is open, and answers a code per partition of the request. A
// partition that does not exist, or of an internal topic, is refused on its
// own; the others are added together (or refused together).
func (c *Coordinator) AddPartitionsToTxn(ctx context.Context, req *txnv1.AddPartitionsToTxnRequest) (*txnv1.AddPartitionsToTxnResponse, error) {
	resp := &txnv1.AddPartitionsToTxnResponse{}
	for _, tp := range req.GetPartitions() {
		for _, part := range tp.GetPartitions() {
			resp.Partitions = append(resp.Partitions, &txnv1.PartitionResult{Topic: tp.GetTopic(), Partition: part})
		}
	}
	if len(resp.Partitions) == 0 {
		return nil, errs.Errorf(errs.InvalidRequest, "no partitions to add")
	}
	answer := func(r *txnv1.PartitionResult, err error) {
		r.ErrorCode, r.ErrorMessage = code(err)
	}
	answerAll := func(err error) (*txnv1.AddPartitionsToTxnResponse, error) {
		if redirect(err) {
			return nil, err
		}
		for _, r := range resp.Partitions {
			answer(r, err)
		}
		return resp, nil
	}
	id := req.GetTransactionalId()
	p, err := c.partitionFor(id)
	if err != nil {
		return answerAll(err)
	}
	epoch, err := epoch16(req.GetProducerEpoch())
	if err != nil {
		return answerAll(err)
	}
	topics := c.currentView().Topics
	var valid []*txnv1.PartitionResult
	var add []txn.TopicPartition
	for _, r := range resp.Partitions {
		n, known := topics[r.Topic]
		switch {
		case metadata.IsInternalTopic(r.Topic):
			answer(r, errs.Errorf(errs.InvalidTopic, "%s is an internal topic: it takes no transactional records", r.Topic))
		case topics != nil && (!known || r.Partition < 0 || r.Partition >= n):
			answer(r, errs.Errorf(errs.UnknownTopicOrPartition, "no partition %s-%d", r.Topic, r.Partition))
		default:
			valid = append(valid, r)
			add = append(add, txn.TopicPartition{Topic: r.Topic, Partition: r.Partition})
		}
	}
	if len(add) == 0 {
		return resp, nil
	}
	_, err = p.apply(ctx, id, func(t *txn.Txn, now time.Time, _ txn.Allocator) (txn.Effects, error) {
		return t.AddPartitions(req.GetProducerId(), epoch, add, now)
	})
	if redirect(err) {
		return nil, err
	}
	for _, r := range valid {
		answer(r, err)
	}
	return resp, nil
}

// AddOffsetsToTxn adds a consumer group's offsets to the producer's
// transaction (its TxnOffsetCommit follows, to the group coordinator); the
// group's __consumer_offsets partition gets the transaction's markers.
func (c *Coordinator) AddOffsetsToTxn(ctx context.Context, req *txnv1.AddOffsetsToTxnRequest) (*txnv1.AddOffsetsToTxnResponse, error) {
	fail := func(err error) (*txnv1.AddOffsetsToTxnResponse, error) {
		if redirect(err) {
			return nil, err
		}
		ec, msg := code(err)
		return &txnv1.AddOffsetsToTxnResponse{ErrorCode: ec, ErrorMessage: msg}, nil
	}
	id := req.GetTransactionalId()
	p, err := c.partitionFor(id)
	if err != nil {
		return fail(err)
	}
	epoch, err := epoch16(req.GetProducerEpoch())
	if err != nil {
		return fail(err)
	}
	_, err = p.apply(ctx, id, func(t *txn.Txn, now time.Time, _ txn.Allocator) (txn.Effects, error) {
		return t.AddOffsets(req.GetProducerId(), epoch, req.GetGroupId(), now)
	})
	if err != nil {
		return fail(err)
	}
	return &txnv1.AddOffsetsToTxnResponse{}, nil
}

// EndTxn commits or aborts the producer's transaction. It answers once
// PREPARE_COMMIT or PREPARE_ABORT is in the log, with the producer id and
// the bumped epoch the producer goes on with; the markers and the COMPLETE
// state follow in the background.
func (c *Coordinator) EndTxn(ctx context.Context, req *txnv1.EndTxnRequest) (*txnv1.EndTxnResponse, error) {
	fail := func(err error) (*txnv1.EndTxnResponse, error) {
		if redirect(err) {
			return nil, err
		}
		ec, msg := code(err)
		return &txnv1.EndTxnResponse{ErrorCode: ec, ErrorMessage: msg, ProducerId: txn.NoProducerID, ProducerEpoch: int32(txn.NoEpoch)}, nil
	}
	id := req.GetTransactionalId()
	p, err := c.partitionFor(id)
	if err != nil {
		return fail(err)
	}
	epoch, err := epoch16(req.GetProducerEpoch())
	if err != nil {
		return fail(err)
	}
	var reply txn.Reply
	_, err = p.apply(ctx, id, func(t *txn.Txn, now time.Time, alloc txn.Allocator) (txn.Effects, error) {
		r, eff, err := t.EndTxn(req.GetProducerId(), epoch, req.GetCommitted(), now, alloc)
		reply = r
		return eff, err
	})
	if err == nil {
		err = reply.Err
	}
	if err != nil {
		return fail(err)
	}
	return &txnv1.EndTxnResponse{ProducerId: reply.ProducerID, ProducerEpoch: int32(reply.ProducerEpoch)}, nil
}

// DescribeTransactions describes transactional ids, each with its own code:
// NOT_COORDINATOR (and the like) for an id this node does not serve now,
// TRANSACTIONAL_ID_NOT_FOUND with state DEAD for an id with no state (as
// Kafka's).
// Groups show as their __consumer_offsets partitions.
func (c *Coordinator) DescribeTransactions(ctx context.Context, req *txnv1.DescribeTransactionsRequest) (*txnv1.DescribeTransactionsResponse, error) {
	resp := &txnv1.DescribeTransactionsResponse{}
	offsets := c.currentView().OffsetsPartitions
	for _, id := range req.GetTransactionalIds() {
		resp.Transactions = append(resp.Transactions, c.describe(id, offsets))
	}
	return resp, nil
}

func (c *Coordinator) describe(id string, offsetsPartitions int32) *txnv1.TransactionDescription {
	out := &txnv1.TransactionDescription{TransactionalId: id, State: string(txn.Dead), ProducerId: txn.NoProducerID,
		ProducerEpoch: int32(txn.NoEpoch), StartTimeMs: -1}
	p, err := c.partitionFor(id)
	if err == nil {
		var d txn.Description
		var ok bool
		if d, ok, err = p.describe(id); err == nil && !ok {
			err = errs.Errorf(errs.TransactionalIDNotFound, "transactional id %q does not exist", id)
		}
		if err == nil {
			out.State, out.ProducerId, out.ProducerEpoch = string(d.State), d.ProducerID, int32(d.ProducerEpoch)
			out.TransactionTimeoutMs = int32(d.Timeout / time.Millisecond)
			if !d.StartTime.IsZero() {
				out.StartTimeMs = d.StartTime.UnixMilli()
			}
			out.Groups = slices.Sorted(slices.Values(d.Groups))
			parts := slices.Clone(d.Partitions)
			if offsetsPartitions > 0 {
				for _, g := range d.Groups {
					parts = append(parts, txn.TopicPartition{Topic: metadata.ConsumerOffsetsTopic, Partition: metadata.CoordinatorPartition(g, offsetsPartitions)})
				}
			}
			slices.SortFunc(parts, compareTP)
			for _, tp := range slices.Compact(parts) {
				if n := len(out.Partitions); n == 0 || out.Partitions[n-1].Topic != tp.Topic {
					out.Partitions = append(out.Partitions, &txnv1.TopicPartitions{Topic: tp.Topic})
				}
				last := out.Partitions[len(out.Partitions)-1]
				last.Partitions = append(last.Partitions, tp.Partition)
			}
		}
	}
	out.ErrorCode, _ = code(err)
	return out
}

// describe answers the description of an id with a state here.
func (p *partition) describe(id string) (txn.Description, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.readyLocked(); err != nil {
		return txn.Description{}, false, err
	}
	t := p.txns[id]
	if t == nil || !t.Exists() {
		return txn.Description{}, false, nil
	}
	return t.Describe(), true, nil
}

// Listing is one transactional id in ListTransactions.
type Listing struct {
	TransactionalID string
	ProducerID      int64
	State           txn.State
}

// ListTransactions lists the transactional ids with a state in the
// partitions this node serves now, by id, keeping those whose state is one
// of states and whose producer id is one of pids (an empty filter keeps
// all). A partition still loading is left out, as Kafka's coordinator
// leaves it out.
func (c *Coordinator) ListTransactions(states []txn.State, pids []int64) []Listing {
	var out []Listing
	for _, p := range c.serving() {
		out = append(out, p.list(states, pids)...)
	}
	slices.SortFunc(out, func(a, b Listing) int { return strings.Compare(a.TransactionalID, b.TransactionalID) })
	return out
}

func (p *partition) list(states []txn.State, pids []int64) []Listing {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.readyLocked() != nil {
		return nil
	}
	var out []Listing
	for id, t := range p.txns {
		if !t.Exists() {
			continue
		}
		d := t.Describe()
		if (len(states) > 0 && !slices.Contains(states, d.State)) || (len(pids) > 0 && !slices.Contains(pids, d.ProducerID)) {
			continue
		}
		out = append(out, Listing{TransactionalID: id, ProducerID: d.ProducerID, State: d.State})
	}
	return out
}
