// Package coordinator is the group coordinator's shell around the pure
// group state machine (package group): it owns the __consumer_offsets
// partitions the controller gives this node, loads every group on them from
// the log, feeds the groups their events and the time, writes the effects
// back to the log and answers only once a write is acknowledged.
//
// # Ownership
//
// The controller's metadata says which partitions of __consumer_offsets
// this node owns, at which coordinator epoch, and the producer id every
// owner of a partition writes through (View, from OnMetadata). A group
// belongs to partition metadata.CoordinatorPartition(group id, partitions),
// Kafka's rule, the one the controller's FindCoordinator answers by.
//
//   - A partition newly owned is loaded: the coordinator first writes a
//     marker record under producer epoch = coordinator epoch, sequence 0
//     (acks=all), which makes the storage node refuse any later write of an
//     older epoch — a previous owner that is paused or cut off — and then
//     reads the partition from its start up to past its own marker, so it
//     sees every write the previous owner had appended before the fence.
//     Calls for its groups answer COORDINATOR_LOAD_IN_PROGRESS meanwhile.
//   - A partition no longer owned (or owned at a new epoch) is dropped at
//     once: its groups answer NOT_COORDINATOR, a write in flight is cut
//     short and answered NOT_COORDINATOR.
//   - A write refused with INVALID_PRODUCER_EPOCH means a newer owner fenced
//     this one: the partition is dropped before the metadata says so.
//
// # Writes
//
// One write at a time per partition (writeMu): an event is applied to its
// group, its effects are written as one batch under the partition's
// producer id and epoch with the next sequence, and the answer waits for
// the acknowledgement. If the write fails, the group is restored from the
// last snapshot written (or dropped if none was), so memory never holds what
// the log does not. A write whose outcome is unknown (a timeout, a retriable
// error to the end) is kept as pending and sent again, with the same
// sequence, before anything else is written to the partition; once it is
// known to be in the log its records are applied as the loader would.
//
// # Transactional offsets
//
// TxnCommitOffsets (TxnOffsetCommit) writes a transaction's offsets as
// pending offset records of (group, producer id), through the same
// per-partition write path as every other record; they are in the group's
// group.TxnOffsets once acknowledged and never answered by FetchOffsets
// (with require_stable, a partition with pending offsets answers
// UNSTABLE_OFFSET_COMMIT). The group coordinator does not see the markers
// the storage nodes append, so the transaction coordinator tells it: after
// the markers of a transaction are written (every partition of the
// transaction, and the __consumer_offsets partition of every group in it),
// and before it writes COMPLETE_COMMIT or COMPLETE_ABORT, it calls
// CompleteTxnOffsets for each group of the transaction with the markers'
// producer id and epoch and the decision, retrying until one answers OK.
// A commit writes the pending offsets as offset commit records and
// tombstones the pending records, in one batch; an abort only tombstones
// them. A completion with nothing to apply (a retry, a failover in
// between, a group that does not exist here) answers OK and writes
// nothing. The loader rebuilds pending offsets like every other key, so a
// completion after a failover applies them. DeleteGroup tombstones them
// with the group, as Kafka drops a deleted group's pending offsets, and
// DeleteOffsets those of the partitions whose offsets it deletes, as
// Kafka's offset tombstone drops the partition's pending offsets: a
// transaction that commits later does not bring the offset back.
//
// # Deleted topics
//
// A group's committed offsets, pending offsets and deliveries of a topic
// that was deleted are tombstoned, as Kafka deletes a deleted partition's
// offsets, so a topic created again under the name starts with none. Before
// every event of a group (and, after a load or a topic change, for every
// group) the group is checked against the current topics of the metadata:
// what it holds of a topic the metadata no longer has, of a partition past
// the topic's count, or of a topic whose id changed since the group was
// last checked (deleted and created again), is tombstoned in one batch
// through the same write path, before the event is applied; the events of
// the group validate partitions against the topics it was checked against.
// A missing topic is a deleted one: a partition is loaded only under a
// metadata view that assigns it to this coordinator, newer than every view
// a previous owner committed under, and a view older than one already
// taken does not replace its topics. The log does not keep topic ids, so a
// topic deleted and created again under its name while no coordinator that
// had checked the group against the old topic served it is not told apart.
//
// # Time
//
// One goroutine per owned partition loads it, then ticks its groups at
// group.NextDeadline, applies topic metadata changes (SetTopics) and, every
// Config.RetentionCheckInterval, the offset retention (group.Expiry). Every
// goroutine is owned: a dropped partition's goroutine is cancelled, Close
// waits for all of them.
package coordinator
