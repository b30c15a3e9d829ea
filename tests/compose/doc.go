// Package compose tests docker-compose.yml end to end: the cluster of three
// controllers, three storage nodes, two group coordinators, the gateway and
// Jaeger, started from the
// skein/*:dev images with Docker Compose, driven only through the ports the
// file publishes on 127.0.0.1.
//
// The test is behind the build tag compose and needs Docker with Compose
// (`docker compose` or `docker-compose`); it fails, not skips, without them.
// Run it with the images built first:
//
//	make compose-test
//
// which is `make images jaeger-image` followed by
// `go test -tags compose -count=1 -v skein/tests/compose/...`.
//
// It creates a topic (RF 3, min.insync.replicas 2), produces and consumes
// through the gateway's REST port, finds one produce's trace in Jaeger with
// spans from the gateway, the storage leader and both followers, docker-kills
// the partition leader while acks=all produces go on and checks nothing
// acknowledged was lost, restarts it, cuts the leader off the network and
// then off from its followers and the gateway only (blackhole routes entered
// with nsenter and ip: the test needs root), then cuts a follower off the compose
// network and checks it leaves the ISR and rejoins once reconnected, and
// cuts the Raft leader off for a minute and checks it rejoins gossip and the
// quorum. SKEIN_COMPOSE_PHASES=cutcontroller (or basic, trace, kill,
// cutleader, cutpartial, cutfollower; comma-separated) runs only those steps. When the
// test fails it prints the containers' last log lines and then, once more,
// what failed. SKEIN_COMPOSE_LOGS=DIR writes every service's whole log
// there at the end.
// `docker compose down -v` runs at the end whatever happens, and also shortly
// before the test binary's -timeout.
package compose
