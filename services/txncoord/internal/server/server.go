// Package server is the gRPC edge of the transaction coordinator: it passes
// TransactionCoordinatorService requests to package coordinator, which
// answers domain errors where the proto has room for them (error_code
// fields, a code per partition), and turns the errors that say "ask
// another coordinator" (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE) into gRPC statuses with rpcerr.ToGRPC.
//
// With an authorizer (--authorizer) each handler first decides its
// caller's request with the cluster's ACLs, as the gateway does for the
// same requests: using a transactional id (initializing it, adding to its
// transaction, ending it) needs write on it, adding partitions needs write
// on their topics, adding a group's offsets needs read on the group, and
// describing an id needs describe on it (a listing leaves out the ids the
// caller may not describe, as Kafka's ListTransactions). A refusal
// (TRANSACTIONAL_ID_, TOPIC_ or GROUP_AUTHORIZATION_FAILED) is answered
// where the coordinator answers its domain errors. An idempotent
// producer's InitProducerId (no transactional id) needs write on some
// topic (CLUSTER_AUTHORIZATION_FAILED otherwise, as Kafka), and Skein's
// own services are not subject to ACLs.
package server

import (
	"context"

	txnv1 "skein/gen/skein/txn/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/acl"
	"skein/libs/errs"
	"skein/libs/peerauth"
	"skein/libs/rpcerr"
	"skein/services/txncoord/internal/coordinator"
	"skein/services/txncoord/internal/txn"
)

// Server implements txnv1.TransactionCoordinatorServiceServer.
type Server struct {
	txnv1.UnimplementedTransactionCoordinatorServiceServer
	c  *coordinator.Coordinator
	az *peerauth.Authorizer
}

// New returns the service over c; az decides the callers' requests (nil:
// everything allowed).
func New(c *coordinator.Coordinator, az *peerauth.Authorizer) *Server { return &Server{c: c, az: az} }

// Rules are the roles the guard lets call the coordinator's internal
// methods: it has none (every method is a client's, authorized by its
// handler).
func Rules() peerauth.Rules { return peerauth.Rules{} }

func answer[T any](resp T, err error) (T, error) {
	if err != nil {
		var zero T
		return zero, rpcerr.ToGRPC(err)
	}
	return resp, nil
}

// code answers an error's ErrorCode and message (NONE and "" for nil).
func code(err error) (skeinv1.ErrorCode, string) {
	if err == nil {
		return skeinv1.ErrorCode_NONE, ""
	}
	return skeinv1.ErrorCode(errs.CodeOf(err)), errs.Message(err)
}

// useID answers nil when the caller of ctx may use the transactional id.
func (s *Server) useID(ctx context.Context, method, id string) error {
	return s.az.Authorize(ctx, method, acl.TransactionalID, id, acl.Write)
}

// InitProducerId gives a producer its id and epoch.
func (s *Server) InitProducerId(ctx context.Context, req *txnv1.InitProducerIdRequest) (*txnv1.InitProducerIdResponse, error) {
	const method = txnv1.TransactionCoordinatorService_InitProducerId_FullMethodName
	var err error
	if id := req.GetTransactionalId(); id != "" {
		err = s.useID(ctx, method, id)
	} else {
		// An idempotent producer writes some topic, as Kafka asks.
		err = s.az.AuthorizeAny(ctx, method, acl.Topic, acl.Write)
	}
	if err != nil {
		c, msg := code(err)
		return &txnv1.InitProducerIdResponse{ErrorCode: c, ErrorMessage: msg, ProducerId: txn.NoProducerID, ProducerEpoch: int32(txn.NoEpoch)}, nil
	}
	return answer(s.c.InitProducerId(ctx, req))
}

// AddPartitionsToTxn adds partitions to the open transaction. A caller who
// may not use the transactional id has every partition refused; a
// partition of a topic the caller may not write is refused on its own, as
// a partition that does not exist is, and the others are added.
func (s *Server) AddPartitionsToTxn(ctx context.Context, req *txnv1.AddPartitionsToTxnRequest) (*txnv1.AddPartitionsToTxnResponse, error) {
	const method = txnv1.TransactionCoordinatorService_AddPartitionsToTxn_FullMethodName
	if err := s.useID(ctx, method, req.GetTransactionalId()); err != nil {
		resp := &txnv1.AddPartitionsToTxnResponse{}
		for _, tp := range req.GetPartitions() {
			for _, p := range tp.GetPartitions() {
				c, msg := code(err)
				resp.Partitions = append(resp.Partitions, &txnv1.PartitionResult{Topic: tp.GetTopic(), Partition: p, ErrorCode: c, ErrorMessage: msg})
			}
		}
		if len(resp.Partitions) == 0 {
			return nil, rpcerr.ToGRPC(err) // no partition to carry the code
		}
		return resp, nil
	}
	refused := map[string]error{} // by topic
	allowed := &txnv1.AddPartitionsToTxnRequest{TransactionalId: req.GetTransactionalId(), ProducerId: req.GetProducerId(), ProducerEpoch: req.GetProducerEpoch()}
	for _, tp := range req.GetPartitions() {
		t := tp.GetTopic()
		err, seen := refused[t]
		if !seen {
			err = s.az.Authorize(ctx, method, acl.Topic, t, acl.Write)
			refused[t] = err
		}
		if err == nil {
			allowed.Partitions = append(allowed.Partitions, tp)
		}
	}
	if len(allowed.Partitions) == len(req.GetPartitions()) {
		return answer(s.c.AddPartitionsToTxn(ctx, req))
	}
	type key struct {
		topic     string
		partition int32
	}
	added := map[key]*txnv1.PartitionResult{}
	if len(allowed.Partitions) > 0 {
		got, err := s.c.AddPartitionsToTxn(ctx, allowed)
		if err != nil {
			return nil, rpcerr.ToGRPC(err)
		}
		for _, r := range got.GetPartitions() {
			added[key{r.GetTopic(), r.GetPartition()}] = r
		}
	}
	resp := &txnv1.AddPartitionsToTxnResponse{}
	for _, tp := range req.GetPartitions() {
		for _, p := range tp.GetPartitions() {
			r := &txnv1.PartitionResult{Topic: tp.GetTopic(), Partition: p}
			if err := refused[tp.GetTopic()]; err != nil {
				r.ErrorCode, r.ErrorMessage = code(err)
			} else if a := added[key{tp.GetTopic(), p}]; a != nil {
				r.ErrorCode, r.ErrorMessage = a.GetErrorCode(), a.GetErrorMessage()
			} else { // the coordinator answered fewer than asked
				r.ErrorCode, r.ErrorMessage = code(errs.Errorf(errs.UnknownServerError, "partition %s-%d was not answered", tp.GetTopic(), p))
			}
			resp.Partitions = append(resp.Partitions, r)
		}
	}
	return resp, nil
}

// AddOffsetsToTxn adds a group's offsets to the open transaction.
func (s *Server) AddOffsetsToTxn(ctx context.Context, req *txnv1.AddOffsetsToTxnRequest) (*txnv1.AddOffsetsToTxnResponse, error) {
	const method = txnv1.TransactionCoordinatorService_AddOffsetsToTxn_FullMethodName
	err := s.useID(ctx, method, req.GetTransactionalId())
	if err == nil {
		err = s.az.Authorize(ctx, method, acl.Group, req.GetGroupId(), acl.Read)
	}
	if err != nil {
		c, msg := code(err)
		return &txnv1.AddOffsetsToTxnResponse{ErrorCode: c, ErrorMessage: msg}, nil
	}
	return answer(s.c.AddOffsetsToTxn(ctx, req))
}

// EndTxn commits or aborts.
func (s *Server) EndTxn(ctx context.Context, req *txnv1.EndTxnRequest) (*txnv1.EndTxnResponse, error) {
	if err := s.useID(ctx, txnv1.TransactionCoordinatorService_EndTxn_FullMethodName, req.GetTransactionalId()); err != nil {
		c, msg := code(err)
		return &txnv1.EndTxnResponse{ErrorCode: c, ErrorMessage: msg, ProducerId: txn.NoProducerID, ProducerEpoch: int32(txn.NoEpoch)}, nil
	}
	return answer(s.c.EndTxn(ctx, req))
}

// DescribeTransactions shows transactional ids' state; an id the caller
// may not describe answers its refusal as its code, with nothing of its
// state.
func (s *Server) DescribeTransactions(ctx context.Context, req *txnv1.DescribeTransactionsRequest) (*txnv1.DescribeTransactionsResponse, error) {
	const method = txnv1.TransactionCoordinatorService_DescribeTransactions_FullMethodName
	ids := req.GetTransactionalIds()
	refused := make([]error, len(ids))
	allowed := &txnv1.DescribeTransactionsRequest{}
	for i, id := range ids {
		if refused[i] = s.az.Authorize(ctx, method, acl.TransactionalID, id, acl.Describe); refused[i] == nil {
			allowed.TransactionalIds = append(allowed.TransactionalIds, id)
		}
	}
	if len(allowed.TransactionalIds) == len(ids) {
		return answer(s.c.DescribeTransactions(ctx, req))
	}
	got, err := s.c.DescribeTransactions(ctx, allowed)
	if err != nil {
		return nil, rpcerr.ToGRPC(err)
	}
	described := got.GetTransactions() // one per allowed id, in order
	resp := &txnv1.DescribeTransactionsResponse{}
	for i, id := range ids {
		if refused[i] == nil && len(described) > 0 && described[0].GetTransactionalId() == id {
			resp.Transactions = append(resp.Transactions, described[0])
			described = described[1:]
			continue
		}
		err := refused[i]
		if err == nil { // not described: the coordinator answered fewer than asked
			err = errs.Errorf(errs.UnknownServerError, "transactional id %q was not described", id)
		}
		c, _ := code(err)
		resp.Transactions = append(resp.Transactions, &txnv1.TransactionDescription{TransactionalId: id, ErrorCode: c,
			State: string(txn.Dead), ProducerId: txn.NoProducerID, ProducerEpoch: int32(txn.NoEpoch), StartTimeMs: -1})
	}
	return resp, nil
}

// ListTransactions lists the transactional ids this coordinator serves
// that the caller may describe (the others are left out, as Kafka's
// listing does). A state filter no state has is answered back in
// unknown_state_filters and matches nothing, as Kafka's.
func (s *Server) ListTransactions(ctx context.Context, req *txnv1.ListTransactionsRequest) (*txnv1.ListTransactionsResponse, error) {
	resp := &txnv1.ListTransactionsResponse{}
	var states []txn.State
	for _, name := range req.GetStateFilters() {
		if st, ok := txn.ParseState(name); ok {
			states = append(states, st)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	if len(req.GetStateFilters()) > 0 && len(states) == 0 {
		return resp, nil
	}
	caller, known := peerauth.CallerFrom(ctx)
	for _, l := range s.c.ListTransactions(states, req.GetProducerIdFilters()) {
		if !s.az.Allowed(caller, known, acl.TransactionalID, l.TransactionalID, acl.Describe) {
			continue
		}
		resp.Transactions = append(resp.Transactions, &txnv1.TransactionListing{TransactionalId: l.TransactionalID,
			ProducerId: l.ProducerID, State: string(l.State)})
	}
	return resp, nil
}
