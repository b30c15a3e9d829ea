// Command skein is Skein's command line: topic administration, produce and
// consume through a gateway, and `skein dev`, a whole cluster on this
// machine. Run `skein help` for usage.
package main

import (
	"os"

	"skein/cmd/skein/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
}
