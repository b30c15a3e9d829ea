// Package cliflag is what every Skein binary does the same way on its command
// line: each flag has an environment twin (--grpc-addr is also
// SKEIN_GRPC_ADDR; the command line wins), and a `healthcheck` subcommand
// asks a running process's /healthz, so container health checks need no
// shell in a FROM scratch image.
package cliflag

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"skein/libs/tlsconf"
)

// EnvName is a flag's environment twin: SKEIN_ and the name in upper snake case.
func EnvName(flagName string) string {
	return "SKEIN_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Parse parses args, then sets every flag not given on the command line from
// its environment twin, read through getenv (os.Getenv in main; tests pass
// their own). A twin whose value the flag refuses is an error naming it.
func Parse(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	if err := fs.Parse(args); err != nil {
		return UsageError{err}
	}
	if fs.NArg() > 0 {
		// The flag package stops at the first argument that is not a
		// flag: the flags after it would be silently left out.
		return UsageError{fmt.Errorf("unexpected argument %q: this command takes flags only, and reads none after it", fs.Arg(0))}
	}
	if err := FillFromEnv(fs, getenv); err != nil {
		return UsageError{err}
	}
	return nil
}

// UsageError is a command line (or environment twin) the process cannot
// run with; -h is one too (flag.ErrHelp).
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// ExitCode is the exit status of a process that ends with err: 0 for -h
// (the flag package printed the usage), 2 for a usage error, as the flag
// package exits, and 1 for any other failure.
func ExitCode(err error) int {
	var ue UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		return 2
	}
	return 1
}

// FillFromEnv sets every flag of an already parsed set that the command line
// did not give from its environment twin.
func FillFromEnv(fs *flag.FlagSet, getenv func(string) string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		env := EnvName(f.Name)
		if v := getenv(env); v != "" {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %w", env, v, e)
			}
		}
	})
	return err
}

// Healthcheck GETs http://addr/healthz and answers the exit code: 0 when it
// answers 200, 1 otherwise (the reason goes to stderr), 2 for a bad address.
// A wildcard listen address is reached on loopback.
func Healthcheck(addr string, timeout time.Duration, stderr io.Writer) int {
	return HealthcheckTLS(addr, timeout, nil, stderr)
}

// HealthcheckFiles is Healthcheck over HTTPS with the process's TLS files
// when they are named (a process started with --tls-* serves HTTPS), over
// HTTP otherwise; files that do not load exit 2.
func HealthcheckFiles(addr string, timeout time.Duration, files tlsconf.Files, stderr io.Writer) int {
	if !files.Enabled() {
		return Healthcheck(addr, timeout, stderr)
	}
	src, err := tlsconf.Load(files)
	if err != nil {
		fmt.Fprintln(stderr, "healthcheck:", err)
		return 2
	}
	return HealthcheckTLS(addr, timeout, src.ClientConfig(), stderr)
}

// HealthcheckTLS is Healthcheck over HTTPS with tc when tc is not nil.
func HealthcheckTLS(addr string, timeout time.Duration, tc *tls.Config, stderr io.Writer) int {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		fmt.Fprintln(stderr, "healthcheck:", err)
		return 2
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	c := &http.Client{Timeout: timeout}
	scheme := "http"
	if tc != nil {
		scheme = "https"
		c.Transport = &http.Transport{TLSClientConfig: tc}
	}
	resp, err := c.Get(scheme + "://" + net.JoinHostPort(host, port) + "/healthz")
	if err != nil {
		fmt.Fprintln(stderr, "unhealthy:", err)
		return 1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		fmt.Fprintf(stderr, "unhealthy: %s %s\n", resp.Status, strings.TrimSpace(string(body)))
		return 1
	}
	return 0
}

// SplitList splits a comma-separated flag value (addresses, seeds),
// trimming spaces and dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
