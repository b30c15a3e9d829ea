package errs

import "strconv"

// GRPCCode is a gRPC status code, kept as its number so that this table (and
// every pure package that returns its rows) depends on no gRPC package; the
// edge (package rpcerr) turns it into a status.
type GRPCCode uint32

// The gRPC status codes the table uses, numbered as gRPC numbers them.
const (
	GRPCOK                 GRPCCode = 0
	GRPCCanceled           GRPCCode = 1
	GRPCUnknown            GRPCCode = 2
	GRPCInvalidArgument    GRPCCode = 3
	GRPCDeadlineExceeded   GRPCCode = 4
	GRPCNotFound           GRPCCode = 5
	GRPCAlreadyExists      GRPCCode = 6
	GRPCPermissionDenied   GRPCCode = 7
	GRPCResourceExhausted  GRPCCode = 8
	GRPCFailedPrecondition GRPCCode = 9
	GRPCAborted            GRPCCode = 10
	GRPCOutOfRange         GRPCCode = 11
	GRPCUnimplemented      GRPCCode = 12
	GRPCInternal           GRPCCode = 13
	GRPCUnavailable        GRPCCode = 14
	GRPCDataLoss           GRPCCode = 15
	GRPCUnauthenticated    GRPCCode = 16
)

var grpcNames = [...]string{"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound", "AlreadyExists",
	"PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange", "Unimplemented", "Internal",
	"Unavailable", "DataLoss", "Unauthenticated"}

func (c GRPCCode) String() string {
	if int(c) < len(grpcNames) {
		return grpcNames[c]
	}
	return "Code(" + strconv.Itoa(int(c)) + ")"
}
