package replica

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/services/storage/internal/partition"
)

// A partition directory left behind by a topic deleted (or a replica moved
// away) while this node was down is stray: no image will ever name it, so
// nothing would remove it. Once after it starts, the node sets such
// directories aside, renamed with strayExt (as Kafka renames its stray
// logs), for an operator to remove: the log says which, and a mistake (a
// node started with another's id or volume) can be undone by renaming
// them back. It does so only from an image of the same cluster, for the
// same node id, at least as new as every image it had created a directory
// from when it started: an older image (a controller that has not caught
// up) may not know of a topic created since, and the node must not take a
// live replica's directory for a stray.
const strayExt = ".stray"

// dirMarkKey holds, in the checkpoint store, the dirMark of the newest
// image a partition directory was created from.
const dirMarkKey = "metadata/partition-dirs"

type dirMark struct {
	ClusterID string `json:"cluster_id"`
	NodeID    int32  `json:"node_id"`
	Version   uint64 `json:"version"`
}

// partitionDir is how a partition directory is named (dirName): the topic
// (perhaps cut short), the partition and the topic id.
var partitionDir = regexp.MustCompile(`^(.*)-([0-9]+)-([0-9A-Za-z][0-9A-Za-z-]*)$`)

// readDirMarkLocked reads the mark once, before the first image makes
// any directory: what it holds then is startMark.
func (m *Manager) readDirMarkLocked() {
	if m.dirsMarkRead {
		return
	}
	raw, ok, err := m.ckpt.Get(dirMarkKey)
	if err != nil {
		// No directory is made, and none set aside, until it reads.
		m.log.Warn("cannot read the metadata version of the partition directories", "err", err)
		return
	}
	m.dirsMarkRead = true
	if ok && json.Unmarshal(raw, &m.dirsMark) != nil {
		m.dirsMark = dirMark{}
	}
	m.startMark = m.dirsMark
}

// noteDirLocked records, before a partition directory is created from the
// image held now, that directories exist up to its version.
func (m *Manager) noteDirLocked() error {
	if m.image == nil {
		return nil
	}
	if !m.dirsMarkRead {
		// A directory made without its mark could later be taken for a
		// stray: none is made until the mark can be read.
		return errs.Errorf(errs.KafkaStorageError, "the metadata version of the partition directories could not be read from the checkpoint store")
	}
	mark := dirMark{ClusterID: m.image.ClusterID(), NodeID: m.cfg.Self, Version: uint64(m.image.Version())}
	if mark.ClusterID == m.dirsMark.ClusterID && mark.NodeID == m.dirsMark.NodeID && mark.Version <= m.dirsMark.Version {
		return nil
	}
	raw, _ := json.Marshal(mark)
	if err := m.ckpt.Put(dirMarkKey, raw); err != nil {
		return errs.Errorf(errs.KafkaStorageError, "recording the metadata version of a new partition directory: %v", err)
	}
	m.dirsMark = mark
	return nil
}

// setStrayAsideLocked renames, once, the partition directories im does not
// assign to this node, when im may speak for them (see above) and the log
// directory is healthy.
//
// removing names the directories of replicas this image drops, which are
// being removed: they are not strays.
func (m *Manager) setStrayAsideLocked(im *metadata.Image, removing []*hosted) {
	start := m.startMark
	switch {
	case m.strayLooked || !m.dirsMarkRead || im.Filtered() || m.dirFailed.Load():
		return
	case start.Version == 0:
		// No mark when this process started: directories made by a version
		// that kept none, which this image may be behind. Record the
		// newest image it sees, and wait for a start that finds it.
		if err := m.noteDirLocked(); err != nil {
			m.log.Warn("cannot record the metadata version of the partition directories", "err", err)
		}
		return
	case start.ClusterID != im.ClusterID() || start.NodeID != m.cfg.Self:
		m.strayLooked = true
		m.log.Warn("the partition directories were made for another cluster or node id: none is set aside as stray",
			"dirs_cluster_id", start.ClusterID, "dirs_node_id", start.NodeID, "cluster_id", im.ClusterID(), "node_id", m.cfg.Self)
		return
	case uint64(im.Version()) < start.Version:
		return // a controller that has not caught up: wait for a newer image
	}
	m.strayLooked = true
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
	for _, h := range m.hosted {
		expected[h.key] = true
	}
	for _, h := range removing {
		expected[h.key] = true
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || strings.HasPrefix(name, ".") || expected[name] || !partitionDir.MatchString(name) {
			continue
		}
		from, to := filepath.Join(m.logDir(), name), filepath.Join(m.logDir(), name+strayExt)
		if err := os.Rename(from, to); err != nil {
			m.log.Warn("setting a stray partition directory aside", "dir", from, "err", err)
			continue
		}
		m.log.Warn("set a stray partition directory aside: its topic was deleted, or its replica moved, while this node was down; remove it when you are sure",
			"dir", to, "metadata_version", im.Version())
	}
}
