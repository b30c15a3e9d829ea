// Package history records what the clients of a test saw and checks it, in
// the spirit of Jepsen's Kafka checker. It owns the history format (sends,
// polls, commits, transaction ends, each with its outcome and times), the
// classification of produce errors into definite and unknown outcomes, and
// the anomaly definitions below. It is pure logic: it does no I/O and reads
// no clock — times come in as values — so the fault tests, `make verify` and
// the lab demos share one audit.
//
// # Recording
//
// A Recorder is safe for concurrent use. Each operation is recorded once,
// when its answer (or the give-up) is known, with its invoke and complete
// times:
//
//   - Send: producer, partition, value and Outcome — Written with the
//     acknowledged offset, NotWritten (definitely not in the log) or
//     Unknown (may be in the log). An error is definite only when the
//     record cannot have been written: NOT_ENOUGH_REPLICAS (checked before
//     the append) and validation errors. Timeouts, connection errors and
//     NOT_ENOUGH_REPLICAS_AFTER_APPEND are Unknown (ErrorOutcome,
//     ErrOutcome). The gateway's produce results say it themselves in their
//     outcome field (WRITTEN, NOT_WRITTEN, UNKNOWN): SendResult and
//     OutcomeOf take it as it comes.
//   - Poll: the records returned (partition, offset, value), by which
//     consumer (member id), of which group, at which member epoch, with the
//     assignment it held. Group "" is a standalone consumer.
//   - Commit: group, member, partition, offset, ok or failed.
//   - Txn: how a transaction ended (sends name their transaction in Txn).
//
// # Checking
//
// Check takes the History and the final read of the topic (Log: per
// partition, offset → value; a partition missing from it is read as empty)
// and counts anomalies of these kinds:
//
//   - lost-write: an acknowledged record that the final log does not hold
//     at its acknowledged offset.
//   - unseen: an acknowledged record that the final log holds at its offset
//     (and that is not in a transaction that did not commit) which a reader
//     never polled, although that reader polled the partition past its
//     offset. A reader is a group (its members together) or a standalone
//     consumer. A consumer that ran to the end of the log must therefore
//     have seen every acknowledged record; one that stopped early answers
//     only for what lies below the highest offset it polled.
//   - duplicate: one value at two places (partition and offset), across
//     acknowledgements, polls and the final log. Values are assumed unique
//     per send; a send retried under the same value is fine as long as only
//     one copy lands.
//   - inconsistent-offset: two different values reported at one offset of
//     one partition, by acknowledgements, polls or the final log.
//   - failed-written: a send answered NOT_WRITTEN whose value is in the
//     final log or was polled (and that no other send of the same value
//     may have written): the definite failure was not definite.
//   - nonmonotonic-send: per producer and partition, in the order the sends
//     were invoked, an acknowledged offset not above the previous one.
//   - poll-skip: within one member's run on a partition, two consecutive
//     polled offsets a < b where the final log holds records between them.
//     A run is the member's polls, in invoke order, while each poll's
//     assignment holds the partition and the member epoch stays the same
//     (a standalone consumer's polls are one run). Compaction is assumed
//     off: an offset missing from the log is a control record or a gap,
//     never a skipped record.
//   - nonmonotonic-poll: within one run, a polled offset not above the one
//     polled before it (re-delivery or going back). A consumer that seeks
//     back without a new epoch must record under a new member id.
//   - commit-backwards: per group and partition, a successful commit that
//     began after another successful commit had completed, at a lower
//     offset.
//   - aborted-read: a read_committed poll returned a record of a
//     transaction that aborted.
//   - uncommitted-read: a read_committed poll returned a record of a
//     transaction that never ended, or that completed before the
//     transaction's commit was sent.
//   - nonlinearizable: a partition whose sends and polled reads, each
//     within its invoke–complete interval, fit no sequential append-only
//     log (checked with porcupine, see below).
//
// Transactions do not exist in Skein yet: the two transactional kinds are
// only checked when sends carry a Txn id, so the checker is ready for them.
//
// # Linearizability
//
// Each partition of at most Options.LinearizabilityMaxOps operations is
// checked with github.com/anishathalye/porcupine against an append-only
// log: a send returns its offset, above every offset before it; a read of
// offset o returns the value there. Acknowledged sends return their offset;
// a send of unknown outcome that was observed (polled, or in the final log)
// returns the observed offset and may take effect until the history ends;
// unobserved unknown and NotWritten sends are left out. The verdict per
// partition is linearizable, not-linearizable (an anomaly), unknown
// (porcupine timed out) or skipped (too many operations).
//
// # Result
//
// Result.String prints a table of every kind with its count and up to
// Options.MaxExamples examples, the linearizability verdicts, and VALID or
// INVALID; Result.Valid reports whether no anomaly was found.
package history
