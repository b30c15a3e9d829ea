// Package faultkit holds the fault helpers the real-process tests and the
// fault-schedule runner share.
package faultkit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// MountTmpfs puts dir on a tmpfs of the given size ("64m") with the
// contents it had; a dir not made yet (a storage node makes its log
// directory with its first partition) is made empty first. The process
// using dir must be down while it moves. It answers how to unmount it
// (lazily: a process may still hold files there). Mounting needs root.
func MountTmpfs(dir, size string) (unmount func() error, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("mounting a tmpfs needs root")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	saved := dir + ".before-tmpfs"
	if err := os.Rename(dir, saved); err != nil {
		return nil, err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mount -t tmpfs on %s: %v: %s", dir, err, strings.TrimSpace(string(out)))
	}
	unmount = func() error {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			return fmt.Errorf("umount %s: %v: %s", dir, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if out, err := exec.Command("cp", "-a", saved+"/.", dir+"/").CombinedOutput(); err != nil {
		return unmount, fmt.Errorf("copying %s onto the tmpfs: %v: %s", saved, err, strings.TrimSpace(string(out)))
	}
	return unmount, os.RemoveAll(saved)
}

// FillDisk writes path until the file system it is on has no byte left:
// 1 MiB writes, then 4 KiB, then single bytes, each until ENOSPC. It
// answers the bytes written; removing path frees them.
func FillDisk(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	for _, chunk := range []int{1 << 20, 4 << 10, 1} {
		buf := make([]byte, chunk)
		for {
			w, err := f.Write(buf)
			n += int64(w)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				return n, fmt.Errorf("filling %s: %w", path, err)
			}
		}
	}
	return n, nil
}
