// Package checkpoint owns a storage node's node-local checkpoints: per
// partition replica the high watermark, the recovery point and the log start
// offset, plus a generic key -> bytes space for snapshots such as producer
// state.
//
// Contract: a Store is safe for concurrent use; a write that returned nil is
// durable (the badger store syncs every write) and SaveOffsets of many
// partitions is atomic, all or nothing. Values returned are the caller's to
// keep. Badger is the on-disk implementation; Memory is the in-process one
// for tests, with the same behaviour (TestStores runs both).
package checkpoint
