package replica

import (
	"time"

	"skein/services/storage/internal/partition"
)

// SetCleanup replaces what the cleaner does with each hosted log: f is
// given the log's directory name.
func SetCleanup(m *Manager, f func(dir string)) {
	clean := func(h *hosted, _ time.Time) { f(h.key) }
	m.cleanup.Store(&clean)
}

// DirName is a partition's directory name in the log directory.
func DirName(tp partition.TP, topicID string) string { return dirName(tp, topicID) }
