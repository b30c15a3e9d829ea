// Package server is the controller's gRPC shell: ControllerService over the
// Raft node (quorum) and the reconciler (liveness).
//
// Writes — registrations, heartbeats, topic and partition changes, ISR
// changes, elections, producer-id blocks — are proposed through Raft on the
// leader; a follower forwards the call to the leader's gRPC address (from the
// peer list) and relays the answer, so a client may talk to any controller.
// A call that finds no leader within a few seconds, or that was already
// forwarded once, is answered NOT_CONTROLLER (retriable).
//
// Reads — DescribeCluster, FindCoordinator, WatchMetadata — are served from
// the local image of whichever controller is asked. Domain errors become
// gRPC statuses only here (rpcerr.ToGRPC); batched requests answer per item.
//
// The package also serves HTTP: /metrics (Prometheus), /healthz (200 while
// serving) and /readyz (200 while a Raft leader is known).
package server
