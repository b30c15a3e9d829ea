package replica

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/checkpoint"
	"skein/libs/errs"
	plog "skein/libs/log"
	"skein/libs/metadata"
	"skein/services/storage/internal/partition"
	"skein/services/storage/internal/producer"
)

// Fetchers is the follower side (package fetcher).
type Fetchers interface {
	Follow(tp partition.TP, p *partition.Partition, leader int32)
	Unfollow(tp partition.TP)
}

// Config of the manager.
type Config struct {
	Self    int32
	DataDir string
	// ReplicaLagMax is replica.lag.time.max.ms (default 10 s; the dev cluster
	// uses less).
	ReplicaLagMax time.Duration
	// Tick is how often housekeeping runs: ISR checks, flushes due by
	// flush.ms, checkpoints, the log directory's health (default a quarter
	// of ReplicaLagMax, at most 1 s: a lagging follower leaves the ISR
	// within a quarter of the lag it was allowed, and an idle node wakes
	// for this once a second).
	Tick time.Duration
	// CheckpointEvery is how often HW and log state are checkpointed (default 1 s).
	CheckpointEvery time.Duration
	// RetentionEvery is how often retention and compaction run (default 30 s).
	RetentionEvery time.Duration
	// ProducerIDExpiration is how long a producer id without an open
	// transaction may write nothing to a partition before the partition
	// forgets it (Kafka's producer.id.expiration.ms; default 24 h), checked
	// every RetentionEvery.
	ProducerIDExpiration time.Duration
	// ProducerSnapshotEvery is how often producer state is snapshotted
	// (default 30 s), so a restart replays only the log after it.
	ProducerSnapshotEvery time.Duration
	// ProbeEvery is how often, while the log directory has failed, the
	// manager tries whether it is writable again (default 1 s).
	ProbeEvery time.Duration
	// LogCacheWindow is each log's Options.CacheWindow: how many of the
	// newest bytes of a partition's active segment stay in the page cache
	// (0: all of them, as the kernel pleases).
	LogCacheWindow int64
}

// DefaultLogCacheWindow is a storage node's LogCacheWindow unless told
// otherwise: 8 MiB a partition, what followers and tailing consumers read
// (seconds of a partition taking a few MiB a second).
const DefaultLogCacheWindow = 8 << 20

// DefaultProducerIDExpiration is Config.ProducerIDExpiration's default, as
// Kafka's producer.id.expiration.ms.
const DefaultProducerIDExpiration = 24 * time.Hour

// probeBytes is what the directory must take, written and fsynced, before
// failed logs are opened again: a little room, so a disk that frees a few
// bytes does not make the node fail again at its next append.
const probeBytes = 1 << 20

// Manager hosts this node's replicas.
type Manager struct {
	cfg      Config
	log      *slog.Logger
	proposer partition.ISRProposer
	fetchers Fetchers
	ckpt     checkpoint.Store
	now      func() time.Time

	isrShrinks, isrExpands atomic.Int64
	// dirFailed: a log's write or fsync failed, or a log could not be
	// opened for a storage error; heartbeats say so until every log works.
	dirFailed atomic.Bool
	nextProbe time.Time // Run's own
	// cleanup applies retention and compaction to one log, on the
	// cleaner's goroutine (tests replace it).
	cleanup atomic.Pointer[func(h *hosted, now time.Time)]

	// applyMu runs one OnImage at a time, its slow steps (opening new
	// logs, removing deleted ones) included; mu is held only while the
	// replicas are looked up or swapped, so that a metadata change that
	// opens or removes thousands of replicas does not hold up the produce
	// and fetch requests of the others.
	applyMu sync.Mutex
	mu      sync.RWMutex
	hosted  map[partition.TP]*hosted
	image   *metadata.Image
	closed  bool
	// unopened: replicas the image assigns here whose log could not be
	// opened for a storage error, retried when the directory is probed.
	unopened map[partition.TP]error

	// savedMu guards what the checkpoint store is known to hold, so that
	// what has not changed since it was saved is not written again: an
	// idle node would otherwise make a durable write every second. An
	// entry is dropped whenever something else changes the stored value.
	savedMu    sync.Mutex
	savedOffs  map[checkpoint.Partition]checkpoint.Offsets
	savedSnaps map[string][]byte // producer snapshots by key

	// Under mu: the newest image a partition directory was created from,
	// as the store holds it (dirsMark), and what it held when this process
	// got its first image (startMark), which decides whether stray
	// directories are set aside (stray.go).
	dirsMark, startMark       dirMark
	dirsMarkRead, strayLooked bool
	// foreignCluster is the cluster id of the last image refused for not
	// being the directories' cluster ("" once one is applied again).
	foreignCluster string
}

type hosted struct {
	p       *partition.Partition
	log     *plog.Log
	topicID string
	key     string // directory name
	tp      partition.TP
	// topic and part are the records of the image last applied to the
	// replica: an image's records are immutable and shared with the
	// images after it while unchanged, so the same pointers mean nothing
	// to apply.
	topic *controllerv1.TopicRecord
	part  *controllerv1.PartitionRecord
	// dropped: no longer hosted (set under mu). Checkpoints and snapshots
	// taken from a list made before skip it, under savedMu, so they do not
	// write back what removeData deleted.
	dropped atomic.Bool
}

func producersKey(dir string) string { return "producers/" + dir }

// New returns a manager with nothing hosted yet.
func New(cfg Config, log *slog.Logger, proposer partition.ISRProposer, fetchers Fetchers, ckpt checkpoint.Store) *Manager {
	if cfg.ReplicaLagMax <= 0 {
		cfg.ReplicaLagMax = 10 * time.Second
	}
	if cfg.Tick <= 0 {
		cfg.Tick = min(time.Second, cfg.ReplicaLagMax/4)
	}
	if cfg.ProbeEvery <= 0 {
		cfg.ProbeEvery = time.Second
	}
	if cfg.CheckpointEvery <= 0 {
		cfg.CheckpointEvery = time.Second
	}
	if cfg.RetentionEvery <= 0 {
		cfg.RetentionEvery = 30 * time.Second
	}
	if cfg.ProducerSnapshotEvery <= 0 {
		cfg.ProducerSnapshotEvery = 30 * time.Second
	}
	if cfg.ProducerIDExpiration <= 0 {
		cfg.ProducerIDExpiration = DefaultProducerIDExpiration
	}
	m := &Manager{cfg: cfg, log: log, proposer: proposer, fetchers: fetchers, ckpt: ckpt, now: time.Now, hosted: map[partition.TP]*hosted{}, unopened: map[partition.TP]error{},
		savedOffs: map[checkpoint.Partition]checkpoint.Offsets{}, savedSnaps: map[string][]byte{}}
	clean := m.cleanOne
	m.cleanup.Store(&clean)
	return m
}

// Get answers the hosted replica of tp.
func (m *Manager) Get(tp partition.TP) (*partition.Partition, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if h, ok := m.hosted[tp]; ok {
		return h.p, nil
	}
	if err, ok := m.unopened[tp]; ok {
		return nil, err
	}
	if m.image != nil {
		if _, ok := m.image.Partition(tp.Topic, tp.Partition); ok {
			return nil, errs.Errorf(errs.NotLeaderOrFollower, "broker %d hosts no replica of %s", m.cfg.Self, tp)
		}
	}
	return nil, errs.Errorf(errs.UnknownTopicOrPartition, "%s does not exist", tp)
}

// BrokerAddr answers a broker's gRPC address from the latest metadata.
func (m *Manager) BrokerAddr(id int32) (string, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.image == nil {
		return "", false
	}
	b, ok := m.image.Broker(metadata.BrokerID(id))
	if !ok || b.GetGrpcAddr() == "" {
		return "", false
	}
	return b.GetGrpcAddr(), true
}

// DirsClusterID answers the cluster this node's partition directories were
// made for, as the checkpoint store records it ("" while none was made, or
// when the store cannot be read).
func (m *Manager) DirsClusterID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.readDirMarkLocked()
	return m.dirsMark.ClusterID
}

// Image is the latest metadata the manager applied (nil before the first).
func (m *Manager) Image() *metadata.Image {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.image
}

// OnImage reconciles the hosted replicas with a new metadata version. Only
// the replicas whose topic or partition record changed are touched. New
// replicas are opened, and deleted ones removed from disk, without holding
// the lock that requests take: a request for one of them meanwhile is
// answered NOT_LEADER_OR_FOLLOWER (retriable).
func (m *Manager) OnImage(im *metadata.Image) {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.applyImage(im)
}

// applyImage is OnImage with applyMu held.
func (m *Manager) applyImage(im *metadata.Image) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.readDirMarkLocked()
	if own := m.dirsMark.ClusterID; own != "" && im.ClusterID() != own {
		// The partition directories were made for another cluster: its
		// controllers were replaced by a new cluster's (their data
		// directories lost, say), whose image would remove every replica
		// here. Kafka's brokers refuse another cluster id; so does this
		// node, and keeps its logs as they are.
		if m.foreignCluster != im.ClusterID() {
			m.foreignCluster = im.ClusterID()
			m.log.Error("refusing the metadata of another cluster: the partition directories belong to cluster "+own+"; nothing is applied, and no replica is removed (to join the new cluster, start the node on an empty data directory)",
				"cluster_id", im.ClusterID(), "dirs_cluster_id", own)
		}
		m.mu.Unlock()
		return
	}
	m.foreignCluster = ""
	m.image = im
	type opening struct {
		tp   partition.TP
		t    *controllerv1.TopicRecord
		pr   *controllerv1.PartitionRecord
		lcfg plog.Config
		pcfg partition.Config
	}
	var toOpen []opening
	var removed []*hosted
	seen := map[partition.TP]bool{}
	for _, t := range im.Topics() {
		var parsed *topicConfigs // once per topic, for the replicas that need it
		for _, pr := range im.Partitions(t.GetName()) {
			if !slices.Contains(pr.GetReplicas(), m.cfg.Self) {
				continue
			}
			tp := partition.TP{Topic: t.GetName(), Partition: pr.GetPartition()}
			seen[tp] = true
			h, ok := m.hosted[tp]
			if ok && (h.topic == t || proto.Equal(h.topic, t)) && (h.part == pr || proto.Equal(h.part, pr)) {
				// Unchanged: the same records, or equal ones (a whole
				// image sent again, after the watch moved to another
				// controller).
				h.topic, h.part = t, pr
				continue
			}
			if ok && h.topicID != t.GetTopicId() {
				// The topic was deleted and created again under the same name.
				m.dropLocked(tp, h)
				removed = append(removed, h)
				ok = false
			}
			if parsed == nil {
				parsed = parseTopicConfigs(m.cfg, t.GetConfigs())
			}
			lcfg, pcfg, err := parsed.forPartition(tp, m.countISRChange)
			if err == nil {
				pcfg.Truncated = func() { m.savedAfterCut(tp) }
			}
			switch {
			case err != nil:
				m.log.Error("cannot host replica", "partition", tp, "err", err)
				delete(m.unopened, tp)
			case !ok:
				toOpen = append(toOpen, opening{tp, t, pr, lcfg, pcfg})
			default:
				h.log.SetConfig(lcfg)
				h.p.SetConfig(pcfg)
				m.applyLocked(h, t, pr)
				delete(m.unopened, tp)
			}
		}
	}
	for tp, h := range m.hosted {
		if !seen[tp] {
			m.dropLocked(tp, h)
			removed = append(removed, h)
		}
	}
	for tp := range m.unopened {
		if !seen[tp] {
			delete(m.unopened, tp)
		}
	}
	m.setStrayAsideLocked(im, removed)
	var markErr error
	if len(toOpen) > 0 {
		// Directories exist up to this version before the first is made.
		markErr = m.noteDirLocked()
	}
	m.mu.Unlock()

	m.removeData(removed)
	var offsets map[checkpoint.Partition]checkpoint.Offsets // loaded once, for logs already on disk
	for _, o := range toOpen {
		h, err := m.open(o.tp, o.t.GetTopicId(), o.lcfg, o.pcfg, markErr, &offsets)
		m.mu.Lock()
		if err == nil && m.closed {
			m.mu.Unlock()
			h.p.Close()
			_ = h.log.Close()
			return
		}
		if err != nil {
			m.log.Error("cannot host replica", "partition", o.tp, "err", err)
			if errs.Of(err) == errs.KafkaStorageError {
				m.unopened[o.tp] = err
				m.dirFailed.Store(true)
			} else {
				delete(m.unopened, o.tp)
			}
		} else {
			m.hosted[o.tp] = h
			delete(m.unopened, o.tp)
			m.applyLocked(h, o.t, o.pr)
		}
		m.mu.Unlock()
	}
}

// applyLocked hands a replica its partition's state from the image.
func (m *Manager) applyLocked(h *hosted, t *controllerv1.TopicRecord, pr *controllerv1.PartitionRecord) {
	h.topic, h.part = t, pr
	h.p.Apply(partition.State{Leader: pr.GetLeader(), LeaderEpoch: pr.GetLeaderEpoch(), PartitionEpoch: pr.GetPartitionEpoch(), Replicas: pr.GetReplicas(), ISR: pr.GetIsr()})
	switch leader := pr.GetLeader(); {
	case leader == m.cfg.Self || leader < 0:
		m.fetchers.Unfollow(h.tp)
	default:
		m.fetchers.Follow(h.tp, h.p, leader)
	}
}

// LogDirFailed reports whether the log directory has failed: a log's write
// or fsync failed (it refuses writes until reopened) or a replica could not
// be opened. The controller fences the node while it says so.
func (m *Manager) LogDirFailed() bool { return m.dirFailed.Load() }

// checkLogDir notices failed logs and, while there are any, probes the
// directory every ProbeEvery; once it takes probeBytes again, every failed
// log is closed and opened again — recovery cuts whatever a failed write
// left — and the replicas that could not be opened are retried. The node
// then follows the leaders as any restarted replica does.
func (m *Manager) checkLogDir(now time.Time) {
	failed := false
	for _, h := range m.hostedList() {
		if h.log.Failed() {
			failed = true
			break
		}
	}
	if !failed && !m.dirFailed.Load() {
		return
	}
	if !m.dirFailed.Swap(true) {
		m.log.Error("log directory failed: the node leaves every ISR and leads nothing until it is writable again", "dir", m.logDir())
	}
	if now.Before(m.nextProbe) {
		return
	}
	m.nextProbe = now.Add(m.cfg.ProbeEvery)
	if err := probeWritable(m.logDir()); err != nil {
		m.log.Debug("log directory still not writable", "err", err)
		return
	}
	// Under applyMu, so that the image applied again is the newest: not
	// one a concurrent OnImage is replacing.
	m.applyMu.Lock()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		m.applyMu.Unlock()
		return
	}
	reopened := 0
	for tp, h := range m.hosted {
		if h.log.Failed() {
			m.removeLocked(tp, h)
			reopened++
		}
	}
	im := m.image
	m.mu.Unlock()
	if im != nil {
		m.applyImage(im)
	}
	m.applyMu.Unlock()
	m.mu.RLock()
	stillFailed := len(m.unopened) > 0
	for _, h := range m.hosted {
		stillFailed = stillFailed || h.log.Failed()
	}
	m.mu.RUnlock()
	if stillFailed {
		m.log.Warn("log directory writable, but logs still fail to open", "dir", m.logDir())
		return
	}
	m.dirFailed.Store(false)
	m.log.Info("log directory writable again: failed logs recovered from disk", "dir", m.logDir(), "reopened", reopened)
}

func (m *Manager) hostedList() []*hosted {
	m.mu.RLock()
	defer m.mu.RUnlock()
	list := make([]*hosted, 0, len(m.hosted))
	for _, h := range m.hosted {
		list = append(list, h)
	}
	return list
}

// logDir holds the partitions' logs: what a full disk fails, and what the
// probe must find writable again (it may be a volume of its own).
func (m *Manager) logDir() string { return filepath.Join(m.cfg.DataDir, "logs") }

// probeWritable writes probeBytes to a file in dir, fsyncs and removes it.
func probeWritable(dir string) error {
	path := filepath.Join(dir, ".write-probe")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(make([]byte, probeBytes))
	if werr == nil {
		werr = f.Sync()
	}
	return errors.Join(werr, f.Close(), os.Remove(path))
}

// topicConfigs is what a topic's configs give its replicas, parsed once
// for all of them.
type topicConfigs struct {
	lcfg plog.Config
	pcfg partition.Config // without the partition's own fields
	err  error
}

func parseTopicConfigs(mc Config, configs map[string]string) *topicConfigs {
	lcfg, err := plog.ParseConfig(configs)
	if err != nil {
		return &topicConfigs{err: err}
	}
	minISR := 1
	if v, ok := configs["min.insync.replicas"]; ok {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
			minISR = n
		}
	}
	pcfg := partition.Config{
		Self: mc.Self, MinInsyncReplicas: minISR, MaxMessageBytes: int(lcfg.MaxMessageBytes), ReplicaLagMax: mc.ReplicaLagMax,
		Compacted: lcfg.CleanupPolicy&plog.CleanupDelete == 0,
	}
	if pcfg.Recompress, pcfg.Compression, err = storeCodec(configs); err != nil {
		return &topicConfigs{err: err}
	}
	return &topicConfigs{lcfg: lcfg, pcfg: pcfg}
}

// forPartition answers the log's and the replica's configs of one
// partition of the topic.
func (c *topicConfigs) forPartition(tp partition.TP, isrChanged func(shrink bool)) (plog.Config, partition.Config, error) {
	if c.err != nil {
		return plog.Config{}, partition.Config{}, c.err
	}
	pcfg := c.pcfg
	pcfg.Topic, pcfg.Partition, pcfg.ISRChanged = tp.Topic, tp.Partition, isrChanged
	return c.lcfg, pcfg, nil
}

// maxDirName is the longest name a directory entry takes on Linux file
// systems (NAME_MAX), in bytes.
const maxDirName = 255

// dirName is a partition's directory in the log directory: topic,
// partition and topic id. A topic name may be 249 characters long, too long
// for that with the id after it, so a long name is cut to fit: the topic id
// alone keeps two partitions' directories apart, and the name is only there
// for a person reading the directory.
func dirName(tp partition.TP, topicID string) string {
	suffix := fmt.Sprintf("-%d-%s", tp.Partition, topicID)
	topic := tp.Topic
	if len(topic)+len(suffix) > maxDirName {
		topic = topic[:max(0, maxDirName-len(suffix))]
	}
	return topic + suffix
}

// open opens (or creates) a replica's log and replays its producer state,
// without the manager's lock (OnImage holds applyMu). markErr is whether
// the directories' mark could be recorded, which a new directory needs
// first; *offsets is the checkpoint store's offsets, loaded at the first
// open that needs them.
func (m *Manager) open(tp partition.TP, topicID string, lcfg plog.Config, pcfg partition.Config, markErr error, offsets *map[checkpoint.Partition]checkpoint.Offsets) (*hosted, error) {
	key := dirName(tp, topicID)
	dir := filepath.Join(m.logDir(), key)
	var ck checkpoint.Offsets
	// A checkpoint speaks for this directory only if the directory exists: a
	// topic deleted and created again while the node was down has the same
	// name but a new directory.
	_, statErr := os.Stat(dir)
	if statErr != nil && !errors.Is(statErr, fs.ErrNotExist) {
		return nil, statErr // a directory that may be there: nothing of it is forgotten
	}
	if statErr == nil {
		if *offsets == nil {
			all, err := m.ckpt.LoadOffsets()
			if err != nil {
				return nil, err
			}
			*offsets = all
		}
		ck = (*offsets)[checkpoint.Partition{Topic: tp.Topic, Partition: tp.Partition}]
	} else {
		// Nor may one left over from a topic of that name whose removal
		// could not forget it (a failing disk): a restart before the next
		// checkpoint would take it for this directory's.
		m.forgetSaved(tp, key)
		if err := m.ckpt.DeletePartitions(checkpoint.Partition{Topic: tp.Topic, Partition: tp.Partition}); err != nil {
			return nil, err
		}
		if err := m.ckpt.Delete(producersKey(key)); err != nil {
			return nil, err
		}
		if markErr != nil {
			return nil, markErr
		}
	}
	l, err := plog.Open(dir, lcfg, plog.Options{State: plog.State{LogStartOffset: ck.LogStartOffset, RecoveryPoint: ck.RecoveryPoint}, CacheWindow: m.cfg.LogCacheWindow})
	if err != nil {
		return nil, err
	}
	h := &hosted{log: l, topicID: topicID, key: key, tp: tp,
		p: partition.New(pcfg, logAdapter{l}, ck.HighWatermark, producer.New(), m.proposer, m.now)}
	if err := m.restoreProducers(h); err != nil {
		h.p.Close()
		l.Close()
		return nil, fmt.Errorf("replaying producer state of %s: %w", tp, err)
	}
	m.log.Info("hosting replica", "partition", tp, "leo", l.LEO(), "hw", ck.HighWatermark)
	switch {
	case l.LEO() < ck.HighWatermark:
		// Records this replica counted as on every in-sync replica are
		// gone from its disk: the other replicas have them, unless this
		// one leads before it fetches them back.
		m.log.Error("the log ends below the high watermark this replica recorded: a write the disk lost or damaged was cut away",
			"partition", tp, "leo", l.LEO(), "hw", ck.HighWatermark, "lost_records", ck.HighWatermark-l.LEO())
	case l.RecoveryCut():
		m.log.Warn("recovery cut a torn or damaged tail from the log: the replica fetches what followed from its leader",
			"partition", tp, "leo", l.LEO())
	}
	return h, nil
}

// restoreProducers loads the latest producer snapshot, if any, and replays
// the log after it.
func (m *Manager) restoreProducers(h *hosted) error {
	raw, ok, err := m.ckpt.Get(producersKey(h.key))
	if err != nil || !ok {
		return h.p.Recover(h.log.LogStartOffset())
	}
	var snap partition.ProducerSnapshot
	used := false
	if err = json.Unmarshal(raw, &snap); err != nil {
		m.log.Warn("unreadable producer snapshot; replaying the whole log", "dir", h.key, "err", err)
		err = h.p.Recover(h.log.LogStartOffset())
	} else {
		used, err = h.p.RestoreProducers(snap)
	}
	if err == nil && !used {
		// The snapshot was beyond a log whose tail recovery cut (or below
		// its start, or unreadable): replace it before the log grows back.
		m.replaceSnapshot(h)
	}
	return err
}

// replaceSnapshot saves h's producer state now, over a snapshot that must
// not be restored again (from before a cut of its log). If the save fails
// (a full disk), the old snapshot is removed instead: a restart then
// replays the whole log, which is slower but right.
func (m *Manager) replaceSnapshot(h *hosted) {
	m.snapshotProducers([]*hosted{h})
	key := producersKey(h.key)
	m.savedMu.Lock()
	_, saved := m.savedSnaps[key]
	m.savedMu.Unlock()
	if saved {
		return
	}
	if err := m.ckpt.Delete(key); err != nil {
		m.log.Error("cannot replace or remove a producer snapshot from before a cut of the log: a restart before the next snapshot may restore producers of records the log no longer holds", "dir", h.key, "err", err)
	}
}

func (m *Manager) snapshotProducers(list []*hosted) {
	m.savedMu.Lock()
	defer m.savedMu.Unlock()
	for _, h := range list {
		if h.dropped.Load() {
			continue
		}
		key := producersKey(h.key)
		raw, err := json.Marshal(h.p.SnapshotProducers())
		if err == nil && bytes.Equal(raw, m.savedSnaps[key]) {
			continue
		}
		if err == nil {
			err = m.ckpt.Put(key, raw)
		}
		if err != nil {
			delete(m.savedSnaps, key)
			m.log.Error("producer snapshot failed", "dir", h.key, "err", err)
			continue
		}
		m.savedSnaps[key] = raw
	}
}

// forgetSaved notes that the store's entries for a replica were changed
// or removed by something other than checkpoint and snapshotProducers.
func (m *Manager) forgetSaved(tp partition.TP, dir string) {
	m.savedMu.Lock()
	defer m.savedMu.Unlock()
	delete(m.savedOffs, checkpoint.Partition{Topic: tp.Topic, Partition: tp.Partition})
	delete(m.savedSnaps, producersKey(dir))
}

// removeLocked stops hosting a replica and closes its log, leaving its
// data on disk.
func (m *Manager) removeLocked(tp partition.TP, h *hosted) {
	m.dropLocked(tp, h)
	m.closeReplica(h)
}

// dropLocked stops hosting a replica: it takes no more requests (the
// partition is closed, which answers its waiters); removeData then closes
// its log and deletes what it left on disk.
func (m *Manager) dropLocked(tp partition.TP, h *hosted) {
	m.fetchers.Unfollow(tp)
	h.dropped.Store(true)
	h.p.Close()
	delete(m.hosted, tp)
}

func (m *Manager) closeReplica(h *hosted) {
	h.p.Close()
	if err := h.log.Close(); err != nil {
		m.log.Warn("closing log", "partition", h.tp, "err", err)
	}
}

// removeData closes replicas dropped for good (their topic deleted, or the
// replica moved off this node) and deletes their directories and
// checkpoints, the offsets of all of them in one write. It runs without
// the manager's lock.
func (m *Manager) removeData(list []*hosted) {
	if len(list) == 0 {
		return
	}
	parts := make([]checkpoint.Partition, 0, len(list))
	for _, h := range list {
		m.closeReplica(h)
		if err := os.RemoveAll(h.log.Dir()); err != nil {
			m.log.Warn("removing log directory", "partition", h.tp, "err", err)
		}
		parts = append(parts, checkpoint.Partition{Topic: h.tp.Topic, Partition: h.tp.Partition})
		m.log.Info("removed replica", "partition", h.tp)
	}
	// Under savedMu: a checkpoint or snapshot of a list taken before the
	// drop either wrote before this or sees the replicas dropped.
	m.savedMu.Lock()
	defer m.savedMu.Unlock()
	for _, h := range list {
		delete(m.savedOffs, checkpoint.Partition{Topic: h.tp.Topic, Partition: h.tp.Partition})
		delete(m.savedSnaps, producersKey(h.key))
		if err := m.ckpt.Delete(producersKey(h.key)); err != nil {
			m.log.Warn("removing producer snapshot", "partition", h.tp, "err", err)
		}
	}
	if err := m.ckpt.DeletePartitions(parts...); err != nil {
		m.log.Warn("removing checkpoints", "partitions", len(parts), "err", err)
	}
}

// Run does the housekeeping until ctx ends: ISR checks, flushes, the log
// directory's health, producer snapshots and checkpoints every Tick, and,
// on a goroutine of its own that Run waits for, retention and compaction
// every RetentionEvery — a long compaction never delays an ISR check.
func (m *Manager) Run(ctx context.Context) {
	cleaner := make(chan struct{})
	go func() { defer close(cleaner); m.runCleaner(ctx) }()
	defer func() { <-cleaner }()
	tick := time.NewTicker(m.cfg.Tick)
	defer tick.Stop()
	lastCkpt, lastSnap := m.now(), m.now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := m.now()
		m.checkLogDir(now)
		list := m.hostedList()
		for _, h := range list {
			h.p.MaybeShrinkISR()
			if h.log.Failed() {
				continue // refuses writes until checkLogDir reopens it
			}
			if err := h.log.FlushIfDue(now); err != nil {
				m.log.Error("flush failed", "dir", h.key, "err", err)
			}
			if err := h.log.FlushRolled(); err != nil {
				m.log.Error("flush of rolled segments failed", "dir", h.key, "err", err)
			}
			if err := h.p.SyncTail(); err != nil {
				m.log.Error("fsync of a recovered tail failed", "dir", h.key, "err", err)
			}
		}
		if now.Sub(lastSnap) >= m.cfg.ProducerSnapshotEvery {
			lastSnap = now
			m.snapshotProducers(list)
		}
		if now.Sub(lastCkpt) >= m.cfg.CheckpointEvery {
			lastCkpt = now
			m.checkpoint(list)
		}
	}
}

// runCleaner applies retention and compaction to every hosted log each
// RetentionEvery until ctx ends.
func (m *Manager) runCleaner(ctx context.Context) {
	tick := time.NewTicker(m.cfg.RetentionEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		clean := *m.cleanup.Load()
		for _, h := range m.hostedList() {
			if ctx.Err() != nil {
				return
			}
			now := m.now()
			// The internal topics' writers are the coordinators, one
			// producer id per coordinator partition, whose epoch fences
			// the partition's previous owner: forgotten, a deposed owner's
			// late write would be taken, and the owner's own next write,
			// its sequence going on, refused.
			if metadata.IsInternalTopic(h.tp.Topic) {
				clean(h, now)
				continue
			}
			if n := h.p.ExpireProducers(now, m.cfg.ProducerIDExpiration); n > 0 {
				m.log.Info("forgot idle producer ids", "dir", h.key, "producers", n, "idle_for", m.cfg.ProducerIDExpiration)
			}
			clean(h, now)
		}
	}
}

// cleanOne deletes a log's expired segments and compacts it, as its
// cleanup.policy says.
func (m *Manager) cleanOne(h *hosted, now time.Time) {
	if h.log.Failed() {
		return
	}
	policy := h.log.Config().CleanupPolicy
	snap := h.p.Snapshot()
	// Whatever the policy: the segments below a log start that records
	// deleted before an offset moved go here (a topic made compact since
	// keeps no segment below its start), and with delete, retention's.
	// Never past the high watermark: above it a record may be on this
	// replica alone, and a consumer may not have been allowed to read it.
	if n, err := h.log.DeleteExpired(now, snap.HW); err != nil {
		m.log.Error("retention failed", "dir", h.key, "err", err)
	} else if n > 0 {
		m.log.Info("retention deleted segments", "dir", h.key, "segments", n)
		h.p.ForgetAbortedBelow()
		// A restart restores producer state from its last snapshot and
		// replays the log after it, but a snapshot below the log start
		// cannot be replayed from: without a fresh one, a crash before
		// the next periodic snapshot would rebuild the producers from
		// what is left (nothing, once the last segment went), and a retry
		// of their last batches would be appended again. Kafka snapshots
		// at the roll that precedes such a deletion.
		m.snapshotProducers([]*hosted{h})
	}
	if policy&plog.CleanupCompact != 0 {
		// Only what every ISR member holds, and no open transaction's
		// records: what lies above may yet be truncated away. Below it
		// every transaction has ended, committed or aborted.
		upTo := min(snap.HW, snap.LSO)
		if st, err := h.log.Compact(now, upTo, h.p.AbortedBelow(upTo)); err != nil {
			m.log.Error("compaction failed", "dir", h.key, "err", err)
		} else if st.SegmentsRewritten > 0 {
			m.log.Info("compacted", "dir", h.key, "segments", st.SegmentsRewritten, "records_removed", st.RecordsRemoved, "bytes_before", st.BytesBefore, "bytes_after", st.BytesAfter)
		}
	}
}

// checkpoint saves the HW, recovery point and log start offset of every
// replica whose offsets changed since they were last saved, in one durable
// write; when none changed it writes nothing.
// savedAfterCut saves tp's offsets and producer state now, after its log
// was cut: the recovery point saved must not be above what the log holds
// (an open trusts the segments below it without checking every batch), as
// Kafka checkpoints recovery points after truncating; and the producer
// snapshot must not be from before the cut (a restart would restore it
// once the log grew back past it, with producers and aborted transactions
// of records that were cut), as Kafka deletes the snapshots above a
// truncation.
func (m *Manager) savedAfterCut(tp partition.TP) {
	m.mu.RLock()
	h, ok := m.hosted[tp]
	m.mu.RUnlock()
	if ok {
		if err := m.checkpoint([]*hosted{h}); err != nil {
			h.log.Fail(fmt.Errorf("saving the recovery point after a cut: %w", err))
		}
		m.replaceSnapshot(h)
	}
}

// Checkpoint saves the offsets of the named replicas now, in one write
// (those it does not host are skipped). The caller reports what it saves
// (a log start a DeleteRecords moved, to the leader): if the write fails,
// the replicas' logs are failed, so that nothing is reported unsaved; the
// node is fenced and reopens them once its disk takes writes again.
func (m *Manager) Checkpoint(tps []partition.TP) {
	m.mu.RLock()
	list := make([]*hosted, 0, len(tps))
	for _, tp := range tps {
		if h, ok := m.hosted[tp]; ok {
			list = append(list, h)
		}
	}
	m.mu.RUnlock()
	if len(list) == 0 {
		return
	}
	if err := m.checkpoint(list); err != nil {
		for _, h := range list {
			h.log.Fail(fmt.Errorf("saving the log start offset: %w", err))
		}
	}
}

// checkpoint answers the failed write's error; the scheduler's periodic
// calls only log it and try again at the next tick.
func (m *Manager) checkpoint(list []*hosted) error {
	m.savedMu.Lock()
	defer m.savedMu.Unlock()
	changed := make(map[checkpoint.Partition]checkpoint.Offsets)
	for _, h := range list {
		if h.dropped.Load() {
			continue
		}
		st := h.log.State()
		p := checkpoint.Partition{Topic: h.tp.Topic, Partition: h.tp.Partition}
		o := checkpoint.Offsets{HighWatermark: h.p.Snapshot().HW, RecoveryPoint: st.RecoveryPoint, LogStartOffset: st.LogStartOffset}
		if saved, ok := m.savedOffs[p]; !ok || saved != o {
			changed[p] = o
		}
	}
	if len(changed) == 0 {
		return nil
	}
	if err := m.ckpt.SaveOffsets(changed); err != nil {
		m.log.Error("checkpoint failed", "err", err)
		return err
	}
	maps.Copy(m.savedOffs, changed)
	return nil
}

// Close checkpoints, flushes and closes every replica, once an OnImage
// under way is done.
func (m *Manager) Close() {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.closed = true
	list := make([]*hosted, 0, len(m.hosted))
	for _, h := range m.hosted {
		list = append(list, h)
	}
	for _, h := range list {
		_ = h.log.Flush()
	}
	m.checkpoint(list)
	m.snapshotProducers(list)
	for tp, h := range m.hosted {
		m.removeLocked(tp, h)
	}
}

func (m *Manager) countISRChange(shrink bool) {
	if shrink {
		m.isrShrinks.Add(1)
	} else {
		m.isrExpands.Add(1)
	}
}

// Stats for metrics: partitions led, under-replicated among them, and each
// follower's lag behind the leader's LEO.
type Stats struct {
	Hosted, Leading, UnderReplicated, Offline int
	ISRShrinks, ISRExpands                    int64            // since start
	FollowerLag                               map[string]int64 // "topic-p/replica" -> LEO lag
}

// Stats reads the replicas' positions.
func (m *Manager) Stats() Stats {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s := Stats{FollowerLag: map[string]int64{}, ISRShrinks: m.isrShrinks.Load(), ISRExpands: m.isrExpands.Load()}
	for tp, h := range m.hosted {
		s.Hosted++
		snap := h.p.Snapshot()
		if snap.Role != partition.Leader {
			continue
		}
		s.Leading++
		if len(snap.State.ISR) < len(snap.State.Replicas) {
			s.UnderReplicated++
		}
		for id, leo := range snap.FollowerLEO {
			s.FollowerLag[fmt.Sprintf("%s/%d", tp, id)] = max(0, int64(snap.LEO-leo))
		}
	}
	return s
}
