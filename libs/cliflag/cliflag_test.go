package cliflag

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestEnvTwinsFillOnlyUnsetFlags(t *testing.T) {
	env := map[string]string{"SKEIN_GRPC_ADDR": "10.0.0.1:1", "SKEIN_NODE_ID": "7", "SKEIN_REPLICA_LAG_MAX": "3s"}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	grpc := fs.String("grpc-addr", "127.0.0.1:9090", "")
	id := fs.Int("node-id", 1, "")
	lag := fs.Duration("replica-lag-max", time.Second, "")
	other := fs.String("log-level", "info", "")
	if err := Parse(fs, []string{"--grpc-addr", "127.0.0.1:1"}, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if *grpc != "127.0.0.1:1" || *id != 7 || *lag != 3*time.Second || *other != "info" {
		t.Errorf("got grpc=%s id=%d lag=%v level=%s", *grpc, *id, *lag, *other)
	}
	if EnvName("gossip-seeds") != "SKEIN_GOSSIP_SEEDS" {
		t.Error(EnvName("gossip-seeds"))
	}
	bad := flag.NewFlagSet("t", flag.ContinueOnError)
	bad.Int("node-id", 1, "")
	err := Parse(bad, nil, func(k string) string { return map[string]string{"SKEIN_NODE_ID": "seven"}[k] })
	if err == nil || !strings.Contains(err.Error(), "SKEIN_NODE_ID") {
		t.Errorf("a bad twin must be an error naming it: %v", err)
	}
}

func TestHealthcheck(t *testing.T) {
	healthy := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" || !healthy {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	if code := Healthcheck(addr, time.Second, io.Discard); code != 0 {
		t.Errorf("healthy: exit %d", code)
	}
	healthy = false
	var stderr bytes.Buffer
	if code := Healthcheck(addr, time.Second, &stderr); code != 1 || !strings.Contains(stderr.String(), "503") {
		t.Errorf("unhealthy: exit %d, %q", code, stderr.String())
	}
	srv.Close()
	if code := Healthcheck(addr, time.Second, io.Discard); code != 1 {
		t.Errorf("down: exit %d", code)
	}
	if code := Healthcheck("no-port", time.Second, io.Discard); code != 2 {
		t.Errorf("bad address: exit %d", code)
	}
}

func TestSplitList(t *testing.T) {
	for in, want := range map[string]string{"": "[]", "a": "[a]", " a , b,,c ": "[a b c]", ",,": "[]"} {
		if got := fmt.Sprint(SplitList(in)); got != want {
			t.Errorf("SplitList(%q) = %s, want %s", in, got, want)
		}
	}
}

// -h exits 0, a command line the process cannot run with 2 (as the flag
// package exits), any other failure 1.
func TestExitCode(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int("n", 0, "")
	help := Parse(fs, []string{"-h"}, func(string) string { return "" })
	bogus := Parse(fs, []string{"--bogus"}, func(string) string { return "" })
	stray := Parse(fs, []string{"extra", "-n", "3"}, func(string) string { return "" })
	if stray == nil || !strings.Contains(stray.Error(), `unexpected argument "extra"`) {
		t.Errorf("a stray argument before a flag: %v", stray)
	}
	env := Parse(fs, nil, func(k string) string {
		if k == "SKEIN_N" {
			return "x"
		}
		return ""
	})
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"none", nil, 0}, {"-h", help, 0}, {"an unknown flag", bogus, 2}, {"a stray argument", stray, 2}, {"a bad environment twin", env, 2},
		{"a failure of the run", errors.New("bind: address already in use"), 1},
	} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("%s (%v): exit %d, want %d", tc.name, tc.err, got, tc.want)
		}
	}
}
