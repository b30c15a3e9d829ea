// Package procenv builds the environment a launcher starts a Skein process
// with: the GOMAXPROCS it was given and the Go runtime setting every Skein
// process runs with by default. skein dev and the test clusters share it,
// so that tests run processes as users do.
package procenv

import (
	"fmt"
	"strings"
)

// SteadySysmon is the GODEBUG setting that keeps the Go runtime's monitor
// thread (sysmon) on its own tick. Without it, sysmon sleeps whenever the
// process is idle and the process's next system call wakes it; it then
// polls every 20 µs until the process is idle again. A server that wakes
// for every message therefore wakes a second thread each time, and pays
// several context switches for it. A positive schedtrace keeps sysmon
// from that sleep: it ticks on its own, at most every 10 ms when there is
// nothing for it to do, and no system call wakes it. The other effect of
// schedtrace, a one-line scheduler summary on stderr each time its period
// passes, happens once every 24.8 days of the machine's uptime (the
// period is the largest schedtrace takes, in milliseconds, and it is
// measured from the machine's boot).
const SteadySysmon = "schedtrace=2147483647"

// Env answers the environment of a process the cluster starts: base
// (the inherited one) with GOMAXPROCS when gomaxprocs is positive, and,
// when steadySysmon, SteadySysmon added to GODEBUG unless GODEBUG already
// sets schedtrace (whoever set it keeps it).
func Env(base []string, gomaxprocs int, steadySysmon bool) []string {
	env := make([]string, 0, len(base)+2)
	godebug := ""
	for _, kv := range base {
		switch {
		case gomaxprocs > 0 && strings.HasPrefix(kv, "GOMAXPROCS="):
			continue
		case steadySysmon && strings.HasPrefix(kv, "GODEBUG="):
			godebug = strings.TrimPrefix(kv, "GODEBUG=") // the last one wins, as for exec
			continue
		}
		env = append(env, kv)
	}
	if gomaxprocs > 0 {
		env = append(env, fmt.Sprintf("GOMAXPROCS=%d", gomaxprocs))
	}
	if steadySysmon {
		switch {
		case setsSchedtrace(godebug):
		case godebug == "":
			godebug = SteadySysmon
		default:
			godebug += "," + SteadySysmon
		}
		env = append(env, "GODEBUG="+godebug)
	}
	return env
}

// setsSchedtrace reports whether godebug sets schedtrace, read as the
// runtime reads it: comma-separated key=value fields, spaces not trimmed.
func setsSchedtrace(godebug string) bool {
	for field := range strings.SplitSeq(godebug, ",") {
		if k, _, _ := strings.Cut(field, "="); k == "schedtrace" {
			return true
		}
	}
	return false
}
