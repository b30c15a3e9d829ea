package group

import (
	"maps"
	"slices"
	"time"

	"skein/services/groupcoord/internal/assign"
)

// Expiry is what the offset retention rule looks at in one group
// (Kafka's offsets.retention.minutes, as its consumer-group coordinator
// applies it): the committed offsets of a partition expire once no member
// of the group subscribes to the partition's topic, no transaction's
// offset is pending for it, and Retention has passed since the later of
// the offset's commit and the last time the topic was seen subscribed.
type Expiry struct {
	Now       time.Time
	Retention time.Duration
	// Offsets are the group's committed offsets.
	Offsets map[assign.TopicPartition]Offset
	// Held are partitions the group holds something of beside an offset
	// (failed deliveries): with no commit time of their own, they expire
	// by the subscription times alone, and with their partition's offset.
	Held []assign.TopicPartition
	// Subscribed are the topics the group's members subscribe to now.
	Subscribed map[string]bool
	// Pending reports whether a transaction's offset is pending for tp.
	Pending func(tp assign.TopicPartition) bool
	// LastSubscribed is, per topic, when a member was last seen
	// subscribing to it; a topic missing there counts from Since.
	LastSubscribed map[string]time.Time
	// Since is the earliest time the rule may count from: when this
	// coordinator took the group over (what it saw before is unknown).
	Since time.Time
}

// Expired answers, sorted, the partitions whose offsets (and whatever else
// the group holds of them) have expired.
func (e Expiry) Expired() []assign.TopicPartition {
	from := func(topic string) time.Time {
		t := e.Since
		if s, ok := e.LastSubscribed[topic]; ok && s.After(t) {
			t = s
		}
		return t
	}
	due := func(tp assign.TopicPartition, base time.Time) bool {
		if e.Subscribed[tp.Topic] || (e.Pending != nil && e.Pending(tp)) {
			return false
		}
		if f := from(tp.Topic); f.After(base) {
			base = f
		}
		return !e.Now.Before(base.Add(e.Retention))
	}
	var out []assign.TopicPartition
	for _, tp := range slices.SortedFunc(maps.Keys(e.Offsets), compareTP) {
		if due(tp, e.Offsets[tp].CommitTime) {
			out = append(out, tp)
		}
	}
	for _, tp := range e.Held {
		if _, ok := e.Offsets[tp]; !ok && due(tp, time.Time{}) && !slices.Contains(out, tp) {
			out = append(out, tp)
		}
	}
	slices.SortFunc(out, compareTP)
	return out
}
