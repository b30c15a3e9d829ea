// Package errs is Skein's single table of error codes.
//
// Every code has Kafka's name and number where the meaning is the same, whether
// a client may retry it, and the gRPC and HTTP statuses it maps to at the edges.
// Domain packages return the table's variables (or wrap them with Errorf or
// fmt.Errorf's %w); only the edges turn them into statuses, through package
// rpcerr's Status and FromStatus. The gRPC code of a row is kept as a number
// (GRPCCode), so this package and the pure packages that return its rows
// depend on no gRPC package (`make pure` checks it). Batched answers carry a
// per-partition code from CodeOf.
package errs
