package gateway

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Every REST answer counts by its status, those refused before a gRPC
// method (a body that is not JSON, an unknown field, a body over the limit)
// among them; other paths do not count.
func TestRESTAnswersCountByStatus(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := startWith(t, func(c *Config) { c.Registry, c.MaxRequestBytes = reg, 64<<10 })
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "t", "replication_factor": 1}`)
	if code, _ := e.do("POST", "/v1/topics/t/records", `{bad json`); code != http.StatusBadRequest {
		t.Fatalf("a body that is not JSON: %d", code)
	}
	if code, _ := e.do("POST", "/v1/topics/t/records", `{"recordz": []}`); code != http.StatusBadRequest {
		t.Fatalf("an unknown field: %d", code)
	}
	body := produceBody(128 << 10)
	if code, _, _ := e.post("/v1/topics/t/records", bytes.NewReader(body), int64(len(body))); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over the limit: %d", code)
	}
	resp, err := http.Get(e.base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "skein_gateway_rest_responses_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	// The topic's creation (200), the two bad bodies (400), the one too large (413).
	if got["200"] != 1 || got["400"] != 2 || got["413"] != 1 || len(got) != 3 {
		t.Fatalf("REST answers by status: %v, want 200: 1, 400: 2, 413: 1", got)
	}
}
