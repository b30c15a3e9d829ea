package client

import (
	"context"
	"testing"
	"time"
)

// Two waiters for more room than is left (limit 100, 50 held, each wants
// 60): one gets it when the 50 are given back, the other only when the
// first's 60 are, and never is more than the limit counted.
func TestMemoryBudgetWaitersEachGetRoom(t *testing.T) {
	for round := range 200 {
		m := &memoryBudget{limit: 100}
		if !m.tryTake(50) {
			t.Fatal("50 of 100 did not fit")
		}
		got := make(chan error, 2)
		for range 2 {
			go func() { got <- m.acquire(context.Background(), 60, 10*time.Second, func(bool) {}) }()
		}
		for m.waiters.Load() < 2 {
			time.Sleep(time.Microsecond)
		}
		m.release(50) // room for one of them
		first := <-got
		if first != nil {
			t.Fatalf("round %d: a waiter failed with room for it: %v", round, first)
		}
		select {
		case err := <-got:
			t.Fatalf("round %d: both waiters took 60 of 100: %v", round, err)
		case <-time.After(time.Millisecond):
		}
		m.release(60) // the first one's, now the second's
		if err := <-got; err != nil {
			t.Fatalf("round %d: the second waiter failed once its room was given back: %v", round, err)
		}
		if u := m.used.Load(); u != 60 {
			t.Fatalf("round %d: %d bytes counted, want 60", round, u)
		}
	}
}
