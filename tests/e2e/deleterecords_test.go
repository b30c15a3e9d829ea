//go:build integration

package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// DeleteRecordsResult is one partition's answer to POST
// /v1/topics/{topic}/records:delete.
type DeleteRecordsResult struct {
	Partition    int32  `json:"partition"`
	LowWatermark Int64  `json:"low_watermark"`
	ErrorCode    string `json:"error_code"`
	Message      string `json:"message"`
}

// TestDeleteRecords deletes records before an offset over REST, as Kafka's
// DeleteRecords: the answer's low watermark is every in-sync replica's
// new log start (the two followers took it from their fetches, or the call
// would time out), consumers read from there, and bad requests are refused
// with the records kept.
func TestDeleteRecords(t *testing.T) {
	d := devCluster(t)
	c := restClient(d)
	ctx := testCtx(t, 90*time.Second)
	topic := "e2e-delete-records"
	createTopic(ctx, t, c, topic, 2, 3, nil)
	produce := func(partition int32, n int) {
		t.Helper()
		recs := make([]ProduceRecord, n)
		for i := range recs {
			recs[i] = ProduceRecord{Value: ptr(fmt.Sprintf("p%d-%d", partition, i)), Partition: ptr(partition)}
		}
		var pr ProduceResponse
		if err := c.Call(ctx, "POST", "/v1/topics/"+topic+"/records", ProduceRequest{Records: recs}, &pr); err != nil {
			t.Fatal(err)
		}
		for _, r := range pr.Results {
			if r.ErrorCode != "" && r.ErrorCode != "NONE" {
				t.Fatalf("produce: %+v", r)
			}
		}
	}
	produce(0, 10)
	produce(1, 4)
	del := "/v1/topics/" + topic + "/records:delete"
	deleteRecords := func(body any) []DeleteRecordsResult {
		t.Helper()
		var out struct {
			Partitions []DeleteRecordsResult `json:"partitions"`
		}
		if err := mustDo(ctx, t, c, http.StatusOK, "POST", del, body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out.Partitions
	}

	got := deleteRecords(map[string]any{"partitions": []map[string]any{{"partition": 1, "offset": -1}, {"partition": 0, "offset": 6}}})
	if len(got) != 2 || got[0].Partition != 0 || got[0].LowWatermark != 6 || got[0].ErrorCode != "NONE" ||
		got[1].Partition != 1 || got[1].LowWatermark != 4 || got[1].ErrorCode != "NONE" {
		t.Fatalf("delete before 6 (partition 0) and the high watermark (partition 1): %+v", got)
	}

	// Consumers start at the new log start; below it is out of range.
	fetch := "/v1/topics/" + topic + "/partitions/0/records"
	var fr FetchResponse
	if err := c.Call(ctx, "GET", fetch+"?offset=6", nil, &fr); err != nil {
		t.Fatal(err)
	}
	if len(fr.Records) != 4 || fr.Records[0].Offset != 6 || fr.LogStartOffset != 6 || *fr.Records[0].Value != "p0-6" {
		t.Fatalf("fetch from 6: log start %d, records %+v", fr.LogStartOffset, fr.Records)
	}
	if resp := mustDo(ctx, t, c, http.StatusBadRequest, "GET", fetch+"?offset=5", nil); !strings.Contains(string(resp.Body), "OFFSET_OUT_OF_RANGE") {
		t.Fatalf("fetch below the log start: %s", resp)
	}
	var offs struct {
		Offsets []struct {
			Partition int32 `json:"partition"`
			Offset    Int64 `json:"offset"`
		} `json:"offsets"`
	}
	if err := c.Call(ctx, "GET", "/v1/topics/"+topic+"/offsets?spec=EARLIEST", nil, &offs); err != nil {
		t.Fatal(err)
	}
	if len(offs.Offsets) != 2 || offs.Offsets[0].Offset != 6 || offs.Offsets[1].Offset != 4 {
		t.Fatalf("earliest offsets after the deletion: %+v", offs.Offsets)
	}
	var td TopicDescription
	if err := c.Call(ctx, "GET", "/v1/topics/"+topic, nil, &td); err != nil {
		t.Fatal(err)
	}
	if td.Partitions[0].LogStartOffset != 6 {
		t.Fatalf("described log start %d, want 6", td.Partitions[0].LogStartOffset)
	}
	// The low watermark counts every ISR member: with all three in it,
	// both followers took the new start.
	if len(td.Partitions[0].ISR) != 3 {
		t.Fatalf("ISR %v: the low watermark did not cover the followers", td.Partitions[0].ISR)
	}

	// A leader's refusals are per partition; the other partition is done.
	got = deleteRecords(map[string]any{"partitions": []map[string]any{{"partition": 0, "offset": 11}, {"partition": 1, "offset": 2}}})
	if len(got) != 2 || got[0].ErrorCode != "OFFSET_OUT_OF_RANGE" || !strings.Contains(got[0].Message, "high watermark") ||
		got[1].ErrorCode != "NONE" || got[1].LowWatermark != 4 {
		t.Fatalf("above the high watermark, and below the log start: %+v", got)
	}
	compacted := topic + "-compacted"
	createTopic(ctx, t, c, compacted, 1, 3, map[string]string{"cleanup.policy": "compact"})
	var cr struct {
		Partitions []DeleteRecordsResult `json:"partitions"`
	}
	if err := mustDo(ctx, t, c, http.StatusOK, "POST", "/v1/topics/"+compacted+"/records:delete",
		map[string]any{"partitions": []map[string]any{{"partition": 0, "offset": -1}}}).Decode(&cr); err != nil {
		t.Fatal(err)
	}
	if len(cr.Partitions) != 1 || cr.Partitions[0].ErrorCode != "POLICY_VIOLATION" {
		t.Fatalf("a compacted topic: %+v", cr.Partitions)
	}

	for _, tc := range []struct {
		name, path string
		body       any
		want       string
	}{
		{"no partitions", del, map[string]any{"partitions": []any{}}, "400 INVALID_REQUEST"},
		{"a partition named twice", del, map[string]any{"partitions": []map[string]any{{"partition": 0, "offset": 7}, {"partition": 0, "offset": 8}}}, "400 INVALID_REQUEST"},
		{"an offset below -1", del, map[string]any{"partitions": []map[string]any{{"partition": 0, "offset": -2}}}, "400 INVALID_REQUEST"},
		{"a partition the topic lacks", del, map[string]any{"partitions": []map[string]any{{"partition": 2, "offset": 1}}}, "404 UNKNOWN_TOPIC_OR_PARTITION"},
		{"an unknown topic", "/v1/topics/e2e-no-such-topic/records:delete", map[string]any{"partitions": []map[string]any{{"partition": 0, "offset": 1}}}, "404 UNKNOWN_TOPIC_OR_PARTITION"},
		{"not JSON", del, "{", "400 INVALID_REQUEST"},
	} {
		err := c.Call(ctx, "POST", tc.path, tc.body, nil)
		var ae *APIError
		if !errors.As(err, &ae) || fmt.Sprintf("%d %s", ae.Status, ae.ErrorCode) != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
	}
	// Nothing refused moved a log start.
	if err := c.Call(ctx, "GET", "/v1/topics/"+topic+"/offsets?spec=EARLIEST", nil, &offs); err != nil {
		t.Fatal(err)
	}
	if offs.Offsets[0].Offset != 6 || offs.Offsets[1].Offset != 4 {
		t.Fatalf("earliest offsets after the refusals: %+v", offs.Offsets)
	}
}
