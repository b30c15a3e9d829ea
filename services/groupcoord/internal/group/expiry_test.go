package group

import (
	"slices"
	"testing"
	"time"

	"skein/services/groupcoord/internal/assign"
)

func TestExpired(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	tp := func(topic string, p int32) assign.TopicPartition {
		return assign.TopicPartition{Topic: topic, Partition: p}
	}
	at := func(d time.Duration) Offset { return Offset{Offset: 1, CommitTime: t0.Add(d)} }
	cases := []struct {
		name string
		e    Expiry
		want []assign.TopicPartition
	}{
		{"nothing held", Expiry{}, nil},
		{"committed a retention ago, nobody subscribed", Expiry{
			Now: t0.Add(7 * day), Retention: 7 * day, Offsets: map[assign.TopicPartition]Offset{tp("a", 0): at(0), tp("a", 1): at(time.Millisecond)},
		}, []assign.TopicPartition{tp("a", 0)}},
		{"a subscribed topic keeps its offsets", Expiry{
			Now: t0.Add(30 * day), Retention: 7 * day, Offsets: map[assign.TopicPartition]Offset{tp("a", 0): at(0), tp("b", 0): at(0)},
			Subscribed: map[string]bool{"a": true},
		}, []assign.TopicPartition{tp("b", 0)}},
		{"counted from when the topic was last subscribed", Expiry{
			Now: t0.Add(10 * day), Retention: 7 * day, Offsets: map[assign.TopicPartition]Offset{tp("a", 0): at(0), tp("b", 0): at(0)},
			LastSubscribed: map[string]time.Time{"a": t0.Add(4 * day), "b": t0.Add(3 * day)},
		}, []assign.TopicPartition{tp("b", 0)}},
		{"counted from the coordinator's take-over at the earliest", Expiry{
			Now: t0.Add(10 * day), Retention: 7 * day, Offsets: map[assign.TopicPartition]Offset{tp("a", 0): at(0)},
			Since: t0.Add(5 * day),
		}, nil},
		{"a later commit counts over an earlier subscription", Expiry{
			Now: t0.Add(10 * day), Retention: 7 * day, Offsets: map[assign.TopicPartition]Offset{tp("a", 0): at(4 * day)},
			LastSubscribed: map[string]time.Time{"a": t0.Add(day)}, Since: t0,
		}, nil},
		{"a pending transactional offset keeps its partition", Expiry{
			Now: t0.Add(30 * day), Retention: 7 * day, Offsets: map[assign.TopicPartition]Offset{tp("a", 0): at(0), tp("a", 1): at(0)},
			Pending: func(x assign.TopicPartition) bool { return x == tp("a", 1) },
		}, []assign.TopicPartition{tp("a", 0)}},
		{"deliveries without an offset go by the subscription times", Expiry{
			Now: t0.Add(7 * day), Retention: 7 * day, Held: []assign.TopicPartition{tp("c", 0), tp("d", 0)},
			LastSubscribed: map[string]time.Time{"d": t0.Add(time.Hour)},
		}, []assign.TopicPartition{tp("c", 0)}},
		{"deliveries of a partition with an offset go with the offset", Expiry{
			Now: t0.Add(7 * day), Retention: 7 * day, Offsets: map[assign.TopicPartition]Offset{tp("a", 0): at(time.Hour)},
			Held: []assign.TopicPartition{tp("a", 0)},
		}, nil},
		{"sorted by topic then partition", Expiry{
			Now: t0.Add(8 * day), Retention: 7 * day, Offsets: map[assign.TopicPartition]Offset{tp("b", 0): at(0), tp("a", 2): at(0), tp("a", 10): at(0)},
			Held: []assign.TopicPartition{tp("a", 3)},
		}, []assign.TopicPartition{tp("a", 2), tp("a", 3), tp("a", 10), tp("b", 0)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.e.Expired(); !slices.Equal(got, c.want) {
				t.Fatalf("expired %v, want %v", got, c.want)
			}
		})
	}
}
