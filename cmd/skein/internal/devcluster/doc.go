// Package devcluster supervises a whole Skein cluster on this machine as
// separate processes on 127.0.0.1: three controllers (skein-controller), N
// storage nodes (skein-storage), M group coordinators (skein-groupcoord), K
// transaction coordinators (skein-txncoord) and one gateway (skein-gateway),
// found in a bin directory. It is what `skein
// dev` runs.
//
// Contract:
//   - Start picks free loopback ports, or reuses those recorded in
//     DIR/cluster.json from an earlier run, so a restart on the same data
//     directory finds its data and its peers where they were. The gateway's
//     addresses may be pinned instead (skein dev pins 127.0.0.1:8080 and
//     127.0.0.1:9090); a pinned address that is taken fails Start at once.
//   - Start returns once the gateway's /readyz is 200, its /v1/cluster
//     shows every storage node ALIVE and every group coordinator's /readyz
//     is 200 (the controllers list it); if a process exits first or the wait
//     times out, everything started is stopped and the error names the
//     process and the tail of its log (DIR/logs/<role>-<id>.log).
//   - DIR/cluster.json lists every process: role, id, pid, grpc_addr,
//     http_addr, data_dir (and raft_addr/gossip_addr where they have them).
//   - Stop sends SIGTERM (gateway first, then group coordinators, storage
//     nodes, controllers, so each tier can hand off to the one below), and SIGKILL
//     to whatever is still running after the grace period.
package devcluster
