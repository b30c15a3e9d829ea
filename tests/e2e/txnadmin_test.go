//go:build integration

package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

type transactionSummary struct {
	TransactionalID string `json:"transactional_id"`
	ProducerID      Int64  `json:"producer_id"`
	State           string `json:"state"`
}

type transactionDescription struct {
	TransactionalID        string `json:"transactional_id"`
	State                  string `json:"state"`
	ProducerID             Int64  `json:"producer_id"`
	ProducerEpoch          int32  `json:"producer_epoch"`
	TransactionTimeoutMs   int32  `json:"transaction_timeout_ms"`
	TransactionStartTimeMs Int64  `json:"transaction_start_time_ms"`
	Partitions             []struct {
		Topic      string  `json:"topic"`
		Partitions []int32 `json:"partitions"`
	} `json:"partitions"`
	Groups []string `json:"groups"`
}

// The transaction admin routes against real coordinators, as an operator
// finds what holds a partition's last stable offset back: an open
// transaction is listed ONGOING (filtered by state and producer id) and
// described with its partition and start time; after its commit it is
// described again, complete; an unknown id is TRANSACTIONAL_ID_NOT_FOUND.
func TestTransactionAdminOverREST(t *testing.T) {
	d := devCluster(t)
	c := restClient(d)
	ctx := testCtx(t, 2*time.Minute)
	const topic, txid = "e2e-txn-admin", "e2e-admin-tx"
	createTopic(ctx, t, c, topic, 2, 3, map[string]string{"min.insync.replicas": "2"})

	var id producerIdentity
	if err := c.Call(ctx, "POST", "/v1/producers", map[string]any{"transactional_id": txid, "transaction_timeout_ms": 60000}, &id); err != nil {
		t.Fatal(err)
	}
	before := time.Now().UnixMilli()
	var pr ProduceResponse
	// A plain record first: the transaction starts at offset 1.
	if err := c.Call(ctx, "POST", fmt.Sprintf("/v1/topics/%s/partitions/1/records", topic), map[string]any{
		"records": []map[string]any{{"value": "plain"}}}, &pr); err != nil || !written(pr) {
		t.Fatalf("plain produce: %v %+v", err, pr)
	}
	if err := c.Call(ctx, "POST", fmt.Sprintf("/v1/topics/%s/partitions/1/records", topic), map[string]any{
		"transactional_id": txid, "producer_id": id.ProducerID, "producer_epoch": id.ProducerEpoch, "base_sequence": 0,
		"records": []map[string]any{{"value": "held"}}}, &pr); err != nil || !written(pr) {
		t.Fatalf("transactional produce: %v %+v", err, pr)
	}

	list := func(query string) []string {
		t.Helper()
		var out struct {
			Transactions []transactionSummary `json:"transactions"`
		}
		if err := c.Call(ctx, "GET", "/v1/transactions"+query, nil, &out); err != nil {
			t.Fatalf("list%s: %v", query, err)
		}
		var ids []string
		for _, x := range out.Transactions {
			ids = append(ids, fmt.Sprintf("%s:%d:%s", x.TransactionalID, x.ProducerID, x.State))
		}
		return ids
	}
	want := fmt.Sprintf("%s:%d:ONGOING", txid, id.ProducerID)
	for _, q := range []string{"", "?state=ONGOING", "?state=Ongoing", fmt.Sprintf("?producer_id=%d", id.ProducerID)} {
		if got := list(q); !slices.Contains(got, want) {
			t.Errorf("list%s: %v, want %s among them", q, got, want)
		}
	}
	if got := list("?state=COMPLETE_COMMIT"); slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, txid+":") }) {
		t.Errorf("listed as complete while open: %v", got)
	}

	var desc transactionDescription
	if err := c.Call(ctx, "GET", "/v1/transactions/"+txid, nil, &desc); err != nil {
		t.Fatal(err)
	}
	if desc.State != "ONGOING" || desc.ProducerID != id.ProducerID || desc.ProducerEpoch != id.ProducerEpoch || desc.TransactionTimeoutMs != 60000 ||
		len(desc.Partitions) != 1 || desc.Partitions[0].Topic != topic || !slices.Equal(desc.Partitions[0].Partitions, []int32{1}) ||
		int64(desc.TransactionStartTimeMs) < before-1000 || int64(desc.TransactionStartTimeMs) > time.Now().UnixMilli()+1000 {
		t.Errorf("describe while open: %+v", desc)
	}
	// The partition's producers: the open transaction's start offset is
	// the partition's last stable offset.
	var producers struct {
		Producers []struct {
			ProducerID       Int64 `json:"producer_id"`
			ProducerEpoch    int32 `json:"producer_epoch"`
			LastSequence     int32 `json:"last_sequence"`
			TxnStartOffset   Int64 `json:"current_transaction_start_offset"`
			LastTimestampMs  Int64 `json:"last_timestamp_ms"`
			CoordinatorEpoch int32 `json:"coordinator_epoch"`
		} `json:"producers"`
	}
	if err := c.Call(ctx, "GET", fmt.Sprintf("/v1/topics/%s/partitions/1/producers", topic), nil, &producers); err != nil {
		t.Fatal(err)
	}
	_, lso := committedValues(ctx, t, c, topic, 1, true)
	found := false
	for _, p := range producers.Producers {
		if p.ProducerID == id.ProducerID {
			found = true
			if int64(p.TxnStartOffset) != 1 || int64(p.TxnStartOffset) != lso || p.ProducerEpoch != id.ProducerEpoch || p.LastSequence != 0 ||
				int64(p.LastTimestampMs) < before-1000 {
				t.Errorf("the open transaction's producer: %+v, LSO %d", p, lso)
			}
		}
	}
	if !found {
		t.Errorf("producers of %s-1: %+v, want producer %d", topic, producers, id.ProducerID)
	}
	if err := c.Call(ctx, "GET", fmt.Sprintf("/v1/topics/%s/partitions/7/producers", topic), nil, nil); err == nil {
		t.Errorf("producers of a partition the topic does not have: no error")
	} else if e, ok := err.(*APIError); !ok || e.ErrorCode != "UNKNOWN_TOPIC_OR_PARTITION" {
		t.Errorf("producers of a partition the topic does not have: %v", err)
	}

	// The command line shows the same.
	bin, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "skein"), "txn", "describe-producers", "--topic", topic, "--partition", "1",
		"--gateway", d.GRPCAddr).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprint(int64(id.ProducerID))) {
		t.Errorf("skein txn describe-producers: %v\n%s", err, out)
	}
	out, err = exec.CommandContext(ctx, filepath.Join(bin, "skein"), "txn", "describe", txid, "--gateway", d.GRPCAddr).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ONGOING") || !strings.Contains(string(out), topic+"-1") {
		t.Errorf("skein txn describe: %v\n%s", err, out)
	}
	out, err = exec.CommandContext(ctx, filepath.Join(bin, "skein"), "txn", "list", "--state", "Ongoing", "--gateway", d.GRPCAddr).CombinedOutput()
	if err != nil || !strings.Contains(string(out), txid) {
		t.Errorf("skein txn list: %v\n%s", err, out)
	}

	var next producerIdentity
	if err := c.Call(ctx, "POST", "/v1/transactions/"+txid+":commit", id, &next); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		desc = transactionDescription{}
		if err := c.Call(ctx, "GET", "/v1/transactions/"+txid, nil, &desc); err != nil {
			t.Fatal(err)
		}
		if desc.State == "COMPLETE_COMMIT" || desc.State == "EMPTY" {
			break
		}
		if desc.State != "PREPARE_COMMIT" || time.Now().After(deadline) {
			t.Fatalf("describe after the commit: %+v", desc)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(desc.Partitions) != 0 || desc.ProducerID != next.ProducerID || desc.ProducerEpoch != next.ProducerEpoch {
		t.Errorf("describe after the commit: %+v, next identity %+v", desc, next)
	}
	if got := list("?state=ONGOING"); slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, txid+":") }) {
		t.Errorf("listed as ongoing after the commit: %v", got)
	}
	// Once the marker is written the producer holds nothing back.
	deadline = time.Now().Add(10 * time.Second)
	for {
		if err := c.Call(ctx, "GET", fmt.Sprintf("/v1/topics/%s/partitions/1/producers", topic), nil, &producers); err != nil {
			t.Fatal(err)
		}
		open := false
		for _, p := range producers.Producers {
			open = open || (p.ProducerID == id.ProducerID && p.TxnStartOffset >= 0)
		}
		if !open {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("producers after the commit: %+v", producers)
		}
		time.Sleep(50 * time.Millisecond)
	}

	err = c.Call(ctx, "GET", "/v1/transactions/e2e-nobody", nil, nil)
	if e, ok := err.(*APIError); !ok || e.Status != 404 || e.ErrorCode != "TRANSACTIONAL_ID_NOT_FOUND" {
		t.Errorf("describe of an unknown id: %v", err)
	}
	err = c.Call(ctx, "GET", "/v1/transactions?state=RUNNING", nil, nil)
	if e, ok := err.(*APIError); !ok || e.Status != 400 || e.ErrorCode != "INVALID_REQUEST" {
		t.Errorf("list of an unknown state: %v", err)
	}
}
