package devcluster

import "syscall"

// childProcAttr puts a child in its own process group and has the kernel
// send it SIGTERM when `skein dev` dies without stopping it (SIGKILL), so
// that it stops as on a Ctrl-C instead of running on, holding the
// cluster's ports.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
