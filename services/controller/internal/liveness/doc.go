// Package liveness is the active controller's reconciler: it watches broker
// sessions (heartbeats) and gossip (membership events) and turns what it
// sees into Raft commands — fence a broker whose session expired or that
// gossip declared dead or gone, follow coordinator processes joining and
// dying, create the internal topics once enough brokers are live, name the
// cluster, and move leadership back to preferred replicas every
// leader-imbalance check interval.
//
// Tracker is the pure part: it takes heartbeats, gossip events and the time
// as inputs and answers, for a metadata image, the commands to propose (Plan).
// Loop is the thin shell: one goroutine that feeds the Tracker, and — only
// while this controller is the Raft leader — proposes what Plan answers. A
// controller that becomes leader first waits for its log to be applied
// (a Raft barrier) and gives every broker a full session from that moment,
// since heartbeats went to the previous leader.
package liveness
