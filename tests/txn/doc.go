// Package txn tests the transaction coordinator against real processes
// (three controllers, three storage nodes, two transaction coordinators,
// started by skein/tests/cluster): a transactional producer's records are
// invisible to read_committed readers until the coordinator commits, gone
// for them after an abort, a late produce of an ended transaction is
// refused, a new instance of a transactional id fences the old one and
// aborts its transaction, a hung transaction is aborted at its timeout, and
// a transaction survives the loss of its coordinator.
//
//	make build && go test -tags integration -count=1 skein/tests/txn/
package txn
