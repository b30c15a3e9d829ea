package gateway

import (
	"reflect"
	"testing"
)

// The topic description carries each replica's log end offset as the
// partition's leader reports it, under the names the console reads.
func TestDescribeListsReplicaOffsets(t *testing.T) {
	e := start(t)
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "leo", "partitions": 2}`)
	e.mustDo("POST", "/v1/topics/leo/records", `{"records": [{"value": "x", "partition": 1}, {"value": "y", "partition": 1}]}`)
	leader, _, ok := e.cluster.Controller.Leader("leo", 1)
	if !ok {
		t.Fatal("partition 1 has no leader")
	}
	follower := 3 - leader // brokers 1 and 2
	e.cluster.Storage[leader].SetFollowerLEO("leo", 1, follower, 1)

	d := e.mustDo("GET", "/v1/topics/leo", "")
	parts := d["partitions"].([]any)
	p1 := parts[1].(map[string]any)
	want := map[float64]string{float64(leader): "2", float64(follower): "1"}
	got := map[float64]string{}
	for _, r := range p1["replica_offsets"].([]any) {
		r := r.(map[string]any)
		got[r["replica"].(float64)] = r["log_end_offset"].(string)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("partition 1 replica_offsets %v, want %v (partition %v)", got, want, p1)
	}
	// Partition 0's leader has no figure for its follower: only its own LEO.
	p0 := parts[0].(map[string]any)
	leader0, _, _ := e.cluster.Controller.Leader("leo", 0)
	if ro, _ := p0["replica_offsets"].([]any); len(ro) != 1 || ro[0].(map[string]any)["replica"] != float64(leader0) || ro[0].(map[string]any)["log_end_offset"] != "0" {
		t.Errorf("partition 0 replica_offsets %v", p0["replica_offsets"])
	}
}
