//go:build integration

package e2e

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A topic's compression.type names the codec its batches are stored with:
// records produced over REST to a topic of each codec read back intact,
// text and binary alike.
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
		var pr ProduceResponse
		if err := c.Call(ctx, "POST", "/v1/topics/"+topic+"/partitions/0/records", map[string]any{"records": records}, &pr); err != nil {
			t.Fatalf("%s: produce: %v", topic, err)
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
