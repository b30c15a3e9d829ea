package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"skein/tests/cluster"
)

// Dev is a `skein dev` cluster run as a child process.
type Dev struct {
	Dir      string // --data-dir: cluster.json, logs/, every node's data
	HTTPAddr string // the gateway's REST address, host:port
	GRPCAddr string // the gateway's gRPC address
	BaseURL  string // "http://" + HTTPAddr

	cmd  *exec.Cmd
	out  *syncBuffer // skein dev's stdout and stderr
	done chan struct{}
	err  error // skein dev's exit status, set before done closes
}

// syncBuffer is a bytes.Buffer safe to write from the process's pipes and
// read from the test.
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

// RepoRoot is the directory holding go.work, found upward from the working
// directory.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("no go.work above %s", wd)
}

// BinDir is $SKEIN_BIN_DIR, else bin/ at the repository root.
func BinDir() (string, error) {
	if d := os.Getenv("SKEIN_BIN_DIR"); d != "" {
		return d, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin"), nil
}

// FreeAddr answers a loopback address free now, below the kernel's
// ephemeral range and never handed out before in this process.
func FreeAddr() (string, error) { return cluster.PickAddr() }

// readyLine is what skein dev prints on stdout once the cluster serves.
const readyLine = "Skein is running."

// StartDev runs `skein dev --data-dir dir` with the gateway on free ports and
// waits (up to timeout) until it says the cluster is running.
func StartDev(binDir, dir string, timeout time.Duration) (*Dev, error) {
	return StartDevWith(binDir, dir, timeout)
}

// StartDevWith is StartDev with more arguments for skein dev (--secure: the
// gateway's REST address is then https).
func StartDevWith(binDir, dir string, timeout time.Duration, extra ...string) (*Dev, error) {
	httpAddr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	grpcAddr, err := FreeAddr()
	for err == nil && grpcAddr == httpAddr {
		grpcAddr, err = FreeAddr()
	}
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(binDir, "skein")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s not built (run `make build`): %w", bin, err)
	}
	d := &Dev{Dir: dir, HTTPAddr: httpAddr, GRPCAddr: grpcAddr, BaseURL: "http://" + httpAddr, out: &syncBuffer{}, done: make(chan struct{})}
	if slices.Contains(extra, "--secure") {
		d.BaseURL = "https://" + httpAddr
	}
	d.cmd = exec.Command(bin, append([]string{"dev", "--data-dir", dir, "--bin-dir", binDir,
		"--gateway-http-addr", httpAddr, "--gateway-grpc-addr", grpcAddr}, extra...)...)
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	// Its own process group, as a terminal would give it.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.done)
	}()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(d.out.String(), readyLine) {
		select {
		case <-d.done:
			return nil, fmt.Errorf("skein dev exited before the cluster was ready (%v):\n%s\n%s", d.err, d.out, d.LogTails(20))
		case <-deadline.C:
			d.Stop(30 * time.Second)
			return nil, fmt.Errorf("skein dev not ready after %v:\n%s\n%s", timeout, d.out, d.LogTails(20))
		case <-tick.C:
		}
	}
	return d, nil
}

// Process is one entry of cluster.json.
type Process struct {
	Role     string `json:"role"`
	ID       int    `json:"id"`
	PID      int    `json:"pid"`
	GRPCAddr string `json:"grpc_addr"`
	HTTPAddr string `json:"http_addr"`
	DataDir  string `json:"data_dir"`
	Log      string `json:"log"`
}

// Processes reads DIR/cluster.json.
func (d *Dev) Processes() ([]Process, error) {
	raw, err := os.ReadFile(filepath.Join(d.Dir, "cluster.json"))
	if err != nil {
		return nil, err
	}
	var f struct {
		Processes []Process `json:"processes"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("cluster.json: %w", err)
	}
	return f.Processes, nil
}

// Output is what skein dev printed so far.
func (d *Dev) Output() string { return d.out.String() }

// Stop sends skein dev SIGTERM (as Ctrl-C would), waits up to timeout for it
// to stop every process, and SIGKILLs whatever is left after that. It
// answers an error when the stop was not clean.
func (d *Dev) Stop(timeout time.Duration) error {
	procs, _ := d.Processes()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	var errList []error
	select {
	case <-d.done:
		if d.err != nil {
			errList = append(errList, fmt.Errorf("skein dev exited with %v after SIGTERM", d.err))
		}
	case <-time.After(timeout):
		_ = d.cmd.Process.Kill()
		<-d.done
		errList = append(errList, fmt.Errorf("skein dev did not stop within %v of SIGTERM", timeout))
	}
	for _, p := range procs {
		if p.PID > 0 && syscall.Kill(p.PID, 0) == nil {
			errList = append(errList, fmt.Errorf("%s-%d (pid %d) outlived skein dev", p.Role, p.ID, p.PID))
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	}
	return errors.Join(errList...)
}

// LogTails is the last n lines of every process's log.
func (d *Dev) LogTails(n int) string {
	logs, _ := filepath.Glob(filepath.Join(d.Dir, "logs", "*.log"))
	var b strings.Builder
	for _, l := range logs {
		raw, _ := os.ReadFile(l)
		lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		fmt.Fprintf(&b, "---- %s ----\n%s\n", filepath.Base(l), strings.Join(lines, "\n"))
	}
	return b.String()
}
