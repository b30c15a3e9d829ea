package replica_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	controllerv1 "skein/gen/skein/controller/v1"
	storagev1 "skein/gen/skein/storage/v1"
	"skein/libs/metadata"
	"skein/libs/record"
	"skein/services/storage/internal/partition"
)

// A leader reads each answer to a follower into a buffer the stream
// reuses. Batches of very different sizes, to three partitions at once (so
// one answer carries several, some outgrowing the buffer and some too large
// to keep it), reach the followers byte for byte as the leader stored them.
func TestFollowersStoreTheLeadersBytes(t *testing.T) {
	fc, nodes := startNodes(t)
	fc.apply(t, metadata.TopicRecord(&controllerv1.TopicRecord{TopicId: "tidm", Name: "m", Configs: map[string]string{"min.insync.replicas": "3", "max.message.bytes": "2000000"}}))
	for p := int32(0); p < 3; p++ {
		fc.apply(t, metadata.PartitionRecord(&controllerv1.PartitionRecord{Topic: "m", TopicId: "tidm", Partition: p, Replicas: []int32{1, 2, 3}, Isr: []int32{1, 2, 3}, Leader: 1}))
	}
	sizes := []int{100, 10 << 10, 300 << 10, 3, 700 << 10, 50 << 10, 1 << 20, 1, 200 << 10}
	client := storagev1.NewStorageServiceClient(nodes[0].cc)
	var wg sync.WaitGroup
	errc := make(chan error, 3*len(sizes))
	for p := int32(0); p < 3; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, size := range sizes {
				b := record.NewBuilder(record.DefaultBatchOptions())
				v := bytes.Repeat([]byte{byte('a' + (int(p)*7+i)%26)}, size)
				b.Append(time.Now().UnixMilli(), []byte(fmt.Sprint(p, "-", i)), v)
				batch, _, err := b.Build(nil)
				if err != nil {
					errc <- err
					return
				}
				resp, err := client.Produce(context.Background(), &storagev1.ProduceRequest{Acks: -1, TimeoutMs: 10000,
					Partitions: []*storagev1.PartitionProduce{{Topic: "m", Partition: p, CurrentLeaderEpoch: -1, Records: batch}}})
				if err != nil {
					errc <- err
					return
				}
				if r := resp.GetPartitions()[0]; r.GetErrorCode() != 0 {
					errc <- fmt.Errorf("partition %d batch %d (%d bytes): %v", p, i, size, r)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	// acks=all with min.insync.replicas=3: every follower has every batch.
	for p := int32(0); p < 3; p++ {
		want := segmentBytes(t, nodes[0], "m", p)
		for _, n := range nodes[1:] {
			if mp, err := n.mgr.Get(partition.TP{Topic: "m", Partition: p}); err != nil || mp.Snapshot().LEO != record.Offset(len(sizes)) {
				t.Fatalf("node %d partition %d: LEO %v (%v), want %d", n.id, p, mp.Snapshot().LEO, err, len(sizes))
			}
			if got := segmentBytes(t, n, "m", p); !bytes.Equal(got, want) {
				t.Fatalf("node %d partition %d: %d bytes stored, the leader %d, and they differ", n.id, p, len(got), len(want))
			}
		}
	}

	// The same batches fetched over gRPC, whose answers are marshalled from
	// pooled read buffers, equal the answers Fetch builds: one partition or
	// all three, a budget smaller than the first batch (the read outgrows
	// its buffer), the offset past the end, and a long poll that ends empty.
	all := func(off int64) []*storagev1.PartitionFetch {
		var ps []*storagev1.PartitionFetch
		for p := int32(0); p < 3; p++ {
			ps = append(ps, &storagev1.PartitionFetch{Topic: "m", Partition: p, FetchOffset: off, CurrentLeaderEpoch: -1})
		}
		return ps
	}
	for i, req := range []*storagev1.FetchRequest{
		{MaxBytes: 3 << 20, Partitions: all(0)[:1]},
		{MaxBytes: 3 << 20, Partitions: all(0)},
		{MaxBytes: 1 << 20, Partitions: all(2)},
		{MaxBytes: 1000, Partitions: all(4)[2:]},
		{MaxBytes: 1 << 20, Partitions: all(int64(len(sizes)) + 5)},
		{MaxBytes: 1 << 20, MaxWaitMs: 50, Partitions: all(int64(len(sizes)))},
		{MaxBytes: 1 << 20, Partitions: append(all(0)[:1], &storagev1.PartitionFetch{Topic: "absent", CurrentLeaderEpoch: -1})},
		{MaxBytes: 3 << 20, Partitions: []*storagev1.PartitionFetch{{Topic: "m", Partition: 1, FetchOffset: 1, MaxRecords: 3, CurrentLeaderEpoch: -1}}},
	} {
		want, err := nodes[0].api.Fetch(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // a second time through buffers the first gave back
			got, err := client.Fetch(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, want) {
				t.Fatalf("fetch %d over gRPC differs from Fetch's answer:\n%v\nwant\n%v", i, summary(got), summary(want))
			}
		}
		if i == 1 && (len(want.GetPartitions()) != 3 || len(want.GetPartitions()[1].GetRecords()) == 0) {
			t.Fatalf("fetch %d answered %v", i, summary(want))
		}
		if req.GetPartitions()[0].GetMaxRecords() > 0 {
			// Batches of one record each: offsets 1, 2 and 3, and no more.
			var offs []record.Offset
			for it := record.NewBatchIter(want.GetPartitions()[0].GetRecords()); it.Next(); {
				offs = append(offs, it.Batch().BaseOffset())
			}
			if fmt.Sprint(offs) != "[1 2 3]" {
				t.Fatalf("3 records from offset 1 answered the batches at %v", offs)
			}
		}
	}
}

// summary describes a fetch answer without its records' bytes.
func summary(r *storagev1.FetchResponse) string {
	var out []string
	for _, p := range r.GetPartitions() {
		out = append(out, fmt.Sprintf("%s-%d hw %d code %v: %d bytes", p.GetTopic(), p.GetPartition(), p.GetHighWatermark(), p.GetErrorCode(), len(p.GetRecords())))
	}
	return fmt.Sprint(out)
}

// segmentBytes answers the bytes of a partition's log segments on a node.
func segmentBytes(t *testing.T, n *node, topic string, p int32) []byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(n.dir, "*", fmt.Sprintf("%s-%d-*", topic, p), "*.log"))
	if err != nil || len(files) == 0 {
		t.Fatalf("node %d has no segment of %s-%d (%v)", n.id, topic, p, err)
	}
	var out []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}
