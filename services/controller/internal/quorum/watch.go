package quorum

import (
	controllerv1 "skein/gen/skein/controller/v1"
)

// Subscription is one metadata watcher's feed. Read Deltas in order; when
// Resync fires, the watcher fell behind (or the state was replaced by a
// snapshot): call Image and send that instead, then go on with Deltas.
type Subscription struct {
	n      *Node
	ch     chan *controllerv1.MetadataDelta
	resync chan struct{} // holds a token while a resync is due
	lagged bool          // guarded by n.mu: deltas are dropped until Image is called
}

// Deltas delivers committed changes in version order.
func (s *Subscription) Deltas() <-chan *controllerv1.MetadataDelta { return s.ch }

// Resync fires when the watcher must be sent a new image.
func (s *Subscription) Resync() <-chan struct{} { return s.resync }

// Image returns the current image and restarts the delta feed right after
// it: deltas still queued (older than the image) are dropped.
func (s *Subscription) Image() *controllerv1.MetadataImage {
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	for {
		select {
		case <-s.ch:
			continue
		case <-s.resync:
			continue
		default:
		}
		break
	}
	s.lagged = false
	return s.n.imageLocked()
}

// Close stops the feed.
func (s *Subscription) Close() {
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	delete(s.n.hub.subs, s)
}

// hub fans committed deltas out to subscriptions and keeps the last few, so
// a watcher that reconnects with a recent version gets deltas, not an image.
// Guarded by Node.mu.
type hub struct {
	subs   map[*Subscription]struct{}
	buffer int
	ring   []*controllerv1.MetadataDelta // the last ringSize deltas, in order
	// floor is the version the ring starts after: the ring holds every
	// change in (floor, current version].
	floor uint64
}

const ringSize = 512

func (h *hub) publish(d *controllerv1.MetadataDelta) {
	h.ring = append(h.ring, d)
	if len(h.ring) > ringSize {
		h.floor = h.ring[0].GetVersion()
		h.ring = h.ring[1:]
	}
	for s := range h.subs {
		s.offer(d)
	}
}

// offer queues d unless the subscription is lagging; a full queue makes it
// lag. Called under Node.mu.
func (s *Subscription) offer(d *controllerv1.MetadataDelta) {
	if s.lagged {
		return
	}
	select {
	case s.ch <- d:
	default:
		s.lagged = true
		select {
		case s.resync <- struct{}{}:
		default:
		}
	}
}

// reset forgets the history (the state was replaced by a snapshot) and asks
// every watcher to resync.
func (h *hub) reset(version uint64) {
	h.ring, h.floor = nil, version
	for s := range h.subs {
		s.lagged = true
		select {
		case s.resync <- struct{}{}:
		default:
		}
	}
}

// Subscribe registers a watcher that holds version known (0 for none). It
// answers the image to send first, or nil when the deltas queued on the
// subscription carry the watcher from known to the current version.
func (n *Node) Subscribe(known uint64) (*Subscription, *controllerv1.MetadataImage) {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := &Subscription{n: n, ch: make(chan *controllerv1.MetadataDelta, n.hub.buffer), resync: make(chan struct{}, 1)}
	n.hub.subs[s] = struct{}{}
	cur := uint64(n.machine.Image().Version())
	if known == 0 || known < n.hub.floor || known > cur {
		return s, n.imageLocked()
	}
	for _, d := range n.hub.ring {
		if d.GetVersion() > known {
			s.offer(d)
		}
	}
	return s, nil
}
