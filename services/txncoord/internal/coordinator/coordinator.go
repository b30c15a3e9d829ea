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
	"skein/services/txncoord/internal/txn"
)

// Identity is the producer identity of one batch written to a partition.
type Identity struct {
	ProducerID int64
	Epoch      int16
	Sequence   int32
}

// KV is one record of __transaction_state; a nil Value is a tombstone.
type KV struct {
	Key, Value []byte
}

// Entry is one record read back, at its offset.
type Entry struct {
	Offset int64
	KV
}

// Log is what the coordinator needs of the cluster's storage (libs/client
// in production, ClientLog): acks=all writes to and reads from partitions
// of __transaction_state.
type Log interface {
	// Produce appends recs as one batch under id and answers the offset of
	// its last record. It retries retriable failures until ctx ends, so an
	// error that errs.IsRetriable says is retriable leaves the outcome
	// unknown; any other error means the batch was not appended.
	Produce(ctx context.Context, partition int32, id Identity, recs []KV) (last int64, err error)
	// Fetch reads records of a partition from offset (the log start when
	// offset is below it) and answers them, where the next read starts,
	// and the high watermark.
	Fetch(ctx context.Context, partition int32, offset int64) (recs []Entry, next, hw int64, err error)
}

// Markers writes transaction markers to the partitions of a transaction.
type Markers interface {
	// WriteMarkers writes a COMMIT (commit=true) or ABORT marker for
	// producerID at epoch to every partition, retrying until every
	// partition's leader has it or ctx ends. Writing the same marker twice
	// does no harm.
	WriteMarkers(ctx context.Context, producerID int64, epoch int16, commit bool, coordinatorEpoch int32, partitions []txn.TopicPartition) error
}

// View is what the coordinator needs of the cluster metadata.
type View struct {
	// Partitions is the partition count of __transaction_state; 0 while it
	// does not exist.
	Partitions int32
	// Owned: the partitions this node serves now, with their ownership.
	Owned map[int32]Ownership
	// Registered: the metadata lists this very process (its incarnation)
	// as a live transaction coordinator.
	Registered bool
	// OffsetsPartitions is the partition count of __consumer_offsets, which
	// maps the groups of a transaction to the partitions that get its
	// markers; 0 while it does not exist.
	OffsetsPartitions int32
	// Topics is the partition count of every topic: AddPartitionsToTxn
	// refuses a partition that does not exist (UNKNOWN_TOPIC_OR_PARTITION),
	// whose markers could never be written. nil skips that check.
	Topics map[string]int32
}

// Ownership is this node's ownership of one partition of
// __transaction_state.
type Ownership struct {
	// Epoch is the coordinator epoch: the producer epoch of every write to
	// the partition, and the coordinator epoch of the markers.
	Epoch int32
	// ProducerID is the partition's producer id.
	ProducerID int64
}

// Config configures a Coordinator.
type Config struct {
	// NodeID is this coordinator's id.
	NodeID int32
	// Txn is the state machines' configuration.
	Txn txn.Config
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// WriteTimeout bounds one write to __transaction_state, retries
	// included (5 s), and one producer id allocation.
	WriteTimeout time.Duration
	// MarkersTimeout bounds one attempt at writing a transaction's markers
	// (30 s); a failed or timed-out attempt is retried with backoff.
	MarkersTimeout time.Duration
	// AllocateProducerID answers a fresh producer id (from the blocks the
	// controller hands out).
	AllocateProducerID func(ctx context.Context) (int64, error)
	// CompleteGroupOffsets, after a transaction's markers are written, tells
	// the coordinator of each of its groups to apply (commit) or drop its
	// pending offsets, with the markers' epoch; nil: nothing is told (a
	// transaction's offsets then stay pending).
	CompleteGroupOffsets func(ctx context.Context, groups []string, producerID int64, epoch int16, commit bool) error
	Logger               *slog.Logger
}

// Coordinator serves the transactional ids of the __transaction_state
// partitions this node owns, and producer ids for idempotent producers. It
// is safe for concurrent use.
type Coordinator struct {
	cfg     Config
	log     Log
	markers Markers
	logger  *slog.Logger
	metrics *Metrics

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // every partition goroutine

	mu    sync.Mutex
	view  View                 // guarded by mu
	parts map[int32]*partition // owned partitions; guarded by mu
	// fenced: the epoch at which a newer owner fenced this node, by
	// partition, so a metadata view that lags behind does not load it again.
	fenced map[int32]int32 // guarded by mu
}

// New returns a coordinator that owns nothing until OnMetadata. metrics may
// be nil.
func New(cfg Config, log Log, markers Markers, metrics *Metrics) *Coordinator {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 5 * time.Second
	}
	if cfg.MarkersTimeout <= 0 {
		cfg.MarkersTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{cfg: cfg, log: log, markers: markers, logger: cfg.Logger, metrics: metrics, ctx: ctx, cancel: cancel,
		parts: map[int32]*partition{}, fenced: map[int32]int32{}}
	metrics.setCoordinator(c)
	return c
}

// Close drops every partition and waits for every goroutine.
func (c *Coordinator) Close() {
	c.mu.Lock()
	for id, p := range c.parts {
		p.drop()
		delete(c.parts, id)
	}
	c.cancel()
	c.mu.Unlock()
	c.wg.Wait()
}

// OnMetadata takes a new view of the metadata: it starts loading newly
// owned partitions and drops those no longer owned (or owned at a new
// epoch).
func (c *Coordinator) OnMetadata(v View) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx.Err() != nil {
		return
	}
	c.view = View{Partitions: v.Partitions, Owned: maps.Clone(v.Owned), Registered: v.Registered,
		OffsetsPartitions: v.OffsetsPartitions, Topics: maps.Clone(v.Topics)}
	for id, p := range c.parts {
		if own, ok := v.Owned[id]; !ok || own != p.own {
			c.logger.Info("partition no longer owned at this epoch: dropping it", "partition", id, "epoch", p.own.Epoch)
			p.drop()
			delete(c.parts, id)
		}
	}
	for id, own := range v.Owned {
		if _, ok := c.parts[id]; ok {
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
// live transaction coordinator (readiness).
func (c *Coordinator) Registered() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.view.Registered
}

// currentView answers the last view (shared maps; do not modify).
func (c *Coordinator) currentView() View {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.view
}

// partitionFor answers the loaded partition that owns a transactional id,
// or INVALID_REQUEST (an empty id), NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) partitionFor(transactionalID string) (*partition, error) {
	if transactionalID == "" {
		return nil, errs.Errorf(errs.InvalidRequest, "an empty transactional id")
	}
	c.mu.Lock()
	n := c.view.Partitions
	var p *partition
	if n > 0 {
		p = c.parts[metadata.CoordinatorPartition(transactionalID, n)]
	}
	c.mu.Unlock()
	switch {
	case n == 0:
		return nil, errs.Errorf(errs.CoordinatorNotAvailable, "%s does not exist yet", metadata.TransactionStateTopic)
	case p == nil:
		return nil, errs.Errorf(errs.NotCoordinator, "coordinator %d does not own transactional id %q (partition %d of %s)",
			c.cfg.NodeID, transactionalID, metadata.CoordinatorPartition(transactionalID, n), metadata.TransactionStateTopic)
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

// wakeAll makes every partition look at its deadlines again (the clock
// moved).
func (c *Coordinator) wakeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.parts {
		p.wake()
	}
}
