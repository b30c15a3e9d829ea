package grpcopt

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// A client with Dial's options talks to a server with Server's; and after
// the server goes away and comes back on the same address, the client is
// connected again within the reconnect schedule (not gRPC's default two
// minutes of backoff).
func TestReconnectAfterServerReturns(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	serve := func(lis net.Listener) *grpc.Server {
		s := grpc.NewServer(Server(nil)...)
		healthpb.RegisterHealthServer(s, health.NewServer())
		go s.Serve(lis)
		return s
	}
	s := serve(lis)
	cc, err := grpc.NewClient(addr, append(Dial(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	check := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	if err := check(); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	// Down long enough for several failed reconnects, growing the backoff.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		_ = check()
	}
	if lis, err = net.Listen("tcp", addr); err != nil {
		t.Fatalf("address %s taken meanwhile: %v", addr, err)
	}
	s = serve(lis)
	defer s.Stop()
	back := time.Now()
	for check() != nil {
		if time.Since(back) > ReconnectMaxDelay+2*time.Second {
			t.Fatalf("not reconnected %v after the server came back", time.Since(back))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("reconnected %v after the server came back", time.Since(back).Round(time.Millisecond))
}
