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
