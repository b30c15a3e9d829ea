package server

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	controllerv1 "skein/gen/skein/controller/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/metadata"
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

// A deleted topic's series go with the image that no longer has it; the
// others stay.
func TestDeletedTopicsSeriesGo(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	both := metadata.New("c")
	if err := both.Apply(&controllerv1.MetadataDelta{Version: 1, Records: []*controllerv1.MetadataRecord{
		metadata.TopicRecord(&controllerv1.TopicRecord{TopicId: "a", Name: "kept"}),
		metadata.TopicRecord(&controllerv1.TopicRecord{TopicId: "b", Name: "gone"}),
	}}); err != nil {
		t.Fatal(err)
	}
	one := metadata.New("c")
	if err := one.Apply(&controllerv1.MetadataDelta{Version: 1, Records: []*controllerv1.MetadataRecord{
		metadata.TopicRecord(&controllerv1.TopicRecord{TopicId: "a", Name: "kept"}),
	}}); err != nil {
		t.Fatal(err)
	}
	m.ForgetDeletedTopics(both)
	for _, topic := range []string{"kept", "gone"} {
		m.produced(topic, skeinv1.ErrorCode_NONE, 10, 0)
		m.appended(topic, partition.ProduceResult{StoredBytes: 10, UncompressedBytes: 10, Recompressed: 1})
	}
	m.ForgetDeletedTopics(one)
	for name, want := range map[string]int{"skein_storage_produce_partition_requests_total": 1, "skein_storage_produce_record_bytes_total": 2,
		"skein_storage_produce_recompressed_batches_total": 1} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != want {
			t.Errorf("%s: %d series (%v), want %d: the kept topic's alone", name, n, err, want)
		}
	}
	if got := testutil.ToFloat64(m.produceRequests.WithLabelValues("kept", "NONE")); got != 1 {
		t.Errorf("the kept topic's requests: %v", got)
	}
}
