package client

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	storagev1 "skein/gen/skein/storage/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client/accumulator"
	"skein/libs/client/partitioner"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/libs/record"
	"skein/libs/topicconfig"
	"skein/libs/topicname"
)

// Acks values: how many replicas must have a batch before it is answered.
const (
	AcksNone   = 0  // fire and forget: no answer, offsets are -1
	AcksLeader = 1  // the leader appended it
	AcksAll    = -1 // every in-sync replica has it (the default)
)

// TraceparentHeader is the record header that carries the producing span's
// W3C trace context into the log, so replication and consumption can join
// the producer's trace.
const TraceparentHeader = "traceparent"

// Producer defaults. Timeouts and linger are Kafka's. Batching is not:
// Kafka's batch.size of 16 KiB ends a batch of 1 KiB records at 15 of
// them, and every batch costs a produce request, a replication round and a
// write on every replica, whatever it holds. So a batch may grow to 256 KiB
// (well under a topic's default max.message.bytes of 1 MiB), and a
// partition with nothing in flight sends at once (WithSendWhenIdle): a
// large batch then never makes a light load wait for linger, and under a
// heavy one a batch grows while the previous one is answered. The
// gateway's producer batches the same way.
const (
	DefaultBatchSize       = 256 << 10
	DefaultLinger          = 5 * time.Millisecond
	DefaultSendWhenIdle    = true
	DefaultDeliveryTimeout = 2 * time.Minute
	DefaultRequestTimeout  = 30 * time.Second
	// topicWait bounds how long Produce waits for a topic it has not seen yet
	// to appear in the metadata (Kafka's max.block.ms, shortened).
	topicWait = 3 * time.Second
)

type producerConfig struct {
	acks            int
	batchSize       int
	linger          time.Duration
	compression     record.Compression
	deliveryTimeout time.Duration
	requestTimeout  time.Duration
	idempotent      bool
	principal       string
	sendWhenIdle    bool
	bufferMemory    int64
	maxBlock        time.Duration
}

// ProducerOption changes a producer's configuration.
type ProducerOption func(*producerConfig)

// WithAcks sets acks: AcksNone, AcksLeader or AcksAll (the default).
// Idempotence needs AcksAll (as in Kafka) and is off under the others.
func WithAcks(acks int) ProducerOption { return func(c *producerConfig) { c.acks = acks } }

// WithBatchSize sets batch.size in bytes (default 256 KiB; Kafka's is
// 16 KiB).
func WithBatchSize(n int) ProducerOption { return func(c *producerConfig) { c.batchSize = n } }

// WithLinger sets linger.ms (default 5 ms; negative: send at once).
func WithLinger(d time.Duration) ProducerOption { return func(c *producerConfig) { c.linger = d } }

// WithSendWhenIdle(true) sends a partition's batch at once when none of
// that partition's batches is in flight, instead of letting it linger:
// linger then applies only while an earlier batch is out, as Nagle's
// algorithm does for a TCP segment. A light load is not delayed by linger
// (a caller with a few requests in flight is not capped at their records
// per linger), and a heavy one still fills its batches while the previous
// ones are answered. The records of one ProduceAll or ProduceSync call are
// all queued before any of them is sent this way. On by default;
// WithSendWhenIdle(false) lets every batch linger, as Kafka's linger.ms.
func WithSendWhenIdle(on bool) ProducerOption {
	return func(c *producerConfig) { c.sendWhenIdle = on }
}

// WithCompression sets the codec batches are compressed with (default none).
func WithCompression(codec record.Compression) ProducerOption {
	return func(c *producerConfig) { c.compression = codec }
}

// WithDeliveryTimeout bounds the time from Produce to the record's result,
// retries included (default 2 minutes).
func WithDeliveryTimeout(d time.Duration) ProducerOption {
	return func(c *producerConfig) { c.deliveryTimeout = d }
}

// WithRequestTimeout bounds one produce request's wait for its answer
// (default 30 s); it is also the acks=all wait the storage node is given.
func WithRequestTimeout(d time.Duration) ProducerOption {
	return func(c *producerConfig) { c.requestTimeout = d }
}

// maxInFlight is how many batches of one partition may be out at once,
// counted from the oldest one not yet settled (answered, or failed for
// good): a later batch answered early still counts while an earlier one is
// open. A storage node answers a request once all its partitions are
// acknowledged, so one partition's answers can come back out of order;
// counting from the oldest open batch keeps every batch that may have to be
// resent within the node's duplicate window (the last five batches of a
// producer id), so a resend is recognised, never written twice. The first
// batch under a producer id goes out alone: until it is in, the node does
// not know the id and takes nothing from it but sequence 0, so a later
// batch sent beside it would only be refused. Kafka's
// max.in.flight.requests.per.connection with idempotence is five for the
// same window.
const maxInFlight = 5

// WithPrincipal makes the producer write for a client it acts for (a
// gateway's): every batch names principal, and a storage node authorizes
// the write as that client's (see OnBehalfOf).
func WithPrincipal(principal string) ProducerOption {
	return func(c *producerConfig) { c.principal = principal }
}

// WithIdempotence turns the idempotent producer on (the default under
// AcksAll) or off.
func WithIdempotence(on bool) ProducerOption { return func(c *producerConfig) { c.idempotent = on } }

// Record is a record to produce.
type Record struct {
	Topic string
	// Partition forces the partition; nil lets the partitioner choose:
	// murmur2 of the key when there is one, the sticky partition otherwise.
	Partition *int32
	// A nil Key is no key; a nil Value is a tombstone.
	Key     []byte
	Value   []byte
	Headers []record.Header
	// Timestamp is the create time in ms since the epoch; 0 means now,
	// unless TimestampSet says the caller chose 0, the epoch itself.
	Timestamp    int64
	TimestampSet bool
}

// Result is the outcome of one produced record.
type Result struct {
	Partition int32
	// Offset is -1 when the record was not written, or under AcksNone.
	Offset int64
	// Timestamp is the record's create time, or the log append time when
	// the topic uses it.
	Timestamp int64
	// Err is nil or wraps a row of libs/errs.
	Err error
	// MaybeWritten, with Err set, says the producer gave up without a
	// definite answer (a timeout, a broken connection, an append that did
	// not reach min.insync.replicas): the record may be in the log. When it
	// is false the record is definitely not in the log.
	MaybeWritten bool
}

// Producer sends records to the cluster. It is safe for concurrent use.
type Producer struct {
	c    *Client
	cfg  producerConfig
	wake chan struct{} // buffered(1): something changed for the sender
	done chan struct{} // closed when the sender exits

	mu       sync.Mutex
	acc      *accumulator.Accumulator           // guarded by mu
	sticky   *partitioner.Sticky                // guarded by mu
	parts    map[accumulator.TP]*partitionState // guarded by mu
	inflight int                                // batches awaiting an answer; guarded by mu
	retries  int                                // batches waiting to be resent; guarded by mu
	// delivering counts the groups of results whose callbacks run outside
	// the lock and have not all returned; guarded by mu.
	delivering int
	flushers   int           // Flush calls and full-buffer waits; guarded by mu
	mem        *memoryBudget // buffer.memory
	adding     int           // ProduceAll calls still queueing their records; guarded by mu
	closing    bool          // no more Produce; guarded by mu
	stopped    bool          // the sender is gone: no more retries; guarded by mu
	idle       chan struct{} // closed and replaced when all is delivered; guarded by mu
	// gen is the flush generation of the records produced now: a Flush
	// moves it on, and waits for the records of the generations before.
	gen     uint64          // guarded by mu
	pending map[uint64]int  // records whose callbacks have not returned, by generation; guarded by mu
	settled chan struct{}   // closed and replaced when a generation's last callback returns; guarded by mu
	pid     int64           // the producer's id, shared by its partitions; -1 until taken; guarded by mu
	bld     *record.Builder // encodes batches; guarded by mu
	order   uint64          // order of the last batch made; guarded by mu
	bufs    batchBuffers    // guarded by mu
	// sending counts the requests handed to brokers whose bytes may still
	// be read: not yet sent, or in their Send.
	sending atomic.Int32
}

// batchBuffers recycles the buffers batches are encoded into. A settled
// batch's buffer may still be read by a Send of one of its attempts (an
// answer or a timeout can settle a batch while its request is being
// marshalled, or while it waits behind a stuck stream for a broker's
// writer). So a settled batch's buffer is only noted as released, and
// becomes free for the next batch at a collect of the sender when no
// request it handed to a broker is still unsent (Producer.sending).
type batchBuffers struct {
	released [][]byte
	free     [][]byte
}

// maxFreeBuffers bounds the buffers kept: enough for the batches of a few
// partitions in flight at once, at most a few MiB at the largest batch size.
const maxFreeBuffers = 16

// release notes that a settled batch's buffer is no longer needed once no
// Send can still read it.
func (bb *batchBuffers) release(b []byte) {
	if b != nil && len(bb.released) < maxFreeBuffers {
		bb.released = append(bb.released, b)
	}
}

// reclaim makes the released buffers free; the caller guarantees that no
// Send is running.
func (bb *batchBuffers) reclaim() {
	for _, b := range bb.released {
		if len(bb.free) < maxFreeBuffers {
			bb.free = append(bb.free, b)
			continue
		}
		// Keep the larger buffers: they serve any batch.
		i := slices.IndexFunc(bb.free, func(f []byte) bool { return cap(f) < cap(b) })
		if i >= 0 {
			bb.free[i] = b
		}
	}
	clear(bb.released)
	bb.released = bb.released[:0]
}

// get answers an empty buffer with room for n bytes.
func (bb *batchBuffers) get(n int) []byte {
	for i := len(bb.free) - 1; i >= 0; i-- {
		if b := bb.free[i]; cap(b) >= n {
			bb.free = slices.Delete(bb.free, i, i+1)
			return b[:0]
		}
	}
	return make([]byte, 0, n)
}

// partitionState is the producer's state for one partition. Up to
// maxInFlight batches are out at once, sent in order on one stream, which
// the storage node appends in order. When any attempt fails or is
// abandoned the partition recovers: nothing new is sent, the unsettled
// batches are resent one at a time in their original order (an earlier
// batch is never overtaken by a later one's retry), and new batches go out
// again once none is left.
type partitionState struct {
	pid     int64 // the idempotent producer id used here; -1 until taken
	renew   bool  // a batch failed: the next one needs a fresh producer id
	nextSeq int32 // base sequence of the next new batch
	// inflight are the batches sent and not yet answered, oldest first.
	inflight []*sendBatch
	// retry are the batches to send again, oldest first, before anything new.
	retry      []*sendBatch
	recovering bool
	// window are the new batches sent under pid, oldest first, from the
	// oldest one not yet settled: what maxInFlight counts.
	window []*sendBatch
	// acked: a batch under pid has been acknowledged here, so the node
	// knows the id and later batches may follow before earlier answers.
	acked bool
}

// canSend reports whether a new batch may go out: not while recovering,
// and within maxInFlight of the oldest batch not yet settled (one until a
// batch under the producer id is acknowledged).
func (ps *partitionState) canSend() bool {
	if ps.recovering {
		return false
	}
	// Settled batches at the front leave the window: neither in flight nor
	// waiting to be resent.
	for len(ps.window) > 0 {
		b := ps.window[0]
		if slices.Contains(ps.inflight, b) || slices.Contains(ps.retry, b) {
			break
		}
		ps.window = ps.window[1:]
	}
	limit := maxInFlight
	if !ps.acked {
		limit = 1
	}
	return len(ps.window) < limit && len(ps.inflight) < limit
}

// requeue puts b among the batches to resend, keeping them oldest first.
func (ps *partitionState) requeue(b *sendBatch) {
	i, _ := slices.BinarySearchFunc(ps.retry, b.order, func(x *sendBatch, o uint64) int { return cmp.Compare(x.order, o) })
	ps.retry = slices.Insert(ps.retry, i, b)
	ps.recovering = true
}

// unsettledBefore reports whether a batch made before b is still in flight
// or waiting to be resent.
func (ps *partitionState) unsettledBefore(b *sendBatch) bool {
	for _, x := range ps.inflight {
		if x.order < b.order {
			return true
		}
	}
	return len(ps.retry) > 0 && ps.retry[0].order < b.order
}

// settleCheck ends recovery once nothing is unsettled.
func (ps *partitionState) settleCheck() {
	if len(ps.inflight) == 0 && len(ps.retry) == 0 {
		ps.recovering = false
	}
}

// sendBatch is a batch encoded once and resent byte-for-byte.
type sendBatch struct {
	tp    accumulator.TP
	recs  []accumulator.Record // Token is the record's func(Result)
	order uint64               // when it was made: its place among its partition's batches
	data  []byte
	pid   int64
	// reencode: the batch must get a fresh producer id and sequence before
	// it is sent again (its old sequence can no longer be appended).
	reencode bool
	size     int // uncompressed encoded size, for the encoding buffer
	deadline time.Time
	attempts int // sends so far; an answer to an earlier one is stale
	retryAt  time.Time
	// maybeWritten: some attempt ended without a definite answer, so the
	// batch may be in the log whatever later attempts say.
	maybeWritten bool
	// lastErr: why the last attempt is being retried. A batch whose
	// delivery timeout ends while it waits to be resent fails with it, as
	// Kafka's producer reports its last error: a caller learns that the
	// in-sync replicas were too few, say, not only that time ran out.
	lastErr error
	// leader and leaderEpoch: where the current attempt went. When the
	// metadata names another leader or a newer epoch, the attempt is
	// abandoned and the batch resent to the new leader at once.
	leader      int32
	leaderEpoch int32
}

// NewProducer starts a producer on c.
func (c *Client) NewProducer(opts ...ProducerOption) *Producer {
	cfg := newProducerConfig(opts)
	p := &Producer{
		c:       c,
		cfg:     cfg,
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		acc:     accumulator.New(accumulator.Config{BatchSize: cfg.batchSize, Linger: cfg.linger}),
		sticky:  partitioner.NewSticky(randIntN),
		parts:   map[accumulator.TP]*partitionState{},
		idle:    make(chan struct{}),
		pending: map[uint64]int{},
		settled: make(chan struct{}),
		pid:     -1,
		bld:     record.NewBuilder(record.DefaultBatchOptions()),
		mem:     &memoryBudget{limit: cfg.bufferMemory},
	}
	go p.run()
	return p
}

// newProducerConfig is the configuration opts make of the defaults.
func newProducerConfig(opts []ProducerOption) producerConfig {
	cfg := producerConfig{
		acks:            AcksAll,
		batchSize:       DefaultBatchSize,
		linger:          DefaultLinger,
		sendWhenIdle:    DefaultSendWhenIdle,
		bufferMemory:    DefaultBufferMemory,
		maxBlock:        DefaultMaxBlock,
		deliveryTimeout: DefaultDeliveryTimeout,
		requestTimeout:  DefaultRequestTimeout,
		idempotent:      true,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.acks != AcksAll {
		cfg.idempotent = false
	}
	if cfg.bufferMemory <= 0 {
		cfg.bufferMemory = DefaultBufferMemory
	}
	if cfg.maxBlock <= 0 {
		cfg.maxBlock = DefaultMaxBlock
	}
	return cfg
}

// ProducerSettings answers the compression and delivery timeout a producer
// made with opts would have: for a caller that writes batches of its own
// (ProduceBatch) beside such producers, under the same settings.
func ProducerSettings(opts ...ProducerOption) (compression record.Compression, deliveryTimeout time.Duration) {
	cfg := newProducerConfig(opts)
	return cfg.compression, cfg.deliveryTimeout
}

// ErrProducerClosed is the result of a record produced after Close of its
// producer or client: nothing was sent, and a retry cannot help.
var ErrProducerClosed = errors.New("client: the producer or its client is closed")

// Produce queues r and calls done exactly once with its result (on another
// goroutine, or on this one when r is refused at once). It waits for the
// topic's metadata, and while the producer's buffer has no room for r
// (WithBufferMemory), at most max.block each (WithMaxBlock); ctx bounds
// those waits too (one already done refuses r unsent), and its span, if
// any, travels in a traceparent header. done must not block, nor
// call Produce: while the buffer is full it would wait for room that the
// goroutine running done is needed to make.
func (p *Producer) Produce(ctx context.Context, r Record, done func(Result)) {
	fail := func(err error) {
		part := int32(-1)
		if r.Partition != nil {
			part = *r.Partition
		}
		done(Result{Partition: part, Offset: -1, Timestamp: r.Timestamp, Err: err})
	}
	if err := topicname.Validate(r.Topic); err != nil {
		fail(err)
		return
	}
	if err := ctx.Err(); err != nil {
		fail(errs.Errorf(errs.RequestTimedOut, "not sent: %v", err))
		return
	}
	m := p.c.Metadata()
	if !p.c.isReady() || m.PartitionCount(r.Topic) == 0 {
		// The wait for metadata is bounded as the wait for buffer room
		// is (max.block), whatever ctx allows. (Only here: a context
		// and its timer for every record would cost the hot path.)
		mctx, cancel := context.WithTimeout(ctx, p.cfg.maxBlock)
		var err error
		m, err = p.topicMetadata(mctx, r.Topic)
		cancel()
		if err != nil {
			fail(err)
			return
		}
	}
	n := m.PartitionCount(r.Topic)
	if r.Partition != nil && (*r.Partition < 0 || *r.Partition >= n) {
		fail(errs.Errorf(errs.UnknownTopicOrPartition, "topic %q has %d partitions, no partition %d", r.Topic, n, *r.Partition))
		return
	}
	if r.Timestamp == 0 && !r.TimestampSet {
		r.Timestamp = time.Now().UnixMilli()
	}
	if r.Timestamp < 0 {
		fail(errs.Errorf(errs.InvalidTimestamp, "timestamp %d is negative: want milliseconds since the epoch", r.Timestamp))
		return
	}
	if err := CheckKey(KeysRequired(m, r.Topic), r.Topic, r.Key); err != nil {
		fail(err)
		return
	}
	if w := CreateTimes(m, r.Topic); w.Check {
		if err := CheckCreateTime(w, r.Topic, r.Timestamp, time.Now().UnixMilli()); err != nil {
			fail(err)
			return
		}
	}
	rec := accumulator.Record{Timestamp: r.Timestamp, Key: r.Key, Value: r.Value, Headers: withTraceparent(ctx, r.Headers), Token: done}
	maxBytes := maxMessageBytes(m, r.Topic)
	if size := accumulator.SingleBatchSize(&rec); size > maxBytes {
		fail(errs.Errorf(errs.MessageTooLarge, "a record of %d bytes (as a batch) is above max.message.bytes %d of topic %q", size, maxBytes, r.Topic))
		return
	}
	need := recordMemory(&rec)
	rec.Held = need
	if need > p.cfg.bufferMemory {
		fail(errs.Errorf(errs.MessageTooLarge, "a record of %d bytes is above the producer's buffer.memory of %d bytes", need, p.cfg.bufferMemory))
		return
	}
	if !p.mem.take(need) {
		// A closed producer refuses at once rather than wait for room.
		p.mu.Lock()
		closing := p.closing
		p.mu.Unlock()
		if closing {
			fail(ErrProducerClosed)
			return
		}
		if err := p.mem.acquire(ctx, need, p.cfg.maxBlock, p.press); err != nil {
			fail(err)
			return
		}
	}

	now := time.Now()
	p.mu.Lock()
	if p.closing || p.c.ctx.Err() != nil {
		// A closed client has no sender left to send it.
		p.mu.Unlock()
		p.mem.release(need)
		fail(ErrProducerClosed)
		return
	}
	tp := accumulator.TP{Topic: r.Topic}
	switch {
	case r.Partition != nil:
		tp.Partition = *r.Partition
	case r.Key != nil:
		tp.Partition = partitioner.ForKey(r.Key, n)
	default:
		avail := m.Available(r.Topic)
		tp.Partition = p.sticky.Partition(r.Topic, n, avail)
		if !p.acc.Fits(tp, &rec) {
			tp.Partition = p.sticky.OnNewBatch(r.Topic, n, avail, tp.Partition)
		}
	}
	rec.Gen = p.gen
	p.pending[rec.Gen]++
	limit := maxBytes // used only by a new batch: looked up for one
	if !p.acc.Fits(tp, &rec) {
		limit = batchLimit(m, r.Topic, maxBytes, p.cfg.compression)
	}
	p.acc.Append(tp, rec, now, limit)
	p.mu.Unlock()
	p.signal()
}

// ProduceSync produces recs and waits for their results, in order. When ctx
// ends first, the records still pending answer REQUEST_TIMED_OUT with
// MaybeWritten set: they are queued or in flight, and may still be written.
func (p *Producer) ProduceSync(ctx context.Context, recs ...Record) []Result {
	type indexed struct {
		i int
		r Result
	}
	ch := make(chan indexed, len(recs))
	p.ProduceAll(ctx, recs, func(i int, res Result) { ch <- indexed{i, res} })
	out := make([]Result, len(recs))
	got := make([]bool, len(recs))
	for n := 0; n < len(recs); n++ {
		select {
		case x := <-ch:
			out[x.i], got[x.i] = x.r, true
		case <-ctx.Done():
			// Results already in (a record refused at once) are answered
			// as they are; only the others are unknown.
			for drained := false; !drained; {
				select {
				case x := <-ch:
					out[x.i], got[x.i] = x.r, true
				default:
					drained = true
				}
			}
			for i := range out {
				if !got[i] {
					out[i] = Result{Partition: -1, Offset: -1, Err: errs.Errorf(errs.RequestTimedOut, "no answer yet: %v", ctx.Err()), MaybeWritten: true}
				}
			}
			return out
		}
	}
	return out
}

// ProduceAll produces recs as Produce does, in order, and calls done with
// each record's index and result. Under WithSendWhenIdle, no batch is sent
// early because its partition is idle until all of recs are queued, so
// they travel in as few batches as fit.
func (p *Producer) ProduceAll(ctx context.Context, recs []Record, done func(i int, res Result)) {
	p.mu.Lock()
	p.adding++
	p.mu.Unlock()
	for i, r := range recs {
		p.Produce(ctx, r, func(res Result) { done(i, res) })
	}
	p.mu.Lock()
	p.adding--
	p.mu.Unlock()
	p.signal()
}

// Flush sends everything queued without waiting for linger and waits until
// every record produced before the call has its result and its callback
// has returned, as Kafka's flush waits for the batches incomplete when it
// begins: records other goroutines go on producing meanwhile do not hold it
// up. A callback must not call Flush or Close: they would wait for it.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	gen := p.gen
	p.gen++ // records produced from now on are the next flush's
	p.mu.Unlock()
	return p.sendUntil(ctx, func() (bool, chan struct{}) { return p.pendingThroughLocked(gen) == 0, p.settled })
}

// sendUntil sends what is queued without lingering until over answers
// true, waiting on the channel it answers otherwise (over is called with
// mu held), or until ctx ends.
func (p *Producer) sendUntil(ctx context.Context, over func() (bool, chan struct{})) error {
	p.mu.Lock()
	p.flushers++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.flushers--
		p.mu.Unlock()
	}()
	p.signal()
	for {
		p.mu.Lock()
		done, changed := over()
		p.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return errs.Errorf(errs.RequestTimedOut, "flush: %v", ctx.Err())
		}
	}
}

// pendingThroughLocked counts the records of generations up to gen whose
// callbacks have not yet returned.
func (p *Producer) pendingThroughLocked(gen uint64) int {
	n := 0
	for g, c := range p.pending {
		if g <= gen {
			n += c
		}
	}
	return n
}

// delivered notes that the callbacks of recs have returned, and wakes the
// Flush calls waiting when a generation has none left.
func (p *Producer) delivered(recs []accumulator.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	emptied := false
	for i := range recs {
		g := recs[i].Gen
		if p.pending[g]--; p.pending[g] <= 0 {
			delete(p.pending, g)
			emptied = true
		}
	}
	if emptied {
		close(p.settled)
		p.settled = make(chan struct{})
	}
}

// waitDrained waits until nothing is queued, in flight, waiting to be
// resent or being delivered.
func (p *Producer) waitDrained(ctx context.Context) error {
	return p.sendUntil(ctx, func() (bool, chan struct{}) { return p.drainedLocked(), p.idle })
}

// Close refuses new records, delivers what is queued (bounded by ctx) and
// stops the producer. When ctx ends first, every record not yet answered
// fails before Close returns, as Kafka's close with a timeout: one still
// queued or waiting to be resent was not written, one in flight may have
// been (Result.MaybeWritten; a late answer is ignored). Like Flush, it
// waits for the callbacks, so a callback must not call it.
func (p *Producer) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	err := p.waitDrained(ctx)
	p.mu.Lock()
	p.stopped = true
	var abandoned []*sendBatch
	if err != nil {
		for _, ps := range p.parts {
			for _, b := range ps.inflight {
				b.maybeWritten = true
				abandoned = append(abandoned, b)
				p.inflight--
			}
			ps.inflight = nil
		}
		if len(abandoned) > 0 {
			p.delivering++ // their callbacks run after the unlock
		}
	}
	p.mu.Unlock()
	p.signal()
	<-p.done // the sender failed what was queued or waiting to be resent
	if len(abandoned) > 0 {
		why := errs.Errorf(errs.RequestTimedOut, "producer closed before the broker answered: %v", ctx.Err())
		for _, b := range abandoned {
			p.deliverErr(b, why)
		}
		p.mu.Lock()
		p.delivering--
		p.noteIdleLocked()
		p.mu.Unlock()
	}
	if err != nil {
		// Callbacks of answers that came meanwhile may still be running.
		p.mu.Lock()
		idle, drained := p.idle, p.drainedLocked()
		p.mu.Unlock()
		if !drained {
			<-idle
		}
	}
	return err
}

// press makes the sender send what is queued without lingering while a
// Produce waits for room in the buffer (on), until it stops waiting (off).
func (p *Producer) press(on bool) {
	p.mu.Lock()
	if on {
		p.flushers++
	} else {
		p.flushers--
	}
	p.mu.Unlock()
	p.signal()
}

func (p *Producer) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// drainedLocked: nothing queued, in flight or waiting to be retried.
func (p *Producer) drainedLocked() bool {
	return p.acc.Records() == 0 && p.inflight == 0 && p.retries == 0 && p.delivering == 0
}

func (p *Producer) noteIdleLocked() {
	if p.drainedLocked() {
		close(p.idle)
		p.idle = make(chan struct{})
	}
}

// topicMetadata waits for the first metadata and, briefly, for the topic.
func (p *Producer) topicMetadata(ctx context.Context, topic string) (*metadata.Image, error) {
	if err := p.c.WaitReady(ctx); err != nil {
		return nil, err
	}
	m := p.c.Metadata()
	if m.PartitionCount(topic) > 0 {
		return m, nil
	}
	wctx, cancel := context.WithTimeout(ctx, topicWait)
	defer cancel()
	m, err := p.c.WaitMetadata(wctx, func(m *metadata.Image) bool { return m.PartitionCount(topic) > 0 })
	if err != nil {
		return nil, noTopic(p.c.Metadata(), topic)
	}
	return m, nil
}

// codecFor answers the codec a batch of topic is encoded with: the topic's
// compression.type when it names one ("uncompressed" included), else (the
// default, "producer") the producer's own. The leader would recompress a
// batch in another codec to the named one (as Kafka's brokers do); encoding
// with it in the first place spares it that, and it stores the bytes it
// receives.
func codecFor(m *metadata.Image, topic string, producer record.Compression) record.Compression {
	if t, ok := m.Topic(topic); ok {
		if name := strings.TrimSpace(t.GetConfigs()["compression.type"]); name != "" && name != "producer" {
			if c, err := record.ParseCompression(name); err == nil {
				return c
			}
		}
	}
	return producer
}

// batchLimit is what a batch of topic may fill up to, measured before
// compression, for the leader to take it: maxBytes (the topic's
// max.message.bytes, which the leader checks on the batch as compressed)
// less what the topic's codec may add to records it cannot compress.
func batchLimit(m *metadata.Image, topic string, maxBytes int, producer record.Compression) int {
	return record.MaxBatchBeforeCompression(maxBytes, codecFor(m, topic, producer))
}

// maxMessageBytes is the topic's max.message.bytes.
func maxMessageBytes(m *metadata.Image, topic string) int {
	if t, ok := m.Topic(topic); ok {
		if v, ok := t.GetConfigs()["max.message.bytes"]; ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
				return n
			}
		}
	}
	return int(topicconfig.Defaults().MaxMessageBytes)
}

// withTraceparent adds the W3C traceparent of ctx's span to headers unless
// the span is not sampled or the caller set one.
func withTraceparent(ctx context.Context, headers []record.Header) []record.Header {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return headers // nothing records this trace (see telemetry.Sampled)
	}
	for _, h := range headers {
		if h.Key == TraceparentHeader {
			return headers
		}
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	if tp := carrier.Get(TraceparentHeader); tp != "" {
		headers = append(headers[:len(headers):len(headers)], record.Header{Key: TraceparentHeader, Value: []byte(tp)})
	}
	return headers
}

// brokerRequest is what goes to one broker in one round.
type brokerRequest struct {
	broker   int32
	batches  []sentBatch
	req      *storagev1.ProduceRequest
	deadline time.Time // the earliest delivery deadline among the batches
}

// sentBatch is one attempt of a batch: the answer settles the batch only if
// no later attempt replaced it.
type sentBatch struct {
	b       *sendBatch
	attempt int
}

// run is the sender: it moves ready batches to their leaders and wakes on
// new records, answers, metadata changes, producer ids and timers.
func (p *Producer) run() {
	defer close(p.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		metaChanged := p.c.metadataChanged()
		sends, wakeAt, pidWait, exit := p.collect(time.Now())
		p.sending.Add(int32(len(sends)))
		for _, s := range sends {
			p.send(s)
		}
		if exit {
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		d := time.Hour
		if !wakeAt.IsZero() {
			d = max(time.Until(wakeAt), 0)
		}
		timer.Reset(d)
		select {
		case <-p.wake:
		case <-timer.C:
		case <-metaChanged:
		case <-pidWait:
		case <-p.c.ctx.Done():
		}
	}
}

// collect, under the lock, expires what waited too long and takes every
// batch that can go now, grouped by leader broker. wakeAt is the next time
// something becomes sendable by time alone.
func (p *Producer) collect(now time.Time) (sends []*brokerRequest, wakeAt time.Time, pidWait <-chan struct{}, exit bool) {
	var failed []*sendBatch
	var failErrs []error
	defer func() {
		if len(failed) == 0 {
			return
		}
		for i, b := range failed {
			p.deliverErr(b, failErrs[i])
		}
		p.mu.Lock()
		p.delivering--
		p.noteIdleLocked()
		p.mu.Unlock()
	}()
	p.mu.Lock()
	defer p.mu.Unlock()
	defer func() {
		if len(failed) > 0 {
			p.delivering++ // their callbacks run after the unlock
		}
		p.noteIdleLocked()
	}()
	if p.sending.Load() == 0 {
		p.bufs.reclaim() // no request of an earlier round can still be read
	}
	soon := func(t time.Time) {
		if wakeAt.IsZero() || t.Before(wakeAt) {
			wakeAt = t
		}
	}
	clientGone := p.c.ctx.Err() != nil
	if p.stopped || clientGone {
		// Whatever is still queued will not be sent.
		why := errs.Errorf(errs.NetworkException, "producer closed before the record was sent")
		for _, b := range p.acc.Expire(now.Add(time.Hour)) {
			failed, failErrs = append(failed, p.wrap(b)), append(failErrs, why)
		}
		for _, ps := range p.parts {
			for _, b := range ps.retry {
				failed, failErrs = append(failed, b), append(failErrs, why)
				p.retries--
			}
			ps.retry = nil
		}
		return nil, time.Time{}, nil, true
	}

	timedOut := p.timedOut
	for _, ab := range p.acc.Expire(now.Add(-p.cfg.deliveryTimeout)) {
		b := p.wrap(ab)
		failed, failErrs = append(failed, b), append(failErrs, timedOut(b))
	}
	if t, ok := p.acc.Oldest(); ok {
		soon(t.Add(p.cfg.deliveryTimeout))
	}

	m := p.c.Metadata()
	byBroker := map[int32][]*brokerRequest{}
	route := func(ps *partitionState, b *sendBatch) bool {
		leader, epoch, ok := leaderOf(m, b.tp.Topic, b.tp.Partition)
		if !ok {
			return false
		}
		// A request carries one batch per partition: a partition's second
		// batch of the round goes in the broker's next request, which the
		// stream delivers after the first.
		var br *brokerRequest
		for _, r := range byBroker[leader] {
			if !slices.ContainsFunc(r.batches, func(x sentBatch) bool { return x.b.tp == b.tp }) {
				br = r
				break
			}
		}
		if br == nil {
			br = &brokerRequest{broker: leader, req: &storagev1.ProduceRequest{Acks: int32(p.cfg.acks), TimeoutMs: int32(p.cfg.requestTimeout / time.Millisecond), Principal: p.cfg.principal}}
			byBroker[leader] = append(byBroker[leader], br)
			sends = append(sends, br)
		}
		b.attempts++
		b.leader, b.leaderEpoch = leader, epoch
		br.batches = append(br.batches, sentBatch{b, b.attempts})
		br.req.Partitions = append(br.req.Partitions, &storagev1.PartitionProduce{
			Topic: b.tp.Topic, Partition: b.tp.Partition, CurrentLeaderEpoch: epoch, Records: b.data,
		})
		if br.deadline.IsZero() || b.deadline.Before(br.deadline) {
			br.deadline = b.deadline
		}
		ps.inflight = append(ps.inflight, b)
		p.inflight++
		return true
	}

	// A batch in flight to a leader the metadata has replaced (a paused,
	// cut-off or fenced node) would wait for that node's answer, up to the
	// request timeout. Resend it to the new leader now: it keeps its
	// producer id and sequence, so a new leader that already has it (the old
	// one replicated it before the change) answers it as a duplicate with
	// its offsets, never writing it twice. The old leader's late answer is
	// ignored (see complete).
	for _, ps := range p.parts {
		moved := slices.ContainsFunc(ps.inflight, func(b *sendBatch) bool {
			leader, epoch, ok := leaderOf(m, b.tp.Topic, b.tp.Partition)
			return ok && (leader != b.leader || epoch > b.leaderEpoch)
		})
		if !moved {
			continue
		}
		for _, b := range ps.inflight {
			p.c.log.Debug("leader changed: resending the batch in flight to the new leader", "topic", b.tp.Topic, "partition", b.tp.Partition,
				"old_leader", b.leader, "old_epoch", b.leaderEpoch)
			b.retryAt = now
			b.maybeWritten = true // the old leader may have appended it
			b.lastErr = nil       // what the old leader said is no longer news
			ps.requeue(b)
			p.inflight--
			p.retries++
		}
		ps.inflight = nil
	}

	for _, ps := range p.parts {
		// Resends go one at a time: the next only once the previous is
		// answered.
		for len(ps.retry) > 0 && len(ps.inflight) == 0 {
			b := ps.retry[0]
			if !now.Before(b.deadline) {
				failed, failErrs = append(failed, b), append(failErrs, timedOut(b))
				ps.retry = ps.retry[1:]
				p.retries--
				// Later batches keep their sequences: if this one is not in
				// the log they are refused as out of order and re-encoded
				// (see complete); if it is, they follow it.
				continue
			}
			if m.PartitionCount(b.tp.Topic) == 0 {
				for _, x := range ps.retry {
					failed, failErrs = append(failed, x), append(failErrs, errs.Errorf(errs.UnknownTopicOrPartition, "topic %q was deleted", b.tp.Topic))
					p.retries--
				}
				ps.retry = nil
				ps.pid, ps.renew = -1, true
				break
			}
			if now.Before(b.retryAt) {
				soon(b.retryAt)
				break
			}
			if b.reencode {
				var wait <-chan struct{}
				if wait = p.ensurePID(ps); wait != nil {
					if err := p.c.pids.refusal(); err != nil {
						for _, x := range ps.retry {
							failed, failErrs = append(failed, x), append(failErrs, err)
							p.retries--
						}
						ps.retry = nil
					}
					pidWait = wait
					break
				}
				if err := p.encode(ps, b); err != nil {
					failed, failErrs = append(failed, b), append(failErrs, err)
					ps.retry = ps.retry[1:]
					p.retries--
					continue
				}
			}
			if !route(ps, b) {
				soon(b.deadline)
				break
			}
			ps.retry = ps.retry[1:]
			p.retries--
		}
		ps.settleCheck()
	}

	flush := p.flushers > 0 || p.closing
	var eager func(accumulator.TP) bool
	if p.cfg.sendWhenIdle && p.adding == 0 {
		eager = func(tp accumulator.TP) bool {
			ps := p.parts[tp]
			return ps == nil || len(ps.inflight) == 0 && len(ps.retry) == 0
		}
	}
	// Every batch a partition may send goes now, not one a round: a burst
	// produced before the sender ran leaves nothing behind to wake it, and
	// the batches after the first would wait for an answer instead of
	// being in flight beside it.
	for _, tp := range p.acc.Ready(now, flush, eager) {
		ps := p.part(tp)
		for first := true; first || p.acc.ReadyNow(tp, now, flush); first = false {
			if !ps.canSend() {
				break
			}
			if _, _, ok := leaderOf(m, tp.Topic, tp.Partition); !ok {
				if _, found := m.Partition(tp.Topic, tp.Partition); !found && m.PartitionCount(tp.Topic) == 0 {
					// The topic was deleted: nothing will ever lead it again.
					for ab := p.acc.Pop(tp); ab != nil; ab = p.acc.Pop(tp) {
						failed, failErrs = append(failed, p.wrap(ab)), append(failErrs, errs.Errorf(errs.UnknownTopicOrPartition, "topic %q was deleted", tp.Topic))
					}
					if len(ps.inflight) == 0 && len(ps.retry) == 0 {
						delete(p.parts, tp) // answers still due find their state
						// The partition's next sequence goes with its state:
						// should the topic come back with its log (a
						// Describe grant taken away and given back hides it
						// for a while), a batch at sequence 0 under an id
						// the node knows would be taken for a duplicate of
						// the first batch and never written. Every partition
						// seen from now on takes a fresh id.
						p.pid = -1
					}
				}
				break // a metadata change wakes us; Expire bounds the wait
			}
			if wait := p.ensurePID(ps); wait != nil {
				if err := p.c.pids.refusal(); err != nil {
					// Refused ids (the client may write no topic): what
					// waits for one fails now, as Kafka's producer fails
					// on a refused InitProducerId.
					for ab := p.acc.Pop(tp); ab != nil; ab = p.acc.Pop(tp) {
						failed, failErrs = append(failed, p.wrap(ab)), append(failErrs, err)
					}
				}
				pidWait = wait
				break
			}
			ab := p.acc.Pop(tp)
			b := p.wrap(ab)
			b.size = ab.Bytes
			if err := p.encode(ps, b); err != nil {
				failed, failErrs = append(failed, b), append(failErrs, err)
				continue
			}
			if !route(ps, b) {
				break
			}
			ps.window = append(ps.window, b)
		}
	}
	if t, ok := p.acc.NextReady(now); ok {
		soon(t)
	}
	return sends, wakeAt, pidWait, false
}

func (p *Producer) part(tp accumulator.TP) *partitionState {
	ps := p.parts[tp]
	if ps == nil {
		ps = &partitionState{pid: -1}
		p.parts[tp] = ps
	}
	return ps
}

// wrap turns an accumulator batch into a batch to send.
func (p *Producer) wrap(ab *accumulator.Batch) *sendBatch {
	p.order++
	return &sendBatch{tp: ab.TP, recs: ab.Records, order: p.order, pid: -1, deadline: ab.Created.Add(p.cfg.deliveryTimeout)}
}

// ensurePID gives ps a producer id when the producer is idempotent and ps
// has none (or must renew it), answering a channel to wait on when no id
// can be had yet.
func (p *Producer) ensurePID(ps *partitionState) <-chan struct{} {
	if !p.cfg.idempotent || ps.pid >= 0 {
		return nil
	}
	if p.pid >= 0 && !ps.renew {
		ps.pid = p.pid
	} else {
		id, ok, wait := p.c.pids.tryTake()
		if !ok {
			return wait
		}
		ps.pid, ps.renew = id, false
		if p.pid < 0 {
			p.pid = id
		}
	}
	ps.nextSeq = 0
	ps.window, ps.acked = nil, false // a new id: its first batch goes out alone
	return nil
}

// encode builds b's bytes under ps's producer id and next sequence.
func (p *Producer) encode(ps *partitionState, b *sendBatch) error {
	opts := record.DefaultBatchOptions()
	opts.Compression = codecFor(p.c.Metadata(), b.tp.Topic, p.cfg.compression)
	if p.cfg.idempotent {
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = ps.pid, 0, ps.nextSeq
	}
	// One builder serves every batch (its record buffer is reused); the
	// batch itself goes into a buffer of its exact uncompressed size.
	bld := p.bld
	bld.Reset(opts)
	bld.Grow(b.size)
	for _, r := range b.recs {
		bld.Append(r.Timestamp, r.Key, r.Value, r.Headers...)
	}
	// A batch encoded again (a fresh producer id) was last sent before this
	// collect, so its old buffer is free at once unless a request of an
	// earlier round still waits to be sent.
	old := b.data
	data, _, err := bld.Build(p.bufs.get(b.size + record.HeaderSize))
	if err != nil {
		return err
	}
	if old != nil {
		p.bufs.release(old)
		if p.sending.Load() == 0 {
			p.bufs.reclaim()
		}
	}
	b.data, b.pid, b.reencode = data, ps.pid, false
	if p.cfg.idempotent {
		ps.nextSeq = int32((int64(ps.nextSeq) + int64(len(b.recs))) & 0x7fffffff) // wraps as Kafka's
	}
	return nil
}

// send hands one broker's batches to its stream. The wait for the answer
// is the request timeout (plus a margin for the storage node's own acks=all
// wait to answer first), but never past the batches' delivery deadline.
func (p *Producer) send(br *brokerRequest) {
	unused := func() { p.sending.Add(-1) }
	bc, err := p.c.broker(br.broker)
	if err != nil {
		unused()
		p.complete(br.batches, nil, err)
		return
	}
	call := &produceCall{req: br.req, unused: unused, done: func(resp *storagev1.ProduceResponse, err error) {
		p.complete(br.batches, resp, err)
	}}
	// Sent is done under acks=0; not sent (no stream, or not within the
	// request timeout) is retried like any request that never reached the
	// broker.
	call.noAnswer = p.cfg.acks == AcksNone
	call.timeout, call.endStream = p.cfg.requestTimeout+5*time.Second, true
	if left := time.Until(br.deadline); left < call.timeout && !call.noAnswer {
		call.timeout, call.endStream = max(left, 10*time.Millisecond), false
	}
	bc.produce(call)
}

// complete settles the batches of one request: delivered, to be retried, or
// failed. resp is nil with err set when the request failed as a whole, and
// nil with err nil under AcksNone.
func (p *Producer) complete(batches []sentBatch, resp *storagev1.ProduceResponse, err error) {
	type tp = accumulator.TP
	results := map[tp]*storagev1.PartitionProduceResult{}
	for _, r := range resp.GetPartitions() {
		results[tp{Topic: r.GetTopic(), Partition: r.GetPartition()}] = r
	}
	now := time.Now()
	type outcome struct {
		b   *sendBatch
		res *storagev1.PartitionProduceResult
		err error
	}
	var out []outcome
	p.mu.Lock()
	for _, sb := range batches {
		b := sb.b
		ps := p.part(b.tp)
		i := slices.Index(ps.inflight, b)
		if i < 0 || b.attempts != sb.attempt {
			// A stale answer: this attempt was abandoned when the leader
			// changed, and the batch was resent (or is waiting to be).
			p.c.log.Debug("ignoring the answer of an abandoned attempt", "topic", b.tp.Topic, "partition", b.tp.Partition, "attempt", sb.attempt)
			continue
		}
		ps.inflight = slices.Delete(ps.inflight, i, i+1)
		p.inflight--
		res := results[b.tp]
		berr := err
		switch {
		case berr != nil:
		case p.cfg.acks == AcksNone:
		case res == nil:
			berr = errs.Errorf(errs.UnknownServerError, "no answer for %s-%d in the produce response", b.tp.Topic, b.tp.Partition)
		case res.GetErrorCode() != skeinv1.ErrorCode_NONE && res.GetErrorCode() != skeinv1.ErrorCode_DUPLICATE_SEQUENCE_NUMBER:
			berr = errs.Errorf(errs.ForCode(errs.Code(res.GetErrorCode())), "%s", res.GetErrorMessage())
		}
		if berr != nil && !definite(berr, res != nil) {
			b.maybeWritten = true
		}
		retriable := errs.IsRetriable(berr)
		sequenceRefused := errs.Of(berr) == errs.OutOfOrderSequenceNumber || errs.Of(berr) == errs.UnknownProducerID
		if sequenceRefused && p.cfg.idempotent {
			// Refused before the append. Behind an earlier batch that is
			// still open, it only arrived first: resend it as it is.
			// Otherwise the batch before it failed and is not in the log,
			// or the node no longer knows the id (UNKNOWN_PRODUCER_ID: it
			// forgot it), so this sequence can never be appended: give it
			// a fresh one.
			retriable = true
			if !ps.unsettledBefore(b) {
				b.reencode = true
				if b.pid == ps.pid {
					ps.pid, ps.renew = -1, true
				}
			}
		}
		// An out-of-order refusal of a batch behind one that failed is the
		// producer's own affair, not what the caller should learn: the
		// batch's last refusal before it stands.
		ownAffair := retriable && sequenceRefused
		if berr != nil && retriable && now.Before(b.deadline) && !p.stopped && p.c.ctx.Err() == nil {
			b.retryAt = now.Add(p.c.backoff(b.attempts - 1))
			if !ownAffair {
				b.lastErr = berr
			}
			ps.requeue(b)
			p.retries++
			p.c.log.Debug("produce will be retried", "topic", b.tp.Topic, "partition", b.tp.Partition, "attempt", b.attempts, "err", berr)
			continue
		}
		if ownAffair {
			berr = p.timedOut(b) // its deadline passed (or the producer stops)
		}
		if berr != nil {
			if p.cfg.idempotent && b.pid == ps.pid {
				ps.pid, ps.renew = -1, true // a fresh producer id: the failed sequences are never reused
			}
			ps.recovering = true // batches after it must settle before anything new goes out
		}
		if berr == nil && b.pid == ps.pid {
			ps.acked = true
		}
		ps.settleCheck()
		p.bufs.release(b.data)
		b.data = nil
		out = append(out, outcome{b, res, berr})
	}
	if len(out) > 0 {
		p.delivering++ // their callbacks run after the unlock
	}
	p.noteIdleLocked()
	p.mu.Unlock()
	p.signal()
	if len(out) == 0 {
		return
	}
	defer func() {
		p.mu.Lock()
		p.delivering--
		p.noteIdleLocked()
		p.mu.Unlock()
	}()
	for _, o := range out {
		if o.err != nil {
			p.deliverErr(o.b, o.err)
			continue
		}
		// Room first: a callback may produce again.
		p.mem.release(recordsHeld(o.b.recs))
		base, appendTime := int64(-1), int64(-1)
		if o.res != nil {
			base, appendTime = o.res.GetBaseOffset(), o.res.GetLogAppendTimeMs()
		}
		for i, r := range o.b.recs {
			res := Result{Partition: o.b.tp.Partition, Offset: -1, Timestamp: r.Timestamp}
			if base >= 0 {
				res.Offset = base + int64(i)
			}
			if appendTime > 0 {
				res.Timestamp = appendTime
			}
			r.Token.(func(Result))(res)
		}
		p.delivered(o.b.recs)
	}
}

// timedOut is the error of a batch whose delivery timeout ended: its last
// refusal, or REQUEST_TIMED_OUT when it has none.
func (p *Producer) timedOut(b *sendBatch) error {
	if b.lastErr != nil {
		return errs.Errorf(errs.Of(b.lastErr), "delivery timeout of %v expired for %d records of %s-%d after %d attempts; the last: %s",
			p.cfg.deliveryTimeout, len(b.recs), b.tp.Topic, b.tp.Partition, b.attempts, errs.Message(b.lastErr))
	}
	why := ""
	m := p.c.Metadata()
	if _, _, ok := leaderOf(m, b.tp.Topic, b.tp.Partition); !ok {
		// No answer to blame: say what the metadata says of the partition.
		if b.tp.Partition < m.PartitionCount(b.tp.Topic) {
			why = ": the partition has no leader (offline: no in-sync replica is alive)"
		} else {
			why = ": the partition is not in this client's metadata"
		}
		if b.maybeWritten {
			why += "; an earlier attempt may have written them"
		}
	}
	return errs.Errorf(errs.RequestTimedOut, "delivery timeout of %v expired for %d records of %s-%d%s", p.cfg.deliveryTimeout, len(b.recs), b.tp.Topic, b.tp.Partition, why)
}

func (p *Producer) deliverErr(b *sendBatch, err error) {
	p.mem.release(recordsHeld(b.recs))
	for _, r := range b.recs {
		r.Token.(func(Result))(Result{Partition: b.tp.Partition, Offset: -1, Timestamp: r.Timestamp, Err: err, MaybeWritten: b.maybeWritten})
	}
	p.delivered(b.recs)
}

// definite reports whether a failed attempt is known not to have written
// the batch: the leader answered it (answered is true) with a refusal made
// before the append. A whole request that failed (timeout, broken stream)
// and the refusals that can come after the append are not definite. Those
// include NOT_LEADER_OR_FOLLOWER and KAFKA_STORAGE_ERROR: a leader that
// loses its leadership, or whose fsync fails, while an appended batch waits
// for its followers answers it so, and a follower that fetched it may be
// the next leader.
func definite(err error, answered bool) bool {
	if !answered {
		return false
	}
	switch errs.Of(err) {
	case errs.NotEnoughReplicasAfterAppend, errs.RequestTimedOut, errs.NotLeaderOrFollower, errs.KafkaStorageError:
		return false
	}
	return true
}
