package cluster

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards TCP connections to a target until frozen: a frozen proxy
// keeps every connection open but passes no byte either way, as a
// network that silently drops a process's traffic to one peer would.
type Proxy struct {
	Addr   string
	target string
	lis    net.Listener

	mu     sync.Mutex
	frozen bool
	conns  []net.Conn
}

// NewProxy listens on a fresh loopback address and forwards to target until
// the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	lis, err := net.Listen("tcp", FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: lis.Addr().String(), target: target, lis: lis}
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Freeze stops forwarding; Thaw resumes it.
func (p *Proxy) Freeze() { p.set(true) }
func (p *Proxy) Thaw()   { p.set(false) }

func (p *Proxy) set(frozen bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = frozen
}

func (p *Proxy) isFrozen() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.frozen
}

func (p *Proxy) accept() {
	for {
		in, err := p.lis.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// pipe copies src to dst, holding each chunk while the proxy is frozen.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for n > 0 && p.isFrozen() {
			time.Sleep(10 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) close() {
	p.lis.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}
