package coordinator

import (
	"context"
	"slices"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/libs/record"
)

// HighWatermark implements DeadLetters.
func (l ClientLog) HighWatermark(ctx context.Context, topic string, partition int32) (int64, error) {
	res, err := l.C.ListOffsets(ctx, topic, []int32{partition}, client.LatestOffset, skeinv1.IsolationLevel_READ_UNCOMMITTED)
	if err != nil {
		return -1, err
	}
	if len(res) == 0 {
		return -1, errs.Errorf(errs.UnknownTopicOrPartition, "no offsets for %s:%d", topic, partition)
	}
	return res[0].Offset, res[0].Err
}

// EnsureTopic implements DeadLetters: the topic is created through the
// controllers with like's partition count, replication factor and
// retention (another coordinator creating it at once is fine:
// TOPIC_ALREADY_EXISTS), then awaited in the metadata. It takes the
// source's retention (what the topic's owner chose for these records);
// a copy is timestamped when it is dead-lettered, so it is kept for that
// retention from then on, however old its record.
func (l ClientLog) EnsureTopic(ctx context.Context, topic, like string) (int32, error) {
	if n := l.C.Metadata().PartitionCount(topic); n > 0 {
		return n, nil
	}
	m := l.C.Metadata()
	n := m.PartitionCount(like)
	if n == 0 {
		return 0, errs.Errorf(errs.UnknownTopicOrPartition, "topic %q does not exist", like)
	}
	var rf int32
	if p, ok := m.Partition(like, 0); ok {
		rf = int32(len(p.GetReplicas()))
	}
	var configs map[string]string
	if t, ok := m.Topic(like); ok {
		for _, k := range []string{"retention.ms", "retention.bytes"} {
			if v, ok := t.GetConfigs()[k]; ok {
				if configs == nil {
					configs = map[string]string{}
				}
				configs[k] = v
			}
		}
	}
	if _, err := l.C.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: n, ReplicationFactor: rf, Configs: configs}); err != nil && errs.Of(err) != errs.TopicAlreadyExists {
		return 0, err
	}
	got, err := l.C.WaitMetadata(ctx, func(m *metadata.Image) bool { return m.PartitionCount(topic) > 0 })
	if err != nil {
		return 0, errs.Errorf(errs.RequestTimedOut, "topic %q created, not in the metadata yet: %v", topic, err)
	}
	return got.PartitionCount(topic), nil
}

// Read implements DeadLetters.
func (l ClientLog) Read(ctx context.Context, topic string, partition int32, offset int64) (Record, bool, error) {
	rec, ok, _, err := l.read(ctx, topic, partition, offset, skeinv1.IsolationLevel_READ_UNCOMMITTED)
	return rec, ok, err
}

// TxnOutcome implements DeadLetters: the record read as a read_committed
// reader reads it.
func (l ClientLog) TxnOutcome(ctx context.Context, topic string, partition int32, offset int64) (committed, ended bool, err error) {
	_, ok, lso, err := l.read(ctx, topic, partition, offset, skeinv1.IsolationLevel_READ_COMMITTED)
	if err != nil {
		return false, false, err
	}
	return ok, ok || offset < lso, nil
}

// read answers the record at offset as a reader of the isolation level
// gets it (ok false: none there) and the partition's last stable offset.
func (l ClientLog) read(ctx context.Context, topic string, partition int32, offset int64, iso skeinv1.IsolationLevel) (Record, bool, int64, error) {
	res, err := l.C.Fetch(ctx, client.FetchRequest{Topic: topic, Partition: partition, Offset: offset, MaxRecords: 1, Isolation: iso})
	if errs.Of(err) == errs.OffsetOutOfRange {
		return Record{}, false, -1, nil // below the log start: deleted
	}
	if err != nil {
		return Record{}, false, -1, err
	}
	for _, r := range res.Records {
		if r.Offset == offset {
			return Record{Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp, Transactional: r.Transactional}, true, res.LastStableOffset, nil
		}
		if r.Offset > offset {
			break
		}
	}
	// A control record, compacted away, or not for this reader: an aborted
	// transaction's, or past the last stable offset.
	return Record{}, false, res.LastStableOffset, nil
}

// Find implements DeadLetters: a read of the partition from from to the
// high watermark.
func (l ClientLog) Find(ctx context.Context, topic string, partition int32, from int64, match func([]record.Header) bool) (int64, error) {
	for off := from; ; {
		res, err := l.C.Fetch(ctx, client.FetchRequest{Topic: topic, Partition: partition, Offset: off, MaxBytes: 1 << 20})
		if errs.Of(err) == errs.OffsetOutOfRange {
			return -1, nil // nothing at or after from (or deleted since)
		}
		if err != nil {
			return -1, err
		}
		for _, r := range res.Records {
			if r.Offset >= from && match(r.Headers) {
				return r.Offset, nil
			}
		}
		if res.NextOffset <= off || res.NextOffset >= res.HighWatermark && len(res.Records) == 0 {
			return -1, nil
		}
		off = res.NextOffset
		if off >= res.HighWatermark {
			return -1, nil
		}
	}
}

// Append implements DeadLetters: one acks=all batch without a producer id.
// A failure whose outcome is unknown is answered as an error; the nack is
// then retried, and Find sees a copy that was written after all.
func (l ClientLog) Append(ctx context.Context, topic string, partition int32, rec Record) (int64, error) {
	res, err := l.C.ProduceBatch(ctx, topic, partition, client.AcksAll, client.BatchIdentity{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]client.Record{{Key: rec.Key, Value: rec.Value, Headers: slices.Clone(rec.Headers), Timestamp: rec.Timestamp, TimestampSet: true}})
	if err != nil {
		return -1, err
	}
	return res[0].Offset, nil
}
