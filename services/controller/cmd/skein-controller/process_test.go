//go:build integration

package main

// Real processes: go test -tags integration -run TestProcesses -v ./services/controller/cmd/skein-controller
//
// Three skein-controller processes with the default Raft and session
// timings on loopback; fake brokers (gossip + heartbeats over gRPC) in the
// test. It measures the failover times: broker kill -> new leaders in
// the metadata, and controller leader kill -9 -> a new leader known; then
// restarts everything from the same data directories.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	controllerv1 "skein/gen/skein/controller/v1"
	controllerv1grpc "skein/gen/skein/controller/v1/controllerv1grpc"
	"skein/libs/loopback"
	"skein/libs/membership"
	"skein/libs/metadata"
)

type proc struct {
	id               int
	grpc, http, raft string
	gossip           string
	cmd              *exec.Cmd
	log              *os.File
}

func TestProcesses(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "skein-controller")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	addrs := loopback.Addrs(t, 12)
	procs := make([]*proc, 3)
	var peers []string
	for i := range procs {
		a := addrs[4*i:]
		p := &proc{id: i + 1, grpc: a[0], http: a[1], raft: a[2], gossip: a[3]}
		procs[i] = p
		peers = append(peers, fmt.Sprintf("%d=%s=%s", p.id, p.raft, p.grpc))
	}
	start := func(p *proc) {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("c%d.log", p.id)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		p.log = f
		p.cmd = exec.Command(bin)
		p.cmd.Env = append(os.Environ(),
			fmt.Sprintf("SKEIN_NODE_ID=%d", p.id), "SKEIN_PEERS="+strings.Join(peers, ","),
			"SKEIN_GRPC_ADDR="+p.grpc, "SKEIN_HTTP_ADDR="+p.http, "SKEIN_RAFT_ADDR="+p.raft,
			"SKEIN_GOSSIP_ADDR="+p.gossip, "SKEIN_GOSSIP_SEEDS="+procs[0].gossip+","+procs[1].gossip,
			"SKEIN_DATA_DIR="+filepath.Join(dir, fmt.Sprint(p.id)), "SKEIN_CLUSTER_ID=proc-test")
		p.cmd.Stdout, p.cmd.Stderr = f, f
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	stop := func(p *proc, sig os.Signal) {
		if p.cmd == nil {
			return
		}
		p.cmd.Process.Signal(sig)
		done := make(chan error, 1)
		go func() { done <- p.cmd.Wait() }()
		select {
		case err := <-done:
			if sig == syscall.SIGTERM && err != nil {
				t.Errorf("controller %d exited with %v after SIGTERM", p.id, err)
			}
		case <-time.After(15 * time.Second):
			p.cmd.Process.Kill()
			t.Errorf("controller %d did not stop", p.id)
		}
		p.cmd = nil
		p.log.Close()
	}
	defer func() {
		for _, p := range procs {
			stop(p, syscall.SIGKILL)
		}
		if t.Failed() {
			for _, p := range procs {
				b, _ := os.ReadFile(p.log.Name())
				t.Logf("controller %d log:\n%s", p.id, tail(string(b), 3000))
			}
		}
	}()
	for _, p := range procs {
		start(p)
	}
	leaderOf := func(p *proc) int {
		c := &http.Client{Timeout: 200 * time.Millisecond}
		resp, err := c.Get("http://" + p.http + "/readyz")
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var id int
		if resp.StatusCode == 200 {
			fmt.Sscanf(string(b), "leader %d", &id)
		}
		return id
	}
	waitLeader := func(p *proc, not int, d time.Duration) (int, time.Duration) {
		t.Helper()
		begin := time.Now()
		for time.Since(begin) < d {
			if l := leaderOf(p); l != 0 && l != not {
				return l, time.Since(begin)
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("controller %d knows no leader other than %d after %v", p.id, not, d)
		return 0, 0
	}
	leader, _ := waitLeader(procs[0], 0, 15*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := func(p *proc) controllerv1grpc.ControllerServiceClient {
		conn, err := grpc.NewClient(p.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return controllerv1grpc.NewControllerServiceClient(conn)
	}
	follower := procs[leader%3]
	cl := client(follower)

	// Three fake brokers: gossip as storage nodes, heartbeat every 500 ms.
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	type fake struct {
		m    *membership.Node
		stop chan struct{}
	}
	brokers := map[int32]*fake{}
	for id := int32(1); id <= 3; id++ {
		inc := fmt.Sprint("proc-test-", id)
		reg, err := cl.RegisterBroker(ctx, &controllerv1.RegisterBrokerRequest{BrokerId: id, GrpcAddr: "127.0.0.1:1", IncarnationId: inc})
		if err != nil {
			t.Fatal(err)
		}
		m, err := membership.Start(membership.Config{BindAddr: "127.0.0.1:0", Seeds: []string{procs[0].gossip}, Logger: quiet,
			Meta: membership.Meta{Role: membership.RoleStorage, ID: id, Incarnation: inc}})
		if err != nil {
			t.Fatal(err)
		}
		f := &fake{m: m, stop: make(chan struct{})}
		brokers[id] = f
		go func(id int32, epoch int64) {
			tk := time.NewTicker(500 * time.Millisecond)
			defer tk.Stop()
			for {
				select {
				case <-f.stop:
					return
				case <-tk.C:
					hctx, hcancel := context.WithTimeout(ctx, time.Second)
					cl.BrokerHeartbeat(hctx, &controllerv1.BrokerHeartbeatRequest{BrokerId: id, BrokerEpoch: epoch})
					hcancel()
				}
			}
		}(id, reg.GetBrokerEpoch())
		defer func() {
			select {
			case <-f.stop:
			default:
				close(f.stop)
			}
			m.Kill()
		}()
	}
	// Once gossip shows every controller to every controller, the leader
	// places by the newest rule (shifted followers, checked at broker 1's
	// failure below).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		alive := 0
		for _, p := range procs {
			if d, err := client(p).DescribeCluster(ctx, &controllerv1.DescribeClusterRequest{}); err == nil {
				for _, c := range d.GetControllers() {
					if c.GetState() == "ALIVE" {
						alive++
					}
				}
			}
		}
		if alive == 9 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gossip shows %d of 9 controller states ALIVE", alive)
		}
	}
	if resp, err := cl.CreateTopics(ctx, &controllerv1.CreateTopicsRequest{Topics: []*controllerv1.CreatableTopic{{Name: "events", Partitions: 6, ReplicationFactor: 3}}}); err != nil || resp.GetTopics()[0].GetErrorCode() != 0 {
		t.Fatalf("create: %v %v", resp, err)
	}
	stream, err := cl.WatchMetadata(ctx, &controllerv1.WatchMetadataRequest{NodeId: 99})
	if err != nil {
		t.Fatal(err)
	}
	var img *metadata.Image
	next := func() {
		m, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if m.GetImage() != nil {
			img, err = metadata.FromProto(m.GetImage())
		} else if img != nil {
			err = img.Apply(m.GetDelta())
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for img == nil || img.PartitionCount("events") != 6 {
		next()
	}
	before := map[int32]int32{}
	for _, p := range img.Partitions("events") {
		if p.GetLeader() == 1 {
			before[p.GetPartition()] = p.GetLeaderEpoch()
		}
	}

	// Broker 1 crashes.
	killed := time.Now()
	close(brokers[1].stop)
	brokers[1].m.Kill()
	moved := func() bool {
		for p, e := range before {
			pr, _ := img.Partition("events", p)
			if pr.GetLeader() == 1 || pr.GetLeader() < 0 || pr.GetLeaderEpoch() <= e {
				return false
			}
		}
		return true
	}
	for !moved() {
		next()
	}
	took := time.Since(killed)
	t.Logf("FIGURE broker kill -> new leaders for its %d partitions in the watched metadata: %v", len(before), took)
	// Its two partitions' second replicas differ, so its leaderships went
	// to both other brokers, not both to the lowest id.
	took2 := map[int32]bool{}
	for p := range before {
		pr, _ := img.Partition("events", p)
		took2[pr.GetLeader()] = true
	}
	if len(before) != 2 || len(took2) != 2 {
		t.Errorf("broker 1 led %d partitions, and its leaderships went to %v: want two, to brokers 2 and 3", len(before), took2)
	}
	if took > 3*time.Second {
		t.Errorf("broker failover took %v, goal 3 s", took)
	}

	// The controller leader is killed.
	victim := procs[leader-1]
	survivor := procs[leader%3]
	killed = time.Now()
	stop(victim, syscall.SIGKILL)
	newLeader, took := waitLeader(survivor, leader, 15*time.Second)
	t.Logf("FIGURE controller leader kill -9 -> controller %d is leader (seen on %d's /readyz): %v", newLeader, survivor.id, took)
	sc := client(survivor)
	if resp, err := sc.CreateTopics(ctx, &controllerv1.CreateTopicsRequest{Topics: []*controllerv1.CreatableTopic{{Name: "after", Partitions: 1, ReplicationFactor: 2}}}); err != nil || resp.GetTopics()[0].GetErrorCode() != 0 {
		t.Fatalf("create after failover: %v %v", resp, err)
	}
	t.Logf("FIGURE controller leader kill -9 -> first write committed: %v", time.Since(killed))

	// Everyone stops gracefully and comes back: nothing is lost.
	start(victim)
	for begin := time.Now(); healthcheck([]string{"--http-addr=" + victim.http, "--timeout=200ms"}, func(string) string { return "" }, io.Discard) != 0; {
		if time.Since(begin) > 15*time.Second {
			t.Fatal("the restarted controller is not healthy")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range procs {
		stop(p, syscall.SIGTERM)
	}
	for _, p := range procs {
		start(p)
	}
	waitLeader(procs[2], 0, 15*time.Second)
	rc := client(procs[2])
	rstream, err := rc.WatchMetadata(ctx, &controllerv1.WatchMetadataRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := rstream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	back, err := metadata.FromProto(first.GetImage())
	if err != nil {
		t.Fatal(err)
	}
	if back.PartitionCount("events") != 6 || back.PartitionCount("after") != 1 || len(back.Brokers()) != 3 || back.IsLive(1) || back.ClusterID() != "proc-test" {
		t.Fatalf("after restarting all three: %v", first.GetImage())
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
