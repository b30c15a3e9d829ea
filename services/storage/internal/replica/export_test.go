package replica

import "time"

// SetCleanup replaces what the cleaner does with each hosted log: f is
// given the log's directory name.
func SetCleanup(m *Manager, f func(dir string)) {
	clean := func(h *hosted, _ time.Time) { f(h.key) }
	m.cleanup.Store(&clean)
}
