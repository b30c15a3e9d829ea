package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"skein/libs/errs"
)

// The REST error document's gRPC codes (docs/API.md).
const (
	codeInvalidArgument    = 3
	codeNotFound           = 5
	codePermissionDenied   = 7
	codeFailedPrecondition = 9
	codeResourceExhausted  = 8
	codeInternal           = 13
)

// errorBody is the gateway's REST error document.
type errorBody struct {
	Code      int32  `json:"code"`
	ErrorCode string `json:"error_code"`
	Message   string `json:"message"`
}

func writeError(w http.ResponseWriter, httpStatus int, code int32, name, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpStatus)
	_ = json.NewEncoder(w).Encode(errorBody{Code: code, ErrorCode: name, Message: msg})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Demos are the console's destructive buttons: SIGKILL, SIGSTOP and SIGCONT
// to the storage nodes of the `skein dev` cluster whose cluster.json is
// ClusterFile. Nothing else is ever signalled: only pids the file lists with
// role storage, and only while /proc says the pid still runs skein-storage
// with that node id.
type Demos struct {
	// Enabled is --console-demos; ClusterFile is --dev-cluster-file. Both
	// are needed for any demo route to act.
	Enabled     bool
	ClusterFile string
	// ProcDir is /proc (tests point it elsewhere).
	ProcDir string
	// Signal sends sig to pid (syscall.Kill unless tests replace it).
	Signal func(pid int, sig syscall.Signal) error
}

// devProcess is one entry of cluster.json (cmd/skein's devcluster.Process).
type devProcess struct {
	Role     string `json:"role"`
	ID       int    `json:"id"`
	PID      int    `json:"pid"`
	GRPCAddr string `json:"grpc_addr"`
}

// Node is a storage node as the demo routes show it.
type Node struct {
	ID  int `json:"id"`
	PID int `json:"pid"`
	// State is "running", "paused" (SIGSTOPped) or "exited".
	State string `json:"state"`
}

// DemoStatus is GET /v1/console/demo.
type DemoStatus struct {
	Enabled bool   `json:"enabled"`
	Reason  string `json:"reason,omitempty"`
	Nodes   []Node `json:"nodes"`
}

func (d *Demos) active() (bool, string) {
	switch {
	case !d.Enabled:
		return false, "demos are off: start the gateway with --console-demos (skein dev --console-demos)"
	case d.ClusterFile == "":
		return false, "the gateway knows no dev cluster: it needs --dev-cluster-file (skein dev passes it)"
	}
	return true, ""
}

func (d *Demos) procDir() string {
	if d.ProcDir == "" {
		return "/proc"
	}
	return d.ProcDir
}

// storageNodes reads the storage nodes of cluster.json.
func (d *Demos) storageNodes() ([]devProcess, error) {
	raw, err := os.ReadFile(d.ClusterFile)
	if err != nil {
		return nil, err
	}
	var f struct {
		Processes []devProcess `json:"processes"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(d.ClusterFile), err)
	}
	var out []devProcess
	for _, p := range f.Processes {
		if p.Role == "storage" && p.PID > 0 {
			out = append(out, p)
		}
	}
	return out, nil
}

// state reads /proc/PID: "exited" unless the pid runs skein-storage with
// the node's id, else "paused" for a stopped process, "running" otherwise.
func (d *Demos) state(p devProcess) string {
	dir := filepath.Join(d.procDir(), strconv.Itoa(p.PID))
	cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil {
		return "exited"
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if len(args) == 0 || filepath.Base(args[0]) != "skein-storage" || !hasFlag(args, "--node-id", strconv.Itoa(p.ID)) {
		return "exited" // the pid is gone, or reused by another process
	}
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return "exited"
	}
	// pid (comm) S ...: the state follows the last ')'.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		switch s[i+2] {
		case 'T', 't':
			return "paused"
		case 'Z', 'X':
			return "exited"
		}
	}
	return "running"
}

func hasFlag(args []string, name, value string) bool {
	for i, a := range args {
		if a == name+"="+value || (a == name && i+1 < len(args) && args[i+1] == value) {
			return true
		}
	}
	return false
}

// Status is GET /v1/console/demo: whether demos are on, and the storage
// nodes with their pids and states when they are.
func (d *Demos) Status(w http.ResponseWriter, _ *http.Request) {
	st := DemoStatus{Nodes: []Node{}}
	var ok bool
	ok, st.Reason = d.active()
	if ok {
		procs, err := d.storageNodes()
		if err != nil {
			st.Reason = "reading the dev cluster file: " + err.Error()
		} else {
			st.Enabled = true
			for _, p := range procs {
				st.Nodes = append(st.Nodes, Node{ID: p.ID, PID: p.PID, State: d.state(p)})
			}
		}
	}
	writeJSON(w, st)
}

// demoActions are the signals of POST /v1/console/demo/storage/{id}/{action}.
var demoActions = map[string]syscall.Signal{
	"kill":   syscall.SIGKILL,
	"pause":  syscall.SIGSTOP,
	"resume": syscall.SIGCONT,
}

// Act is POST /v1/console/demo/storage/{id}/{action}: kill, pause or resume
// one storage node of the dev cluster. Refused with 403 INVALID_REQUEST
// while demos are off.
func (d *Demos) Act(w http.ResponseWriter, r *http.Request) {
	if ok, why := d.active(); !ok {
		writeError(w, http.StatusForbidden, codePermissionDenied, errs.InvalidRequest.Name, why)
		return
	}
	action := r.PathValue("action")
	sig, known := demoActions[action]
	if !known {
		writeError(w, http.StatusBadRequest, codeInvalidArgument, errs.InvalidRequest.Name,
			fmt.Sprintf("unknown demo action %q: want kill, pause or resume", action))
		return
	}
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidArgument, errs.InvalidRequest.Name, "the node id is not a number")
		return
	}
	procs, err := d.storageNodes()
	if err != nil {
		writeError(w, http.StatusInternalServerError, codeInternal, errs.UnknownServerError.Name, "reading the dev cluster file: "+err.Error())
		return
	}
	for _, p := range procs {
		if p.ID != id {
			continue
		}
		if d.state(p) == "exited" {
			writeError(w, http.StatusConflict, codeFailedPrecondition, errs.InvalidRequest.Name,
				fmt.Sprintf("storage node %d (pid %d) is not running", id, p.PID))
			return
		}
		send := d.Signal
		if send == nil {
			send = func(pid int, sig syscall.Signal) error { return syscall.Kill(pid, sig) }
		}
		if err := send(p.PID, sig); err != nil {
			writeError(w, http.StatusInternalServerError, codeInternal, errs.UnknownServerError.Name,
				fmt.Sprintf("signalling storage node %d (pid %d): %v", id, p.PID, err))
			return
		}
		writeJSON(w, map[string]any{"id": id, "pid": p.PID, "action": action})
		return
	}
	writeError(w, http.StatusNotFound, codeNotFound, errs.InvalidRequest.Name,
		fmt.Sprintf("the dev cluster has no storage node %d", id))
}
