//go:build integration

package e2e

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	storagev1 "skein/gen/skein/storage/v1"
	"skein/libs/client"
	"skein/libs/metadata"
	"skein/libs/record"
)

// A topic's compression.type names the codec its batches are stored with:
// records produced over REST to a topic of each codec read back intact,
// text and binary alike, several batches in one answer.
func TestCompressionTypesRoundTrip(t *testing.T) {
	d := devCluster(t)
	c := restClient(d)
	ctx := testCtx(t, 60*time.Second)
	for _, codec := range []string{"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"} {
		topic := "e2e-codec-" + codec
		desc := createTopic(ctx, t, c, topic, 1, 3, map[string]string{"compression.type": codec, "min.insync.replicas": "2"})
		if got := desc.Configs["compression.type"]; got != codec {
			t.Errorf("%s: compression.type %q after create", topic, got)
		}
		var records []map[string]any
		want := map[int]string{}
		for i := range 50 {
			text := fmt.Sprintf("record %d of %s %s", i, codec, strings.Repeat("abc", i))
			want[i] = text
			r := map[string]any{"key": fmt.Sprint(i), "value": text}
			if i%5 == 0 { // binary values too
				r = map[string]any{"key": fmt.Sprint(i), "value_bytes": base64.StdEncoding.EncodeToString(append([]byte{0xff, 0}, text...))}
				want[i] = string(append([]byte{0xff, 0}, text...))
			}
			records = append(records, r)
		}
		// Three requests, three batches: one fetch answer holds them all,
		// each decompressed on its own.
		for _, part := range [][]map[string]any{records[:17], records[17:34], records[34:]} {
			var pr ProduceResponse
			if err := c.Call(ctx, "POST", "/v1/topics/"+topic+"/partitions/0/records", map[string]any{"records": part}, &pr); err != nil {
				t.Fatalf("%s: produce: %v", topic, err)
			}
		}
		var fr FetchResponse
		if err := c.Call(ctx, "GET", "/v1/topics/"+topic+"/partitions/0/records?offset=0&max_records=100&encoding=BYTES", nil, &fr); err != nil {
			t.Fatalf("%s: fetch: %v", topic, err)
		}
		if len(fr.Records) != len(want) {
			t.Fatalf("%s: read %d records, produced %d", topic, len(fr.Records), len(want))
		}
		for i, r := range fr.Records {
			if got := string(r.ValueBytes); got != want[i] {
				t.Errorf("%s: record %d is %q, produced %q", topic, i, got, want[i])
			}
		}
	}
}

// A producer that does not encode with the topic's compression.type (a
// foreign client: here gzip batches sent straight to the partition leader,
// Skein's own clients would encode lz4) has its batch recompressed by the
// leader: the stored batch is lz4, the records read back intact through
// libs/client, and the storage node's /metrics counts the bytes it stored
// and what they weigh uncompressed.
func TestCompressionLeaderRecompresses(t *testing.T) {
	d := devCluster(t)
	ctx := testCtx(t, 60*time.Second)
	const topic = "e2e-recompress-lz4"
	createTopic(ctx, t, restClient(d), topic, 1, 3, map[string]string{"compression.type": "lz4", "min.insync.replicas": "2"})

	procs, err := d.Processes()
	if err != nil {
		t.Fatal(err)
	}
	var controllers []string
	for _, p := range procs {
		if p.Role == "controller" {
			controllers = append(controllers, p.GRPCAddr)
		}
	}
	cl, err := client.New(client.Config{Controllers: controllers})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	m, err := cl.WaitMetadata(ctx, func(m *metadata.Image) bool { _, _, ok := m.LeaderAndEpoch(topic, 0); return ok })
	if err != nil {
		t.Fatal(err)
	}
	leader, epoch, _ := m.LeaderAndEpoch(topic, 0)
	broker, _ := m.Broker(leader)

	type rec struct{ key, value []byte }
	var want []rec
	opts := record.DefaultBatchOptions()
	opts.Compression = record.Gzip
	bld := record.NewBuilder(opts)
	for i := range 20 {
		r := rec{[]byte(fmt.Sprint("key-", i)), []byte(strings.Repeat(fmt.Sprint("value ", i, " "), 20))}
		if i == 7 {
			r.value = nil // a tombstone stays one
		}
		want = append(want, r)
		bld.Append(time.Now().UnixMilli(), r.key, r.value, record.Header{Key: "n", Value: []byte(fmt.Sprint(i))})
	}
	batch, _, err := bld.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(broker.GetGrpcAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	storage := storagev1.NewStorageServiceClient(cc)
	pr, err := storage.Produce(ctx, &storagev1.ProduceRequest{Acks: -1, TimeoutMs: 10000,
		Partitions: []*storagev1.PartitionProduce{{Topic: topic, Partition: 0, CurrentLeaderEpoch: epoch, Records: batch}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := pr.GetPartitions()[0]; r.GetErrorCode() != 0 || r.GetBaseOffset() != 0 {
		t.Fatalf("produce: %v", r)
	}

	fr, err := storage.Fetch(ctx, &storagev1.FetchRequest{MaxBytes: 1 << 20,
		Partitions: []*storagev1.PartitionFetch{{Topic: topic, Partition: 0, CurrentLeaderEpoch: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	it := record.NewBatchIter(fr.GetPartitions()[0].GetRecords())
	if !it.Next() {
		t.Fatalf("no batch fetched: %v", it.Err())
	}
	if c := it.Batch().Compression(); c != record.LZ4 {
		t.Fatalf("the gzip batch is stored as %s, want lz4", c)
	}

	res, err := cl.Fetch(ctx, client.FetchRequest{Topic: topic, Partition: 0, Offset: 0})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != len(want) {
		t.Fatalf("read %d records, produced %d", len(res.Records), len(want))
	}
	for i, r := range res.Records {
		if !bytes.Equal(r.Key, want[i].key) || !bytes.Equal(r.Value, want[i].value) || (r.Value == nil) != (want[i].value == nil) ||
			len(r.Headers) != 1 || string(r.Headers[0].Value) != fmt.Sprint(i) {
			t.Errorf("record %d: key %q value %q headers %v", i, r.Key, r.Value, r.Headers)
		}
	}

	// The leader's /metrics: bytes stored and uncompressed for the topic,
	// and the batch it recompressed.
	resp, err := http.Get("http://" + broker.GetHttpAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, series := range []string{
		`skein_storage_produce_record_bytes_total{stage="stored",topic="` + topic + `"}`,
		`skein_storage_produce_record_bytes_total{stage="uncompressed",topic="` + topic + `"}`,
		`skein_storage_produce_recompressed_batches_total{topic="` + topic + `"} 1`,
	} {
		if !strings.Contains(string(body), series) {
			t.Errorf("/metrics of storage node %d has no %s", leader, series)
		}
	}
}
