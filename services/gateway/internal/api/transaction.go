package api

import (
	"context"
	"log/slog"
	"strings"
	"time"

	groupv1 "skein/gen/skein/group/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
	"skein/libs/errs"
)

// MaxTransactionalIDLength bounds a transactional id.
const MaxTransactionalIDLength = 255

// Transaction is TransactionService: producer ids for idempotent and
// transactional producers, a transaction's consumed offsets, its commit and
// abort — each a call to the transaction coordinator that owns the
// transactional id (and, for offsets, to the group's coordinator). It keeps
// no state: any gateway serves any call.
type Transaction struct {
	skeinv1.UnimplementedTransactionServiceServer

	c      *client.Client
	txns   *client.Transactions
	groups *client.Groups
	log    *slog.Logger
}

// NewTransaction serves TransactionService through c.
func NewTransaction(c *client.Client, log *slog.Logger) *Transaction {
	return &Transaction{c: c, txns: c.Transactions(), groups: c.Groups(), log: log}
}

// Close closes the coordinator connections.
func (s *Transaction) Close() error {
	s.groups.Close()
	return s.txns.Close()
}

func validateTransactionalID(id string) error {
	switch {
	case id == "":
		return errs.Errorf(errs.InvalidRequest, "the transactional id is empty")
	case len(id) > MaxTransactionalIDLength:
		return errs.Errorf(errs.InvalidRequest, "the transactional id is %d bytes long, more than %d", len(id), MaxTransactionalIDLength)
	}
	return nil
}

func validateProducer(pid int64, epoch int32) error {
	switch {
	case pid < 0:
		return errs.Errorf(errs.InvalidRequest, "producer_id %d is negative", pid)
	case epoch < 0 || epoch > 32767:
		return errs.Errorf(errs.InvalidRequest, "producer_epoch %d is outside [0, 32767]", epoch)
	}
	return nil
}

// InitProducer answers a producer id and epoch. Without a transactional id
// it is a fresh id for an idempotent producer; with one, the epoch is
// bumped, which fences every older producer of the id and aborts the
// transaction one of them left open.
func (s *Transaction) InitProducer(ctx context.Context, req *skeinv1.InitProducerRequest) (*skeinv1.InitProducerResponse, error) {
	var timeout time.Duration
	if req.TransactionTimeoutMs != nil {
		if req.GetTransactionTimeoutMs() <= 0 {
			return nil, errs.Errorf(errs.InvalidTransactionTimeout, "transaction_timeout_ms %d is not positive", req.GetTransactionTimeoutMs())
		}
		timeout = time.Duration(req.GetTransactionTimeoutMs()) * time.Millisecond
	}
	if id := req.GetTransactionalId(); id != "" {
		if err := validateTransactionalID(id); err != nil {
			return nil, err
		}
	} else if req.TransactionTimeoutMs != nil {
		return nil, errs.Errorf(errs.InvalidRequest, "transaction_timeout_ms needs a transactional_id")
	}
	if err := waitReady(ctx, s.c); err != nil {
		return nil, err
	}
	pid, epoch, err := s.txns.InitProducerID(ctx, req.GetTransactionalId(), timeout)
	if err != nil {
		return nil, err
	}
	return &skeinv1.InitProducerResponse{ProducerId: pid, ProducerEpoch: int32(epoch)}, nil
}

// SendOffsets puts a group's consumed offsets into the open transaction:
// they become the group's committed offsets when the transaction commits,
// and are dropped when it aborts.
func (s *Transaction) SendOffsets(ctx context.Context, req *skeinv1.SendOffsetsRequest) (*skeinv1.SendOffsetsResponse, error) {
	if err := validateTransactionalID(req.GetTransactionalId()); err != nil {
		return nil, err
	}
	if err := validateProducer(req.GetProducerId(), req.GetProducerEpoch()); err != nil {
		return nil, err
	}
	if err := validateGroupID(req.GetGroup()); err != nil {
		return nil, err
	}
	if len(req.GetOffsets()) == 0 {
		return nil, errs.Errorf(errs.InvalidRequest, "offsets is empty")
	}
	if err := waitReady(ctx, s.c); err != nil {
		return nil, err
	}
	if (req.GetMemberId() == "") != (req.MemberEpoch == nil) {
		return nil, errs.Errorf(errs.InvalidRequest, "member_id and member_epoch go together: give both (the member that consumed the offsets) or neither")
	}
	creq := &groupv1.TxnOffsetCommitRequest{TransactionalId: req.GetTransactionalId(), GroupId: req.GetGroup(),
		ProducerId: req.GetProducerId(), ProducerEpoch: req.GetProducerEpoch(), MemberId: req.GetMemberId(), MemberEpoch: req.MemberEpoch}
	seen := map[client.TopicPartition]bool{}
	for _, o := range req.GetOffsets() {
		tp := client.TopicPartition{Topic: o.GetTopic(), Partition: o.GetPartition()}
		if _, n, err := knownTopic(ctx, s.c, tp.Topic); err != nil {
			return nil, err
		} else if err := checkPartition(tp.Topic, tp.Partition, n); err != nil {
			return nil, err
		}
		if seen[tp] {
			return nil, errs.Errorf(errs.InvalidRequest, "offsets names %s:%d twice", tp.Topic, tp.Partition)
		}
		seen[tp] = true
		if o.GetOffset() < 0 {
			return nil, errs.Errorf(errs.InvalidRequest, "offset %d of %s:%d is negative", o.GetOffset(), tp.Topic, tp.Partition)
		}
		if len(o.GetMetadata()) > MaxOffsetMetadata {
			return nil, errs.Errorf(errs.OffsetMetadataTooLarge, "metadata of %s:%d is %d bytes, more than %d", tp.Topic, tp.Partition, len(o.GetMetadata()), MaxOffsetMetadata)
		}
		creq.Offsets = append(creq.Offsets, &groupv1.PartitionOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: o.GetOffset(), Metadata: o.GetMetadata()})
	}
	// The group joins the transaction first, so that the coordinator will
	// complete its offsets whichever way the transaction ends.
	if err := s.txns.AddOffsets(ctx, req.GetTransactionalId(), req.GetProducerId(), int16(req.GetProducerEpoch()), req.GetGroup()); err != nil {
		return nil, err
	}
	results, err := s.groups.TxnCommitOffsets(ctx, creq)
	if err != nil {
		return nil, err
	}
	out := &skeinv1.SendOffsetsResponse{}
	for _, r := range results {
		out.Results = append(out.Results, &skeinv1.PartitionCommitResult{Topic: r.GetTopic(), Partition: r.GetPartition(),
			ErrorCode: r.GetErrorCode(), Message: r.GetErrorMessage()})
	}
	return out, nil
}

// CommitTransaction commits the open transaction and answers the producer
// id and epoch of the producer's next one.
func (s *Transaction) CommitTransaction(ctx context.Context, req *skeinv1.CommitTransactionRequest) (*skeinv1.CommitTransactionResponse, error) {
	pid, epoch, err := s.end(ctx, req.GetTransactionalId(), req.GetProducerId(), req.GetProducerEpoch(), true)
	if err != nil {
		return nil, err
	}
	return &skeinv1.CommitTransactionResponse{ProducerId: pid, ProducerEpoch: int32(epoch)}, nil
}

// AbortTransaction aborts the open transaction and answers the producer id
// and epoch of the producer's next one.
func (s *Transaction) AbortTransaction(ctx context.Context, req *skeinv1.AbortTransactionRequest) (*skeinv1.AbortTransactionResponse, error) {
	pid, epoch, err := s.end(ctx, req.GetTransactionalId(), req.GetProducerId(), req.GetProducerEpoch(), false)
	if err != nil {
		return nil, err
	}
	return &skeinv1.AbortTransactionResponse{ProducerId: pid, ProducerEpoch: int32(epoch)}, nil
}

func (s *Transaction) end(ctx context.Context, id string, pid int64, epoch int32, commit bool) (int64, int16, error) {
	if err := validateTransactionalID(id); err != nil {
		return -1, -1, err
	}
	if err := validateProducer(pid, epoch); err != nil {
		return -1, -1, err
	}
	if err := waitReady(ctx, s.c); err != nil {
		return -1, -1, err
	}
	return s.txns.End(ctx, id, pid, int16(epoch), commit)
}

// transactionStates are the states a transactional id shows, as the
// transaction coordinator names them (PREPARE_EPOCH_FENCE is never one).
var transactionStates = []string{"EMPTY", "ONGOING", "PREPARE_COMMIT", "PREPARE_ABORT", "COMPLETE_COMMIT", "COMPLETE_ABORT", "DEAD"}

// transactionState answers the state a filter names, spelled as the API
// does ("PREPARE_COMMIT") or as Kafka's tools do ("PrepareCommit"), in any
// case; INVALID_REQUEST for a name no state has.
func transactionState(name string) (string, error) {
	norm := func(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "_", "")) }
	for _, s := range transactionStates {
		if name != "" && norm(s) == norm(name) {
			return s, nil
		}
	}
	return "", errs.Errorf(errs.InvalidRequest, "state %q is not one of %s", name, strings.Join(transactionStates, ", "))
}

// ListTransactions lists the transactional ids of every transaction
// coordinator, by id, filtered by state and producer id (kafka-transactions.sh
// list). The gateway's authorizer leaves out the ids the caller may not
// describe.
func (s *Transaction) ListTransactions(ctx context.Context, req *skeinv1.ListTransactionsRequest) (*skeinv1.ListTransactionsResponse, error) {
	var states []string
	for _, name := range req.GetState() {
		st, err := transactionState(name)
		if err != nil {
			return nil, err
		}
		states = append(states, st)
	}
	if err := waitReady(ctx, s.c); err != nil {
		return nil, err
	}
	list, unknown, err := s.txns.List(ctx, states, req.GetProducerId())
	if err != nil {
		return nil, err
	}
	if len(unknown) > 0 { // a coordinator of another version
		return nil, errs.Errorf(errs.InvalidRequest, "a transaction coordinator does not know the state filters %s", strings.Join(unknown, ", "))
	}
	out := &skeinv1.ListTransactionsResponse{Transactions: []*skeinv1.TransactionSummary{}}
	for _, l := range list {
		out.Transactions = append(out.Transactions, &skeinv1.TransactionSummary{TransactionalId: l.GetTransactionalId(),
			ProducerId: l.GetProducerId(), State: l.GetState()})
	}
	return out, nil
}

// DescribeTransaction answers a transactional id's state, producer and open
// transaction (kafka-transactions.sh describe); TRANSACTIONAL_ID_NOT_FOUND
// for an id with no state.
func (s *Transaction) DescribeTransaction(ctx context.Context, req *skeinv1.DescribeTransactionRequest) (*skeinv1.DescribeTransactionResponse, error) {
	if err := validateTransactionalID(req.GetTransactionalId()); err != nil {
		return nil, err
	}
	if err := waitReady(ctx, s.c); err != nil {
		return nil, err
	}
	d, err := s.txns.Describe(ctx, req.GetTransactionalId())
	if err != nil {
		return nil, err
	}
	out := &skeinv1.DescribeTransactionResponse{TransactionalId: d.GetTransactionalId(), State: d.GetState(),
		ProducerId: d.GetProducerId(), ProducerEpoch: d.GetProducerEpoch(), TransactionTimeoutMs: d.GetTransactionTimeoutMs(),
		TransactionStartTimeMs: d.GetStartTimeMs(), Partitions: []*skeinv1.TopicPartitions{}, Groups: d.GetGroups()}
	if out.Groups == nil {
		out.Groups = []string{}
	}
	for _, tp := range d.GetPartitions() {
		out.Partitions = append(out.Partitions, &skeinv1.TopicPartitions{Topic: tp.GetTopic(), Partitions: tp.GetPartitions()})
	}
	return out, nil
}
