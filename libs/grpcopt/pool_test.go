package grpcopt

import (
	"context"
	"math/rand/v2"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func TestTiers(t *testing.T) {
	p := &bufferPool{}
	for _, tc := range []struct{ n, wantCap int }{
		{0, 256}, {1, 256}, {256, 256}, {257, 512}, {4096, 4096}, {40 << 10, 64 << 10}, {256 << 10, 256 << 10}, {8 << 20, 8 << 20}, {8<<20 + 1, 8<<20 + 1},
	} {
		b := p.Get(tc.n)
		if len(*b) != tc.n || cap(*b) != tc.wantCap {
			t.Errorf("Get(%d): len %d cap %d, want len %d cap %d", tc.n, len(*b), cap(*b), tc.n, tc.wantCap)
		}
		p.Put(b)
	}
	// A buffer comes back at the length asked for, whatever it held.
	b := p.Get(1000)
	for i := range *b {
		(*b)[i] = 0xAB
	}
	p.Put(b)
	if c := p.Get(600); len(*c) != 600 || cap(*c) != 1024 {
		t.Errorf("reused buffer: len %d cap %d", len(*c), cap(*c))
	}
	p.Put(&[]byte{1, 2, 3}) // not a tier: ignored, no panic
	odd := make([]byte, 0, 1000)
	p.Put(&odd)
}

// Messages of many sizes, compressed and not, cross a connection whose both
// ends use the pool intact.
func TestMessagesIntactThroughThePool(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(Server(nil)...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(s, hs)
	go s.Serve(lis)
	defer s.Stop()
	cc, err := grpc.NewClient(lis.Addr().String(), append(Dial(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20), grpc.MaxCallSendMsgSize(16<<20)))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 100 {
		n := rng.IntN(1 << uint(8+rng.IntN(13)))
		name := make([]byte, n)
		for j := range name {
			name[j] = byte('a' + rng.IntN(26))
		}
		hs.SetServingStatus(string(name), healthpb.HealthCheckResponse_SERVING)
		var opts []grpc.CallOption
		if i%3 == 0 {
			opts = append(opts, grpc.UseCompressor(gzip.Name))
		}
		resp, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{Service: string(name)}, opts...)
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("message %d of %d bytes: %v %v (a corrupted name is unknown to the server)", i, n, resp, err)
		}
	}
}
