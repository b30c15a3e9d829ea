package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"skein/libs/errs"
	"skein/libs/spareproc"
)

// Files is the on-disk Store: plain files, as Kafka keeps its checkpoint
// files, each written whole and fsynced (a generic key's to a temporary
// file renamed into place; the offsets over the older of two files). Nothing
// is memory-mapped, so a full disk fails a write with an error the caller
// logs and retries, and never faults the process (a store that writes
// through a mapping of a sparse file is killed by SIGBUS when the disk has
// no block left for the page it touches).
//
// Layout of its directory:
//
//	LOCK         held (flock) while a process has the store open
//	offsets.0/1  every partition's offsets (see encodeOffsetsFile), written
//	             in turn: each save overwrites the older of the two and
//	             fsyncs it, so the newer one is whole whatever a crash cuts
//	             (one fsync a save, no rename: the offsets are saved every
//	             second)
//	kv/          one file per generic key, the key's "/"-separated parts as
//	             directories: a CRC-32C of the value, then the value
//	tmp/         files being written; emptied at open
type Files struct {
	dir  string
	lock *os.File

	mu      sync.Mutex
	offsets map[Partition]Offsets
	seq     int // names temporary files
	// slots are offsets.0 and offsets.1, open; saved is the sequence number
	// of the newest save, which is in slots[saved%2].
	slots [2]*os.File
	saved uint64
	// converted says the open converted an earlier version's badger store.
	converted bool
}

var _ Store = (*Files)(nil)

const (
	lockFile    = "LOCK"
	offsetsFile = "offsets" // offsets.0 and offsets.1
	kvDir       = "kv"
	tmpDir      = "tmp"
	offsetsHead = "SKCP\x01" // magic and version of the offsets file
	maxKeyPart  = 255        // a file name's limit
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// OpenFiles opens (creating if needed) the checkpoint store in dir, and
// locks it against a second process. A directory that holds the badger
// store of an earlier version is converted first: its offsets and keys are
// copied into files, and badger's own files removed once they are.
func OpenFiles(dir string) (*Files, error) {
	for _, d := range []string{dir, filepath.Join(dir, kvDir), filepath.Join(dir, tmpDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, storageErr("creating checkpoints in "+dir, err)
		}
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, storageErr("opening checkpoints in "+dir, err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, errs.Errorf(errs.KafkaStorageError, "the checkpoints in %s are in use by another process (another skein-storage on this data directory?): %v", dir, err)
	}
	f := &Files{dir: dir, lock: lock, offsets: map[Partition]Offsets{}}
	if err := f.open(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (f *Files) open() error {
	tmp := filepath.Join(f.dir, tmpDir)
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return storageErr("listing "+tmp, err)
	}
	for _, e := range entries {
		_ = os.Remove(filepath.Join(tmp, e.Name())) // a write a crash cut short
	}
	created := false
	found, written := false, 0 // a whole save; slots with any bytes at all
	var damage []string
	for i := range f.slots {
		path := filepath.Join(f.dir, offsetsFile+"."+strconv.Itoa(i))
		created = created || !fileExists(path)
		if f.slots[i], err = os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644); err != nil {
			return storageErr("opening "+path, err)
		}
		raw, err := io.ReadAll(f.slots[i])
		if err != nil {
			return storageErr("reading "+path, err)
		}
		if len(raw) == 0 {
			continue
		}
		written++
		seq, offsets, err := decodeOffsetsFile(raw)
		if err != nil {
			damage = append(damage, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		if !found || seq > f.saved {
			found, f.saved, f.offsets = true, seq, offsets
		}
	}
	if created {
		if err := syncDir(f.dir); err != nil {
			return storageErr("creating the offsets files", err)
		}
	}
	hasBadger := fileExists(filepath.Join(f.dir, "MANIFEST"))
	if written == 2 && !found {
		// Neither holds a whole save: a torn save leaves the other one
		// whole, so this is damage. (One file written and torn, the other
		// empty, is the first save cut short: nothing was saved yet.)
		return errs.Errorf(errs.KafkaStorageError, "the checkpoint files are damaged (%s): removing %s.0 and %s.1 makes the node recover every log from its segments and take its offsets from the leaders",
			strings.Join(damage, "; "), filepath.Join(f.dir, offsetsFile), filepath.Join(f.dir, offsetsFile))
	}
	switch {
	case !found && hasBadger:
		return f.convertBadger()
	case hasBadger && f.badgerNewer():
		// An earlier version ran on this directory after it was converted
		// (a rollback): its store is the newer one.
		if err := os.RemoveAll(filepath.Join(f.dir, kvDir)); err != nil {
			return storageErr("removing checkpoints older than the badger store", err)
		}
		if err := os.MkdirAll(filepath.Join(f.dir, kvDir), 0o755); err != nil {
			return storageErr("creating checkpoints in "+f.dir, err)
		}
		f.offsets = map[Partition]Offsets{}
		return f.convertBadger()
	case hasBadger:
		// Converted, but stopped before badger's files were removed.
		return f.removeBadger()
	}
	return nil
}

// badgerNewer reports whether a badger store in the directory was written
// after the newest offsets save: an earlier version wrote it after the
// conversion (the conversion closes badger before its first save).
func (f *Files) badgerNewer() bool {
	newest := func(match func(string) bool) (t time.Time) {
		entries, _ := os.ReadDir(f.dir)
		for _, e := range entries {
			if !match(e.Name()) {
				continue
			}
			if fi, err := e.Info(); err == nil && fi.ModTime().After(t) {
				t = fi.ModTime()
			}
		}
		return t
	}
	files := newest(func(n string) bool { return strings.HasPrefix(n, offsetsFile+".") })
	badger := newest(func(n string) bool {
		return n == "MANIFEST" || strings.HasSuffix(n, ".vlog") || strings.HasSuffix(n, ".mem") || strings.HasSuffix(n, ".sst")
	})
	return badger.After(files)
}

// convertBadger copies an earlier version's badger store into files: the
// keys first, the offsets last (a whole save of them says the conversion
// is done), then removes badger's files.
func (f *Files) convertBadger() error {
	b, err := openBadger(f.dir, true)
	if err != nil {
		return err
	}
	offsets, err := b.LoadOffsets()
	var keys []string
	if err == nil {
		keys, err = b.Keys("")
	}
	for _, k := range keys {
		v, ok, gerr := b.Get(k)
		if gerr == nil && ok {
			gerr = f.Put(k, v)
		}
		if gerr != nil {
			err = gerr
			break
		}
	}
	err = errors.Join(err, b.Close())
	if err != nil {
		return errs.Errorf(errs.KafkaStorageError, "converting the checkpoints in %s from badger: %v", f.dir, err)
	}
	if err := f.SaveOffsets(offsets); err != nil {
		return err
	}
	f.converted = true
	return f.removeBadger()
}

// Converted reports whether the open converted the badger store of an
// earlier version (its offsets and keys are now in files, and its own
// files are gone).
func (f *Files) Converted() bool { return f.converted }

// removeBadger removes what an earlier version's badger store left.
func (f *Files) removeBadger() error {
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		return storageErr("listing "+f.dir, err)
	}
	for _, e := range entries {
		n := e.Name()
		switch {
		case n == "MANIFEST", n == "KEYREGISTRY", n == "DISCARD",
			strings.HasSuffix(n, ".sst"), strings.HasSuffix(n, ".vlog"), strings.HasSuffix(n, ".mem"):
			if err := os.Remove(filepath.Join(f.dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return storageErr("removing the converted badger store", err)
			}
		}
	}
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// encodeOffsetsFile: offsetsHead, the save's sequence number (uint64 big
// endian), then per partition the topic's length (uint16 big endian), the
// topic, the partition (int32 big endian) and its offsets as encodeOffsets
// encodes them; then a CRC-32C of all before it.
func encodeOffsetsFile(seq uint64, offsets map[Partition]Offsets) []byte {
	ps := slices.SortedFunc(maps.Keys(offsets), func(a, b Partition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
	out := binary.BigEndian.AppendUint64([]byte(offsetsHead), seq)
	for _, p := range ps {
		out = binary.BigEndian.AppendUint16(out, uint16(len(p.Topic)))
		out = append(out, p.Topic...)
		out = binary.BigEndian.AppendUint32(out, uint32(p.Partition))
		out = append(out, encodeOffsets(offsets[p])...)
	}
	return binary.BigEndian.AppendUint32(out, crc32.Checksum(out, castagnoli))
}

func decodeOffsetsFile(raw []byte) (seq uint64, _ map[Partition]Offsets, _ error) {
	if len(raw) < len(offsetsHead)+8+4 || string(raw[:len(offsetsHead)]) != offsetsHead {
		return 0, nil, errors.New("not a checkpoint file of this version")
	}
	body, sum := raw[:len(raw)-4], binary.BigEndian.Uint32(raw[len(raw)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return 0, nil, errors.New("checksum mismatch")
	}
	seq = binary.BigEndian.Uint64(body[len(offsetsHead):])
	out := map[Partition]Offsets{}
	for rest := body[len(offsetsHead)+8:]; len(rest) > 0; {
		if len(rest) < 2 {
			return 0, nil, errCorrupt
		}
		n := int(binary.BigEndian.Uint16(rest))
		if len(rest) < 2+n+4+offsetsLen {
			return 0, nil, errCorrupt
		}
		p := Partition{Topic: string(rest[2 : 2+n]), Partition: int32(binary.BigEndian.Uint32(rest[2+n:]))}
		o, err := decodeOffsets(rest[2+n+4 : 2+n+4+offsetsLen])
		if err != nil {
			return 0, nil, err
		}
		out[p] = o
		rest = rest[2+n+4+offsetsLen:]
	}
	return seq, out, nil
}

// saveOffsetsLocked writes next over the older slot and fsyncs it.
func (f *Files) saveOffsetsLocked(next map[Partition]Offsets) error {
	seq := f.saved + 1
	data := encodeOffsetsFile(seq, next)
	slot := f.slots[seq%2]
	err := spareproc.During(func() error {
		if _, err := slot.WriteAt(data, 0); err != nil {
			return err
		}
		if err := slot.Truncate(int64(len(data))); err != nil {
			return err
		}
		return slot.Sync()
	})
	if err != nil {
		return err
	}
	f.saved, f.offsets = seq, next
	return nil
}

// writeFile writes data to path durably: a temporary file, fsynced,
// renamed over path, and path's directory fsynced.
func (f *Files) writeFile(path string, data []byte) error {
	f.seq++
	tmp := filepath.Join(f.dir, tmpDir, "w-"+strconv.Itoa(f.seq))
	return spareproc.During(func() error {
		w, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		if err == nil {
			err = w.Sync()
		}
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp, path)
		}
		if err != nil {
			os.Remove(tmp)
			return err
		}
		return syncDir(filepath.Dir(path))
	})
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}

func (f *Files) SaveOffsets(offsets map[Partition]Offsets) error {
	for p := range offsets {
		if _, err := offsetsKey(p); err != nil {
			return err
		}
		if len(p.Topic) > 1<<16-1 {
			return errs.Errorf(errs.InvalidTopic, "topic name of %d bytes cannot be checkpointed", len(p.Topic))
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	next := maps.Clone(f.offsets)
	maps.Copy(next, offsets)
	if err := f.saveOffsetsLocked(next); err != nil {
		return storageErr("saving offsets", err)
	}
	return nil
}

func (f *Files) LoadOffsets() (map[Partition]Offsets, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.offsets), nil
}

func (f *Files) DeletePartitions(ps ...Partition) error {
	for _, p := range ps {
		if _, err := offsetsKey(p); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var next map[Partition]Offsets
	for _, p := range ps {
		if _, ok := f.offsets[p]; ok {
			if next == nil {
				next = maps.Clone(f.offsets)
			}
			delete(next, p)
		}
	}
	if next == nil {
		return nil
	}
	if err := f.saveOffsetsLocked(next); err != nil {
		return storageErr("deleting offsets", err)
	}
	return nil
}

// keyPath answers where a generic key's file is: its "/"-separated parts,
// each a file name, under kv/.
func (f *Files) keyPath(key string) (string, error) {
	if _, err := genericKey(key); err != nil {
		return "", err
	}
	parts := strings.Split(key, "/")
	for _, p := range parts {
		if p == "" || p == "." || p == ".." || len(p) > maxKeyPart || strings.IndexByte(p, 0) >= 0 {
			return "", errs.Errorf(errs.InvalidRequest, "checkpoint key %q: each part between slashes must be a file name", key)
		}
	}
	return filepath.Join(append([]string{f.dir, kvDir}, parts...)...), nil
}

func (f *Files) Put(key string, value []byte) error {
	path, err := f.keyPath(key)
	if err != nil {
		return err
	}
	data := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(value)), crc32.Checksum(value, castagnoli))
	data = append(data, value...)
	f.mu.Lock()
	defer f.mu.Unlock()
	err = f.makeParents(filepath.Dir(path))
	if err == nil {
		err = f.writeFile(path, data)
	}
	if err != nil {
		return storageErr("putting "+key, err)
	}
	return nil
}

// makeParents creates dir and the directories above it up to kv/, and
// fsyncs the directory each new one is in.
func (f *Files) makeParents(dir string) error {
	if fileExists(dir) {
		return nil
	}
	if err := f.makeParents(filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(filepath.Dir(dir))
}

func (f *Files) Get(key string) ([]byte, bool, error) {
	path, err := f.keyPath(key)
	if err != nil {
		return nil, false, err
	}
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return nil, false, nil
	case err != nil:
		return nil, false, storageErr("getting "+key, err)
	case len(raw) < 4 || crc32.Checksum(raw[4:], castagnoli) != binary.BigEndian.Uint32(raw):
		return nil, false, errs.Errorf(errs.KafkaStorageError, "getting %s: the file %s is damaged", key, path)
	}
	return raw[4:], true, nil
}

func (f *Files) Delete(key string) error {
	path, err := f.keyPath(key)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	err = os.Remove(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		return storageErr("deleting "+key, err)
	}
	return nil
}

func (f *Files) Keys(prefix string) ([]string, error) {
	root := filepath.Join(f.dir, kvDir)
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			if k := filepath.ToSlash(rel); strings.HasPrefix(k, prefix) {
				out = append(out, k)
			}
		}
		return nil
	})
	if err != nil {
		return nil, storageErr("listing keys", err)
	}
	slices.Sort(out)
	return out, nil
}

// Close releases the lock; every write was durable when it returned.
func (f *Files) Close() error {
	for _, s := range f.slots {
		if s != nil {
			s.Close()
		}
	}
	if err := f.lock.Close(); err != nil {
		return storageErr("closing checkpoints", fmt.Errorf("releasing %s: %w", lockFile, err))
	}
	return nil
}
