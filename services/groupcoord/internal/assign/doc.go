// Package assign owns partition assignment for consumer groups: which member
// of a group should consume which partition. It is pure: an Assignor takes
// the members (their subscriptions and their current target) and the
// partition count of every topic, and answers a new target for every member.
//
// Contract of every Assignor:
//   - every partition of every topic some member subscribes to (and that the
//     topic map holds) is assigned to exactly one member;
//   - a partition only goes to a member subscribed to its topic;
//   - every member of the input has an entry in the answer (possibly empty);
//   - the answer depends only on the input, never on map order or the clock.
//
// Two assignors, named as in Kafka's KIP-848:
//   - "range" (Range): per topic, subscribers sorted (static members by
//     instance id first, then by member id) take contiguous ranges; the first
//     members take one extra when the count does not divide. Not sticky.
//   - "uniform" (Uniform): sticky; every member keeps its current partitions
//     while balance allows, and the counts end within 1 of each other when
//     subscriptions are the same. With different subscriptions it balances as
//     far as subscriptions allow (no move makes a member 2 or more above a
//     member that could take the partition).
//
// Partitions is the set type shared with package group: topic → sorted,
// distinct partition numbers.
package assign
