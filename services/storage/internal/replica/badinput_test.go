package replica_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	controllerv1 "skein/gen/skein/controller/v1"
	storagev1 "skein/gen/skein/storage/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/libs/record"
	"skein/libs/rpcerr"
)

// Every bad produce over gRPC is answered with its code, the node keeps
// serving, and the log is exactly as before.
func TestBadInputOverGRPC(t *testing.T) {
	fc, nodes := startNodes(t)
	leader := storagev1.NewStorageServiceClient(nodes[0].cc)
	if r := produce(t, nodes[0], "good"); r.GetErrorCode() != 0 {
		t.Fatal(r)
	}

	good := oneRecord(t, "x")
	corrupt := append([]byte(nil), good...)
	corrupt[len(corrupt)-2] ^= 0x40
	big := record.NewBuilder(record.DefaultBatchOptions())
	big.Append(time.Now().UnixMilli(), []byte("k"), make([]byte, 2<<20)) // > max.message.bytes (1 MiB default)
	bigBatch, _, _ := big.Build(nil)
	idem := func(seq int32) []byte {
		o := record.DefaultBatchOptions()
		o.ProducerID, o.ProducerEpoch, o.BaseSequence = 99, 0, seq
		b := record.NewBuilder(o)
		b.Append(time.Now().UnixMilli(), []byte("k"), []byte("i"))
		out, _, _ := b.Build(nil)
		return out
	}
	if r := produceRaw(t, leader, "t", 0, -1, idem(0)); r.GetErrorCode() != 0 {
		t.Fatalf("first idempotent batch: %v", r)
	}
	before := leo(t, nodes[0])

	for _, tc := range []struct {
		name  string
		topic string
		part  int32
		epoch int32
		data  []byte
		want  *errs.Error
	}{
		{"corrupt crc", "t", 0, -1, corrupt, errs.CorruptMessage},
		{"garbage bytes", "t", 0, -1, []byte("definitely not a record batch......................................................."), errs.CorruptMessage},
		{"oversized batch", "t", 0, -1, bigBatch, errs.MessageTooLarge},
		{"unknown topic", "nope", 0, -1, good, errs.UnknownTopicOrPartition},
		{"unknown partition", "t", 7, -1, good, errs.UnknownTopicOrPartition},
		{"future leader epoch", "t", 0, 9, good, errs.UnknownLeaderEpoch},
		{"sequence gap", "t", 0, -1, idem(5), errs.OutOfOrderSequenceNumber},
	} {
		r := produceRaw(t, leader, tc.topic, tc.part, tc.epoch, tc.data)
		if r.GetErrorCode() != skeinv1.ErrorCode(tc.want.Code) {
			t.Errorf("%s: got %v (%s), want %s", tc.name, r.GetErrorCode(), r.GetErrorMessage(), tc.want.Name)
		}
		if r.GetErrorMessage() == "" {
			t.Errorf("%s: no message", tc.name)
		}
	}
	// acks outside {0, 1, -1} refuses the whole request.
	_, err := leader.Produce(context.Background(), &storagev1.ProduceRequest{Acks: 5, Partitions: []*storagev1.PartitionProduce{{Topic: "t", Records: good, CurrentLeaderEpoch: -1}}})
	if status.Code(err) != codes.InvalidArgument || errs.Of(rpcerr.FromStatus(err)) != errs.InvalidRequiredAcks {
		t.Errorf("acks=5: %v", err)
	}
	if got := leo(t, nodes[0]); got != before {
		t.Fatalf("bad input changed the log: LEO %d -> %d", before, got)
	}
	// Still serving, and the retried idempotent batch is a duplicate, not a new write.
	if r := produceRaw(t, leader, "t", 0, -1, idem(0)); r.GetErrorCode() != 0 || r.GetBaseOffset() != before-1 {
		t.Fatalf("retry of the idempotent batch: %v (LEO was %d)", r, before)
	}
	if r := produce(t, nodes[0], "still-serving"); r.GetErrorCode() != 0 || r.GetBaseOffset() != before {
		t.Fatalf("after bad input: %v", r)
	}
	// A leader epoch bump fences requests that carry the old one.
	cur := fc.partition("t", 0)
	fc.apply(t, metadata.PartitionRecord(&controllerv1.PartitionRecord{Topic: "t", TopicId: "tid1", Partition: 0, Replicas: cur.GetReplicas(), Isr: cur.GetIsr(),
		Leader: 1, LeaderEpoch: cur.GetLeaderEpoch() + 1, PartitionEpoch: cur.GetPartitionEpoch() + 1}))
	if r := produceRaw(t, leader, "t", 0, cur.GetLeaderEpoch(), good); r.GetErrorCode() != skeinv1.ErrorCode_FENCED_LEADER_EPOCH {
		t.Fatalf("stale leader epoch: %v", r)
	}
	// Fetch outside the log.
	start := time.Now()
	resp, err := leader.Fetch(context.Background(), &storagev1.FetchRequest{MaxWaitMs: 10000, Partitions: []*storagev1.PartitionFetch{{Topic: "t", Partition: 0, FetchOffset: 1000, CurrentLeaderEpoch: -1}}})
	if err != nil || resp.GetPartitions()[0].GetErrorCode() != skeinv1.ErrorCode_OFFSET_OUT_OF_RANGE {
		t.Fatalf("fetch beyond the log: %v %v", resp, err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("an out-of-range fetch waited %v instead of answering at once", took)
	}
}

func produceRaw(t *testing.T, c storagev1.StorageServiceClient, topic string, part, epoch int32, data []byte) *storagev1.PartitionProduceResult {
	t.Helper()
	resp, err := c.Produce(context.Background(), &storagev1.ProduceRequest{Acks: -1, TimeoutMs: 5000,
		Partitions: []*storagev1.PartitionProduce{{Topic: topic, Partition: part, CurrentLeaderEpoch: epoch, Records: data}}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetPartitions()[0]
}
