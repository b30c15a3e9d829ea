// Package coordinator is the transaction coordinator's shell around the
// pure transaction state machine (package txn): it owns the
// __transaction_state partitions the controller gives this node, loads
// every transactional id on them from the log, feeds the state machines
// their events and the time, writes each new state to the log and answers
// only once the write is acknowledged, and writes the commit and abort
// markers of every transaction that ends.
//
// # Ownership
//
// The controller's metadata says which partitions of __transaction_state
// this node owns, at which coordinator epoch, and the producer id every
// owner of a partition writes through (View, from OnMetadata). A
// transactional id belongs to partition metadata.CoordinatorPartition(id,
// partitions), Kafka's rule, the one FindCoordinator answers by.
//
//   - A partition newly owned is loaded: the coordinator first writes an
//     owner record under producer epoch = coordinator epoch, sequence 0
//     (acks=all), which makes the storage node refuse any later write of an
//     older epoch — a previous owner that is paused or cut off — and then
//     reads the partition from its start up to past its own record and
//     replays every transactional id (txn.Replay). Calls for its ids answer
//     COORDINATOR_LOAD_IN_PROGRESS meanwhile. Once loaded, every id is
//     resumed (txn.Resume): a PREPARE_* state gets its markers written and
//     is completed, a PREPARE_EPOCH_FENCE moves on to its abort.
//   - A partition no longer owned (or owned at a new epoch) is dropped at
//     once: its ids answer NOT_COORDINATOR, a write in flight is cut short
//     and answered NOT_COORDINATOR, markers being written are abandoned to
//     the next owner, which writes them again.
//   - A write refused with INVALID_PRODUCER_EPOCH (or PRODUCER_FENCED) means
//     a newer owner fenced this one: the partition is dropped before the
//     metadata says so, and not loaded again at that epoch.
//
// # Writes
//
// One write at a time per partition (writeMu): an event is applied to its
// transactional id, the state it answers (txn.Effects.Write) is written as
// one record under the partition's producer id and epoch with the next
// sequence, and only once it is acknowledged does the state take effect
// (txn.Txn.Complete) and the caller get its answer. A write refused
// outright undoes the transition (txn.Txn.Fail). A write whose outcome is
// unknown (a timeout, a retriable error to the end) keeps the transition
// pending and is sent again, with the same sequence, before any other event
// of the partition runs (the partition's goroutine also retries it); until
// it is settled those events answer COORDINATOR_NOT_AVAILABLE. Once it is
// known to be in the log the transition completes, once it is known not to
// be, it fails.
//
// # Ending a transaction
//
// EndTxn answers the producer as soon as PREPARE_COMMIT or PREPARE_ABORT is
// in the log (the decision is durable; the producer goes on at the bumped
// epoch). A goroutine of the partition then writes the markers
// (txn.Txn.MarkersDue, with each group of the transaction mapped to its
// __consumer_offsets partition) through Markers at the bumped epoch and the
// coordinator epoch, retrying with backoff until every partition has them,
// and writes COMPLETE_COMMIT or COMPLETE_ABORT (MarkersWritten). The same
// happens after a load for every PREPARE_* state, and for the aborts of
// timed-out transactions and fenced producers.
//
// # Errors
//
// Responses carry the domain errors (libs/errs rows) where the proto has
// room for them: a code per partition in AddPartitionsToTxn, error_code in
// the others, a code per id in DescribeTransactions. A method answers a Go
// error only when the request should go to another coordinator or be
// retried there: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE (a write to __transaction_state that failed
// with a retriable error, as Kafka's coordinator answers; a producer id
// that could not be allocated), and INVALID_REQUEST for an
// AddPartitionsToTxn naming no partition, which has no partition to carry
// the code.
//
// # Time
//
// One goroutine per owned partition loads it, then calls Tick on its ids at
// their txn.Txn.NextDeadline (timeouts abort, expired ids are deleted) and
// settles a write of unknown outcome even when no call comes. Every
// goroutine is owned: a dropped partition's goroutines (its loop and its
// marker writers) are cancelled and waited for, and Close waits for all.
package coordinator
