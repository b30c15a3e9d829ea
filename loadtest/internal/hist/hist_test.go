package hist

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestBucketsTileTheRange(t *testing.T) {
	// Every bucket starts right after the previous one ends, and index maps
	// both ends of each bucket back to it.
	prevHi := int64(-1)
	for i := 0; i < nBuckets; i++ {
		lo, hi := bounds(i)
		if lo != prevHi+1 || hi < lo {
			t.Fatalf("bucket %d is [%d, %d], previous ended at %d", i, lo, hi, prevHi)
		}
		if index(lo) != i || index(hi) != i {
			t.Fatalf("bucket %d [%d, %d]: index(lo)=%d index(hi)=%d", i, lo, hi, index(lo), index(hi))
		}
		if lo >= subBuckets && float64(hi-lo+1)/float64(lo) > 1.0/subBuckets+1e-12 {
			t.Fatalf("bucket %d [%d, %d] is wider than 1/%d of its value", i, lo, hi, subBuckets)
		}
		prevHi = hi
		if hi == math.MaxInt64 {
			return
		}
	}
	t.Fatalf("buckets end at %d, below MaxInt64", prevHi)
}

func TestQuantilesAgainstSorted(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	h := New()
	var vals []int64
	for range 100000 {
		// Log-normal-ish latencies from 10µs to a few seconds, in ns.
		v := int64(math.Exp(r.NormFloat64()*1.5+13.5)) + 10000
		vals = append(vals, v)
		h.Record(v)
	}
	slices.Sort(vals)
	for _, q := range []float64{0, 0.01, 0.5, 0.9, 0.95, 0.99, 0.999, 1} {
		rank := int(math.Ceil(q*float64(len(vals)))) - 1
		exact := vals[max(rank, 0)]
		got := h.Quantile(q)
		if rel := math.Abs(float64(got-exact)) / float64(exact); rel > 1.0/subBuckets {
			t.Errorf("p%v: got %d, exact %d (%.3f%% off)", q*100, got, exact, rel*100)
		}
	}
	if h.Min() != vals[0] || h.Max() != vals[len(vals)-1] || h.Count() != uint64(len(vals)) {
		t.Errorf("min %d max %d count %d; want %d %d %d", h.Min(), h.Max(), h.Count(), vals[0], vals[len(vals)-1], len(vals))
	}
	var sum float64
	for _, v := range vals {
		sum += float64(v)
	}
	if mean := sum / float64(len(vals)); math.Abs(h.Mean()-mean) > 1e-6*mean {
		t.Errorf("mean %f, want %f", h.Mean(), mean)
	}
}

func TestSmallValuesAreExact(t *testing.T) {
	h := New()
	for v := int64(0); v < 100; v++ {
		h.Record(v)
	}
	if got := h.Quantile(0.5); got != 49 {
		t.Errorf("median of 0..99 = %d, want 49", got)
	}
	if got := h.Quantile(0.99); got != 98 {
		t.Errorf("p99 of 0..99 = %d, want 98", got)
	}
	h.Record(-5) // counts as 0
	if h.Min() != 0 || h.Count() != 101 {
		t.Errorf("min %d count %d", h.Min(), h.Count())
	}
}

func TestEmptyMergeReset(t *testing.T) {
	h := New()
	if h.Quantile(0.99) != 0 || h.Min() != 0 || h.Max() != 0 || h.Mean() != 0 {
		t.Error("an empty histogram answers zeros")
	}
	a, b := New(), New()
	a.RecordN(1000, 3)
	b.Record(5_000_000)
	a.Merge(b)
	a.Merge(New())
	if p75 := a.Quantile(0.75); a.Count() != 4 || a.Min() != 1000 || a.Max() != 5_000_000 || p75 < 1000 || p75 > 1000+1000/subBuckets || a.Quantile(1) != 5_000_000 {
		t.Errorf("merged: count %d min %d max %d p75 %d", a.Count(), a.Min(), a.Max(), a.Quantile(0.75))
	}
	a.Reset()
	if a.Count() != 0 || a.Max() != 0 || a.Min() != 0 {
		t.Error("reset left values")
	}
	a.Record(7)
	if a.Min() != 7 || a.Max() != 7 {
		t.Errorf("after reset min %d max %d", a.Min(), a.Max())
	}
}
