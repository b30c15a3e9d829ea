package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"skein/libs/errs"
)

// Event is one server-sent event: its name and its JSON document.
type Event struct {
	Name string
	// Data is the whole document, as a caller who may see everything
	// sees it; the hub compares it to tell a change.
	Data []byte
	// Payload is what Data was made from, for a Viewer that shows a caller
	// part of it; the hub does not look at it.
	Payload any
}

// A Viewer is what one stream's caller may see. Check answers nil while
// the caller may still read the stream, and the refusal once it may not:
// the stream then ends. Show answers an event's document as the caller may
// see it. Both are asked again every HubConfig.Recheck, so a change of
// what the caller is allowed shows on an open stream.
type Viewer interface {
	Check() error
	Show(e Event) []byte
}

// everything is the Viewer of a hub without HubConfig.Viewers.
type everything struct{}

func (everything) Check() error        { return nil }
func (everything) Show(e Event) []byte { return e.Data }

// Source is what the stream shows.
type Source interface {
	// Version is the metadata version the gateway holds now; the stream
	// collects again as soon as it moves.
	Version() uint64
	// Collect answers the current documents, one event per name. With
	// refresh it also reads what only the storage nodes and coordinators
	// know (offsets, groups); without it, it may reuse what it read last.
	Collect(ctx context.Context, refresh bool) []Event
}

// A Forgetter is a Source that keeps what it read between collects: the
// hub tells it to forget when no one is subscribed any more.
type Forgetter interface {
	Forget()
}

// Stream defaults.
const (
	DefaultInterval       = 500 * time.Millisecond
	DefaultMetadataPoll   = 50 * time.Millisecond
	DefaultMaxSubscribers = 32
	DefaultBuffer         = 64
	DefaultKeepAlive      = 15 * time.Second
	DefaultRecheck        = time.Second
	collectTimeout        = 3 * time.Second
)

// HubConfig configures a Hub; zero values take the defaults.
type HubConfig struct {
	Source Source
	// Interval is how often the storage nodes are read while anyone is
	// subscribed (and the least time between two such reads).
	Interval time.Duration
	// MetadataPoll is how often the metadata version is compared (an
	// atomic load, no request).
	MetadataPoll time.Duration
	// MaxSubscribers bounds the open streams; more are refused with 503.
	MaxSubscribers int
	// Buffer is the events one subscriber may have pending; a subscriber
	// with a full buffer is dropped.
	Buffer int
	// KeepAlive is how often an idle stream gets a comment line.
	KeepAlive time.Duration
	// Viewers answers the Viewer of a stream's request; nil shows every
	// caller everything.
	Viewers func(r *http.Request) Viewer
	// Recheck is how often an open stream asks its Viewer again.
	Recheck time.Duration
	Logger  *slog.Logger
}

// ErrTooManySubscribers refuses a subscriber beyond MaxSubscribers.
var ErrTooManySubscribers = errors.New("console: too many event subscribers")

// Hub fans the Source's documents out to subscribers. It reads the Source
// only while someone is subscribed.
type Hub struct {
	cfg HubConfig

	mu      sync.Mutex
	subs    map[*Subscriber]struct{}
	last    map[string]Event // the latest event sent, by name
	order   []string         // event names in first-seen order
	running bool
	closed  bool
	stop    chan struct{} // closed by Close
	wg      sync.WaitGroup
}

// Subscriber is one open stream.
type Subscriber struct {
	events  chan Event
	dropped chan struct{} // closed when the hub drops the subscriber
	once    sync.Once
}

// Events delivers the subscriber's events.
func (s *Subscriber) Events() <-chan Event { return s.events }

// Dropped is closed when the hub gave up on the subscriber: its buffer was
// full, or the hub closed.
func (s *Subscriber) Dropped() <-chan struct{} { return s.dropped }

func (s *Subscriber) drop() { s.once.Do(func() { close(s.dropped) }) }

// NewHub returns a hub over cfg.Source.
func NewHub(cfg HubConfig) *Hub {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.MetadataPoll <= 0 {
		cfg.MetadataPoll = DefaultMetadataPoll
	}
	if cfg.MaxSubscribers <= 0 {
		cfg.MaxSubscribers = DefaultMaxSubscribers
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultBuffer
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = DefaultKeepAlive
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = DefaultRecheck
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Hub{cfg: cfg, subs: map[*Subscriber]struct{}{}, last: map[string]Event{}, stop: make(chan struct{})}
}

// Subscribe opens a stream. The subscriber first gets the latest document
// of every event name the hub has sent while others were subscribed (the
// first collect's, when no one was), then every change.
func (h *Hub) Subscribe() (*Subscriber, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || len(h.subs) >= h.cfg.MaxSubscribers {
		return nil, ErrTooManySubscribers
	}
	s := &Subscriber{events: make(chan Event, h.cfg.Buffer), dropped: make(chan struct{})}
	for _, name := range h.order {
		select {
		case s.events <- h.last[name]:
		default:
		}
	}
	h.subs[s] = struct{}{}
	if !h.running {
		h.running = true
		h.wg.Add(1)
		go h.run()
	}
	return s, nil
}

// Unsubscribe closes a stream; the hub stops reading the Source once no
// one is subscribed.
func (h *Hub) Unsubscribe(s *Subscriber) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
	s.drop()
}

// Subscribers is the number of open streams.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// Close drops every subscriber and stops the hub's loop.
func (h *Hub) Close() {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.stop)
	}
	for s := range h.subs {
		delete(h.subs, s)
		s.drop()
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// idle ends the loop when no one is subscribed. The latest documents are
// forgotten with it: nothing keeps them current while no one is
// subscribed, so the next subscriber starts from the loop's first collect,
// not from documents that may be minutes old (which a console would show,
// and then report the difference as changes that just happened).
func (h *Hub) idle() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs) == 0 || h.closed {
		h.running = false
		clear(h.last)
		h.order = nil
		if f, ok := h.cfg.Source.(Forgetter); ok {
			f.Forget()
		}
		return true
	}
	return false
}

// run collects while anyone is subscribed: from the storage nodes every
// Interval, from the metadata whenever its version moves.
func (h *Hub) run() {
	defer h.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-h.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	poll := time.NewTicker(h.cfg.MetadataPoll)
	defer poll.Stop()
	var version uint64
	var lastRefresh time.Time
	for !h.idle() {
		v := h.cfg.Source.Version()
		refresh := time.Since(lastRefresh) >= h.cfg.Interval
		if refresh || v != version {
			version = v
			if refresh {
				lastRefresh = time.Now()
			}
			cctx, ccancel := context.WithTimeout(ctx, collectTimeout)
			events := h.cfg.Source.Collect(cctx, refresh)
			ccancel()
			h.publish(events)
		}
		select {
		case <-poll.C:
		case <-h.stop:
			return
		}
	}
}

// publish sends each event whose document changed to every subscriber; a
// subscriber whose buffer is full is dropped, never waited for.
func (h *Hub) publish(events []Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range events {
		prev, seen := h.last[e.Name]
		if seen && bytes.Equal(prev.Data, e.Data) {
			continue
		}
		if !seen {
			h.order = append(h.order, e.Name)
		}
		h.last[e.Name] = e
		for s := range h.subs {
			select {
			case s.events <- e:
			default:
				delete(h.subs, s)
				s.drop()
				h.cfg.Logger.Warn("console: dropped a slow event subscriber", "buffer", h.cfg.Buffer)
			}
		}
	}
}

// ServeHTTP is GET /v1/events: a text/event-stream of the hub's events,
// each as the caller's Viewer shows it.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var v Viewer = everything{}
	if h.cfg.Viewers != nil {
		v = h.cfg.Viewers(r)
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, codeInternal, errs.UnknownServerError.Name, "the connection cannot stream")
		return
	}
	s, err := h.Subscribe()
	if err != nil {
		w.Header().Set("Retry-After", "2")
		writeError(w, http.StatusTooManyRequests, codeResourceExhausted, errs.ThrottlingQuotaExceeded.Name,
			fmt.Sprintf("the gateway serves at most %d event streams at once", h.cfg.MaxSubscribers))
		return
	}
	defer h.Unsubscribe(s)
	// A stream has no end: lift the server's write deadline for it.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprintf(w, "retry: 2000\n\n")
	flusher.Flush()
	keep := time.NewTicker(h.cfg.KeepAlive)
	defer keep.Stop()
	recheck := time.NewTicker(h.cfg.Recheck)
	defer recheck.Stop()
	// What the caller was sent, and the hub's latest events, by name: a
	// document is sent when what the caller may see of it changed.
	sent := map[string][]byte{}
	latest := map[string]Event{}
	var order []string
	send := func(e Event) error {
		if _, ok := latest[e.Name]; !ok {
			order = append(order, e.Name)
		}
		latest[e.Name] = e
		data := v.Show(e)
		if prev, ok := sent[e.Name]; ok && bytes.Equal(prev, data) {
			return nil
		}
		sent[e.Name] = data
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.Name, data); err != nil {
			return err
		}
		flusher.Flush()
		return nil
	}
	allowed := func() bool {
		if err := v.Check(); err != nil {
			h.cfg.Logger.InfoContext(r.Context(), "console: ended an event stream its caller may no longer read", "reason", err.Error())
			return false
		}
		return true
	}
	for {
		select {
		case e := <-s.Events():
			if !allowed() || send(e) != nil {
				return
			}
		case <-recheck.C:
			if !allowed() {
				return
			}
			for _, name := range order {
				if send(latest[name]) != nil {
					return
				}
			}
		case <-keep.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			flusher.Flush()
		case <-s.Dropped():
			// Too slow, or the gateway is stopping: the browser reconnects
			// after the retry delay and starts from the latest documents.
			return
		case <-r.Context().Done():
			return
		}
	}
}
