//go:build !linux

package devcluster

import "syscall"

// childProcAttr puts a child in its own process group.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
