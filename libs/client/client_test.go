package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
	"skein/libs/client/clienttest"
	"skein/libs/client/partitioner"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/libs/record"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func newClient(t *testing.T, cl *clienttest.Cluster, controllers ...string) *client.Client {
	t.Helper()
	if len(controllers) == 0 {
		controllers = []string{cl.ControllerAddr}
	}
	c, err := client.New(client.Config{Controllers: controllers, RetryBackoff: 10 * time.Millisecond, MaxRetryBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.WaitReady(ctx(t)); err != nil {
		t.Fatal(err)
	}
	return c
}

func createTopic(t *testing.T, c *client.Client, name string, partitions int32, configs map[string]string) {
	t.Helper()
	if _, err := c.CreateTopic(ctx(t), client.TopicSpec{Name: name, Partitions: partitions, ReplicationFactor: 1, Configs: configs}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitMetadata(ctx(t), func(m *metadata.Image) bool { return m.PartitionCount(name) == partitions }); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestWatchSkipsADeadController(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl, clienttest.DeadAddr(t), cl.ControllerAddr)
	if got := c.Metadata().ClusterID(); got != "test-cluster" {
		t.Fatalf("cluster id %q", got)
	}
	createTopic(t, c, "t", 2, nil) // admin calls fail over too
}

// Records spread by key over partitions exactly as the partitioner says,
// in batches no larger than batch.size, each carrying the partition's next
// base sequence under one producer id with epoch 0.
func TestProducerBatchesAndSequences(t *testing.T) {
	cl := clienttest.Start(t, 3)
	c := newClient(t, cl)
	createTopic(t, c, "orders", 3, nil)
	p := c.NewProducer(client.WithBatchSize(1024), client.WithLinger(20*time.Millisecond))
	defer p.Close(ctx(t))

	const n = 300
	recs := make([]client.Record, n)
	for i := range recs {
		recs[i] = client.Record{Topic: "orders", Key: []byte(fmt.Sprintf("user-%d", i%17)), Value: []byte(fmt.Sprintf("order %d padded to be longer", i))}
	}
	results := p.ProduceSync(ctx(t), recs...)
	next := map[int32]int64{}
	for i, r := range results {
		if r.Err != nil {
			t.Fatalf("record %d: %v", i, r.Err)
		}
		if want := partitioner.ForKey(recs[i].Key, 3); r.Partition != want {
			t.Fatalf("record %d went to %d, murmur2 says %d", i, r.Partition, want)
		}
		if r.Offset != next[r.Partition] {
			t.Fatalf("record %d at offset %d of partition %d, want %d (order within a partition)", i, r.Offset, r.Partition, next[r.Partition])
		}
		next[r.Partition]++
	}

	pids := map[int64]bool{}
	for part := int32(0); part < 3; part++ {
		batches := cl.Leader("orders", part).Batches("orders", part)
		if len(batches) < 2 {
			t.Errorf("partition %d: %d batches; batch.size 1 KiB should split %d records", part, len(batches), next[part])
		}
		seq := int32(0)
		for _, b := range batches {
			if b.Size() > 1024 {
				t.Errorf("partition %d: a batch of %d bytes, above batch.size", part, b.Size())
			}
			if b.ProducerEpoch() != 0 || b.BaseSequence() != seq {
				t.Errorf("partition %d: batch with epoch %d base sequence %d, want 0 and %d", part, b.ProducerEpoch(), b.BaseSequence(), seq)
			}
			pids[b.ProducerID()] = true
			seq += b.RecordCount()
		}
	}
	if len(pids) != 1 || pids[-1] {
		t.Errorf("producer ids %v: want one idempotent id", pids)
	}
	if calls := cl.Controller.ProducerIDCalls(); calls != 1 {
		t.Errorf("%d AllocateProducerIds calls, want one block per client", calls)
	}
	for id, s := range cl.Storage {
		if s.ProduceStreams() > 1 {
			t.Errorf("broker %d saw %d produce streams, want one pipelined stream", id, s.ProduceStreams())
		}
	}
}

func TestLingerHoldsASmallBatch(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	const linger = time.Second
	p := c.NewProducer(client.WithLinger(linger), client.WithSendWhenIdle(false))
	defer p.Close(ctx(t))
	start := time.Now()
	r := p.ProduceSync(ctx(t), client.Record{Topic: "t", Value: []byte("v")})[0]
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if d := time.Since(start); d < linger {
		t.Errorf("answered after %v, before linger.ms %d", d, linger.Milliseconds())
	}
	// Flush does not wait for linger: the bound is far from it, so a busy
	// machine does not fail the test.
	done := make(chan client.Result, 1)
	start = time.Now()
	p.Produce(ctx(t), client.Record{Topic: "t", Value: []byte("w")}, func(r client.Result) { done <- r })
	if err := p.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.Err != nil || r.Offset != 1 {
		t.Fatalf("flushed record: %+v", r)
	}
	if d := time.Since(start); d >= linger*3/4 {
		t.Errorf("flush took %v, want well under linger.ms %d", d, linger.Milliseconds())
	}
}

// Under WithSendWhenIdle a partition with nothing in flight sends at once,
// however long linger is, and the records of one ProduceAll go together;
// while a batch is out, what arrives lingers and goes as one batch when the
// partition is free again.
func TestSendWhenIdle(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	p := c.NewProducer(client.WithLinger(time.Hour), client.WithSendWhenIdle(true))
	defer p.Close(ctx(t))
	start := time.Now()
	if r := p.ProduceSync(ctx(t), client.Record{Topic: "t", Value: []byte("first")})[0]; r.Err != nil || r.Offset != 0 {
		t.Fatalf("first record: %+v", r)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("an idle partition's record waited %v (linger is an hour)", d)
	}

	release := cl.Storage[1].HoldAnswers("t", 0)
	defer release()
	all := func(prefix string, n int) <-chan []client.Result {
		var recs []client.Record
		for i := range n {
			recs = append(recs, client.Record{Topic: "t", Partition: ptr(int32(0)), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))})
		}
		results := make([]client.Result, n)
		var wg sync.WaitGroup
		wg.Add(n)
		p.ProduceAll(ctx(t), recs, func(i int, r client.Result) { results[i] = r; wg.Done() })
		done := make(chan []client.Result, 1)
		go func() { wg.Wait(); done <- results }()
		return done
	}
	a := all("a", 3) // idle: goes at once, its three records together
	time.Sleep(100 * time.Millisecond)
	b := all("b", 3) // a is out: these linger
	c2 := all("c", 3)
	time.Sleep(200 * time.Millisecond)
	batches := cl.Storage[1].Batches("t", 0)
	if len(batches) != 2 || batches[1].LastOffsetDelta() != 2 {
		t.Fatalf("while a's batch is out: %d batches at the node (last of %d records), want 2 (the first, then a's 3)", len(batches), batches[len(batches)-1].LastOffsetDelta()+1)
	}
	release()
	for i, ch := range []<-chan []client.Result{a, b, c2} {
		select {
		case rs := <-ch:
			checkInOrder(t, rs, int64(1+3*i))
		case <-time.After(10 * time.Second):
			t.Fatalf("produce %d not answered: the lingering batch never went once the partition was idle", i)
		}
	}
	batches = cl.Storage[1].Batches("t", 0)
	if len(batches) != 3 || batches[2].LastOffsetDelta() != 5 {
		t.Errorf("%d batches at the node, want 3: b's and c's records together in the last (it has %d)", len(batches), batches[len(batches)-1].LastOffsetDelta()+1)
	}
}

// By default a producer batches as the gateway does: an idle partition's
// record goes at once, whatever linger is, and what arrives while a batch
// is out grows into one batch far beyond Kafka's 16 KiB, up to 256 KiB.
func TestDefaultBatching(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	p := c.NewProducer(client.WithLinger(time.Hour))
	defer p.Close(ctx(t))
	release := cl.Storage[1].HoldAnswers("t", 0)
	defer release()
	first := make(chan client.Result, 1)
	p.Produce(ctx(t), client.Record{Topic: "t", Value: []byte("first")}, func(r client.Result) { first <- r })
	for deadline := time.Now().Add(10 * time.Second); len(cl.Storage[1].Batches("t", 0)) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("an idle partition's lone record was not sent")
		}
	}

	const n = 200 // 1 KiB each: 200 KiB
	recs := make([]client.Record, n)
	for i := range recs {
		recs[i] = client.Record{Topic: "t", Value: bytes.Repeat([]byte{byte(i)}, 1024)}
	}
	results := make([]client.Result, n)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range recs {
		p.Produce(ctx(t), recs[i], func(r client.Result) { results[i] = r; wg.Done() })
	}
	release()
	wg.Wait()
	if r := <-first; r.Err != nil || r.Offset != 0 {
		t.Fatalf("first record: %+v", r)
	}
	checkInOrder(t, results, 1)
	batches := cl.Storage[1].Batches("t", 0)
	if len(batches) != 2 || batches[1].LastOffsetDelta() != n-1 {
		t.Errorf("%d batches at the node, the last of %d records; want 2, the second with all %d", len(batches), batches[len(batches)-1].LastOffsetDelta()+1, n)
	}
}

// Keyless records stick to one partition until its batch goes.
func TestKeylessRecordsAreSticky(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 4, nil)
	p := c.NewProducer(client.WithLinger(time.Hour), client.WithBatchSize(4096))
	defer p.Close(ctx(t))
	var recs []client.Record
	for i := 0; i < 10; i++ {
		recs = append(recs, client.Record{Topic: "t", Value: []byte("small")})
	}
	pc, cancel := context.WithCancel(ctx(t))
	go func() {
		time.Sleep(50 * time.Millisecond)
		p.Flush(pc)
	}()
	res := p.ProduceSync(ctx(t), recs...)
	cancel()
	for _, r := range res {
		if r.Err != nil || r.Partition != res[0].Partition {
			t.Fatalf("keyless records split across partitions within one batch: %+v", res)
		}
	}
}

// A leader that moved answers NOT_LEADER_OR_FOLLOWER; the producer retries
// once the metadata shows the new leader and the record lands there once.
func TestRetryOnNotLeaderWithMetadataRefresh(t *testing.T) {
	cl := clienttest.Start(t, 2)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	if l, _, _ := cl.Controller.Leader("t", 0); l != 1 {
		t.Fatalf("leader %d, want 1", l)
	}
	cl.Controller.Pause() // the client keeps believing broker 1 leads
	cl.Controller.SetLeader("t", 0, 2)
	p := c.NewProducer(client.WithLinger(-1))
	defer p.Close(ctx(t))
	done := make(chan client.Result, 1)
	p.Produce(ctx(t), client.Record{Topic: "t", Key: []byte("k"), Value: []byte("v")}, func(r client.Result) { done <- r })
	deadline := time.Now().Add(5 * time.Second)
	for cl.Storage[1].Refused("NOT_LEADER_OR_FOLLOWER") < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cl.Controller.Resume()
	r := <-done
	if r.Err != nil || r.Offset != 0 {
		t.Fatalf("result %+v", r)
	}
	if n := len(cl.Storage[2].Batches("t", 0)); n != 1 {
		t.Errorf("new leader holds %d batches, want 1", n)
	}
	if n := len(cl.Storage[1].Batches("t", 0)); n != 0 {
		t.Errorf("old leader holds %d batches", n)
	}
}

// Retriable errors are retried with the same sequence; a non-retriable one
// fails the records and the partition moves to a fresh producer id, so the
// failed sequence is never reused.
func TestRetriesAndFreshProducerIDAfterFailure(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	p := c.NewProducer(client.WithLinger(-1))
	defer p.Close(ctx(t))
	st := cl.Storage[1]
	produce := func(v string) client.Result {
		return p.ProduceSync(ctx(t), client.Record{Topic: "t", Value: []byte(v)})[0]
	}
	st.FailNext("t", 0, errs.NotEnoughReplicas, 3)
	if r := produce("a"); r.Err != nil || r.Offset != 0 {
		t.Fatalf("after 3 retriable refusals: %+v", r)
	}
	st.FailNext("t", 0, errs.Errorf(errs.InvalidRecord, "bad"), 1)
	if r := produce("b"); errs.Of(r.Err) != errs.InvalidRecord || r.Offset != -1 {
		t.Fatalf("non-retriable refusal answered %+v", r)
	}
	if r := produce("c"); r.Err != nil || r.Offset != 1 {
		t.Fatalf("after a failure: %+v", r)
	}
	b := st.Batches("t", 0)
	if len(b) != 2 || b[0].ProducerID() == b[1].ProducerID() || b[1].BaseSequence() != 0 {
		t.Fatalf("batches: pid %d seq %d, then pid %d seq %d", b[0].ProducerID(), b[0].BaseSequence(), b[1].ProducerID(), b[1].BaseSequence())
	}
}

func TestDeliveryTimeout(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	cl.Controller.SetLeader("t", 0, -1) // offline
	// The client has heard of it before producing: a record sent while it
	// still knew the old leader would be refused by it instead.
	if _, err := c.WaitMetadata(ctx(t), func(m *metadata.Image) bool {
		p, ok := m.Partition("t", 0)
		return ok && p.GetLeader() < 0
	}); err != nil {
		t.Fatal(err)
	}
	p := c.NewProducer(client.WithDeliveryTimeout(200 * time.Millisecond))
	defer p.Close(ctx(t))
	r := p.ProduceSync(ctx(t), client.Record{Topic: "t", Value: []byte("v")})[0]
	if errs.Of(r.Err) != errs.RequestTimedOut {
		t.Fatalf("result %+v, want REQUEST_TIMED_OUT", r)
	}
	// Why it was never sent: the caller learns the partition is offline.
	if !strings.Contains(r.Err.Error(), "t-0: the partition has no leader") {
		t.Errorf("error %q does not say the partition has no leader", r.Err)
	}
}

// A batch the leader keeps refusing with a retriable error is retried until
// its delivery timeout and then fails with that error, unwritten: the
// caller learns why, as from Kafka's producer, not only that time ran out.
func TestDeliveryTimeoutReportsTheLastRefusal(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	st := cl.Storage[1]
	st.FailNext("t", 0, errs.Errorf(errs.NotEnoughReplicas, "ISR [1] is smaller than min.insync.replicas=2"), 1000)
	p := c.NewProducer(client.WithLinger(-1), client.WithDeliveryTimeout(300*time.Millisecond))
	defer p.Close(ctx(t))
	r := p.ProduceSync(ctx(t), client.Record{Topic: "t", Value: []byte("v")})[0]
	if errs.Of(r.Err) != errs.NotEnoughReplicas || r.MaybeWritten || r.Offset != -1 {
		t.Fatalf("result %+v, want NOT_ENOUGH_REPLICAS, not written", r)
	}
	for _, want := range []string{"delivery timeout of 300ms expired", "min.insync.replicas=2"} {
		if !strings.Contains(r.Err.Error(), want) {
			t.Errorf("error %q does not say %q", r.Err, want)
		}
	}
	if n := len(st.Batches("t", 0)); n != 0 {
		t.Fatalf("the log holds %d batches, want none", n)
	}
	// OUT_OF_ORDER_SEQUENCE_NUMBER is the producer's own affair (a batch
	// behind one that failed): a caller whose batch timed out behind it
	// learns that time ran out.
	st.ClearFailures("t", 0)
	st.FailNext("t", 0, errs.OutOfOrderSequenceNumber, 1000)
	if r := p.ProduceSync(ctx(t), client.Record{Topic: "t", Value: []byte("v")})[0]; errs.Of(r.Err) != errs.RequestTimedOut {
		t.Fatalf("refused out of order until the deadline: %+v, want REQUEST_TIMED_OUT", r)
	}
}

func TestProduceRefusals(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "small", 2, map[string]string{"max.message.bytes": "200"})
	p := c.NewProducer()
	defer p.Close(ctx(t))
	for _, tc := range []struct {
		rec  client.Record
		want *errs.Error
	}{
		{client.Record{Topic: "nope", Value: []byte("v")}, errs.UnknownTopicOrPartition},
		{client.Record{Topic: "small", Partition: ptr[int32](2), Value: []byte("v")}, errs.UnknownTopicOrPartition},
		{client.Record{Topic: "small", Partition: ptr[int32](-1), Value: []byte("v")}, errs.UnknownTopicOrPartition},
		{client.Record{Topic: "small", Value: make([]byte, 300)}, errs.MessageTooLarge},
	} {
		if r := p.ProduceSync(ctx(t), tc.rec)[0]; errs.Of(r.Err) != tc.want {
			t.Errorf("%+v: got %v, want %s", tc.rec, r.Err, tc.want.Name)
		}
	}
}

// A record whose create time the topic does not accept fails on its own,
// before it joins a batch the leader would refuse whole; the records
// produced with it are written.
func TestProduceRefusesCreateTimesTheTopicDoesNotAccept(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "recent", 1, map[string]string{"message.timestamp.before.max.ms": "60000", "message.timestamp.after.max.ms": "60000"})
	p := c.NewProducer(client.WithLinger(50 * time.Millisecond))
	defer p.Close(ctx(t))
	now := time.Now().UnixMilli()
	rs := p.ProduceSync(ctx(t),
		client.Record{Topic: "recent", Value: []byte("now")},
		client.Record{Topic: "recent", Value: []byte("old"), Timestamp: now - 120_000},
		client.Record{Topic: "recent", Value: []byte("ahead"), Timestamp: now + 120_000},
		client.Record{Topic: "recent", Value: []byte("a second ago"), Timestamp: now - 1000},
		client.Record{Topic: "recent", Value: []byte("negative"), Timestamp: -5, TimestampSet: true},
	)
	for i, want := range []*errs.Error{nil, errs.InvalidTimestamp, errs.InvalidTimestamp, nil, errs.InvalidTimestamp} {
		if got := rs[i].Err; (want == nil) != (got == nil) || (want != nil && errs.Of(got) != want) {
			t.Errorf("record %d: %v, want %v", i, got, want)
		}
	}
	if rs[0].Offset != 0 || rs[3].Offset != 1 {
		t.Fatalf("written at %d and %d, want 0 and 1", rs[0].Offset, rs[3].Offset)
	}
}

// A record without a key for a compacted topic fails on its own, before it
// joins a batch the leader would refuse whole; the records with keys
// produced with it (an empty key is a key) are written.
func TestProduceRefusesAKeylessRecordForACompactedTopic(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "table", 1, map[string]string{"cleanup.policy": "compact,delete"})
	p := c.NewProducer(client.WithLinger(50 * time.Millisecond))
	defer p.Close(ctx(t))
	rs := p.ProduceSync(ctx(t),
		client.Record{Topic: "table", Key: []byte("a"), Value: []byte("1")},
		client.Record{Topic: "table", Value: []byte("no key")},
		client.Record{Topic: "table", Key: []byte{}, Value: []byte("empty key")},
	)
	for i, want := range []*errs.Error{nil, errs.InvalidRecord, nil} {
		if got := rs[i].Err; (want == nil) != (got == nil) || (want != nil && errs.Of(got) != want) {
			t.Errorf("record %d: %v, want %v", i, got, want)
		}
	}
	if rs[0].Offset != 0 || rs[2].Offset != 1 {
		t.Fatalf("written at %d and %d, want 0 and 1", rs[0].Offset, rs[2].Offset)
	}
	if !strings.Contains(rs[1].Err.Error(), "compacted") {
		t.Errorf("keyless record: %v, want the reason", rs[1].Err)
	}
}

func TestAcksNone(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	p := c.NewProducer(client.WithAcks(client.AcksNone))
	defer p.Close(ctx(t))
	r := p.ProduceSync(ctx(t), client.Record{Topic: "t", Value: []byte("v")})[0]
	if r.Err != nil || r.Offset != -1 {
		t.Fatalf("acks=0 result %+v", r)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(cl.Storage[1].Batches("t", 0)) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if b := cl.Storage[1].Batches("t", 0); len(b) != 1 || b[0].ProducerID() != -1 {
		t.Fatalf("acks=0 batch missing or idempotent: %d", len(b))
	}
}

func TestProduceBatchIsIdempotentUnderTheCallersIdentity(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	id := client.BatchIdentity{ProducerID: 77, ProducerEpoch: 0, BaseSequence: 0}
	recs := []client.Record{{Value: []byte("a")}, {Value: []byte("b")}}
	first, err := c.ProduceBatch(ctx(t), "t", 0, client.AcksAll, id, recs)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.ProduceBatch(ctx(t), "t", 0, client.AcksAll, id, recs)
	if err != nil {
		t.Fatal(err)
	}
	if first[1].Offset != 1 || again[0].Offset != first[0].Offset || again[1].Offset != first[1].Offset {
		t.Fatalf("first %+v, retried %+v: want the original offsets", first, again)
	}
	if n := len(cl.Storage[1].Batches("t", 0)); n != 1 {
		t.Fatalf("%d batches written, want 1", n)
	}
}

func TestFetchAndListOffsets(t *testing.T) {
	cl := clienttest.Start(t, 2)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	p := c.NewProducer(client.WithLinger(-1))
	defer p.Close(ctx(t))
	for i := 0; i < 5; i++ {
		r := p.ProduceSync(ctx(t), client.Record{Topic: "t", Key: []byte{byte(i)}, Value: []byte(fmt.Sprint(i)), Headers: []record.Header{{Key: "h", Value: []byte("x")}}})[0]
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	res, err := c.Fetch(ctx(t), client.FetchRequest{Topic: "t", Partition: 0, Offset: 2, MaxRecords: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 2 || res.Records[0].Offset != 2 || string(res.Records[1].Value) != "3" || res.NextOffset != 4 || res.HighWatermark != 5 {
		t.Fatalf("fetch: %+v", res)
	}
	if h := res.Records[0].Headers; len(h) != 1 || h[0].Key != "h" || string(h[0].Value) != "x" {
		t.Errorf("headers %+v", h)
	}

	// Out of range is answered, not retried.
	if _, err := c.Fetch(ctx(t), client.FetchRequest{Topic: "t", Partition: 0, Offset: 99}); errs.Of(err) != errs.OffsetOutOfRange {
		t.Fatalf("fetch at 99: %v", err)
	}

	// The long poll waits for new data and answers as soon as it comes.
	lateDone := make(chan struct{})
	go func() {
		defer close(lateDone)
		time.Sleep(100 * time.Millisecond)
		p.ProduceSync(context.Background(), client.Record{Topic: "t", Value: []byte("late")})
	}()
	start := time.Now()
	res, err = c.Fetch(ctx(t), client.FetchRequest{Topic: "t", Partition: 0, Offset: 5, MaxWait: 5 * time.Second})
	if err != nil || len(res.Records) != 1 || string(res.Records[0].Value) != "late" {
		t.Fatalf("long poll: %+v %v", res, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("long poll answered after %v", d)
	}
	// The producer has its answer before leadership moves: a batch still in
	// flight would follow the leader to broker 2, which (a fake without
	// replication) lacks the partition's earlier batches.
	<-lateDone

	// Leadership moves: fetch follows it.
	cl.Controller.SetLeader("t", 0, 2)
	if _, err := c.Fetch(ctx(t), client.FetchRequest{Topic: "t", Partition: 0, Offset: 0}); err == nil {
		// broker 2 holds nothing in this fake, so the log is empty there: offset 0 is the end
	} else {
		t.Fatalf("fetch after a leader change: %v", err)
	}
	if f := cl.Storage[2].Fetches(); len(f) == 0 {
		t.Error("the new leader saw no fetch")
	}

	cl.Controller.SetLeader("t", 0, 1)
	offs, err := c.ListOffsets(ctx(t), "t", nil, client.EarliestOffset, skeinv1.IsolationLevel_READ_UNCOMMITTED)
	if err != nil || len(offs) != 1 || offs[0].Offset != 0 || offs[0].Err != nil {
		t.Fatalf("earliest: %+v %v", offs, err)
	}
	offs, err = c.ListOffsets(ctx(t), "t", nil, client.LatestOffset, skeinv1.IsolationLevel_READ_UNCOMMITTED)
	if err != nil || offs[0].Offset != 6 {
		t.Fatalf("latest: %+v %v", offs, err)
	}
	// A new leader whose high watermark has not caught up answers
	// OFFSET_NOT_AVAILABLE for a while: asked again, not given up on after
	// the few retries a moved leader gets.
	cl.Storage[1].FailListOffsetsNext("t", 0, errs.Errorf(errs.OffsetNotAvailable, "the high watermark has not caught up"), 5)
	offs, err = c.ListOffsets(ctx(t), "t", nil, client.LatestOffset, skeinv1.IsolationLevel_READ_UNCOMMITTED)
	if err != nil || offs[0].Err != nil || offs[0].Offset != 6 {
		t.Fatalf("latest after five OFFSET_NOT_AVAILABLE answers: %+v %v", offs, err)
	}
	// Other retriable errors are given up on after four attempts.
	cl.Storage[1].FailListOffsetsNext("t", 0, errs.Errorf(errs.KafkaStorageError, "a failed disk"), 5)
	offs, err = c.ListOffsets(ctx(t), "t", nil, client.LatestOffset, skeinv1.IsolationLevel_READ_UNCOMMITTED)
	if err != nil || errs.Of(offs[0].Err) != errs.KafkaStorageError {
		t.Fatalf("latest after five storage errors: %+v %v; want KAFKA_STORAGE_ERROR after four attempts", offs, err)
	}
}

func TestAdmin(t *testing.T) {
	cl := clienttest.Start(t, 2)
	c := newClient(t, cl)
	if _, err := c.CreateTopic(ctx(t), client.TopicSpec{Name: "t", ReplicationFactor: 3}); errs.Of(err) != errs.InvalidReplicationFactor {
		t.Fatalf("RF 3 on 2 brokers: %v", err)
	}
	createTopic(t, c, "t", 1, nil)
	if _, err := c.CreateTopic(ctx(t), client.TopicSpec{Name: "t"}); errs.Of(err) != errs.TopicAlreadyExists {
		t.Fatalf("create twice: %v", err)
	}
	if err := c.CreatePartitions(ctx(t), "t", 3); err != nil {
		t.Fatal(err)
	}
	if err := c.AlterConfigs(ctx(t), "t", map[string]string{"retention.ms": "1000"}); err != nil {
		t.Fatal(err)
	}
	m, err := c.WaitMetadata(ctx(t), func(m *metadata.Image) bool {
		tr, ok := m.Topic("t")
		return ok && m.PartitionCount("t") == 3 && tr.GetConfigs()["retention.ms"] == "1000"
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.LiveBrokers()) != 2 {
		t.Errorf("live brokers %v", m.LiveBrokers())
	}
	dc, err := c.DescribeCluster(ctx(t))
	if err != nil || len(dc.Brokers) != 2 || dc.ClusterID != "test-cluster" {
		t.Fatalf("describe cluster %+v %v", dc, err)
	}
	for _, b := range dc.Brokers {
		if b.Addr != cl.StorageAddr[b.ID] || b.State != client.BrokerAlive || b.State.String() != "ALIVE" {
			t.Errorf("broker %+v, want address %s, alive", b, cl.StorageAddr[b.ID])
		}
	}
	if len(dc.Controllers) != 1 || !dc.Controllers[0].Leader || dc.Controllers[0].Addr != cl.ControllerAddr {
		t.Errorf("controllers %+v", dc.Controllers)
	}
	res, err := c.ElectLeaders(ctx(t), client.PreferredElection, nil)
	if err != nil || len(res) != 3 {
		t.Fatalf("elect: %v %v", res, err)
	}
	for _, r := range res { // the fake's leaders are already the preferred replicas
		if r.Topic != "t" || errs.Of(r.Err) != errs.ElectionNotNeeded {
			t.Errorf("election result %+v", r)
		}
	}
	if _, err := c.ElectLeaders(ctx(t), client.PreferredElection, []client.TopicPartitions{{Topic: "nope"}}); errs.Of(err) != errs.UnknownTopicOrPartition {
		t.Errorf("election on an unknown topic: %v", err)
	}
	if err := c.DeleteTopic(ctx(t), "t"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteTopic(ctx(t), "t"); errs.Of(err) != errs.UnknownTopicOrPartition {
		t.Fatalf("delete twice: %v", err)
	}
	if _, err := c.WaitMetadata(ctx(t), func(m *metadata.Image) bool { _, ok := m.Topic("t"); return !ok }); err != nil {
		t.Fatal(err)
	}
}

// Records waiting for a topic that is deleted fail at once rather than at
// the delivery timeout.
func TestDeletedTopicFailsQueuedRecords(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	cl.Controller.SetLeader("t", 0, -1)
	p := c.NewProducer()
	defer p.Close(ctx(t))
	done := make(chan client.Result, 1)
	p.Produce(ctx(t), client.Record{Topic: "t", Value: []byte("v")}, func(r client.Result) { done <- r })
	time.Sleep(50 * time.Millisecond)
	if err := c.DeleteTopic(ctx(t), "t"); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if errs.Of(r.Err) != errs.UnknownTopicOrPartition {
			t.Fatalf("result %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the record still waits for a deleted topic")
	}
}

// Batches compressed with each of Kafka's codecs reach the log compressed
// and come back out of Fetch as the records that went in.
func TestCompressionRoundTrip(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	for _, codec := range []record.Compression{record.Gzip, record.Snappy, record.LZ4, record.Zstd} {
		topic := "c-" + codec.String()
		createTopic(t, c, topic, 1, nil)
		p := c.NewProducer(client.WithCompression(codec), client.WithLinger(20*time.Millisecond))
		var recs []client.Record
		for i := 0; i < 50; i++ {
			recs = append(recs, client.Record{Topic: topic, Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("value %d, repeated repeated repeated", i))})
		}
		for _, r := range p.ProduceSync(ctx(t), recs...) {
			if r.Err != nil {
				t.Fatalf("%s: %v", codec, r.Err)
			}
		}
		p.Close(ctx(t))
		if b := cl.Storage[1].Batches(topic, 0); len(b) == 0 || b[0].Compression() != codec {
			t.Fatalf("%s: stored batches are not compressed with it", codec)
		}
		res, err := c.Fetch(ctx(t), client.FetchRequest{Topic: topic, Partition: 0, Offset: 0})
		if err != nil || len(res.Records) != 50 || string(res.Records[49].Value) != "value 49, repeated repeated repeated" || string(res.Records[7].Key) != "7" {
			t.Fatalf("%s: fetched %d records, %v", codec, len(res.Records), err)
		}
	}
}

// When the controller serving the watch goes away, the client moves to
// another one and keeps following changes.
func TestWatchFailsOverToAnotherController(t *testing.T) {
	cl := clienttest.Start(t, 1)
	first, stopFirst := clienttest.ServeController(t, cl.Controller)
	c := newClient(t, cl, first, cl.ControllerAddr)
	createTopic(t, c, "before", 1, nil)
	stopFirst()
	if _, err := c.CreateTopic(ctx(t), client.TopicSpec{Name: "after", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitMetadata(ctx(t), func(m *metadata.Image) bool { return m.PartitionCount("after") == 2 }); err != nil {
		t.Fatalf("no metadata after the watched controller stopped: %v", err)
	}
}

// A batch in flight to a leader that stops answering (paused, cut off) is
// resent to the new leader as soon as the metadata names it, without
// waiting for the request timeout; the old leader's late answer is ignored.
func TestInFlightBatchFailsOverOnLeaderChange(t *testing.T) {
	cl := clienttest.Start(t, 2)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	if l, _, _ := cl.Controller.Leader("t", 0); l != 1 {
		t.Fatalf("leader %d, want 1", l)
	}
	p := c.NewProducer(client.WithLinger(-1), client.WithRequestTimeout(30*time.Second))
	defer p.Close(ctx(t))
	if r := p.ProduceSync(ctx(t), client.Record{Topic: "t", Value: []byte("before")})[0]; r.Err != nil || r.Offset != 0 {
		t.Fatalf("first produce %+v", r)
	}
	// broker 2 follows: give it the first batch so offsets continue.
	cl.Storage[2].CopyLog(cl.Storage[1], "t", 0)

	release := cl.Storage[1].Stall()
	defer release()
	done := make(chan client.Result, 1)
	p.Produce(ctx(t), client.Record{Topic: "t", Value: []byte("during")}, func(r client.Result) { done <- r })
	time.Sleep(200 * time.Millisecond) // the batch is in flight to the stalled leader
	moved := time.Now()
	cl.Controller.SetLeader("t", 0, 2)
	var r client.Result
	select {
	case r = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("no answer 5 s after the leader changed: the batch waited for the stalled leader")
	}
	t.Logf("acknowledged by the new leader %v after the change", time.Since(moved).Round(time.Millisecond))
	if r.Err != nil || r.Offset != 1 {
		t.Fatalf("result %+v, want offset 1 from the new leader", r)
	}
	release() // the old leader now refuses (not the leader); that answer is stale
	if r := p.ProduceSync(ctx(t), client.Record{Topic: "t", Value: []byte("after")})[0]; r.Err != nil || r.Offset != 2 {
		t.Fatalf("produce after the failover %+v", r)
	}
	if n := len(cl.Storage[2].Batches("t", 0)); n != 3 {
		t.Errorf("new leader holds %d batches, want 3", n)
	}
}

// A fetch whose first answer holds only batches without a record for its
// reader (a transaction marker here; compaction and aborted transactions
// leave the same) asks again from after them: it answers the records that
// follow, not an empty answer below the high watermark.
func TestFetchGoesPastBatchesWithoutRecords(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	build := func(opts record.BatchOptions, values ...string) record.Batch {
		b := record.NewBuilder(opts)
		for _, v := range values {
			b.Append(1, nil, []byte(v))
		}
		out, _, err := b.Build(nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	marker := record.DefaultBatchOptions()
	marker.Control, marker.Transactional, marker.ProducerID, marker.ProducerEpoch = true, true, 7, 0
	plain := record.DefaultBatchOptions()
	plain.BaseOffset = 3
	cl.Storage[1].SetBatches("t", 0, build(marker, "m0", "m1", "m2"), build(plain, "after"))
	// Without PastEmpty the answer is the marker's: no record, the offset
	// moved on (a caller asking about one offset wants that).
	res, err := c.Fetch(ctx(t), client.FetchRequest{Topic: "t", Partition: 0, Offset: 0, MaxBytes: 1})
	if err != nil || len(res.Records) != 0 || res.NextOffset != 3 {
		t.Fatalf("fetch from 0 without PastEmpty: %+v %v", res, err)
	}
	before := len(cl.Storage[1].Fetches())
	// max_bytes 1: the leader answers its first batch alone.
	res, err = c.Fetch(ctx(t), client.FetchRequest{Topic: "t", Partition: 0, Offset: 0, MaxBytes: 1, PastEmpty: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 1 || res.Records[0].Offset != 3 || string(res.Records[0].Value) != "after" || res.NextOffset != 4 {
		t.Fatalf("fetch from 0: %d records, next %d: %+v", len(res.Records), res.NextOffset, res.Records)
	}
	if n := len(cl.Storage[1].Fetches()) - before; n != 2 {
		t.Errorf("%d fetches, want 2: one for the marker, one after it", n)
	}
	// At the end nothing is fetched past: an empty answer, the offset kept.
	res, err = c.Fetch(ctx(t), client.FetchRequest{Topic: "t", Partition: 0, Offset: 4, PastEmpty: true})
	if err != nil || len(res.Records) != 0 || res.NextOffset != 4 {
		t.Fatalf("fetch at the end: %+v %v", res, err)
	}
	// The hops share one MaxWait: a marker alone, then the end, answers
	// after MaxWait once, not once a hop.
	cl.Storage[1].SetBatches("t", 0, build(marker, "m0", "m1", "m2"))
	start := time.Now()
	res, err = c.Fetch(ctx(t), client.FetchRequest{Topic: "t", Partition: 0, Offset: 0, MaxWait: 600 * time.Millisecond, PastEmpty: true})
	if err != nil || len(res.Records) != 0 || res.NextOffset != 3 {
		t.Fatalf("fetch of a marker alone: %+v %v", res, err)
	}
	if d := time.Since(start); d < 500*time.Millisecond || d > 1100*time.Millisecond {
		t.Errorf("a marker then the end answered after %v, want about MaxWait (600ms)", d)
	}
	// A hop that fails keeps what the one before read: the offset moved on.
	short, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
	defer cancel()
	res, err = c.Fetch(short, client.FetchRequest{Topic: "t", Partition: 0, Offset: 0, MaxWait: 5 * time.Second, PastEmpty: true})
	if err != nil || len(res.Records) != 0 || res.NextOffset != 3 {
		t.Fatalf("fetch cut short after the marker: %+v %v", res, err)
	}
	// The same through FetchView, which answers a release to call.
	short2, cancel2 := context.WithTimeout(ctx(t), 300*time.Millisecond)
	defer cancel2()
	res, release, err := c.FetchView(short2, client.FetchRequest{Topic: "t", Partition: 0, Offset: 0, MaxWait: 5 * time.Second, PastEmpty: true})
	if err != nil || release == nil || len(res.Records) != 0 || res.NextOffset != 3 {
		t.Fatalf("view cut short after the marker: %+v, release %v, %v", res, release != nil, err)
	}
	release()
}

// A long poll parked on a leader that stops answering ends when the
// metadata names a new leader, and the fetch is answered by the new one.
func TestFetchFollowsLeaderChangeDuringLongPoll(t *testing.T) {
	cl := clienttest.Start(t, 2)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	p := c.NewProducer(client.WithLinger(-1))
	defer p.Close(ctx(t))
	if r := p.ProduceSync(ctx(t), client.Record{Topic: "t", Value: []byte("v")})[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	cl.Storage[2].CopyLog(cl.Storage[1], "t", 0)
	release := cl.Storage[1].Stall()
	defer release()
	got := make(chan error, 1)
	var res *client.FetchResult
	go func() {
		var err error
		res, err = c.Fetch(ctx(t), client.FetchRequest{Topic: "t", Partition: 0, Offset: 0, MaxWait: 10 * time.Second})
		got <- err
	}()
	time.Sleep(200 * time.Millisecond)
	moved := time.Now()
	cl.Controller.SetLeader("t", 0, 2)
	select {
	case err := <-got:
		if err != nil || len(res.Records) != 1 || string(res.Records[0].Value) != "v" {
			t.Fatalf("fetch %+v %v", res, err)
		}
		t.Logf("answered by the new leader %v after the change", time.Since(moved).Round(time.Millisecond))
	case <-time.After(3 * time.Second):
		t.Fatal("the fetch still waits on the stalled leader 3 s after the leader changed")
	}
}

// A controller cut off from its quorum keeps its connections but falls
// silent: the metadata watch moves to another controller within
// metadata.WatchSilence, and admin calls move on after one attempt's
// timeout instead of waiting for the caller's deadline.
func TestSilentControllerIsLeftBehind(t *testing.T) {
	cl := clienttest.Start(t, 1)
	silent, _ := clienttest.ServeController(t, clienttest.CutOff{Controller: cl.Controller})
	c := newClient(t, cl, silent, cl.ControllerAddr)

	start := time.Now()
	if _, err := c.CreateTopic(ctx(t), client.TopicSpec{Name: "t", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("create answered after %v (one attempt at the silent controller)", took.Round(time.Millisecond))
	if took > client.ControllerAttemptTimeout+2*time.Second {
		t.Errorf("create took %v; the silent controller should cost one attempt of %v", took, client.ControllerAttemptTimeout)
	}
	if _, err := c.WaitMetadata(ctx(t), func(m *metadata.Image) bool { return m.PartitionCount("t") == 2 }); err != nil {
		t.Fatalf("the watch never left the silent controller: %v", err)
	}
	t.Logf("the new topic reached the metadata %v after the create began", time.Since(start).Round(time.Millisecond))
}

// A failed record says whether it may be in the log: never sent, or refused
// by the leader before the append, is definitely not written; an attempt
// that got no answer (a stalled leader) or NOT_ENOUGH_REPLICAS_AFTER_APPEND
// may have written it.
func TestFailedRecordsTellWhetherTheyMayBeWritten(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	st := cl.Storage[1]
	p := c.NewProducer(client.WithLinger(-1), client.WithDeliveryTimeout(500*time.Millisecond))
	defer p.Close(ctx(t))
	produce := func() client.Result { return p.ProduceSync(ctx(t), client.Record{Topic: "t", Value: []byte("v")})[0] }

	st.FailNext("t", 0, errs.Errorf(errs.InvalidRecord, "bad"), 1)
	if r := produce(); errs.Of(r.Err) != errs.InvalidRecord || r.MaybeWritten {
		t.Errorf("refused before the append: %+v, want INVALID_RECORD and not maybe-written", r)
	}
	st.FailNext("t", 0, errs.NotEnoughReplicasAfterAppend, 100)
	if r := produce(); r.Err == nil || !r.MaybeWritten {
		t.Errorf("appended without enough replicas until the deadline: %+v, want maybe-written", r)
	}
	st.ClearFailures("t", 0)
	// Appended, and then the leader lost its leadership (or its disk)
	// while the batch waited for its followers; every attempt after that
	// is refused before the append until the deadline.
	for _, after := range []*errs.Error{errs.NotLeaderOrFollower, errs.KafkaStorageError} {
		before := len(st.Batches("t", 0))
		st.FailAfterAppendNext("t", 0, after, 1)
		st.FailNext("t", 0, errs.NotLeaderOrFollower, 1000)
		r := produce()
		st.ClearFailures("t", 0)
		if len(st.Batches("t", 0)) != before+1 {
			t.Fatalf("%s after the append: the log holds %d batches, want %d", after.Name, len(st.Batches("t", 0)), before+1)
		}
		if r.Err == nil || !r.MaybeWritten {
			t.Errorf("%s after the append, the record in the log: %+v, want maybe-written", after.Name, r)
		}
	}
	release := st.Stall()
	if r := produce(); errs.Of(r.Err) != errs.RequestTimedOut || !r.MaybeWritten {
		t.Errorf("no answer from a stalled leader: %+v, want REQUEST_TIMED_OUT and maybe-written", r)
	}
	release()
	cl.Controller.SetLeader("t", 0, -1) // offline: nothing is ever sent
	if _, err := c.WaitMetadata(ctx(t), func(m *metadata.Image) bool {
		p, ok := m.Partition("t", 0)
		return ok && p.GetLeader() < 0
	}); err != nil {
		t.Fatal(err)
	}
	if r := produce(); errs.Of(r.Err) != errs.RequestTimedOut || r.MaybeWritten {
		t.Errorf("never sent: %+v, want REQUEST_TIMED_OUT and not maybe-written", r)
	}
}

// ProduceBatch says whether a failure may have written the batch: a
// refusal before the append is definite; a request left unanswered is not.
func TestProduceBatchTellsWhetherItMayBeWritten(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	st := cl.Storage[1]
	recs := []client.Record{{Value: []byte("v")}}
	st.FailNext("t", 0, errs.Errorf(errs.InvalidRecord, "bad"), 1)
	_, err := c.ProduceBatch(ctx(t), "t", 0, client.AcksAll, client.BatchIdentity{ProducerID: 7}, recs)
	if errs.Of(err) != errs.InvalidRecord || client.MaybeWritten(err) {
		t.Errorf("refused before the append: %v (maybe written %v)", err, client.MaybeWritten(err))
	}
	for i, after := range []*errs.Error{errs.NotLeaderOrFollower, errs.KafkaStorageError} {
		st.FailAfterAppendNext("t", 0, after, 1)
		st.FailNext("t", 0, errs.NotLeaderOrFollower, 1000)
		short, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
		_, err := c.ProduceBatch(short, "t", 0, client.AcksAll, client.BatchIdentity{ProducerID: 8, BaseSequence: int32(i)}, recs)
		cancel()
		st.ClearFailures("t", 0)
		if err == nil || !client.MaybeWritten(err) {
			t.Errorf("%s after the append: %v (maybe written %v), want maybe written", after.Name, err, client.MaybeWritten(err))
		}
	}
	release := st.Stall()
	defer release()
	short, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
	defer cancel()
	_, err = c.ProduceBatch(short, "t", 0, client.AcksAll, client.BatchIdentity{ProducerID: 7}, recs)
	if err == nil || !client.MaybeWritten(err) {
		t.Errorf("unanswered: %v (maybe written %v), want maybe written", err, client.MaybeWritten(err))
	}
}

// values reads back the values of a partition's batches on a fake node, in
// log order.
func values(t *testing.T, st *clienttest.Storage, topic string) []string {
	t.Helper()
	var out []string
	for _, b := range st.Batches(topic, 0) {
		var it record.RecordIter
		if err := it.Reset(b); err != nil {
			t.Fatal(err)
		}
		for it.Next() {
			out = append(out, string(it.Record().Value))
		}
	}
	return out
}

// produceAsync queues one record per value (each its own batch) and waits
// for all results.
func produceAsync(t *testing.T, p *client.Producer, topic string, vals ...string) []client.Result {
	t.Helper()
	out := make([]client.Result, len(vals))
	done := make(chan struct{}, len(vals))
	for i, v := range vals {
		p.Produce(ctx(t), client.Record{Topic: topic, Partition: ptr(int32(0)), Value: []byte(v)}, func(r client.Result) { out[i] = r; done <- struct{}{} })
	}
	for range vals {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("no result within 10 s")
		}
	}
	return out
}

// Batches queued behind a stalled leader land, once it answers, in the
// order they were made, under consecutive sequences of one producer id.
func TestQueuedBatchesLandInOrder(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	p := c.NewProducer(client.WithLinger(-1), client.WithBatchSize(1))
	defer p.Close(ctx(t))
	st := cl.Storage[1]
	release := st.Stall()
	var vals []string
	for i := range 12 {
		vals = append(vals, fmt.Sprintf("v%02d", i))
	}
	go func() { time.Sleep(300 * time.Millisecond); release() }()
	res := produceAsync(t, p, "t", vals...)
	for i, r := range res {
		if r.Err != nil || r.Offset != int64(i) {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
	if got := values(t, st, "t"); fmt.Sprint(got) != fmt.Sprint(vals) {
		t.Fatalf("log %v, produced %v", got, vals)
	}
	b := st.Batches("t", 0)
	for i := 1; i < len(b); i++ {
		if b[i].ProducerID() != b[0].ProducerID() || b[i].BaseSequence() != b[i-1].BaseSequence()+1 {
			t.Fatalf("batch %d: pid %d seq %d after pid %d seq %d", i, b[i].ProducerID(), b[i].BaseSequence(), b[i-1].ProducerID(), b[i-1].BaseSequence())
		}
	}
}

// A definite refusal in the middle of a run of batches fails that batch
// alone: the batches behind it land under a fresh producer id, in order,
// once each.
func TestRunSurvivesARefusalInTheMiddle(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	p := c.NewProducer(client.WithLinger(-1), client.WithBatchSize(1))
	defer p.Close(ctx(t))
	st := cl.Storage[1]
	if r := produceAsync(t, p, "t", "first")[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	release := st.Stall()
	st.FailNext("t", 0, errs.Errorf(errs.InvalidRecord, "bad"), 1)
	go func() { time.Sleep(300 * time.Millisecond); release() }()
	res := produceAsync(t, p, "t", "refused", "a", "b", "c", "d")
	if errs.Of(res[0].Err) != errs.InvalidRecord || res[0].MaybeWritten {
		t.Fatalf("refused batch: %+v", res[0])
	}
	for i, r := range res[1:] {
		if r.Err != nil || r.Offset != int64(i+1) {
			t.Fatalf("record %d behind the refusal: %+v", i, r)
		}
	}
	if got := values(t, st, "t"); fmt.Sprint(got) != "[first a b c d]" {
		t.Fatalf("log %v", got)
	}
}

// Batches in flight and queued for a leader that stops answering all move
// to the new leader, in their order, when the metadata changes.
func TestQueuedBatchesFailOverInOrder(t *testing.T) {
	cl := clienttest.Start(t, 2)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	p := c.NewProducer(client.WithLinger(-1), client.WithBatchSize(1), client.WithRequestTimeout(30*time.Second))
	defer p.Close(ctx(t))
	release := cl.Storage[1].Stall()
	defer release()
	go func() { time.Sleep(300 * time.Millisecond); cl.Controller.SetLeader("t", 0, 2) }()
	vals := []string{"a", "b", "c", "d", "e", "f", "g"}
	res := produceAsync(t, p, "t", vals...)
	for i, r := range res {
		if r.Err != nil || r.Offset != int64(i) {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
	if got := values(t, cl.Storage[2], "t"); fmt.Sprint(got) != fmt.Sprint(vals) {
		t.Fatalf("new leader's log %v", got)
	}
}

// A topic's compression.type decides the codec its batches are stored with;
// "producer" (the default) keeps the producer's.
func TestTopicCompressionType(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	p := c.NewProducer(client.WithLinger(-1), client.WithCompression(record.Snappy))
	defer p.Close(ctx(t))
	for _, tc := range []struct {
		config string
		want   record.Compression
	}{{"producer", record.Snappy}, {"", record.Snappy}, {"uncompressed", record.None}, {"gzip", record.Gzip}, {"snappy", record.Snappy}, {"lz4", record.LZ4}, {"zstd", record.Zstd}} {
		topic := "t-" + tc.config
		var configs map[string]string
		if tc.config != "" {
			configs = map[string]string{"compression.type": tc.config}
		}
		createTopic(t, c, topic, 1, configs)
		v := fmt.Sprintf("value for %s, long enough to compress: %0100d", tc.config, 0)
		if r := p.ProduceSync(ctx(t), client.Record{Topic: topic, Value: []byte(v)})[0]; r.Err != nil {
			t.Fatalf("%s: %v", topic, r.Err)
		}
		if _, err := c.ProduceBatch(ctx(t), topic, 0, client.AcksAll, client.BatchIdentity{ProducerID: 99}, []client.Record{{Value: []byte(v)}}); err != nil {
			t.Fatalf("%s: batch: %v", topic, err)
		}
		// ProduceBatch has no codec of its own: uncompressed unless the
		// topic names one.
		wantBatch := tc.want
		if tc.config == "producer" || tc.config == "" {
			wantBatch = record.None
		}
		bs := cl.Storage[1].Batches(topic, 0)
		if len(bs) != 2 || bs[0].Compression() != tc.want || bs[1].Compression() != wantBatch {
			t.Errorf("compression.type %q: stored %d batches with %v / %v, want %v / %v", tc.config, len(bs), bs[0].Compression(), bs[len(bs)-1].Compression(), tc.want, wantBatch)
			continue
		}
		res, err := c.Fetch(ctx(t), client.FetchRequest{Topic: topic, Partition: 0, Offset: 0})
		if err != nil || len(res.Records) != 2 || string(res.Records[1].Value) != v {
			t.Errorf("compression.type %q: read back %+v %v", tc.config, res, err)
		}
	}
}

// A topic deleted while one of its batches is in flight and more are
// queued: every record gets a result and Flush returns.
func TestDeletedTopicWithABatchInFlight(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	p := c.NewProducer(client.WithLinger(-1), client.WithBatchSize(1), client.WithDeliveryTimeout(3*time.Second))
	defer p.Close(ctx(t))
	release := cl.Storage[1].Stall()
	results := make(chan client.Result, 3)
	for _, v := range []string{"a", "b", "c"} {
		p.Produce(ctx(t), client.Record{Topic: "t", Partition: ptr(int32(0)), Value: []byte(v)}, func(r client.Result) { results <- r })
	}
	time.Sleep(100 * time.Millisecond) // "a" in flight, "b" and "c" queued
	if err := c.DeleteTopic(ctx(t), "t"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	release()
	for range 3 {
		select {
		case <-results:
		case <-time.After(10 * time.Second):
			t.Fatal("a record got no result after its topic was deleted")
		}
	}
	fctx, cancel := context.WithTimeout(ctx(t), 5*time.Second)
	defer cancel()
	if err := p.Flush(fctx); err != nil {
		t.Fatalf("flush after the deletion: %v", err)
	}
}

// produceMany sends n one-record batches to a partition and answers a
// channel of their results in produce order once all are in.
func produceMany(t *testing.T, p *client.Producer, topic string, partition int32, prefix string, n int) <-chan []client.Result {
	t.Helper()
	results := make([]client.Result, n)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		p.Produce(ctx(t), client.Record{Topic: topic, Partition: ptr(partition), Value: []byte(fmt.Sprintf("%s-%03d", prefix, i))}, func(r client.Result) {
			results[i] = r
			wg.Done()
		})
	}
	done := make(chan []client.Result, 1)
	go func() { wg.Wait(); done <- results }()
	return done
}

// checkInOrder fails unless every result is written, at consecutive
// offsets from first.
func checkInOrder(t *testing.T, rs []client.Result, first int64) {
	t.Helper()
	for i, r := range rs {
		if r.Err != nil || r.Offset != first+int64(i) {
			t.Fatalf("record %d: %+v, want offset %d", i, r, first+int64(i))
		}
	}
}

// pipelinedProducer starts a one-node cluster with topic "t" of the given
// partitions and a producer that makes a batch of every record and sends
// it at once, its first batch on each partition already acknowledged (so
// later ones may be pipelined).
func pipelinedProducer(t *testing.T, partitions int32) (*clienttest.Cluster, *client.Client, *client.Producer) {
	t.Helper()
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", partitions, nil)
	p := c.NewProducer(client.WithBatchSize(1), client.WithLinger(-1))
	t.Cleanup(func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		p.Close(closeCtx)
	})
	for part := range partitions {
		if r := p.ProduceSync(ctx(t), client.Record{Topic: "t", Partition: ptr(part), Value: []byte("first")})[0]; r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	return cl, c, p
}

// The first batch under a producer id goes out alone: until it is in, the
// node does not know the id, and nothing may overtake it.
func TestFirstBatchOfAProducerIDGoesOutAlone(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	release := cl.Storage[1].HoldAnswers("t", 0)
	defer release()
	p := c.NewProducer(client.WithBatchSize(1), client.WithLinger(-1))
	defer p.Close(ctx(t))
	first := produceMany(t, p, "t", 0, "first", 1)
	time.Sleep(100 * time.Millisecond)
	var rest []<-chan []client.Result
	for i := range 9 { // each produce wakes the sender
		rest = append(rest, produceMany(t, p, "t", 0, fmt.Sprint("r", i), 1))
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(cl.Storage[1].Batches("t", 0)); n != 1 {
		t.Fatalf("%d batches out before the first was answered, want 1", n)
	}
	release()
	for i, ch := range append([]<-chan []client.Result{first}, rest...) {
		select {
		case rs := <-ch:
			checkInOrder(t, rs, int64(i))
		case <-time.After(10 * time.Second):
			t.Fatal("not all answered")
		}
	}
	if span := cl.Storage[1].MaxOpenSpan("t", 0); span > 5 {
		t.Errorf("up to %d batches appended from an unanswered one, want at most 5", span)
	}
}

// Once the id is known, up to five batches of a partition are out at once,
// counted from the oldest unanswered one — even when later ones are
// answered first (their request did not carry the slow partition): every
// batch that may be resent stays within the node's duplicate window.
func TestInFlightBatchesStayWithinFiveOfTheOldestOpen(t *testing.T) {
	cl, _, p := pipelinedProducer(t, 2)
	// Partition 1's answers are held: a request carrying a batch of each
	// partition holds partition 0's batch too, while partition 0's later
	// requests are answered.
	release := cl.Storage[1].HoldAnswers("t", 1)
	defer release()
	// Partition 0's first answers are held too, so that several of its
	// batches are out at once however fast the node answers; then only
	// partition 1's stay held.
	release0 := cl.Storage[1].HoldAnswers("t", 0)
	defer release0()
	done1 := produceMany(t, p, "t", 1, "slow", 3)
	done0 := produceMany(t, p, "t", 0, "fast", 40)
	for deadline := time.Now().Add(10 * time.Second); cl.Storage[1].MaxOpenSpan("t", 0) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("partition 0 never had two batches out at once (span %d): no pipelining", cl.Storage[1].MaxOpenSpan("t", 0))
		}
	}
	release0()
	time.Sleep(500 * time.Millisecond)
	if span := cl.Storage[1].MaxOpenSpan("t", 0); span > 5 {
		t.Fatalf("partition 0: %d batches appended from an unanswered one, want at most 5", span)
	}
	release()
	for _, d := range []struct {
		ch    <-chan []client.Result
		first int64
	}{{done0, 1}, {done1, 1}} {
		select {
		case rs := <-d.ch:
			checkInOrder(t, rs, d.first)
		case <-time.After(10 * time.Second):
			t.Fatal("not all answered")
		}
	}
	for part := range int32(2) {
		if span := cl.Storage[1].MaxOpenSpan("t", part); span > 5 {
			t.Errorf("partition %d: up to %d batches appended from an unanswered one, want at most 5", part, span)
		}
	}
}

// A burst queued before the sender could send any of it (here: while the
// partition had no leader) goes out up to five batches at once when it
// can, not one batch per wake: nothing else would wake the sender while
// the first answer is outstanding.
func TestQueuedBurstGoesOutFiveBatchesAtOnce(t *testing.T) {
	cl, c, p := pipelinedProducer(t, 1)
	cl.Controller.SetLeader("t", 0, -1) // offline: the burst queues
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, _, ok := c.Metadata().LeaderAndEpoch("t", 0); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the client never saw the partition offline")
		}
	}
	release := cl.Storage[1].HoldAnswers("t", 0)
	defer release()
	done := produceMany(t, p, "t", 0, "burst", 20)
	time.Sleep(50 * time.Millisecond)
	if span := cl.Storage[1].MaxOpenSpan("t", 0); span != 1 {
		t.Fatalf("%d batches appended while the partition had no leader, want only the first", span)
	}
	cl.Controller.SetLeader("t", 0, 1)
	deadline := time.Now().Add(5 * time.Second)
	for cl.Storage[1].MaxOpenSpan("t", 0) < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("with 20 batches queued, at most %d were ever out at once, want 5", cl.Storage[1].MaxOpenSpan("t", 0))
		}
		time.Sleep(10 * time.Millisecond)
	}
	release()
	select {
	case rs := <-done:
		checkInOrder(t, rs, 1)
	case <-time.After(10 * time.Second):
		t.Fatal("not all answered")
	}
	if span := cl.Storage[1].MaxOpenSpan("t", 0); span > 5 {
		t.Errorf("up to %d batches appended from an unanswered one, want at most 5", span)
	}
}

// ProduceBatch (the coordinators' and the gateway's transactional writes)
// stops waiting for a leader the metadata replaced and resends to the new
// one under the same identity.
func TestProduceBatchFailsOverOnLeaderChange(t *testing.T) {
	cl := clienttest.Start(t, 2)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	id := client.BatchIdentity{ProducerID: 77, ProducerEpoch: 0, BaseSequence: 0}
	if _, err := c.ProduceBatch(ctx(t), "t", 0, client.AcksAll, id, []client.Record{{Value: []byte("before")}}); err != nil {
		t.Fatal(err)
	}
	cl.Storage[2].CopyLog(cl.Storage[1], "t", 0)
	release := cl.Storage[1].Stall()
	defer release()
	done := make(chan error, 1)
	var res []client.Result
	go func() {
		var err error
		id.BaseSequence = 1
		res, err = c.ProduceBatch(ctx(t), "t", 0, client.AcksAll, id, []client.Record{{Value: []byte("during")}})
		done <- err
	}()
	time.Sleep(200 * time.Millisecond) // in flight to the stalled leader
	moved := time.Now()
	cl.Controller.SetLeader("t", 0, 2)
	select {
	case err := <-done:
		if err != nil || len(res) != 1 || res[0].Offset != 1 {
			t.Fatalf("after the leader change: %v %+v, want offset 1", err, res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer 5 s after the leader changed: the batch waited for the stalled leader")
	}
	t.Logf("written by the new leader %v after the change", time.Since(moved).Round(time.Millisecond))
}

// The buffers batches are encoded into are reused once a batch settles.
// Through retries, refusals and batches encoded again under a fresh
// producer id, every record acknowledged is in the log once, at its offset,
// with the bytes it was produced with.
func TestReusedBatchBuffersKeepEveryRecordIntact(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	p := c.NewProducer(client.WithLinger(-1), client.WithBatchSize(256))
	defer p.Close(ctx(t))
	st := cl.Storage[1]
	var vals []string
	var res []client.Result
	for round := range 8 {
		st.FailNext("t", 0, errs.NotEnoughReplicas, 2)
		if round%2 == 1 {
			st.FailNext("t", 0, errs.Errorf(errs.InvalidRecord, "refused"), 1)
		}
		var batch []string
		for i := range 50 {
			n := round*50 + i
			batch = append(batch, fmt.Sprintf("value %03d %s", n, strings.Repeat(string(rune('a'+n%26)), n%97)))
		}
		vals = append(vals, batch...)
		res = append(res, produceAsync(t, p, "t", batch...)...)
	}
	log := values(t, st, "t")
	acked := 0
	for i, r := range res {
		if r.Err != nil {
			if errs.Of(r.Err) != errs.InvalidRecord && errs.Of(r.Err) != errs.OutOfOrderSequenceNumber {
				t.Fatalf("record %d: %v", i, r.Err)
			}
			continue
		}
		acked++
		if r.Offset < 0 || r.Offset >= int64(len(log)) || log[r.Offset] != vals[i] {
			t.Fatalf("record %d acknowledged at offset %d, but the log (%d records) has %q there, want %q", i, r.Offset, len(log), at(log, r.Offset), vals[i])
		}
	}
	if acked != len(log) || acked < len(vals)/2 {
		t.Fatalf("%d of %d records acknowledged, the log holds %d", acked, len(vals), len(log))
	}
}

func at(log []string, i int64) string {
	if i < 0 || i >= int64(len(log)) {
		return ""
	}
	return log[i]
}

// A request the leader does not answer within the request timeout ends the
// produce stream, as Kafka closes the connection: the resend goes on a new
// stream (a stuck one would hold it, and a sender blocked on its flow
// control, for good), and the record is written once.
func TestRequestTimeoutEndsTheStream(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	p := c.NewProducer(client.WithRequestTimeout(50*time.Millisecond), client.WithDeliveryTimeout(time.Minute))
	defer p.Close(ctx(t))
	if r := p.ProduceSync(ctx(t), client.Record{Topic: "t", Value: []byte("first")})[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	st := cl.Storage[1]
	if n := st.ProduceStreams(); n != 1 {
		t.Fatalf("%d produce streams, want 1", n)
	}
	release := st.Stall()
	done := make(chan client.Result, 1)
	p.Produce(ctx(t), client.Record{Topic: "t", Value: []byte("second")}, func(r client.Result) { done <- r })
	deadline := time.Now().Add(15 * time.Second)
	for st.ProduceStreams() < 2 {
		if time.Now().After(deadline) {
			release()
			t.Fatal("the unanswered request did not end its stream")
		}
		time.Sleep(20 * time.Millisecond)
	}
	release()
	if r := <-done; r.Err != nil || r.Offset != 1 {
		t.Fatalf("the second record: %+v, want offset 1", r)
	}
	if n := len(st.Batches("t", 0)); n != 2 {
		t.Fatalf("%d batches in the log, want 2 (the resend is no duplicate)", n)
	}
}

// Under acks=0 a record whose request never reached a stream (the leader
// cannot be reached) is not reported delivered: it is sent again until its
// delivery timeout.
func TestAcksNoneUnsentIsNotDelivered(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	cl.Controller.AddBroker(2, clienttest.DeadAddr(t))
	cl.Controller.SetLeader("t", 0, 2)
	if _, err := c.WaitMetadata(ctx(t), func(m *metadata.Image) bool { l, _, _ := m.LeaderAndEpoch("t", 0); return l == 2 }); err != nil {
		t.Fatal(err)
	}
	p := c.NewProducer(client.WithAcks(client.AcksNone), client.WithDeliveryTimeout(500*time.Millisecond))
	defer p.Close(ctx(t))
	if r := p.ProduceSync(ctx(t), client.Record{Topic: "t", Value: []byte("v")})[0]; r.Err == nil {
		t.Fatalf("a record that never reached the unreachable leader: %+v, want an error", r)
	}
}

// A producer whose client the controller refuses producer ids (it may
// write no topic) fails the records waiting for one with that refusal at
// once, not at their delivery timeout, and produces again once ids come.
func TestRefusedProducerIDsFailRecordsAtOnce(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	cl.Controller.RefuseProducerIDs(errs.Errorf(errs.ClusterAuthorizationFailed, "User:alice may not write any topic"))
	p := c.NewProducer(client.WithDeliveryTimeout(time.Minute))
	defer p.Close(ctx(t))
	start := time.Now()
	r := p.ProduceSync(ctx(t), client.Record{Topic: "t", Value: []byte("v")})[0]
	if errs.Of(r.Err) != errs.ClusterAuthorizationFailed || !strings.Contains(r.Err.Error(), "may not write any topic") || r.MaybeWritten {
		t.Fatalf("a record with ids refused: %+v", r)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("failed after %v, as late as its delivery timeout", d)
	}
	cl.Controller.RefuseProducerIDs(nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r = p.ProduceSync(ctx(t), client.Record{Topic: "t", Value: []byte("w")})[0]
		if r.Err == nil || time.Now().After(deadline) {
			break
		}
	}
	if r.Err != nil || r.Offset != 0 {
		t.Fatalf("a record once ids are allowed: %+v", r)
	}
}

// A topic missing from a client's filtered view (under an authorizer, the
// topics it may describe) may exist: as Kafka, the client answers
// TOPIC_AUTHORIZATION_FAILED for it, at once where it would have answered
// UNKNOWN_TOPIC_OR_PARTITION. A view of everything still says the topic
// does not exist.
func TestMissingTopicOfAFilteredView(t *testing.T) {
	for _, filtered := range []bool{true, false} {
		t.Run(fmt.Sprintf("filtered=%v", filtered), func(t *testing.T) {
			cl := clienttest.Start(t, 1)
			cl.Controller.SetFiltered(filtered)
			c := newClient(t, cl)
			createTopic(t, c, "seen", 1, nil)
			want := errs.UnknownTopicOrPartition
			if filtered {
				want = errs.TopicAuthorizationFailed
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			calls := map[string]func() error{
				"fetch": func() error {
					_, err := c.Fetch(ctx, client.FetchRequest{Topic: "hidden", Partition: 0})
					return err
				},
				"list offsets": func() error {
					_, err := c.ListOffsets(ctx, "hidden", nil, client.LatestOffset, skeinv1.IsolationLevel_READ_UNCOMMITTED)
					return err
				},
				"produce a batch": func() error {
					_, err := c.ProduceBatch(ctx, "hidden", 0, client.AcksAll, client.BatchIdentity{ProducerID: -1}, []client.Record{{Value: []byte("x")}})
					return err
				},
				"delete records": func() error {
					_, err := c.DeleteRecords(ctx, "hidden", map[int32]int64{0: 1})
					return err
				},
				"produce": func() error {
					p := c.NewProducer()
					defer p.Close(ctx)
					res := make(chan client.Result, 1)
					p.Produce(ctx, client.Record{Topic: "hidden", Value: []byte("x")}, func(r client.Result) { res <- r })
					return (<-res).Err
				},
			}
			for name, call := range calls {
				if err := call(); errs.Of(err) != want {
					t.Errorf("%s of a topic not in the view: %v, want %s", name, err, want.Name)
				}
			}
			// A topic in the view is served as ever.
			if _, err := c.Fetch(ctx, client.FetchRequest{Topic: "seen", Partition: 0}); err != nil {
				t.Errorf("fetch of a topic in the view: %v", err)
			}
		})
	}
}

// A fetch of a partition without a leader waits LeaderWait for one, then
// answers LEADER_NOT_AVAILABLE; one that comes within it is read from.
func TestFetchOfAnOfflinePartitionWaitsLeaderWait(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	produceN(t, c, "t", 1, 3)
	cl.Controller.SetLeader("t", 0, -1)
	if _, err := c.WaitMetadata(ctx(t), func(m *metadata.Image) bool {
		p, ok := m.Partition("t", 0)
		return ok && p.GetLeader() < 0
	}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := c.Fetch(ctx(t), client.FetchRequest{Topic: "t", Partition: 0, Offset: 0, LeaderWait: 300 * time.Millisecond})
	if took := time.Since(start); errs.Of(err) != errs.LeaderNotAvailable || took > 5*time.Second {
		t.Fatalf("fetch of an offline partition: %v after %v, want LEADER_NOT_AVAILABLE after about 300ms", err, took)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		cl.Controller.SetLeader("t", 0, 1)
	}()
	res, err := c.Fetch(ctx(t), client.FetchRequest{Topic: "t", Partition: 0, Offset: 0, LeaderWait: 10 * time.Second})
	if err != nil || len(res.Records) != 3 {
		t.Fatalf("fetch while the leader comes back: %+v %v, want the 3 records", res, err)
	}
}

// A context already done refuses every record unsent (never some written
// and some not); a producer's wait for metadata is bounded by max.block;
// a call waiting for metadata returns when its client closes; a closed
// producer's refusal is not retriable; an address that is not host:port
// is refused by New.
func TestProduceNeverWaitsPastItsBounds(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	p := c.NewProducer()
	done, cancel := context.WithCancel(ctx(t))
	cancel()
	recs := make([]client.Record, 40)
	for i := range recs {
		recs[i] = client.Record{Topic: "t", Value: []byte("v")}
	}
	for i, r := range p.ProduceSync(done, recs...) {
		if r.Err == nil || r.MaybeWritten {
			t.Fatalf("record %d under a cancelled context: %+v, want refused unsent", i, r)
		}
	}
	if n := len(cl.Storage[1].Batches("t", 0)); n != 0 {
		t.Fatalf("a cancelled context wrote %d batches", n)
	}
	if r := p.ProduceSync(ctx(t), client.Record{Topic: "t", Value: []byte("v"), Timestamp: -5, TimestampSet: true})[0]; errs.Of(r.Err) != errs.InvalidTimestamp {
		t.Errorf("a negative timestamp: %v, want INVALID_TIMESTAMP", r.Err)
	}
	if err := p.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	r := p.ProduceSync(ctx(t), client.Record{Topic: "t", Value: []byte("late")})[0]
	if !errors.Is(r.Err, client.ErrProducerClosed) || errs.IsRetriable(r.Err) {
		t.Errorf("a record after Close: %v, want ErrProducerClosed, not retriable", r.Err)
	}

	if _, err := client.New(client.Config{Controllers: []string{"::bad::addr"}}); errs.Of(err) != errs.InvalidRequest {
		t.Errorf("a controller address that is not host:port: %v, want INVALID_REQUEST", err)
	}

	// No controller answers: metadata never comes.
	lone, err := client.New(client.Config{Controllers: []string{cl.StorageAddr[1]}})
	if err != nil {
		t.Fatal(err)
	}
	q := lone.NewProducer(client.WithMaxBlock(300 * time.Millisecond))
	start := time.Now()
	if r := q.ProduceSync(context.Background(), client.Record{Topic: "t", Value: []byte("v")})[0]; r.Err == nil {
		t.Error("a record without metadata was acknowledged")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a produce without metadata took %v, past max.block of 300ms", took)
	}
	_ = q.Close(ctx(t))
	fetched := make(chan error, 1)
	go func() {
		_, err := lone.Fetch(context.Background(), client.FetchRequest{Topic: "t", Partition: 0})
		fetched <- err
	}()
	time.Sleep(100 * time.Millisecond)
	lone.Close()
	select {
	case err := <-fetched:
		if !errors.Is(err, client.ErrClientClosed) {
			t.Errorf("a fetch waiting for metadata when its client closed: %v, want ErrClientClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a fetch waiting for metadata did not return when its client closed")
	}
}

// A topic name Kafka's rule refuses is INVALID_TOPIC_EXCEPTION at once, not
// an unknown topic waited for.
func TestInvalidTopicNamesAreRefusedAtOnce(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	p := c.NewProducer()
	defer p.Close(ctx(t))
	start := time.Now()
	for _, name := range []string{"", "a b", ".."} {
		if r := p.ProduceSync(ctx(t), client.Record{Topic: name, Value: []byte("v")})[0]; errs.Of(r.Err) != errs.InvalidTopic {
			t.Errorf("produce to %q: %v, want INVALID_TOPIC_EXCEPTION", name, r.Err)
		}
		if _, err := c.Fetch(ctx(t), client.FetchRequest{Topic: name}); errs.Of(err) != errs.InvalidTopic {
			t.Errorf("fetch from %q: %v, want INVALID_TOPIC_EXCEPTION", name, err)
		}
		if _, err := c.ListOffsets(ctx(t), name, nil, client.LatestOffset, 0); errs.Of(err) != errs.InvalidTopic {
			t.Errorf("offsets of %q: %v, want INVALID_TOPIC_EXCEPTION", name, err)
		}
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the refusals took %v", took)
	}
}
