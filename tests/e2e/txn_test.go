//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	skeinv1 "skein/gen/skein/v1"
)

// written reports whether every record of a produce was written.
func written(pr ProduceResponse) bool {
	for _, r := range pr.Results {
		if r.ErrorCode != "" && r.ErrorCode != "NONE" {
			return false
		}
	}
	return len(pr.Results) > 0
}

type producerIdentity struct {
	ProducerID    Int64 `json:"producer_id"`
	ProducerEpoch int32 `json:"producer_epoch"`
}

// committedValues reads a partition from 0 as read_committed (or not) sees
// it and answers the values and the offset the read ends at.
func committedValues(ctx context.Context, t *testing.T, c *REST, topic string, partition int32, committed bool) ([]string, int64) {
	t.Helper()
	iso := "READ_UNCOMMITTED"
	if committed {
		iso = "READ_COMMITTED"
	}
	var fr FetchResponse
	path := fmt.Sprintf("/v1/topics/%s/partitions/%d/records?offset=0&max_records=1000&isolation_level=%s", topic, partition, iso)
	if err := c.Call(ctx, "GET", path, nil, &fr); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	var out []string
	for _, r := range fr.Records {
		if r.Value != nil {
			out = append(out, *r.Value)
		}
	}
	if committed {
		return out, int64(fr.LastStableOffset)
	}
	return out, int64(fr.HighWatermark)
}

// A transactional producer over REST, as a curl user would drive it: a
// producer id and epoch from POST /v1/producers, produces carrying the
// transactional id, :commit and :abort; read_committed readers see the
// committed records only, at the commit.
func TestTransactionsOverREST(t *testing.T) {
	d := devCluster(t)
	c := restClient(d)
	ctx := testCtx(t, 2*time.Minute)
	const topic, txid = "e2e-txn", "e2e-billing"
	createTopic(ctx, t, c, topic, 2, 3, map[string]string{"min.insync.replicas": "2"})

	var id producerIdentity
	if err := c.Call(ctx, "POST", "/v1/producers", map[string]any{"transactional_id": txid, "transaction_timeout_ms": 60000}, &id); err != nil {
		t.Fatal(err)
	}
	produce := func(id producerIdentity, partition int32, seq int, values ...string) (ProduceResponse, error) {
		var recs []map[string]any
		for _, v := range values {
			recs = append(recs, map[string]any{"value": v})
		}
		var pr ProduceResponse
		err := c.Call(ctx, "POST", fmt.Sprintf("/v1/topics/%s/partitions/%d/records", topic, partition), map[string]any{
			"transactional_id": txid, "producer_id": id.ProducerID, "producer_epoch": id.ProducerEpoch, "base_sequence": seq, "records": recs}, &pr)
		return pr, err
	}
	if pr, err := produce(id, 0, 0, "a", "b"); err != nil || !written(pr) {
		t.Fatalf("transactional produce: %v %+v", err, pr)
	}
	if pr, err := produce(id, 1, 0, "c"); err != nil || !written(pr) {
		t.Fatalf("transactional produce: %v %+v", err, pr)
	}
	// A plain (not transactional) batch under the producer id of the open
	// transaction is refused, at its epoch or a higher one: it would join
	// no transaction, and at a higher epoch fence the commit's marker and
	// leave the transaction open for every read_committed reader.
	for _, epoch := range []int32{id.ProducerEpoch, id.ProducerEpoch + 7} {
		seq := map[bool]int{true: 2, false: 0}[epoch == id.ProducerEpoch]
		var pr ProduceResponse
		err := c.Call(ctx, "POST", fmt.Sprintf("/v1/topics/%s/partitions/0/records", topic), map[string]any{
			"producer_id": id.ProducerID, "producer_epoch": epoch, "base_sequence": seq, "records": []map[string]any{{"value": "plain"}}}, &pr)
		code := ""
		if e, ok := err.(*APIError); ok {
			code = e.ErrorCode
		} else if err == nil && len(pr.Results) == 1 {
			code = pr.Results[0].ErrorCode
		}
		if code != "INVALID_TXN_STATE" {
			t.Errorf("a plain batch of the open transaction's producer at epoch %d: %+v %v, want INVALID_TXN_STATE", epoch, pr, err)
		}
	}
	if got, lso := committedValues(ctx, t, c, topic, 0, true); len(got) != 0 || lso != 0 {
		t.Fatalf("read_committed before the commit: %v, LSO %d", got, lso)
	}
	var next producerIdentity
	if err := c.Call(ctx, "POST", "/v1/transactions/"+txid+":commit", id, &next); err != nil {
		t.Fatal(err)
	}
	if next.ProducerEpoch <= id.ProducerEpoch && next.ProducerID == id.ProducerID {
		t.Fatalf("epoch after the commit %d, before %d", next.ProducerEpoch, id.ProducerEpoch)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, _ := committedValues(ctx, t, c, topic, 0, true)
		b, _ := committedValues(ctx, t, c, topic, 1, true)
		if slices.Equal(a, []string{"a", "b"}) && slices.Equal(b, []string{"c"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("read_committed after the commit: %v and %v", a, b)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A late produce of the committed transaction's epoch is refused.
	if _, err := produce(id, 0, 2, "late"); err == nil {
		t.Errorf("a produce of the ended transaction's epoch was accepted")
	} else if e, ok := err.(*APIError); !ok || (e.ErrorCode != "PRODUCER_FENCED" && e.ErrorCode != "INVALID_PRODUCER_EPOCH") {
		t.Errorf("a produce of the ended transaction's epoch: %v, want PRODUCER_FENCED", err)
	}

	// The next transaction, aborted: never visible to read_committed.
	if pr, err := produce(next, 1, 0, "x"); err != nil || !written(pr) {
		t.Fatalf("transactional produce: %v %+v", err, pr)
	}
	var afterAbort producerIdentity
	if err := c.Call(ctx, "POST", "/v1/transactions/"+txid+":abort", next, &afterAbort); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		got, lso := committedValues(ctx, t, c, topic, 1, true)
		all, hw := committedValues(ctx, t, c, topic, 1, false)
		if slices.Equal(got, []string{"c"}) && lso == hw && slices.Contains(all, "x") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the abort: read_committed %v (LSO %d), read_uncommitted %v (HW %d)", got, lso, all, hw)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The abort retried (its answer lost) answers the same next identity.
	var again producerIdentity
	if err := c.Call(ctx, "POST", "/v1/transactions/"+txid+":abort", next, &again); err != nil || again != afterAbort {
		t.Errorf("the abort retried: %+v %v, want %+v", again, err, afterAbort)
	}
	// A commit with nothing in the transaction is refused.
	if err := c.Call(ctx, "POST", "/v1/transactions/"+txid+":commit", afterAbort, nil); err == nil {
		t.Errorf("a commit of an empty transaction was accepted")
	} else if e, ok := err.(*APIError); !ok || e.ErrorCode != "INVALID_TXN_STATE" {
		t.Errorf("a commit of an empty transaction: %v, want INVALID_TXN_STATE", err)
	}

	// A group's lag counts up to the high watermark, as Kafka's
	// kafka-consumer-groups counts it: an open transaction's records
	// count, though a read_committed member cannot read them yet.
	if err := c.Call(ctx, "POST", "/v1/groups/e2e-lag/offsets", map[string]any{"member_epoch": -1,
		"offsets": []map[string]any{{"topic": topic, "partition": 0, "offset": 0}}}, nil); err != nil {
		t.Fatal(err)
	}
	_, stable := committedValues(ctx, t, c, topic, 0, true)
	if pr, err := produce(afterAbort, 0, 0, "open-1", "open-2"); err != nil || !written(pr) {
		t.Fatalf("transactional produce: %v %+v", err, pr)
	}
	var lag struct {
		Offsets []struct {
			HighWatermark Int64 `json:"high_watermark"`
			Lag           Int64 `json:"lag"`
		} `json:"offsets"`
	}
	if err := c.Call(ctx, "GET", "/v1/groups/e2e-lag/offsets", nil, &lag); err != nil || len(lag.Offsets) != 1 {
		t.Fatalf("group offsets: %+v %v", lag, err)
	}
	if int64(lag.Offsets[0].Lag) != stable+2 || int64(lag.Offsets[0].HighWatermark) != stable+2 {
		t.Errorf("with a transaction open: lag %d, high watermark %d; want both %d (the high watermark, not the LSO %d)",
			lag.Offsets[0].Lag, lag.Offsets[0].HighWatermark, stable+2, stable)
	}
	if err := c.Call(ctx, "POST", "/v1/transactions/"+txid+":abort", afterAbort, nil); err != nil {
		t.Fatal(err)
	}

	// A group member on the gateway's Consume stream (skein consume
	// --group) reads the committed records only under --read-committed,
	// and every one of them without it.
	bin, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	member := func(group string, args ...string) []string {
		t.Helper()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "skein"), append([]string{"consume", "--group", group, "--idle", "3s"}, append(args, topic)...)...)
		cmd.Env = append(os.Environ(), "SKEIN_GATEWAY="+d.GRPCAddr)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("skein consume --group %s %v: %v", group, args, err)
		}
		got := strings.Fields(string(out))
		slices.Sort(got)
		return got
	}
	if got := member("e2e-rc", "--read-committed"); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("a read_committed member read %v, want the committed a b c", got)
	}
	if got := member("e2e-ru"); !slices.Equal(got, []string{"a", "b", "c", "open-1", "open-2", "x"}) {
		t.Errorf("a read_uncommitted member read %v, want every record", got)
	}

	// The same over gRPC: InitProducer for an idempotent producer.
	tc := skeinv1.NewTransactionServiceClient(grpcConn(t, d))
	r1, err := tc.InitProducer(ctx, &skeinv1.InitProducerRequest{})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := tc.InitProducer(ctx, &skeinv1.InitProducerRequest{})
	if err != nil || r2.GetProducerId() == r1.GetProducerId() || r1.GetProducerEpoch() != 0 {
		t.Fatalf("two idempotent producers: %v and %v (%v)", r1, r2, err)
	}
}

// groupOffset answers a group's committed offset of a partition (-1: none).
func groupOffset(ctx context.Context, t *testing.T, c *REST, group, topic string, partition int32) int64 {
	t.Helper()
	var out struct {
		Offsets []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Offset    Int64  `json:"offset"`
		} `json:"offsets"`
	}
	resp, err := c.Do(ctx, "GET", "/v1/groups/"+group+"/offsets", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status == 404 {
		return -1
	}
	if err := resp.Decode(&out); err != nil {
		t.Fatal(err)
	}
	for _, o := range out.Offsets {
		if o.Topic == topic && o.Partition == partition {
			return int64(o.Offset)
		}
	}
	return -1
}

// Consume-process-produce: a group's consumed offsets sent inside a
// transaction become its committed offsets when the transaction commits,
// and are dropped when it aborts.
func TestTransactionalOffsetsOverREST(t *testing.T) {
	d := devCluster(t)
	c := restClient(d)
	ctx := testCtx(t, 2*time.Minute)
	const in, out, txid, group = "e2e-txn-in", "e2e-txn-out", "e2e-copier", "e2e-copiers"
	createTopic(ctx, t, c, in, 1, 3, map[string]string{"min.insync.replicas": "2"})
	createTopic(ctx, t, c, out, 1, 3, map[string]string{"min.insync.replicas": "2"})
	if err := c.Call(ctx, "POST", "/v1/topics/"+in+"/records", map[string]any{"records": []map[string]any{{"value": "1"}, {"value": "2"}, {"value": "3"}}}, nil); err != nil {
		t.Fatal(err)
	}
	var id producerIdentity
	if err := c.Call(ctx, "POST", "/v1/producers", map[string]any{"transactional_id": txid}, &id); err != nil {
		t.Fatal(err)
	}
	send := func(id producerIdentity, seq int, offset int64, values ...string) {
		t.Helper()
		var recs []map[string]any
		for _, v := range values {
			recs = append(recs, map[string]any{"value": v})
		}
		var pr ProduceResponse
		if err := c.Call(ctx, "POST", "/v1/topics/"+out+"/partitions/0/records", map[string]any{
			"transactional_id": txid, "producer_id": id.ProducerID, "producer_epoch": id.ProducerEpoch, "base_sequence": seq, "records": recs}, &pr); err != nil || !written(pr) {
			t.Fatalf("produce: %v %+v", err, pr)
		}
		if err := c.Call(ctx, "POST", "/v1/transactions/"+txid+"/offsets", map[string]any{
			"producer_id": id.ProducerID, "producer_epoch": id.ProducerEpoch, "group": group,
			"offsets": []map[string]any{{"topic": in, "partition": 0, "offset": offset}}}, nil); err != nil {
			t.Fatalf("send offsets: %v", err)
		}
	}
	// Copy the first two records; the offsets are pending until the commit.
	send(id, 0, 2, "copy-1", "copy-2")
	if off := groupOffset(ctx, t, c, group, in, 0); off != -1 {
		t.Fatalf("committed offset %d before the commit, want none", off)
	}
	var next producerIdentity
	if err := c.Call(ctx, "POST", "/v1/transactions/"+txid+":commit", id, &next); err != nil {
		t.Fatal(err)
	}
	waitOffset := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			off := groupOffset(ctx, t, c, group, in, 0)
			if off == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("committed offset %d, want %d", off, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitOffset(2)
	// The third, aborted: the offset stays at 2 and the copy is invisible.
	send(next, 0, 3, "copy-3")
	if err := c.Call(ctx, "POST", "/v1/transactions/"+txid+":abort", next, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	waitOffset(2)
	got, _ := committedValues(ctx, t, c, out, 0, true)
	if !slices.Equal(got, []string{"copy-1", "copy-2"}) {
		t.Fatalf("read_committed output %v, want copy-1 copy-2", got)
	}
}

// skein produce --transactional-id writes all of stdin in one transaction:
// read_committed readers see every line once it commits; a bad line writes
// nothing.
func TestTransactionalProduceCLI(t *testing.T) {
	d := devCluster(t)
	c := restClient(d)
	ctx := testCtx(t, time.Minute)
	const topic = "e2e-txn-cli"
	createTopic(ctx, t, c, topic, 3, 3, map[string]string{"min.insync.replicas": "2"})
	bin, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	skein := func(stdin string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "skein"), args...)
		cmd.Env = append(os.Environ(), "SKEIN_GATEWAY="+d.GRPCAddr)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	var lines []string
	for i := range 30 {
		lines = append(lines, fmt.Sprintf("user-%d:event-%d", i%7, i))
	}
	out, err := skein(strings.Join(lines, "\n")+"\n", "produce", topic, "--transactional-id", "e2e-cli-tx", "--key-separator", ":")
	t.Logf("$ skein produce %s --transactional-id e2e-cli-tx --key-separator :\n%s", topic, out)
	if err != nil || !strings.Contains(out, "committed 30 records") {
		t.Fatalf("transactional produce: %v: %s", err, out)
	}
	var want []string
	for i := range 30 {
		want = append(want, fmt.Sprintf("event-%d", i))
	}
	slices.Sort(want)
	// The commit's answer comes once the decision is durable; the markers
	// follow within moments (API.md): read_committed sees the records once
	// its partition has its marker.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var got []string
		for p := range int32(3) {
			vals, _ := committedValues(ctx, t, c, topic, p, true)
			got = append(got, vals...)
		}
		slices.Sort(got)
		if slices.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("read_committed sees %d records %v, want the 30 lines", len(got), got)
		}
	}
	// A line without the separator: nothing is written.
	if out, err := skein("user-1:fine\nno separator\n", "produce", topic, "--transactional-id", "e2e-cli-tx", "--key-separator", ":"); err == nil || !strings.Contains(out, "line 2 has no key separator") {
		t.Errorf("a bad line: %v: %s", err, out)
	}
	if out, err := skein("x\n", "produce", topic, "--transactional-id", "e2e-cli-tx", "--acks", "1"); err == nil || !strings.Contains(out, "acks") {
		t.Errorf("--acks 1 with a transactional id: %v: %s", err, out)
	}
	var all []string
	for p := range int32(3) {
		vals, _ := committedValues(ctx, t, c, topic, p, false)
		all = append(all, vals...)
	}
	if len(all) != 30 {
		t.Errorf("the refused runs wrote something: %d records in the topic", len(all))
	}

	// --json: once committed, one result per line of input, in its order.
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "skein"), "produce", topic, "--transactional-id", "e2e-cli-tx", "--key-separator", ":", "--json")
	cmd.Env = append(os.Environ(), "SKEIN_GATEWAY="+d.GRPCAddr)
	cmd.Stdin = strings.NewReader("a:j0\nb:j1\na:j2\nc:j3\n")
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("transactional produce --json: %v", err)
	}
	results := strings.Split(strings.TrimSpace(string(stdout)), "\n")
	if len(results) != 4 {
		t.Fatalf("transactional produce --json printed %q, want 4 lines", stdout)
	}
	type result struct {
		Partition int32  `json:"partition"`
		Offset    Int64  `json:"offset"`
		ErrorCode string `json:"error_code"`
	}
	var parsed []result
	for _, line := range results {
		var r result
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.ErrorCode != "NONE" {
			t.Fatalf("a result line %q: %v", line, err)
		}
		parsed = append(parsed, r)
	}
	// Records of one key go to one partition, in order.
	if parsed[0].Partition != parsed[2].Partition || parsed[0].Offset >= parsed[2].Offset {
		t.Errorf("the results of key a: %+v and %+v", parsed[0], parsed[2])
	}
	for i, r := range parsed {
		want := fmt.Sprintf("j%d", i)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			vals, _ := committedValues(ctx, t, c, topic, r.Partition, true)
			if slices.Contains(vals, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("result %d says partition %d, which read_committed reads as %v (no %s)", i, r.Partition, vals, want)
				break
			}
		}
	}
}

// Offsets a transaction sends for a group member are the member's to
// send: a consumer whose partition moved to another member while it
// worked (it left, or was expired) is refused with UNKNOWN_MEMBER_ID, and
// the new owner's committed offset stays through the transaction's commit,
// as Kafka's TxnOffsetCommit with the member's group metadata (KIP-447).
// The new owner's own transactional offsets are taken.
func TestTransactionalOffsetsOfAMemberThatMovedOn(t *testing.T) {
	d := devCluster(t)
	c := restClient(d)
	ctx := testCtx(t, 2*time.Minute)
	const topic, group = "e2e-txn-src", "e2e-txn-copier"
	createTopic(ctx, t, c, topic, 1, 3, nil)
	var pr ProduceResponse
	if err := c.Call(ctx, "POST", "/v1/topics/"+topic+"/partitions/0/records", ProduceRequest{Records: []ProduceRecord{
		{Value: ptr("n0")}, {Value: ptr("n1")}, {Value: ptr("n2")}, {Value: ptr("n3")}, {Value: ptr("n4")}}}, &pr); err != nil || !written(pr) {
		t.Fatalf("produce: %v %+v", err, pr)
	}
	// own joins and fetches until the member holds the partition (a fetch
	// is a heartbeat), and answers it at its epoch then.
	own := func() restMember {
		t.Helper()
		var m restMember
		if err := callRetrying(ctx, t, c, "POST", "/v1/groups/"+group+"/members", map[string]any{"topics": []string{topic}, "auto_offset_reset": "earliest"}, &m); err != nil {
			t.Fatalf("join: %v", err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; {
			var f groupFetch
			if err := callRetrying(ctx, t, c, "POST", "/v1/groups/"+group+"/members/"+m.ID+"/records", map[string]any{"member_epoch": m.Epoch, "max_wait_ms": 200}, &f); err != nil {
				t.Fatalf("fetch: %v", err)
			}
			m.Epoch = f.MemberEpoch
			if len(f.Records) > 0 {
				return m
			}
			if time.Now().After(deadline) {
				t.Fatal("the member was not given the partition within 30 s")
			}
		}
	}
	sendOffsets := func(txid string, id producerIdentity, m *restMember, offset int64) (string, error) {
		body := map[string]any{"producer_id": id.ProducerID, "producer_epoch": id.ProducerEpoch, "group": group,
			"offsets": []map[string]any{{"topic": topic, "partition": 0, "offset": offset}}}
		if m != nil {
			body["member_id"], body["member_epoch"] = m.ID, m.Epoch
		}
		var out struct {
			Results []struct {
				ErrorCode string `json:"error_code"`
			} `json:"results"`
		}
		if err := c.Call(ctx, "POST", "/v1/transactions/"+txid+"/offsets", body, &out); err != nil {
			return "", err
		}
		if len(out.Results) != 1 {
			t.Fatalf("send offsets: %+v", out)
		}
		return out.Results[0].ErrorCode, nil
	}
	committedOffset := func() int64 {
		t.Helper()
		var out struct {
			Offsets []struct {
				Offset Int64 `json:"offset"`
			} `json:"offsets"`
		}
		if err := c.Call(ctx, "GET", "/v1/groups/"+group+"/offsets", nil, &out); err != nil || len(out.Offsets) != 1 {
			t.Fatalf("group offsets: %+v %v", out, err)
		}
		return int64(out.Offsets[0].Offset)
	}
	initProducer := func(txid string) producerIdentity {
		t.Helper()
		var id producerIdentity
		if err := c.Call(ctx, "POST", "/v1/producers", map[string]any{"transactional_id": txid}, &id); err != nil {
			t.Fatal(err)
		}
		return id
	}

	a := own()
	zombie := initProducer("e2e-copier-a")
	mustDo(ctx, t, c, http.StatusOK, "DELETE", "/v1/groups/"+group+"/members/"+a.ID, nil)
	b := own()
	if err := c.Call(ctx, "POST", "/v1/groups/"+group+"/offsets", map[string]any{"member_id": b.ID, "member_epoch": b.Epoch,
		"offsets": []map[string]any{{"topic": topic, "partition": 0, "offset": 5}}}, nil); err != nil {
		t.Fatalf("the new owner's commit: %v", err)
	}
	if code, err := sendOffsets("e2e-copier-a", zombie, &a, 2); err != nil || code != "UNKNOWN_MEMBER_ID" {
		t.Errorf("offsets of the member that left: %q %v, want UNKNOWN_MEMBER_ID", code, err)
	}
	var next producerIdentity
	if err := c.Call(ctx, "POST", "/v1/transactions/e2e-copier-a:commit", zombie, &next); err != nil {
		t.Fatal(err)
	}
	if got := committedOffset(); got != 5 {
		t.Errorf("after the refused member's transaction committed: offset %d, want the new owner's 5", got)
	}
	// One member field alone is malformed.
	var apiErr *APIError
	if _, err := sendOffsets("e2e-copier-a", next, &restMember{ID: b.ID, Epoch: b.Epoch}, 4); err != nil {
		t.Fatalf("the owner's offsets with another producer: %v", err)
	}
	err := c.Call(ctx, "POST", "/v1/transactions/e2e-copier-a/offsets", map[string]any{"producer_id": next.ProducerID, "producer_epoch": next.ProducerEpoch,
		"group": group, "member_id": b.ID, "offsets": []map[string]any{{"topic": topic, "partition": 0, "offset": 4}}}, nil)
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != "INVALID_REQUEST" {
		t.Errorf("member_id without member_epoch: %v, want INVALID_REQUEST", err)
	}

	// The owner's own transaction commits its offsets.
	owner := initProducer("e2e-copier-b")
	if code, err := sendOffsets("e2e-copier-b", owner, &b, 6); err != nil || code != "NONE" {
		t.Fatalf("the owner's offsets: %q %v", code, err)
	}
	if err := c.Call(ctx, "POST", "/v1/transactions/e2e-copier-b:commit", owner, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for committedOffset() != 6 {
		if time.Now().After(deadline) {
			t.Fatalf("the owner's transactional offset: %d, want 6", committedOffset())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
