package faultkit

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const tmpfsMagic = 0x01021994

// A directory a process has not made yet is put on a tmpfs all the same;
// one with files keeps them.
func TestMountTmpfs(t *testing.T) {
	base := t.TempDir()
	if os.Geteuid() != 0 {
		// Without root it refuses, and leaves the directory where it was.
		dir := filepath.Join(base, "logs")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := MountTmpfs(dir, "1m"); err == nil || !strings.Contains(err.Error(), "needs root") {
			t.Fatalf("MountTmpfs without root: %v, want a refusal naming root", err)
		}
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("the refused directory moved: %v", err)
		}
		return
	}
	full := filepath.Join(base, "full")
	if err := os.MkdirAll(full, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "segment"), []byte("records"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(base, "not-made-yet"), full} {
		unmount, err := MountTmpfs(dir, "1m")
		if unmount != nil {
			defer unmount()
		}
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		if st.Type != tmpfsMagic {
			t.Fatalf("%s is on file system type %#x, not a tmpfs", dir, st.Type)
		}
	}
	if b, err := os.ReadFile(filepath.Join(full, "segment")); err != nil || string(b) != "records" {
		t.Fatalf("the moved file reads %q, %v", b, err)
	}
}
