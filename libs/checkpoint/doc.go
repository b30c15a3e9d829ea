// Package checkpoint owns a storage node's node-local checkpoints: per
// partition replica the high watermark, the recovery point and the log start
// offset, plus a generic key -> bytes space for snapshots such as producer
// state.
//
// Contract: a Store is safe for concurrent use; a write that returned nil is
// durable (the on-disk stores sync every write) and SaveOffsets of many
// partitions is atomic, all or nothing. Values returned are the caller's to
// keep. Files is the on-disk implementation storage nodes use; Badger, what
// earlier versions used, remains to convert their stores (Files does at its
// first open); Memory is the in-process one for tests, with the same
// behaviour (the tests run all three).
package checkpoint
