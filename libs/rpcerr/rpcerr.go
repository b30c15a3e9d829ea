// Package rpcerr is the gRPC edge of the error table (package errs): the one
// mapping from a domain error to a gRPC status, which carries the Kafka name
// in an ErrorInfo detail, and back. Pure packages return errs rows and never
// import it; servers and clients call it where a call crosses the wire.
package rpcerr

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"skein/libs/errs"
)

// Domain is the ErrorInfo domain that marks a status as carrying a Skein code.
const Domain = "skein"

// Status is the one mapping from a domain error to a gRPC status, used at
// every gRPC edge. The status carries the Kafka name in an ErrorInfo detail so
// the peer (or the REST gateway) recovers the exact code, not just the class.
// Errors that already are gRPC statuses pass through; context errors map to
// their canonical codes.
func Status(err error) *status.Status {
	if err == nil {
		return status.New(codes.OK, "")
	}
	if s, ok := status.FromError(err); ok && errs.Of(err) == errs.UnknownServerError {
		return s
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		err = errs.Errorf(errs.RequestTimedOut, "%v", err)
	case errors.Is(err, context.Canceled):
		return status.New(codes.Canceled, err.Error())
	}
	row := errs.Of(err)
	s := status.New(codes.Code(row.GRPC), errs.Message(err))
	if withInfo, e := s.WithDetails(&errdetails.ErrorInfo{Reason: row.Name, Domain: Domain}); e == nil {
		s = withInfo
	}
	return s
}

// ToGRPC is Status(err).Err(): nil for nil.
func ToGRPC(err error) error {
	if err == nil {
		return nil
	}
	return Status(err).Err()
}

// FromStatus turns a gRPC error back into a domain error: the row named in its
// ErrorInfo, or a row picked from the gRPC code when the peer sent none.
func FromStatus(err error) error {
	if err == nil {
		return nil
	}
	s, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, d := range s.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == Domain {
			if row := errs.ForName(info.Reason); row != nil {
				return errs.Errorf(row, "%s", s.Message())
			}
		}
	}
	switch s.Code() {
	case codes.Unavailable:
		return errs.Errorf(errs.NetworkException, "%s", s.Message())
	case codes.DeadlineExceeded:
		return errs.Errorf(errs.RequestTimedOut, "%s", s.Message())
	case codes.InvalidArgument:
		return errs.Errorf(errs.InvalidRequest, "%s", s.Message())
	case codes.Canceled:
		return context.Canceled
	}
	return errs.Errorf(errs.UnknownServerError, "%s: %s", s.Code(), s.Message())
}
