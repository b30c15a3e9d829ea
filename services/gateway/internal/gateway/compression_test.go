package gateway

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
	"skein/libs/errs"
	"skein/libs/record"
	"skein/libs/rpcerr"
)

// A produce's compression names the codec of its batches for a topic whose
// compression.type is producer, over REST, unary gRPC and ProduceStream; a
// topic that names a codec keeps its own; an unknown name is refused.
func TestProduceCompression(t *testing.T) {
	e := start(t)
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "p", "replication_factor": 1, "partitions": 4}`)
	e.mustDo("POST", "/v1/topics", `{"name": "z", "replication_factor": 1, "configs": {"compression.type": "zstd"}}`)
	codecOf := func(topic string, partition int32) record.Compression {
		t.Helper()
		bs := e.cluster.Leader(topic, partition).Batches(topic, partition)
		if len(bs) == 0 {
			t.Fatalf("%s-%d: no batch", topic, partition)
		}
		return bs[len(bs)-1].Compression()
	}

	e.mustDo("POST", "/v1/topics/p/partitions/0/records", `{"compression": "gzip", "records": [{"value": "a"}]}`)
	if c := codecOf("p", 0); c != record.Gzip {
		t.Errorf("REST with gzip: stored as %s", c)
	}
	e.mustDo("POST", "/v1/topics/p/partitions/1/records", `{"records": [{"value": "a"}]}`)
	if c := codecOf("p", 1); c != record.None {
		t.Errorf("REST without a codec: stored as %s (the gateway's default is none)", c)
	}
	// An idempotent produce (the caller's producer id) too.
	e.mustDo("POST", "/v1/topics/p/partitions/1/records", `{"compression": "snappy", "producer_id": 5, "producer_epoch": 0, "base_sequence": 0, "records": [{"value": "b"}]}`)
	if c := codecOf("p", 1); c != record.Snappy {
		t.Errorf("an idempotent produce with snappy: stored as %s", c)
	}
	e.mustDo("POST", "/v1/topics/z/records", `{"compression": "snappy", "records": [{"value": "a"}]}`)
	if c := codecOf("z", 0); c != record.Zstd {
		t.Errorf("a zstd topic asked for snappy: stored as %s", c)
	}
	code, out := e.do("POST", "/v1/topics/p/records", `{"compression": "brotli", "records": [{"value": "a"}]}`)
	if code != 400 || out["error_code"] != "UNSUPPORTED_COMPRESSION_TYPE" {
		t.Errorf("an unknown codec: %d %v", code, out)
	}

	conn := dialGRPC(t, e.gw.GRPCAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	prod := skeinv1.NewProducerServiceClient(conn)
	v, lz4, zstd := "v", "lz4", "zstd"
	resp, err := prod.Produce(ctx, &skeinv1.ProduceRequest{Topic: "p", Partition: ptr[int32](2), Compression: &lz4, Records: []*skeinv1.ProduceRecord{{Value: &v}}})
	if err != nil || resp.GetResults()[0].GetErrorCode() != skeinv1.ErrorCode_NONE {
		t.Fatalf("unary produce: %v %v", resp, err)
	}
	if c := codecOf("p", 2); c != record.LZ4 {
		t.Errorf("unary gRPC with lz4: stored as %s", c)
	}
	ps, err := prod.ProduceStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.Send(&skeinv1.ProduceStreamRequest{CorrelationId: 1, Topic: "p", Compression: &zstd, Records: []*skeinv1.ProduceRecord{{Value: &v, Partition: ptr[int32](3)}}}); err != nil {
		t.Fatal(err)
	}
	if r, err := ps.Recv(); err != nil || r.GetResults()[0].GetErrorCode() != skeinv1.ErrorCode_NONE {
		t.Fatalf("stream produce: %v %v", r, err)
	}
	if c := codecOf("p", 3); c != record.Zstd {
		t.Errorf("ProduceStream with zstd: stored as %s", c)
	}
	_ = ps.CloseSend()
}

// A produce with the caller's producer identity is written under the
// gateway's own settings, as every other produce: its --compression when
// the request names no codec, and its delivery timeout, which ends the
// retries of a partition that stays unwritable with an answer.
func TestIdentityProduceUnderTheGatewaySettings(t *testing.T) {
	e := startWith(t, func(c *Config) {
		c.ProducerOptions = append(c.ProducerOptions, client.WithCompression(record.Zstd), client.WithDeliveryTimeout(time.Second))
	})
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "p", "replication_factor": 1, "partitions": 2}`)
	e.mustDo("POST", "/v1/topics/p/partitions/0/records", `{"producer_id": 5, "producer_epoch": 0, "base_sequence": 0, "records": [{"value": "a"}]}`)
	if bs := e.cluster.Leader("p", 0).Batches("p", 0); len(bs) != 1 || bs[0].Compression() != record.Zstd {
		t.Fatalf("an idempotent produce with no codec, under --compression zstd: %d batches, codec %v", len(bs), bs[0].Compression())
	}

	e.cluster.Leader("p", 1).FailNext("p", 1, errs.NotEnoughReplicas, 1_000_000)
	start := time.Now()
	code, out := e.do("POST", "/v1/topics/p/partitions/1/records", `{"producer_id": 5, "producer_epoch": 0, "base_sequence": 0, "records": [{"value": "b"}]}`)
	took := time.Since(start)
	if code != 200 || took > 10*time.Second {
		t.Fatalf("an idempotent produce to a partition below min.insync.replicas: %d after %v: %v", code, took, out)
	}
	if m := out["results"].([]any)[0].(map[string]any); m["error_code"] != "NOT_ENOUGH_REPLICAS" || m["outcome"] != "NOT_WRITTEN" {
		t.Errorf("its result: %v, want NOT_ENOUGH_REPLICAS, not written", m)
	}
}

// A ProduceStream that the gateway drains at shutdown answers what it took
// and ends with BROKER_NOT_AVAILABLE (gRPC UNAVAILABLE), not OK: the client
// learns that a request it had no answer for was not written, and sends it
// again elsewhere.
func TestProduceStreamDrainedEndsUnavailable(t *testing.T) {
	e := start(t)
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "p", "replication_factor": 1}`)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ps, err := skeinv1.NewProducerServiceClient(dialGRPC(t, e.gw.GRPCAddr())).ProduceStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v := "v"
	if err := ps.Send(&skeinv1.ProduceStreamRequest{CorrelationId: 1, Topic: "p", Records: []*skeinv1.ProduceRecord{{Value: &v}}}); err != nil {
		t.Fatal(err)
	}
	if r, err := ps.Recv(); err != nil || r.GetResults()[0].GetErrorCode() != skeinv1.ErrorCode_NONE {
		t.Fatalf("before the drain: %v %v", r, err)
	}
	e.gw.producer.Drain()
	_, err = ps.Recv()
	if status.Code(err) != codes.Unavailable || errs.Of(rpcerr.FromStatus(err)) != errs.BrokerNotAvailable || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("the drained stream ended with %v, want UNAVAILABLE (BROKER_NOT_AVAILABLE)", err)
	}
}

// A ProduceStream whose client goes away (cancelled, killed) ends its
// handler, with the handler's producer and answering goroutine, at once;
// not at the gateway's shutdown.
func TestAProduceStreamWhoseClientLeavesEnds(t *testing.T) {
	e := start(t)
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "p", "replication_factor": 1}`)
	cl := skeinv1.NewProducerServiceClient(dialGRPC(t, e.gw.GRPCAddr()))
	handlers := func() int {
		buf := make([]byte, 8<<20)
		return strings.Count(string(buf[:runtime.Stack(buf, true)]), "api.(*Producer).ProduceStream(")
	}
	v := "v"
	for i := range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		ps, err := cl.ProduceStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := ps.Send(&skeinv1.ProduceStreamRequest{CorrelationId: 1, Topic: "p", Records: []*skeinv1.ProduceRecord{{Value: &v}}}); err != nil {
			t.Fatal(err)
		}
		if r, err := ps.Recv(); err != nil || r.GetResults()[0].GetErrorCode() != skeinv1.ErrorCode_NONE {
			t.Fatalf("stream %d: %v %v", i, r, err)
		}
		cancel()
	}
	deadline := time.Now().Add(5 * time.Second)
	for n := handlers(); n > 0; n = handlers() {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 20 ProduceStream handlers still run 5 s after their clients left", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
