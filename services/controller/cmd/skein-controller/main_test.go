package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	controllerv1 "skein/gen/skein/controller/v1"
	controllerv1grpc "skein/gen/skein/controller/v1/controllerv1grpc"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestFlagsAndEnvTwins(t *testing.T) {
	env := map[string]string{
		"SKEIN_NODE_ID":                "2",
		"SKEIN_BROKER_SESSION_TIMEOUT": "3s",
		"SKEIN_PEERS":                  "1=127.0.0.1:1=127.0.0.1:11,2=127.0.0.1:2=127.0.0.1:12",
	}
	c, err := parseConfig([]string{"--broker-session-timeout=4s", "--consumer-offsets-partitions=5"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.nodeID != 2 || c.sessionTimeout != 4*time.Second || c.offsetsPartitions != 5 || c.dataDir != "data/controller-2" || c.clusterID == "" {
		t.Errorf("config %+v", c)
	}
	if c.imbalanceInterval != 10*time.Second || c.txnPartitions != 12 || c.internalMinBrokers != 3 {
		t.Errorf("defaults %+v", c)
	}
	for _, bad := range []map[string]string{{"SKEIN_NODE_ID": "one"}, {"SKEIN_BROKER_SESSION_TIMEOUT": "soon"}} {
		if _, err := parseConfig(nil, func(k string) string { return bad[k] }, io.Discard); err == nil {
			t.Errorf("env %v accepted", bad)
		}
	}
	if _, err := parseConfig([]string{"--broker-session-timeout=0s"}, func(string) string { return "" }, io.Discard); err == nil {
		t.Error("a zero session timeout accepted")
	}
}

// The binary's run: serves gRPC and HTTP, answers healthcheck, creates
// nothing it should not, and stops cleanly when its context ends.
func TestRunAndHealthcheck(t *testing.T) {
	grpcAddr, httpAddr, raftAddr, gossipAddr := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	args := []string{"--node-id=1", "--grpc-addr=" + grpcAddr, "--http-addr=" + httpAddr, "--raft-addr=" + raftAddr,
		"--gossip-addr=" + gossipAddr, "--data-dir=" + t.TempDir(), "--cluster-id=test-cluster",
		"--raft-heartbeat-timeout=300ms", "--raft-election-timeout=300ms", "--raft-leader-lease-timeout=150ms", "--log-level=warn"}
	noenv := func(string) string { return "" }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs syncBuffer
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, noenv, &logs, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("run: %v\n%s", err, logs.String())
	case <-time.After(10 * time.Second):
		t.Fatal("not ready")
	}
	if code := healthcheck([]string{"--http-addr=" + httpAddr}, noenv, io.Discard); code != 0 {
		t.Errorf("healthcheck: %d", code)
	}
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := controllerv1grpc.NewControllerServiceClient(conn)
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := cl.DescribeCluster(ctx, &controllerv1.DescribeClusterRequest{})
		if err == nil && d.GetClusterId() == "test-cluster" && d.GetControllerId() == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("describe: %v %v", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A watcher is cut at shutdown rather than holding it up.
	stream, err := cl.WatchMetadata(ctx, &controllerv1.WatchMetadataRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run ended with %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("graceful stop hung")
	}
	if code := healthcheck([]string{"--http-addr=" + httpAddr, "--timeout=300ms"}, noenv, io.Discard); code != 1 {
		t.Errorf("healthcheck after stop: %d", code)
	}
	if strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("errors logged:\n%s", logs.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
