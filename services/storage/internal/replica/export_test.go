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

// SnapshotProducers saves every hosted replica's producer state now, as
// the periodic snapshot does.
func SnapshotProducers(m *Manager) {
	m.mu.RLock()
	list := make([]*hosted, 0, len(m.hosted))
	for _, h := range m.hosted {
		list = append(list, h)
	}
	m.mu.RUnlock()
	m.snapshotProducers(list)
}
