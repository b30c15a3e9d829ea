// Package quorum runs the controller's Raft node: three voters bootstrapped
// from a static peer list, the badger log (raftstore), a file snapshot store,
// and the raft.FSM that feeds committed commands to the pure state machine
// (fsm) and fans each committed change out to metadata watchers.
//
// Propose is the only way to change metadata: it succeeds on the Raft leader
// once the command is committed and applied, and answers NOT_CONTROLLER
// elsewhere (the gRPC shell forwards to the leader). Snapshots are the
// protobuf MetadataImage; restarting replays the latest snapshot and the log
// after it.
//
// Watchers (Subscribe) get an image, then every change as a delta stamped
// with its Raft index, through a bounded buffer: one that falls behind is
// told to resync and gets a fresh image instead of an unbounded backlog.
// Publishing happens under the same lock as applying, so an image and the
// deltas queued after it never overlap or leave a gap.
//
// With TLS the Raft transport is mutual TLS between controllers only: a
// certificate of the cluster's CA that does not name the controller role
// (spiffe://skein/controller/<id>) is refused on either end.
package quorum
