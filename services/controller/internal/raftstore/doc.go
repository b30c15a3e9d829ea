// Package raftstore is the controller's Raft storage: one badger database
// holding both the Raft log (raft.LogStore) and Raft's small durable state —
// current term, last vote — (raft.StableStore).
//
// Layout (keys sort as shown, so the log is one ordered key range):
//
//	key                              value
//	'l' | index (8 bytes, big end.)  one log entry, encoded below
//	's' | name                       a stable value (uint64s as 8 bytes, big end.)
//
//	log entry encoding
//	offset  size  field
//	0       1     format version (1)
//	1       8     term
//	9       1     raft.LogType
//	10      8     appended at, Unix nanoseconds (0 when unset)
//	18      4     len(data) = n
//	22      n     data
//	22+n    4     len(extensions) = m
//	26+n    m     extensions
//
// The index is the key's, not repeated in the value. Writes are synced
// (badger SyncWrites): an entry Raft was told is stored survives a crash.
package raftstore
