package main

import (
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

func TestRunRefusesMissingControllers(t *testing.T) {
	t.Setenv("SKEIN_CONTROLLERS", "")
	if err := run([]string{"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}); err == nil || !strings.Contains(err.Error(), "--controllers") {
		t.Errorf("run without controllers: %v", err)
	}
}

func TestRunRefusesBadProducerFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--compression", "brotli"}, "--compression"},
		{[]string{"--batch-size", "0"}, "--batch-size"},
		{[]string{"--producer-idle-timeout", "0s"}, "--producer-idle-timeout"},
		{[]string{"--producer-idle-timeout", "-1m"}, "--producer-idle-timeout"},
		{[]string{"--producer-idle-timeout", "10s"}, "at least the delivery timeout"},
	} {
		args := append([]string{"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--controllers", "127.0.0.1:1"}, tc.args...)
		if err := run(args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run %v: %v, want an error naming %s", tc.args, err, tc.want)
		}
	}
}

func TestRunRefusesAuthWithoutMeans(t *testing.T) {
	err := run([]string{"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--controllers", "127.0.0.1:1", "--auth-required"})
	if err == nil || !strings.Contains(err.Error(), "--auth-required needs") {
		t.Errorf("--auth-required without tokens or TLS: %v", err)
	}
	err = run([]string{"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--controllers", "127.0.0.1:1", "--auth-token-file", "/nonexistent/tokens"})
	if err == nil || !strings.Contains(err.Error(), "token file") {
		t.Errorf("a token file that does not exist: %v", err)
	}
}

func TestRunRefusesBadSuperUsers(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--authorizer", "--super-users", "admin"}, "--super-users: super user \"admin\": want Type:name"},
		{[]string{"--super-users", "User:admin"}, "--super-users needs --authorizer"},
	} {
		err := run(append([]string{"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--controllers", "127.0.0.1:1"}, tc.args...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
}
