package grpcopt

import (
	"context"
	"crypto/tls"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"skein/libs/tlsconf"
)

// With UseTLS, a server started with Server's options and a client dialled
// with Dial's talk mutual TLS; a plaintext client, a client without a
// certificate and a client of another CA are refused at the handshake.
func TestMutualTLSBetweenServerAndDial(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlsconf.OpenCA(dir, "test CA")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ca.Issue(tlsconf.Leaf{Name: "node", Hosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	src, err := tlsconf.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	other, err := tlsconf.OpenCA(filepath.Join(dir, "other"), "other CA")
	if err != nil {
		t.Fatal(err)
	}
	of, err := other.Issue(tlsconf.Leaf{Name: "intruder"})
	if err != nil {
		t.Fatal(err)
	}
	intruder, err := tlsconf.Load(of)
	if err != nil {
		t.Fatal(err)
	}

	UseTLS(src)
	t.Cleanup(func() { UseTLS(nil) })
	srv := grpc.NewServer(Server(nil)...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)

	check := func(opts ...grpc.DialOption) error {
		cc, err := grpc.NewClient(lis.Addr().String(), opts...)
		if err != nil {
			return err
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	if err := check(Dial()...); err != nil {
		t.Errorf("mutual TLS: %v", err)
	}
	if err := check(grpc.WithTransportCredentials(insecure.NewCredentials())); err == nil {
		t.Error("a plaintext client was served")
	}
	if err := check(grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}))); err == nil {
		t.Error("a client without a certificate was served")
	}
	if err := check(grpc.WithTransportCredentials(credentials.NewTLS(intruder.ClientConfig()))); err == nil {
		t.Error("a client of another CA was served")
	}
}
