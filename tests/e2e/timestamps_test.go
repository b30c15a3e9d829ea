//go:build integration

package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestCreateTimeBounds: a topic's message.timestamp.before.max.ms and
// message.timestamp.after.max.ms refuse a request with a record whose
// create time is too far from the clock with INVALID_TIMESTAMP, write
// nothing of it, and take effect again once altered.
func TestCreateTimeBounds(t *testing.T) {
	d := devCluster(t)
	ctx := testCtx(t, 60*time.Second)
	c := restClient(d)
	const topic = "e2e-create-times"
	createTopic(ctx, t, c, topic, 1, 3, map[string]string{
		"message.timestamp.before.max.ms": "3600000", "message.timestamp.after.max.ms": "3600000",
	})
	path := "/v1/topics/" + topic + "/partitions/0/records"
	produce := func(value string, ts int64) ProduceResult {
		t.Helper()
		body := fmt.Sprintf(`{"records": [{"value": %q, "timestamp_ms": %d}]}`, value, ts)
		if ts == 0 {
			body = fmt.Sprintf(`{"records": [{"value": %q}]}`, value)
		}
		var pr ProduceResponse
		if err := mustDo(ctx, t, c, http.StatusOK, "POST", path, body).Decode(&pr); err != nil {
			t.Fatal(err)
		}
		if len(pr.Results) != 1 {
			t.Fatalf("%d results for one record", len(pr.Results))
		}
		return pr.Results[0]
	}
	now := time.Now().UnixMilli()
	hour := time.Hour.Milliseconds()
	for _, tc := range []struct {
		name, body, says string
	}{
		{"two hours old", fmt.Sprintf(`{"records": [{"value": "old", "timestamp_ms": %d}]}`, now-2*hour), "message.timestamp.before.max.ms"},
		{"two hours ahead", fmt.Sprintf(`{"records": [{"value": "new", "timestamp_ms": %d}]}`, now+2*hour), "message.timestamp.after.max.ms"},
		{"one good, one old", fmt.Sprintf(`{"records": [{"value": "good"}, {"value": "old", "timestamp_ms": %d}]}`, now-2*hour), "record 1: "},
	} {
		resp, err := c.Do(ctx, "POST", path, tc.body)
		if err != nil {
			t.Fatal(err)
		}
		checkErrorDocument(t, resp, http.StatusBadRequest, "INVALID_TIMESTAMP")
		if !strings.Contains(string(resp.Body), tc.says) {
			t.Errorf("%s: %s does not say %q", tc.name, resp, tc.says)
		}
	}
	for i, r := range []ProduceResult{produce("a minute old", now-60_000), produce("the gateway's clock", 0)} {
		if r.ErrorCode != "NONE" || int64(r.Offset) != int64(i) {
			t.Errorf("record %d: %+v, want offset %d", i, r, i)
		}
	}

	// Without the bound the old record goes in. The change reaches the
	// leader shortly after this gateway.
	mustDo(ctx, t, c, http.StatusOK, "POST", "/v1/topics/"+topic+"/configs", `{"configs": {"message.timestamp.before.max.ms": ""}}`)
	for {
		r := produce("two hours old", now-2*hour)
		if r.ErrorCode == "NONE" {
			if r.Offset != 2 {
				t.Errorf("the old record at offset %d, want 2", r.Offset)
			}
			break
		}
		if r.ErrorCode != "INVALID_TIMESTAMP" || ctx.Err() != nil {
			t.Fatalf("after the alter: %+v (%v)", r, ctx.Err())
		}
		time.Sleep(100 * time.Millisecond)
	}

	var fr FetchResponse
	if err := mustDo(ctx, t, c, http.StatusOK, "GET", path+"?offset=0&max_records=10", nil).Decode(&fr); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range fr.Records {
		got = append(got, *r.Value)
	}
	if want := []string{"a minute old", "the gateway's clock", "two hours old"}; strings.Join(got, "|") != strings.Join(want, "|") || fr.HighWatermark != 3 {
		t.Fatalf("the partition holds %q (high watermark %d), want %q", got, fr.HighWatermark, want)
	}
}

// On a topic of message.timestamp.type=LogAppendTime the answer to a
// produce carries the time the leader stamped, which a fetch reads back,
// not the create time the record was sent with (as Kafka's
// log_append_time_ms), whichever route wrote it.
func TestLogAppendTimeInTheProduceAnswer(t *testing.T) {
	d := devCluster(t)
	ctx := testCtx(t, 60*time.Second)
	c := restClient(d)
	const topic = "e2e-append-time"
	createTopic(ctx, t, c, topic, 1, 3, map[string]string{"message.timestamp.type": "LogAppendTime"})
	for _, path := range []string{"/v1/topics/" + topic + "/records", "/v1/topics/" + topic + "/partitions/0/records"} {
		before := time.Now().UnixMilli()
		var pr ProduceResponse
		if err := mustDo(ctx, t, c, http.StatusOK, "POST", path, `{"records": [{"value": "v", "timestamp_ms": 1700000000000}]}`).Decode(&pr); err != nil {
			t.Fatal(err)
		}
		after := time.Now().UnixMilli()
		if len(pr.Results) != 1 || pr.Results[0].ErrorCode != "NONE" {
			t.Fatalf("%s: %+v", path, pr)
		}
		got := int64(pr.Results[0].TimestampMs)
		if got < before || got > after {
			t.Errorf("%s: answered timestamp %d, want the append time, within [%d, %d]", path, got, before, after)
		}
		var f FetchResponse
		if err := c.Call(ctx, "GET", fmt.Sprintf("/v1/topics/%s/partitions/0/records?offset=%d", topic, pr.Results[0].Offset), nil, &f); err != nil {
			t.Fatal(err)
		}
		if len(f.Records) == 0 || int64(f.Records[0].TimestampMs) != got || f.Records[0].TimestampType != "LOG_APPEND_TIME" {
			t.Errorf("%s: the record reads back with %+v, want timestamp %d, LOG_APPEND_TIME", path, f.Records, got)
		}
	}

	// A retried idempotent batch is answered as the first time: its
	// offset and the time it was appended, not its create time.
	retry := `{"producer_id": 7001, "producer_epoch": 0, "base_sequence": 0, "records": [{"value": "once", "timestamp_ms": 1700000000000}]}`
	var first, again ProduceResponse
	if err := mustDo(ctx, t, c, http.StatusOK, "POST", "/v1/topics/"+topic+"/partitions/0/records", retry).Decode(&first); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // a later append time would differ
	if err := mustDo(ctx, t, c, http.StatusOK, "POST", "/v1/topics/"+topic+"/partitions/0/records", retry).Decode(&again); err != nil {
		t.Fatal(err)
	}
	if len(first.Results) != 1 || len(again.Results) != 1 || first.Results[0].ErrorCode != "NONE" || again.Results[0].ErrorCode != "NONE" {
		t.Fatalf("idempotent produce and its retry: %+v, %+v", first, again)
	}
	if again.Results[0].Offset != first.Results[0].Offset || again.Results[0].TimestampMs != first.Results[0].TimestampMs || int64(first.Results[0].TimestampMs) == 1700000000000 {
		t.Errorf("the retry answered offset %d, timestamp %d; the first append offset %d, timestamp %d (want the same append time)",
			again.Results[0].Offset, again.Results[0].TimestampMs, first.Results[0].Offset, first.Results[0].TimestampMs)
	}
}

// A retried idempotent batch whose records take the gateway's clock is
// answered with the time its first write stored, which a fetch reads back,
// not the time of the retry (a create-time topic), beside records that
// name their own; a record sent with timestamp_ms 0 keeps it, through a
// retry too.
func TestRetryAnswersTheStoredCreateTime(t *testing.T) {
	d := devCluster(t)
	ctx := testCtx(t, 60*time.Second)
	c := restClient(d)
	const topic = "e2e-retry-create-time"
	createTopic(ctx, t, c, topic, 1, 3, nil)
	path := "/v1/topics/" + topic + "/partitions/0/records"
	hourAgo := time.Now().Add(-time.Hour).UnixMilli()
	for i, tc := range []struct{ records, want string }{
		{`[{"value": "a"}, {"value": "b"}]`, "the first write's time"},
		{`[{"value": "epoch", "timestamp_ms": 0}]`, "0"},
		{fmt.Sprintf(`[{"value": "clocked"}, {"value": "an hour old", "timestamp_ms": %d}]`, hourAgo), "the first write's time, and its own"},
	} {
		body := fmt.Sprintf(`{"producer_id": 7002, "producer_epoch": 0, "base_sequence": %d, "records": %s}`, []int{0, 2, 3}[i], tc.records)
		var first, again ProduceResponse
		if err := mustDo(ctx, t, c, http.StatusOK, "POST", path, body).Decode(&first); err != nil {
			t.Fatal(err)
		}
		if len(first.Results) == 0 || first.Results[0].ErrorCode != "NONE" {
			t.Fatalf("%s: %+v", tc.records, first)
		}
		time.Sleep(20 * time.Millisecond) // the gateway's clock moves on
		if err := mustDo(ctx, t, c, http.StatusOK, "POST", path, body).Decode(&again); err != nil {
			t.Fatal(err)
		}
		var f FetchResponse
		if err := c.Call(ctx, "GET", fmt.Sprintf("/v1/topics/%s/partitions/0/records?offset=%d", topic, first.Results[0].Offset), nil, &f); err != nil {
			t.Fatal(err)
		}
		if len(f.Records) < len(first.Results) {
			t.Fatalf("%s: %d records read back", tc.records, len(f.Records))
		}
		for j := range first.Results {
			stored := f.Records[j].TimestampMs
			if again.Results[j].Offset != first.Results[j].Offset || again.Results[j].TimestampMs != stored || first.Results[j].TimestampMs != stored {
				t.Errorf("%s record %d: written at %d (%d), retried at %d (%d); stored with %d, want %s",
					tc.records, j, first.Results[j].Offset, first.Results[j].TimestampMs, again.Results[j].Offset, again.Results[j].TimestampMs, stored, tc.want)
			}
		}
		if typ := f.Records[0].TimestampType; typ != "CREATE_TIME" {
			t.Errorf("%s: read back as %q, want CREATE_TIME", tc.records, typ)
		}
		if tc.want == "0" && f.Records[0].TimestampMs != 0 {
			t.Errorf("a record sent at 0 stored with %d", f.Records[0].TimestampMs)
		}
	}
}
