// Command skein-lab runs the lab demos: each starts a `skein dev` cluster of
// its own on free loopback ports, stages one fault with real processes,
// audits what the clients saw and says what happened in plain words.
//
//	skein-lab acks1-loss | acks-all | min-isr | group | unclean
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"skein/tests/lab"
)

func main() {
	fs := flag.NewFlagSet("skein-lab", flag.ContinueOnError)
	binDir := fs.String("bin-dir", "", "directory holding skein and the service binaries (default: this binary's)")
	verbose := fs.Bool("v", false, "print the history checker's whole table")
	keep := fs.Bool("keep", false, "keep the cluster's data and logs")
	short := fs.Bool("short", false, "leave out the slow part of a demo (min-isr: the gateway's 30 s delivery timeout)")
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: skein-lab [-v] [-keep] [-short] [-bin-dir DIR] DEMO\n\ndemos:\n")
		for _, d := range lab.Demos {
			fmt.Fprintf(os.Stderr, "  %-11s %s\n", d.Name, d.What)
		}
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		os.Exit(2)
	}
	if *binDir == "" {
		self, err := os.Executable()
		if err == nil {
			self, err = filepath.EvalSymlinks(self)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "skein-lab:", err)
			os.Exit(1)
		}
		*binDir = filepath.Dir(self)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	_, err := lab.Run(ctx, fs.Arg(0), lab.Options{BinDir: *binDir, Out: os.Stdout, Verbose: *verbose, Short: *short, KeepData: *keep})
	if err != nil {
		fmt.Fprintf(os.Stderr, "skein-lab %s: %v\n", fs.Arg(0), err)
		os.Exit(1)
	}
	fmt.Printf("(demo %s took %v)\n", fs.Arg(0), time.Since(start).Round(100*time.Millisecond))
}
