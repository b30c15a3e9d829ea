package gateway

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	txnv1 "skein/gen/skein/txn/v1"
)

// The transaction admin routes: a listing of every coordinator's ids,
// filtered by state (either spelling) and producer id, and one id's
// description; an unknown id is TRANSACTIONAL_ID_NOT_FOUND, an unknown
// state INVALID_REQUEST.
func TestTransactionAdmin(t *testing.T) {
	e := start(t)
	tc, _ := e.cluster.StartTxnCoordinator(t, 1)
	e.waitReady()
	open := e.mustDo("POST", "/v1/producers", `{"transactional_id": "app-tx"}`)
	e.mustDo("POST", "/v1/producers", `{"transactional_id": "idle"}`)
	var id int64
	if _, err := fmt.Sscan(fmt.Sprint(open["producer_id"]), &id); err != nil {
		t.Fatalf("init: %v", open)
	}
	if _, err := tc.AddPartitionsToTxn(context.Background(), &txnv1.AddPartitionsToTxnRequest{TransactionalId: "app-tx", ProducerId: id,
		Partitions: []*txnv1.TopicPartitions{{Topic: "orders", Partitions: []int32{1, 0}}}}); err != nil {
		t.Fatal(err)
	}

	list := func(query string) string {
		out := e.mustDo("GET", "/v1/transactions"+query, "")
		var got []string
		for _, x := range out["transactions"].([]any) {
			m := x.(map[string]any)
			got = append(got, fmt.Sprintf("%s:%s", m["transactional_id"], m["state"]))
		}
		return fmt.Sprint(got)
	}
	for query, want := range map[string]string{
		"":                               "[app-tx:ONGOING idle:EMPTY]",
		"?state=ONGOING":                 "[app-tx:ONGOING]",
		"?state=Empty":                   "[idle:EMPTY]",
		"?state=Empty&state=ongoing":     "[app-tx:ONGOING idle:EMPTY]",
		"?state=CompleteCommit":          "[]",
		"?producer_id=" + fmt.Sprint(id): "[app-tx:ONGOING]",
	} {
		if got := list(query); got != want {
			t.Errorf("list%s: %s, want %s", query, got, want)
		}
	}
	if code, out := e.do("GET", "/v1/transactions?state=RUNNING", ""); code != http.StatusBadRequest || out["error_code"] != "INVALID_REQUEST" {
		t.Errorf("an unknown state: %d %v", code, out)
	}

	d := e.mustDo("GET", "/v1/transactions/app-tx", "")
	if d["state"] != "ONGOING" || fmt.Sprint(d["producer_id"]) != fmt.Sprint(id) || fmt.Sprint(d["partitions"]) != "[map[partitions:[0 1] topic:orders]]" ||
		d["transaction_start_time_ms"] == "-1" {
		t.Errorf("describe: %v", d)
	}
	if d := e.mustDo("GET", "/v1/transactions/idle", ""); d["state"] != "EMPTY" || fmt.Sprint(d["transaction_start_time_ms"]) != "-1" ||
		fmt.Sprint(d["partitions"]) != "[]" {
		t.Errorf("describe of an idle id: %v", d)
	}
	if code, out := e.do("GET", "/v1/transactions/nobody", ""); code != http.StatusNotFound || out["error_code"] != "TRANSACTIONAL_ID_NOT_FOUND" {
		t.Errorf("an unknown id: %d %v", code, out)
	}
}
