// Package offsetlog is the record format of the __consumer_offsets topic:
// what the group coordinator writes and what it reads back when it takes a
// partition over. The topic is compacted, so every record is keyed and the
// newest record of a key is the state of that key; a record with no value (a
// tombstone) deletes the key.
//
// Keys and values start with a big-endian int16: in keys the record type,
// in values the value's version. Strings are an int16 byte length and the
// UTF-8 bytes (Kafka's STRING); integers are big-endian.
//
//	record          key                                          value (version 1)
//	--------------  -------------------------------------------  ------------------------------------------
//	offset commit   int16 1 | group STRING | topic STRING |       int16 1 | offset int64 | leader_epoch int32 |
//	                partition int32                              metadata STRING | commit_time_ms int64
//	group metadata  int16 2 | group STRING                       int16 1 | JSON of the group's snapshot
//	                                                             (groupJSON: epochs, assignor, members)
//	owner           int16 3 | partition int32 (of this topic)    int16 1 | coordinator int32 | epoch int32 |
//	                                                             time_ms int64
//	pending offset  int16 4 | group STRING | producer_id int64 |  int16 1 | producer_epoch int16 |
//	                topic STRING | partition int32               offset int64 | leader_epoch int32 |
//	                                                             metadata STRING | commit_time_ms int64
//	any but owner   (as above)                                   none: tombstone (offset, group or pending
//	                                                             offset deleted)
//
// Type numbers follow Kafka's (0 and 1 offset keys, 2 group metadata); type 0
// is not written and is read as an offset key too. The owner record is
// Skein's: the first record a coordinator writes when it takes a partition
// over, under its new producer epoch, so the storage node fences the
// previous owner before the new one reads the log.
//
// The pending offset record is Skein's too: an offset a transaction
// committed to a group (TxnOffsetCommit), kept apart from the group's
// committed offsets until the transaction coordinator completes the
// transaction (CompleteTxnOffsets), which writes offset commit records for
// a commit and tombstones the pending records either way. producer_epoch is
// the epoch of the TxnOffsetCommit that wrote the record. (Kafka writes
// transactional offsets as offset commit records in a transactional batch
// and applies them when its log sees the marker; Skein's group coordinator
// does not see the markers the storage nodes append, so it keeps the
// pending state itself.)
//
// A value whose version is unknown, or bytes that do not parse, are an
// error (CORRUPT_MESSAGE), never a panic: the loader reports them and skips
// the record.
package offsetlog
