package rate

import (
	"context"
	"sync"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestScheduleIsConstant(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	p := newWithClock(100, c.now) // one record every 10ms
	start := c.t
	for i := 0; i < 5; i++ {
		if due := p.Reserve(1); due != start.Add(time.Duration(i)*10*time.Millisecond) {
			t.Fatalf("record %d due at +%v, want +%v", i, due.Sub(start), time.Duration(i)*10*time.Millisecond)
		}
	}
	// A batch of 10 takes 100ms of schedule: the next is due 100ms after it.
	b := p.Reserve(10)
	if next := p.Reserve(1); next.Sub(b) != 100*time.Millisecond {
		t.Errorf("after a batch of 10 the next is due %v later, want 100ms", next.Sub(b))
	}
	// Falling behind does not move the schedule: what is overdue is due in the past.
	c.t = start.Add(10 * time.Second)
	if due := p.Reserve(1); !due.Before(c.t) || due != start.Add(160*time.Millisecond) {
		t.Errorf("overdue record due at +%v, want +160ms (in the past)", due.Sub(start))
	}
}

func TestFractionalRate(t *testing.T) {
	c := &fakeClock{t: time.Unix(0, 0)}
	p := newWithClock(0.5, c.now)
	p.Reserve(1)
	if due := p.Reserve(1); due.Sub(c.t) != 2*time.Second {
		t.Errorf("at 0.5/s the second record is due at +%v, want +2s", due.Sub(c.t))
	}
}

func TestUnlimited(t *testing.T) {
	c := &fakeClock{t: time.Unix(5, 0)}
	p := newWithClock(0, c.now)
	if !p.Unlimited() {
		t.Fatal("rate 0 is unlimited")
	}
	for range 3 {
		if due := p.Reserve(1000); due != c.t {
			t.Fatalf("unlimited: due %v, want now", due)
		}
	}
}

// Concurrent reservers share one schedule: n records at rate r take n/r.
func TestConcurrentWaitHoldsTheRate(t *testing.T) {
	p := New(2000)
	start := time.Now()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if _, err := p.Wait(context.Background(), 1); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// 200 records at 2000/s: the last is due at 99.5ms.
	if el := time.Since(start); el < 95*time.Millisecond || el > 2*time.Second {
		t.Errorf("200 records at 2000/s took %v", el)
	}
}

func TestWaitHonoursContext(t *testing.T) {
	p := New(1) // the second record is due in a second
	p.Reserve(1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := p.Wait(ctx, 1); err == nil || time.Since(start) > 500*time.Millisecond {
		t.Errorf("Wait returned %v after %v; want the context's error at once", err, time.Since(start))
	}
}
