package watch

import (
	"testing"
	"time"
)

// manualSilence is a silence whose clock and timer the test drives: its
// real timer never goes off, and fire is called by hand.
func manualSilence(d time.Duration) (s *silence, clock *time.Time, armed *[]time.Duration, silent *int) {
	var n int
	s = newSilence(time.Hour, func() { n++ })
	s.stop()
	s.d, s.grace = d, d/10
	at := time.Unix(1000, 0)
	var resets []time.Duration
	s.mu.Lock()
	s.now = func() time.Time { return at }
	s.reset = func(d time.Duration) { resets = append(resets, d) }
	s.heardAt = at
	s.mu.Unlock()
	return s, &at, &resets, &n
}

// A stream heard from within the grace after its silence ran out (the
// watcher was stopped while it did, and reads what waited meanwhile) is not
// declared silent; one that says nothing for the silence and the grace is.
func TestSilenceWaitsAGraceForWhatWaitsUnread(t *testing.T) {
	s, clock, armed, silent := manualSilence(3 * time.Second)
	*clock = clock.Add(3 * time.Second)
	s.fire() // the silence ran out: the grace starts
	if *silent != 0 || len(*armed) != 1 || (*armed)[0] != s.grace {
		t.Fatalf("after the silence: %d silent, timer armed %v; want the grace armed", *silent, *armed)
	}
	*clock = clock.Add(50 * time.Millisecond)
	s.heard() // what the stalled watcher reads once it runs again
	*clock = clock.Add(3 * time.Second)
	s.fire() // the silence ran out again: a grace again
	if *silent != 0 {
		t.Fatal("declared silent though heard within the grace")
	}
	*clock = clock.Add(s.grace)
	s.fire() // the grace ran out with nothing heard
	if *silent != 1 {
		t.Fatalf("declared silent %d times after the silence and the grace, want 1", *silent)
	}
}

// A fire that lost the race with heard (the timer went off as the stream
// spoke) leaves the whole silence heard set: it neither starts a grace nor
// declares the stream silent.
func TestSilenceStaleFire(t *testing.T) {
	s, clock, armed, silent := manualSilence(3 * time.Second)
	*clock = clock.Add(3 * time.Second)
	s.heard() // the stream speaks as the timer goes off
	s.fire()  // the timer's fire, which waited for the lock
	if *silent != 0 || len(*armed) != 1 || (*armed)[0] != 3*time.Second {
		t.Fatalf("a stale fire: %d silent, timer armed %v; want only heard's 3s", *silent, *armed)
	}
	*clock = clock.Add(3 * time.Second)
	s.fire()
	*clock = clock.Add(s.grace)
	s.fire()
	if *silent != 1 {
		t.Fatalf("declared silent %d times, want 1", *silent)
	}
}

// The real timer declares a stream that says nothing silent, after the
// silence and the grace.
func TestSilenceDeclared(t *testing.T) {
	const d = 50 * time.Millisecond
	start := time.Now()
	silent := make(chan time.Time, 1)
	s := newSilence(d, func() { silent <- time.Now() })
	defer s.stop()
	select {
	case at := <-silent:
		if took := at.Sub(start); took < d+s.grace {
			t.Fatalf("declared silent after %v, before the silence (%v) and the grace (%v)", took, d, s.grace)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("never declared silent")
	}
}
