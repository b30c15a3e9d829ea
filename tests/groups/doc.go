// Package groups tests the group coordinator as real processes: a cluster
// of 3 controllers, 3 storage nodes and 2 skein-groupcoord processes
// (package cluster), driven over GroupCoordinatorService the way the
// gateway drives it — find the group's coordinator with the controllers'
// FindCoordinator, call it, find it again on NOT_COORDINATOR and its kin.
//
// The tests (build tag integration; `make test-integration`): a member's
// join, heartbeat, commit and offset fetch; the coordinator holding a group
// SIGKILLed while a member commits (another serves the group within
// seconds, committed offsets never go backwards, no acknowledged commit is
// lost); and a paused old owner whose late commit is refused once another
// coordinator took its partition over, its producer epoch fenced by the
// storage nodes; and, with a short offset retention, a group whose last
// member left losing its offsets and itself while a subscribed group keeps
// its own.
package groups
