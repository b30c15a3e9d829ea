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
		for m.waiting.Load() < 2 {
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

// Waiters are served in order: a small record that would fit waits behind a
// large one that does not, rather than pass it for as long as small ones
// keep coming; when the large one gives up, the small one gets its room.
func TestMemoryBudgetServesWaitersInOrder(t *testing.T) {
	m := &memoryBudget{limit: 100}
	if !m.take(50) {
		t.Fatal("50 of 100 did not fit")
	}
	bigCtx, giveUp := context.WithCancel(context.Background())
	defer giveUp()
	big := make(chan error, 1)
	go func() { big <- m.acquire(bigCtx, 60, 10*time.Second, func(bool) {}) }()
	for m.waiting.Load() < 1 {
		time.Sleep(time.Microsecond)
	}
	if m.take(10) {
		t.Fatal("take passed a waiter")
	}
	small := make(chan error, 1)
	go func() { small <- m.acquire(context.Background(), 10, 10*time.Second, func(bool) {}) }()
	select {
	case err := <-small:
		t.Fatalf("the small record got room before the large one that came first (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	giveUp()
	if err := <-big; err == nil {
		t.Fatal("the large waiter got 60 of the 50 free")
	}
	select {
	case err := <-small:
		if err != nil {
			t.Fatalf("the small waiter: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the small waiter still waits after the one before it gave up")
	}
	if u := m.used.Load(); u != 60 {
		t.Fatalf("%d bytes counted, want 60", u)
	}

	// In order again, both served by one release.
	first, second := make(chan error, 1), make(chan error, 1)
	go func() { first <- m.acquire(context.Background(), 70, 10*time.Second, func(bool) {}) }()
	for m.waiting.Load() < 1 {
		time.Sleep(time.Microsecond)
	}
	go func() { second <- m.acquire(context.Background(), 20, 10*time.Second, func(bool) {}) }()
	for m.waiting.Load() < 2 {
		time.Sleep(time.Microsecond)
	}
	m.release(60)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if u := m.used.Load(); u != 90 {
		t.Fatalf("%d bytes counted, want 90", u)
	}
}
