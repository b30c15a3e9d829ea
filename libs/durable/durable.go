// Package durable writes files that must survive a crash whole: the new
// contents or the old, never a mix, and on disk when the call returns.
package durable

import (
	"os"
	"path/filepath"
)

// WriteFile replaces path with data atomically and durably: a temporary
// file beside it, synced, renamed over it, and the directory synced.
func WriteFile(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir syncs a directory, so that the names created, renamed or removed
// in it are on disk.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
