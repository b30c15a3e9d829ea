package membership

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	sockaddr "github.com/hashicorp/go-sockaddr"
	"github.com/hashicorp/memberlist"
)

// maxPacket is the largest UDP payload there is; memberlist keeps its own
// packets far below it (UDPBufferSize, 1400 bytes on a LAN).
const maxPacket = 65536

// recvBuffer is the socket receive buffer asked for, as memberlist's own
// transport does, halved until the kernel accepts it.
const recvBuffer = 2 << 20

// transport carries gossip over UDP (probes, gossip) and TCP (state
// exchanges, probes' fallback) on one host and port, as memberlist's own
// NetTransport does, with one difference that matters to an idle cluster:
// every packet is read into one buffer that is kept, and only its bytes are
// copied out. NetTransport allocates 64 KiB for every packet it reads, so
// each member's few dozen probes and acks a second kept the garbage
// collector busy and, on a virtual machine, faulted fresh pages in for each
// of them: the largest part of an idle storage node's CPU.
type transport struct {
	tcp     *net.TCPListener
	udp     *net.UDPConn
	logger  *slog.Logger
	packets chan *memberlist.Packet
	streams chan net.Conn

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

var _ memberlist.NodeAwareTransport = (*transport)(nil)

// newTransport listens on host:port for TCP and UDP; port 0 picks a port
// free for both.
func newTransport(host string, port int, logger *slog.Logger) (*transport, error) {
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, fmt.Errorf("membership: bind address %q is not an IP address", host)
	}
	tcp, err := net.ListenTCP("tcp", &net.TCPAddr{IP: ip, Port: port})
	if err != nil {
		return nil, fmt.Errorf("membership: gossip TCP listener on %s: %w", net.JoinHostPort(host, fmt.Sprint(port)), err)
	}
	port = tcp.Addr().(*net.TCPAddr).Port
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: ip, Port: port})
	if err != nil {
		_ = tcp.Close()
		return nil, fmt.Errorf("membership: gossip UDP listener on %s: %w", net.JoinHostPort(host, fmt.Sprint(port)), err)
	}
	for size := recvBuffer; size > 0; size /= 2 {
		if err = udp.SetReadBuffer(size); err == nil {
			break
		}
	}
	if err != nil {
		_, _ = tcp.Close(), udp.Close()
		return nil, fmt.Errorf("membership: gossip UDP receive buffer: %w", err)
	}
	t := &transport{
		tcp: tcp, udp: udp, logger: logger,
		packets: make(chan *memberlist.Packet),
		streams: make(chan net.Conn),
		stop:    make(chan struct{}),
	}
	t.wg.Add(2)
	go t.acceptLoop()
	go t.readLoop()
	return t, nil
}

// FinalAdvertiseAddr answers the address other members reach this one at:
// ip:port when ip is given, else the listener's address (a private IP of
// this host when it listens on every interface).
func (t *transport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	if ip != "" {
		addr := net.ParseIP(ip)
		if addr == nil {
			return nil, 0, fmt.Errorf("membership: advertise address %q is not an IP address", ip)
		}
		if v4 := addr.To4(); v4 != nil {
			addr = v4
		}
		return addr, port, nil
	}
	local := t.tcp.Addr().(*net.TCPAddr)
	if !local.IP.IsUnspecified() {
		return local.IP, local.Port, nil
	}
	private, err := sockaddr.GetPrivateIP()
	if err != nil {
		return nil, 0, fmt.Errorf("membership: finding a private IP to advertise: %w", err)
	}
	addr := net.ParseIP(private)
	if addr == nil {
		return nil, 0, errors.New("membership: no private IP address to advertise; set an advertise address")
	}
	return addr, local.Port, nil
}

func (t *transport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

func (t *transport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	to, err := net.ResolveUDPAddr("udp", a.Addr)
	if err != nil {
		return time.Time{}, err
	}
	_, err = t.udp.WriteTo(b, to)
	return time.Now(), err
}

func (t *transport) PacketCh() <-chan *memberlist.Packet { return t.packets }

func (t *transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (t *transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	return d.Dial("tcp", a.Addr)
}

func (t *transport) StreamCh() <-chan net.Conn { return t.streams }

func (t *transport) Shutdown() error {
	t.once.Do(func() {
		close(t.stop)
		_, _ = t.tcp.Close(), t.udp.Close()
	})
	t.wg.Wait()
	return nil
}

func (t *transport) stopped() bool {
	select {
	case <-t.stop:
		return true
	default:
		return false
	}
}

// acceptLoop hands every accepted connection to memberlist, pausing (5 ms,
// doubling up to a second) after a failed accept so that a process out of
// file descriptors does not spin.
func (t *transport) acceptLoop() {
	defer t.wg.Done()
	var pause time.Duration
	for {
		conn, err := t.tcp.AcceptTCP()
		if err != nil {
			if t.stopped() {
				return
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			t.logger.Error("gossip: accepting a TCP connection failed", "err", err, "retry_in", pause)
			select {
			case <-time.After(pause):
			case <-t.stop:
				return
			}
			continue
		}
		pause = 0
		select {
		case t.streams <- conn:
		case <-t.stop:
			_ = conn.Close()
			return
		}
	}
}

// readLoop reads every packet into one buffer and hands memberlist a copy
// of just its bytes.
func (t *transport) readLoop() {
	defer t.wg.Done()
	buf := make([]byte, maxPacket)
	for {
		n, from, err := t.udp.ReadFrom(buf)
		now := time.Now()
		if err != nil {
			if t.stopped() {
				return
			}
			t.logger.Error("gossip: reading a UDP packet failed", "err", err)
			continue
		}
		if n == 0 {
			continue // memberlist has nothing to make of an empty packet
		}
		p := &memberlist.Packet{Buf: append([]byte(nil), buf[:n]...), From: from, Timestamp: now}
		select {
		case t.packets <- p:
		case <-t.stop:
			return
		}
	}
}
