package assign

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// MemberID names a member of a consumer group (a UUID in practice).
type MemberID string

// TopicPartition is one partition of one topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return tp.Topic + ":" + strconv.Itoa(int(tp.Partition)) }

func compareTP(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// Partitions is a set of partitions: topic → partition numbers, sorted and
// distinct, no topic with an empty list. Methods never modify their receiver
// or argument; the zero value (nil) is the empty set. Build one with Of or
// FromList when the input may be unsorted.
type Partitions map[string][]int32

// Of normalises a topic → partitions map: sorts, removes duplicates and empty
// topics. The argument is not modified.
func Of(m map[string][]int32) Partitions {
	out := Partitions{}
	for t, ps := range m {
		if len(ps) == 0 {
			continue
		}
		s := slices.Clone(ps)
		slices.Sort(s)
		out[t] = slices.Compact(s)
	}
	return out
}

// FromList builds the set holding the given partitions.
func FromList(tps []TopicPartition) Partitions {
	m := map[string][]int32{}
	for _, tp := range tps {
		m[tp.Topic] = append(m[tp.Topic], tp.Partition)
	}
	return Of(m)
}

// List answers the partitions ordered by topic, then partition.
func (p Partitions) List() []TopicPartition {
	out := make([]TopicPartition, 0, p.Count())
	for _, t := range slices.Sorted(maps.Keys(p)) {
		for _, n := range p[t] {
			out = append(out, TopicPartition{t, n})
		}
	}
	return out
}

// Count is the number of partitions in the set.
func (p Partitions) Count() int {
	n := 0
	for _, ps := range p {
		n += len(ps)
	}
	return n
}

// Contains reports whether the set holds the partition.
func (p Partitions) Contains(topic string, partition int32) bool {
	_, ok := slices.BinarySearch(p[topic], partition)
	return ok
}

// Clone answers a deep copy (nil stays nil).
func (p Partitions) Clone() Partitions {
	if p == nil {
		return nil
	}
	out := make(Partitions, len(p))
	for t, ps := range p {
		out[t] = slices.Clone(ps)
	}
	return out
}

// Equal reports whether both sets hold the same partitions (nil equals empty).
func (p Partitions) Equal(o Partitions) bool {
	if p.Count() != o.Count() {
		return false
	}
	for t, ps := range p {
		if !slices.Equal(ps, o[t]) {
			return false
		}
	}
	return true
}

// Intersect answers the partitions in both sets.
func (p Partitions) Intersect(o Partitions) Partitions {
	return p.filter(func(t string, n int32) bool { return o.Contains(t, n) })
}

// Minus answers the partitions of p that are not in o.
func (p Partitions) Minus(o Partitions) Partitions {
	return p.filter(func(t string, n int32) bool { return !o.Contains(t, n) })
}

// Union answers the partitions in either set.
func (p Partitions) Union(o Partitions) Partitions {
	m := map[string][]int32{}
	for t, ps := range p {
		m[t] = append(m[t], ps...)
	}
	for t, ps := range o {
		m[t] = append(m[t], ps...)
	}
	return Of(m)
}

// Intersects reports whether the sets share a partition.
func (p Partitions) Intersects(o Partitions) bool {
	for t, ps := range p {
		for _, n := range ps {
			if o.Contains(t, n) {
				return true
			}
		}
	}
	return false
}

// SubsetOf reports whether every partition of p is in o.
func (p Partitions) SubsetOf(o Partitions) bool { return p.Minus(o).Count() == 0 }

func (p Partitions) filter(keep func(string, int32) bool) Partitions {
	out := Partitions{}
	for t, ps := range p {
		var s []int32
		for _, n := range ps {
			if keep(t, n) {
				s = append(s, n)
			}
		}
		if len(s) > 0 {
			out[t] = s
		}
	}
	return out
}

// String writes the set as "t:0,1;u:3", topics in order; "-" when empty.
// ParsePartitions reads it back.
func (p Partitions) String() string {
	if p.Count() == 0 {
		return "-"
	}
	var b strings.Builder
	for i, t := range slices.Sorted(maps.Keys(p)) {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(t)
		b.WriteByte(':')
		for j, n := range p[t] {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(int(n)))
		}
	}
	return b.String()
}

// ParsePartitions reads the String form ("t:0,1;u:3", "-" or "" for none).
func ParsePartitions(s string) (Partitions, error) {
	m := map[string][]int32{}
	if s == "" || s == "-" {
		return Partitions{}, nil
	}
	for _, part := range strings.Split(s, ";") {
		t, list, ok := strings.Cut(part, ":")
		if !ok || t == "" {
			return nil, &parseError{s}
		}
		for _, n := range strings.Split(list, ",") {
			v, err := strconv.ParseInt(n, 10, 32)
			if err != nil || v < 0 {
				return nil, &parseError{s}
			}
			m[t] = append(m[t], int32(v))
		}
	}
	return Of(m), nil
}

type parseError struct{ s string }

func (e *parseError) Error() string {
	return "assign: cannot parse partitions " + strconv.Quote(e.s) + ` (want "t:0,1;u:2")`
}
