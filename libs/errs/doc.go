// Package errs is Skein's single table of error codes.
//
// Every code has Kafka's name and number where the meaning is the same, whether
// a client may retry it, and the gRPC and HTTP statuses it maps to at the edges.
// Domain packages return the table's variables (or wrap them with Errorf or
// fmt.Errorf's %w); only the edges turn them into statuses, through Status and
// FromStatus. Batched answers carry a per-partition code from CodeOf.
package errs
