// Package delivery is the pure core of dead-lettering in consumer groups:
// it counts the failed deliveries (nacks) of records per group, topic,
// partition and offset, decides whether a nacked record is delivered again
// or dead-lettered, parses the group settings that govern it and builds
// the headers a dead-lettered record carries. It does no I/O, reads no
// clock and starts no goroutine: the coordinator (package coordinator)
// persists what it answers in __consumer_offsets and does the writes.
//
// # Semantics
//
// A nack is one failed delivery of one record. Partitions stay ordered, as
// in Kafka: a nack of offset o moves the member's position on the partition
// back to o, so o and every record after it are delivered again (a seek),
// and the partition does not move past o until o is committed past or
// dead-lettered. The next delivery of o is delivery attempt nacks+1.
//
// When a record's nacks reach max.delivery.attempts, it is dead-lettered:
// the entry turns DeadLettering (written to the log before anything else,
// with the dead-letter partition's high watermark at that moment), the
// record is written to the dead-letter topic, then the group's committed
// offset moves to o+1 and the entry is dropped. A nack of an entry already
// DeadLettering (a coordinator that failed between the steps) resumes it;
// the writer first looks for the record in the dead-letter partition from
// the recorded high watermark on (Matches), so it is written once.
//
// A commit past a record (Committed) ends its entry as well: the group
// processed it, so a group whose offsets are reset to read it again
// delivers it at attempt 1, as a Kafka user reprocessing a topic expects.
package delivery

import (
	"slices"
	"strconv"

	"skein/libs/dlqtopic"
	"skein/libs/errs"
	"skein/libs/record"
)

// State is where an entry stands.
type State int8

// The states of an entry.
const (
	// Nacked: the record is delivered again.
	Nacked State = 0
	// DeadLettering: the record goes to the dead-letter topic; the group
	// moves past it once it is there.
	DeadLettering State = 1
)

// MaxEntries bounds the entries kept per partition: the lowest offsets go
// first (a partition is normally retried at one offset at a time).
const MaxEntries = 64

// MaxReason bounds a nack's reason, in bytes.
const MaxReason = 1024

// Entry is the delivery state of one record.
type Entry struct {
	Offset int64
	// Nacks is the failed deliveries so far.
	Nacks int32
	// Reason is the last nack's reason.
	Reason string
	State  State
	// DLQFrom, while DeadLettering, is the dead-letter partition's high
	// watermark before the record was first written there: a copy written
	// by an earlier attempt is at or after it. -1 when unknown.
	DLQFrom int64
}

// Partition is the entries of one (group, topic, partition), by offset.
type Partition []Entry

// Find answers the entry of an offset.
func (p Partition) Find(offset int64) (Entry, bool) {
	i, ok := slices.BinarySearchFunc(p, offset, func(e Entry, o int64) int { return cmp64(e.Offset, o) })
	if !ok {
		return Entry{}, false
	}
	return p[i], true
}

// Attempt answers the delivery attempt the next delivery of offset is: 1
// for a record never nacked, nacks+1 after that.
func (p Partition) Attempt(offset int64) int32 {
	if e, ok := p.Find(offset); ok {
		return e.Nacks + 1
	}
	return 1
}

// Prune drops the entries below committed (the group has moved past them)
// and keeps at most MaxEntries, the highest offsets. It answers a new slice.
func (p Partition) Prune(committed int64) Partition {
	out := Partition{}
	for _, e := range p {
		if e.Offset >= committed {
			out = append(out, e)
		}
	}
	if len(out) > MaxEntries {
		out = out[len(out)-MaxEntries:]
	}
	return out
}

// Committed answers p once the group commits offset committed over prev
// (the committed offset it replaces; -1: none): the entries of the records
// the group has moved past, below either offset, are dropped. The group
// processed those records, so their failed deliveries are over: a group
// whose offsets are reset to read them again delivers them afresh, at
// attempt 1, as a Kafka user replaying a topic expects. Dropping those
// below prev too clears entries an earlier commit left behind. An entry
// at or after both stays: a member that nacks a record and commits its
// position there (the record is next to read) keeps its count. changed
// reports whether an entry went; p itself is answered when none did.
func (p Partition) Committed(prev, committed int64) (out Partition, changed bool) {
	past := max(prev, committed)
	i, _ := slices.BinarySearchFunc(p, past, func(e Entry, o int64) int { return cmp64(e.Offset, o) })
	if i == 0 {
		return p, false
	}
	return slices.Clone(p[i:]), true
}

// put answers p with e in its place (a new slice).
func (p Partition) put(e Entry) Partition {
	out := slices.Clone(p)
	i, ok := slices.BinarySearchFunc(out, e.Offset, func(x Entry, o int64) int { return cmp64(x.Offset, o) })
	if ok {
		out[i] = e
		return out
	}
	return slices.Insert(out, i, e)
}

// Action is what a nack leads to.
type Action int8

// The actions.
const (
	// Redeliver: the member reads the partition again from the offset.
	Redeliver Action = iota + 1
	// DeadLetter: the record goes to the dead-letter topic, then the group
	// moves past it.
	DeadLetter
)

func (a Action) String() string {
	switch a {
	case Redeliver:
		return "redeliver"
	case DeadLetter:
		return "dead-letter"
	}
	return "none"
}

// Outcome is a nack's decision.
type Outcome struct {
	Action Action
	// Entry is the record's entry after the nack.
	Entry Entry
	// Resumed: the entry was DeadLettering already (an earlier nack decided
	// and the coordinator failed before the group moved past it); nothing
	// changed, the dead-lettering goes on.
	Resumed bool
	// Next is where the member reads the partition next: the offset
	// (redeliver), or the offset after it once dead-lettered.
	Next int64
}

// Nack decides a nack of offset on a partition whose entries are p, whose
// committed offset is committed (-1: none) and whose group allows
// maxAttempts deliveries. It answers the entries after the nack (p when
// the outcome is Resumed) and the outcome. An offset below the committed
// offset is OFFSET_OUT_OF_RANGE (the group has moved past it: there is
// nothing to redeliver); a negative offset or too long a reason is
// INVALID_REQUEST. Checks of the member and of the high watermark are the
// caller's.
func Nack(p Partition, offset, committed int64, maxAttempts int32, reason string) (Partition, Outcome, error) {
	switch {
	case offset < 0:
		return p, Outcome{}, errs.Errorf(errs.InvalidRequest, "offset %d is negative", offset)
	case committed >= 0 && offset < committed:
		return p, Outcome{}, errs.Errorf(errs.OffsetOutOfRange, "offset %d is below the group's committed offset %d: the group has moved past it", offset, committed)
	case len(reason) > MaxReason:
		return p, Outcome{}, errs.Errorf(errs.InvalidRequest, "reason is %d bytes, more than %d", len(reason), MaxReason)
	case maxAttempts < 1:
		maxAttempts = DefaultMaxAttempts
	}
	e, ok := p.Find(offset)
	if ok && e.State == DeadLettering {
		return p, Outcome{Action: DeadLetter, Entry: e, Resumed: true, Next: offset + 1}, nil
	}
	if !ok {
		e = Entry{Offset: offset, DLQFrom: -1}
	}
	e.Nacks++
	e.Reason = reason
	out := Outcome{Action: Redeliver, Next: offset}
	if e.Nacks >= maxAttempts {
		e.State, out.Action, out.Next = DeadLettering, DeadLetter, offset+1
	}
	out.Entry = e
	return p.put(e).Prune(committed), out, nil
}

// Undo answers p without the change a nack made: after is the entry the
// nack left, prev the entry before it (had: there was one). A nack whose
// dead-letter write was refused thus changes nothing. An entry that has
// changed since (it is no longer after) is left as it is.
func (p Partition) Undo(after, prev Entry, had bool) Partition {
	e, ok := p.Find(after.Offset)
	switch {
	case !ok || e != after:
		return p
	case had:
		return p.put(prev)
	}
	return slices.DeleteFunc(slices.Clone(p), func(x Entry) bool { return x.Offset == after.Offset })
}

// Unmarked answers what a DeadLettering entry was before the nack that
// marked it: Nacked, one nack fewer (none: no entry, had false). The
// reason of the nack before is not kept; the marking nack's stays.
func (e Entry) Unmarked() (prev Entry, had bool) {
	if e.Nacks <= 1 {
		return Entry{}, false
	}
	return Entry{Offset: e.Offset, Nacks: e.Nacks - 1, Reason: e.Reason, State: Nacked, DLQFrom: -1}, true
}

// WithDLQFrom answers p with the entry of offset carrying the dead-letter
// partition's high watermark (the caller learns it before it writes the
// DeadLettering entry).
func (p Partition) WithDLQFrom(offset, from int64) Partition {
	e, ok := p.Find(offset)
	if !ok {
		return p
	}
	e.DLQFrom = from
	return p.put(e)
}

// The headers of a dead-lettered record, after the record's own.
const (
	HeaderSourceTopic     = dlqtopic.HeaderSourceTopic
	HeaderSourcePartition = dlqtopic.HeaderSourcePartition
	HeaderSourceOffset    = dlqtopic.HeaderSourceOffset
	HeaderReason          = dlqtopic.HeaderReason
	HeaderAttempts        = dlqtopic.HeaderAttempts
	HeaderGroup           = dlqtopic.HeaderGroup
	HeaderSourceTimestamp = dlqtopic.HeaderSourceTimestamp
)

// Headers answers the record's own headers followed by the dead-letter
// headers of a record of topic:partition at offset, timestamped ts (ms),
// that group gave up on.
func Headers(own []record.Header, group, topic string, partition int32, offset, ts int64, e Entry) []record.Header {
	out := slices.Clone(own)
	return append(out,
		record.Header{Key: HeaderSourceTopic, Value: []byte(topic)},
		record.Header{Key: HeaderSourcePartition, Value: []byte(strconv.Itoa(int(partition)))},
		record.Header{Key: HeaderSourceOffset, Value: []byte(strconv.FormatInt(offset, 10))},
		record.Header{Key: HeaderReason, Value: []byte(e.Reason)},
		record.Header{Key: HeaderAttempts, Value: []byte(strconv.Itoa(int(e.Nacks)))},
		record.Header{Key: HeaderGroup, Value: []byte(group)},
		record.Header{Key: HeaderSourceTimestamp, Value: []byte(strconv.FormatInt(ts, 10))},
	)
}

// Source is where a dead-lettered record came from, read back from its
// headers.
type Source = dlqtopic.Source

// SourceOf reads the dead-letter headers of a record (dlqtopic.Parse); ok
// is false when one is missing or the last of its kind does not parse.
func SourceOf(hs []record.Header) (s Source, ok bool) {
	s, _, ok = dlqtopic.Parse(len(hs), func(i int) (string, []byte) { return hs[i].Key, hs[i].Value })
	return s, ok
}

// Matches reports whether a dead-letter record with headers hs is the copy
// of group's record topic:partition at offset.
func Matches(hs []record.Header, group, topic string, partition int32, offset int64) bool {
	s, ok := SourceOf(hs)
	return ok && s.Group == group && s.Topic == topic && s.Partition == partition && s.Offset == offset
}

func cmp64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
