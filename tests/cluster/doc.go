// Package cluster starts a real Skein cluster — three controllers, N
// storage nodes and, on demand, group coordinators as separate processes on
// 127.0.0.1, from the binaries `make build` writes to bin/ — for tests
// that need what only real processes show: kill -9, a paused process, a
// restart on the same data directory. It also
// carries a small test client (metadata watch, idempotent acks=all producer,
// partition reader) and the history checker that proves no acknowledged
// record was lost, duplicated or reordered.
package cluster
