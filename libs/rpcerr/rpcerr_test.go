package rpcerr

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	. "skein/libs/errs"
)

func TestStatusRoundTrip(t *testing.T) {
	for _, row := range All() {
		if row == None {
			continue
		}
		in := Errorf(row, "detail for %s", row.Name)
		st := Status(in)
		if st.Code() != codes.Code(row.GRPC) {
			t.Errorf("%s: gRPC code %s, want %s", row.Name, st.Code(), row.GRPC)
		}
		back := FromStatus(st.Err())
		if Of(back) != row || Message(back) != "detail for "+row.Name {
			t.Errorf("%s came back as %v", row.Name, back)
		}
	}
}

func TestStatusEdges(t *testing.T) {
	if ToGRPC(nil) != nil || FromStatus(nil) != nil {
		t.Fatal("nil must stay nil")
	}
	if got := Status(context.DeadlineExceeded); got.Code() != codes.DeadlineExceeded || Of(FromStatus(got.Err())) != RequestTimedOut {
		t.Errorf("deadline: %v", got)
	}
	// A peer that sends a bare status still yields a sensible domain error.
	if Of(FromStatus(status.Error(codes.Unavailable, "conn refused"))) != NetworkException {
		t.Error("bare Unavailable should read as NETWORK_EXCEPTION (retriable)")
	}
	// An existing status passes through unchanged.
	orig := status.Error(codes.PermissionDenied, "no")
	if Status(orig).Code() != codes.PermissionDenied {
		t.Error("existing status was rewritten")
	}
	// A plain error becomes UNKNOWN_SERVER_ERROR, never OK.
	if Status(errors.New("boom")).Code() != codes.Internal {
		t.Error("plain error must be Internal")
	}
}
