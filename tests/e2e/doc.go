// Package e2e drives a whole Skein cluster the way a user does: it starts
// `bin/skein dev` (3 controllers, 3 storage nodes and a gateway, as real
// processes on 127.0.0.1), then talks to the gateway over REST and gRPC only.
//
// The tests (build tag integration; `make test-integration`) cover the
// public API on a live cluster: 10,000 keyed records through each API with
// Kafka's key placement, per-partition order, exactly-once delivery to a
// reader, headers, timestamps and binary values round-tripping; every bad
// input docs/API.md names, answered with its documented status and
// error_code; the long-poll fetch; and the README quickstart's curl
// commands, run as printed.
//
// One cluster serves every test of a run: it starts on first use and
// TestMain stops it (SIGTERM to skein dev, which stops its children in
// order), printing the tail of every process's log when a test failed.
package e2e
