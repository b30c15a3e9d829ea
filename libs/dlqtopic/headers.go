package dlqtopic

import "strconv"

// The headers the group coordinator puts on a dead-lettered record, after
// the record's own.
const (
	HeaderSourceTopic     = "dlq.source.topic"
	HeaderSourcePartition = "dlq.source.partition"
	HeaderSourceOffset    = "dlq.source.offset"
	HeaderReason          = "dlq.reason"
	HeaderAttempts        = "dlq.attempts"
	HeaderGroup           = "dlq.group"
	// HeaderSourceTimestamp is the record's own timestamp (ms since the
	// epoch): the copy is timestamped when it is dead-lettered. Copies
	// written before it existed carry the record's own time, and none.
	HeaderSourceTimestamp = "dlq.source.timestamp"
)

// Source is where a dead-lettered record came from, as its headers say.
type Source struct {
	Group     string
	Topic     string
	Partition int32
	Offset    int64
	Reason    string
	Attempts  int32
	// Timestamp is the record's own (ms), when the copy says (HasTimestamp).
	Timestamp    int64
	HasTimestamp bool
}

// Parse reads the dead-letter headers among a record's n headers, the i-th
// given by header(i). ok is false when the group, source topic, partition
// or offset is missing, or the last header of a kind does not parse. With
// repeated headers the last one counts: the coordinator's come after the
// record's own, which may hold those of an earlier dead-lettering, or any
// text a producer put there. own lists the indexes of the record's own
// headers: all but the last of each dead-letter kind.
func Parse(n int, header func(i int) (key string, value []byte)) (s Source, own []int, ok bool) {
	last := map[string]string{}
	lastAt := map[string]int{}
	for i := range n {
		switch k, v := header(i); k {
		case HeaderSourceTopic, HeaderSourcePartition, HeaderSourceOffset, HeaderReason, HeaderAttempts, HeaderGroup, HeaderSourceTimestamp:
			last[k], lastAt[k] = string(v), i
		}
	}
	for i := range n {
		k, _ := header(i)
		if at, dead := lastAt[k]; !dead || at != i {
			own = append(own, i)
		}
	}
	group, okG := last[HeaderGroup]
	topic, okT := last[HeaderSourceTopic]
	part, errP := strconv.ParseInt(last[HeaderSourcePartition], 10, 32)
	off, errO := strconv.ParseInt(last[HeaderSourceOffset], 10, 64)
	if !okG || !okT || errP != nil || errO != nil {
		return Source{}, own, false
	}
	s = Source{Group: group, Topic: topic, Partition: int32(part), Offset: off, Reason: last[HeaderReason]}
	if v, ok := last[HeaderAttempts]; ok {
		a, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return Source{}, own, false
		}
		s.Attempts = int32(a)
	}
	if v, ok := last[HeaderSourceTimestamp]; ok {
		ts, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return Source{}, own, false
		}
		s.Timestamp, s.HasTimestamp = ts, true
	}
	return s, own, true
}
