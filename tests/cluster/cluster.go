package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"skein/libs/procenv"
)

// Proc is one Skein process.
type Proc struct {
	Role     string
	ID       int
	GRPCAddr string
	HTTPAddr string
	DataDir  string
	args     []string
	bin      string
	logPath  string
	cmd      *exec.Cmd
	done     chan struct{}
}

// Cluster is a set of processes started by a test and stopped by its cleanup.
type Cluster struct {
	t           testing.TB
	BinDir      string
	Dir         string
	Controllers []*Proc
	Storage     []*Proc
	GroupCoords []*Proc
	TxnCoords   []*Proc

	gossipSeed string
}

// Options size the cluster.
type Options struct {
	StorageNodes int
	// Extra flags for every storage node (e.g. --replica-lag-max=2s).
	StorageFlags []string
}

// BinDir finds the binaries: $SKEIN_BIN_DIR, else bin/ at the repository root.
func BinDir(t testing.TB) string {
	if d := os.Getenv("SKEIN_BIN_DIR"); d != "" {
		return d
	}
	wd, _ := os.Getwd()
	for d := wd; d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return filepath.Join(d, "bin")
		}
	}
	t.Fatalf("cannot find the repository root from %s", wd)
	return ""
}

var (
	portsMu   sync.Mutex
	handedOut = map[string]bool{}
)

// PickAddr answers a loopback address free now and never answered before in
// this process. Its port lies below the kernel's ephemeral range: a port the
// kernel hands to listen(":0") or to an outgoing connection could be taken
// again before the process the test starts binds it.
func PickAddr() (string, error) {
	lo, hi := 10000, 32768
	if raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(raw)); len(f) == 2 {
			if a, err := strconv.Atoi(f[0]); err == nil && a-lo >= 2000 {
				hi = a
			}
		}
	}
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(lo+rand.IntN(hi-lo)))
		if handedOut[addr] {
			continue
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		l.Close()
		handedOut[addr] = true
		return addr, nil
	}
	return "", errors.New("no free loopback port")
}

// FreeAddr is PickAddr for a test.
func FreeAddr(t testing.TB) string {
	addr, err := PickAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Start launches 3 controllers and the storage nodes and waits until every
// storage node is registered and ready.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.StorageNodes == 0 {
		opts.StorageNodes = 3
	}
	c := &Cluster{t: t, BinDir: BinDir(t), Dir: t.TempDir()}
	for _, b := range []string{"skein-controller", "skein-storage"} {
		if _, err := os.Stat(filepath.Join(c.BinDir, b)); err != nil {
			t.Fatalf("%s not built (run `make build`): %v", b, err)
		}
	}
	t.Cleanup(c.Stop)

	type ctl struct{ grpc, http, raft, gossip string }
	ctls := make([]ctl, 3)
	var peers, grpcs []string
	for i := range ctls {
		ctls[i] = ctl{FreeAddr(t), FreeAddr(t), FreeAddr(t), FreeAddr(t)}
		peers = append(peers, fmt.Sprintf("%d=%s=%s", i+1, ctls[i].raft, ctls[i].grpc))
		grpcs = append(grpcs, ctls[i].grpc)
	}
	seed := ctls[0].gossip
	c.gossipSeed = seed
	for i, a := range ctls {
		p := &Proc{Role: "controller", ID: i + 1, GRPCAddr: a.grpc, HTTPAddr: a.http, DataDir: filepath.Join(c.Dir, fmt.Sprintf("controller-%d", i+1)), bin: "skein-controller"}
		p.args = []string{
			"--node-id", fmt.Sprint(i + 1), "--grpc-addr", a.grpc, "--http-addr", a.http, "--raft-addr", a.raft,
			"--gossip-addr", a.gossip, "--gossip-seeds", seed, "--peers", strings.Join(peers, ","), "--data-dir", p.DataDir, "--log-level", "info",
		}
		c.Controllers = append(c.Controllers, p)
		c.start(p)
	}
	for i := 0; i < opts.StorageNodes; i++ {
		p := &Proc{Role: "storage", ID: i + 1, GRPCAddr: FreeAddr(t), HTTPAddr: FreeAddr(t), DataDir: filepath.Join(c.Dir, fmt.Sprintf("storage-%d", i+1)), bin: "skein-storage"}
		p.args = append([]string{
			"--node-id", fmt.Sprint(i + 1), "--grpc-addr", p.GRPCAddr, "--http-addr", p.HTTPAddr, "--gossip-addr", FreeAddr(t),
			"--gossip-seeds", seed, "--controllers", strings.Join(grpcs, ","), "--data-dir", p.DataDir, "--log-level", "info",
		}, opts.StorageFlags...)
		c.Storage = append(c.Storage, p)
		c.start(p)
	}
	for _, p := range c.Storage {
		c.WaitReady(p, 60*time.Second)
	}
	return c
}

// StartGroupCoordinators launches n group coordinators (ids from 1, extra
// flags for each) and waits until the controllers list every one of them.
func (c *Cluster) StartGroupCoordinators(n int, flags ...string) {
	c.t.Helper()
	var started []*Proc
	for i := 0; i < n; i++ {
		started = append(started, c.startGroupCoordinator(flags))
	}
	for _, p := range started {
		c.WaitReady(p, 60*time.Second)
	}
}

// StartGroupCoordinator launches one more group coordinator with extra
// flags (a flag given again overrides the default, --controllers say) and
// waits until the controllers list it.
func (c *Cluster) StartGroupCoordinator(flags ...string) *Proc {
	c.t.Helper()
	p := c.startGroupCoordinator(flags)
	c.WaitReady(p, 60*time.Second)
	return p
}

// StartTxnCoordinators launches n transaction coordinators (ids from 1,
// extra flags for each) and waits until the controllers list every one.
func (c *Cluster) StartTxnCoordinators(n int, flags ...string) {
	c.t.Helper()
	var started []*Proc
	for i := 0; i < n; i++ {
		if _, err := os.Stat(filepath.Join(c.BinDir, "skein-txncoord")); err != nil {
			c.t.Fatalf("skein-txncoord not built (run `make build`): %v", err)
		}
		id := len(c.TxnCoords) + 1
		p := &Proc{Role: "txncoord", ID: id, GRPCAddr: FreeAddr(c.t), HTTPAddr: FreeAddr(c.t), bin: "skein-txncoord"}
		p.args = append([]string{
			"--node-id", fmt.Sprint(id), "--grpc-addr", p.GRPCAddr, "--http-addr", p.HTTPAddr, "--gossip-addr", FreeAddr(c.t),
			"--gossip-seeds", c.gossipSeed, "--controllers", strings.Join(c.ControllerAddrs(), ","), "--log-level", "info",
		}, flags...)
		c.TxnCoords = append(c.TxnCoords, p)
		c.start(p)
		started = append(started, p)
	}
	for _, p := range started {
		c.WaitReady(p, 60*time.Second)
	}
}

func (c *Cluster) startGroupCoordinator(flags []string) *Proc {
	c.t.Helper()
	if _, err := os.Stat(filepath.Join(c.BinDir, "skein-groupcoord")); err != nil {
		c.t.Fatalf("skein-groupcoord not built (run `make build`): %v", err)
	}
	id := len(c.GroupCoords) + 1
	p := &Proc{Role: "groupcoord", ID: id, GRPCAddr: FreeAddr(c.t), HTTPAddr: FreeAddr(c.t), bin: "skein-groupcoord"}
	p.args = append([]string{
		"--node-id", fmt.Sprint(id), "--grpc-addr", p.GRPCAddr, "--http-addr", p.HTTPAddr, "--gossip-addr", FreeAddr(c.t),
		"--gossip-seeds", c.gossipSeed, "--controllers", strings.Join(c.ControllerAddrs(), ","), "--log-level", "info",
	}, flags...)
	c.GroupCoords = append(c.GroupCoords, p)
	c.start(p)
	return p
}

// ControllerAddrs lists the controllers' gRPC addresses.
func (c *Cluster) ControllerAddrs() []string {
	var out []string
	for _, p := range c.Controllers {
		out = append(out, p.GRPCAddr)
	}
	return out
}

func (c *Cluster) start(p *Proc) {
	c.t.Helper()
	p.logPath = filepath.Join(c.Dir, fmt.Sprintf("%s-%d.log", p.Role, p.ID))
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	p.cmd = exec.Command(filepath.Join(c.BinDir, p.bin), p.args...)
	// As skein dev starts its processes (its --steady-sysmon), so that these
	// tests run them as users do.
	p.cmd.Env = procenv.Env(os.Environ(), 0, true)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	p.done = make(chan struct{})
	go func() {
		p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
}

// WaitReady polls the process's /readyz.
func (c *Cluster) WaitReady(p *Proc, d time.Duration) {
	c.t.Helper()
	client := http.Client{Timeout: time.Second}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		// A process that died does not count as ready even if something
		// else answers on its address.
		select {
		case <-p.done:
			c.t.Fatalf("%s-%d exited before ready; log:\n%s", p.Role, p.ID, c.Tail(p, 40))
		default:
		}
		resp, err := client.Get("http://" + p.HTTPAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-p.done:
			c.t.Fatalf("%s-%d exited before ready; log:\n%s", p.Role, p.ID, c.Tail(p, 40))
		case <-time.After(100 * time.Millisecond):
		}
	}
	c.t.Fatalf("%s-%d not ready after %v; log:\n%s", p.Role, p.ID, d, c.Tail(p, 40))
}

// Kill sends SIGKILL and waits for the process to die.
func (c *Cluster) Kill(p *Proc) {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Terminate sends SIGTERM and waits (up to d) for a graceful exit.
func (c *Cluster) Terminate(p *Proc, d time.Duration) {
	c.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(d):
		c.t.Errorf("%s-%d did not exit within %v of SIGTERM; log:\n%s", p.Role, p.ID, d, c.Tail(p, 30))
		c.Kill(p)
	}
}

// Pause stops the process (SIGSTOP); Resume continues it.
func (c *Cluster) Pause(p *Proc)  { _ = p.cmd.Process.Signal(syscall.SIGSTOP) }
func (c *Cluster) Resume(p *Proc) { _ = p.cmd.Process.Signal(syscall.SIGCONT) }

// Restart starts a stopped process again on the same addresses and data.
func (c *Cluster) Restart(p *Proc) {
	c.t.Helper()
	select {
	case <-p.done:
	default:
		c.t.Fatalf("%s-%d is still running", p.Role, p.ID)
	}
	c.start(p)
}

// RestartAt starts a stopped process again on the same data but at new
// gRPC, HTTP and gossip addresses (a container rescheduled elsewhere).
func (c *Cluster) RestartAt(p *Proc) {
	c.t.Helper()
	p.GRPCAddr, p.HTTPAddr = FreeAddr(c.t), FreeAddr(c.t)
	for i := 0; i+1 < len(p.args); i++ {
		switch p.args[i] {
		case "--grpc-addr":
			p.args[i+1] = p.GRPCAddr
		case "--http-addr":
			p.args[i+1] = p.HTTPAddr
		case "--gossip-addr":
			p.args[i+1] = FreeAddr(c.t)
		}
	}
	c.Restart(p)
}

// Stop terminates every process, group and transaction coordinators first, then storage
// nodes before the controllers they report to: SIGTERM, then SIGKILL after
// a grace period.
func (c *Cluster) Stop() {
	all := append(append(append(append([]*Proc{}, c.GroupCoords...), c.TxnCoords...), c.Storage...), c.Controllers...)
	for _, group := range [][]*Proc{append(append([]*Proc{}, c.GroupCoords...), c.TxnCoords...), c.Storage, c.Controllers} {
		for _, p := range group {
			if p.cmd != nil && p.cmd.Process != nil {
				_ = p.cmd.Process.Signal(syscall.SIGCONT)
				_ = p.cmd.Process.Signal(syscall.SIGTERM)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		for _, p := range group {
			if p.done == nil {
				continue
			}
			select {
			case <-p.done:
			case <-ctx.Done():
				_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
				<-p.done
			}
		}
		cancel()
	}
	if c.t.Failed() {
		for _, p := range all {
			c.t.Logf("---- %s-%d log tail ----\n%s", p.Role, p.ID, c.Tail(p, 30))
		}
	}
}

// Tail returns the last n lines of a process's log.
func (c *Cluster) Tail(p *Proc, n int) string {
	b, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// StorageByID returns storage node id.
func (c *Cluster) StorageByID(id int32) *Proc {
	for _, p := range c.Storage {
		if int32(p.ID) == id {
			return p
		}
	}
	c.t.Fatalf("no storage node %d", id)
	return nil
}
