// Package client is Skein's smart Go client: what the gateway, the
// coordinators and the CLI use to reach the controller and the storage nodes.
//
// A Client follows the controller's WatchMetadata stream through
// libs/metadata/watch (any controller of a list; on an error or
// metadata.WatchSilence of silence it moves to the next with backoff, from a
// fresh image) and keeps the latest libs/metadata Image as an immutable
// snapshot that every call routes by. On top of it:
//
//   - Producer: Kafka's producer. Records are partitioned like the Java client
//     (package partitioner), gathered per partition (package accumulator:
//     batch.size, 256 KiB by default; linger.ms, which holds records back
//     only while an earlier batch of the partition is out unless
//     WithSendWhenIdle(false); compression), and sent over one pipelined
//     ProduceStream per broker, matched by correlation id. Retriable errors
//     are retried with backoff against fresh metadata until the delivery
//     timeout. Idempotent by default under acks=all: the producer id comes
//     from a block the Client takes from the controller (AllocateProducerIds),
//     each batch carries the partition's next base sequence, epoch 0. Up to
//     five batches per partition are in flight, counted from the oldest not
//     yet settled, so a resend stays within the storage node's duplicate
//     window and ordering holds across retries. Records without a result
//     yet, queued or in flight, are bounded by buffer.memory (32 MiB):
//     Produce waits for room up to max.block (1 minute), as Kafka's send
//     does, then fails the record with REQUEST_TIMED_OUT; waiting records
//     get room in the order they came.
//   - Fetch and ListOffsets against the partition leader, following leader
//     changes; fetched batches are decoded into records (read_committed skips
//     aborted transactions and control batches).
//   - Admin calls to the controller: CreateTopic, DeleteTopic,
//     CreatePartitions, AlterConfigs, ElectLeaders, DescribeCluster.
//
// Errors are rows of libs/errs (wrapped with a message): a peer's gRPC
// status is turned back into its row with rpcerr.FromStatus, per-partition
// error codes with errs.ForCode.
package client
