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
// Over mutual TLS, the process guards the service with Rules (peerauth): a
// broker's registration, heartbeats, controlled shutdown and ISR changes
// are for storage nodes' certificates (and a follower controller relaying
// them). With an authorizer (SetAuthorizer), admin changes by a client —
// its own certificate, or the gateway naming it — need its ACLs: topic
// CREATE (or cluster CREATE) to create topics, topic DELETE to delete,
// topic ALTER to add partitions or change configs, cluster ALTER to elect
// leaders and to change ACLs. Skein's own services are not subject to
// ACLs. The leader decides: a follower relays the call with the client's
// principal (forwardedPrincipalKey), which the leader believes from a
// controller's certificate only. A refusal is answered where the call
// answers errors — per topic, per ACL binding or filter, or (ElectLeaders)
// as the call's status.
//
// The package also serves HTTP: /metrics (Prometheus), /healthz (200 while
// serving) and /readyz (200 while a Raft leader is known).
package server
