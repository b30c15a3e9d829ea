// Package lab holds the lab demos behind `make demo-*` and the skein-lab
// command: each starts a `skein dev` cluster of its own on free loopback
// ports, stages one fault with real processes (SIGSTOP, SIGKILL through the
// pids in cluster.json), records what the clients were told in a
// libs/history Recorder, audits it against a final read of the topic, and
// prints what happened in plain words. The cluster is always stopped.
//
//   - acks1-loss: acks=1 records acknowledged by the leader alone are lost
//     when it dies before its (paused) followers copied them.
//   - acks-all: the same crash with acks=all and min.insync.replicas=2
//     loses nothing.
//   - min-isr: two of three replicas stopped: acks=all is refused with
//     NOT_ENOUGH_REPLICAS, acks=1 goes on.
//   - group: two members split 6 partitions 3/3; one leaves and the other
//     takes all 6; a member that crashes before committing has its records
//     delivered again to the next owner.
//   - unclean: with unclean.leader.election.enable, a replica that fell out
//     of the ISR is elected and the records it lacked are lost.
package lab
