//go:build integration

package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCompactedTopicRefusesKeylessRecordsAlone: the gateway batches the
// records of many callers together, and a compacted topic's leader refuses
// a batch holding a record without a key whole. A keyless record is
// refused on its own, before it joins a batch, so callers writing keyed
// records beside it all succeed, and its request is refused naming it.
func TestCompactedTopicRefusesKeylessRecordsAlone(t *testing.T) {
	d := devCluster(t)
	c := restClient(d)
	ctx := testCtx(t, 90*time.Second)
	topic := "e2e-compacted-keys"
	createTopic(ctx, t, c, topic, 1, 3, map[string]string{"cleanup.policy": "compact"})
	path := "/v1/topics/" + topic + "/records"

	const n = 30
	var wg sync.WaitGroup
	keyed := make([]error, n)
	keyless := make([]error, n)
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			var pr ProduceResponse
			keyed[i] = c.Call(ctx, "POST", path, ProduceRequest{Records: []ProduceRecord{{Key: ptr(fmt.Sprintf("k%d", i)), Value: ptr("good")}}}, &pr)
			if keyed[i] == nil && (len(pr.Results) != 1 || pr.Results[0].ErrorCode != "NONE") {
				keyed[i] = fmt.Errorf("results %+v", pr.Results)
			}
		}()
		go func() {
			defer wg.Done()
			keyless[i] = c.Call(ctx, "POST", path, ProduceRequest{Records: []ProduceRecord{{Value: ptr("bad")}}}, nil)
		}()
	}
	wg.Wait()
	for i := range n {
		if keyed[i] != nil {
			t.Errorf("keyed record %d beside keyless ones: %v", i, keyed[i])
		}
		var ae *APIError
		if !errors.As(keyless[i], &ae) || ae.Status != http.StatusBadRequest || ae.ErrorCode != "INVALID_RECORD" || !strings.Contains(ae.Message, "record 0 has no key") {
			t.Errorf("keyless record %d: %v, want 400 INVALID_RECORD naming record 0", i, keyless[i])
		}
	}

	// Within one request: refused whole, naming the keyless record, and
	// nothing of it written.
	err := c.Call(ctx, "POST", path, ProduceRequest{Records: []ProduceRecord{{Key: ptr("x"), Value: ptr("v")}, {Value: ptr("no key")}}}, nil)
	var ae *APIError
	if !errors.As(err, &ae) || ae.ErrorCode != "INVALID_RECORD" || !strings.Contains(ae.Message, "record 1 has no key") {
		t.Errorf("a request with a keyless record: %v, want INVALID_RECORD naming record 1", err)
	}
	var fr FetchResponse
	if err := c.Call(ctx, "GET", "/v1/topics/"+topic+"/partitions/0/records?offset=0&max_records=1000", nil, &fr); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, r := range fr.Records {
		if r.Key == nil {
			t.Errorf("offset %d has no key", r.Offset)
			continue
		}
		keys[*r.Key] = true
	}
	if len(fr.Records) != n || keys["x"] {
		t.Errorf("the topic holds %d records (x among them: %v), want the %d keyed ones alone", len(fr.Records), keys["x"], n)
	}
}
