package replica_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	controllerv1 "skein/gen/skein/controller/v1"
	storagev1 "skein/gen/skein/storage/v1"
	"skein/libs/metadata"
	"skein/libs/record"
)

// fetchBatches reads partition 0 of topic from n, from offset 0, once the
// high watermark reaches want.
func fetchBatches(t *testing.T, n *node, topic string, want int64) []byte {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := storagev1.NewStorageServiceClient(n.cc).Fetch(context.Background(), &storagev1.FetchRequest{MaxBytes: 1 << 20,
			Partitions: []*storagev1.PartitionFetch{{Topic: topic, Partition: 0, CurrentLeaderEpoch: -1}}})
		if err != nil {
			t.Fatal(err)
		}
		r := resp.GetPartitions()[0]
		if r.GetErrorCode() == 0 && r.GetHighWatermark() >= want {
			return r.GetRecords()
		}
		if time.Now().After(deadline) {
			t.Fatalf("fetch %s from node %d: %v", topic, n.id, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A topic whose compression.type names a codec stores every producer batch
// in it: the leader recompresses a batch sent in another codec (the
// records, the producer's identity and the transactional flag unchanged),
// keeps one already in the codec byte for byte, and the followers hold the
// leader's bytes.
func TestLeaderRecompressesToTheTopicCodec(t *testing.T) {
	fc, nodes := startNodes(t)
	fc.apply(t,
		metadata.TopicRecord(&controllerv1.TopicRecord{TopicId: "tidz", Name: "z", Configs: map[string]string{"min.insync.replicas": "2", "compression.type": "zstd"}}),
		metadata.PartitionRecord(&controllerv1.PartitionRecord{Topic: "z", TopicId: "tidz", Partition: 0, Replicas: []int32{1, 2, 3}, Isr: []int32{1, 2, 3}, Leader: 1}),
	)
	// Records of now: with the default retention.ms (7 days) an older
	// time would let a retention pass (every 50 ms here) empty the log
	// before it is read back; the time itself is not what is tested.
	ts := time.Now().UnixMilli()
	build := func(c record.Compression, seq int32, values ...string) record.Batch {
		opts := record.BatchOptions{Compression: c, ProducerID: 77, ProducerEpoch: 2, BaseSequence: seq}
		b := record.NewBuilder(opts)
		for i, v := range values {
			var val []byte
			if v != "" {
				val = []byte(v)
			}
			b.Append(ts+int64(i), []byte{'k', byte('0' + i)}, val, record.Header{Key: "h", Value: []byte(v)}, record.Header{Key: "nil"})
		}
		batch, _, err := b.Build(nil)
		if err != nil {
			t.Fatal(err)
		}
		return batch
	}
	produce := func(b record.Batch) int64 {
		t.Helper()
		resp, err := storagev1.NewStorageServiceClient(nodes[0].cc).Produce(context.Background(), &storagev1.ProduceRequest{
			Acks: -1, TimeoutMs: 5000, Partitions: []*storagev1.PartitionProduce{{Topic: "z", Partition: 0, CurrentLeaderEpoch: -1, Records: b}},
		})
		if err != nil {
			t.Fatal(err)
		}
		r := resp.GetPartitions()[0]
		if r.GetErrorCode() != 0 {
			t.Fatalf("produce: %v", r)
		}
		return r.GetBaseOffset()
	}

	snappy := build(record.Snappy, 0, "one", "", "three three three three")
	zstd := build(record.Zstd, 3, "four", "five")
	if off := produce(snappy); off != 0 {
		t.Fatalf("snappy batch at offset %d", off)
	}
	if off := produce(zstd); off != 3 {
		t.Fatalf("zstd batch at offset %d", off)
	}
	// A resend of the snappy batch is a duplicate, answered with its offset.
	if off := produce(snappy); off != 0 {
		t.Fatalf("resent batch at offset %d", off)
	}

	check := func(n *node) {
		t.Helper()
		data := fetchBatches(t, n, "z", 5)
		it := record.NewBatchIter(data)
		var got []record.Batch
		for it.Next() {
			got = append(got, it.Batch())
		}
		if it.Err() != nil || len(got) != 2 {
			t.Fatalf("node %d: %d batches, %v", n.id, len(got), it.Err())
		}
		stored := got[0]
		if stored.Compression() != record.Zstd {
			t.Fatalf("node %d: the snappy batch is stored as %s", n.id, stored.Compression())
		}
		if stored.ProducerID() != 77 || stored.ProducerEpoch() != 2 || stored.BaseSequence() != 0 || stored.BaseOffset() != 0 ||
			stored.RecordCount() != 3 || stored.MaxTimestamp() != snappy.MaxTimestamp() || stored.BaseTimestamp() != snappy.BaseTimestamp() {
			t.Fatalf("node %d: header changed: pid %d epoch %d seq %d offset %d", n.id, stored.ProducerID(), stored.ProducerEpoch(), stored.BaseSequence(), stored.BaseOffset())
		}
		if err := stored.Verify(); err != nil {
			t.Fatal(err)
		}
		sameRecords(t, stored, snappy)
		// The batch already in zstd is the producer's bytes past the
		// fields the leader stamps (base offset, leader epoch).
		if !bytes.Equal(got[1][record.LengthPrefix+4:], zstd[record.LengthPrefix+4:]) {
			t.Fatalf("node %d: the zstd batch was rewritten", n.id)
		}
	}
	check(nodes[0])

	// Followers copied the leader's bytes: node 2, leading now, serves the same.
	leaderBytes := fetchBatches(t, nodes[0], "z", 5)
	cur := fc.partition("z", 0)
	fc.apply(t, metadata.PartitionRecord(&controllerv1.PartitionRecord{Topic: "z", TopicId: "tidz", Partition: 0, Replicas: []int32{1, 2, 3}, Isr: cur.GetIsr(),
		Leader: 2, LeaderEpoch: cur.GetLeaderEpoch() + 1, PartitionEpoch: cur.GetPartitionEpoch() + 1}))
	if got := fetchBatches(t, nodes[1], "z", 5); !bytes.Equal(got, leaderBytes) {
		t.Fatal("the follower's batches differ from the leader's")
	}
}

func sameRecords(t *testing.T, got, want record.Batch) {
	t.Helper()
	var gi, wi record.RecordIter
	if err := gi.Reset(got); err != nil {
		t.Fatal(err)
	}
	if err := wi.Reset(want); err != nil {
		t.Fatal(err)
	}
	for wi.Next() {
		if !gi.Next() {
			t.Fatalf("record %d missing: %v", wi.Offset(), gi.Err())
		}
		g, w := gi.Record(), wi.Record()
		gh, wh := g.AppendHeaders(nil), w.AppendHeaders(nil)
		if gi.Offset() != wi.Offset() || gi.Timestamp() != wi.Timestamp() || !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) ||
			(g.Value == nil) != (w.Value == nil) || len(gh) != len(wh) {
			t.Fatalf("record %d differs", wi.Offset())
		}
		for i := range wh {
			if gh[i].Key != wh[i].Key || !bytes.Equal(gh[i].Value, wh[i].Value) || (gh[i].Value == nil) != (wh[i].Value == nil) {
				t.Fatalf("record %d header %d differs", wi.Offset(), i)
			}
		}
	}
	if gi.Next() || gi.Err() != nil || wi.Err() != nil {
		t.Fatalf("extra records or errors: %v %v", gi.Err(), wi.Err())
	}
}
