package isrsender

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"skein/services/storage/internal/partition"
)

type answer struct {
	st  partition.State
	err error
}

// fakeController records every AlterPartition call and holds each until
// the test releases it.
type fakeController struct {
	mu      sync.Mutex
	calls   [][]partition.ISRChange
	started chan struct{}
	release chan error // nil: commit every change
}

func newFake() *fakeController {
	return &fakeController{started: make(chan struct{}, 16), release: make(chan error, 16)}
}

func (f *fakeController) alter(ctx context.Context, changes []partition.ISRChange) ([]partition.State, []error, error) {
	f.mu.Lock()
	f.calls = append(f.calls, slices.Clone(changes))
	f.mu.Unlock()
	f.started <- struct{}{}
	select {
	case err := <-f.release:
		if err != nil {
			return nil, nil, err
		}
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	states, errs := make([]partition.State, len(changes)), make([]error, len(changes))
	for i, c := range changes {
		states[i] = partition.State{Leader: 1, LeaderEpoch: c.LeaderEpoch, PartitionEpoch: c.PartitionEpoch + 1, ISR: c.ISR}
	}
	return states, errs, nil
}

func (f *fakeController) callTopics() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out [][]string
	for _, c := range f.calls {
		var ts []string
		for _, ch := range c {
			ts = append(ts, ch.Topic)
		}
		out = append(out, ts)
	}
	return out
}

func change(topic string, isr ...int32) partition.ISRChange {
	return partition.ISRChange{Topic: topic, Partition: 0, LeaderEpoch: 3, PartitionEpoch: 7, ISR: isr}
}

func collect(n int) (func(string) func(partition.State, error), func(*testing.T) map[string]answer) {
	var mu sync.Mutex
	got := map[string]answer{}
	all := make(chan struct{}, n)
	done := func(name string) func(partition.State, error) {
		return func(st partition.State, err error) {
			mu.Lock()
			got[name] = answer{st, err}
			mu.Unlock()
			all <- struct{}{}
		}
	}
	wait := func(t *testing.T) map[string]answer {
		t.Helper()
		for range n {
			select {
			case <-all:
			case <-time.After(5 * time.Second):
				t.Fatalf("only %d of %d answers", len(got), n)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return got
	}
	return done, wait
}

func recv(t *testing.T, c <-chan struct{}) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(5 * time.Second):
		t.Fatal("no AlterPartition call")
	}
}

// Proposals that arrive while a call is in flight go together in the next
// call; a newer one for a partition replaces the queued older one, which
// is answered ErrSuperseded; each proposal is answered once, with its own
// partition's state.
func TestBatchesAndSupersedes(t *testing.T) {
	f := newFake()
	s := New(f.alter)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	done, wait := collect(4)

	s.ProposeISR(change("a", 1, 2), done("a1"))
	recv(t, f.started) // the first call is in flight, held
	s.ProposeISR(change("b", 1), done("b1"))
	s.ProposeISR(change("c", 1, 3), done("c1"))
	s.ProposeISR(change("b", 1, 2, 3), done("b2")) // replaces b1
	f.release <- nil
	recv(t, f.started)
	f.release <- nil
	got := wait(t)

	if calls := f.callTopics(); !slices.EqualFunc(calls, [][]string{{"a"}, {"b", "c"}}, slices.Equal) {
		t.Errorf("calls %v, want [[a] [b c]]", calls)
	}
	if !errors.Is(got["b1"].err, ErrSuperseded) {
		t.Errorf("b1: %v, want ErrSuperseded", got["b1"].err)
	}
	for name, isr := range map[string][]int32{"a1": {1, 2}, "b2": {1, 2, 3}, "c1": {1, 3}} {
		if a := got[name]; a.err != nil || !slices.Equal(a.st.ISR, isr) || a.st.PartitionEpoch != 8 {
			t.Errorf("%s: %+v, want ISR %v at partition epoch 8", name, a, isr)
		}
	}
}

// A failed call answers every proposal in it with the call's error.
func TestCallErrorAnswersEach(t *testing.T) {
	f := newFake()
	s := New(f.alter)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	done, wait := collect(2)
	boom := errors.New("no controller")

	s.ProposeISR(change("a", 1), done("a"))
	recv(t, f.started)
	f.release <- boom
	s.ProposeISR(change("b", 1), done("b"))
	recv(t, f.started)
	f.release <- boom
	for name, a := range wait(t) {
		if !errors.Is(a.err, boom) {
			t.Errorf("%s: %v, want the call's error", name, a.err)
		}
	}
}

// When Run's context ends, the call in flight is cancelled and answered
// with the context's error, so is what was queued, and later proposals
// are dropped, never answered and never sent.
func TestStopCancelsAndDrops(t *testing.T) {
	f := newFake()
	s := New(f.alter)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { s.Run(ctx); close(stopped) }()
	done, wait := collect(2)

	s.ProposeISR(change("a", 1), done("a"))
	recv(t, f.started)
	s.ProposeISR(change("b", 1), done("b"))
	cancel()
	<-stopped
	for name, a := range wait(t) {
		if !errors.Is(a.err, context.Canceled) {
			t.Errorf("%s: %v, want context.Canceled", name, a.err)
		}
	}
	answered := make(chan struct{}, 1)
	s.ProposeISR(change("late", 1), func(partition.State, error) { answered <- struct{}{} })
	select {
	case <-answered:
		t.Error("a proposal after the stop was answered")
	case <-time.After(100 * time.Millisecond):
	}
	if calls := f.callTopics(); len(calls) != 1 {
		t.Errorf("calls %v, want only the first", calls)
	}
}
