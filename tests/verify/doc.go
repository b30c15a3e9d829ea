// Package verify is the seeded fault-schedule runner behind `make verify`
// and the skein-verify command. It starts a `skein dev` cluster of its own
// on free loopback ports, runs idempotent acks=all producers (REST and a
// gRPC ProduceStream, through the gateway) on a topic of RF 3 and
// min.insync.replicas 2, and a consumer group of REST members that commit
// what they poll, while a fault schedule derived from a seed applies faults
// with real processes one after another, letting the cluster heal between
// them:
//
//   - leader-kill: SIGKILL the storage node leading a partition, restart it
//     from its command line (/proc/<pid>/cmdline) a few seconds later.
//   - follower-kill: the same for a follower of a partition.
//   - controller-kill: the same for the controllers' Raft leader.
//   - groupcoord-kill: the same for the group coordinator of the group.
//   - txncoord-kill: the same for the transaction coordinator of a
//     transactional id.
//   - leader-pause: SIGSTOP a partition leader past the broker session
//     timeout, then SIGCONT.
//   - double-failover: SIGKILL a partition's leader, and as soon as another
//     replica leads it, restart the first and SIGKILL the new leader too.
//
// At the end everything is healed and stopped, the topic is read to its end
// (read_committed), the libs/history checker audits what the clients saw,
// and a table gives, per fault kind, what happened in the windows of that
// kind's faults. The seed is printed so a run can be replayed: the same
// seed gives the same schedule (which kinds, in which order, which
// partition, how long each node stays down).
package verify
