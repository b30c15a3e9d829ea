package devcluster

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"skein/libs/procenv"
	"skein/libs/tlsconf"
)

// The test binary doubles as the fake skein-controller, skein-storage,
// skein-groupcoord, skein-txncoord and skein-gateway: Start finds them as symlinks in a temporary bin directory.
func TestMain(m *testing.M) {
	if role, ok := fakeRoles[filepath.Base(os.Args[0])]; ok {
		os.Exit(fakeMain(role, os.Args[1:]))
	}
	if dir := os.Getenv("FAKE_DEV_DATA"); dir != "" {
		// A `skein dev` of its own, for a test to kill.
		c, err := Start(context.Background(), Options{DataDir: dir, BinDir: os.Getenv("FAKE_DEV_BIN"), StorageNodes: 1, StartTimeout: 20 * time.Second})
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("STARTED", len(c.Processes()))
		select {}
	}
	os.Exit(m.Run())
}

var fakeRoles = map[string]string{"skein-controller": RoleController, "skein-storage": RoleStorage, "skein-groupcoord": RoleGroupCoord,
	"skein-txncoord": RoleTxnCoord, "skein-gateway": RoleGateway}

// fakeMain accepts exactly the flags of the real binary, listens on its
// addresses, answers the gateway's readiness and cluster calls, and exits
// on SIGTERM (unless told to ignore it).
func fakeMain(role string, args []string) int {
	fs := flag.NewFlagSet(role, flag.ContinueOnError)
	for _, name := range []string{"grpc-addr", "http-addr", "log-level"} {
		fs.String(name, "", "")
	}
	fs.Int("node-id", 0, "")
	switch role {
	case RoleController:
		for _, name := range []string{"raft-addr", "gossip-addr", "gossip-seeds", "peers", "data-dir"} {
			fs.String(name, "", "")
		}
	case RoleStorage:
		for _, name := range []string{"gossip-addr", "gossip-seeds", "controllers", "data-dir", "rack"} {
			fs.String(name, "", "")
		}
	case RoleGroupCoord, RoleTxnCoord:
		for _, name := range []string{"gossip-addr", "gossip-seeds", "controllers"} {
			fs.String(name, "", "")
		}
	case RoleGateway:
		fs.String("controllers", "", "")
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fmt.Println("ARGS", strings.Join(args, " "))
	fmt.Printf("GOMAXPROCS %d\n", runtime.GOMAXPROCS(0))
	fmt.Printf("GODEBUG %s\n", os.Getenv("GODEBUG"))
	if os.Getenv("FAKE_CRASH") == role {
		fmt.Println("crashing on purpose")
		return 3
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	if os.Getenv("FAKE_IGNORE_TERM") == role {
		signal.Ignore(syscall.SIGTERM)
	}
	grpcLis, err := net.Listen("tcp", fs.Lookup("grpc-addr").Value.String())
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer grpcLis.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {})
	mux.HandleFunc("/v1/cluster", func(w http.ResponseWriter, _ *http.Request) {
		n, _ := strconv.Atoi(os.Getenv("FAKE_BROKERS"))
		var brokers []map[string]any
		for i := 1; i <= n; i++ {
			brokers = append(brokers, map[string]any{"id": i, "state": "ALIVE"})
		}
		json.NewEncoder(w).Encode(map[string]any{"brokers": brokers})
	})
	httpLis, err := net.Listen("tcp", fs.Lookup("http-addr").Value.String())
	if err != nil {
		fmt.Println(err)
		return 1
	}
	go http.Serve(httpLis, mux)
	fmt.Println(fakeUp)
	<-term
	fmt.Println("stopping on SIGTERM")
	return 0
}

// fakeUp is the line a fake prints once it listens and handles SIGTERM.
const fakeUp = "FAKE UP"

// waitUp waits until every process has printed fakeUp. Start waits only for
// the processes a real cluster's readiness depends on, and the fake
// controllers are not among them: on a busy machine one may not have run
// yet when the others answer.
func waitUp(t *testing.T, procs []*Process) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, p := range procs {
		for {
			log, _ := os.ReadFile(p.Log)
			if strings.Contains(string(log), fakeUp) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not come up:\n%s", p.name(), log)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func fakeBinDir(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name := range fakeRoles {
		if err := os.Symlink(self, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func readFile(t *testing.T, dir string) File {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f File
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func opts(t *testing.T, dataDir, binDir string) Options {
	return Options{DataDir: dataDir, BinDir: binDir, StorageNodes: 2, StartTimeout: 20 * time.Second, StopGrace: 2 * time.Second}
}

// Start, cluster.json, stop on SIGTERM, and a restart on the same data
// directory that reuses every recorded port.
func TestStartStopOnSignalAndRestart(t *testing.T) {
	t.Setenv("FAKE_BROKERS", "2")
	bin, data := fakeBinDir(t), t.TempDir()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	started := make(chan *Cluster, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, opts(t, data, bin), func(c *Cluster) { started <- c }) }()
	var c *Cluster
	select {
	case c = <-started:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	waitUp(t, c.Processes())

	f := readFile(t, data)
	if len(f.Processes) != 10 {
		t.Fatalf("cluster.json lists %d processes, want 3 controllers, 2 storage nodes, 2 group and 2 transaction coordinators, 1 gateway", len(f.Processes))
	}
	counts := map[string]int{}
	addrs := map[string]bool{}
	for _, p := range f.Processes {
		counts[p.Role]++
		if p.PID <= 0 || !alive(p.PID) {
			t.Errorf("%s: pid %d not running", p.name(), p.PID)
		}
		for _, a := range []string{p.GRPCAddr, p.HTTPAddr, p.RaftAddr, p.GossipAddr} {
			if a == "" {
				continue
			}
			if !strings.HasPrefix(a, "127.0.0.1:") || addrs[a] {
				t.Errorf("%s: address %q not a fresh loopback address", p.name(), a)
			}
			addrs[a] = true
		}
		if (p.Role == RoleGateway || p.Role == RoleGroupCoord || p.Role == RoleTxnCoord) != (p.DataDir == "") {
			t.Errorf("%s: data_dir %q", p.name(), p.DataDir)
		}
		if p.Role == RoleController && (p.RaftAddr == "" || p.GossipAddr == "") {
			t.Errorf("%s lacks raft or gossip address", p.name())
		}
	}
	if counts[RoleController] != 3 || counts[RoleStorage] != 2 || counts[RoleGroupCoord] != 2 || counts[RoleTxnCoord] != 2 || counts[RoleGateway] != 1 {
		t.Errorf("roles %v", counts)
	}
	// The flags each process got.
	ctrl1, st2 := c.find(RoleController, 1), c.find(RoleStorage, 2)
	log, _ := os.ReadFile(ctrl1.Log)
	wantPeers := fmt.Sprintf("--peers 1=%s=%s,2=%s=%s,3=%s=%s", ctrl1.RaftAddr, ctrl1.GRPCAddr,
		c.find(RoleController, 2).RaftAddr, c.find(RoleController, 2).GRPCAddr, c.find(RoleController, 3).RaftAddr, c.find(RoleController, 3).GRPCAddr)
	if !strings.Contains(string(log), wantPeers) {
		t.Errorf("controller-1 args lack %q:\n%s", wantPeers, log)
	}
	log, _ = os.ReadFile(st2.Log)
	if !strings.Contains(string(log), "--node-id 2 ") || !strings.Contains(string(log), "--controllers "+ctrl1.GRPCAddr+",") || !strings.Contains(string(log), "--data-dir "+filepath.Join(data, "storage-2")) {
		t.Errorf("storage-2 args:\n%s", log)
	}
	gc2 := c.find(RoleGroupCoord, 2)
	log, _ = os.ReadFile(gc2.Log)
	if !strings.Contains(string(log), "--node-id 2 ") || !strings.Contains(string(log), "--gossip-addr "+gc2.GossipAddr) ||
		!strings.Contains(string(log), "--gossip-seeds "+ctrl1.GossipAddr+",") || !strings.Contains(string(log), "--controllers "+ctrl1.GRPCAddr+",") {
		t.Errorf("groupcoord-2 args:\n%s", log)
	}

	// SIGTERM to this process (as Ctrl-C or a supervisor would) stops all.
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not stop on SIGTERM")
	}
	for _, p := range f.Processes {
		if alive(p.PID) {
			t.Errorf("%s (pid %d) still running after stop", p.name(), p.PID)
		}
		if log, _ := os.ReadFile(p.Log); !strings.Contains(string(log), "stopping on SIGTERM") {
			t.Errorf("%s was not stopped with SIGTERM:\n%s", p.name(), log)
		}
	}

	// Restart on the same directory: the same ports, new pids.
	c2, err := Start(context.Background(), opts(t, data, bin))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Stop()
	f2 := readFile(t, data)
	for i, p := range f2.Processes {
		q := f.Processes[i]
		if p.name() != q.name() || p.GRPCAddr != q.GRPCAddr || p.HTTPAddr != q.HTTPAddr || p.RaftAddr != q.RaftAddr || p.GossipAddr != q.GossipAddr || p.DataDir != q.DataDir {
			t.Errorf("restart moved %s: %+v, was %+v", p.name(), p, q)
		}
		if p.PID == q.PID {
			t.Errorf("%s kept pid %d", p.name(), p.PID)
		}
	}
	// While it runs, a second cluster on the same directory is refused.
	if _, err := Start(context.Background(), opts(t, data, bin)); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Errorf("a second start on a live data directory: %v", err)
	}
}

// A process that ignores SIGTERM is killed after the grace period.
func TestStopKillsAfterGrace(t *testing.T) {
	t.Setenv("FAKE_BROKERS", "1")
	t.Setenv("FAKE_IGNORE_TERM", RoleGateway)
	o := opts(t, t.TempDir(), fakeBinDir(t))
	o.StorageNodes, o.StopGrace = 1, 300*time.Millisecond
	c, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	gw := c.Gateway()
	start := time.Now()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if alive(gw.PID) {
		t.Fatal("the gateway survived Stop")
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("killed after %v, before the grace period", d)
	}
	if !strings.Contains(gw.err.Error(), "killed") {
		t.Errorf("gateway exit: %v, want killed", gw.err)
	}
}

// A process that dies while the cluster starts fails Start with its log,
// and nothing is left running.
func TestStartFailsWhenAProcessDies(t *testing.T) {
	// The fake gateway counts no storage node alive, as a real one would
	// not count the crashed node: with one counted, Start could see the
	// cluster ready before the crash, on a loaded machine.
	t.Setenv("FAKE_BROKERS", "0")
	t.Setenv("FAKE_CRASH", RoleStorage)
	data := t.TempDir()
	o := opts(t, data, fakeBinDir(t))
	o.StorageNodes = 1
	_, err := Start(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "storage-1 exited") || !strings.Contains(err.Error(), "crashing on purpose") {
		t.Fatalf("Start: %v", err)
	}
	for _, p := range readFile(t, data).Processes {
		if alive(p.PID) {
			t.Errorf("%s still running after a failed start", p.name())
		}
	}
}

func TestMissingBinaries(t *testing.T) {
	_, err := Start(context.Background(), Options{DataDir: t.TempDir(), BinDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("Start without binaries: %v", err)
	}
}

// Pinned gateway addresses (skein dev's 127.0.0.1:8080/9090) are used as
// given, win over the ones cluster.json recorded, and a taken one fails
// Start at once, naming the flag that moves it.
func TestPinnedGatewayAddresses(t *testing.T) {
	t.Setenv("FAKE_BROKERS", "1")
	bin, data := fakeBinDir(t), t.TempDir()
	free := func() string {
		var pp portPicker
		a, err := pp.fresh()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	o := opts(t, data, bin)
	o.StorageNodes = 1
	c, err := Start(context.Background(), o) // free ports, recorded
	if err != nil {
		t.Fatal(err)
	}
	c.Stop()

	o.GatewayHTTPAddr, o.GatewayGRPCAddr = free(), free()
	c, err = Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if gw := c.Gateway(); gw.HTTPAddr != o.GatewayHTTPAddr || gw.GRPCAddr != o.GatewayGRPCAddr {
		t.Errorf("gateway on http %s grpc %s, want the pinned %s and %s", gw.HTTPAddr, gw.GRPCAddr, o.GatewayHTTPAddr, o.GatewayGRPCAddr)
	}
	for _, p := range readFile(t, data).Processes {
		if p.Role == RoleGateway && (p.HTTPAddr != o.GatewayHTTPAddr || p.GRPCAddr != o.GatewayGRPCAddr) {
			t.Errorf("cluster.json records the gateway at %s / %s", p.HTTPAddr, p.GRPCAddr)
		}
	}

	// The running gateway holds its HTTP address: a second cluster pinned
	// to it is refused before anything starts.
	o2 := opts(t, t.TempDir(), bin)
	o2.StorageNodes, o2.GatewayHTTPAddr = 1, o.GatewayHTTPAddr
	if _, err := Start(context.Background(), o2); err == nil || !strings.Contains(err.Error(), "--gateway-http-addr") {
		t.Errorf("Start with a taken gateway address: %v", err)
	}
	if _, err := os.Stat(filepath.Join(o2.DataDir, "cluster.json")); err == nil {
		t.Error("a refused start wrote cluster.json")
	}
}

// A port the caller pinned for the gateway is never handed to another
// process of the plan, although the gateway takes it last: in a band of
// two ports with one pinned, every fresh pick is the other.
func TestFreshPortsAvoidPinnedOnes(t *testing.T) {
	base := freePair(t)
	pinned := net.JoinHostPort("127.0.0.1", strconv.Itoa(base))
	other := net.JoinHostPort("127.0.0.1", strconv.Itoa(base+1))
	for range 20 {
		pp := portPicker{reserved: map[string]bool{pinned: true}, band: func() (int, int) { return base, base + 2 }}
		got, err := pp.fresh()
		if err != nil {
			t.Fatal(err)
		}
		if got != other {
			t.Fatalf("fresh picked %s; %s is pinned", got, pinned)
		}
	}
}

// An address a process takes from the environment (the gateway's
// SKEIN_DEBUG_ADDR) is pinned too; other variables are not addresses.
func TestEnvironmentAddressesArePinned(t *testing.T) {
	got := envAddrs([]string{
		"SKEIN_DEBUG_ADDR=127.0.0.1:16060",
		"SKEIN_OTLP_ENDPOINT=127.0.0.1:4317",
		"SKEIN_LOG_ADDR=not an address",
		"OTHER_ADDR=127.0.0.1:9",
		"SKEIN_HTTP_ADDR=[::1]:8081",
	})
	want := map[string]bool{"127.0.0.1:16060": true, "[::1]:8081": true}
	if !maps.Equal(got, want) {
		t.Fatalf("envAddrs = %v, want %v", got, want)
	}
}

// freePair answers a port p such that p and p+1 are both free on loopback.
func freePair(t *testing.T) int {
	t.Helper()
	for range 100 {
		a, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := a.Addr().(*net.TCPAddr).Port
		b, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+1)))
		a.Close()
		if err == nil {
			b.Close()
			return p
		}
	}
	t.Fatal("no two adjacent free loopback ports")
	return 0
}

// The GOMAXPROCS each process runs with: the one asked for, over the
// environment's; without one, the environment's.
func TestGoMaxProcs(t *testing.T) {
	t.Setenv("FAKE_BROKERS", "1")
	t.Setenv("GOMAXPROCS", "3")
	bin := fakeBinDir(t)
	gomaxprocs := func(o Options) map[string]string {
		t.Helper()
		c, err := Start(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		waitUp(t, c.Processes())
		c.Stop()
		got := map[string]string{}
		for _, p := range c.Processes() {
			log, _ := os.ReadFile(p.Log)
			_, v, _ := strings.Cut(string(log), "GOMAXPROCS ")
			v, _, _ = strings.Cut(v, "\n")
			got[p.name()] = v
		}
		return got
	}
	for _, tc := range []struct {
		asked int
		want  string
	}{{asked: 2, want: "2"}, {asked: 0, want: "3"}} {
		o := opts(t, t.TempDir(), bin)
		o.StorageNodes, o.GoMaxProcs = 1, tc.asked
		got := gomaxprocs(o)
		if len(got) != 9 {
			t.Errorf("asked %d: %d processes, want 9", tc.asked, len(got))
		}
		for name, v := range got {
			if v != tc.want {
				t.Errorf("asked %d with GOMAXPROCS=3 in the environment: %s runs with %q, want %s", tc.asked, name, v, tc.want)
			}
		}
	}

	o := opts(t, t.TempDir(), bin)
	o.GoMaxProcs = -1
	if _, err := Start(context.Background(), o); err == nil || !strings.Contains(err.Error(), "GOMAXPROCS -1") {
		t.Errorf("Start with GOMAXPROCS -1: %v", err)
	}
}

func TestSharedGoMaxProcs(t *testing.T) {
	for _, tc := range []struct{ cpus, storage, want int }{
		{cpus: 2, storage: 3, want: 1}, // the test machine: 3 storage nodes and a gateway on 2 cores
		{cpus: 1, storage: 3, want: 1}, // never below one
		{cpus: 8, storage: 3, want: 2}, // 8 cores among 4 busy processes
		{cpus: 16, storage: 3, want: 4},
		{cpus: 16, storage: 1, want: 8}, // one storage node and the gateway
		{cpus: 4, storage: 0, want: 2},  // no storage nodes counts as one
	} {
		if got := SharedGoMaxProcs(tc.cpus, tc.storage); got != tc.want {
			t.Errorf("SharedGoMaxProcs(%d, %d) = %d, want %d", tc.cpus, tc.storage, got, tc.want)
		}
	}
}

// Every process starts with procenv.SteadySysmon in its GODEBUG when asked, and
// without it otherwise.
func TestSteadySysmonReachesEveryProcess(t *testing.T) {
	t.Setenv("FAKE_BROKERS", "1")
	t.Setenv("GODEBUG", "gctrace=0")
	bin := fakeBinDir(t)
	for _, steady := range []bool{true, false} {
		o := opts(t, t.TempDir(), bin)
		o.StorageNodes, o.SteadySysmon = 1, steady
		c, err := Start(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		waitUp(t, c.Processes())
		c.Stop()
		want := "gctrace=0"
		if steady {
			want += "," + procenv.SteadySysmon
		}
		for _, p := range c.Processes() {
			log, _ := os.ReadFile(p.Log)
			_, v, _ := strings.Cut(string(log), "GODEBUG ")
			v, _, _ = strings.Cut(v, "\n")
			if v != want {
				t.Errorf("steady %v: %s runs with GODEBUG %q, want %q", steady, p.name(), v, want)
			}
		}
	}
}

// cluster.json may hold a secure cluster's dev token: only its owner reads
// it, even over a file an older build left readable by all.
func TestClusterFileIsOwnerOnly(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, fileName+".tmp"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{opts: Options{DataDir: dir}, sec: &Security{DevToken: "skein-dev-x"}}
	if err := c.writeFile(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, fileName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("cluster.json has mode %v, want 0600", fi.Mode().Perm())
	}
}

// A data directory a secure run left its CA in is not started without
// --secure: nothing starts, and the error says how to go on.
func TestSecureDataDirNeedsSecure(t *testing.T) {
	t.Setenv("FAKE_BROKERS", "1")
	data := t.TempDir()
	if _, err := tlsconf.OpenCA(filepath.Join(data, "tls"), "test CA"); err != nil {
		t.Fatal(err)
	}
	o := opts(t, data, fakeBinDir(t))
	_, err := Start(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "start it with --secure") || !strings.Contains(err.Error(), filepath.Join(data, "tls")) {
		t.Fatalf("Start without Secure on a secure data dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(data, "cluster.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster.json after a refused start: %v", err)
	}
	if err := checkSecurity(t.TempDir(), false); err != nil {
		t.Errorf("a data dir never secured: %v", err)
	}
}

// A Ctrl-C while the cluster starts stops it as an interruption, not as a
// start that timed out, and leaves nothing running.
func TestInterruptedStart(t *testing.T) {
	t.Setenv("FAKE_BROKERS", "0") // never ready
	data := t.TempDir()
	o := opts(t, data, fakeBinDir(t))
	o.StorageNodes = 1
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(time.Second, cancel)
	_, err := Start(ctx, o)
	if !errors.Is(err, context.Canceled) || strings.Contains(fmt.Sprint(err), "not ready after") {
		t.Fatalf("Start interrupted: %v, want context.Canceled", err)
	}
	for _, p := range readFile(t, data).Processes {
		if alive(p.PID) {
			t.Errorf("%s still running after an interrupted start", p.name())
		}
	}
}

// The processes of a `skein dev` that is killed outright (SIGKILL: it
// cannot stop them) get SIGTERM from the kernel and stop.
func TestChildrenStopWhenSkeinDevIsKilled(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent's death signal is Linux's")
	}
	t.Setenv("FAKE_BROKERS", "1")
	data := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dev := exec.Command(self, "-test.run", "^$")
	dev.Env = append(os.Environ(), "FAKE_DEV_DATA="+data, "FAKE_DEV_BIN="+fakeBinDir(t))
	out, err := dev.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	line := make(chan string, 1)
	go func() {
		b := make([]byte, 256)
		n, _ := out.Read(b)
		line <- string(b[:n])
	}()
	select {
	case l := <-line:
		if !strings.Contains(l, "STARTED") {
			dev.Process.Kill()
			t.Fatalf("the dev process: %q", l)
		}
	case <-time.After(30 * time.Second):
		dev.Process.Kill()
		t.Fatal("the dev process did not start its cluster")
	}
	procs := readFile(t, data).Processes
	t.Cleanup(func() { // whatever the test found, nothing is left running
		for _, p := range procs {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	})
	waitUp(t, procs)
	if err := dev.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = dev.Wait()
	// They are no longer this test's children: whoever adopts them may
	// leave them zombies, which count as stopped.
	running := func(pid int) bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		_, rest, _ := strings.Cut(string(stat), ") ")
		return !strings.HasPrefix(rest, "Z")
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, p := range procs {
		for running(p.PID) {
			if time.Now().After(deadline) {
				t.Fatalf("%s (pid %d) still running after its skein dev was killed", p.name(), p.PID)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if log, _ := os.ReadFile(p.Log); !strings.Contains(string(log), "stopping on SIGTERM") {
			t.Errorf("%s was not stopped with SIGTERM:\n%s", p.name(), log)
		}
	}
}
