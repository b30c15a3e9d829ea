// Package hist is a fixed-memory latency histogram with log-linear buckets
// (HdrHistogram's layout): values below 128 are exact and every bucket above
// is under 0.8% wide relative to its value, so percentiles are that precise
// from 1 ns to centuries in 64 KiB.
package hist

import (
	"math"
	"math/bits"
	"time"
)

const (
	subBits    = 7
	subBuckets = 1 << subBits // per power of two
	nBuckets   = (64 - subBits) * subBuckets
)

// Histogram counts non-negative int64 values (nanoseconds, say). The zero
// value is not ready: use New. It is not safe for concurrent use.
type Histogram struct {
	counts   []uint64
	n        uint64
	min, max int64
	sum      float64
}

// New returns an empty histogram.
func New() *Histogram {
	return &Histogram{counts: make([]uint64, nBuckets), min: math.MaxInt64}
}

// index is v's bucket: v itself below subBuckets; above, the power of two
// v falls in and its top subBits+1 bits.
func index(v int64) int {
	if v < subBuckets {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - (subBits + 1)
	return subBuckets + shift*subBuckets + int(v>>shift) - subBuckets
}

// bounds is the smallest and largest value bucket i holds.
func bounds(i int) (lo, hi int64) {
	if i < subBuckets {
		return int64(i), int64(i)
	}
	shift := (i - subBuckets) / subBuckets
	mant := int64(i-subBuckets-shift*subBuckets) + subBuckets
	lo = mant << shift
	return lo, lo + (int64(1) << shift) - 1
}

// Record counts v once; a negative v counts as 0.
func (h *Histogram) Record(v int64) { h.RecordN(v, 1) }

// RecordN counts v n times.
func (h *Histogram) RecordN(v int64, n uint64) {
	if n == 0 {
		return
	}
	v = max(v, 0)
	h.counts[index(v)] += n
	h.n += n
	h.min, h.max = min(h.min, v), max(h.max, v)
	h.sum += float64(v) * float64(n)
}

// RecordDuration counts d in nanoseconds n times.
func (h *Histogram) RecordDuration(d time.Duration, n uint64) { h.RecordN(int64(d), n) }

// Count is how many values were recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Min and Max are the exact extremes (0 when empty).
func (h *Histogram) Min() int64 {
	if h.n == 0 {
		return 0
	}
	return h.min
}

// Max is the largest value recorded.
func (h *Histogram) Max() int64 { return h.max }

// Mean is the exact mean (0 when empty).
func (h *Histogram) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// Quantile is the value at or below which a fraction q of the recorded
// values lie (q in [0, 1]): the middle of the bucket holding the rank
// ceil(q*n) value, kept within [Min, Max]. Quantile(1) is Max exactly.
func (h *Histogram) Quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	if q >= 1 {
		return h.max
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		if seen += c; seen >= rank {
			lo, hi := bounds(i)
			v := lo + (hi-lo)/2
			return min(max(v, h.min), h.max)
		}
	}
	return h.max
}

// Merge adds o's counts to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.min, h.max = min(h.min, o.min), max(h.max, o.max)
	h.sum += o.sum
}

// Reset empties h, keeping its memory.
func (h *Histogram) Reset() {
	clear(h.counts)
	h.n, h.min, h.max, h.sum = 0, math.MaxInt64, 0, 0
}
