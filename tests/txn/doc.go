// Package txn tests the transaction coordinator against real processes
// (three controllers, three storage nodes, two transaction coordinators,
// started by skein/tests/cluster): a transactional producer's records are
// invisible to read_committed readers until the coordinator commits, gone
// for them after an abort, a late produce of an ended transaction is
// refused, a new instance of a transactional id fences the old one and
// aborts its transaction, a hung transaction is aborted at its timeout, and
// a transaction survives the loss of its coordinator. TestCopierExactlyOnce
// is Kafka's transactions system test: a consume-process-produce copier
// (libs/client's GroupConsumer and TransactionalProducer, in a process of
// its own) copies a topic exactly once while storage leaders, the
// transaction coordinator and the copier are killed: 100,000 records and
// three kills of each kind (SKEIN_TXN_QUICK=1: 30,000 and two).
//
//	make build && go test -tags integration -count=1 skein/tests/txn/
package txn
