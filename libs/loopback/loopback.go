// Package loopback picks free loopback addresses for tests that start
// servers on ports they name up front (Raft peers, a process's flags).
package loopback

import (
	"net"
	"testing"
)

// Addrs answers n distinct free 127.0.0.1 addresses. Every port stays
// held until all n are picked, so the kernel cannot hand the same one out
// twice; they are released before Addrs returns, for the caller to bind.
func Addrs(t testing.TB, n int) []string {
	t.Helper()
	held := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	out := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		out = append(out, l.Addr().String())
	}
	return out
}
