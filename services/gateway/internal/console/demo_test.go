package console

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func decodeJSON(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// fakeProc writes /proc/PID/{cmdline,stat} for a process.
func fakeProc(t *testing.T, dir string, pid int, argv []string, state byte) {
	t.Helper()
	d := filepath.Join(dir, strconv.Itoa(pid))
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "cmdline"), []byte(strings.Join(argv, "\x00")+"\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	stat := strconv.Itoa(pid) + " (skein-storage) " + string(state) + " 1 2 3\n"
	if err := os.WriteFile(filepath.Join(d, "stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
}

type signalled struct {
	pid int
	sig syscall.Signal
}

func demoServer(t *testing.T, enabled bool) (*httptest.Server, *[]signalled) {
	t.Helper()
	dir := t.TempDir()
	proc := filepath.Join(dir, "proc")
	cluster := `{"processes": [
	  {"role": "controller", "id": 1, "pid": 101},
	  {"role": "storage", "id": 1, "pid": 201},
	  {"role": "storage", "id": 2, "pid": 202},
	  {"role": "storage", "id": 3, "pid": 203},
	  {"role": "gateway", "id": 1, "pid": 301}]}`
	file := filepath.Join(dir, "cluster.json")
	if err := os.WriteFile(file, []byte(cluster), 0o644); err != nil {
		t.Fatal(err)
	}
	fakeProc(t, proc, 101, []string{"/bin/skein-controller", "--node-id", "1"}, 'S')
	fakeProc(t, proc, 201, []string{"/bin/skein-storage", "--node-id", "1"}, 'S')
	fakeProc(t, proc, 202, []string{"/bin/skein-storage", "--node-id", "2"}, 'T')
	// pid 203 was reused by another program: node 3 is gone.
	fakeProc(t, proc, 203, []string{"/usr/bin/sleep", "100"}, 'S')
	var sent []signalled
	d := &Demos{Enabled: enabled, ClusterFile: file, ProcDir: proc, Signal: func(pid int, sig syscall.Signal) error {
		sent = append(sent, signalled{pid, sig})
		return nil
	}}
	mux := http.NewServeMux()
	hub := NewHub(HubConfig{Source: &fakeSource{}})
	Register(mux, hub, d, nil)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		hub.Close()
		srv.Close()
	})
	return srv, &sent
}

func TestDemoRoutesRefusedWithoutTheFlag(t *testing.T) {
	srv, sent := demoServer(t, false)
	for _, action := range []string{"kill", "pause", "resume"} {
		resp, err := http.Post(srv.URL+"/v1/console/demo/storage/1/"+action, "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		var body errorBody
		decodeJSON(t, resp, &body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || body.ErrorCode != "INVALID_REQUEST" || body.Code != codePermissionDenied ||
			!strings.Contains(body.Message, "--console-demos") {
			t.Fatalf("%s without demos: %d %+v", action, resp.StatusCode, body)
		}
	}
	if len(*sent) != 0 {
		t.Fatalf("signals sent with demos off: %v", *sent)
	}
	resp, err := http.Get(srv.URL + "/v1/console/demo")
	if err != nil {
		t.Fatal(err)
	}
	var st DemoStatus
	decodeJSON(t, resp, &st)
	resp.Body.Close()
	if st.Enabled || len(st.Nodes) != 0 || st.Reason == "" {
		t.Fatalf("status without demos: %+v", st)
	}
}

func TestDemoRoutesRefusedWithoutAClusterFile(t *testing.T) {
	d := &Demos{Enabled: true, Signal: func(int, syscall.Signal) error { t.Fatal("signalled"); return nil }}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/console/demo/storage/1/kill", nil)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/console/demo/storage/{id}/{action}", d.Act)
	mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "--dev-cluster-file") {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

func TestDemoSignalsOnlyListedStorageNodes(t *testing.T) {
	srv, sent := demoServer(t, true)
	resp, err := http.Get(srv.URL + "/v1/console/demo")
	if err != nil {
		t.Fatal(err)
	}
	var st DemoStatus
	decodeJSON(t, resp, &st)
	resp.Body.Close()
	want := []Node{{1, 201, "running"}, {2, 202, "paused"}, {3, 203, "exited"}}
	if !st.Enabled || len(st.Nodes) != 3 {
		t.Fatalf("status: %+v", st)
	}
	for i, n := range want {
		if st.Nodes[i] != n {
			t.Fatalf("node %d: %+v, want %+v", i, st.Nodes[i], n)
		}
	}
	for _, c := range []struct {
		path   string
		status int
	}{
		{"/v1/console/demo/storage/1/kill", 200},
		{"/v1/console/demo/storage/2/resume", 200},
		{"/v1/console/demo/storage/1/pause", 200},
		{"/v1/console/demo/storage/3/kill", 409},    // pid reused: never signalled
		{"/v1/console/demo/storage/9/kill", 404},    // not in the file
		{"/v1/console/demo/storage/1/restart", 400}, // not an action
		{"/v1/console/demo/storage/x/kill", 400},
	} {
		resp, err := http.Post(srv.URL+c.path, "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s: %d, want %d", c.path, resp.StatusCode, c.status)
		}
	}
	wantSent := []signalled{{201, syscall.SIGKILL}, {202, syscall.SIGCONT}, {201, syscall.SIGSTOP}}
	if len(*sent) != len(wantSent) {
		t.Fatalf("signals %v, want %v", *sent, wantSent)
	}
	for i := range wantSent {
		if (*sent)[i] != wantSent[i] {
			t.Fatalf("signals %v, want %v", *sent, wantSent)
		}
	}
}

// The console's routes answer another method with 405 and its Allow, as
// the API's routes do, and refuse a query parameter rather than ignore it.
func TestConsoleRoutesTakeTheirMethodAndNoQuery(t *testing.T) {
	srv, sent := demoServer(t, true)
	call := func(method, path string) (int, string, errorBody) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body errorBody
		decodeJSON(t, resp, &body)
		return resp.StatusCode, resp.Header.Get("Allow"), body
	}
	for _, tc := range []struct{ method, path, allow string }{
		{"POST", "/v1/events", "GET"},
		{"DELETE", "/v1/console/demo", "GET"},
		{"GET", "/v1/console/demo/storage/1/kill", "POST"},
		{"DELETE", "/v1/console/demo/storage/1/kill", "POST"},
	} {
		code, allow, body := call(tc.method, tc.path)
		if code != http.StatusMethodNotAllowed || allow != tc.allow || body.ErrorCode != "INVALID_REQUEST" {
			t.Errorf("%s %s: %d Allow %q %+v, want 405 Allow %s", tc.method, tc.path, code, allow, body, tc.allow)
		}
	}
	for _, tc := range []struct{ method, path string }{
		{"POST", "/v1/console/demo/storage/1/pause?x=1"},
		{"GET", "/v1/console/demo?verbose=1"},
		{"GET", "/v1/events?since=0"},
	} {
		code, _, body := call(tc.method, tc.path)
		if code != http.StatusBadRequest || body.ErrorCode != "INVALID_REQUEST" || !strings.Contains(body.Message, "takes none") {
			t.Errorf("%s %s: %d %+v, want 400 INVALID_REQUEST", tc.method, tc.path, code, body)
		}
	}
	if len(*sent) != 0 {
		t.Fatalf("a refused call signalled: %v", *sent)
	}
}
