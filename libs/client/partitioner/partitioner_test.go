package partitioner

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Vectors from Kafka's UtilsTest.testMurmur2 (Java ints).
func TestMurmur2KafkaVectors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	} {
		if got := int32(Murmur2([]byte(tc.in))); got != tc.want {
			t.Errorf("murmur2(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestToPositiveMasksTheSignBit(t *testing.T) {
	for _, tc := range []struct {
		in   uint32
		want int32
	}{
		{0, 0},
		{1, 1},
		{0x7fffffff, 0x7fffffff},
		{0x80000000, 0},          // Math.abs would overflow here; Kafka masks
		{0xffffffff, 0x7fffffff}, // -1 masks to MAX_VALUE, not 1
		{0xc4f1a3d2, 0x44f1a3d2},
	} {
		if got := ToPositive(tc.in); got != tc.want {
			t.Errorf("ToPositive(%#x) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// Keys of every shape (empty, short tails of 1-3 bytes, binary, long) must
// land exactly where franz-go's Kafka-compatible partitioner puts them.
func TestForKeyMatchesFranzGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := [][]byte{{}, {0}, {0xff}, {0xff, 0xff, 0xff}, []byte("user-1")}
	for i := 0; i < 5000; i++ {
		keys = append(keys, []byte(fmt.Sprintf("key-%d", i)))
		b := make([]byte, rng.IntN(64))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		keys = append(keys, b)
	}
	for _, n := range []int32{1, 2, 3, 7, 12, 64, 100, 1000} {
		kp := kgo.StickyKeyPartitioner(nil).ForTopic("t")
		for _, k := range keys {
			want := int32(kp.Partition(&kgo.Record{Key: k}, int(n)))
			if got := ForKey(k, n); got != want {
				t.Fatalf("ForKey(%x, %d) = %d, franz-go says %d", k, n, got, want)
			}
		}
	}
}

// seq returns the given numbers in turn, for a deterministic "random" source.
func seq(nums ...int) func(int) int {
	return func(n int) int {
		v := nums[0] % n
		nums = append(nums[1:], nums[0])
		return v
	}
}

func TestSticky(t *testing.T) {
	all := []int32{0, 1, 2, 3}
	for _, tc := range []struct {
		name  string
		draws []int // what the random source answers, in turn
		steps func(s *Sticky) []int32
		want  []int32
	}{
		{"sticks until a new batch", []int{2, 1}, func(s *Sticky) []int32 {
			a := s.Partition("t", 4, all)
			b := s.Partition("t", 4, all)
			c := s.OnNewBatch("t", 4, all, b)
			d := s.Partition("t", 4, all)
			return []int32{a, b, c, d}
		}, []int32{2, 2, 1, 1}},
		{"a new batch never picks the previous partition when another is available", []int{1, 1, 3}, func(s *Sticky) []int32 {
			a := s.Partition("t", 4, all)     // draws 1
			b := s.OnNewBatch("t", 4, all, a) // draws 1 again, then 3
			return []int32{a, b}
		}, []int32{1, 3}},
		{"only available partitions are picked", []int{2, 1}, func(s *Sticky) []int32 {
			return []int32{s.Partition("t", 4, []int32{3}), s.OnNewBatch("t", 4, []int32{3}, 3)}
		}, []int32{3, 3}},
		{"with none available any partition will do, still not the previous", []int{2, 2, 0}, func(s *Sticky) []int32 {
			a := s.Partition("t", 4, nil)     // draws 2
			b := s.OnNewBatch("t", 4, nil, a) // draws 2, then steps 1+0 past it
			return []int32{a, b}
		}, []int32{2, 3}},
		{"a stale OnNewBatch keeps the partition another caller moved to", []int{2, 1}, func(s *Sticky) []int32 {
			a := s.Partition("t", 4, all)
			b := s.OnNewBatch("t", 4, all, a)
			c := s.OnNewBatch("t", 4, all, a) // the same rollover reported twice
			return []int32{a, b, c}
		}, []int32{2, 1, 1}},
		{"topics stick independently", []int{2, 1}, func(s *Sticky) []int32 {
			return []int32{s.Partition("a", 4, all), s.Partition("b", 4, all), s.Partition("a", 4, all)}
		}, []int32{2, 1, 2}},
		{"a shrunk partition count re-picks", []int{2, 1}, func(s *Sticky) []int32 {
			a := s.Partition("t", 4, all)
			return []int32{a, s.Partition("t", 2, []int32{0, 1})}
		}, []int32{2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.steps(NewSticky(seq(tc.draws...)))
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// Over many rollovers keyless records spread over every partition.
func TestStickySpreads(t *testing.T) {
	s := NewSticky(rand.New(rand.NewPCG(3, 4)).IntN)
	all := []int32{0, 1, 2, 3, 4, 5}
	counts := map[int32]int{}
	p := s.Partition("t", 6, all)
	for i := 0; i < 6000; i++ {
		counts[p]++
		p = s.OnNewBatch("t", 6, all, p)
	}
	for _, q := range all {
		if counts[q] < 700 || counts[q] > 1300 {
			t.Errorf("partition %d got %d of 6000 batches", q, counts[q])
		}
	}
}
