package grpcopt

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// sinkDesc is a client-streaming service whose handler reads nothing until
// release is closed: what a client can send it meanwhile is what the
// server's flow-control windows let through.
func sinkDesc(release <-chan struct{}) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "test.Sink",
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{
			StreamName:    "Put",
			ClientStreams: true,
			Handler: func(_ any, stream grpc.ServerStream) error {
				<-release
				for {
					var m wrapperspb.BytesValue
					if err := stream.RecvMsg(&m); err != nil {
						return stream.SendMsg(&wrapperspb.BytesValue{})
					}
				}
			},
		}},
	}
}

// A server with ServerDataWindows takes 4 MiB on one stream before its
// handler reads any of it; gRPC's default window (64 KiB) would hold the
// sender back after the first message.
func TestServerDataWindowsLetMegabytesInFlight(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	cc := serve(t, append(Server(nil), ServerDataWindows()...), func(s *grpc.Server) {
		s.RegisterService(sinkDesc(release), nil)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, "/test.Sink/Put")
	if err != nil {
		t.Fatal(err)
	}
	sent := make(chan int, 1)
	go func() { sent <- sendFourMiB(stream) }()
	waitSent(t, sent, "the client")
}

// sendFourMiB sends 16 messages of 256 KiB on stream and answers how many
// went before an error.
func sendFourMiB(stream interface{ SendMsg(any) error }) int {
	n := 0
	for range 16 {
		if err := stream.SendMsg(&wrapperspb.BytesValue{Value: make([]byte, 256<<10)}); err != nil {
			break
		}
		n++
	}
	return n
}

// waitSent fails unless all 16 messages were sent within 10 s.
func waitSent(t *testing.T, sent <-chan int, who string) {
	t.Helper()
	select {
	case n := <-sent:
		if n != 16 {
			t.Fatalf("%s sent %d of 16 messages", who, n)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s was held back before 4 MiB while its peer read nothing", who)
	}
}

// A client dialled with DataWindows takes 4 MiB of a server's stream
// before it reads any of it.
func TestDataWindowsLetMegabytesInFlight(t *testing.T) {
	sent := make(chan int, 1)
	desc := &grpc.ServiceDesc{
		ServiceName: "test.Source",
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{
			StreamName:    "Get",
			ServerStreams: true,
			Handler: func(_ any, stream grpc.ServerStream) error {
				var req wrapperspb.BytesValue
				if err := stream.RecvMsg(&req); err != nil {
					return err
				}
				sent <- sendFourMiB(stream)
				return nil
			},
		}},
	}
	cc := serve(t, Server(nil), func(s *grpc.Server) { s.RegisterService(desc, nil) }, DataWindows()...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/test.Source/Get")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.SendMsg(&wrapperspb.BytesValue{}); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	waitSent(t, sent, "the server")
}
