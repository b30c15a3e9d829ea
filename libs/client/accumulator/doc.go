// Package accumulator gathers a producer's records into per-partition
// batches, as Kafka's RecordAccumulator does: a batch for a partition fills up
// to batch.size bytes (never above the topic's max.message.bytes) and is ready
// to send when it is full, when it has waited linger.ms, or when the producer
// flushes.
//
// Contract (pure: no goroutines, no clock; the caller passes now):
//   - Records keep their order within a partition: batches of a partition
//     come out of Pop in the order they were opened, records within a batch in
//     the order they were appended.
//   - Only the last batch of a partition is open for appends; every earlier
//     one is full and therefore ready.
//   - A record bigger than the limit on its own still gets a batch of its own
//     (checking it against max.message.bytes is the producer's job).
//   - Sizes are the exact uncompressed RecordBatch v2 encoding (header plus
//     records), so a batch never exceeds the limit before compression.
//   - Not safe for concurrent use: the producer guards it with its lock.
package accumulator
