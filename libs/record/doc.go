// Package record owns Kafka's RecordBatch v2 wire and disk format: the bytes
// the gateway builds, the storage node validates and stores byte-for-byte, and
// consumers decode.
//
// Contract:
//   - A Batch is a view over the bytes of exactly one batch; nothing here
//     copies batch bytes unless it has to (decompression, building).
//   - BatchIter walks a byte slice of concatenated batches without copying;
//     RecordIter yields records whose Key, Value and header slices point into
//     the batch (uncompressed) or into the iterator's reusable decompression
//     buffer (compressed). Such slices are valid until the next Reset.
//   - Verify checks framing and the CRC-32C; ValidateRecords additionally
//     decodes every record. Failures carry rows of the error table:
//     CORRUPT_MESSAGE (length, magic or CRC), INVALID_RECORD (a record does not
//     parse or its offsets are wrong), UNSUPPORTED_COMPRESSION_TYPE, and
//     MESSAGE_TOO_LARGE (a size limit the caller set).
//   - Only the base offset and the partition leader epoch may change after a
//     batch is built (SetBaseOffset, SetPartitionLeaderEpoch): both sit before
//     the CRC'd range, so the CRC stays valid. SetMaxTimestamp (log append
//     time) recomputes the CRC.
//
// Codecs are Kafka's ids 1-4: gzip, snappy (written in the xerial framing the
// Java client uses; raw snappy blocks are read too, as franz-go writes them),
// lz4 (frame format) and zstd.
package record
