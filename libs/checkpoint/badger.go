package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"

	"skein/libs/compactor"
	"skein/libs/errs"
	"skein/libs/spareproc"
)

// Badger is the on-disk Store.
type Badger struct {
	db        *badger.DB
	compactor *compactor.Compactor
}

var _ Store = (*Badger)(nil)

// OpenBadger opens (creating if needed) a checkpoint store in dir. Every
// write is synced. The sizes are small on purpose: checkpoints are a few
// bytes per partition plus snapshots, not a data store.
//
// Storage nodes of earlier versions kept their checkpoints here; OpenFiles
// converts such a store. Badger writes through memory mappings of sparse
// files, so a full disk kills the process with SIGBUS: Files is the store
// storage nodes use.
func OpenBadger(dir string) (*Badger, error) { return openBadger(dir, false) }

// openBadger is OpenBadger; with lockHeld, the caller holds the
// directory's lock and badger does not take it.
func openBadger(dir string, lockHeld bool) (*Badger, error) {
	opts := compactor.Options(badger.DefaultOptions(dir)).
		WithBypassLockGuard(lockHeld).
		WithLogger(nil).
		WithSyncWrites(true).
		WithNumVersionsToKeep(1).
		WithMemTableSize(16 << 20). // a transaction may hold 15% of it: ~2.4 MB
		WithValueThreshold(64 << 10).
		WithNumMemtables(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(4).
		WithBaseTableSize(1 << 20).
		WithValueLogFileSize(16 << 20).
		WithBlockCacheSize(4 << 20).
		WithMetricsEnabled(false)
	db, err := badger.Open(opts)
	if err != nil {
		return nil, storageErr("opening checkpoints in "+dir, err)
	}
	return &Badger{db: db, compactor: compactor.Start(db, 0, nil)}, nil
}

// update runs a synced write. While badger waits for the disk (an msync
// of its log, as slow as the disk's cache flush: tens of milliseconds
// behind other writes), the process has a spare processor, so that a
// node with one goes on serving instead of stopping until Go's monitor
// thread notices the blocked call.
func (b *Badger) update(fn func(txn *badger.Txn) error) error {
	return spareproc.During(func() error { return b.db.Update(fn) })
}

func storageErr(what string, err error) error {
	return errs.Errorf(errs.KafkaStorageError, "%s: %v", what, err)
}

func (b *Badger) SaveOffsets(offsets map[Partition]Offsets) error {
	keys := make(map[Partition][]byte, len(offsets))
	for p := range offsets {
		k, err := offsetsKey(p)
		if err != nil {
			return err
		}
		keys[p] = k
	}
	// One transaction: all or nothing. Badger bounds a transaction (15% of
	// the 16 MiB memtable, some 60,000 partitions' offsets); past that it
	// fails with ErrTxnTooBig rather than writing part of the map.
	err := b.update(func(txn *badger.Txn) error {
		for p, o := range offsets {
			if err := txn.Set(keys[p], encodeOffsets(o)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return storageErr("saving offsets", err)
	}
	return nil
}

func (b *Badger) LoadOffsets() (map[Partition]Offsets, error) {
	out := map[Partition]Offsets{}
	err := b.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(offsetsPrefix)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			p, err := parseOffsetsKey(item.Key())
			if err != nil {
				return fmt.Errorf("key %q: %w", item.Key(), err)
			}
			if err := item.Value(func(v []byte) error {
				o, err := decodeOffsets(v)
				out[p] = o
				return err
			}); err != nil {
				return fmt.Errorf("offsets of %v: %w", p, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, storageErr("loading offsets", err)
	}
	return out, nil
}

func (b *Badger) DeletePartitions(ps ...Partition) error {
	keys := make([][]byte, 0, len(ps))
	for _, p := range ps {
		k, err := offsetsKey(p)
		if err != nil {
			return err
		}
		keys = append(keys, k)
	}
	// In transactions of at most a thousand keys: badger refuses one too
	// big for its memtable.
	for chunk := range slices.Chunk(keys, 1000) {
		err := b.update(func(txn *badger.Txn) error {
			for _, k := range chunk {
				if err := txn.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return storageErr("deleting offsets", err)
		}
	}
	return nil
}

func (b *Badger) Put(key string, value []byte) error {
	k, err := genericKey(key)
	if err != nil {
		return err
	}
	v := bytes.Clone(value)
	if v == nil {
		v = []byte{}
	}
	if err := b.update(func(txn *badger.Txn) error { return txn.Set(k, v) }); err != nil {
		return storageErr("putting "+key, err)
	}
	return nil
}

func (b *Badger) Get(key string) ([]byte, bool, error) {
	k, err := genericKey(key)
	if err != nil {
		return nil, false, err
	}
	var v []byte
	err = b.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(k)
		if err != nil {
			return err
		}
		v, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, storageErr("getting "+key, err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, true, nil
}

func (b *Badger) Delete(key string) error {
	k, err := genericKey(key)
	if err != nil {
		return err
	}
	if err := b.update(func(txn *badger.Txn) error { return txn.Delete(k) }); err != nil {
		return storageErr("deleting "+key, err)
	}
	return nil
}

func (b *Badger) Keys(prefix string) ([]string, error) {
	var out []string
	err := b.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: append([]byte(genericPrefix), prefix...)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			out = append(out, string(it.Item().Key()[len(genericPrefix):]))
		}
		return nil
	})
	if err != nil {
		return nil, storageErr("listing keys", err)
	}
	return out, nil
}

// Close flushes and closes the database.
func (b *Badger) Close() error {
	b.compactor.Stop()
	if err := b.db.Close(); err != nil {
		return storageErr("closing checkpoints", err)
	}
	return nil
}
