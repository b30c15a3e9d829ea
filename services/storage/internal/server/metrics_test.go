package server

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"skein/services/storage/internal/partition"
)

// What a leader appended is counted per topic, stored and uncompressed, so
// that their ratio is the topic's compression ratio; a duplicate (nothing
// appended) counts nothing.
func TestAppendedBytesByStage(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.appended("t", partition.ProduceResult{StoredBytes: 100, UncompressedBytes: 400, Recompressed: 1})
	m.appended("t", partition.ProduceResult{StoredBytes: 50, UncompressedBytes: 200})
	m.appended("t", partition.ProduceResult{}) // a duplicate
	for stage, want := range map[string]float64{"stored": 150, "uncompressed": 600} {
		if got := testutil.ToFloat64(m.recordBytes.WithLabelValues("t", stage)); got != want {
			t.Errorf("stage %s: %v, want %v", stage, got, want)
		}
	}
	if got := testutil.ToFloat64(m.recompressed.WithLabelValues("t")); got != 1 {
		t.Errorf("recompressed %v, want 1", got)
	}
	if n, err := testutil.GatherAndCount(reg, "skein_storage_produce_record_bytes_total"); err != nil || n != 2 {
		t.Errorf("%d series, %v", n, err)
	}
}
