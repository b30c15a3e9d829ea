package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	groupv1 "skein/gen/skein/group/v1"
	"skein/libs/client/accumulator"
	"skein/libs/client/partitioner"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/libs/record"
	"skein/libs/topicname"
)

// TxnOption configures a TransactionalProducer.
type TxnOption func(*txnConfig)

type txnConfig struct {
	timeout         time.Duration
	compression     record.Compression
	deliveryTimeout time.Duration
}

// WithTxnDeliveryTimeout bounds how long a Send keeps trying to write its
// records (delivery.timeout.ms; default DefaultDeliveryTimeout): a
// partition without a leader for longer fails the Send, and the
// transaction must then be aborted (its records may have been written).
func WithTxnDeliveryTimeout(d time.Duration) TxnOption {
	return func(c *txnConfig) { c.deliveryTimeout = d }
}

// WithTxnCompression sets the codec of the producer's batches for topics
// whose compression.type is producer (default none); a topic that names a
// codec gets that one.
func WithTxnCompression(codec record.Compression) TxnOption {
	return func(c *txnConfig) { c.compression = codec }
}

// WithTransactionTimeout sets the transaction timeout the coordinator
// enforces (transaction.timeout.ms): a transaction open longer is aborted
// and its producer fenced. 0 takes the coordinator's default (1 minute).
func WithTransactionTimeout(d time.Duration) TxnOption {
	return func(c *txnConfig) { c.timeout = d }
}

// ErrAbortRequired is wrapped by every call that refuses because the open
// transaction can only be aborted: a Send or SendOffsets failed in a way
// that leaves the transaction's content unknown.
var ErrAbortRequired = errors.New("the transaction must be aborted")

// TransactionalProducer writes records to any partitions, and a consumer
// group's offsets, as one transaction: read_committed readers see all of
// it once Commit returns (as each partition gets its marker) and none of
// it after Abort. It follows Kafka's transactional producer:
//
//   - NewTransactionalProducer calls InitProducerId for the transactional
//     id, which fences every older instance of it (their next call fails
//     with PRODUCER_FENCED) and aborts a transaction one of them left open.
//   - Begin opens a transaction locally. Send adds each partition it has not
//     yet written in this transaction to it (AddPartitionsToTxn, once per
//     partition), then writes one batch per partition (acks=all) under the
//     producer id and epoch, with this producer's own sequence per
//     partition, from 0 in every epoch; a retried batch is deduplicated by
//     the storage node. SendOffsets adds a group's consumed offsets.
//   - Commit and Abort end the transaction (EndTxn); the coordinator answers
//     the producer id and epoch of the next transaction (every end bumps
//     the epoch), and the sequences start again from 0. A transaction in
//     which nothing was added ends locally.
//
// Errors, as in Kafka:
//
//   - Fatal: PRODUCER_FENCED, INVALID_PRODUCER_EPOCH and
//     INVALID_PRODUCER_ID_MAPPING (another instance of the transactional id
//     took over, or the coordinator aborted the transaction at its timeout).
//     The producer is then unusable: every later call answers the same
//     error. Close it and make a new one, which aborts what was left open.
//   - Abortable: a Send whose records may have been written (the outcome is
//     unknown: a timeout, a lost connection), that wrote some of its
//     records and not others, or whose sequences are in doubt, and a
//     failed SendOffsets. The transaction can then only be
//     aborted: Send, SendOffsets and Commit answer an error wrapping
//     ErrAbortRequired and the cause until Abort.
//   - Otherwise the transaction is as it was: a Send refused before
//     anything was written (an unknown partition, a record too large) did
//     not add those records; a Commit or Abort that failed may be called
//     again (a retry of the same end is answered as the first; the opposite
//     end of a transaction the coordinator already decided is
//     INVALID_TXN_STATE, after which only a new producer recovers).
//
// Calls are serialized; it is safe for concurrent use, but a transaction
// has one owner in practice. Close does not end an open transaction: the
// next instance of the id, or the transaction timeout, aborts it.
type TransactionalProducer struct {
	c      *Client
	txns   *Transactions
	groups *Groups
	id     string
	cfg    txnConfig

	mu     sync.Mutex
	pid    int64                    // guarded by mu
	epoch  int16                    // guarded by mu
	seq    map[TopicPartition]int32 // next base sequence per partition, this epoch; guarded by mu
	added  map[TopicPartition]bool  // partitions in the open transaction; guarded by mu
	groupz map[string]bool          // groups whose offsets are in the open transaction; guarded by mu
	open   bool                     // Begin was called and the transaction not ended; guarded by mu
	// touched: the coordinator may have a transaction open (an add was
	// sent); confirmed: it has one (an add succeeded); ending: an EndTxn
	// for it was sent, whose answer did not come, deciding endCommit.
	touched, confirmed, ending, endCommit bool
	abortErr                              error               // the cause that leaves only Abort; guarded by mu
	fatal                                 error               // answered to every call once set; guarded by mu
	closed                                bool                // guarded by mu
	sticky                                *partitioner.Sticky // guarded by mu
}

// NewTransactionalProducer makes a producer for transactionalID: it calls
// InitProducerId, which fences every older instance of the id and aborts a
// transaction one of them left open (retrying while that abort completes,
// until ctx ends).
func (c *Client) NewTransactionalProducer(ctx context.Context, transactionalID string, opts ...TxnOption) (*TransactionalProducer, error) {
	if transactionalID == "" {
		return nil, errs.Errorf(errs.InvalidRequest, "a transactional producer needs a transactional id")
	}
	p := &TransactionalProducer{
		c: c, txns: c.Transactions(), groups: c.Groups(), id: transactionalID,
		seq: map[TopicPartition]int32{}, added: map[TopicPartition]bool{}, groupz: map[string]bool{},
		sticky: partitioner.NewSticky(randIntN),
	}
	p.cfg.deliveryTimeout = DefaultDeliveryTimeout
	for _, o := range opts {
		o(&p.cfg)
	}
	if p.cfg.timeout < 0 || p.cfg.deliveryTimeout <= 0 {
		p.txns.Close()
		p.groups.Close()
		return nil, errs.Errorf(errs.InvalidRequest, "transaction timeout %v and delivery timeout %v: want a timeout of 0 (the coordinator's default) or more, and a positive delivery timeout", p.cfg.timeout, p.cfg.deliveryTimeout)
	}
	pid, epoch, err := p.txns.InitProducerID(ctx, transactionalID, p.cfg.timeout)
	if err != nil {
		p.txns.Close()
		p.groups.Close()
		return nil, err
	}
	p.pid, p.epoch = pid, epoch
	return p, nil
}

// TransactionalID is the producer's transactional id.
func (p *TransactionalProducer) TransactionalID() string { return p.id }

// ProducerIdentity answers the producer id and epoch of the current (or
// next) transaction.
func (p *TransactionalProducer) ProducerIdentity() (int64, int16) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid, p.epoch
}

// fatalCode reports whether err ends the producer: another producer owns
// the id now, or (as Kafka's producer treats it) the principal may not use
// the transactional id.
func fatalCode(err error) bool {
	switch errs.Of(err) {
	case errs.ProducerFenced, errs.InvalidProducerEpoch, errs.InvalidProducerIDMapping, errs.TransactionalIDAuthorizationFailed:
		return true
	}
	return false
}

// usableLocked answers why no call can run: closed, or a fatal error.
func (p *TransactionalProducer) usableLocked() error {
	if p.fatal != nil {
		return p.fatal
	}
	if p.closed {
		return errs.Errorf(errs.InvalidRequest, "transactional producer %q is closed", p.id)
	}
	return nil
}

// inTxnLocked answers why no Send or SendOffsets can run now.
func (p *TransactionalProducer) inTxnLocked() error {
	if err := p.usableLocked(); err != nil {
		return err
	}
	if !p.open {
		return errs.Errorf(errs.InvalidTxnState, "transactional producer %q has no open transaction (call Begin)", p.id)
	}
	if p.abortErr != nil {
		return p.abortRequired()
	}
	return nil
}

func (p *TransactionalProducer) abortRequired() error {
	return fmt.Errorf("transactional producer %q: %w: %w", p.id, ErrAbortRequired, p.abortErr)
}

// failLocked classifies a failed call: fatal errors make the producer
// unusable, abortable ones leave only Abort.
func (p *TransactionalProducer) failLocked(err error, abortable bool) error {
	if fatalCode(err) {
		p.fatal = fmt.Errorf("transactional producer %q is fenced and unusable: %w", p.id, err)
		return p.fatal
	}
	if abortable {
		p.abortErr = err
		return p.abortRequired()
	}
	return err
}

// Begin opens a transaction (locally: the coordinator learns of it with the
// first partition or offsets added). It fails when one is open already.
func (p *TransactionalProducer) Begin() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.usableLocked(); err != nil {
		return err
	}
	if p.open {
		return errs.Errorf(errs.InvalidTxnState, "transactional producer %q already has an open transaction", p.id)
	}
	p.open = true
	return nil
}

// sendGroup is the records of one Send bound for one partition.
type sendGroup struct {
	tp   TopicPartition
	idx  []int
	recs []Record
}

// Send writes recs in the open transaction and answers their results in
// order. Each record goes to Record.Partition, else the partition of its key
// (murmur2, as the idempotent producer), else one sticky partition of its
// topic for the whole call. Every record is checked first (its partition,
// its size against the topic's max.message.bytes, its key when the topic is
// compacted): one refused fails the whole Send before anything is written.
// Partitions new to the transaction are then added to it, and each
// partition gets its records in batches (acks=all) that fit the topic's
// max.message.bytes, one after another; partitions are written at once.
// Batches are retried for at most the delivery timeout. On an error
// the results say, record by record, what was written; see
// TransactionalProducer for what the error leaves.
func (p *TransactionalProducer) Send(ctx context.Context, recs ...Record) ([]Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.inTxnLocked(); err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, nil
	}
	groups, err := p.partitionLocked(ctx, recs)
	if err != nil {
		return nil, err
	}
	m := p.c.Metadata()
	now := time.Now().UnixMilli()
	for i, r := range recs {
		if err := checkTxnRecord(ctx, m, r, now); err != nil {
			return nil, errs.Errorf(errs.Of(err), "record %d: %s", i, errs.Message(err))
		}
	}
	var fresh []TopicPartition
	for _, g := range groups {
		if !p.added[g.tp] {
			fresh = append(fresh, g.tp)
		}
	}
	if len(fresh) > 0 {
		p.touched = true
		if err := p.txns.AddPartitions(ctx, p.id, p.pid, p.epoch, fresh); err != nil {
			return nil, p.failLocked(err, false)
		}
		p.confirmed = true
		for _, tp := range fresh {
			p.added[tp] = true
		}
	}
	type outcome struct {
		res []Result // of the records written, in order
		err error
	}
	dctx, cancel := context.WithTimeout(ctx, p.cfg.deliveryTimeout)
	defer cancel()
	outs := make([]outcome, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		base := p.seq[g.tp]
		wg.Go(func() {
			var res []Result
			for _, chunk := range txnChunks(ctx, g.recs, batchLimit(m, g.tp.Topic, maxMessageBytes(m, g.tp.Topic), p.cfg.compression), now) {
				id := BatchIdentity{ProducerID: p.pid, ProducerEpoch: p.epoch, BaseSequence: base + int32(len(res)), TransactionalID: p.id, Compression: p.cfg.compression}
				r, err := p.c.ProduceBatch(dctx, g.tp.Topic, g.tp.Partition, AcksAll, id, chunk)
				if err != nil {
					outs[i] = outcome{res, err}
					return
				}
				res = append(res, r...)
			}
			outs[i] = outcome{res, nil}
		})
	}
	wg.Wait()
	out := make([]Result, len(recs))
	var first error
	abortable, wrote := false, false
	for i, g := range groups {
		o := outs[i]
		p.seq[g.tp] += int32(len(o.res))
		wrote = wrote || len(o.res) > 0
		for j, r := range o.res {
			out[g.idx[j]] = r
		}
		if o.err == nil {
			continue
		}
		maybe := MaybeWritten(o.err)
		switch errs.Of(o.err) {
		case errs.OutOfOrderSequenceNumber, errs.UnknownProducerID, errs.DuplicateSequenceNumber:
			abortable = true // the partition's sequence is in doubt
		}
		abortable = abortable || maybe
		for _, k := range g.idx[len(o.res):] {
			out[k] = Result{Partition: g.tp.Partition, Offset: -1, Timestamp: recs[k].Timestamp, Err: o.err, MaybeWritten: maybe}
		}
		if first == nil || fatalCode(o.err) {
			first = fmt.Errorf("%s-%d: %w", g.tp.Topic, g.tp.Partition, o.err)
		}
	}
	if first != nil {
		// Some of this Send's records are in the transaction and others
		// are not: it can no longer commit what the caller sent.
		return out, p.failLocked(first, abortable || wrote)
	}
	return out, nil
}

// checkTxnRecord refuses a record its partition's leader would refuse with
// its batch: one larger than the topic's max.message.bytes, one without a
// key for a compacted topic, a create time negative or outside the topic's
// window. (A codec that grows a batch it cannot compress may still take a
// record just under the limit past it: the leader then refuses it.)
func checkTxnRecord(ctx context.Context, m *metadata.Image, r Record, now int64) error {
	if r.Timestamp < 0 {
		return errs.Errorf(errs.InvalidTimestamp, "timestamp %d is negative: want milliseconds since the epoch", r.Timestamp)
	}
	r.Headers = withTraceparent(ctx, r.Headers) // as ProduceBatch writes it
	if size, limit := SingleRecordBatchSize(r), maxMessageBytes(m, r.Topic); size > limit {
		return errs.Errorf(errs.MessageTooLarge, "%d bytes as a batch, above max.message.bytes %d of topic %q", size, limit, r.Topic)
	}
	if err := CheckKey(KeysRequired(m, r.Topic), r.Topic, r.Key); err != nil {
		return err
	}
	if r.TimestampSet || r.Timestamp != 0 {
		if err := CheckCreateTime(CreateTimes(m, r.Topic), r.Topic, r.Timestamp, now); err != nil {
			return err
		}
	}
	return nil
}

// txnChunkSlack is what a record may take in a batch beyond its size
// estimated here: the longer varints of its offset and timestamp deltas.
const txnChunkSlack = 16

// txnChunks splits one partition's records into runs whose batches fit
// within limit (batchLimit: max.message.bytes less what compression may
// add), each at least one record (checked against max.message.bytes alone
// before).
func txnChunks(ctx context.Context, recs []Record, limit int, now int64) [][]Record {
	var out [][]Record
	start, size := 0, record.HeaderSize
	for i, r := range recs {
		ts := r.Timestamp
		if ts == 0 && !r.TimestampSet {
			ts = now
		}
		n := accumulator.RecordSize(&accumulator.Record{Timestamp: ts, Key: r.Key, Value: r.Value, Headers: withTraceparent(ctx, r.Headers)}, 0, ts) + txnChunkSlack
		if i > start && size+n > limit {
			out = append(out, recs[start:i])
			start, size = i, record.HeaderSize
		}
		size += n
	}
	return append(out, recs[start:])
}

// partitionLocked spreads recs over their partitions, keeping their order
// within each partition.
func (p *TransactionalProducer) partitionLocked(ctx context.Context, recs []Record) ([]*sendGroup, error) {
	if err := p.c.WaitReady(ctx); err != nil {
		return nil, err
	}
	byTP := map[TopicPartition]*sendGroup{}
	var order []*sendGroup
	sticky := map[string]int32{}
	for i, r := range recs {
		if err := topicname.Validate(r.Topic); err != nil {
			return nil, errs.Errorf(errs.InvalidTopic, "record %d: %s", i, errs.Message(err))
		}
		m := p.c.Metadata()
		n := m.PartitionCount(r.Topic)
		if n == 0 {
			wctx, cancel := context.WithTimeout(ctx, topicWait)
			m2, err := p.c.WaitMetadata(wctx, func(m *metadata.Image) bool { return m.PartitionCount(r.Topic) > 0 })
			cancel()
			if err != nil {
				return nil, noTopic(p.c.Metadata(), r.Topic)
			}
			m, n = m2, m2.PartitionCount(r.Topic)
		}
		tp := TopicPartition{Topic: r.Topic}
		switch {
		case r.Partition != nil:
			if *r.Partition < 0 || *r.Partition >= n {
				return nil, errs.Errorf(errs.UnknownTopicOrPartition, "topic %q has %d partitions, no partition %d", r.Topic, n, *r.Partition)
			}
			tp.Partition = *r.Partition
		case r.Key != nil:
			tp.Partition = partitioner.ForKey(r.Key, n)
		default:
			s, ok := sticky[r.Topic]
			if !ok {
				s = p.sticky.Partition(r.Topic, n, m.Available(r.Topic))
				sticky[r.Topic] = s
			}
			tp.Partition = s
		}
		g := byTP[tp]
		if g == nil {
			g = &sendGroup{tp: tp}
			byTP[tp] = g
			order = append(order, g)
		}
		g.idx = append(g.idx, i)
		g.recs = append(g.recs, r)
	}
	// The next call's keyless records go to another partition.
	for topic, s := range sticky {
		m := p.c.Metadata()
		p.sticky.OnNewBatch(topic, m.PartitionCount(topic), m.Available(topic), s)
	}
	return order, nil
}

// SendOffsets adds a group's consumed offsets (the next offset to read,
// per partition) to the open transaction: the group's coordinator keeps
// them pending and makes them the group's committed offsets when the
// transaction commits (they are dropped if it aborts). The group is added
// to the transaction (AddOffsetsToTxn) the first time. Any partition's
// refusal is answered as an error, and leaves the transaction to be
// aborted.
//
// It names no member, so the coordinator takes the offsets whoever owns
// the partitions now: a consumer in a group sends them with
// SendGroupOffsets instead.
func (p *TransactionalProducer) SendOffsets(ctx context.Context, group string, offsets map[TopicPartition]int64) error {
	return p.sendOffsets(ctx, GroupMetadata{Group: group}, offsets)
}

// GroupMetadata names the group member whose consumed offsets a
// transaction commits (Kafka's ConsumerGroupMetadata):
// GroupConsumer.GroupMetadata answers it.
type GroupMetadata struct {
	Group       string
	MemberID    string
	MemberEpoch int32
}

// SendGroupOffsets is SendOffsets for offsets a group member consumed, as
// Kafka's sendOffsetsToTransaction(offsets, groupMetadata): the group's
// coordinator refuses them (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH) unless
// the member, at that epoch, still owns their partitions, so a consumer
// whose partitions moved to another member while it worked cannot commit
// over the new owner's offsets. The transaction must then be aborted, and
// the consumer starts again from the committed offsets.
func (p *TransactionalProducer) SendGroupOffsets(ctx context.Context, meta GroupMetadata, offsets map[TopicPartition]int64) error {
	if meta.MemberID == "" {
		return errs.Errorf(errs.InvalidRequest, "group metadata without a member id: use SendOffsets")
	}
	return p.sendOffsets(ctx, meta, offsets)
}

func (p *TransactionalProducer) sendOffsets(ctx context.Context, meta GroupMetadata, offsets map[TopicPartition]int64) error {
	group := meta.Group
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.inTxnLocked(); err != nil {
		return err
	}
	if len(offsets) == 0 {
		return nil
	}
	if !p.groupz[group] {
		p.touched = true
		if err := p.txns.AddOffsets(ctx, p.id, p.pid, p.epoch, group); err != nil {
			return p.failLocked(err, false)
		}
		p.confirmed = true
		p.groupz[group] = true
	}
	req := &groupv1.TxnOffsetCommitRequest{TransactionalId: p.id, GroupId: group, ProducerId: p.pid, ProducerEpoch: int32(p.epoch)}
	if meta.MemberID != "" {
		req.MemberId, req.MemberEpoch = meta.MemberID, &meta.MemberEpoch
	}
	for _, tp := range sortTPs(slices.Collect(maps.Keys(offsets))) {
		req.Offsets = append(req.Offsets, &groupv1.PartitionOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: offsets[tp]})
	}
	results, err := p.groups.TxnCommitOffsets(ctx, req)
	if err != nil {
		return p.failLocked(err, true)
	}
	var refused []error
	var fatal error
	for _, r := range results {
		if err := codeErr(r.GetErrorCode(), r.GetErrorMessage()); err != nil {
			refused = append(refused, fmt.Errorf("%s-%d: %w", r.GetTopic(), r.GetPartition(), err))
			if fatalCode(err) {
				fatal = err
			}
		}
	}
	switch {
	case fatal != nil:
		return p.failLocked(fatal, true)
	case len(refused) > 0:
		return p.failLocked(errs.Errorf(errs.Of(refused[0]), "offsets of group %q refused: %v", group, refused), true)
	}
	return nil
}

// Commit commits the open transaction (EndTxn) and takes the producer id
// and epoch the coordinator answers for the next one. It refuses, with an
// error wrapping ErrAbortRequired, a transaction that can only be aborted.
// It answers once the decision is durable; read_committed readers see the
// records as the markers reach their partitions, within moments.
func (p *TransactionalProducer) Commit(ctx context.Context) error {
	return p.end(ctx, true)
}

// Abort aborts the open transaction (EndTxn): its records are never seen by
// read_committed readers and its offsets are dropped. A consumer feeding
// the transaction should go back to the group's committed offsets.
func (p *TransactionalProducer) Abort(ctx context.Context) error {
	return p.end(ctx, false)
}

func (p *TransactionalProducer) end(ctx context.Context, commit bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.usableLocked(); err != nil {
		return err
	}
	if !p.open {
		return errs.Errorf(errs.InvalidTxnState, "transactional producer %q has no open transaction", p.id)
	}
	if commit && p.abortErr != nil {
		return p.abortRequired()
	}
	if !p.touched {
		p.resetLocked()
		return nil
	}
	otherSent := p.ending && p.endCommit != commit
	if !p.ending {
		p.ending, p.endCommit = true, commit
	}
	pid, epoch, err := p.txns.End(ctx, p.id, p.pid, p.epoch, commit)
	switch {
	case err == nil:
		p.pid, p.epoch = pid, epoch
	case errs.Of(err) == errs.InvalidTxnState && !p.confirmed && !otherSent:
		// Only adds whose answer was lost were sent, and none reached
		// the coordinator: there is no transaction to end (an EndTxn of
		// the same decision that did reach it would be answered as its
		// retry). After an EndTxn of the other decision whose answer was
		// lost, the refusal means that one decided the transaction, and
		// is answered.
	default:
		return p.failLocked(err, false)
	}
	p.resetLocked()
	return nil
}

// resetLocked closes the local transaction; a new epoch (or not) starts
// the sequences again.
func (p *TransactionalProducer) resetLocked() {
	p.open, p.touched, p.confirmed, p.ending, p.endCommit, p.abortErr = false, false, false, false, false, nil
	clear(p.added)
	clear(p.groupz)
	clear(p.seq)
}

// Close releases the producer's connections; later calls fail. It does not
// end an open transaction (see TransactionalProducer).
func (p *TransactionalProducer) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.txns.Close()
	p.groups.Close()
	return nil
}
