package coordproc

import (
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"skein/libs/grpcopt"
	"skein/libs/membership"
	"skein/libs/metadata"
	"skein/libs/tlsconf"
)

// TestAuthorizerFlags: a coordinator asked for what it cannot do stops at
// start, before it builds or serves anything, with an error naming the
// flag.
func TestAuthorizerFlags(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"--authorizer without TLS":   {[]string{"--authorizer"}, "--authorizer needs TLS"},
		"a malformed --super-users":  {[]string{"--authorizer", "--super-users", "admin"}, "--super-users"},
		"--super-users on their own": {[]string{"--super-users", "User:admin"}, "--super-users needs --authorizer"},
	} {
		t.Run(name, func(t *testing.T) {
			c := Config{Service: "skein-test", What: "test coordinator", Role: membership.RoleGroupCoordinator}
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			AddFlags(fs, &c, Defaults{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0"}, "test coordinator", "TestService")
			if err := fs.Parse(append([]string{"--controllers", "127.0.0.1:1", "--log-level", "error"}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			built := false
			err := Run(c, func(Env) (Parts, error) {
				built = true
				return Parts{}, nil
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, want an error with %q", err, tc.want)
			}
			if built {
				t.Error("the coordinator was built")
			}
		})
	}
}

// TestAuthorizerWithTLS: with TLS, --authorizer gives the handlers an
// authorizer over the followed metadata's ACLs; without it they get none.
func TestAuthorizerWithTLS(t *testing.T) {
	ca, err := tlsconf.OpenCA(t.TempDir(), "test CA")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ca.Issue(tlsconf.Leaf{Name: "groupcoord-1", Role: "groupcoord", ID: "1", Hosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	src, err := tlsconf.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	grpcopt.UseTLS(src)
	t.Cleanup(func() { grpcopt.UseTLS(nil) })
	img := metadata.New("c")
	image := func() *metadata.Image { return img }
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		args []string
		on   bool
	}{
		{nil, false},
		{[]string{"--authorizer"}, true},
		{[]string{"--authorizer", "--super-users", "User:admin;User:ops"}, true},
	} {
		var c Config
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		AddFlags(fs, &c, Defaults{}, "test coordinator", "TestService")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		a, err := c.authorizer(image, log)
		if err != nil || (a != nil) != tc.on {
			t.Errorf("%v: authorizer %v, %v; want on=%v", tc.args, a, err, tc.on)
		}
	}
}

// The operations port serves every Go profile, the execution trace
// included.
func TestOperationsPortServesProfiles(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	srv, err := serveHTTP(addr, prometheus.NewRegistry(), nil, func() (bool, string) { return true, "" }, make(chan error, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, path := range []string{"/debug/pprof/trace?seconds=0.1", "/debug/pprof/profile?seconds=1", "/debug/pprof/goroutine", "/debug/pprof/cmdline"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(body) == 0 || strings.Contains(string(body), "Unknown profile") {
			t.Fatalf("GET %s: %d %q", path, resp.StatusCode, body[:min(len(body), 80)])
		}
	}
}
