package gateway

import (
	"testing"
)

// A record sent with timestamp_ms 0 keeps it: 0 is the epoch, a time like
// any other (as in Kafka); only a record without one takes the gateway's
// clock. Through the producer, and on the route of a producer id.
func TestTimestampZeroIsKept(t *testing.T) {
	e := start(t)
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "t", "replication_factor": 1}`)
	for i, body := range []string{
		`{"records": [{"value": "epoch", "partition": 0, "timestamp_ms": 0}]}`,
		`{"producer_id": 5, "producer_epoch": 0, "base_sequence": 0, "records": [{"value": "epoch", "timestamp_ms": 0}]}`,
	} {
		path := "/v1/topics/t/records"
		if i == 1 {
			path = "/v1/topics/t/partitions/0/records"
		}
		res := e.mustDo("POST", path, body)["results"].([]any)[0].(map[string]any)
		if res["timestamp_ms"] != "0" {
			t.Errorf("%s: answered timestamp %v, want 0", body, res["timestamp_ms"])
		}
	}
	recs := e.mustDo("GET", "/v1/topics/t/partitions/0/records?offset=0", "")["records"].([]any)
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	for i, r := range recs {
		if ts := r.(map[string]any)["timestamp_ms"]; ts != "0" {
			t.Errorf("record %d stored with timestamp %v, want 0", i, ts)
		}
	}
	// Without one, the gateway's clock.
	res := e.mustDo("POST", "/v1/topics/t/records", `{"records": [{"value": "now", "partition": 0}]}`)["results"].([]any)[0].(map[string]any)
	if res["timestamp_ms"] == "0" {
		t.Error("a record without a timestamp was stamped 0")
	}
}
