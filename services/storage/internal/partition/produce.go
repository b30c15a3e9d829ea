package partition

import (
	"context"
	"errors"
	"time"

	"skein/libs/errs"
	"skein/libs/record"
	"skein/services/storage/internal/producer"
)

// Acks values.
const (
	AcksNone   = 0
	AcksLeader = 1
	AcksAll    = -1
)

// ProduceResult is where a produce landed.
type ProduceResult struct {
	BaseOffset    record.Offset
	LastOffset    record.Offset
	LogAppendTime int64 // -1: create time is kept
	// DuplicateMaxTimestamp, for a batch answered as a retry of one
	// already written, is the largest timestamp that write stored; -1
	// otherwise.
	DuplicateMaxTimestamp int64
	LogStartOffset        record.Offset
	LeaderEpoch           int32
	// StoredBytes is what the batches appended take in the log;
	// UncompressedBytes what they would take with their records
	// decompressed. Both 0 for a duplicate (nothing appended).
	StoredBytes, UncompressedBytes int
	// Recompressed is the batches re-encoded to the topic's
	// compression.type before the append.
	Recompressed int
}

// Produce appends the batches as leader and, for acks=all, waits until every
// ISR member has them (the HW passes them) or ctx ends. Validation happens
// before anything is written: a refused produce leaves the log unchanged.
func (p *Partition) Produce(ctx context.Context, acks int, leaderEpoch int32, batches []byte) (ProduceResult, error) {
	pend, err := p.Append(acks, leaderEpoch, batches)
	if err != nil {
		return pend.Result, err
	}
	return p.Await(ctx, pend)
}

// Pending is a produce that Append has written and Await waits for.
type Pending struct {
	Result ProduceResult
	w      *waiter // nil: nothing to wait for (acks 0 or 1, or already answered)
	// syncTo: Await first applies flush.messages to the offsets below it
	// (0: nothing was written).
	syncTo record.Offset
	// heldByDisk: the HW may not count the append until it is fsynced
	// (flush.messages=1); Await moves it once the sync is done.
	heldByDisk bool
}

// Append is Produce's first half: it validates and appends the batches now,
// in the caller's goroutine — so a stream's requests for one partition are
// appended in the order they arrived — and answers what Await waits for.
// The append is published at once (followers may fetch it); the fsync
// flush.messages asks for is Await's, so that the next request's append
// need not wait for the disk and one fsync can cover both.
func (p *Partition) Append(acks int, leaderEpoch int32, batches []byte) (Pending, error) {
	if acks != AcksNone && acks != AcksLeader && acks != AcksAll {
		return Pending{}, errs.Errorf(errs.InvalidRequiredAcks, "acks=%d: must be 0, 1 or -1", acks)
	}
	batches, recompressed, err := p.recompress(batches)
	if err != nil {
		return Pending{}, err
	}
	res, w, err := p.append(acks, leaderEpoch, batches)
	if res.StoredBytes > 0 {
		res.Recompressed = recompressed
	}
	pend := Pending{Result: res, w: w}
	if err == nil && res.BaseOffset >= 0 {
		// A duplicate's first append may still be syncing: it is waited
		// for too.
		pend.syncTo = res.LastOffset + 1
		pend.heldByDisk = p.log.DurableEnd() < pend.syncTo
	}
	return pend, err
}

// recompress re-encodes, when the topic's compression.type names a codec,
// the batches that arrive in another one (as Kafka's LogValidator does),
// outside the replica's mutex: the CPU it takes holds up no one else. A
// batch already in the codec is passed on as it is, without decoding.
// Anything malformed, or too large to be accepted, is passed on unchanged
// for validation to refuse.
func (p *Partition) recompress(batches []byte) (_ []byte, n int, _ error) {
	p.mu.Lock()
	on, codec, maxBytes := p.cfg.Recompress, p.cfg.Compression, p.cfg.MaxMessageBytes
	p.mu.Unlock()
	if !on {
		return batches, 0, nil
	}
	var out []byte
	it := record.NewBatchIter(batches)
	for it.Next() {
		b := it.Batch()
		if !record.NeedsRecompress(b, codec) || (maxBytes > 0 && b.Size() > maxBytes) {
			if out != nil {
				out = append(out, b...)
			}
			continue
		}
		if out == nil {
			out = append(make([]byte, 0, len(batches)), batches[:it.Pos()-b.Size()]...)
		}
		var err error
		if _, out, err = record.Recompress(out, b, codec, max(maxBytes*64, record.DefaultMaxDecompressed)); err != nil {
			return nil, 0, err
		}
		n++
	}
	if it.Err() != nil || out == nil {
		return batches, 0, nil
	}
	return out, n, nil
}

// Await is Produce's second half: it applies flush.messages to what Append
// wrote (returning once it is fsynced, when the topic asks for that), and
// for acks=all it then waits until every ISR member has the batches (the HW
// passes them) or ctx ends.
func (p *Partition) Await(ctx context.Context, pend Pending) (ProduceResult, error) {
	res, w := pend.Result, pend.w
	if pend.syncTo > 0 {
		if err := p.log.SyncIfDue(pend.syncTo); err != nil {
			if w != nil {
				p.dropWaiter(w)
			}
			return res, errs.Errorf(errs.KafkaStorageError, "%s-%d: %v", p.cfg.Topic, p.cfg.Partition, err)
		}
		if pend.heldByDisk {
			p.afterSync()
		}
	}
	if w == nil {
		return res, nil
	}
	select {
	case err := <-w.done:
		return res, err
	case <-ctx.Done():
		p.dropWaiter(w)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return res, errs.Errorf(errs.RequestTimedOut, "%s-%d: offsets %d..%d not replicated to the ISR in time", p.cfg.Topic, p.cfg.Partition, res.BaseOffset, res.LastOffset)
		}
		return res, ctx.Err()
	}
}

// SyncTail fsyncs the tail the HW waits on when no produce will: under
// flush.messages=1 the leader counts its log toward the HW only once it is
// fsynced, and a replica that restarted may hold a tail its previous run
// fsynced without recording it (the recovery point is checkpointed once a
// second). Without a new produce to sync it, that tail would stay below
// the HW. It also moves the HW over what another fsync made durable
// without moving it (a flush by flush.ms, or a follower's own sync just
// before it became leader). The replica manager calls it on its
// housekeeping tick; it does nothing unless the HW is below the LEO.
func (p *Partition) SyncTail() error {
	p.mu.Lock()
	leo := p.log.LogEndOffset()
	leader := p.role == Leader && p.hw < leo && !p.log.Failed()
	durable := p.log.DurableEnd()
	behind := leader && p.hw < durable
	p.mu.Unlock()
	if leader && durable < leo {
		if err := p.log.SyncIfDue(leo); err != nil {
			return errs.Errorf(errs.KafkaStorageError, "%s-%d: %v", p.cfg.Topic, p.cfg.Partition, err)
		}
		behind = true
	}
	if behind {
		p.afterSync()
	}
	return nil
}

// afterSync moves the HW over what an fsync made durable, and answers
// the produces it completes.
func (p *Partition) afterSync() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.maybeAdvanceHWLocked()
	p.completeWaitersLocked()
}

func (p *Partition) dropWaiter(w *waiter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.waiters {
		if x == w {
			p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
			return
		}
	}
}

type parsed struct {
	b   record.Batch
	pb  producer.Batch
	dup *producer.Verdict
}

func (p *Partition) append(acks int, leaderEpoch int32, batches []byte) (ProduceResult, *waiter, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkLeaderLocked(leaderEpoch); err != nil {
		return ProduceResult{}, nil, err
	}
	// As Kafka: the ISR check comes first, so a producer retrying through an
	// outage keeps seeing NOT_ENOUGH_REPLICAS rather than sequence errors.
	if acks == AcksAll && len(p.st.ISR) < p.cfg.MinInsyncReplicas {
		return ProduceResult{}, nil, errs.Errorf(errs.NotEnoughReplicas, "%s-%d: ISR %v is smaller than min.insync.replicas=%d", p.cfg.Topic, p.cfg.Partition, p.st.ISR, p.cfg.MinInsyncReplicas)
	}
	list, err := p.validateLocked(batches)
	if err != nil {
		return ProduceResult{}, nil, err
	}
	res := ProduceResult{BaseOffset: -1, LogAppendTime: -1, DuplicateMaxTimestamp: -1, LeaderEpoch: p.st.LeaderEpoch}
	appended := false
	for _, x := range list {
		var first, last record.Offset
		if x.dup != nil {
			first, last = record.Offset(x.dup.FirstOffset), record.Offset(x.dup.LastOffset)
			if x.dup.LogAppendTime >= 0 {
				res.LogAppendTime = x.dup.LogAppendTime // as the first answer said
			}
			res.DuplicateMaxTimestamp = x.dup.MaxTimestamp
		} else {
			a, err := p.log.AppendAsLeader(x.b, record.Epoch(p.st.LeaderEpoch))
			if err != nil {
				// The log's own validation (records, keys on compacted topics)
				// answers with its code; anything else is the disk failing.
				if errs.Of(err) == errs.UnknownServerError {
					err = errs.Errorf(errs.KafkaStorageError, "%s-%d: append: %v", p.cfg.Topic, p.cfg.Partition, err)
				}
				return res, nil, err
			}
			first, last = a.First, a.Last
			x.pb.LogAppendTime = a.LogAppendTime >= 0
			p.producers.Append(x.pb, int64(first), int64(last), x.b.MaxTimestamp())
			res.StoredBytes += len(x.b)
			res.UncompressedBytes += a.Uncompressed
			if a.LogAppendTime >= 0 {
				res.LogAppendTime = a.LogAppendTime
			}
			appended = true
		}
		if res.BaseOffset < 0 {
			res.BaseOffset = first
		}
		res.LastOffset = last
	}
	res.LogStartOffset = p.log.LogStartOffset()
	if appended {
		p.notifyLEOLocked()
		p.maybeAdvanceHWLocked()
	}
	if acks != AcksAll {
		return res, nil, nil
	}
	w := &waiter{next: res.LastOffset + 1, done: make(chan error, 1)}
	p.waiters = append(p.waiters, w)
	p.completeWaitersLocked() // a leader alone in the ISR answers at once
	return res, w, nil
}

// validateLocked checks every batch before any is written: framing, CRC,
// size, magic, producer sequence. A retried idempotent batch is marked as a
// duplicate with its original offsets.
func (p *Partition) validateLocked(batches []byte) ([]parsed, error) {
	if len(batches) == 0 {
		return nil, errs.Errorf(errs.CorruptMessage, "%s-%d: no record batch in the request", p.cfg.Topic, p.cfg.Partition)
	}
	var list []parsed
	it := record.NewBatchIter(batches)
	for it.Next() {
		if len(list) == 1 {
			// As Kafka: one batch per partition per request, so a producer's
			// sequence check sees every batch in order.
			return nil, errs.Errorf(errs.InvalidRecord, "%s-%d: a produce carries exactly one record batch per partition", p.cfg.Topic, p.cfg.Partition)
		}
		b := it.Batch()
		if p.cfg.MaxMessageBytes > 0 && b.Size() > p.cfg.MaxMessageBytes {
			return nil, errs.Errorf(errs.MessageTooLarge, "%s-%d: batch of %d bytes is larger than max.message.bytes=%d", p.cfg.Topic, p.cfg.Partition, b.Size(), p.cfg.MaxMessageBytes)
		}
		if err := b.Verify(); err != nil {
			return nil, err
		}
		if b.IsControl() {
			return nil, errs.Errorf(errs.InvalidRecord, "%s-%d: clients may not write control batches", p.cfg.Topic, p.cfg.Partition)
		}
		pb := producer.Batch{ProducerID: b.ProducerID(), Epoch: b.ProducerEpoch(), FirstSeq: b.BaseSequence(), Records: b.LastOffsetDelta() + 1, Transactional: b.IsTransactional()}
		if pb.ProducerID < 0 {
			pb.ProducerID = producer.NoProducer
		}
		v, err := p.producers.Check(pb)
		if err != nil {
			return nil, err
		}
		x := parsed{b: b, pb: pb}
		if v.Duplicate {
			x.dup = &v
		}
		list = append(list, x)
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	return list, nil
}

// ProduceTimeout is the default time an acks=all produce waits for the ISR.
const ProduceTimeout = 30 * time.Second
