package watch

import (
	"sync/atomic"
	"testing"
	"time"
)

// A stream heard from within the grace after its silence ran out (the
// watcher was stopped while it did, and reads what waited meanwhile) is not
// declared silent; one that says nothing for the silence and the grace is.
// The timer's fires are made by hand here: its silence is an hour.
func TestSilenceWaitsAGraceForWhatWaitsUnread(t *testing.T) {
	var silent atomic.Int32
	s := newSilence(time.Hour, func() { silent.Add(1) })
	defer s.stop()
	s.fire() // the silence ran out: the grace starts
	if silent.Load() != 0 {
		t.Fatal("declared silent before its grace")
	}
	s.heard() // what the stalled watcher reads once it runs again
	s.fire()  // the silence ran out again: a grace again
	if silent.Load() != 0 {
		t.Fatal("declared silent though heard within the grace")
	}
	s.fire() // the grace ran out with nothing heard
	if silent.Load() != 1 {
		t.Fatalf("declared silent %d times after the silence and the grace, want 1", silent.Load())
	}
}

// The timer declares a stream that says nothing silent, after the silence
// and the grace.
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
