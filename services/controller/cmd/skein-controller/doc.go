// Command skein-controller runs one member of Skein's metadata quorum: a
// hashicorp/raft voter holding the cluster metadata (brokers, topics,
// partitions, ISR, configs, coordinator ownership, producer-id blocks) and
// serving ControllerService over gRPC, with /metrics, /healthz and /readyz
// over HTTP.
//
//	skein-controller [flags]                run a controller (every flag has a SKEIN_* env twin)
//	skein-controller healthcheck [--http-addr host:port]
//	                                        exit 0 if /healthz answers 200, 1 otherwise
//
// With --tls-cert, --tls-key and --tls-ca every listener is mutual TLS;
// brokers' calls (registration, heartbeats, ISR changes, controlled
// shutdown) are then taken from storage nodes' certificates only, and Raft
// traffic from controllers' only. --authorizer makes clients' admin changes
// need ACLs (skein acl), --super-users names principals allowed
// everything.
//
// SIGTERM or SIGINT stops it gracefully: gRPC drains, the gossip cluster is
// told it leaves, leadership is handed over, Raft shuts down.
package main
