// Package dirid gives a storage node's data directory an identity: a random
// id written into the directory when it is first used. The node registers
// with it, and the controllers compare it with the one they have on record:
// a node that comes back with another has lost its logs (a replaced disk, a
// volume that was not kept), and must not lead a partition again on the
// strength of having been its last in-sync replica.
//
// The id is kept with the logs it vouches for, in <data-dir>/logs (which
// may be a volume of its own), and beside them in <data-dir>: a log volume
// replaced under a kept data directory comes back without its id, and so
// as another directory.
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

// FileName is the id's file, in the data directory and in its logs
// directory.
const FileName = "data-dir.id"

// LogsDir is the directory of a data directory that holds the logs.
const LogsDir = "logs"

// Load answers the id of the data directory dir, creating the directories
// and writing a new id when it has none. The id of <dir>/logs decides; a
// data directory whose logs directory holds partition directories but no
// id (as written before the id was kept with the logs) gives its own id to
// the logs. Any other logs directory without an id gets a new one, and
// replaced then says why the directory's old id was not kept ("" when it
// had none). Every id written is on disk (synced, and its directory
// synced) before Load answers it.
func Load(dir string) (id, replaced string, err error) {
	logs := filepath.Join(dir, LogsDir)
	logsID, err := read(filepath.Join(logs, FileName))
	if err != nil {
		return "", "", err
	}
	dirID, err := read(filepath.Join(dir, FileName))
	if err != nil {
		return "", "", err
	}
	switch {
	case logsID != "":
		id = logsID
	case dirID != "":
		has, err := holdsPartitions(logs)
		if err != nil {
			return "", "", fmt.Errorf("reading the log directory: %w", err)
		}
		if has {
			id = dirID
		} else {
			replaced = fmt.Sprintf("%s names directory id %s, but %s holds neither that id nor any partition directory: a log volume replaced or emptied, whose logs are lost (or a node that held no partition when it first started with this version, which loses nothing); the node registers with a new id", filepath.Join(dir, FileName), dirID, logs)
		}
	}
	if id == "" {
		var raw [16]byte
		_, _ = rand.Read(raw[:])
		id = hex.EncodeToString(raw[:])
	}
	if logsID != id {
		if err := write(logs, filepath.Join(logs, FileName), id); err != nil {
			return "", "", fmt.Errorf("writing the data directory id: %w", err)
		}
	}
	if dirID != id {
		if err := write(dir, filepath.Join(dir, FileName), id); err != nil {
			return "", "", fmt.Errorf("writing the data directory id: %w", err)
		}
	}
	return id, replaced, nil
}

// read answers the id in path, "" when there is no such file.
func read(path string) (string, error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("reading the data directory id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if !valid(id) {
		return "", fmt.Errorf("%s holds %q, not a data directory id (32 hex digits): a damaged file; removing it (and %s beside or under it) gives the directory a new id, and the controllers then treat this node's logs as lost", path, truncate(id), FileName)
	}
	return id, nil
}

// holdsPartitions reports whether the logs directory holds a directory
// other than a file system's own (lost+found) or a hidden one.
func holdsPartitions(logs string) (bool, error) {
	entries, err := os.ReadDir(logs)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if e.IsDir() && e.Name() != "lost+found" && !strings.HasPrefix(e.Name(), ".") {
			return true, nil
		}
	}
	return false, nil
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
