package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	controllerv1 "skein/gen/skein/controller/v1"
	controllerv1grpc "skein/gen/skein/controller/v1/controllerv1grpc"
	"skein/libs/acl"
	"skein/libs/errs"
	"skein/libs/grpcopt"
	"skein/libs/loopback"
	"skein/libs/membership"
	"skein/libs/metadata"
	"skein/libs/rpcerr"
	"skein/libs/tlsconf"
)

func TestFlagsAndEnvTwins(t *testing.T) {
	env := map[string]string{
		"SKEIN_NODE_ID":                "2",
		"SKEIN_BROKER_SESSION_TIMEOUT": "3s",
		"SKEIN_PEERS":                  "1=127.0.0.1:1=127.0.0.1:11,2=127.0.0.1:2=127.0.0.1:12",
		"SKEIN_GOSSIP_PROBE_INTERVAL":  "1s",
		"SKEIN_GOSSIP_SUSPICION_MULT":  "5",
	}
	c, err := parseConfig([]string{"--broker-session-timeout=4s", "--consumer-offsets-partitions=5", "--gossip-suspicion-mult=2"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.nodeID != 2 || c.sessionTimeout != 4*time.Second || c.offsetsPartitions != 5 || c.dataDir != "data/controller-2" || c.clusterID == "" {
		t.Errorf("config %+v", c)
	}
	if c.imbalanceInterval != 10*time.Second || c.txnPartitions != 12 || c.internalMinBrokers != 3 {
		t.Errorf("defaults %+v", c)
	}
	if g := c.gossipTimings; g.ProbeInterval != time.Second || g.ProbeTimeout != membership.FastTimings().ProbeTimeout || g.SuspicionMult != 2 {
		t.Errorf("gossip timings %+v: want the interval from the environment, the default timeout and the multiplier from the flag", g)
	}
	for _, bad := range []map[string]string{{"SKEIN_NODE_ID": "one"}, {"SKEIN_BROKER_SESSION_TIMEOUT": "soon"}, {"SKEIN_GOSSIP_PROBE_INTERVAL": "50ms"}} {
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
	addrs := loopback.Addrs(t, 4)
	grpcAddr, httpAddr, raftAddr, gossipAddr := addrs[0], addrs[1], addrs[2], addrs[3]
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
	waitStopped(t, done, &logs)
	if code := healthcheck([]string{"--http-addr=" + httpAddr, "--timeout=300ms"}, noenv, io.Discard); code != 1 {
		t.Errorf("healthcheck after stop: %d", code)
	}
	if strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("errors logged:\n%s", logs.String())
	}
}

// waitStopped waits for run to return after its context is cancelled. A
// stop that hangs shows every goroutine of the test binary, the controller's
// among them, and what the controller logged.
func waitStopped(t *testing.T, done <-chan error, logs *syncBuffer) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run ended with %v", err)
		}
	case <-time.After(15 * time.Second):
		var b strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
		t.Fatalf("graceful stop hung\nlog:\n%s\ngoroutines:\n%s", logs.String(), b.String())
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

// The authorization flags are checked before anything starts: an
// authorizer needs TLS (nobody's identity is known without), super users
// are Type:name and need the authorizer; each has an env twin.
func TestAuthorizationFlags(t *testing.T) {
	tlsArgs := []string{"--tls-cert=c.crt", "--tls-key=c.key", "--tls-ca=ca.crt"}
	noenv := func(string) string { return "" }
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
	}{
		{"off", nil, nil, ""},
		{"on with TLS", append([]string{"--authorizer", "--super-users=User:admin;User:ops"}, tlsArgs...), nil, ""},
		{"on without TLS", []string{"--authorizer"}, nil, "--authorizer needs TLS"},
		{"a malformed super user", append([]string{"--authorizer", "--super-users=admin"}, tlsArgs...), nil, "--super-users"},
		{"super users without the authorizer", append([]string{"--super-users=User:admin"}, tlsArgs...), nil, "--super-users needs --authorizer"},
		{"env twins", tlsArgs, map[string]string{"SKEIN_AUTHORIZER": "true", "SKEIN_SUPER_USERS": "User:admin"}, ""},
		{"env twin without TLS", nil, map[string]string{"SKEIN_AUTHORIZER": "true"}, "--authorizer needs TLS"},
		{"the flag overrides its twin", []string{"--authorizer=false"}, map[string]string{"SKEIN_AUTHORIZER": "true"}, ""},
		{"a bad env twin", nil, map[string]string{"SKEIN_AUTHORIZER": "maybe"}, "SKEIN_AUTHORIZER"},
		{"a bad env super user", tlsArgs, map[string]string{"SKEIN_AUTHORIZER": "1", "SKEIN_SUPER_USERS": "User:"}, "--super-users"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := noenv
			if tc.env != nil {
				getenv = func(k string) string { return tc.env[k] }
			}
			_, err := parseConfig(tc.args, getenv, io.Discard)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
			}
		})
	}
	// run stops at the flags, before it listens or opens anything.
	dir := t.TempDir()
	err := run(context.Background(), []string{"--authorizer", "--data-dir=" + dir, "--grpc-addr=" + loopback.Addrs(t, 1)[0]}, noenv, io.Discard, func() { t.Error("served") })
	if err == nil || !strings.Contains(err.Error(), "--authorizer needs TLS") {
		t.Fatalf("run with --authorizer and no TLS: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("run created %d entries in the data directory before refusing", len(entries))
	}
}

// A secured controller: brokers' calls from storage certificates only, and
// with --authorizer a client's admin changes need its ACLs (a super user's
// need none).
func TestRunSecured(t *testing.T) {
	ca, err := tlsconf.OpenCA(t.TempDir(), "test CA")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]tlsconf.Files{}
	for _, l := range []tlsconf.Leaf{
		{Name: "controller-1", Role: "controller", ID: "1"},
		{Name: "alice", Role: "client", ID: "alice"},
		{Name: "admin", Role: "client", ID: "admin"},
	} {
		l.Hosts = []string{"127.0.0.1"}
		if files[l.Name], err = ca.Issue(l); err != nil {
			t.Fatal(err)
		}
	}
	// run makes the process use its certificate; later tests serve
	// plaintext again.
	t.Cleanup(func() { grpcopt.UseTLS(nil) })
	addrs := loopback.Addrs(t, 3)
	grpcAddr := addrs[0]
	f := files["controller-1"]
	args := []string{"--node-id=1", "--grpc-addr=" + grpcAddr, "--http-addr=" + addrs[1], "--raft-addr=" + addrs[2],
		"--gossip-addr=", "--data-dir=" + t.TempDir(), "--cluster-id=test-cluster",
		"--raft-heartbeat-timeout=300ms", "--raft-election-timeout=300ms", "--raft-leader-lease-timeout=150ms", "--log-level=warn",
		"--tls-cert=" + f.Cert, "--tls-key=" + f.Key, "--tls-ca=" + f.CA, "--authorizer", "--super-users=User:admin"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs syncBuffer
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, func(string) string { return "" }, &logs, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("run: %v\n%s", err, logs.String())
	case <-time.After(10 * time.Second):
		t.Fatal("not ready")
	}
	as := func(name string) controllerv1grpc.ControllerServiceClient {
		src, err := tlsconf.Load(files[name])
		if err != nil {
			t.Fatal(err)
		}
		conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(src.ClientConfig())))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return controllerv1grpc.NewControllerServiceClient(conn)
	}
	alice, admin := as("alice"), as("admin")
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := alice.DescribeCluster(ctx, &controllerv1.DescribeClusterRequest{})
		if err == nil && d.GetControllerId() == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("describe: %v %v", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	_, err = alice.RegisterBroker(ctx, &controllerv1.RegisterBrokerRequest{BrokerId: 1, GrpcAddr: "127.0.0.1:1", IncarnationId: "i"})
	if errs.Of(rpcerr.FromStatus(err)) != errs.ClusterAuthorizationFailed {
		t.Errorf("a client registering as a broker: %v", err)
	}
	resp, err := alice.CreateTopics(ctx, &controllerv1.CreateTopicsRequest{Topics: []*controllerv1.CreatableTopic{{Name: "t", Partitions: 1}}})
	if err != nil || errs.ForCode(errs.Code(resp.GetTopics()[0].GetErrorCode())) != errs.TopicAuthorizationFailed {
		t.Errorf("a client without ACLs creating a topic: %v %v", resp, err)
	}
	grant := metadata.AclOf(acl.Binding{Principal: "User:alice", Resource: acl.Topic, Name: "t", Pattern: acl.Literal, Operation: acl.Create, Permission: acl.Allow})
	if r, err := admin.CreateAcls(ctx, &controllerv1.CreateAclsRequest{Acls: []*controllerv1.AclRecord{grant}}); err != nil || r.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("the super user granting: %v %v", r, err)
	}
	// Allowed now: what stops it is the absence of brokers, not ACLs.
	resp, err = alice.CreateTopics(ctx, &controllerv1.CreateTopicsRequest{Topics: []*controllerv1.CreatableTopic{{Name: "t", Partitions: 1}}})
	if err != nil || errs.ForCode(errs.Code(resp.GetTopics()[0].GetErrorCode())) != errs.InvalidReplicationFactor {
		t.Errorf("a client with an ACL creating a topic: %v %v", resp, err)
	}
	if !strings.Contains(logs.String(), `"msg":"call denied"`) || !strings.Contains(logs.String(), `"principal":"User:alice"`) {
		t.Errorf("no audit lines:\n%s", logs.String())
	}
	cancel()
	waitStopped(t, done, &logs)
}
