package coordinator

import (
	"context"
	"log/slog"
	"maps"
	"math"
	"sync"
	"time"

	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/services/groupcoord/internal/assign"
	"skein/services/groupcoord/internal/group"
)

// Identity is the producer identity of one batch written to a partition.
type Identity struct {
	ProducerID int64
	Epoch      int16
	Sequence   int32
}

// KV is one record of __consumer_offsets; a nil Value is a tombstone.
type KV struct {
	Key, Value []byte
}

// Entry is one record read back, at its offset.
type Entry struct {
	Offset int64
	KV
}

// Log is what the coordinator needs of the cluster (libs/client in
// production, ClientLog): acks=all writes to and reads from partitions of
// __consumer_offsets, and high watermarks of the topics groups consume.
type Log interface {
	// Produce appends recs as one batch under id and answers the offset of
	// its last record. It retries retriable failures until ctx ends, so
	// an error that errs.IsRetriable says is retriable leaves the outcome
	// unknown; any other error means the batch was not appended.
	Produce(ctx context.Context, partition int32, id Identity, recs []KV) (last int64, err error)
	// Fetch reads records of a partition from offset (the log start when
	// offset is below it) and answers them, where the next read starts,
	// and the high watermark.
	Fetch(ctx context.Context, partition int32, offset int64) (recs []Entry, next, hw int64, err error)
	// HighWatermarks answers the high watermark of partitions of a topic.
	HighWatermarks(ctx context.Context, topic string, partitions []int32) (map[int32]int64, error)
}

// View is what the coordinator needs of the cluster metadata.
type View struct {
	// Partitions is the partition count of __consumer_offsets; 0 while it
	// does not exist.
	Partitions int32
	// Owned: the partitions this node serves now, with their ownership.
	Owned map[int32]Ownership
	// Topics: the partition count of every topic.
	Topics map[string]int32
	// TopicIDs: the id of every topic. A topic deleted and created again
	// under its name has a new id.
	TopicIDs map[string]string
	// Version is the version of the metadata the view is of. The topics of
	// a view older than one already taken (a controller that lags behind)
	// are not taken: they would miss a topic just created, whose offsets
	// would then be dropped as a deleted topic's.
	Version uint64
	// Registered: the metadata lists this very process (its incarnation)
	// as a live group coordinator.
	Registered bool
}

// Ownership is this node's ownership of one partition of __consumer_offsets.
type Ownership struct {
	// Epoch is the coordinator epoch, also the producer epoch of every write.
	Epoch int32
	// ProducerID is the partition's producer id.
	ProducerID int64
}

// The defaults of Config.OffsetsRetention and RetentionCheckInterval, as
// Kafka's.
const (
	DefaultOffsetsRetention       = 7 * 24 * time.Hour
	DefaultRetentionCheckInterval = 10 * time.Minute
)

// Config configures a Coordinator.
type Config struct {
	// NodeID is this coordinator's id.
	NodeID int32
	// Group is the group state machines' configuration.
	Group group.Config
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// WriteTimeout bounds one write to the log, retries included (5 s).
	WriteTimeout time.Duration
	// LagInterval is how often committed offsets are compared with the high
	// watermarks for the lag metrics (10 s).
	LagInterval time.Duration
	// OffsetsRetention is how long a partition's committed offset is kept
	// once no member of its group subscribes to its topic, counted from the
	// later of its commit and the last time a member subscribed (Kafka's
	// offsets.retention.minutes; 7 days). An empty group whose offsets are
	// all gone is deleted.
	OffsetsRetention time.Duration
	// RetentionCheckInterval is how often the retention is applied
	// (offsets.retention.check.interval.ms; 10 minutes).
	RetentionCheckInterval time.Duration
	// NewMemberID answers a fresh member id for a join without one.
	NewMemberID func() string
	// Transactions verifies a TxnOffsetCommit of a producer a group holds
	// nothing of (see TxnVerifier); nil trusts every one.
	Transactions TxnVerifier
	Logger       *slog.Logger
}

// Coordinator serves the groups of the __consumer_offsets partitions this
// node owns. It is safe for concurrent use.
type Coordinator struct {
	cfg     Config
	log     Log
	dlq     DeadLetters // nil: the log cannot dead-letter
	logger  *slog.Logger
	metrics *Metrics

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // every partition goroutine and the lag loop

	mu    sync.Mutex
	view  View                 // guarded by mu
	tset  *topicSet            // view's topics; replaced (never modified) when they change; guarded by mu
	parts map[int32]*partition // owned partitions; guarded by mu
	// fenced: the epoch at which a newer owner fenced this node, by
	// partition, so a metadata view that lags behind does not load it again.
	fenced map[int32]int32 // guarded by mu
}

// New returns a coordinator that owns nothing until OnMetadata. metrics may
// be nil.
func New(cfg Config, log Log, metrics *Metrics) *Coordinator {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 5 * time.Second
	}
	if cfg.LagInterval <= 0 {
		cfg.LagInterval = 10 * time.Second
	}
	if cfg.OffsetsRetention <= 0 {
		cfg.OffsetsRetention = DefaultOffsetsRetention
	}
	if cfg.RetentionCheckInterval <= 0 {
		cfg.RetentionCheckInterval = DefaultRetentionCheckInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{cfg: cfg, log: log, logger: cfg.Logger, metrics: metrics, ctx: ctx, cancel: cancel, tset: &topicSet{},
		parts: map[int32]*partition{}, fenced: map[int32]int32{}}
	metrics.coord = c
	if d, ok := log.(DeadLetters); ok {
		c.dlq = d
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.lagLoop()
	}()
	return c
}

// Close drops every partition and waits for every goroutine.
func (c *Coordinator) Close() {
	c.mu.Lock()
	for id, p := range c.parts {
		p.drop()
		delete(c.parts, id)
	}
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

// OnMetadata takes a new view of the metadata: it starts loading newly
// owned partitions, drops those no longer owned (or owned at a new epoch)
// and passes topic changes to the groups (which drop the offsets of deleted
// topics, see partition.dropDeleted).
func (c *Coordinator) OnMetadata(v View) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx.Err() != nil {
		return
	}
	if v.Version < c.view.Version {
		v.Topics, v.TopicIDs, v.Version = c.view.Topics, c.view.TopicIDs, c.view.Version
	}
	topicsChanged := !maps.Equal(c.view.Topics, v.Topics) || !maps.Equal(c.view.TopicIDs, v.TopicIDs)
	c.view = View{Partitions: v.Partitions, Owned: maps.Clone(v.Owned), Topics: maps.Clone(v.Topics),
		TopicIDs: maps.Clone(v.TopicIDs), Version: v.Version, Registered: v.Registered}
	if topicsChanged {
		c.tset = &topicSet{counts: c.view.Topics, ids: c.view.TopicIDs}
	}
	for id, p := range c.parts {
		if own, ok := v.Owned[id]; !ok || own != p.own {
			c.logger.Info("partition no longer owned at this epoch: dropping it", "partition", id, "epoch", p.own.Epoch)
			p.drop()
			delete(c.parts, id)
		}
	}
	for id, own := range v.Owned {
		if _, ok := c.parts[id]; ok {
			if topicsChanged {
				c.parts[id].topicsChanged()
			}
			continue
		}
		if own.Epoch <= c.fenced[id] {
			continue // a newer owner wrote already: wait for the metadata to say so
		}
		if own.Epoch < 1 || own.Epoch > math.MaxInt16 {
			c.logger.Error("coordinator epoch out of the producer epoch range: not serving the partition", "partition", id, "epoch", own.Epoch)
			continue
		}
		p := newPartition(c, id, own)
		c.parts[id] = p
		c.logger.Info("partition owned: loading it", "partition", id, "epoch", own.Epoch, "producer_id", own.ProducerID)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			p.run()
		}()
	}
}

// Registered reports whether the last metadata listed this process as a
// live group coordinator (readiness).
func (c *Coordinator) Registered() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.view.Registered
}

// TopicExists reports whether the current metadata has topic.
func (c *Coordinator) TopicExists(topic string) bool {
	_, ok := c.topics()[topic]
	return ok
}

// topics answers the current partition counts (shared; do not modify).
func (c *Coordinator) topics() map[string]int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.view.Topics
}

// topicSet is the topics of one view of the metadata. It is never modified:
// a change of topics makes a new one, so a group compares the one it was
// last checked against with the current one by pointer.
type topicSet struct {
	counts map[string]int32  // partition count by topic
	ids    map[string]string // topic id by topic
}

// has reports whether the partition exists.
func (ts *topicSet) has(tp assign.TopicPartition) bool {
	if ts == nil {
		return false
	}
	n, ok := ts.counts[tp.Topic]
	return ok && tp.Partition >= 0 && tp.Partition < n
}

// gone reports whether a partition known under prev (nil: when unknown)
// no longer exists under ts: its topic was deleted, or deleted and created
// again under its name (a new id), or the partition is past the topic's
// partition count.
func (ts *topicSet) gone(prev *topicSet, tp assign.TopicPartition) bool {
	if !ts.has(tp) {
		return true
	}
	if prev == nil {
		return false
	}
	id, ok := prev.ids[tp.Topic]
	return ok && id != ts.ids[tp.Topic]
}

// currentTopics answers the current topics.
func (c *Coordinator) currentTopics() *topicSet {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tset
}

// partitionFor answers the loaded partition that owns a group, or
// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) partitionFor(groupID string) (*partition, error) {
	if groupID == "" {
		return nil, errs.Errorf(errs.InvalidGroupID, "empty group id")
	}
	c.mu.Lock()
	n := c.view.Partitions
	var p *partition
	if n > 0 {
		p = c.parts[metadata.CoordinatorPartition(groupID, n)]
	}
	c.mu.Unlock()
	switch {
	case n == 0:
		return nil, errs.Errorf(errs.CoordinatorNotAvailable, "%s does not exist yet", metadata.ConsumerOffsetsTopic)
	case p == nil:
		return nil, errs.Errorf(errs.NotCoordinator, "coordinator %d does not own group %q (partition %d of %s)",
			c.cfg.NodeID, groupID, metadata.CoordinatorPartition(groupID, n), metadata.ConsumerOffsetsTopic)
	}
	return p, p.ready()
}

// serving answers the partitions loaded and serving now.
func (c *Coordinator) serving() []*partition {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*partition, 0, len(c.parts))
	for _, p := range c.parts {
		if p.ready() == nil {
			out = append(out, p)
		}
	}
	return out
}

// dropFenced drops p after a newer owner fenced it, if p is still the
// partition's current incarnation here.
func (c *Coordinator) dropFenced(p *partition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.parts[p.id] == p {
		delete(c.parts, p.id)
	}
	c.fenced[p.id] = max(c.fenced[p.id], p.own.Epoch)
	p.drop()
}
