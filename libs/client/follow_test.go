package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"skein/libs/client"
	"skein/libs/client/clienttest"
	"skein/libs/errs"
)

// followCluster starts a fake cluster of brokers with topic "t" (one
// partition on broker 1) and answers it, a client, and a function that
// writes one record to "t".
func followCluster(t *testing.T, brokers int) (*clienttest.Cluster, *client.Client, func(v []byte)) {
	cl := clienttest.Start(t, brokers)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	p := c.NewProducer(client.WithLinger(-1))
	t.Cleanup(func() { p.Close(context.Background()) })
	return cl, c, func(v []byte) {
		t.Helper()
		if r := p.ProduceSync(ctx(t), client.Record{Topic: "t", Value: v})[0]; r.Err != nil {
			t.Fatal(r.Err)
		}
	}
}

// Follow reads on across a leader change, from after the last record it
// gave: the new leader's stream starts there, and no record is seen twice
// or skipped.
func TestFollowGoesOnAcrossALeaderChange(t *testing.T) {
	cl, c, produce := followCluster(t, 2)
	for i := range 3 {
		produce(fmt.Append(nil, "v", i))
	}
	got := make(chan string, 16)
	fctx, cancel := context.WithCancel(ctx(t))
	done := make(chan error, 1)
	go func() {
		done <- c.Follow(fctx, client.FetchRequest{Topic: "t", Partition: 0, Offset: 1}, func(res *client.FetchResult) error {
			for _, r := range res.Records {
				got <- fmt.Sprintf("%s@%d", r.Value, r.Offset) // a copy: the view ends with the call
			}
			return nil
		})
	}()
	next := func() string {
		t.Helper()
		select {
		case v := <-got:
			return v
		case err := <-done:
			t.Fatalf("Follow returned %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("no record in 10 s")
		}
		return ""
	}
	var seen []string
	for range 2 {
		seen = append(seen, next())
	}
	cl.Storage[2].CopyLog(cl.Storage[1], "t", 0)
	cl.Controller.SetLeader("t", 0, 2)
	produce([]byte("v3"))
	seen = append(seen, next())
	if fmt.Sprint(seen) != "[v1@1 v2@2 v3@3]" {
		t.Fatalf("followed %v, want [v1@1 v2@2 v3@3]", seen)
	}
	select {
	case v := <-got:
		t.Fatalf("a record more: %s", v)
	case <-time.After(200 * time.Millisecond):
	}
	fs := cl.Storage[2].Follows()
	if len(fs) == 0 || fs[0].GetFetchOffset() != 3 {
		t.Fatalf("the new leader's streams %v, want the first from offset 3", fs)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow after its context ended: %v", err)
	}
}

// Follow ends with fn's error, and at once with errors a retry cannot
// fix.
func TestFollowEnds(t *testing.T) {
	_, c, produce := followCluster(t, 2)
	produce([]byte("v"))
	stop := errors.New("enough")
	calls := 0
	err := c.Follow(ctx(t), client.FetchRequest{Topic: "t"}, func(*client.FetchResult) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("fn's error: Follow answered %v after %d calls", err, calls)
	}
	for _, tc := range []struct {
		name string
		req  client.FetchRequest
		want *errs.Error
	}{
		{"offset past the log end", client.FetchRequest{Topic: "t", Offset: 10}, errs.OffsetOutOfRange},
		{"a topic that does not exist", client.FetchRequest{Topic: "nope"}, errs.UnknownTopicOrPartition},
		{"a partition that does not exist", client.FetchRequest{Topic: "t", Partition: 3}, errs.UnknownTopicOrPartition},
	} {
		err := c.Follow(ctx(t), tc.req, func(*client.FetchResult) error { return nil })
		// A retry would go on until the test's context ends.
		if errs.Of(err) != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// A reader that stops reading holds up what its stream's window lets the
// leader send ahead (1 MiB), not the whole backlog.
func TestFollowHoldsLittleForAStoppedReader(t *testing.T) {
	cl, c, produce := followCluster(t, 1)
	value := make([]byte, 100<<10)
	for range 80 { // 8 MiB of batches of 100 KiB
		produce(value)
	}
	fctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	inFn := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		first := true
		done <- c.Follow(fctx, client.FetchRequest{Topic: "t"}, func(*client.FetchResult) error {
			if first {
				first = false
				close(inFn)
				<-fctx.Done() // the reader stops reading
			}
			return nil
		})
	}()
	<-inFn
	st := cl.Storage[1]
	// Wait until the leader's sends stop moving.
	last := -1
	for sent := st.FollowSent(); sent != last; sent = st.FollowSent() {
		last = sent
		time.Sleep(300 * time.Millisecond)
	}
	// The answer the reader holds (1 MiB) and its window's worth (1 MiB),
	// with room for the batches that cross each bound.
	if last > 3<<20 {
		t.Errorf("the leader sent %d KiB to a reader that stopped after its first answer", last>>10)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow: %v", err)
	}
}
