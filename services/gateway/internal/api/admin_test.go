package api

import (
	"slices"
	"testing"
)

// A topic description asks again, once, for the offsets of the partitions
// whose leader did not answer and was replaced while the lookup waited.
func TestUnansweredAndMoved(t *testing.T) {
	leaders := func(ls ...int32) func(int32) int32 { return func(p int32) int32 { return ls[p] } }
	answered := partitionOffsets{logStart: 0, hw: 10, lso: 10}
	silent := partitionOffsets{logStart: -1, hw: -1, lso: -1}
	for _, c := range []struct {
		name          string
		before, after func(int32) int32
		offs          map[int32]partitionOffsets
		want          []int32
	}{
		{"every leader answered", leaders(1, 2, 3), leaders(1, 2, 3), map[int32]partitionOffsets{0: answered, 1: answered, 2: answered}, nil},
		{"a silent leader, still the leader", leaders(1, 2, 3), leaders(1, 2, 3), map[int32]partitionOffsets{0: silent, 1: answered, 2: answered}, nil},
		{"a silent leader, replaced", leaders(1, 2, 1), leaders(2, 2, 3), map[int32]partitionOffsets{0: silent, 1: answered}, []int32{0, 2}},
		{"replaced by no leader", leaders(1, 2, 3), leaders(-1, 2, 3), map[int32]partitionOffsets{0: silent, 1: answered, 2: answered}, nil},
		{"replaced, but it answered first", leaders(1, 2, 3), leaders(2, 2, 3), map[int32]partitionOffsets{0: answered, 1: answered, 2: answered}, nil},
	} {
		if got := unansweredAndMoved(3, c.before, c.after, c.offs); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
