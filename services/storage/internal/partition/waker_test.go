package partition

import (
	"context"
	"testing"
)

func woken(w *Waker) bool {
	select {
	case <-w.C():
		return true
	default:
		return false
	}
}

// A registration wakes once, on the next move of what it watches; Forget
// drops every registration, and an idle partition keeps none of a poll
// that ended.
func TestWakerWakesOnceOnTheNextMove(t *testing.T) {
	c := newCluster(t, 1)
	leader, follower := c.replicas[1], c.replicas[2]

	leo, hw := NewWaker(), NewWaker()
	leader.WakeOnLEO(leo)
	leader.WakeOnLEO(leo) // twice is once
	leader.WakeOnHW(hw)
	if len(leo.regs) != 1 || len(hw.regs) != 1 {
		t.Fatalf("registrations %d and %d, want 1 each", len(leo.regs), len(hw.regs))
	}
	if woken(leo) || woken(hw) {
		t.Fatal("woken before anything moved")
	}
	if _, err := leader.Produce(context.Background(), AcksLeader, -1, plain(t, "a")); err != nil {
		t.Fatal(err)
	}
	if !woken(leo) {
		t.Fatal("an append did not wake the LEO waker")
	}
	if woken(hw) {
		t.Fatal("an append alone woke the HW waker: the HW waits for the followers")
	}
	// The LEO registration was used: a second append leaves no token.
	if _, err := leader.Produce(context.Background(), AcksLeader, -1, plain(t, "b")); err != nil {
		t.Fatal(err)
	}
	if woken(leo) {
		t.Fatal("a used registration woke again")
	}
	c.replicate()
	if !woken(hw) {
		t.Fatal("the HW moved and the HW waker was not woken")
	}

	// A follower's append moves its LEO and the HW it learns.
	fleo, fhw := NewWaker(), NewWaker()
	follower.WakeOnLEO(fleo)
	follower.WakeOnHW(fhw)
	if _, err := leader.Produce(context.Background(), AcksLeader, -1, plain(t, "c")); err != nil {
		t.Fatal(err)
	}
	c.replicate()
	if !woken(fleo) || !woken(fhw) {
		t.Fatal("a follower's append did not wake its wakers")
	}

	// Forget: nothing stays registered, no token is left over.
	idle := NewWaker()
	for range 100 {
		leader.WakeOnHW(idle)
		leader.WakeOnLEO(idle)
		idle.Forget()
	}
	leader.mu.Lock()
	kept := len(leader.hwWakers) + len(leader.leoWakers)
	leader.mu.Unlock()
	if kept != 0 || len(idle.regs) != 0 {
		t.Fatalf("after Forget the partition keeps %d wakers, the waker %d registrations", kept, len(idle.regs))
	}
	leader.WakeOnLEO(idle)
	if _, err := leader.Produce(context.Background(), AcksLeader, -1, plain(t, "d")); err != nil {
		t.Fatal(err)
	}
	idle.Forget()
	if woken(idle) {
		t.Fatal("Forget left a token")
	}

	// Closing the replica wakes its polls, which then find it gone.
	closing := NewWaker()
	leader.WakeOnHW(closing)
	leader.Close()
	if !woken(closing) {
		t.Fatal("Close did not wake a waiting poll")
	}
}

// A stream that registers again after each move it was woken by (Follow,
// for as long as its reader stays) keeps one registration, not one per
// move, until it ends.
func TestAWakerRegisteredAfterEachMoveKeepsOneRegistration(t *testing.T) {
	c := newCluster(t, 1)
	leader := c.replicas[1]
	w := NewWaker()
	for i := range 200 {
		leader.WakeOnHW(w)
		if _, err := leader.Produce(context.Background(), AcksLeader, -1, plain(t, "v")); err != nil {
			t.Fatal(err)
		}
		c.replicate()
		if !woken(w) {
			t.Fatalf("move %d did not wake the waker", i)
		}
	}
	if len(w.regs) != 1 {
		t.Fatalf("after 200 moves the waker holds %d registrations, want 1", len(w.regs))
	}
	w.Forget()
	if len(w.regs) != 0 {
		t.Fatalf("after Forget: %d registrations", len(w.regs))
	}
}
