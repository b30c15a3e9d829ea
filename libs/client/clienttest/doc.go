// Package clienttest runs in-process fakes of a Skein cluster on loopback
// listeners for tests of libs/client and its users (the gateway, the CLI):
// a Controller that serves WatchMetadata, producer ids and the admin calls
// from an in-memory image, and Storage nodes that keep partitions in memory,
// assign offsets, deduplicate idempotent batches and long-poll fetches.
//
// The fakes follow the protos' contracts, not the real services' internals:
// replication is instant (the HW is the log end), and a node serves a
// partition exactly when the Controller's metadata names it leader. Tests
// steer them with Controller.SetLeader, Storage.FailNext and friends, and
// read what they received with Storage.Batches and Storage.Fetches.
package clienttest
