package quorum

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"skein/libs/tlsconf"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// certs issues, from a fresh CA, the certificates of two controllers, a
// storage node and a client, all for 127.0.0.1.
func certs(t *testing.T) map[string]*tlsconf.Source {
	t.Helper()
	ca, err := tlsconf.OpenCA(t.TempDir(), "test CA")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*tlsconf.Source{}
	for _, l := range []tlsconf.Leaf{
		{Name: "controller-1", Role: "controller", ID: "1"},
		{Name: "controller-2", Role: "controller", ID: "2"},
		{Name: "storage-1", Role: "storage", ID: "1"},
		{Name: "alice", Role: "client", ID: "alice"},
	} {
		l.Hosts = []string{"127.0.0.1"}
		f, err := ca.Issue(l)
		if err != nil {
			t.Fatal(err)
		}
		if out[l.Name], err = tlsconf.Load(f); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// echo accepts on l, answers each connection's first byte after its
// handshake, and reports each handshake's error.
func echo(l net.Listener) <-chan error {
	hs := make(chan error, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				err := c.(*tls.Conn).Handshake()
				hs <- err
				if err != nil {
					return
				}
				var b [1]byte
				if _, err := io.ReadFull(c, b[:]); err == nil {
					c.Write(b[:])
				}
			}()
		}
	}()
	return hs
}

func raftAddr(a net.Addr) raft.ServerAddress { return raft.ServerAddress(a.String()) }

// roundTrip writes a byte on c and reads it back.
func roundTrip(c net.Conn) error {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte{7}); err != nil {
		return err
	}
	var b [1]byte
	_, err := io.ReadFull(c, b[:])
	return err
}

// The Raft listener takes controllers only: a storage node's or a client's
// certificate of the same CA is refused in the handshake, with a line
// naming the peer.
func TestTLSStreamAcceptsControllersOnly(t *testing.T) {
	src := certs(t)
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	s, err := newTLSStream("127.0.0.1:0", nil, src["controller-1"].ServerConfig(false), src["controller-1"].ClientConfig(), log)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.advertise = s.Listener.Addr()
	handshakes := echo(s)
	addr := s.Listener.Addr().String()

	for _, name := range []string{"storage-1", "alice"} {
		c, err := tls.Dial("tcp", addr, src[name].ClientConfig())
		if err == nil {
			err = roundTrip(c) // TLS 1.3: the server's verdict arrives after the client's handshake
			c.Close()
		}
		if err == nil {
			t.Errorf("%s's certificate was let into Raft traffic", name)
		}
		if err := <-handshakes; !errors.Is(err, errNotController) {
			t.Errorf("%s: the listener's handshake answered %v, want a refusal", name, err)
		}
		if !strings.Contains(logs.String(), "User:"+name) {
			t.Errorf("no log line names %s:\n%s", name, logs.String())
		}
	}

	// Another controller, dialling as the stream itself does.
	other, err := newTLSStream("127.0.0.1:0", nil, src["controller-2"].ServerConfig(false), src["controller-2"].ClientConfig(), log)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	c, err := other.Dial(raftAddr(s.Listener.Addr()), 2*time.Second)
	if err != nil {
		t.Fatalf("a controller could not dial a controller: %v\n%s", err, logs.String())
	}
	defer c.Close()
	if err := roundTrip(c); err != nil {
		t.Fatalf("controller to controller: %v", err)
	}
	if err := <-handshakes; err != nil {
		t.Fatalf("the listener refused a controller: %v", err)
	}
}

// A Raft dial refuses a server whose certificate is not a controller's,
// even one the CA signed for the address dialled.
func TestTLSStreamDialsControllersOnly(t *testing.T) {
	src := certs(t)
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	s, err := newTLSStream("127.0.0.1:0", nil, src["controller-1"].ServerConfig(false), src["controller-1"].ClientConfig(), log)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	l, err := tls.Listen("tcp", "127.0.0.1:0", src["storage-1"].ServerConfig(false))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	handshakes := echo(l)
	c, err := s.Dial(raftAddr(l.Addr()), 2*time.Second)
	if err == nil {
		c.Close()
		t.Fatal("a Raft dial accepted a storage node's certificate")
	}
	if !errors.Is(err, errNotController) {
		t.Errorf("dial error %v, want a refusal of the peer's role", err)
	}
	<-handshakes
	if line := logs.String(); !strings.Contains(line, "User:storage-1 (storage 1)") || !strings.Contains(line, l.Addr().String()) {
		t.Errorf("the log does not name the peer and its address:\n%s", line)
	}

	// The same dial to a controller goes through.
	l2, err := tls.Listen("tcp", "127.0.0.1:0", src["controller-2"].ServerConfig(false))
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	handshakes = echo(l2)
	c, err = s.Dial(raftAddr(l2.Addr()), 2*time.Second)
	if err != nil {
		t.Fatalf("dialling a controller: %v", err)
	}
	defer c.Close()
	if err := roundTrip(c); err != nil {
		t.Fatal(err)
	}
	if err := <-handshakes; err != nil {
		t.Fatal(err)
	}
}
