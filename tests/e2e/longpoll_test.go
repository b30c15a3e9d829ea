//go:build integration

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"time"

	skeinv1 "skein/gen/skein/v1"
)

// Long-poll bounds: a parked fetch must answer well within this of a
// produce (typically a few ms on loopback; the bound is loose for a busy
// 2-core machine), and an idle one within idleSlack after max_wait_ms.
const (
	wakeBound = 500 * time.Millisecond
	idleWait  = 300 * time.Millisecond
	idleSlack = 2 * time.Second
	parkTime  = 300 * time.Millisecond // how long a fetch parks before the produce
	wakeRuns  = 5
)

// fetchFunc fetches partition 0 from offset, long-polling up to maxWaitMs
// for minBytes (left out of the request when 0); produceFunc writes one
// text record to partition 0 and answers its offset.
type (
	fetchFunc   func(ctx context.Context, offset int64, minBytes, maxWaitMs int32) fetchAt
	produceFunc func(ctx context.Context, value string) (int64, error)
)

// fetchAt is one long-poll fetch: what it answered and when.
type fetchAt struct {
	records    []string
	nextOffset int64
	err        error
	at         time.Time
}

// longPoll measures wake-ups: each run parks a fetch at the log end with
// max_wait_ms=5000, produces one record after parkTime, and measures from
// the produce request to the fetch's answer.
func longPoll(t *testing.T, api string, fetch fetchFunc, produce produceFunc) {
	ctx := testCtx(t, 60*time.Second)
	end, err := produce(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	end++
	var wakes []time.Duration
	for run := range wakeRuns {
		done := make(chan fetchAt, 1)
		go func() { done <- fetch(ctx, end, 0, 5000) }()
		select {
		case f := <-done:
			t.Fatalf("run %d: the fetch at the log end (%d) answered before any produce: %+v", run, end, f)
		case <-time.After(parkTime):
		}
		value := fmt.Sprintf("wake-%d", run)
		sent := time.Now()
		off, err := produce(ctx, value)
		acked := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		if off != end {
			t.Fatalf("run %d: produced at %d, the log end was %d", run, off, end)
		}
		var f fetchAt
		select {
		case f = <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("run %d: the long poll did not answer", run)
		}
		if f.err != nil {
			t.Fatalf("run %d: %v", run, f.err)
		}
		wake := f.at.Sub(sent)
		t.Logf("%s run %d: the parked fetch answered %v after the produce was sent (the produce was acknowledged after %v)",
			api, run, wake.Round(100*time.Microsecond), acked.Sub(sent).Round(100*time.Microsecond))
		if !slices.Equal(f.records, []string{value}) || f.nextOffset != end+1 {
			t.Errorf("run %d: woke with %q, next_offset %d; want [%s], %d", run, f.records, f.nextOffset, value, end+1)
		}
		if wake >= wakeBound {
			t.Errorf("run %d: the parked fetch answered %v after the produce, want < %v", run, wake, wakeBound)
		}
		wakes = append(wakes, wake)
		end++
	}
	slices.Sort(wakes)
	t.Logf("%s long-poll wake-up after a produce: median %v, max %v over %d runs", api,
		wakes[len(wakes)/2].Round(100*time.Microsecond), wakes[len(wakes)-1].Round(100*time.Microsecond), len(wakes))

	// Nothing comes: the fetch answers empty after max_wait_ms.
	start := time.Now()
	f := fetch(ctx, end, 0, int32(idleWait/time.Millisecond))
	took := time.Since(start)
	if f.err != nil {
		t.Fatal(f.err)
	}
	t.Logf("%s idle fetch with max_wait_ms=%d answered after %v", api, idleWait.Milliseconds(), took.Round(100*time.Microsecond))
	if len(f.records) != 0 || f.nextOffset != end {
		t.Errorf("idle fetch: %q, next_offset %d; want nothing, %d", f.records, f.nextOffset, end)
	}
	if took < idleWait || took >= idleSlack {
		t.Errorf("idle fetch with max_wait_ms=%d answered after %v, want [%v, %v)", idleWait.Milliseconds(), took, idleWait, idleSlack)
	}
}

// TestLongPollREST: GET .../records?max_wait_ms= at the log end.
func TestLongPollREST(t *testing.T) {
	fetch, produce := restPartition0(t, "e2e-longpoll-rest")
	longPoll(t, "REST", fetch, produce)
}

// TestLongPollGRPC: Fetch with max_wait_ms at the log end.
func TestLongPollGRPC(t *testing.T) {
	fetch, produce := grpcPartition0(t, "e2e-longpoll-grpc")
	longPoll(t, "gRPC", fetch, produce)
}

// minBytesPoll: a fetch at the log end with min_bytes (1,500 bytes) and a
// long max_wait_ms stays parked while one 1,000-byte record is there,
// answers both records once a second one comes, and a fetch whose
// min_bytes is never met answers what there is when max_wait_ms is up.
func minBytesPoll(t *testing.T, api string, fetch fetchFunc, produce produceFunc) {
	ctx := testCtx(t, 60*time.Second)
	end, err := produce(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	end++
	done := make(chan fetchAt, 1)
	go func() { done <- fetch(ctx, end, 1500, 10000) }()
	values := []string{letters(1, 1000), letters(2, 1000)} // letters a codec cannot shrink much
	for i, v := range values {
		select {
		case f := <-done:
			t.Fatalf("%s: the fetch with min_bytes=1500 answered with %d records there: %d records, %v", api, i, len(f.records), f.err)
		case <-time.After(parkTime):
		}
		if _, err := produce(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	var f fetchAt
	select {
	case f = <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: the fetch with min_bytes=1500 did not answer once 2,000 bytes of values were there", api)
	}
	if f.err != nil {
		t.Fatal(f.err)
	}
	if !slices.Equal(f.records, values) || f.nextOffset != end+2 {
		t.Errorf("%s: min_bytes fetch answered %d records, next_offset %d; want the two 1,000-byte values, %d", api, len(f.records), f.nextOffset, end+2)
	}

	start := time.Now()
	f = fetch(ctx, end, 1<<20, int32(idleWait/time.Millisecond))
	took := time.Since(start)
	if f.err != nil {
		t.Fatal(f.err)
	}
	if !slices.Equal(f.records, values) || took < idleWait || took >= idleSlack {
		t.Errorf("%s: min_bytes=1 MiB with max_wait_ms=%d: %d records after %v; want the two values after [%v, %v)",
			api, idleWait.Milliseconds(), len(f.records), took, idleWait, idleSlack)
	}
}

// TestFetchMinBytesREST: GET .../records?min_bytes=&max_wait_ms=.
func TestFetchMinBytesREST(t *testing.T) {
	fetch, produce := restPartition0(t, "e2e-minbytes-rest")
	minBytesPoll(t, "REST", fetch, produce)
}

// TestFetchMinBytesGRPC: Fetch with min_bytes and max_wait_ms.
func TestFetchMinBytesGRPC(t *testing.T) {
	fetch, produce := grpcPartition0(t, "e2e-minbytes-grpc")
	minBytesPoll(t, "gRPC", fetch, produce)
}

// restPartition0 creates topic (one partition, RF=3) and answers a fetch
// and a produce of its partition 0 over REST.
func restPartition0(t *testing.T, topic string) (fetchFunc, produceFunc) {
	c := restClient(devCluster(t))
	createTopic(testCtx(t, 30*time.Second), t, c, topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
	fetch := func(ctx context.Context, offset int64, minBytes, maxWaitMs int32) fetchAt {
		path := fmt.Sprintf("/v1/topics/%s/partitions/0/records?offset=%d&max_wait_ms=%d", topic, offset, maxWaitMs)
		if minBytes != 0 {
			path += fmt.Sprintf("&min_bytes=%d", minBytes)
		}
		resp, err := c.Do(ctx, "GET", path, nil)
		f := fetchAt{at: time.Now(), err: err}
		if err != nil {
			return f
		}
		if resp.Status != http.StatusOK {
			f.err = fmt.Errorf("fetch: %s", resp)
			return f
		}
		var fr FetchResponse
		if f.err = resp.Decode(&fr); f.err != nil {
			return f
		}
		f.nextOffset = int64(fr.NextOffset)
		for _, r := range fr.Records {
			if r.Value == nil {
				f.err = fmt.Errorf("record without a text value: %s", resp)
				return f
			}
			f.records = append(f.records, *r.Value)
		}
		return f
	}
	produce := func(ctx context.Context, value string) (int64, error) {
		resp, err := c.Do(ctx, "POST", "/v1/topics/"+topic+"/records", ProduceRequest{Records: []ProduceRecord{{Value: &value}}})
		if err != nil {
			return 0, err
		}
		var pr ProduceResponse
		if resp.Status != http.StatusOK || resp.Decode(&pr) != nil || len(pr.Results) != 1 || pr.Results[0].ErrorCode != "NONE" {
			return 0, fmt.Errorf("produce: %s", resp)
		}
		return int64(pr.Results[0].Offset), nil
	}
	return fetch, produce
}

// grpcPartition0 creates topic (one partition, RF=3) and answers a fetch
// and a produce of its partition 0 over gRPC.
func grpcPartition0(t *testing.T, topic string) (fetchFunc, produceFunc) {
	cc := grpcConn(t, devCluster(t))
	admin, producer, consumer := skeinv1.NewAdminServiceClient(cc), skeinv1.NewProducerServiceClient(cc), skeinv1.NewConsumerServiceClient(cc)
	if _, err := admin.CreateTopic(testCtx(t, 30*time.Second), &skeinv1.CreateTopicRequest{
		Name: topic, Partitions: ptr(int32(1)), ReplicationFactor: ptr(int32(3)), Configs: map[string]string{"min.insync.replicas": "2"},
	}); err != nil {
		t.Fatal(err)
	}
	fetch := func(ctx context.Context, offset int64, minBytes, maxWaitMs int32) fetchAt {
		req := &skeinv1.FetchRequest{Topic: topic, Partition: 0, Offset: &offset, MaxWaitMs: &maxWaitMs}
		if minBytes != 0 {
			req.MinBytes = &minBytes
		}
		fr, err := consumer.Fetch(ctx, req)
		f := fetchAt{at: time.Now(), err: err}
		if err != nil {
			return f
		}
		f.nextOffset = fr.GetNextOffset()
		for _, r := range fr.GetRecords() {
			f.records = append(f.records, r.GetValue())
		}
		return f
	}
	produce := func(ctx context.Context, value string) (int64, error) {
		resp, err := producer.Produce(ctx, &skeinv1.ProduceRequest{Topic: topic, Records: []*skeinv1.ProduceRecord{{Value: &value}}})
		if err != nil {
			return 0, err
		}
		if len(resp.GetResults()) != 1 || resp.GetResults()[0].GetErrorCode() != skeinv1.ErrorCode_NONE {
			return 0, fmt.Errorf("produce: %v", resp)
		}
		return resp.GetResults()[0].GetOffset(), nil
	}
	return fetch, produce
}

// letters answers n pseudo-random lowercase letters, the same for the same
// seed.
func letters(seed uint64, n int) string {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + r.IntN(26))
	}
	return string(b)
}
