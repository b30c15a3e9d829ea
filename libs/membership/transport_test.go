package membership

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func startTransport(t *testing.T) *transport {
	t.Helper()
	tr, err := newTransport("127.0.0.1", 0, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown() })
	return tr
}

func nextPacket(t *testing.T, tr *transport) *memberlist.Packet {
	t.Helper()
	select {
	case p := <-tr.PacketCh():
		return p
	case <-time.After(5 * time.Second):
		t.Fatal("no packet within 5 s")
		return nil
	}
}

// The read buffer is reused: a packet handed to memberlist must keep its
// bytes after the next one is read.
func TestTransportPacketsKeepTheirBytes(t *testing.T) {
	a, b := startTransport(t), startTransport(t)
	ip, port, err := b.FinalAdvertiseAddr("", 0)
	if err != nil {
		t.Fatal(err)
	}
	to := net.JoinHostPort(ip.String(), strconv.Itoa(port))
	first := bytes.Repeat([]byte("a"), 1000)
	second := []byte("bb")
	if _, err := a.WriteTo(first, to); err != nil {
		t.Fatal(err)
	}
	p1 := nextPacket(t, b)
	if _, err := a.WriteToAddress(second, memberlist.Address{Addr: to, Name: "b"}); err != nil {
		t.Fatal(err)
	}
	p2 := nextPacket(t, b)
	if !bytes.Equal(p1.Buf, first) {
		t.Fatalf("first packet now holds %q (%d bytes), want 1000 × 'a'", p1.Buf[:min(len(p1.Buf), 8)], len(p1.Buf))
	}
	if !bytes.Equal(p2.Buf, second) {
		t.Fatalf("second packet %q, want %q", p2.Buf, second)
	}
	if cap(p1.Buf) > 4096 {
		t.Fatalf("a 1000-byte packet holds a %d-byte buffer", cap(p1.Buf))
	}
	aIP, aPort, _ := a.FinalAdvertiseAddr("", 0)
	if got := p1.From.String(); got != net.JoinHostPort(aIP.String(), strconv.Itoa(aPort)) {
		t.Fatalf("packet from %s, want the sender's gossip address %s:%d", got, aIP, aPort)
	}
}

func TestTransportStreams(t *testing.T) {
	a, b := startTransport(t), startTransport(t)
	ip, port, _ := b.FinalAdvertiseAddr("", 0)
	conn, err := a.DialTimeout(net.JoinHostPort(ip.String(), strconv.Itoa(port)), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("state")); err != nil {
		t.Fatal(err)
	}
	select {
	case in := <-b.StreamCh():
		defer in.Close()
		got := make([]byte, 5)
		if _, err := io.ReadFull(in, got); err != nil || string(got) != "state" {
			t.Fatalf("stream read %q, %v; want \"state\"", got, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no stream within 5 s")
	}
}

func TestTransportAdvertiseAddress(t *testing.T) {
	tr := startTransport(t)
	ip, port, err := tr.FinalAdvertiseAddr("10.1.2.3", 7000)
	if err != nil || ip.String() != "10.1.2.3" || port != 7000 {
		t.Fatalf("given address: %v:%d, %v; want 10.1.2.3:7000", ip, port, err)
	}
	if _, _, err := tr.FinalAdvertiseAddr("not-an-ip", 7000); err == nil {
		t.Fatal("a host name as advertise address: no error")
	}
	ip, port, err = tr.FinalAdvertiseAddr("", 0)
	if err != nil || !ip.Equal(net.IPv4(127, 0, 0, 1)) || port != tr.tcp.Addr().(*net.TCPAddr).Port {
		t.Fatalf("no address given: %v:%d, %v; want the listener's 127.0.0.1:%d", ip, port, err, tr.tcp.Addr().(*net.TCPAddr).Port)
	}
}

// Shutdown returns while a packet waits for a reader that is gone, and
// the port is free again afterwards.
func TestTransportShutdownWithAPacketPending(t *testing.T) {
	a, b := startTransport(t), startTransport(t)
	ip, port, _ := b.FinalAdvertiseAddr("", 0)
	if _, err := a.WriteTo([]byte("x"), net.JoinHostPort(ip.String(), strconv.Itoa(port))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // read, and blocked handing it over
	done := make(chan struct{})
	go func() { _ = b.Shutdown(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown hung on an undelivered packet")
	}
	again, err := newTransport("127.0.0.1", port, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("the port is still taken after Shutdown: %v", err)
	}
	_ = again.Shutdown()
}

func TestTransportBadBindAddress(t *testing.T) {
	if _, err := newTransport("localhost", 0, slog.Default()); err == nil {
		t.Fatal("a host name as bind address: no error")
	}
}
