package grpcopt

import (
	"math/bits"
	"sync"
)

// bufferPool is a tiered pool of byte buffers, one sync.Pool per power of
// two from 2^minTier to 2^maxTier bytes, that does not zero what it hands
// out. gRPC fills every buffer it takes from its pool to the length it asked
// for (a frame read, a marshalled message) before anyone reads it, so the
// zeroing its own pools do on every Get is pure cost: with its default tiers
// (32 KiB, then 1 MiB) a storage node spent a fifth of its CPU clearing
// megabyte buffers for 40 KiB messages.
type bufferPool struct {
	tiers [maxTier - minTier + 1]sync.Pool
}

const (
	minTier = 8  // 256 B
	maxTier = 23 // 8 MiB; larger buffers are allocated and left to the GC
)

// tier answers the index of the smallest tier that holds n bytes, and false
// when n is above the largest.
func tier(n int) (int, bool) {
	if n <= 1<<minTier {
		return 0, true
	}
	e := bits.Len(uint(n - 1)) // 2^e >= n
	if e > maxTier {
		return 0, false
	}
	return e - minTier, true
}

// Get answers a buffer of length n (its contents are whatever was there).
func (p *bufferPool) Get(n int) *[]byte {
	t, ok := tier(n)
	if !ok {
		b := make([]byte, n)
		return &b
	}
	if v, _ := p.tiers[t].Get().(*[]byte); v != nil {
		*v = (*v)[:n]
		return v
	}
	b := make([]byte, n, 1<<(t+minTier))
	return &b
}

// Put takes a buffer back when its capacity is exactly one of the tiers
// (one this pool handed out); others are left to the GC.
func (p *bufferPool) Put(b *[]byte) {
	c := cap(*b)
	if c < 1<<minTier || c > 1<<maxTier || c&(c-1) != 0 {
		return
	}
	t, _ := tier(c)
	*b = (*b)[:0]
	p.tiers[t].Put(b)
}
