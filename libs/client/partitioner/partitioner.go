package partitioner

// Murmur2 is the 32-bit MurmurHash2 of b with Kafka's seed (0x9747b28c), as
// org.apache.kafka.common.utils.Utils.murmur2 computes it (Java's int read as
// uint32).
func Murmur2(b []byte) uint32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	h := seed ^ uint32(len(b))
	for ; len(b) >= 4; b = b[4:] {
		k := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch len(b) {
	case 3:
		h ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

// ToPositive is Kafka's Utils.toPositive: the hash as an int32 with its sign
// bit masked off (not negated, not the absolute value).
func ToPositive(h uint32) int32 { return int32(h & 0x7fffffff) }

// ForKey is the partition of a keyed record among n > 0 partitions.
func ForKey(key []byte, n int32) int32 { return ToPositive(Murmur2(key)) % n }

// Sticky holds the sticky partition of each topic for keyless records. The
// zero value is not usable; call NewSticky. Not safe for concurrent use: the
// producer calls it under the lock that guards its accumulator.
type Sticky struct {
	intn func(n int) int // uniform in [0, n)
	cur  map[string]int32
}

// NewSticky returns a sticky partitioner drawing from intn, which must
// return a uniform integer in [0, n) (math/rand/v2's IntN, say).
func NewSticky(intn func(n int) int) *Sticky {
	return &Sticky{intn: intn, cur: make(map[string]int32)}
}

// Partition is the topic's sticky partition among n partitions, of which
// available (ascending or not) have a leader. It picks one when the topic has
// none yet or the current one is no longer below n.
func (s *Sticky) Partition(topic string, n int32, available []int32) int32 {
	if p, ok := s.cur[topic]; ok && p < n {
		return p
	}
	return s.pick(topic, n, available, -1)
}

// OnNewBatch is called when a keyless record for prev would open a new batch
// (the previous one is full or was sent): if prev is still the topic's sticky
// partition, another one is picked, different from prev whenever there is a
// choice. It answers the (possibly unchanged) sticky partition.
func (s *Sticky) OnNewBatch(topic string, n int32, available []int32, prev int32) int32 {
	if p, ok := s.cur[topic]; ok && p != prev && p < n {
		return p // someone already moved on
	}
	return s.pick(topic, n, available, prev)
}

// pick follows Kafka's StickyPartitionCache.nextPartition: a random
// available partition other than prev when there are two or more, the only
// available one when there is one, and a random one of all n when none is.
func (s *Sticky) pick(topic string, n int32, available []int32, prev int32) int32 {
	var p int32
	switch len(available) {
	case 0:
		p = int32(s.intn(int(n)))
		if p == prev && n > 1 {
			p = (p + 1 + int32(s.intn(int(n-1)))) % n
		}
	case 1:
		p = available[0]
	default:
		p = available[s.intn(len(available))]
		for p == prev {
			p = available[s.intn(len(available))]
		}
	}
	s.cur[topic] = p
	return p
}
