//go:build integration

package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client/partitioner"
)

// The workload of the round-trip tests: 10,000 records over 1,000 keys on
// a topic of 6 partitions, replication factor 3, min.insync.replicas 2.
const (
	rtRecords    = 10_000
	rtKeys       = 1_000
	rtPartitions = 6
	rtBatch      = 500
)

// hdr is a header as produced or fetched; asBytes is the form it travels in
// (value_bytes rather than value).
type hdr struct {
	key     string
	value   []byte
	asBytes bool
}

// rec is one produced record. Its value carries "seq=NNNNNN", so a reader
// can tell which record it got and in which order.
type rec struct {
	seq          int
	key          string
	value        []byte
	valueAsBytes bool
	headers      []hdr
	ts           *int64 // explicit timestamp_ms; nil lets the gateway stamp it
}

// makeRecords builds the workload: text values, valid UTF-8 sent as
// value_bytes (every 10th from 3), invalid UTF-8 (every 10th from 7, which a
// TEXT fetch must answer in value_bytes), a text and (on even records) an
// invalid-UTF-8 header, and an explicit timestamp on all but every 10th
// from 9.
func makeRecords(base int64) []rec {
	recs := make([]rec, rtRecords)
	for i := range recs {
		r := rec{seq: i, key: fmt.Sprintf("key-%d", i%rtKeys)}
		tag := fmt.Sprintf("seq=%06d", i)
		switch i % 10 {
		case 3:
			r.value, r.valueAsBytes = []byte(tag+" sent as bytes, valid UTF-8: ✓"), true
		case 7:
			r.value, r.valueAsBytes = append([]byte{0xff, 0xfe, 0x00, 0xc3}, tag...), true
		default:
			r.value = []byte(tag + " text: héllo wörld")
		}
		r.headers = []hdr{{key: "seq", value: []byte(strconv.Itoa(i))}}
		if i%2 == 0 {
			r.headers = append(r.headers, hdr{key: "bin", value: []byte{0x80, byte(i), 0xff}, asBytes: true})
		}
		if i%10 != 9 {
			r.ts = ptr(base + int64(i))
		}
		recs[i] = r
	}
	return recs
}

func seqOf(value []byte) (int, error) {
	i := bytes.Index(value, []byte("seq="))
	if i < 0 || len(value) < i+10 {
		return 0, fmt.Errorf("no seq= in %q", value)
	}
	return strconv.Atoi(string(value[i+4 : i+10]))
}

// ack is a produce result: where the record went.
type ack struct {
	partition int32
	offset    int64
	ts        int64
}

// got is a fetched record, from either API.
type got struct {
	topic                    string
	partition                int32
	offset, ts               int64
	key, value               []byte
	keyAsBytes, valueAsBytes bool
	headers                  []hdr
}

// textOrBytes reads one field of a fetched record: exactly one of the text
// and the bytes form must be set.
func textOrBytes(text *string, raw []byte) (b []byte, asBytes bool, err error) {
	switch {
	case text != nil && raw != nil:
		return nil, false, fmt.Errorf("both the text and the bytes form are set")
	case text != nil:
		return []byte(*text), false, nil
	case raw != nil:
		return raw, true, nil
	}
	return nil, false, fmt.Errorf("neither the text nor the bytes form is set")
}

// errLimit stops a check from printing thousands of lines.
type errLimit struct {
	t *testing.T
	n int
}

func (e *errLimit) Errorf(format string, args ...any) {
	e.t.Helper()
	e.n++
	if e.n <= 20 {
		e.t.Errorf(format, args...)
	} else if e.n == 21 {
		e.t.Errorf("... more errors left out")
	}
}

// checkAcks checks the produce results: no error, a real offset, and the
// partition Kafka's Java client would pick for the key.
func checkAcks(t *testing.T, recs []rec, acks []ack, errors []string) {
	t.Helper()
	el := &errLimit{t: t}
	for i, r := range recs {
		if errors[i] != "" {
			el.Errorf("record %d: produce failed: %s", i, errors[i])
			continue
		}
		if want := partitioner.ForKey([]byte(r.key), rtPartitions); acks[i].partition != want {
			el.Errorf("record %d (key %q) went to partition %d; Kafka's murmur2 placement is %d", i, r.key, acks[i].partition, want)
		}
		if acks[i].offset < 0 {
			el.Errorf("record %d: offset %d", i, acks[i].offset)
		}
		if r.ts != nil && acks[i].ts != *r.ts {
			el.Errorf("record %d: result timestamp %d, produced with %d", i, acks[i].ts, *r.ts)
		}
	}
}

// checkFetched is the round trip's verdict: every record read exactly once,
// at the offset its produce answered, on its key's partition, offsets dense
// from 0 and sequence numbers rising with them (per-partition order, so
// per-key order), key, value, headers and timestamp as produced, each field
// in the form the encoding asks for.
func checkFetched(t *testing.T, topic string, recs []rec, acks []ack, fetched map[int32][]got, enc skeinv1.Encoding, window [2]int64) {
	t.Helper()
	el := &errLimit{t: t}
	seen := make([]bool, len(recs))
	total := 0
	for p := int32(0); p < rtPartitions; p++ {
		prevSeq := -1
		for i, g := range fetched[p] {
			total++
			if g.topic != topic || g.partition != p {
				el.Errorf("partition %d offset %d: record names %s/%d", p, g.offset, g.topic, g.partition)
			}
			if g.offset != int64(i) {
				el.Errorf("partition %d: record %d of the fetch has offset %d; offsets are dense from 0", p, i, g.offset)
			}
			seq, err := seqOf(g.value)
			if err != nil || seq < 0 || seq >= len(recs) {
				el.Errorf("partition %d offset %d: %v", p, g.offset, err)
				continue
			}
			if seen[seq] {
				el.Errorf("partition %d offset %d: record %d read twice", p, g.offset, seq)
			}
			seen[seq] = true
			if seq <= prevSeq {
				el.Errorf("partition %d offset %d: record %d after record %d: order lost", p, g.offset, seq, prevSeq)
			}
			prevSeq = seq
			r, a := recs[seq], acks[seq]
			if a.partition != p || a.offset != g.offset {
				el.Errorf("record %d read at %d/%d, its produce answered %d/%d", seq, p, g.offset, a.partition, a.offset)
			}
			if want := partitioner.ForKey(g.key, rtPartitions); want != p {
				el.Errorf("record %d (key %q) is on partition %d; murmur2 places it on %d", seq, g.key, p, want)
			}
			if string(g.key) != r.key || !bytes.Equal(g.value, r.value) {
				el.Errorf("record %d: key %q value %q, produced %q %q", seq, g.key, g.value, r.key, r.value)
			}
			switch {
			case r.ts != nil && g.ts != *r.ts:
				el.Errorf("record %d: timestamp %d, produced with %d", seq, g.ts, *r.ts)
			case r.ts == nil && (g.ts < window[0] || g.ts > window[1]):
				el.Errorf("record %d: gateway timestamp %d outside the produce window [%d, %d]", seq, g.ts, window[0], window[1])
			case g.ts != a.ts:
				el.Errorf("record %d: timestamp %d, its produce answered %d", seq, g.ts, a.ts)
			}
			wantForm := func(b []byte) bool { return enc == skeinv1.Encoding_BYTES || !utf8.Valid(b) }
			if g.keyAsBytes != wantForm(g.key) || g.valueAsBytes != wantForm(g.value) {
				el.Errorf("record %d (%v): key in bytes form %v, value in bytes form %v (value %q)", seq, enc, g.keyAsBytes, g.valueAsBytes, g.value)
			}
			// The user's headers, in order, then the traceparent the gateway
			// adds to join the producer's trace.
			if len(g.headers) < len(r.headers) {
				el.Errorf("record %d: %d headers, produced %d", seq, len(g.headers), len(r.headers))
				continue
			}
			for j, h := range r.headers {
				gh := g.headers[j]
				if gh.key != h.key || !bytes.Equal(gh.value, h.value) || gh.asBytes != wantForm(gh.value) {
					el.Errorf("record %d header %d: %q=%q (bytes form %v), produced %q=%q", seq, j, gh.key, gh.value, gh.asBytes, h.key, h.value)
				}
			}
			for _, gh := range g.headers[len(r.headers):] {
				if gh.key != "traceparent" || !strings.HasPrefix(string(gh.value), "00-") {
					el.Errorf("record %d: unexpected header %q=%q", seq, gh.key, gh.value)
				}
			}
		}
	}
	if total != len(recs) {
		t.Errorf("read %d records, produced %d", total, len(recs))
	}
	for seq, ok := range seen {
		if !ok {
			el.Errorf("record %d (acked at %d/%d) never read", seq, acks[seq].partition, acks[seq].offset)
		}
	}
}

// TestRESTRoundTrip produces 10,000 keyed records over REST in requests of
// 500 and reads every partition back by offset, with encoding=TEXT and
// encoding=BYTES.
func TestRESTRoundTrip(t *testing.T) {
	d := devCluster(t)
	ctx := testCtx(t, 90*time.Second)
	c := restClient(d)
	const topic = "e2e-rest-roundtrip"
	td := createTopic(ctx, t, c, topic, rtPartitions, 3, map[string]string{"min.insync.replicas": "2"})
	if td.Configs["min.insync.replicas"] != "2" {
		t.Errorf("created topic has min.insync.replicas %q", td.Configs["min.insync.replicas"])
	}
	for _, p := range td.Partitions {
		if len(p.Replicas) != 3 {
			t.Errorf("partition %d has replicas %v, want 3", p.Partition, p.Replicas)
		}
	}

	recs := makeRecords(time.Now().Add(-time.Hour).UnixMilli())
	acks, errors := make([]ack, len(recs)), make([]string, len(recs))
	window := [2]int64{time.Now().UnixMilli(), 0}
	start := time.Now()
	for lo := 0; lo < len(recs); lo += rtBatch {
		batch := recs[lo:min(lo+rtBatch, len(recs))]
		req := ProduceRequest{Records: make([]ProduceRecord, len(batch))}
		for i, r := range batch {
			pr := ProduceRecord{Key: ptr(r.key), TimestampMs: r.ts}
			if r.valueAsBytes {
				pr.ValueBytes = r.value
			} else {
				pr.Value = ptr(string(r.value))
			}
			for _, h := range r.headers {
				if h.asBytes {
					pr.Headers = append(pr.Headers, Header{Key: h.key, ValueBytes: h.value})
				} else {
					pr.Headers = append(pr.Headers, Header{Key: h.key, Value: ptr(string(h.value))})
				}
			}
			req.Records[i] = pr
		}
		var resp ProduceResponse
		if err := mustDo(ctx, t, c, http.StatusOK, "POST", "/v1/topics/"+topic+"/records", req).Decode(&resp); err != nil {
			t.Fatal(err)
		}
		if len(resp.Results) != len(batch) {
			t.Fatalf("records %d..: %d results for %d records", lo, len(resp.Results), len(batch))
		}
		for i, res := range resp.Results {
			acks[lo+i] = ack{partition: res.Partition, offset: int64(res.Offset), ts: int64(res.TimestampMs)}
			if res.ErrorCode != "NONE" || res.Message != "" {
				errors[lo+i] = res.ErrorCode + ": " + res.Message
			}
		}
	}
	window[1] = time.Now().UnixMilli()
	t.Logf("REST: produced %d records in %d requests in %v", len(recs), len(recs)/rtBatch, time.Since(start).Round(time.Millisecond))
	checkAcks(t, recs, acks, errors)
	if t.Failed() {
		t.FailNow()
	}

	// The description now shows every record below the high watermarks.
	var desc TopicDescription
	if err := mustDo(ctx, t, c, http.StatusOK, "GET", "/v1/topics/"+topic, nil).Decode(&desc); err != nil {
		t.Fatal(err)
	}
	hw := map[int32]int64{}
	var sum int64
	for _, p := range desc.Partitions {
		hw[p.Partition] = int64(p.HighWatermark)
		sum += int64(p.HighWatermark)
		if len(p.ISR) < 2 {
			t.Errorf("partition %d: ISR %v below min.insync.replicas 2 after acks=all produces", p.Partition, p.ISR)
		}
	}
	if sum != int64(len(recs)) {
		t.Errorf("high watermarks %v sum to %d, want %d", hw, sum, len(recs))
	}

	for _, enc := range []skeinv1.Encoding{skeinv1.Encoding_TEXT, skeinv1.Encoding_BYTES} {
		start := time.Now()
		fetched, requests := map[int32][]got{}, 0
		for p := int32(0); p < rtPartitions; p++ {
			for offset := int64(0); offset < hw[p]; {
				path := fmt.Sprintf("/v1/topics/%s/partitions/%d/records?offset=%d&encoding=%s", topic, p, offset, enc)
				if enc == skeinv1.Encoding_TEXT {
					path = fmt.Sprintf("/v1/topics/%s/partitions/%d/records?offset=%d", topic, p, offset) // TEXT is the default
				}
				var fr FetchResponse
				if err := mustDo(ctx, t, c, http.StatusOK, "GET", path, nil).Decode(&fr); err != nil {
					t.Fatal(err)
				}
				requests++
				if int64(fr.HighWatermark) != hw[p] || int64(fr.LastStableOffset) != hw[p] || fr.LogStartOffset != 0 {
					t.Errorf("partition %d: high watermark %d, last stable offset %d, log start %d; want %d, %d, 0",
						p, fr.HighWatermark, fr.LastStableOffset, fr.LogStartOffset, hw[p], hw[p])
				}
				if len(fr.Records) == 0 || int64(fr.NextOffset) != offset+int64(len(fr.Records)) {
					t.Fatalf("GET %s: %d records, next_offset %d", path, len(fr.Records), fr.NextOffset)
				}
				for _, r := range fr.Records {
					g := got{topic: r.Topic, partition: r.Partition, offset: int64(r.Offset), ts: int64(r.TimestampMs)}
					var err error
					if g.key, g.keyAsBytes, err = textOrBytes(r.Key, r.KeyBytes); err != nil {
						t.Fatalf("partition %d offset %d key: %v", p, r.Offset, err)
					}
					if g.value, g.valueAsBytes, err = textOrBytes(r.Value, r.ValueBytes); err != nil {
						t.Fatalf("partition %d offset %d value: %v", p, r.Offset, err)
					}
					for _, h := range r.Headers {
						v, asBytes, err := textOrBytes(h.Value, h.ValueBytes)
						if err != nil {
							t.Fatalf("partition %d offset %d header %q: %v", p, r.Offset, h.Key, err)
						}
						g.headers = append(g.headers, hdr{key: h.Key, value: v, asBytes: asBytes})
					}
					fetched[p] = append(fetched[p], g)
				}
				offset = int64(fr.NextOffset)
			}
		}
		t.Logf("REST: read %d records (%v) in %d requests in %v", len(recs), enc, requests, time.Since(start).Round(time.Millisecond))
		checkFetched(t, topic, recs, acks, fetched, enc, window)
	}
}

// TestGRPCRoundTrip is the same workload through gRPC: ProduceStream (one
// pipelined, idempotent session) and Fetch.
func TestGRPCRoundTrip(t *testing.T) {
	d := devCluster(t)
	ctx := testCtx(t, 90*time.Second)
	cc := grpcConn(t, d)
	admin, producer, consumer := skeinv1.NewAdminServiceClient(cc), skeinv1.NewProducerServiceClient(cc), skeinv1.NewConsumerServiceClient(cc)
	const topic = "e2e-grpc-roundtrip"
	ct, err := admin.CreateTopic(ctx, &skeinv1.CreateTopicRequest{
		Name: topic, Partitions: ptr(int32(rtPartitions)), ReplicationFactor: ptr(int32(3)),
		Configs: map[string]string{"min.insync.replicas": "2"},
	})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	if n := len(ct.GetTopic().GetPartitions()); n != rtPartitions || ct.GetTopic().GetReplicationFactor() != 3 {
		t.Fatalf("created %d partitions, replication factor %d", n, ct.GetTopic().GetReplicationFactor())
	}

	recs := makeRecords(time.Now().Add(-2 * time.Hour).UnixMilli())
	acks, errors := make([]ack, len(recs)), make([]string, len(recs))
	window := [2]int64{time.Now().UnixMilli(), 0}
	start := time.Now()
	stream, err := producer.ProduceStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sendErr := make(chan error, 1)
	go func() {
		for lo := 0; lo < len(recs); lo += rtBatch {
			req := &skeinv1.ProduceStreamRequest{CorrelationId: uint64(lo), Topic: topic}
			for _, r := range recs[lo:min(lo+rtBatch, len(recs))] {
				pr := &skeinv1.ProduceRecord{Key: ptr(r.key), TimestampMs: r.ts}
				if r.valueAsBytes {
					pr.ValueBytes = r.value
				} else {
					pr.Value = ptr(string(r.value))
				}
				for _, h := range r.headers {
					if h.asBytes {
						pr.Headers = append(pr.Headers, &skeinv1.Header{Key: h.key, ValueBytes: h.value})
					} else {
						pr.Headers = append(pr.Headers, &skeinv1.Header{Key: h.key, Value: ptr(string(h.value))})
					}
				}
				req.Records = append(req.Records, pr)
			}
			if err := stream.Send(req); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- stream.CloseSend()
	}()
	answered := map[uint64]bool{}
	for range len(recs) / rtBatch {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("ProduceStream: %v", err)
		}
		lo := int(resp.GetCorrelationId())
		if lo%rtBatch != 0 || lo >= len(recs) || answered[resp.GetCorrelationId()] {
			t.Fatalf("ProduceStream answered correlation id %d", lo)
		}
		answered[resp.GetCorrelationId()] = true
		if len(resp.GetResults()) != rtBatch {
			t.Fatalf("correlation id %d: %d results for %d records", lo, len(resp.GetResults()), rtBatch)
		}
		for i, res := range resp.GetResults() {
			acks[lo+i] = ack{partition: res.GetPartition(), offset: res.GetOffset(), ts: res.GetTimestampMs()}
			if res.GetErrorCode() != skeinv1.ErrorCode_NONE || res.GetMessage() != "" {
				errors[lo+i] = res.GetErrorCode().String() + ": " + res.GetMessage()
			}
		}
	}
	if err := <-sendErr; err != nil {
		t.Fatalf("ProduceStream send: %v", err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Errorf("ProduceStream after the last answer: %v, want EOF", err)
	}
	window[1] = time.Now().UnixMilli()
	t.Logf("gRPC: produced %d records in %d stream requests in %v", len(recs), len(recs)/rtBatch, time.Since(start).Round(time.Millisecond))
	checkAcks(t, recs, acks, errors)
	if t.Failed() {
		t.FailNow()
	}

	dt, err := admin.DescribeTopic(ctx, &skeinv1.DescribeTopicRequest{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	hw := map[int32]int64{}
	var sum int64
	for _, p := range dt.GetTopic().GetPartitions() {
		hw[p.GetPartition()] = p.GetHighWatermark()
		sum += p.GetHighWatermark()
	}
	if sum != int64(len(recs)) {
		t.Errorf("high watermarks %v sum to %d, want %d", hw, sum, len(recs))
	}

	for _, enc := range []skeinv1.Encoding{skeinv1.Encoding_TEXT, skeinv1.Encoding_BYTES} {
		start := time.Now()
		fetched, requests := map[int32][]got{}, 0
		for p := int32(0); p < rtPartitions; p++ {
			for offset := int64(0); offset < hw[p]; {
				fr, err := consumer.Fetch(ctx, &skeinv1.FetchRequest{Topic: topic, Partition: p, Offset: ptr(offset), Encoding: enc})
				if err != nil {
					t.Fatalf("Fetch %d@%d: %v", p, offset, err)
				}
				requests++
				if len(fr.GetRecords()) == 0 || fr.GetNextOffset() != offset+int64(len(fr.GetRecords())) || fr.GetHighWatermark() != hw[p] {
					t.Fatalf("Fetch %d@%d: %d records, next_offset %d, high watermark %d (want %d)", p, offset, len(fr.GetRecords()), fr.GetNextOffset(), fr.GetHighWatermark(), hw[p])
				}
				for _, r := range fr.GetRecords() {
					g := got{topic: r.GetTopic(), partition: r.GetPartition(), offset: r.GetOffset(), ts: r.GetTimestampMs()}
					var err error
					if g.key, g.keyAsBytes, err = textOrBytes(r.Key, r.KeyBytes); err != nil {
						t.Fatalf("partition %d offset %d key: %v", p, r.GetOffset(), err)
					}
					if g.value, g.valueAsBytes, err = textOrBytes(r.Value, r.ValueBytes); err != nil {
						t.Fatalf("partition %d offset %d value: %v", p, r.GetOffset(), err)
					}
					for _, h := range r.GetHeaders() {
						v, asBytes, err := textOrBytes(h.Value, h.ValueBytes)
						if err != nil {
							t.Fatalf("partition %d offset %d header %q: %v", p, r.GetOffset(), h.GetKey(), err)
						}
						g.headers = append(g.headers, hdr{key: h.GetKey(), value: v, asBytes: asBytes})
					}
					fetched[p] = append(fetched[p], g)
				}
				offset = fr.GetNextOffset()
			}
		}
		t.Logf("gRPC: read %d records (%v) in %d fetches in %v", len(recs), enc, requests, time.Since(start).Round(time.Millisecond))
		checkFetched(t, topic, recs, acks, fetched, enc, window)
	}
}
