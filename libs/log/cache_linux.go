package log

import (
	"os"

	"golang.org/x/sys/unix"
)

// handToDisk starts the write-back of the dirty pages of f in [off,
// off+n) without waiting for it (sync_file_range SYNC_FILE_RANGE_WRITE).
func handToDisk(f *os.File, off, n int64) {
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_ = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE) // advice: see cache.go
		})
	}
}

// dropCache drops the clean cached pages of f in [off, off+n)
// (posix_fadvise POSIX_FADV_DONTNEED, which also starts the write-back of
// dirty ones).
func dropCache(f *os.File, off, n int64) {
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_ = unix.Fadvise(int(fd), off, n, unix.FADV_DONTNEED) // advice: see cache.go
		})
	}
}
