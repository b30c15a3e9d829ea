package coordinator

import (
	"context"

	controllerv1 "skein/gen/skein/controller/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
	"skein/libs/errs"
	"skein/libs/metadata"
)

// ClientLog is the Log over libs/client.
type ClientLog struct {
	C *client.Client
}

// Produce implements Log: one acks=all batch under the coordinator's own
// producer identity.
func (l ClientLog) Produce(ctx context.Context, partition int32, id Identity, recs []KV) (int64, error) {
	rs := make([]client.Record, len(recs))
	for i, r := range recs {
		rs[i] = client.Record{Key: r.Key, Value: r.Value}
	}
	res, err := l.C.ProduceBatch(ctx, metadata.ConsumerOffsetsTopic, partition, client.AcksAll,
		client.BatchIdentity{ProducerID: id.ProducerID, ProducerEpoch: id.Epoch, BaseSequence: id.Sequence}, rs)
	if err != nil {
		return -1, err
	}
	return res[len(res)-1].Offset, nil
}

// Fetch implements Log.
func (l ClientLog) Fetch(ctx context.Context, partition int32, offset int64) ([]Entry, int64, int64, error) {
	req := client.FetchRequest{Topic: metadata.ConsumerOffsetsTopic, Partition: partition, Offset: offset, MaxBytes: 4 << 20}
	res, err := l.C.Fetch(ctx, req)
	if errs.Of(err) == errs.OffsetOutOfRange {
		// Below the log start (deleted records): start there.
		var start []client.PartitionOffset
		if start, err = l.C.ListOffsets(ctx, req.Topic, []int32{partition}, client.EarliestOffset, skeinv1.IsolationLevel_READ_UNCOMMITTED); err == nil {
			if err = start[0].Err; err == nil && start[0].Offset > offset {
				req.Offset = start[0].Offset
				res, err = l.C.Fetch(ctx, req)
			} else if err == nil {
				err = errs.Errorf(errs.OffsetOutOfRange, "offset %d of %s-%d is out of range, log start %d", offset, req.Topic, partition, start[0].Offset)
			}
		}
	}
	if err != nil {
		return nil, 0, 0, err
	}
	out := make([]Entry, len(res.Records))
	for i, r := range res.Records {
		out[i] = Entry{Offset: r.Offset, KV: KV{Key: r.Key, Value: r.Value}}
	}
	return out, res.NextOffset, res.HighWatermark, nil
}

// HighWatermarks implements Log with the last stable offsets: the lag
// metrics count what a read_committed member can still read (an open
// transaction holds the LSO below the high watermark; without one they are
// equal).
func (l ClientLog) HighWatermarks(ctx context.Context, topic string, partitions []int32) (map[int32]int64, error) {
	res, err := l.C.ListOffsets(ctx, topic, partitions, client.LatestOffset, skeinv1.IsolationLevel_READ_COMMITTED)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, r := range res {
		if r.Err == nil && r.Offset >= 0 {
			out[r.Partition] = r.Offset
		}
	}
	return out, nil
}

// ViewOf answers what coordinator self (of the given incarnation) may serve
// according to m: the partitions of __consumer_offsets assigned to it, once
// the metadata records this very process (its incarnation) as the live
// coordinator — so a restarted process never writes under the epoch its
// previous incarnation held — and only assignments with a producer id.
func ViewOf(m *metadata.Image, self int32, incarnation string) View {
	v := View{Partitions: m.PartitionCount(metadata.ConsumerOffsetsTopic), Owned: map[int32]Ownership{}, Topics: map[string]int32{},
		TopicIDs: map[string]string{}, Version: uint64(m.Version())}
	for _, t := range m.Topics() {
		v.Topics[t.GetName()] = m.PartitionCount(t.GetName())
		v.TopicIDs[t.GetName()] = t.GetTopicId()
	}
	kind := controllerv1.CoordinatorKind_COORDINATOR_KIND_GROUP
	me, ok := m.Coordinator(kind, self)
	if !ok || !me.GetAlive() || me.GetIncarnation() != incarnation {
		return v
	}
	v.Registered = true
	for _, a := range m.Assignments(kind) {
		if a.GetOwner() == self && a.ProducerId != nil && a.GetPartition() < v.Partitions {
			v.Owned[a.GetPartition()] = Ownership{Epoch: a.GetCoordinatorEpoch(), ProducerID: a.GetProducerId()}
		}
	}
	return v
}

// Follow feeds c every metadata change of cl until ctx ends.
func Follow(ctx context.Context, cl *client.Client, c *Coordinator, self int32, incarnation string) {
	var version metadata.Version
	first := true
	for {
		m, err := cl.WaitMetadata(ctx, func(m *metadata.Image) bool { return first || m.Version() != version })
		if err != nil {
			return
		}
		first, version = false, m.Version()
		c.OnMetadata(ViewOf(m, self, incarnation))
	}
}
