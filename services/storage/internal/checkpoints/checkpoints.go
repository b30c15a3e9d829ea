// Package checkpoints keeps a storage node's per-partition checkpoints (HW,
// log start offset, recovery point) in badger, keyed by partition directory.
//
//	| key                 | value (big endian)                                  |
//	|---------------------|-----------------------------------------------------|
//	| "ckpt/" + directory | version u8 = 1, HW i64, log start i64, recovery i64 |
//	| "prod/" + directory | the replica's producer snapshot (JSON)              |
package checkpoints

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"skein/services/storage/internal/replica"
)

// Store is a badger-backed replica.Checkpoints.
type Store struct{ db *badger.DB }

// Open opens (creating) the store in dir.
func Open(dir string) (*Store, error) {
	opts := badger.DefaultOptions(dir).WithLogger(nil).WithNumVersionsToKeep(1).
		WithMemTableSize(8 << 20).WithValueLogFileSize(16 << 20).WithNumMemtables(2).WithBlockCacheSize(1 << 20)
	db, err := badger.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("checkpoints in %s: %w", dir, err)
	}
	return &Store{db: db}, nil
}

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

func key(k string) []byte { return []byte("ckpt/" + k) }

// Get reads a checkpoint; ok is false when there is none.
func (s *Store) Get(k string) (replica.Checkpoint, bool, error) {
	var c replica.Checkpoint
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(key(k))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) != 25 || v[0] != 1 {
				return fmt.Errorf("checkpoint %s: %d bytes, version %d", k, len(v), v[0])
			}
			c.HW = int64(binary.BigEndian.Uint64(v[1:]))
			c.LogStartOffset = int64(binary.BigEndian.Uint64(v[9:]))
			c.RecoveryPoint = int64(binary.BigEndian.Uint64(v[17:]))
			return nil
		})
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return replica.Checkpoint{}, false, nil
	}
	return c, err == nil, err
}

// Put writes a checkpoint (durably: badger syncs its write-ahead log).
func (s *Store) Put(k string, c replica.Checkpoint) error {
	v := make([]byte, 25)
	v[0] = 1
	binary.BigEndian.PutUint64(v[1:], uint64(c.HW))
	binary.BigEndian.PutUint64(v[9:], uint64(c.LogStartOffset))
	binary.BigEndian.PutUint64(v[17:], uint64(c.RecoveryPoint))
	return s.db.Update(func(txn *badger.Txn) error { return txn.Set(key(k), v) })
}

// GetProducers reads a producer snapshot; ok is false when there is none.
func (s *Store) GetProducers(k string) ([]byte, bool, error) {
	var out []byte
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte("prod/" + k))
		if err != nil {
			return err
		}
		out, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, nil
	}
	return out, err == nil, err
}

// PutProducers writes a producer snapshot.
func (s *Store) PutProducers(k string, snapshot []byte) error {
	return s.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("prod/"+k), snapshot) })
}

// Delete removes a partition's checkpoint and producer snapshot.
func (s *Store) Delete(k string) error {
	return s.db.Update(func(txn *badger.Txn) error {
		if err := txn.Delete(key(k)); err != nil {
			return err
		}
		return txn.Delete([]byte("prod/" + k))
	})
}
