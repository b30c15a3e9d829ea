// Package isrsender is the storage node's one sender of ISR changes to the
// controller. Replicas hand it their proposals (partition.ISRProposer); one
// goroutine, owned by whoever calls Run, sends what is queued as one
// AlterPartition call at a time — the proposals that arrived while a call
// was in flight go together in the next — and answers each proposal. A
// newer proposal for a partition replaces a queued older one. When Run's
// context ends, the call in flight is cancelled, queued proposals are
// answered with that error, and later ones are dropped. An answer that is
// not the controller's verdict (the call failed, or left a change out, or
// was never made) wraps partition.ErrISRUnsure; a replaced proposal is
// answered ErrSuperseded (partition.ErrISRNotSent).
package isrsender

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"skein/services/storage/internal/partition"
)

// AlterFunc sends changes to the controller in one AlterPartition call. It
// answers, for each change in order, the partition's state and its error
// (nil when committed), or one error for the whole call.
type AlterFunc func(ctx context.Context, changes []partition.ISRChange) ([]partition.State, []error, error)

// CallTimeout bounds one AlterPartition call.
const CallTimeout = 5 * time.Second

// ErrSuperseded answers a proposal replaced by a newer one for the same
// partition before it was sent.
var ErrSuperseded = partition.ErrISRNotSent

// unsure wraps an error that leaves a sent change's fate unknown.
func unsure(err error) error { return fmt.Errorf("%w: %w", partition.ErrISRUnsure, err) }

type key struct {
	topic     string
	partition int32
}

type proposal struct {
	change partition.ISRChange
	done   func(partition.State, error)
}

// Sender queues and sends ISR changes; see the package comment.
type Sender struct {
	alter AlterFunc

	mu      sync.Mutex
	queued  map[key]proposal
	order   []key                          // queued keys, oldest first
	answers []func(partition.State, error) // superseded proposals, answered by Run
	stopped bool
	wake    chan struct{}
}

// New returns a sender that calls alter; nothing is sent until Run.
func New(alter AlterFunc) *Sender {
	return &Sender{alter: alter, queued: map[key]proposal{}, wake: make(chan struct{}, 1)}
}

// ProposeISR queues a change; Run answers done. It never blocks and never
// calls done itself, so a replica may call it holding its lock.
func (s *Sender) ProposeISR(change partition.ISRChange, done func(partition.State, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	k := key{change.Topic, change.Partition}
	if old, ok := s.queued[k]; ok {
		s.answers = append(s.answers, old.done)
	} else {
		s.order = append(s.order, k)
	}
	s.queued[k] = proposal{change: change, done: done}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take answers what is queued, in arrival order, and the superseded
// proposals to answer, emptying both.
func (s *Sender) take() ([]proposal, []func(partition.State, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	batch := make([]proposal, 0, len(s.order))
	for _, k := range s.order {
		batch = append(batch, s.queued[k])
	}
	clear(s.queued)
	s.order = s.order[:0]
	answers := s.answers
	s.answers = nil
	return batch, answers
}

// Run sends until ctx ends; then it answers what is queued with ctx's error
// and drops what comes later.
func (s *Sender) Run(ctx context.Context) {
	for {
		if ctx.Err() != nil {
			s.stop(ctx.Err())
			return
		}
		select {
		case <-ctx.Done():
			continue
		case <-s.wake:
		}
		batch, answers := s.take()
		for _, done := range answers {
			done(partition.State{}, ErrSuperseded)
		}
		if len(batch) == 0 {
			continue
		}
		changes := make([]partition.ISRChange, len(batch))
		for i, p := range batch {
			changes[i] = p.change
		}
		cctx, cancel := context.WithTimeout(ctx, CallTimeout)
		states, errs, err := s.alter(cctx, changes)
		cancel()
		for i, p := range batch {
			switch {
			case err != nil:
				p.done(partition.State{}, unsure(err))
			case i >= len(states) || i >= len(errs):
				p.done(partition.State{}, unsure(errors.New("AlterPartition answered fewer partitions than it was asked")))
			default:
				p.done(states[i], errs[i])
			}
		}
	}
}

// stop answers what is queued with err; later proposals are dropped.
func (s *Sender) stop(err error) {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	batch, answers := s.take()
	for _, done := range answers {
		done(partition.State{}, ErrSuperseded)
	}
	for _, p := range batch {
		p.done(partition.State{}, unsure(err))
	}
}
