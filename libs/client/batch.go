package client

import (
	"context"
	"errors"
	"math"
	"time"

	storagev1 "skein/gen/skein/storage/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client/accumulator"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/libs/record"
	"skein/libs/topicconfig"
)

// BatchIdentity is a caller's own idempotent (or transactional) producer
// identity for one batch: the storage node answers a resent batch with the
// same producer id, epoch and base sequence with the original offsets.
type BatchIdentity struct {
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	// TransactionalID, when set, marks the batch transactional and travels
	// in the produce request.
	TransactionalID string
	// Compression is the batch's codec when the topic's compression.type is
	// producer (the default, none); a topic that names a codec gets that one.
	Compression record.Compression
}

// ProduceBatch writes recs as one batch to one partition under the caller's
// identity, bypassing the accumulator and its sequence numbers, and retries
// retriable failures (the identity makes that safe) until ctx ends. All
// records share the batch's fate. Record.Topic and Record.Partition are
// ignored.
func (c *Client) ProduceBatch(ctx context.Context, topic string, partition int32, acks int, id BatchIdentity, recs []Record) ([]Result, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	if err := c.WaitReady(ctx); err != nil {
		return nil, err
	}
	m := c.Metadata()
	if m.PartitionCount(topic) == 0 {
		return nil, noTopic(m, topic)
	}
	if n := m.PartitionCount(topic); partition < 0 || partition >= n {
		return nil, errs.Errorf(errs.UnknownTopicOrPartition, "topic %q has %d partitions, no partition %d", topic, n, partition)
	}
	opts := record.DefaultBatchOptions()
	opts.Compression = codecFor(m, topic, id.Compression)
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = id.ProducerID, id.ProducerEpoch, id.BaseSequence
	opts.Transactional = id.TransactionalID != ""
	bld := record.NewBuilder(opts)
	now := time.Now().UnixMilli()
	stamps := make([]int64, len(recs))
	// clocked: the records this attempt stamps with now; latestSet, the
	// latest time a caller gave.
	clocked := make([]bool, len(recs))
	latestSet := int64(math.MinInt64)
	for i, r := range recs {
		stamps[i] = r.Timestamp
		if stamps[i] == 0 && !r.TimestampSet {
			stamps[i], clocked[i] = now, true
		} else {
			latestSet = max(latestSet, stamps[i])
		}
		bld.Append(stamps[i], r.Key, r.Value, withTraceparent(ctx, r.Headers)...)
	}
	data, _, err := bld.Build(nil)
	if err != nil {
		return nil, err
	}
	if limit := maxMessageBytes(m, topic); len(data) > limit {
		return nil, errs.Errorf(errs.MessageTooLarge, "a batch of %d bytes is above max.message.bytes %d of topic %q", len(data), limit, topic)
	}
	// With a producer id a resend is answered as a duplicate, never written
	// twice: an attempt may be abandoned when the leader changes.
	failover := id.ProducerID >= 0
	res, answered, err := c.produceOnce(ctx, topic, partition, acks, id.TransactionalID, data, failover)
	maybe := err != nil && !definite(err, answered)
	for attempt := 0; err != nil && errs.IsRetriable(err) && ctx.Err() == nil; attempt++ {
		if c.waitRetry(ctx, attempt, err) != nil {
			break
		}
		res, answered, err = c.produceOnce(ctx, topic, partition, acks, id.TransactionalID, data, failover)
		maybe = maybe || (err != nil && !definite(err, answered))
	}
	if err != nil {
		if maybe {
			return nil, &UncertainError{err}
		}
		return nil, err
	}
	out := make([]Result, len(recs))
	for i := range recs {
		out[i] = Result{Partition: partition, Offset: -1, Timestamp: stamps[i]}
		if acks != AcksNone && res.GetBaseOffset() >= 0 {
			out[i].Offset = res.GetBaseOffset() + int64(i)
		}
		switch {
		case res.GetLogAppendTimeMs() > 0:
			out[i].Timestamp = res.GetLogAppendTimeMs()
		case clocked[i] && res.DuplicateMaxTimestampMs != nil && res.GetDuplicateMaxTimestampMs() > latestSet:
			// A retry of a batch written before: a record the clock
			// stamped has the time of that write, not of this attempt,
			// which the write's largest time is when no caller's time
			// is as late. (Records with times of their own are the
			// same as the first time; when one is later than the
			// clock's, the clock's time of the first write is not
			// known, and this attempt's is answered.)
			out[i].Timestamp = res.GetDuplicateMaxTimestampMs()
		}
	}
	return out, nil
}

// produceOnce sends one batch to the partition's leader over its stream and
// waits for the answer; answered says an error is the leader's own answer
// for the partition (not a failed or unanswered request). With failover,
// the wait ends as soon as the metadata names another leader (or a newer
// leader epoch): a paused or cut-off leader would otherwise hold the batch
// for the whole request timeout.
func (c *Client) produceOnce(ctx context.Context, topic string, partition int32, acks int, txnID string, data []byte, failover bool) (_ *storagev1.PartitionProduceResult, answered bool, _ error) {
	// Watched from before the leader is looked up: a change while the
	// request waits to be sent (behind a stuck stream) is seen.
	changed := c.metadataChanged()
	bc, epoch, err := c.leaderOf(topic, partition)
	if err != nil {
		return nil, true, err // nothing was sent
	}
	timeout := DefaultRequestTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(min(timeout, time.Until(dl)), time.Millisecond)
	}
	req := &storagev1.ProduceRequest{
		Acks: int32(acks), TimeoutMs: int32(timeout / time.Millisecond), TransactionalId: txnID, Principal: PrincipalOf(ctx),
		Partitions: []*storagev1.PartitionProduce{{Topic: topic, Partition: partition, CurrentLeaderEpoch: epoch, Records: data}},
	}
	type answer struct {
		resp *storagev1.ProduceResponse
		err  error
	}
	ch := make(chan answer, 1)
	call := &produceCall{req: req, noAnswer: acks == AcksNone, timeout: timeout + 5*time.Second, endStream: timeout == DefaultRequestTimeout,
		done: func(resp *storagev1.ProduceResponse, err error) { ch <- answer{resp, err} }}
	bc.produce(call)
	var a answer
wait:
	for {
		select {
		case a = <-ch:
			break wait
		case <-ctx.Done():
			return nil, false, errs.Errorf(errs.RequestTimedOut, "produce to %s-%d: %v", topic, partition, ctx.Err())
		case <-changed:
			changed = c.metadataChanged()
			if l, e, ok := leaderOf(c.Metadata(), topic, partition); failover && ok && (l != bc.id || e > epoch) {
				return nil, false, errs.Errorf(errs.NotLeaderOrFollower, "%s-%d: leadership moved from broker %d (epoch %d) to %d (epoch %d) while the batch was in flight", topic, partition, bc.id, epoch, l, e)
			}
		}
	}
	if a.err != nil {
		return nil, false, a.err
	}
	if acks == AcksNone {
		return &storagev1.PartitionProduceResult{Topic: topic, Partition: partition, BaseOffset: -1}, true, nil
	}
	for _, r := range a.resp.GetPartitions() {
		if r.GetTopic() == topic && r.GetPartition() == partition {
			switch r.GetErrorCode() {
			case skeinv1.ErrorCode_NONE, skeinv1.ErrorCode_DUPLICATE_SEQUENCE_NUMBER:
				return r, true, nil
			}
			return nil, true, errs.Errorf(errs.ForCode(errs.Code(r.GetErrorCode())), "%s", r.GetErrorMessage())
		}
	}
	return nil, false, errs.Errorf(errs.UnknownServerError, "no answer for %s-%d in the produce response", topic, partition)
}

// UncertainError is a failed produce that may nonetheless have written its
// records: some attempt ended without a definite answer (see
// Result.MaybeWritten). It wraps the last error, so errs.Of sees its row.
type UncertainError struct{ Err error }

func (e *UncertainError) Error() string {
	return e.Err.Error() + " (the records may have been written)"
}
func (e *UncertainError) Unwrap() error { return e.Err }

// MaybeWritten reports whether err says the records may be in the log.
func MaybeWritten(err error) bool {
	var u *UncertainError
	return errors.As(err, &u)
}

// SingleRecordBatchSize is the size of a batch holding only r: what must
// fit within the topic's max.message.bytes.
func SingleRecordBatchSize(r Record) int {
	ts := r.Timestamp
	return accumulator.SingleBatchSize(&accumulator.Record{Timestamp: ts, Key: r.Key, Value: r.Value, Headers: r.Headers})
}

// MaxMessageBytes is a topic's max.message.bytes as the metadata has it.
func MaxMessageBytes(m *metadata.Image, topic string) int { return maxMessageBytes(m, topic) }

// CreateTimes is the window of create times a topic accepts as the
// metadata has it (message.timestamp.before.max.ms and
// message.timestamp.after.max.ms).
func CreateTimes(m *metadata.Image, topic string) topicconfig.CreateTimes {
	if t, ok := m.Topic(topic); ok {
		return topicconfig.CreateTimesFrom(t.GetConfigs())
	}
	return topicconfig.CreateTimes{}
}

// KeysRequired reports whether topic is compacted, as the metadata has it.
func KeysRequired(m *metadata.Image, topic string) bool {
	t, ok := m.Topic(topic)
	return ok && topicconfig.CompactedFrom(t.GetConfigs())
}

// CheckKey refuses a record without a key for a compacted topic with
// INVALID_RECORD, before it joins a batch with others: the leader would
// refuse that whole batch, every other record in it with this one.
func CheckKey(required bool, topic string, key []byte) error {
	if required && key == nil {
		return errs.Errorf(errs.InvalidRecord, "topic %q is compacted (cleanup.policy compact) and takes only records with a key", topic)
	}
	return nil
}

// CheckCreateTime refuses a create time outside w at now (this process's
// clock, Unix milliseconds) with INVALID_TIMESTAMP, before the record joins
// a batch with others: the leader would refuse that whole batch. The
// leader checks again against its own clock.
func CheckCreateTime(w topicconfig.CreateTimes, topic string, ts, now int64) error {
	if !w.Check || ts == -1 {
		return nil
	}
	switch earliest, latest := w.At(now); {
	case ts < earliest:
		return errs.Errorf(errs.InvalidTimestamp, "timestamp %d is before %d, the earliest topic %q accepts now (message.timestamp.before.max.ms %d)", ts, earliest, topic, w.Before)
	case ts > latest:
		return errs.Errorf(errs.InvalidTimestamp, "timestamp %d is after %d, the latest topic %q accepts now (message.timestamp.after.max.ms %d)", ts, latest, topic, w.After)
	}
	return nil
}

// leaderOf answers a partition's leader and leader epoch; ok is false when
// the partition is unknown or has no leader.
func leaderOf(m *metadata.Image, topic string, partition int32) (leader, epoch int32, ok bool) {
	l, e, ok := m.LeaderAndEpoch(topic, partition)
	return int32(l), e, ok
}
