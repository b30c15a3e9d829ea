// Package replica is a storage node's replica manager: it turns the
// controller's metadata into hosted partition replicas — opening their logs
// (recovering them, replaying producer state), making each leader or follower
// as the leader epoch says, pointing the fetchers at the right leaders — and
// runs their housekeeping: ISR shrink checks, HW and log-state checkpoints,
// flushes, retention. A partition that leaves this node's replica set (or
// whose topic was deleted) is closed and its directory removed.
//
// On disk, under the data directory:
//
//	| path                               | what                                  |
//	|------------------------------------|---------------------------------------|
//	| logs/<topic>-<partition>-<topicID>/ | the partition log (libs/log)          |
//	| logs/data-dir.id                   | the directory's id, with its logs (package dirid) |
//	| checkpoints/                       | HW, log start, recovery point, producer snapshots (libs/checkpoint files) |
//	| data-dir.id                        | the same id (package dirid)           |
package replica
