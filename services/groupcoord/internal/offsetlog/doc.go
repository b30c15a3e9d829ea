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
//	delivery        int16 5 | group STRING | topic STRING |       int16 1 | count int32 | count times:
//	                partition int32                              offset int64 | nacks int32 | state int8 |
//	                                                             dlq_from int64 | reason STRING
//	group config    int16 6 | group STRING                       int16 1 | JSON object of strings (the
//	                                                             group's settings that are set)
//	any but owner   (as above)                                   none: tombstone (offset, group, pending
//	                                                             offset, deliveries or config deleted)
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
// The delivery and group config records are Skein's too (dead-lettering,
// package delivery). A delivery record holds, for one (group, topic,
// partition), the records members nacked and the group has not moved past
// yet, by offset: how many deliveries failed, the last reason, and the
// state — 0 nacked (delivered again), 1 dead-lettering (decided; it is
// written before the record goes to the dead-letter topic, with dlq_from,
// that topic partition's high watermark then, so a coordinator that takes
// over finds an earlier copy instead of writing a second). The record is
// rewritten whole on every nack, and in the batch of every offset commit
// that moves the group past an entry (which drops it: the record was
// processed), and tombstoned once no entry is left, so a coordinator
// failover keeps the counts, and a group reset to read a record again
// after it committed past it counts afresh. The group config record holds
// max.delivery.attempts and dlq.topic when set (defaults otherwise),
// written by AlterGroupConfig; DeleteGroup tombstones both.
//
// A value whose version is unknown, or bytes that do not parse, are an
// error (CORRUPT_MESSAGE), never a panic: the loader reports them and skips
// the record.
package offsetlog
