package partition

// A Waker is what one long poll waits on, across all the partitions it
// reads: WakeOnHW and WakeOnLEO register it with a partition, and the next
// move of that partition's high watermark (or log end offset) leaves a
// token in C and drops the registration, so a poll registers before each
// read of a partition. A poll registers before it reads, so a move after
// the read is never missed; a token can come from a partition with nothing
// new for the poll, which then reads again and waits again.
//
// One goroutine uses a Waker at a time. Forget drops its registrations
// when a poll ends (a partition that never moves would keep them).
type Waker struct {
	c chan struct{}
	// regs are the partitions w may be registered with, each once: a
	// stream that registers with the same partition after each of its
	// moves (Follow) must not grow it until the stream ends.
	regs map[*Partition]struct{}
}

// NewWaker returns a Waker with no registrations.
func NewWaker() *Waker { return &Waker{c: make(chan struct{}, 1)} }

// C receives a token after a move of a partition w is registered with.
func (w *Waker) C() <-chan struct{} { return w.c }

// Forget drops every registration of w and any token already left, so
// that w can serve the next poll.
func (w *Waker) Forget() {
	for p := range w.regs {
		p.mu.Lock()
		delete(p.hwWakers, w)
		delete(p.leoWakers, w)
		p.mu.Unlock()
	}
	clear(w.regs)
	select {
	case <-w.c:
	default:
	}
}

func (w *Waker) wake() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// WakeOnHW registers w to be woken by the next move of the high watermark.
func (p *Partition) WakeOnHW(w *Waker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hwWakers = register(p.hwWakers, p, w)
}

// WakeOnLEO registers w to be woken by the next move of the log end offset.
func (p *Partition) WakeOnLEO(w *Waker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.leoWakers = register(p.leoWakers, p, w)
}

func register(set map[*Waker]struct{}, p *Partition, w *Waker) map[*Waker]struct{} {
	if _, ok := set[w]; ok {
		return set
	}
	if set == nil {
		set = map[*Waker]struct{}{}
	}
	set[w] = struct{}{}
	if w.regs == nil {
		w.regs = map[*Partition]struct{}{}
	}
	w.regs[p] = struct{}{}
	return set
}

// wakeAll wakes and forgets every waker of set. The regs of a forgotten
// waker still name p, which its Forget then finds empty.
func wakeAll(set map[*Waker]struct{}) {
	for w := range set {
		w.wake()
	}
	clear(set)
}

func (p *Partition) notifyHWLocked() { wakeAll(p.hwWakers) }

func (p *Partition) notifyLEOLocked() { wakeAll(p.leoWakers) }

// Wakers is how many polls are registered with p: waiting on its high
// watermark (consumers) and on its log end offset (followers).
func (p *Partition) Wakers() (hw, leo int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.hwWakers), len(p.leoWakers)
}
