// Package compactor compacts a badger database from one goroutine that
// wakes once a second and does nothing unless a level is over its target.
//
// Badger's own compactors each wake every 50 ms whether or not there is
// anything to do. Skein's badger store (a
// controller's Raft log) takes a few kilobytes a second, so those wake-ups
// were most of an idle process's CPU. A store using this package opens
// badger with Options() applied (no compactors of its own) and runs Start
// beside it, stopping it before badger's Close.
package compactor

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// DefaultEvery is how often the level sizes are looked at. A memtable is
// megabytes; level 0 stalls writes only after several flushes past its
// target, which takes far longer than a second at a store's write rate.
const DefaultEvery = time.Second

// Options turns badger's compactors off: Start does their work.
func Options(o badger.Options) badger.Options { return o.WithNumCompactors(0) }

// Due reports whether a compaction is due: some level holds more than its
// target (badger's score above 1: for level 0, more tables than
// NumLevelZeroTables; for the others, more bytes than the level's target).
func Due(levels []badger.LevelInfo) bool {
	for _, l := range levels {
		if l.Score > 1 {
			return true
		}
	}
	return false
}

// Compactor is one store's compaction goroutine.
type Compactor struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Start compacts db every `every` (DefaultEvery when zero) while a level
// is over its target, until Stop. Failures are logged and tried again at
// the next check; they leave the data as it was.
func Start(db *badger.DB, every time.Duration, log *slog.Logger) *Compactor {
	if every <= 0 {
		every = DefaultEvery
	}
	if log == nil {
		log = slog.Default()
	}
	c := &Compactor{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
			}
			if !Due(db.Levels()) {
				continue
			}
			// Flatten compacts level by level until no level is over its
			// target; the stores are small, so this is quick.
			if err := db.Flatten(1); err != nil && !errors.Is(err, badger.ErrDBClosed) {
				log.Warn("badger compaction failed; trying again in a moment", "err", err)
			}
		}
	}()
	return c
}

// Stop ends the goroutine and waits for a compaction in progress. Call it
// before closing the database.
func (c *Compactor) Stop() {
	c.once.Do(func() { close(c.stop) })
	<-c.done
}
