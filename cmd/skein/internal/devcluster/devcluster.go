package devcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"skein/libs/procenv"
)

// Roles and binaries.
const (
	RoleController = "controller"
	RoleStorage    = "storage"
	RoleGroupCoord = "groupcoord"
	RoleTxnCoord   = "txncoord"
	RoleGateway    = "gateway"

	// Controllers is the size of the metadata quorum.
	Controllers = 3

	fileName = "cluster.json"
)

var binaries = map[string]string{
	RoleController: "skein-controller",
	RoleStorage:    "skein-storage",
	RoleGroupCoord: "skein-groupcoord",
	RoleTxnCoord:   "skein-txncoord",
	RoleGateway:    "skein-gateway",
}

// Options configure Start.
type Options struct {
	// DataDir holds cluster.json, logs/ and one data directory per process.
	DataDir string
	// StorageNodes is the number of storage nodes (default 3).
	StorageNodes int
	// GroupCoordinators is the number of group coordinators (default 2).
	GroupCoordinators int
	// TxnCoordinators is the number of transaction coordinators (default 2).
	TxnCoordinators int
	// BinDir holds skein-controller, skein-storage, skein-groupcoord,
	// skein-txncoord and skein-gateway.
	BinDir string
	// StartTimeout bounds the wait for readiness (default 2 minutes).
	StartTimeout time.Duration
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL
	// (default 15 s).
	StopGrace time.Duration
	// LogLevel is passed to every process (default info).
	LogLevel string
	// Progress receives a line per step; nil discards them.
	Progress io.Writer
	// GatewayGRPCAddr and GatewayHTTPAddr pin the gateway's addresses
	// (skein dev pins the gateway's defaults, 127.0.0.1:9090 and
	// 127.0.0.1:8080, so the README's examples work as printed). Empty picks
	// a free port, or reuses the one in cluster.json. The gateway keeps no
	// state, so a restart may move it.
	GatewayGRPCAddr, GatewayHTTPAddr string
	// GatewayArgs are added to the gateway's command line (skein dev passes
	// --dev-cluster-file, and --console-demos when asked).
	GatewayArgs []string
	// Secure runs the cluster with mutual TLS on every hop and encrypted
	// gossip: a CA, a certificate per process, a client certificate and a
	// gossip key are created in <DataDir>/tls on first use (see Security).
	Secure bool
	// GoMaxProcs, when positive, is the GOMAXPROCS every process runs with
	// (see SharedGoMaxProcs); 0 leaves each process its own default, or
	// what the environment says.
	GoMaxProcs int
	// SteadySysmon starts every process with procenv.SteadySysmon in its GODEBUG
	// (unless the environment's GODEBUG sets schedtrace already).
	SteadySysmon bool
}

// SharedGoMaxProcs is the GOMAXPROCS that suits each process of a cluster
// whose storage nodes and gateway share cpus CPUs: the CPUs divided among
// those busy processes, at least one. A Go process whose GOMAXPROCS is more
// than the CPU it actually gets spends that CPU waking idle threads to look
// for work that another process's thread is already running; on a small
// machine running a whole cluster this costs more than the parallelism
// buys. The controllers and coordinators, light next to the data path, get
// the same.
func SharedGoMaxProcs(cpus, storageNodes int) int {
	return max(1, cpus/(max(storageNodes, 1)+1))
}

// Process is one supervised process, as cluster.json records it.
type Process struct {
	Role       string `json:"role"`
	ID         int    `json:"id"`
	PID        int    `json:"pid"`
	GRPCAddr   string `json:"grpc_addr"`
	HTTPAddr   string `json:"http_addr"`
	DataDir    string `json:"data_dir"`
	RaftAddr   string `json:"raft_addr,omitempty"`
	GossipAddr string `json:"gossip_addr,omitempty"`
	Log        string `json:"log"`

	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has exited
	err    error         // its exit status, set before exited closes
}

func (p *Process) name() string { return fmt.Sprintf("%s-%d", p.Role, p.ID) }

// File is cluster.json.
type File struct {
	Processes []*Process `json:"processes"`
	// TLS, in a secure cluster: the CA and the client certificate that
	// clients (the CLI, tests) use.
	TLS *Security `json:"tls,omitempty"`
}

// Cluster is a running set of processes.
type Cluster struct {
	opts  Options
	sec   *Security // nil unless Secure
	hc    *http.Client
	procs []*Process
	exits chan *Process // each process once, when it exits

	stopOnce sync.Once
	stopErr  error
}

// Gateway is the gateway process.
func (c *Cluster) Gateway() *Process { return c.find(RoleGateway, 1) }

// Processes lists every process in start order.
func (c *Cluster) Processes() []*Process { return slices.Clone(c.procs) }

// Exits delivers each process that exits, once.
func (c *Cluster) Exits() <-chan *Process { return c.exits }

func (c *Cluster) find(role string, id int) *Process {
	for _, p := range c.procs {
		if p.Role == role && p.ID == id {
			return p
		}
	}
	return nil
}

func (o *Options) defaults() error {
	if o.DataDir == "" {
		return errors.New("devcluster: no data directory")
	}
	if o.StorageNodes <= 0 {
		o.StorageNodes = 3
	}
	if o.GroupCoordinators <= 0 {
		o.GroupCoordinators = 2
	}
	if o.TxnCoordinators <= 0 {
		o.TxnCoordinators = 2
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 2 * time.Minute
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 15 * time.Second
	}
	if o.LogLevel == "" {
		o.LogLevel = "info"
	}
	if o.GoMaxProcs < 0 {
		return fmt.Errorf("devcluster: GOMAXPROCS %d is negative", o.GoMaxProcs)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	abs, err := filepath.Abs(o.DataDir)
	if err != nil {
		return err
	}
	o.DataDir = abs
	for _, bin := range binaries {
		if _, err := os.Stat(filepath.Join(o.BinDir, bin)); err != nil {
			return fmt.Errorf("devcluster: %s not found in %s (build with `make build`, or pass --bin-dir)", bin, o.BinDir)
		}
	}
	return nil
}

// plan lays out the processes: addresses from the previous cluster.json
// when it has them, fresh free ports otherwise.
func plan(o Options) ([]*Process, error) {
	prev := map[string]*Process{}
	if raw, err := os.ReadFile(filepath.Join(o.DataDir, fileName)); err == nil {
		var f File
		if err := json.Unmarshal(raw, &f); err != nil {
			return nil, fmt.Errorf("devcluster: %s: %w", fileName, err)
		}
		for _, p := range f.Processes {
			prev[p.name()] = p
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ports := portPicker{reserved: envAddrs(os.Environ())}
	ports.reserved[o.GatewayGRPCAddr] = true
	ports.reserved[o.GatewayHTTPAddr] = true
	addr := func(recorded string) (string, error) {
		if recorded != "" {
			if err := ports.reuse(recorded); err != nil {
				return "", fmt.Errorf("devcluster: %s recorded in %s: %w (is the cluster of this data directory still running?)", recorded, fileName, err)
			}
			return recorded, nil
		}
		return ports.fresh()
	}
	// pinned is an address the caller chose: it must be free now.
	pinned := func(want, what string) (string, error) {
		if err := ports.reuse(want); err != nil {
			return "", fmt.Errorf("devcluster: the gateway's %s address %s: %w (is another skein dev or gateway running? choose another with --gateway-%s-addr)", what, want, err, what)
		}
		return want, nil
	}
	var procs []*Process
	add := func(role string, id int, withData, raft, gossip bool) error {
		p := &Process{Role: role, ID: id}
		old := prev[p.name()]
		if old == nil {
			old = &Process{}
		}
		var err error
		switch {
		case role == RoleGateway && o.GatewayGRPCAddr != "":
			p.GRPCAddr, err = pinned(o.GatewayGRPCAddr, "grpc")
		default:
			p.GRPCAddr, err = addr(old.GRPCAddr)
		}
		if err != nil {
			return err
		}
		switch {
		case role == RoleGateway && o.GatewayHTTPAddr != "":
			p.HTTPAddr, err = pinned(o.GatewayHTTPAddr, "http")
		default:
			p.HTTPAddr, err = addr(old.HTTPAddr)
		}
		if err != nil {
			return err
		}
		if raft {
			if p.RaftAddr, err = addr(old.RaftAddr); err != nil {
				return err
			}
		}
		if gossip {
			if p.GossipAddr, err = addr(old.GossipAddr); err != nil {
				return err
			}
		}
		if withData {
			p.DataDir = filepath.Join(o.DataDir, p.name())
		}
		p.Log = filepath.Join(o.DataDir, "logs", p.name()+".log")
		procs = append(procs, p)
		return nil
	}
	for id := 1; id <= Controllers; id++ {
		if err := add(RoleController, id, true, true, true); err != nil {
			return nil, err
		}
	}
	for id := 1; id <= o.StorageNodes; id++ {
		if err := add(RoleStorage, id, true, false, true); err != nil {
			return nil, err
		}
	}
	for id := 1; id <= o.GroupCoordinators; id++ {
		if err := add(RoleGroupCoord, id, false, false, true); err != nil {
			return nil, err
		}
	}
	for id := 1; id <= o.TxnCoordinators; id++ {
		if err := add(RoleTxnCoord, id, false, false, true); err != nil {
			return nil, err
		}
	}
	if err := add(RoleGateway, 1, false, false, false); err != nil {
		return nil, err
	}
	return procs, nil
}

// args builds a process's command line from the cluster layout.
func args(p *Process, procs []*Process, logLevel string, sec *Security) []string {
	var ctrlGRPC, seeds, peers []string
	for _, q := range procs {
		if q.Role == RoleController {
			ctrlGRPC = append(ctrlGRPC, q.GRPCAddr)
			seeds = append(seeds, q.GossipAddr)
			peers = append(peers, fmt.Sprintf("%d=%s=%s", q.ID, q.RaftAddr, q.GRPCAddr))
		}
	}
	a := []string{"--node-id", strconv.Itoa(p.ID), "--grpc-addr", p.GRPCAddr, "--http-addr", p.HTTPAddr, "--log-level", logLevel}
	switch p.Role {
	case RoleController:
		a = append(a, "--raft-addr", p.RaftAddr, "--gossip-addr", p.GossipAddr,
			"--gossip-seeds", strings.Join(seeds, ","), "--peers", strings.Join(peers, ","), "--data-dir", p.DataDir)
	case RoleStorage:
		a = append(a, "--gossip-addr", p.GossipAddr, "--gossip-seeds", strings.Join(seeds, ","),
			"--controllers", strings.Join(ctrlGRPC, ","), "--data-dir", p.DataDir)
	case RoleGroupCoord, RoleTxnCoord:
		a = append(a, "--gossip-addr", p.GossipAddr, "--gossip-seeds", strings.Join(seeds, ","),
			"--controllers", strings.Join(ctrlGRPC, ","))
	case RoleGateway:
		a = append(a, "--controllers", strings.Join(ctrlGRPC, ","))
	}
	if sec != nil {
		f := sec.files(p.name())
		a = append(a, "--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA)
		if p.Role != RoleGateway {
			a = append(a, "--gossip-key-file", sec.GossipKey)
		}
		switch p.Role {
		case RoleController, RoleStorage, RoleGroupCoord, RoleTxnCoord:
			// ACLs bind where the operation happens too: a client
			// certificate of the CA calling a storage node, a coordinator
			// or a controller directly is its own principal, the
			// gateway's calls carry their client's.
			a = append(a, "--authorizer", "--super-users", ClientPrincipal)
		case RoleGateway:
			// Every public call needs a principal: the client certificate
			// or the dev token. The client certificate's principal is a
			// super user; the dev token's has the rights ACLs give it
			// (none at first), so the authorizer can be tried out.
			a = append(a, "--auth-required", "--auth-token-file", sec.TokenFile,
				"--authorizer", "--super-users", ClientPrincipal)
		}
	}
	return a
}

// Start launches the cluster and waits until it serves.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if err := checkSecurity(o.DataDir, o.Secure); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(o.DataDir, "logs"), 0o755); err != nil {
		return nil, err
	}
	procs, err := plan(o)
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: o, procs: procs, exits: make(chan *Process, len(procs)), hc: &http.Client{Timeout: 2 * time.Second}}
	if o.Secure {
		if c.sec, err = secure(filepath.Join(o.DataDir, "tls"), procs); err != nil {
			return nil, err
		}
		c.hc.Transport = &http.Transport{TLSClientConfig: c.sec.client.ClientConfig()}
		fmt.Fprintf(o.Progress, "mutual TLS on every hop, gossip encrypted: CA %s, client certificate %s\n", c.sec.CA, c.sec.ClientCert)
	}
	for _, p := range procs {
		if err := c.launch(p); err != nil {
			c.Stop()
			return nil, err
		}
		fmt.Fprintf(o.Progress, "started %-12s pid %-7d grpc %s  http %s\n", p.name(), p.PID, p.GRPCAddr, p.HTTPAddr)
	}
	if err := c.writeFile(); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.waitReady(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) launch(p *Process) error {
	if p.DataDir != "" {
		if err := os.MkdirAll(p.DataDir, 0o755); err != nil {
			return err
		}
	}
	logf, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := exec.Command(filepath.Join(c.opts.BinDir, binaries[p.Role]), args(p, c.procs, c.opts.LogLevel, c.sec)...)
	if p.Role == RoleGateway {
		cmd.Args = append(cmd.Args, c.opts.GatewayArgs...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = procenv.Env(os.Environ(), c.opts.GoMaxProcs, c.opts.SteadySysmon)
	// Its own process group: a Ctrl-C in the terminal reaches only `skein
	// dev`, which then stops the children in order; and a SIGTERM of its
	// own should `skein dev` die without stopping them (SIGKILL).
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("devcluster: starting %s: %w", p.name(), err)
	}
	p.cmd, p.PID, p.exited = cmd, cmd.Process.Pid, make(chan struct{})
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
		c.exits <- p
	}()
	return nil
}

func (c *Cluster) writeFile() error {
	raw, err := json.MarshalIndent(File{Processes: c.procs, TLS: c.sec}, "", "  ")
	if err != nil {
		return err
	}
	// Readable by its owner only: a secure cluster's file holds the dev
	// token, a credential as the files under tls/ are.
	tmp := filepath.Join(c.opts.DataDir, fileName+".tmp")
	_ = os.Remove(tmp) // WriteFile keeps an existing file's mode
	if err := os.WriteFile(tmp, append(raw, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(c.opts.DataDir, fileName))
}

// waitReady polls the gateway until it is ready and sees every storage
// node, and every group coordinator until the controllers list it.
func (c *Cluster) waitReady(ctx context.Context) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	gw := c.scheme() + c.Gateway().HTTPAddr
	hc := c.hc
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last := "the gateway does not answer yet"
	for {
		select {
		case p := <-c.exits:
			c.exits <- p // keep it for Exits
			return fmt.Errorf("devcluster: %s exited while the cluster was starting (%v); the end of %s:\n%s", p.name(), p.err, p.Log, tail(p.Log, 20))
		case <-ctx.Done():
			if err := parent.Err(); err != nil {
				return err // stopped (Ctrl-C) while starting, not timed out
			}
			return fmt.Errorf("devcluster: not ready after %v: %s", c.opts.StartTimeout, last)
		case <-tick.C:
		}
		resp, err := hc.Get(gw + "/readyz")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			last = "the gateway has no metadata from the controllers yet"
			continue
		}
		alive, err := aliveBrokers(hc, gw)
		if err != nil {
			last = err.Error()
			continue
		}
		if alive < c.opts.StorageNodes {
			last = fmt.Sprintf("%d of %d storage nodes alive", alive, c.opts.StorageNodes)
			continue
		}
		if p := c.unready(hc, RoleGroupCoord); p != nil {
			last = p.name() + " is not ready (not yet in the controllers' metadata)"
			continue
		}
		if p := c.unready(hc, RoleTxnCoord); p != nil {
			last = p.name() + " is not ready (not yet in the controllers' metadata)"
			continue
		}
		return nil
	}
}

// unready answers the first process of a role whose /readyz is not 200.
func (c *Cluster) unready(hc *http.Client, role string) *Process {
	for _, p := range c.procs {
		if p.Role != role {
			continue
		}
		resp, err := hc.Get(c.scheme() + p.HTTPAddr + "/readyz")
		if err != nil {
			return p
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return p
		}
	}
	return nil
}

func aliveBrokers(hc *http.Client, gw string) (int, error) {
	resp, err := hc.Get(gw + "/v1/cluster")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Brokers []struct {
			State string `json:"state"`
		} `json:"brokers"`
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /v1/cluster answered %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, err
	}
	n := 0
	for _, b := range body.Brokers {
		if b.State == "ALIVE" {
			n++
		}
	}
	return n, nil
}

// Stop terminates every process: SIGTERM tier by tier (gateway, group
// and transaction coordinators, storage, controllers), SIGKILL after the grace period. It
// is safe to call twice.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		for _, role := range []string{RoleGateway, RoleGroupCoord, RoleTxnCoord, RoleStorage, RoleController} {
			var tier []*Process
			for _, p := range c.procs {
				if p.Role == role && p.cmd != nil {
					tier = append(tier, p)
				}
			}
			c.stopTier(tier)
		}
	})
	return c.stopErr
}

func (c *Cluster) stopTier(tier []*Process) {
	for _, p := range tier {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.NewTimer(c.opts.StopGrace)
	defer deadline.Stop()
	for _, p := range tier {
		select {
		case <-p.exited:
		case <-deadline.C:
			for _, q := range tier {
				select {
				case <-q.exited:
				default:
					fmt.Fprintf(c.opts.Progress, "%s did not stop within %v: killing it\n", q.name(), c.opts.StopGrace)
					_ = q.cmd.Process.Kill()
					<-q.exited
				}
			}
			return
		}
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// portPicker hands out loopback addresses that are free now and not handed
// out twice in one plan. reserved are addresses the caller pinned, which
// fresh never picks even before they are taken (the gateway comes last in
// the plan); band, when set, replaces portBand.
type portPicker struct {
	used     map[string]bool
	reserved map[string]bool
	band     func() (lo, hi int)
}

// envAddrs answers the addresses pinned through the environment every
// process inherits (SKEIN_DEBUG_ADDR=127.0.0.1:16060 gives the gateway its
// /debug/pprof address, for instance): the process that binds one may
// start after another took the same port for itself.
func envAddrs(environ []string) map[string]bool {
	addrs := map[string]bool{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, "SKEIN_") || !strings.HasSuffix(k, "_ADDR") {
			continue
		}
		if _, _, err := net.SplitHostPort(v); err == nil {
			addrs[v] = true
		}
	}
	return addrs
}

func (pp *portPicker) fresh() (string, error) {
	if pp.used == nil {
		pp.used = map[string]bool{}
	}
	band := pp.band
	if band == nil {
		band = portBand
	}
	lo, hi := band()
	for range 1000 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(lo+rand.IntN(hi-lo)))
		if pp.used[addr] || pp.reserved[addr] {
			continue
		}
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		lis.Close()
		pp.used[addr] = true
		return addr, nil
	}
	return "", errors.New("no free loopback port")
}

// portBand is a range of ports outside the kernel's ephemeral range, so a
// port picked now is not taken by some outgoing connection before the
// process that is to listen on it starts.
func portBand() (lo, hi int) {
	elo, ehi := 32768, 60999
	if raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(raw)); len(f) == 2 {
			a, err1 := strconv.Atoi(f[0])
			b, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && a <= b {
				elo, ehi = a, b
			}
		}
	}
	switch {
	case elo-10000 >= 2000:
		return 10000, elo
	case 65535-ehi >= 2000:
		return ehi + 1, 65536
	}
	return 1024, 65536 // no room outside: take any
}

func (pp *portPicker) reuse(addr string) error {
	if pp.used == nil {
		pp.used = map[string]bool{}
	}
	if pp.used[addr] {
		return errors.New("listed twice")
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	lis.Close()
	pp.used[addr] = true
	return nil
}

// Run starts the cluster, calls ready with it, reports processes that exit
// on their own (a dev cluster is a place to kill nodes on purpose, so it
// keeps running), and stops everything when ctx ends — on Ctrl-C or
// SIGTERM, when ctx comes from signal.NotifyContext.
func Run(ctx context.Context, o Options, ready func(*Cluster)) error {
	c, err := Start(ctx, o)
	if err != nil {
		return err
	}
	if ready != nil {
		ready(c)
	}
	for {
		select {
		case p := <-c.exits:
			fmt.Fprintf(c.opts.Progress, "%s (pid %d) exited: %v; see %s\n", p.name(), p.PID, p.err, p.Log)
		case <-ctx.Done():
			fmt.Fprintln(c.opts.Progress, "stopping the cluster")
			return c.Stop()
		}
	}
}
