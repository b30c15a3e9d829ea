// Package rate paces a load generator to a fixed rate on a constant
// schedule: the n-th record is due at start + n/rate, whoever sends it. A
// sender that falls behind sends at once until it has caught up, so a slow
// server cannot lower the offered load, and latency can be measured from
// when a record was due rather than from when it was sent (which would hide
// the queueing a stalled server causes: coordinated omission).
package rate

import (
	"context"
	"sync"
	"time"
)

// Pacer hands out send times. It is safe for concurrent use.
type Pacer struct {
	mu     sync.Mutex
	perSec float64
	start  time.Time
	issued float64
	now    func() time.Time
}

// New paces to perSec records per second from now on; perSec <= 0 is
// unlimited (every record is due at once).
func New(perSec float64) *Pacer { return newWithClock(perSec, time.Now) }

func newWithClock(perSec float64, now func() time.Time) *Pacer {
	return &Pacer{perSec: perSec, start: now(), now: now}
}

// Unlimited reports whether the pacer lets everything through at once.
func (p *Pacer) Unlimited() bool { return p.perSec <= 0 }

// Reserve claims the next n records and returns when the first of them is
// due. Unlimited pacers answer now.
func (p *Pacer) Reserve(n int) time.Time {
	if p.perSec <= 0 {
		return p.now()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	due := p.start.Add(time.Duration(p.issued / p.perSec * float64(time.Second)))
	p.issued += float64(n)
	return due
}

// Wait reserves n records and sleeps until they are due. It returns the due
// time, or ctx's error if ctx ends first.
func (p *Pacer) Wait(ctx context.Context, n int) (time.Time, error) {
	due := p.Reserve(n)
	d := due.Sub(p.now())
	if d <= 0 {
		return due, ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return due, nil
	case <-ctx.Done():
		return due, ctx.Err()
	}
}
