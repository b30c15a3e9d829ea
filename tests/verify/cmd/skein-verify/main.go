// Command skein-verify runs the seeded fault-schedule runner (tests/verify):
// a `skein dev` cluster of its own, acks=all producers and a consumer group
// through the gateway, faults applied one after another from a schedule
// derived from --seed, then a final read, the libs/history audit and a
// table per fault kind. It exits 1 on any anomaly, 2 on bad usage.
//
//	skein-verify [--seed N] [--duration 5m] [--faults leader-kill,...] [-v] [--keep]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"skein/tests/verify"
)

func main() {
	fs := flag.NewFlagSet("skein-verify", flag.ContinueOnError)
	binDir := fs.String("bin-dir", "", "directory holding skein and the service binaries (default: this binary's)")
	seed := fs.Uint64("seed", 0, "seed of the fault schedule (default: from the clock; printed so a run can be replayed)")
	duration := fs.Duration("duration", 5*time.Minute, "apply faults until this has passed (every fault kind at least once)")
	faults := fs.String("faults", "", "comma-separated fault kinds (default all: "+strings.Join(verify.Kinds, ",")+")")
	partitions := fs.Int("partitions", 4, "partitions of the topic")
	verbose := fs.Bool("v", false, "print the history checker's whole table")
	keep := fs.Bool("keep", false, "keep the cluster's data and logs")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if fs.NArg() != 0 {
		fs.Usage()
		os.Exit(2)
	}
	seedSet := false
	fs.Visit(func(f *flag.Flag) { seedSet = seedSet || f.Name == "seed" })
	if !seedSet {
		*seed = uint64(time.Now().UnixNano() % 1_000_000)
	}
	if *binDir == "" {
		self, err := os.Executable()
		if err == nil {
			self, err = filepath.EvalSymlinks(self)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "skein-verify:", err)
			os.Exit(1)
		}
		*binDir = filepath.Dir(self)
	}
	var kinds []string
	if *faults != "" {
		kinds = strings.Split(*faults, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := verify.Run(ctx, verify.Options{BinDir: *binDir, Out: os.Stdout, Seed: *seed, Duration: *duration,
		Kinds: kinds, Partitions: *partitions, Verbose: *verbose, KeepData: *keep})
	if err != nil {
		fmt.Fprintf(os.Stderr, "skein-verify (seed %d): %v\n", *seed, err)
		os.Exit(1)
	}
	if !rep.Valid() {
		fmt.Printf("INVALID (seed %d)\n", *seed)
		os.Exit(1)
	}
	fmt.Printf("VALID: no anomaly (seed %d)\n", *seed)
}
