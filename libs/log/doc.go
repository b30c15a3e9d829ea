// Package log owns one partition's replica of the log on disk: a directory of
// segments holding Kafka RecordBatch v2 bytes, their sparse indexes, and the
// leader-epoch cache. It is a library: no network, no background goroutines,
// and time comes from the caller (Options.Now, or a now argument).
//
// Contract:
//   - Offsets: LogStartOffset <= every readable offset < LEO. Batches tile the
//     offset space from the first segment's base offset to the LEO without
//     gaps (compaction keeps emptied batches as headers for this reason), and
//     only the last segment is appended to.
//   - Append (leader) validates every batch fully, assigns offsets and the
//     leader epoch by rewriting only the header fields outside the CRC, and
//     stores the bytes as given. AppendAsFollower keeps the leader's offsets
//     and refuses batches that do not start exactly at the LEO.
//   - Read hands out whole stored batches, never decoding records, at least
//     one batch even when it is larger than maxBytes, and only batches whose
//     last offset is below the caller's bound (the HW or LSO).
//   - Concurrency: one writer at a time (every mutating method takes the
//     writer lock for its whole run; compaction takes it only to swap each
//     cleaned segment in, so appends go on during a pass) and any number of
//     concurrent readers; readers never see bytes past what a finished
//     append published, nor a half-swapped compacted segment. No goroutines
//     are started: retention, compaction and flush.ms run when the caller
//     calls DeleteExpired, Compact and FlushIfDue with its clock.
//   - Durability: by default nothing is fsynced per append (replication is the
//     durability, as in Kafka); flush.messages / flush.ms fsync, and the
//     recovery point says what is known to be on disk. Open re-validates
//     everything after the recovery point and cuts a torn or corrupt tail:
//     corrupt bytes are never served. With flush.messages of 100 or less the
//     active segment is zero-filled ahead of the appends, so that their
//     fsyncs need not commit the filesystem's journal; zeros after the last
//     batch are the log's end, not a torn tail, and rolls and Close cut them.
//   - Errors are rows of skein/libs/errs: OFFSET_OUT_OF_RANGE,
//     CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE,
//     KAFKA_STORAGE_ERROR for I/O failures.
//
// The caller (the storage node) persists State (log start offset, recovery
// point) in its checkpoint store and hands it back to Open.
package log
