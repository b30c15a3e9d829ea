// Package spareproc lends a Go process one more processor (GOMAXPROCS)
// while a call waits in the kernel, typically for a disk to sync.
//
// A goroutine blocked in a system call keeps its processor until the Go
// runtime's monitor thread takes it away, which it does on its second look
// at the call; a monitor that has had nothing to do for a while looks every
// 10 ms. A process with one processor (a storage node sharing a small
// machine with others) therefore stops entirely for 10-20 ms behind an
// fsync the disk is slow to finish, and every request it was serving
// waits. During raises GOMAXPROCS by one for as long as its call runs, so
// the rest of the process goes on beside it, and puts it back after.
//
// Each change of GOMAXPROCS stops the world for a moment (tens of
// microseconds), so During is for calls made a few times a second, such
// as checkpoints, not for an fsync per request.
package spareproc

import (
	"os"
	"runtime"
	"sync"
)

// lender counts the calls under way and keeps GOMAXPROCS at the process's
// own setting plus one per call.
type lender struct {
	mu     sync.Mutex
	active int
	base   int
	get    func() int // the current GOMAXPROCS
	set    func(int)  // sets GOMAXPROCS explicitly
	// restore puts back the setting the process had before the first
	// call: base, or the runtime's default when the process had not
	// chosen one (so that the runtime keeps following the CPU limit).
	restore func(base int)
}

func (l *lender) enter() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.active == 0 {
		l.base = l.get()
	}
	l.active++
	l.set(l.base + l.active)
}

func (l *lender) exit() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.active--
	if l.active == 0 {
		l.restore(l.base)
		return
	}
	l.set(l.base + l.active)
}

var std = &lender{
	get: func() int { return runtime.GOMAXPROCS(0) },
	set: func(n int) { runtime.GOMAXPROCS(n) },
	restore: func(base int) {
		if os.Getenv("GOMAXPROCS") == "" {
			runtime.SetDefaultGOMAXPROCS()
			return
		}
		runtime.GOMAXPROCS(base)
	},
}

// During runs f with one more processor than the process has otherwise,
// and returns f's error. Calls may overlap: each adds one while it runs.
// The process must not set GOMAXPROCS itself meanwhile (Skein's processes
// take it from the environment or the runtime's default).
func During(f func() error) error {
	std.enter()
	defer std.exit()
	return f()
}
