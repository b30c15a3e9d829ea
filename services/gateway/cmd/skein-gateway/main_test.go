package main

import (
	"flag"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer ok.Close()
	sick := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer sick.Close()
	addr := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
	if code := healthcheck([]string{"--http-addr", addr(ok)}); code != 0 {
		t.Errorf("healthy gateway: exit %d", code)
	}
	if code := healthcheck([]string{"--http-addr", addr(sick)}); code != 1 {
		t.Errorf("unhealthy gateway: exit %d", code)
	}
	t.Setenv("SKEIN_HTTP_ADDR", addr(ok))
	if code := healthcheck(nil); code != 0 {
		t.Errorf("address from SKEIN_HTTP_ADDR: exit %d", code)
	}
}

func TestEnvTwinsFillOnlyUnsetFlags(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	grpcAddr := fs.String("grpc-addr", "default", "")
	ctrls := fs.String("controllers", "", "")
	node := fs.Int("node-id", 0, "")
	t.Setenv("SKEIN_GRPC_ADDR", "from-env")
	t.Setenv("SKEIN_CONTROLLERS", "a:1,b:2")
	t.Setenv("SKEIN_NODE_ID", "7")
	if err := fs.Parse([]string{"--grpc-addr", "from-flag"}); err != nil {
		t.Fatal(err)
	}
	if err := envTwins(fs); err != nil {
		t.Fatal(err)
	}
	if *grpcAddr != "from-flag" || *ctrls != "a:1,b:2" || *node != 7 {
		t.Errorf("grpc-addr %q controllers %q node-id %d", *grpcAddr, *ctrls, *node)
	}
	t.Setenv("SKEIN_NODE_ID", "seven")
	fs2 := flag.NewFlagSet("t", flag.ContinueOnError)
	fs2.Int("node-id", 0, "")
	if err := envTwins(fs2); err == nil {
		t.Error("a bad env value must be refused")
	}
}

func TestRunRefusesMissingControllers(t *testing.T) {
	t.Setenv("SKEIN_CONTROLLERS", "")
	if err := run([]string{"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}); err == nil || !strings.Contains(err.Error(), "--controllers") {
		t.Errorf("run without controllers: %v", err)
	}
}
