package gateway

import (
	"testing"
	"time"
)

// A partition whose last in-sync replica came back without its logs is
// described offline with an empty ISR and the replica it waits for, the
// broker and the id of the directory it lost; others have none.
func TestDescribeShowsTheLostReplica(t *testing.T) {
	e := start(t)
	e.waitReady()
	e.mustDo("POST", "/v1/topics", `{"name": "lost", "partitions": 2}`)
	e.cluster.Controller.LoseLastReplica("lost", 0, 2, "0f1e2d3c")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if p, _ := e.gw.Client().Metadata().Partition("lost", 0); p.GetLostIsrReplica() != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the gateway's metadata never showed partition 0 offline")
		}
	}

	d := e.mustDo("GET", "/v1/topics/lost", "")
	parts := d["partitions"].([]any)
	p0, p1 := parts[0].(map[string]any), parts[1].(map[string]any)
	lost, _ := p0["lost_replica"].(map[string]any)
	if lost["broker"] != float64(2) || lost["log_dir_id"] != "0f1e2d3c" {
		t.Errorf("partition 0 lost_replica %v, want broker 2 and its directory", p0["lost_replica"])
	}
	if p0["leader"] != float64(-1) || len(p0["isr"].([]any)) != 0 {
		t.Errorf("partition 0 leader %v isr %v, want -1 and none", p0["leader"], p0["isr"])
	}
	if p1["lost_replica"] != nil {
		t.Errorf("partition 1 lost_replica %v, want none", p1["lost_replica"])
	}
}
