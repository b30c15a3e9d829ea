// Package partition is one replica of one partition on a storage node: the
// log plus what replication needs around it — role and leader epoch from the
// controller's metadata, the high watermark, each follower's LEO and
// caught-up time (leader), the purgatory of acks=all produces waiting for the
// HW, idempotent producer state, and ISR changes proposed to the controller.
//
// One mutex guards the replica's state; the log is appended to only with it
// held and read without it (the log allows concurrent readers). The rules
// themselves live in the pure packages isr and producer; this package applies
// them and performs the effects. It opens no sockets: the replica manager and
// the gRPC server drive it.
//
// Invariants: 0 <= HW <= LEO; a leader's HW never moves backwards; nothing at
// or above the HW is served to consumers; a produce is acknowledged with
// acks=all only once every member of the (maximal) ISR holds it.
package partition
