package replica

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"skein/libs/checkpoint"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/services/storage/internal/partition"
)

// A partition directory left behind by a topic deleted (or a replica moved
// away) while this node was down is stray: no image will ever name it, so
// nothing would remove it. The node removes such directories once, after
// it starts, from the first image that is at least as new as every image
// it created a directory from: an older image (a controller that has not
// caught up) may not know of a topic created since, and the node must not
// take a live replica's directory for a stray.
//
// dirsVersionKey holds, in the checkpoint store, the version of the newest
// image a partition directory was created from.
const dirsVersionKey = "metadata/dirs-version"

// partitionDir is how a partition directory is named (dirName): the topic
// (perhaps cut short), the partition and the topic id.
var partitionDir = regexp.MustCompile(`^(.*)-([0-9]+)-([0-9A-Za-z][0-9A-Za-z-]*)$`)

// uuidDir is a partition directory whose topic id is a UUID, the form
// controllers give: its topic and partition can be read off its name.
var uuidDir = regexp.MustCompile(`^(.+)-([0-9]+)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func encodeVersion(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// dirsVersionLocked reads, once, the version new directories were last
// recorded at; found is false when the store has none.
func (m *Manager) dirsVersionLocked() (v uint64, found bool, err error) {
	if !m.dirsVersionRead {
		raw, ok, err := m.ckpt.Get(dirsVersionKey)
		if err != nil {
			return 0, false, err
		}
		if ok && len(raw) == 8 {
			m.dirsVersion, m.dirsVersionFound = binary.BigEndian.Uint64(raw), true
		}
		m.dirsVersionRead = true
	}
	return m.dirsVersion, m.dirsVersionFound, nil
}

func (m *Manager) putDirsVersionLocked(v uint64) error {
	if err := m.ckpt.Put(dirsVersionKey, encodeVersion(v)); err != nil {
		return err
	}
	m.dirsVersion, m.dirsVersionFound = v, true
	return nil
}

// noteDirVersionLocked records, before a partition directory is created
// from the image held now, that directories exist up to its version.
func (m *Manager) noteDirVersionLocked() error {
	if m.image == nil {
		return nil
	}
	v := uint64(m.image.Version())
	stored, found, err := m.dirsVersionLocked()
	if err == nil && (!found || v > stored) {
		err = m.putDirsVersionLocked(v)
	}
	if err != nil {
		return errs.Errorf(errs.KafkaStorageError, "recording the metadata version of a new partition directory: %v", err)
	}
	return nil
}

// sweepStrayLocked removes, once, the partition directories of the log
// directory that im does not assign to this node, when im is at least as
// new as the directories (see above) and the log directory is healthy.
func (m *Manager) sweepStrayLocked(im *metadata.Image) {
	if m.strayChecked || im.Filtered() || m.dirFailed.Load() {
		return
	}
	stored, found, err := m.dirsVersionLocked()
	if err != nil {
		m.log.Warn("cannot read the metadata version of the partition directories; stray directories stay for now", "err", err)
		return
	}
	if !found {
		// Directories made before the version was recorded: this image
		// may be behind them. Record it, and sweep after a later start.
		if err := m.putDirsVersionLocked(uint64(im.Version())); err != nil {
			m.log.Warn("cannot record the metadata version of the partition directories", "err", err)
			return
		}
		m.strayChecked = true
		return
	}
	if uint64(im.Version()) < stored {
		return // a controller that has not caught up: wait for a newer image
	}
	m.strayChecked = true
	entries, err := os.ReadDir(m.logDir())
	if err != nil {
		if !os.IsNotExist(err) {
			m.log.Warn("cannot list the log directory for stray partition directories", "dir", m.logDir(), "err", err)
		}
		return
	}
	expected := map[string]bool{}
	for _, t := range im.Topics() {
		for _, pr := range im.Partitions(t.GetName()) {
			if slices.Contains(pr.GetReplicas(), m.cfg.Self) {
				expected[dirName(partition.TP{Topic: t.GetName(), Partition: pr.GetPartition()}, t.GetTopicId())] = true
			}
		}
	}
	hostedTP := map[checkpoint.Partition]bool{}
	for tp, h := range m.hosted {
		expected[h.key] = true
		hostedTP[checkpoint.Partition{Topic: tp.Topic, Partition: tp.Partition}] = true
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || strings.HasPrefix(name, ".") || expected[name] || !partitionDir.MatchString(name) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(m.logDir(), name)); err != nil {
			m.log.Warn("removing a stray partition directory", "dir", name, "err", err)
			continue
		}
		cleanup := []error{m.ckpt.Delete(producersKey(name))}
		// Its offsets are kept by topic and partition: forgotten when no
		// replica of that name is hosted, and the name was not cut short.
		if g := uuidDir.FindStringSubmatch(name); g != nil && len(name) < maxDirName {
			if p, err := strconv.ParseInt(g[2], 10, 32); err == nil {
				cp := checkpoint.Partition{Topic: g[1], Partition: int32(p)}
				if !hostedTP[cp] {
					cleanup = append(cleanup, m.ckpt.DeletePartition(cp))
					m.forgetSaved(partition.TP{Topic: cp.Topic, Partition: cp.Partition}, name)
				}
			}
		}
		for _, err := range cleanup {
			if err != nil {
				m.log.Warn("removing a stray partition's checkpoint", "dir", name, "err", err)
			}
		}
		m.log.Info("removed a stray partition directory: its topic was deleted, or its replica moved, while this node was down", "dir", name, "metadata_version", im.Version())
	}
}
