//go:build integration

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestGroupFetchMinBytesREST: a member's fetch with min_bytes counts the
// bytes of all its partitions together. It stays parked while 1,200 bytes
// of values lie on two partitions and 1,500 are asked for, answers all
// three records once a third comes, answers what there is when
// max_wait_ms is up on a min_bytes never met, and refuses a negative
// min_bytes.
func TestGroupFetchMinBytesREST(t *testing.T) {
	c := restClient(devCluster(t))
	ctx := testCtx(t, 90*time.Second)
	const topic, group = "e2e-group-minbytes", "e2e-group-minbytes"
	createTopic(ctx, t, c, topic, 2, 3, map[string]string{"min.insync.replicas": "2"})
	var m restMember
	if err := callRetrying(ctx, t, c, "POST", "/v1/groups/"+group+"/members",
		map[string]any{"topics": []string{topic}, "auto_offset_reset": "earliest", "session_timeout_ms": 60000}, &m); err != nil {
		t.Fatal(err)
	}
	path := "/v1/groups/" + group + "/members/" + m.ID + "/records"
	fetch := func(ctx context.Context, positions []restPosition, minBytes, maxWaitMs int32) (groupFetch, error) {
		var f groupFetch
		body := map[string]any{"member_epoch": m.Epoch, "max_wait_ms": maxWaitMs, "min_bytes": minBytes}
		if positions != nil {
			body["positions"] = positions
		}
		err := callRetrying(ctx, t, c, "POST", path, body, &f)
		return f, err
	}
	// The member owns both partitions once a heartbeat says so.
	var start []restPosition
	for deadline := time.Now().Add(30 * time.Second); len(start) != 2; {
		f, err := fetch(ctx, nil, 0, 200)
		if err != nil {
			t.Fatal(err)
		}
		m.Epoch, start = f.MemberEpoch, f.Positions
		if time.Now().After(deadline) {
			t.Fatalf("the member owns %v after 30 s, want both partitions", start)
		}
	}
	for _, p := range start {
		if p.Offset != 0 {
			t.Fatalf("a fresh member starts at %v, want offset 0 on both partitions", start)
		}
	}

	values := []string{letters(11, 600), letters(12, 600), letters(13, 600)}
	parts := []int32{0, 1, 0}
	type answer struct {
		f    groupFetch
		err  error
		took time.Duration
	}
	done := make(chan answer, 1)
	begun := time.Now()
	go func() {
		f, err := fetch(ctx, start, 1500, 20000)
		done <- answer{f, err, time.Since(begun)}
	}()
	for i := range values {
		select {
		case a := <-done:
			t.Fatalf("the fetch with min_bytes=1500 answered with %d of 600 bytes there: %d records, %v", i, len(a.f.Records), a.err)
		case <-time.After(parkTime):
		}
		var pr ProduceResponse
		if err := c.Call(ctx, "POST", "/v1/topics/"+topic+"/records",
			ProduceRequest{Records: []ProduceRecord{{Value: &values[i], Partition: ptr(parts[i])}}}, &pr); err != nil {
			t.Fatal(err)
		}
	}
	var a answer
	select {
	case a = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the fetch with min_bytes=1500 did not answer once 1,800 bytes of values were there")
	}
	if a.err != nil {
		t.Fatal(a.err)
	}
	if got := recordsAt(a.f); !slices.Equal(got, []string{"0:0", "0:1", "1:0"}) || !slices.Equal(positionsAt(a.f), []string{"0:2", "1:1"}) {
		t.Errorf("min_bytes fetch answered %v, positions %v; want 0:0 0:1 1:0, positions 0:2 1:1", got, positionsAt(a.f))
	}
	for _, r := range a.f.Records {
		if r.Value == nil || !slices.Contains(values, *r.Value) {
			t.Errorf("record %d:%d holds an unexpected value", r.Partition, r.Offset)
		}
	}
	m.Epoch = a.f.MemberEpoch

	// A min_bytes never met: what there is, when max_wait_ms is up.
	begun = time.Now()
	f, err := fetch(ctx, start, 1<<20, int32(idleWait/time.Millisecond))
	took := time.Since(begun)
	if err != nil {
		t.Fatal(err)
	}
	if got := recordsAt(f); !slices.Equal(got, []string{"0:0", "0:1", "1:0"}) || took < idleWait || took >= idleSlack {
		t.Errorf("min_bytes=1 MiB with max_wait_ms=%d: %v after %v; want all three records after [%v, %v)",
			idleWait.Milliseconds(), got, took, idleWait, idleSlack)
	}
	m.Epoch = f.MemberEpoch

	_, err = fetch(ctx, start, -1, 100)
	if got := apiCode(err); got != "400 INVALID_REQUEST" {
		t.Errorf("min_bytes -1: %s, want 400 INVALID_REQUEST", got)
	}
}

// recordsAt and positionsAt answer a group fetch's records and positions
// as partition:offset, sorted.
func recordsAt(f groupFetch) []string {
	return sortedAt(f.Records, func(r groupRecord) (int32, Int64) { return r.Partition, r.Offset })
}

func positionsAt(f groupFetch) []string {
	return sortedAt(f.Positions, func(p restPosition) (int32, Int64) { return p.Partition, p.Offset })
}

func sortedAt[T any](items []T, at func(T) (int32, Int64)) []string {
	var out []string
	for _, it := range items {
		p, o := at(it)
		out = append(out, fmt.Sprintf("%d:%d", p, o))
	}
	slices.Sort(out)
	return out
}
