// Package group is the pure core of the consumer-group coordinator: one
// Group is the state machine of one consumer group, with server-side
// assignment in the spirit of Kafka's KIP-848. It does no I/O, starts no
// goroutine and reads no clock: the shell (the gRPC service) feeds it events
// with the time, performs the Effects it answers, and answers the RPCs.
//
// # Events
//
//   - Heartbeat(req, now): a ConsumerGroupHeartbeat. MemberEpoch 0 joins (or
//     rejoins after FENCED_MEMBER_EPOCH, or a static member comes back),
//     -1 leaves, -2 is a static member's temporary leave, >0 heartbeats.
//   - Tick(now): removes members whose session expired and members that did
//     not revoke within their rebalance timeout. Call it at NextDeadline().
//   - SetTopics(counts): the partition count of every topic; call it after
//     New/Restore and whenever topic metadata changes.
//   - CanCommit(member, epoch, topic, partition): OffsetCommit validation.
//   - Delete(): DeleteGroups, for an empty group.
//   - DeleteOffsets(req): OffsetDelete, for the partitions of topics no
//     member subscribes to; Effects.Drop says what the shell tombstones.
//   - TxnOffsets.Commit and TxnOffsets.Complete: TxnOffsetCommit and
//     CompleteTxnOffsets (see Transactional offsets).
//
// # Epochs and reconciliation
//
// The group epoch is bumped by every change of membership (join, leave,
// expiry, fencing), of a subscription, rack or preferred assignor, and of the
// partition count of a subscribed topic. Every bump computes a new target
// assignment at once (so the assignment epoch always equals the group
// epoch; the Assigning state of Kafka never shows here).
//
// A member moves to its target on its own heartbeats, incrementally:
//  1. if it holds partitions its target lacks, it is answered its
//     assignment without them (it keeps consuming the rest) and those
//     partitions are pending revocation; its epoch does not move;
//  2. a heartbeat whose owned partitions lack every pending one confirms
//     the revocation;
//  3. the member then takes the partitions of its target that no other
//     member holds (assigned or pending revocation) and its epoch becomes
//     the assignment epoch; partitions still held elsewhere are added on a
//     later heartbeat, once their holder confirmed, left or was removed.
//
// Invariant: no partition is ever in two members' assigned ∪ pending
// revocation sets. A member that does not confirm within its rebalance
// timeout is removed (fenced) by Tick, which frees its partitions.
//
// # Errors (all from skein/libs/errs)
//
//   - UNKNOWN_MEMBER_ID: heartbeat, leave or commit of a member the group
//     does not hold (or no longer holds: expired, fenced, left).
//   - FENCED_MEMBER_EPOCH: a heartbeat whose epoch is not the member's,
//     except the member's previous epoch with owned partitions within its
//     assignment (the answer that bumped it was lost), as in Kafka; also a
//     heartbeat of a static member that left with -2. The client drops its
//     partitions and rejoins with epoch 0 and the same member id: the group
//     then gives it its target back without a rebalance.
//   - UNRELEASED_INSTANCE_ID: a join with an instance id a live member holds.
//   - FENCED_INSTANCE_ID: a heartbeat or leave whose instance id now belongs
//     to another member id (a newer incarnation replaced this one), or whose
//     member id is registered with another instance id.
//   - INVALID_SESSION_TIMEOUT: a session timeout outside Config's bounds.
//   - INVALID_REQUEST: no member id (the shell assigns one on a join), an
//     empty subscription on a join, -2 from a dynamic member, an epoch
//     below -2.
//   - UNSUPPORTED_ASSIGNOR: an unknown server assignor.
//   - GROUP_MAX_SIZE_REACHED: a join beyond Config.MaxSize.
//   - STALE_MEMBER_EPOCH: an offset commit with an epoch other than the
//     member's current one (strict, as Kafka's consumer protocol; a member
//     pending revocation still commits at its unchanged epoch), or for a
//     partition the member does not hold (assigned or pending revocation).
//   - NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND: Delete of a group with members;
//     any event on a deleted group.
//   - GROUP_SUBSCRIBED_TO_TOPIC, UNKNOWN_TOPIC_OR_PARTITION: per partition
//     of DeleteOffsets, whose offset then stays.
//
// A refused event changes nothing.
//
// # Persistence
//
// Effects.Snapshot, when not nil, is the group's whole durable state after
// the event: the shell writes it (keyed by group id, to a compacted topic)
// and answers the RPC only once the write is acknowledged. If the write
// fails, the shell throws this Group away and restores the last written
// snapshot. Restore(cfg, snapshot, now) rebuilds a Group that behaves as the
// one that wrote it, except that every session (and pending rebalance
// timeout) starts afresh at now: heartbeats went to the previous
// coordinator. Heartbeat times are not durable, so a heartbeat that changes
// nothing durable answers no snapshot.
//
// # Transactional offsets
//
// TxnOffsets, beside a Group, holds the group's transactional offset
// commits: per producer id, the offsets its open transaction committed
// (TxnOffsetCommit), pending until the transaction coordinator completes
// the transaction here (CompleteTxnOffsets, at the markers' epoch). Each
// pending offset carries the producer epoch of its TxnOffsetCommit, and a
// completion at epoch E applies exactly the producer's pending offsets of
// an epoch below E: the transaction coordinator bumps the epoch at every
// end and writes the markers at the bumped epoch, so a transaction that
// committed offsets at epoch e completes at an epoch above e, and its
// producer's next transaction runs at (and commits offsets at) the
// completion's epoch or later. So a late or retried completion of an
// older transaction finds only offsets of epoch >= its own and leaves
// them, and a completion never applies offsets of a transaction that
// started after it. A TxnOffsetCommit below the epoch of the producer's
// pending offsets, or below a completion already seen, is PRODUCER_FENCED;
// one above replaces the producer's older pending offsets. Commit and
// Complete answer a TxnChange to write and Apply once written, as the
// group's Effects.
//
// The memory of completions is not durable (the pending offsets are): after
// a failover a TxnOffsetCommit delayed past the end of its transaction is
// accepted again, and its offsets stay pending until the producer's next
// TxnOffsetCommit to the group replaces them (its next transaction with
// offsets for the group starts with one) or a completion drops them.
//
// # Offset retention
//
// Expiry is the rule by which a group's committed offsets expire (Kafka's
// offsets.retention.minutes): pure, over the offsets, subscriptions and
// times the shell passes it; the shell writes the tombstones.
//
// A Group is not safe for concurrent use: one goroutine (or one mutex) owns it.
package group
