// Package watch follows the controllers' WatchMetadata stream and keeps a
// metadata.Image of it, moving from controller to controller when one fails
// or falls silent. It is the gRPC shell around libs/metadata, which stays
// free of gRPC; the Go client, the storage nodes and the cluster tests all
// follow the metadata through it.
//
// Every stream starts from a fresh image (known version 0), then applies the
// controller's deltas; an empty delta at the held version is the controller's
// heartbeat. A stream that ends, errs, sends a delta that does not fit the
// image, or says nothing for metadata.WatchSilence is dropped, and the
// watcher waits Backoff and opens one on the next controller, round robin.
// So is one whose image is older than a version already delivered: a
// controller that lags its quorum and cannot reach it serves its own image
// once it has waited for its leader in vain, and an older image would look
// to a storage node as if newer topics had been deleted.
package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	controllerv1 "skein/gen/skein/controller/v1"
	controllerv1grpc "skein/gen/skein/controller/v1/controllerv1grpc"
	"skein/libs/metadata"
	"skein/libs/rpcerr"
)

// Controller is one controller to follow.
type Controller struct {
	Addr   string // for logs
	Client controllerv1grpc.ControllerServiceClient
}

// Config configures Run.
type Config struct {
	// Controllers are followed one at a time, round robin; at least one.
	Controllers []Controller
	// Start is the index of the first controller to follow (mod the list).
	Start int
	// NodeID names the watcher to the controller (-1 or 0: anonymous).
	NodeID int32
	// Backoff is the wait before following the next controller; failures
	// counts the streams in a row that delivered nothing (0 when the one
	// that just ended delivered something). Nil: 200 ms every time.
	Backoff func(failures int) time.Duration
	// Logger receives the end of every stream; slog.Default when nil.
	Logger *slog.Logger
	// Silence is how long a stream may say nothing, not even a heartbeat,
	// before the watcher leaves it; metadata.WatchSilence when zero.
	Silence time.Duration
}

// ErrSilent ends a stream whose controller said nothing for Config.Silence:
// it is cut off from its quorum (or paused), and its metadata may be stale.
var ErrSilent = errors.New("the controller sent nothing, not even a heartbeat, for the watch silence")

// Run follows the metadata until ctx ends (at once without controllers). It calls onImage, from its own
// goroutine, with a private copy of every new version: each fresh image and
// each delta that changed something (heartbeats do not call it). The copy
// is the callee's to keep or modify.
func Run(ctx context.Context, cfg Config, onImage func(*metadata.Image)) {
	if len(cfg.Controllers) == 0 {
		return
	}
	if cfg.Backoff == nil {
		cfg.Backoff = func(int) time.Duration { return 200 * time.Millisecond }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Silence <= 0 {
		cfg.Silence = metadata.WatchSilence
	}
	failures := 0
	var held metadata.Version // the newest version delivered
	for i := cfg.Start; ctx.Err() == nil; i++ {
		ctrl := cfg.Controllers[i%len(cfg.Controllers)]
		got, err := follow(ctx, cfg, ctrl.Client, &held, onImage)
		if ctx.Err() != nil {
			return
		}
		if got {
			failures = 0
		}
		cfg.Logger.Warn("metadata watch ended; following the next controller", "controller", ctrl.Addr, "err", err)
		t := time.NewTimer(cfg.Backoff(failures))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		failures++
	}
}

// ErrOlderImage ends a stream whose controller offered an image older than
// a version already delivered.
var ErrOlderImage = errors.New("the controller offered metadata older than a version already applied (it lags its quorum, or is of another cluster)")

// follow reads one stream until it ends; got says whether anything arrived.
// held is the newest version delivered, by this stream or an earlier one.
func follow(ctx context.Context, cfg Config, cl controllerv1grpc.ControllerServiceClient, held *metadata.Version, onImage func(*metadata.Image)) (got bool, err error) {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	silent := newSilence(cfg.Silence, func() { cancel(ErrSilent) })
	defer silent.stop()
	stream, err := cl.WatchMetadata(sctx, &controllerv1.WatchMetadataRequest{NodeId: cfg.NodeID})
	if err != nil {
		return false, rpcerr.FromStatus(err)
	}
	var im *metadata.Image // what this stream delivered so far
	for {
		msg, err := stream.Recv()
		if err != nil {
			if cause := context.Cause(sctx); errors.Is(cause, ErrSilent) {
				return got, fmt.Errorf("%w (%v)", ErrSilent, cfg.Silence)
			}
			return got, rpcerr.FromStatus(err)
		}
		if img := msg.GetImage(); img != nil && metadata.Version(img.GetVersion()) < *held {
			return got, fmt.Errorf("%w: version %d, after %d", ErrOlderImage, img.GetVersion(), *held)
		}
		silent.heard()
		got = true
		switch u := msg.GetUpdate().(type) {
		case *controllerv1.WatchMetadataResponse_Image:
			next, err := metadata.FromProto(u.Image)
			if err != nil {
				return got, err
			}
			im = next
		case *controllerv1.WatchMetadataResponse_Delta:
			if im == nil {
				return got, errors.New("metadata delta before any image")
			}
			v := metadata.Version(u.Delta.GetVersion())
			if v < im.Version() || (v == im.Version() && len(u.Delta.GetRecords()) == 0) {
				continue // a replay of what we hold, or the controller's heartbeat
			}
			if err := im.Apply(u.Delta); err != nil {
				return got, err
			}
		default:
			continue
		}
		*held = max(*held, im.Version())
		// The silence is the controller's, not this watcher's: applying an
		// image may take seconds (a storage node opening thousands of
		// replicas), and what the controller sends meanwhile waits unread.
		silent.hold()
		onImage(im.Clone())
		silent.heard()
	}
}

// silence calls onSilent once a stream has said nothing for d and then
// for a short grace more. The grace is for a watcher that was itself
// stopped, frozen or starved of CPU while the silence ran out: what the
// controller sent meanwhile is waiting unread, and the stream's reader,
// running again, reads it within the grace. Without it, the stream would
// be left for the watcher's own stall, blaming a controller that spoke.
type silence struct {
	d, grace time.Duration
	onSilent func()
	// now and reset are the clock and the timer's Reset (tests replace
	// them).
	now   func() time.Time
	reset func(time.Duration)

	mu      sync.Mutex
	heardAt time.Time // when the stream last said something (or began)
	ending  bool      // d has passed since heardAt: the grace is running
	held    bool      // the watcher is applying what it heard: no silence runs
	t       *time.Timer
}

func newSilence(d time.Duration, onSilent func()) *silence {
	s := &silence{d: d, grace: min(100*time.Millisecond, d/10), onSilent: onSilent, now: time.Now}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.heardAt = s.now()
	s.t = time.AfterFunc(d, s.fire)
	s.reset = func(d time.Duration) { s.t.Reset(d) }
	return s
}

// fire is the timer's: at the end of the silence it starts the grace, at
// the end of the grace it calls onSilent. A fire that lost the race with
// heard (the timer had gone off as the stream spoke) finds the silence
// younger than d and leaves the timer heard set.
func (s *silence) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.held:
		// hold stopped the timer as it went off: heard re-arms it
	case !s.ending && s.now().Sub(s.heardAt) < s.d:
		// stale: heard re-armed the timer for the whole silence
	case !s.ending:
		s.ending = true
		s.reset(s.grace)
	default:
		s.onSilent()
	}
}

// heard starts the silence again: the stream said something, or the
// watcher is back from applying it.
func (s *silence) heard() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.heardAt, s.ending, s.held = s.now(), false, false
	s.reset(s.d)
}

// hold stops the silence while the watcher applies what it heard.
func (s *silence) hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = true
	s.t.Stop()
}

func (s *silence) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.t.Stop()
}
