// Package server is the gRPC edge of the transaction coordinator: it passes
// TransactionCoordinatorService requests to package coordinator, which
// answers domain errors where the proto has room for them (error_code
// fields, a code per partition), and turns the errors that say "ask
// another coordinator" (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE) into gRPC statuses with rpcerr.ToGRPC.
package server

import (
	"context"

	txnv1 "skein/gen/skein/txn/v1"
	"skein/libs/rpcerr"
	"skein/services/txncoord/internal/coordinator"
)

// Server implements txnv1.TransactionCoordinatorServiceServer.
type Server struct {
	txnv1.UnimplementedTransactionCoordinatorServiceServer
	c *coordinator.Coordinator
}

// New returns the service over c.
func New(c *coordinator.Coordinator) *Server { return &Server{c: c} }

func answer[T any](resp T, err error) (T, error) {
	if err != nil {
		var zero T
		return zero, rpcerr.ToGRPC(err)
	}
	return resp, nil
}

// InitProducerId gives a producer its id and epoch.
func (s *Server) InitProducerId(ctx context.Context, req *txnv1.InitProducerIdRequest) (*txnv1.InitProducerIdResponse, error) {
	return answer(s.c.InitProducerId(ctx, req))
}

// AddPartitionsToTxn adds partitions to the open transaction.
func (s *Server) AddPartitionsToTxn(ctx context.Context, req *txnv1.AddPartitionsToTxnRequest) (*txnv1.AddPartitionsToTxnResponse, error) {
	return answer(s.c.AddPartitionsToTxn(ctx, req))
}

// AddOffsetsToTxn adds a group's offsets to the open transaction.
func (s *Server) AddOffsetsToTxn(ctx context.Context, req *txnv1.AddOffsetsToTxnRequest) (*txnv1.AddOffsetsToTxnResponse, error) {
	return answer(s.c.AddOffsetsToTxn(ctx, req))
}

// EndTxn commits or aborts.
func (s *Server) EndTxn(ctx context.Context, req *txnv1.EndTxnRequest) (*txnv1.EndTxnResponse, error) {
	return answer(s.c.EndTxn(ctx, req))
}

// DescribeTransactions shows transactional ids' state.
func (s *Server) DescribeTransactions(ctx context.Context, req *txnv1.DescribeTransactionsRequest) (*txnv1.DescribeTransactionsResponse, error) {
	return answer(s.c.DescribeTransactions(ctx, req))
}
