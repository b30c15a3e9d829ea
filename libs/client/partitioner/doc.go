// Package partitioner chooses a partition for a record exactly as Kafka's
// Java client does, so the same keys land on the same partitions in Skein as
// in Kafka.
//
// Contract (pure: no I/O, no clock, randomness injected):
//   - A record with a key (an empty key counts; only a nil key does not) goes
//     to ForKey(key, n) = toPositive(murmur2(key)) % n over all n partitions,
//     whether or not they have a leader, as Kafka's DefaultPartitioner does.
//   - A record without a key goes to the topic's sticky partition (KIP-480):
//     one partition, picked at random among those available, that keyless
//     records stick to until the batch being filled for it is full or sent;
//     then the producer calls OnNewBatch and a different partition is picked.
package partitioner
