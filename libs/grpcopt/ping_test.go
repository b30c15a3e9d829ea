package grpcopt

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// tapListener records every byte its connections read and write.
type tapListener struct {
	net.Listener
	mu      sync.Mutex
	in, out bytes.Buffer // client to server, server to client
}

func (l *tapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &tapConn{Conn: c, l: l}, nil
}

func (l *tapListener) bytes() (in, out []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.in.Bytes()), bytes.Clone(l.out.Bytes())
}

type tapConn struct {
	net.Conn
	l *tapListener
}

func (c *tapConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.l.mu.Lock()
	c.l.in.Write(p[:n])
	c.l.mu.Unlock()
	return n, err
}

func (c *tapConn) Write(p []byte) (int, error) {
	c.l.mu.Lock()
	c.l.out.Write(p)
	c.l.mu.Unlock()
	return c.Conn.Write(p)
}

// http2Frames counts the frames of each type in b, an HTTP/2 byte stream
// (the client's, with its 24-byte preface, when preface is set).
func http2Frames(t *testing.T, b []byte, preface bool) map[byte]int {
	t.Helper()
	if preface {
		const p = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
		if !bytes.HasPrefix(b, []byte(p)) {
			t.Fatalf("no HTTP/2 client preface: %q", b[:min(len(b), 24)])
		}
		b = b[len(p):]
	}
	frames := map[byte]int{}
	for len(b) >= 9 {
		n := int(binary.BigEndian.Uint32(append([]byte{0}, b[:3]...)))
		frames[b[3]]++
		if len(b) < 9+n {
			t.Fatalf("a frame of %d bytes cut short at %d", n, len(b)-9)
		}
		b = b[9+n:]
	}
	return frames
}

const http2Ping = 0x6

// Quiet control traffic — a heartbeat a second, a watch's heartbeat —
// carries no PING frames: with gRPC's dynamic windows, each message that
// arrived while no bandwidth estimate was under way was answered with a
// PING, and its ACK, which woke both processes twice more per message.
func TestQuietCallsCarryNoPings(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tap := &tapListener{Listener: lis}
	s := grpc.NewServer(Server(nil)...)
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Echo",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Echo", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var m wrapperspb.BytesValue
			if err := dec(&m); err != nil {
				return nil, err
			}
			return &m, nil
		}}},
	}, nil)
	go s.Serve(tap)
	t.Cleanup(s.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), append(Dial(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const calls = 10
	for i := range calls {
		var out wrapperspb.BytesValue
		if err := cc.Invoke(ctx, "/test.Echo/Echo", &wrapperspb.BytesValue{Value: []byte{byte(i)}}, &out); err != nil {
			t.Fatal(err)
		}
		if len(out.GetValue()) != 1 || out.GetValue()[0] != byte(i) {
			t.Fatalf("call %d answered %v", i, out.GetValue())
		}
		time.Sleep(20 * time.Millisecond) // any PING is answered meanwhile
	}
	in, out := tap.bytes()
	fromClient, fromServer := http2Frames(t, in, true), http2Frames(t, out, false)
	const data = 0x0
	if fromClient[data] < calls || fromServer[data] < calls {
		t.Fatalf("DATA frames: %d from the client, %d from the server, want %d each at least", fromClient[data], fromServer[data], calls)
	}
	if fromClient[http2Ping] != 0 || fromServer[http2Ping] != 0 {
		t.Fatalf("PING frames over %d quiet calls: %d from the client, %d from the server; want none", calls, fromClient[http2Ping], fromServer[http2Ping])
	}
}
