package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"

	"skein/libs/compactor"
)

const (
	prefixLog    = 'l'
	prefixStable = 's'
	entryVersion = 1
	headerSize   = 1 + 8 + 1 + 8 + 4
)

// errNotFound is the error hashicorp/raft recognises, by its text, as "no
// such stable key".
var errNotFound = errors.New("not found")

// Store is a raft.LogStore and raft.StableStore over badger.
type Store struct {
	db        *badger.DB
	compactor *compactor.Compactor
}

var (
	_ raft.LogStore    = (*Store)(nil)
	_ raft.StableStore = (*Store)(nil)
)

// Open opens (or creates) the store in dir.
func Open(dir string, logger *slog.Logger) (*Store, error) {
	if logger == nil {
		logger = slog.Default()
	}
	opts := compactor.Options(badger.DefaultOptions(dir)).
		WithSyncWrites(true).
		WithLogger(badgerLogger{logger.With("component", "badger")}).
		// A controller's log is small: keep memory and files small too.
		WithMemTableSize(8 << 20).
		WithValueLogFileSize(64 << 20).
		WithNumMemtables(2).
		WithBlockCacheSize(8 << 20).
		WithIndexCacheSize(4 << 20)
	db, err := badger.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("raftstore: open %s: %w", dir, err)
	}
	return &Store{db: db, compactor: compactor.Start(db, 0, logger.With("component", "badger"))}, nil
}

// Close closes the database.
func (s *Store) Close() error {
	s.compactor.Stop()
	return s.db.Close()
}

func logKey(index uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefixLog
	binary.BigEndian.PutUint64(k[1:], index)
	return k
}

func stableKey(name []byte) []byte { return append([]byte{prefixStable}, name...) }

func encodeLog(l *raft.Log) []byte {
	b := make([]byte, headerSize, headerSize+len(l.Data)+4+len(l.Extensions))
	b[0] = entryVersion
	binary.BigEndian.PutUint64(b[1:], l.Term)
	b[9] = byte(l.Type)
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	binary.BigEndian.PutUint64(b[10:], uint64(at))
	binary.BigEndian.PutUint32(b[18:], uint32(len(l.Data)))
	b = append(b, l.Data...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(l.Extensions)))
	return append(b, l.Extensions...)
}

func decodeLog(index uint64, b []byte, l *raft.Log) error {
	if len(b) < headerSize+4 || b[0] != entryVersion {
		return fmt.Errorf("raftstore: entry %d: bad header", index)
	}
	n := int(binary.BigEndian.Uint32(b[18:]))
	if len(b) < headerSize+n+4 {
		return fmt.Errorf("raftstore: entry %d: data runs past the value", index)
	}
	m := int(binary.BigEndian.Uint32(b[headerSize+n:]))
	if len(b) != headerSize+n+4+m {
		return fmt.Errorf("raftstore: entry %d: length mismatch", index)
	}
	*l = raft.Log{
		Index: index,
		Term:  binary.BigEndian.Uint64(b[1:]),
		Type:  raft.LogType(b[9]),
	}
	if at := int64(binary.BigEndian.Uint64(b[10:])); at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	if n > 0 {
		l.Data = append([]byte(nil), b[headerSize:headerSize+n]...)
	}
	if m > 0 {
		l.Extensions = append([]byte(nil), b[headerSize+n+4:]...)
	}
	return nil
}

// FirstIndex is the first stored entry's index, 0 when the log is empty.
func (s *Store) FirstIndex() (uint64, error) { return s.edge(false) }

// LastIndex is the last stored entry's index, 0 when the log is empty.
func (s *Store) LastIndex() (uint64, error) { return s.edge(true) }

func (s *Store) edge(last bool) (uint64, error) {
	var idx uint64
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Reverse: last, Prefix: []byte{prefixLog}})
		defer it.Close()
		seek := []byte{prefixLog}
		if last {
			seek = logKey(^uint64(0))
		}
		it.Seek(seek)
		if it.ValidForPrefix([]byte{prefixLog}) {
			idx = binary.BigEndian.Uint64(it.Item().Key()[1:])
		}
		return nil
	})
	return idx, err
}

// GetLog reads one entry; raft.ErrLogNotFound when it is not stored.
func (s *Store) GetLog(index uint64, l *raft.Log) error {
	return s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(logKey(index))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return raft.ErrLogNotFound
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { return decodeLog(index, v, l) })
	})
}

// StoreLog stores one entry.
func (s *Store) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs stores entries in one synced write.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, l := range logs {
		if err := wb.Set(logKey(l.Index), encodeLog(l)); err != nil {
			return err
		}
	}
	return wb.Flush()
}

// DeleteRange deletes entries min..max, both included.
func (s *Store) DeleteRange(lo, hi uint64) error {
	if lo > hi {
		return nil
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte{prefixLog}})
		defer it.Close()
		for it.Seek(logKey(lo)); it.ValidForPrefix([]byte{prefixLog}); it.Next() {
			k := it.Item().KeyCopy(nil)
			if binary.BigEndian.Uint64(k[1:]) > hi {
				break
			}
			if err := wb.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return wb.Flush()
}

// Set stores a stable value.
func (s *Store) Set(key, val []byte) error {
	return s.db.Update(func(txn *badger.Txn) error { return txn.Set(stableKey(key), append([]byte(nil), val...)) })
}

// Get reads a stable value; an error reading "not found" when absent.
func (s *Store) Get(key []byte) ([]byte, error) {
	var out []byte
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(stableKey(key))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return errNotFound
		}
		if err != nil {
			return err
		}
		out, err = item.ValueCopy(nil)
		return err
	})
	return out, err
}

// SetUint64 stores a stable number.
func (s *Store) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 reads a stable number; an error reading "not found" when absent.
func (s *Store) GetUint64(key []byte) (uint64, error) {
	b, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("raftstore: stable key %q holds %d bytes, not 8", key, len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// badgerLogger sends badger's chatter to slog, its debug and info lines at
// debug level.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any)   { b.l.Error(fmt.Sprintf(f, a...)) }
func (b badgerLogger) Warningf(f string, a ...any) { b.l.Warn(fmt.Sprintf(f, a...)) }
func (b badgerLogger) Infof(f string, a ...any)    { b.l.Debug(fmt.Sprintf(f, a...)) }
func (b badgerLogger) Debugf(f string, a ...any)   { b.l.Debug(fmt.Sprintf(f, a...)) }
