package verify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	controllerv1 "skein/gen/skein/controller/v1"
	controllerv1grpc "skein/gen/skein/controller/v1/controllerv1grpc"
	"skein/tests/e2e"
)

// cluster is the `skein dev` cluster of one run, with the processes the
// runner restarted itself (skein dev does not restart what dies).
type cluster struct {
	ctx context.Context
	dev *e2e.Dev
	hc  *http.Client

	mu    sync.Mutex
	nodes map[string]*node // by role-id
}

// node is one process as the runner knows it: its current pid, and what it
// takes to start it again as skein dev started it.
type node struct {
	role    string
	id      int
	pid     int
	args    []string // its command line, binary first
	logPath string
	cmd     *exec.Cmd // set once the runner restarted it
	exited  chan struct{}
	down    bool
	stopped bool // SIGSTOPped
}

func (n *node) name() string { return fmt.Sprintf("%s-%d", n.role, n.id) }

// node answers the process role-id, reading its command line the first
// time.
func (c *cluster) node(role string, id int) (*node, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := fmt.Sprintf("%s-%d", role, id)
	if n := c.nodes[key]; n != nil {
		return n, nil
	}
	ps, err := c.dev.Processes()
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		if p.Role == role && p.ID == id {
			raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
			n := &node{role: role, id: id, pid: p.PID, logPath: p.Log,
				args: strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")}
			c.nodes[key] = n
			return n, nil
		}
	}
	return nil, fmt.Errorf("no %s in cluster.json", key)
}

// kill SIGKILLs n and waits until it is gone.
func (c *cluster) kill(n *node) error {
	if err := syscall.Kill(n.pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("SIGKILL %s (pid %d): %w", n.name(), n.pid, err)
	}
	n.down = true
	if n.cmd != nil {
		select {
		case <-n.exited:
			return nil
		case <-time.After(10 * time.Second):
			return fmt.Errorf("%s (pid %d) still running 10 s after SIGKILL", n.name(), n.pid)
		}
	}
	// skein dev reaps its children; a zombie has closed its files and
	// sockets already.
	return waitFor(c.ctx, 10*time.Second, fmt.Sprintf("%s (pid %d) gone", n.name(), n.pid), func() error {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.pid))
		if err != nil {
			return nil
		}
		if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return nil
		}
		return errors.New("still running")
	})
}

// restart starts a killed node again with its command line, data directory
// and addresses, appending to its log file.
func (c *cluster) restart(n *node) error {
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "---- skein-verify: restarting %s ----\n", n.name())
	cmd := exec.Command(n.args[0], n.args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("restarting %s: %w", n.name(), err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	n.cmd, n.exited, n.pid, n.down = cmd, exited, cmd.Process.Pid, false
	return nil
}

// signal sends sig (SIGSTOP or SIGCONT) to n.
func (c *cluster) signal(n *node, sig syscall.Signal) error {
	if err := syscall.Kill(n.pid, sig); err != nil {
		return fmt.Errorf("%v to %s (pid %d): %w", sig, n.name(), n.pid, err)
	}
	n.stopped = sig == syscall.SIGSTOP
	return nil
}

// healAll resumes every paused node and restarts every killed one.
func (c *cluster) healAll() error {
	c.mu.Lock()
	var all []*node
	for _, n := range c.nodes {
		all = append(all, n)
	}
	c.mu.Unlock()
	var errList []error
	for _, n := range all {
		if n.stopped {
			errList = append(errList, c.signal(n, syscall.SIGCONT))
		}
		if n.down {
			errList = append(errList, c.restart(n))
		}
	}
	return errors.Join(errList...)
}

// exitedUnasked answers the restarted nodes that exited without being
// killed.
func (c *cluster) exitedUnasked() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, n := range c.nodes {
		if n.cmd == nil || n.down {
			continue
		}
		select {
		case <-n.exited:
			out = append(out, n.name())
		default:
		}
	}
	return out
}

// stop resumes anything paused, stops the processes the runner restarted
// and then the cluster.
func (c *cluster) stop() error {
	c.mu.Lock()
	var mine []*node
	for _, n := range c.nodes {
		_ = syscall.Kill(n.pid, syscall.SIGCONT)
		if n.cmd != nil && !n.down {
			mine = append(mine, n)
		}
	}
	c.mu.Unlock()
	for _, n := range mine {
		_ = n.cmd.Process.Kill()
		<-n.exited
	}
	if ps, err := c.dev.Processes(); err == nil {
		for _, p := range ps {
			_ = syscall.Kill(p.PID, syscall.SIGCONT)
		}
	}
	err := c.dev.Stop(60 * time.Second)
	// skein dev reports the processes the runner killed as not stopped
	// cleanly; only a process that outlived it matters here.
	if err != nil && !strings.Contains(err.Error(), "outlived") {
		return nil
	}
	return err
}

// do sends a REST call to the gateway, bounded by d, and decodes a 2xx
// answer into out; any other answer is an *e2e.APIError.
func (c *cluster) do(d time.Duration, method, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(c.ctx, d)
	defer cancel()
	return (&e2e.REST{Base: c.dev.BaseURL, HC: c.hc}).Call(ctx, method, path, body, out)
}

type partitionDesc struct {
	Partition int32     `json:"partition"`
	Leader    int32     `json:"leader"`
	Replicas  []int32   `json:"replicas"`
	ISR       []int32   `json:"isr"`
	HW        e2e.Int64 `json:"high_watermark"`
}

func (c *cluster) describe(topic string) ([]partitionDesc, error) {
	var d struct {
		Partitions []partitionDesc `json:"partitions"`
	}
	if err := c.do(10*time.Second, "GET", "/v1/topics/"+topic, nil, &d); err != nil {
		return nil, err
	}
	return d.Partitions, nil
}

// raftLeader answers the leading controller as GET /v1/cluster says.
func (c *cluster) raftLeader() (int, error) {
	var d struct {
		Controllers []struct {
			ID     int  `json:"id"`
			Leader bool `json:"leader"`
		} `json:"controllers"`
	}
	if err := c.do(5*time.Second, "GET", "/v1/cluster", nil, &d); err != nil {
		return -1, err
	}
	for _, ct := range d.Controllers {
		if ct.Leader {
			return ct.ID, nil
		}
	}
	return -1, fmt.Errorf("no Raft leader in %+v", d.Controllers)
}

// brokerState answers a storage node's state in GET /v1/cluster (ALIVE,
// FENCED), or what went wrong asking.
func (c *cluster) brokerState(id int32) string {
	var d struct {
		Brokers []struct {
			ID    int32  `json:"id"`
			State string `json:"state"`
		} `json:"brokers"`
	}
	if err := c.do(5*time.Second, "GET", "/v1/cluster", nil, &d); err != nil {
		return err.Error()
	}
	for _, b := range d.Brokers {
		if b.ID == id {
			return b.State
		}
	}
	return "absent"
}

// coordinator asks the controllers which coordinator node owns key.
func (c *cluster) coordinator(kind controllerv1.CoordinatorKind, key string) (int, error) {
	ps, err := c.dev.Processes()
	if err != nil {
		return -1, err
	}
	var last error = errors.New("no controller answered")
	for _, p := range ps {
		if p.Role != "controller" {
			continue
		}
		if n, err := c.node("controller", p.ID); err == nil && (n.down || n.stopped) {
			continue
		}
		id, err := func() (int, error) {
			cc, err := grpc.NewClient(p.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				return -1, err
			}
			defer cc.Close()
			ctx, cancel := context.WithTimeout(c.ctx, 3*time.Second)
			defer cancel()
			resp, err := controllerv1grpc.NewControllerServiceClient(cc).FindCoordinator(ctx, &controllerv1.FindCoordinatorRequest{Kind: kind, Key: key})
			if err != nil {
				return -1, err
			}
			return int(resp.GetNodeId()), nil
		}()
		if err == nil {
			return id, nil
		}
		if err != nil {
			last = err
		}
	}
	return -1, last
}

// waitFor retries f every 200 ms until it answers nil or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v: %w", what, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
