// Package producer keeps idempotent and transactional producer state for one
// partition: per producer id its epoch and the sequence ranges and offsets of
// its last five batches, so a retried batch is answered with its original
// offsets instead of being written twice, a gap in sequences is refused, and
// a producer with an older epoch is fenced. It also tracks each producer's
// open transaction, from which the partition's last stable offset follows.
//
// State is pure data: Check decides, Append records what was appended (on the
// leader after its append, on followers and on recovery while replaying the
// log), so the same code rebuilds the state from a snapshot plus the log tail.
package producer
