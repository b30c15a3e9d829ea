package checkpoint

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Memory is an in-process Store for tests. It behaves as Badger does,
// except that nothing survives the process.
type Memory struct {
	mu      sync.Mutex // guards both maps
	offsets map[Partition]Offsets
	kv      map[string][]byte
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty store.
func NewMemory() *Memory {
	return &Memory{offsets: map[Partition]Offsets{}, kv: map[string][]byte{}}
}

func (m *Memory) SaveOffsets(offsets map[Partition]Offsets) error {
	for p := range offsets {
		if _, err := offsetsKey(p); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	maps.Copy(m.offsets, offsets)
	return nil
}

func (m *Memory) LoadOffsets() (map[Partition]Offsets, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.offsets), nil
}

func (m *Memory) DeletePartitions(ps ...Partition) error {
	for _, p := range ps {
		if _, err := offsetsKey(p); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range ps {
		delete(m.offsets, p)
	}
	return nil
}

func (m *Memory) Put(key string, value []byte) error {
	if _, err := genericKey(key); err != nil {
		return err
	}
	v := bytes.Clone(value)
	if v == nil {
		v = []byte{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.kv[key] = v
	return nil
}

func (m *Memory) Get(key string) ([]byte, bool, error) {
	if _, err := genericKey(key); err != nil {
		return nil, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.kv[key]
	if !ok {
		return nil, false, nil
	}
	return bytes.Clone(v), true, nil
}

func (m *Memory) Delete(key string) error {
	if _, err := genericKey(key); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.kv, key)
	return nil
}

func (m *Memory) Keys(prefix string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.kv {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (m *Memory) Close() error { return nil }
