package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"skein/libs/cliflag"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "healthcheck" {
		os.Exit(healthcheck(os.Args[2:], os.Getenv, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr, nil); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "skein-controller:", err)
		}
		os.Exit(cliflag.ExitCode(err))
	}
}

// healthcheck GETs /healthz: for container health checks in an image
// without a shell.
func healthcheck(args []string, getenv func(string) string, stderr io.Writer) int {
	fs := newFlags("healthcheck", getenv, stderr)
	addr := fs.str("http-addr", "SKEIN_HTTP_ADDR", "127.0.0.1:9111", "the controller's HTTP address")
	timeout := fs.dur("timeout", "SKEIN_HEALTHCHECK_TIMEOUT", 2*time.Second, "how long to wait for the answer")
	files := fs.tls()
	if err := fs.parse(args); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return cliflag.HealthcheckFiles(*addr, *timeout, files(), stderr)
}
