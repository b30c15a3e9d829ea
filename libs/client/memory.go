package client

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"skein/libs/client/accumulator"
	"skein/libs/errs"
)

// Producer memory defaults: Kafka's buffer.memory and max.block.ms.
const (
	DefaultBufferMemory = 32 << 20
	DefaultMaxBlock     = time.Minute
)

// WithBufferMemory bounds the bytes of records a producer holds that have
// no result yet, queued or in flight (Kafka's buffer.memory, default 32
// MiB). Produce waits for room (see WithMaxBlock); a record larger than
// the whole buffer is refused with MESSAGE_TOO_LARGE.
func WithBufferMemory(n int64) ProducerOption {
	return func(c *producerConfig) { c.bufferMemory = n }
}

// WithMaxBlock bounds how long Produce waits for room in the buffer
// (Kafka's max.block.ms, default 1 minute); the record then fails with
// REQUEST_TIMED_OUT, unwritten. Produce's ctx bounds the wait too.
func WithMaxBlock(d time.Duration) ProducerOption {
	return func(c *producerConfig) { c.maxBlock = d }
}

// recordMemory is what a record counts against the buffer: its key, value
// and headers, and a record's share of framing.
func recordMemory(r *accumulator.Record) int64 {
	n := int64(len(r.Key)+len(r.Value)) + 64
	for _, h := range r.Headers {
		n += int64(len(h.Key) + len(h.Value))
	}
	return n
}

// recordsHeld sums what recs were counted as when they were produced (the
// caller may have changed a header's bytes since).
func recordsHeld(recs []accumulator.Record) int64 {
	var n int64
	for i := range recs {
		n += recs[i].Held
	}
	return n
}

// memoryBudget counts the bytes of records without a result against a
// limit. Room is taken with a compare-and-swap and given back with an add,
// so the callers of Produce and the goroutine that delivers results do not
// contend for a lock; only waiting for room does. Waiters are served in the
// order they came, as Kafka's buffer pool serves them: a large record is not
// passed over for ever by small ones that fit into each release.
type memoryBudget struct {
	used    atomic.Int64
	limit   int64
	waiting atomic.Int32 // len(queue), for the paths that take no lock
	mu      sync.Mutex
	queue   []*memWaiter // guarded by mu
}

// memWaiter is one acquire waiting for room; granted is closed once the
// room was taken for it.
type memWaiter struct {
	n       int64
	granted chan struct{}
}

// take takes n bytes at once if they fit and no one waits before it.
func (m *memoryBudget) take(n int64) bool {
	return m.waiting.Load() == 0 && m.tryTake(n)
}

// tryTake takes n bytes if they fit. It never counts more than it keeps:
// an add undone on failure would make a concurrent try fail for room that
// is there, and its undoing would wake no one.
func (m *memoryBudget) tryTake(n int64) bool {
	for {
		u := m.used.Load()
		if u+n > m.limit {
			return false
		}
		if m.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// acquire takes n bytes, waiting behind earlier waiters while they do not
// fit, until release makes room, ctx ends or maxBlock passes. While it
// waits, pressing is set so that what is queued goes out without lingering.
func (m *memoryBudget) acquire(ctx context.Context, n int64, maxBlock time.Duration, pressing func(bool)) error {
	if m.take(n) {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return errs.Errorf(errs.RequestTimedOut, "waiting for room in the producer's buffer (buffer.memory %d bytes): %v", m.limit, err)
	}
	w := &memWaiter{n: n, granted: make(chan struct{})}
	m.mu.Lock()
	m.queue = append(m.queue, w)
	m.waiting.Add(1)
	// Room given back before the waiting count moved woke no one: grant
	// it now.
	m.grantLocked()
	m.mu.Unlock()
	select {
	case <-w.granted:
		return nil
	default:
	}
	pressing(true)
	defer pressing(false)
	timer := time.NewTimer(maxBlock)
	defer timer.Stop()
	var err error
	select {
	case <-w.granted:
		return nil
	case <-ctx.Done():
		err = errs.Errorf(errs.RequestTimedOut, "waiting for room in the producer's buffer (buffer.memory %d bytes): %v", m.limit, ctx.Err())
	case <-timer.C:
		err = errs.Errorf(errs.RequestTimedOut, "the producer's buffer (buffer.memory %d bytes) had no room for %d bytes within max.block %v", m.limit, n, maxBlock)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-w.granted:
		return nil // granted as it gave up: keep the room
	default:
	}
	if i := slices.Index(m.queue, w); i >= 0 {
		m.queue = slices.Delete(m.queue, i, i+1)
		m.waiting.Add(-1)
	}
	// Those behind it may fit where it did not.
	m.grantLocked()
	return err
}

// release gives back n bytes and serves the waiters.
func (m *memoryBudget) release(n int64) {
	if n == 0 {
		return
	}
	m.used.Add(-n)
	if m.waiting.Load() == 0 {
		return
	}
	m.mu.Lock()
	m.grantLocked()
	m.mu.Unlock()
}

// grantLocked takes room for the waiters in order, as long as the first
// one fits.
func (m *memoryBudget) grantLocked() {
	for len(m.queue) > 0 && m.tryTake(m.queue[0].n) {
		close(m.queue[0].granted)
		m.queue[0] = nil
		m.queue = m.queue[1:]
		m.waiting.Add(-1)
	}
}
