// Package dirid gives a storage node's data directory an identity: a random
// id written into the directory when it is first used. The node registers
// with it, and the controllers compare it with the one they have on record:
// a node that comes back with another has lost its logs (a replaced disk, a
// volume that was not kept), and must not lead a partition again on the
// strength of having been its last in-sync replica.
package dirid

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// FileName is the id's file in the data directory.
const FileName = "data-dir.id"

// Load answers the id of the data directory dir, creating the directory and
// writing a new id when it has none. The new id is on disk (synced, and the
// directory synced) before Load answers it.
func Load(dir string) (string, error) {
	path := filepath.Join(dir, FileName)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(b))
		if !valid(id) {
			return "", fmt.Errorf("%s holds %q, not a data directory id (32 hex digits): a damaged file; removing it gives the directory a new id, and the controllers then treat this node's logs as lost", path, truncate(id))
		}
		return id, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("reading the data directory id: %w", err)
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	if err := write(dir, path, id); err != nil {
		return "", fmt.Errorf("writing the data directory id: %w", err)
	}
	return id, nil
}

func valid(id string) bool {
	if len(id) != 32 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// write puts id in path through a temporary file, so that a crash leaves
// either no id or the whole id.
func write(dir, path, id string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.WriteString(id + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
