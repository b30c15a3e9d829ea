package client_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"skein/libs/client"
	"skein/libs/client/clienttest"
	"skein/libs/errs"
)

// A record of 1 KiB counts 1,088 bytes against the buffer (its framing
// included), so a 4 KiB buffer holds three.
const kib = 1024

func kibRecord(topic string, b byte) client.Record {
	return client.Record{Topic: topic, Partition: ptr[int32](0), Value: bytes.Repeat([]byte{b}, kib)}
}

// produceAsync1 starts one Produce on its own goroutine: returned is closed
// once Produce returns (the record is queued or refused), result receives
// its result.
func produceAsync1(t *testing.T, p *client.Producer, ctx context.Context, r client.Record) (returned chan struct{}, result chan client.Result) {
	t.Helper()
	returned, result = make(chan struct{}), make(chan client.Result, 1)
	go func() {
		defer close(returned)
		p.Produce(ctx, r, func(res client.Result) { result <- res })
	}()
	return returned, result
}

// While the buffer is full, Produce waits; an answer makes room, and the
// waiting record is then written after the others, in order.
func TestBufferMemoryMakesProduceWait(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	p := c.NewProducer(client.WithBufferMemory(4*kib), client.WithLinger(time.Hour))
	defer p.Close(ctx(t))
	// An answered first record, so that later batches under the producer
	// id need not go out one at a time.
	if r := p.ProduceSync(ctx(t), kibRecord("t", 9))[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	release := cl.Storage[1].HoldAnswers("t", 0)
	defer release()

	atNode := func() int {
		n := 0
		for _, b := range cl.Storage[1].Batches("t", 0) {
			n += int(b.LastOffsetDelta()) + 1
		}
		return n
	}
	waitAtNode := func(want int, what string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); atNode() != want; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d records at the node %s, want %d", atNode(), what, want)
			}
		}
	}
	var results []chan client.Result
	for i := range 3 {
		returned, result := produceAsync1(t, p, ctx(t), kibRecord("t", byte(i)))
		select {
		case <-returned:
		case <-time.After(10 * time.Second):
			t.Fatalf("record %d of three waited with room in the buffer", i)
		}
		results = append(results, result)
		if i == 0 {
			// Out at once (its partition was idle); the next two linger
			// behind it.
			waitAtNode(2, "after the first of three")
		}
	}
	returned, result := produceAsync1(t, p, ctx(t), kibRecord("t", 3))
	select {
	case <-returned:
		t.Fatal("a fourth record was queued with the buffer full")
	case r := <-result:
		t.Fatalf("a fourth record was answered with the buffer full: %+v", r)
	case <-time.After(300 * time.Millisecond):
	}
	// Waiting for room, the producer sends what it holds without its hour
	// of linger: the lingering two reach the node.
	waitAtNode(4, "while Produce waits for room")
	release()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("the fourth Produce still waits after the answers made room")
	}
	results = append(results, result)
	if err := p.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	for i, ch := range results {
		if r := <-ch; r.Err != nil || r.Offset != int64(i+1) {
			t.Errorf("record %d: %+v, want offset %d", i, r, i+1)
		}
	}
}

// A wait longer than max.block fails the record, unwritten, with
// REQUEST_TIMED_OUT; so does a ctx that ends first. The records before
// it are not disturbed.
func TestBufferMemoryWaitIsBounded(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	p := c.NewProducer(client.WithBufferMemory(2*kib+200), client.WithMaxBlock(200*time.Millisecond))
	defer p.Close(ctx(t))
	release := cl.Storage[1].HoldAnswers("t", 0)
	defer release()
	first := make([]chan client.Result, 2)
	for i := range first {
		var returned chan struct{}
		returned, first[i] = produceAsync1(t, p, ctx(t), kibRecord("t", byte(i)))
		<-returned
	}

	start := time.Now()
	r := p.ProduceSync(ctx(t), kibRecord("t", 9))[0]
	if errs.Of(r.Err) != errs.RequestTimedOut || r.MaybeWritten {
		t.Fatalf("a record past max.block: %+v, want REQUEST_TIMED_OUT, not written", r)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("refused after %v, before max.block (200ms)", d)
	}
	cctx, cancel := context.WithCancel(ctx(t))
	returned, result := produceAsync1(t, p, cctx, kibRecord("t", 8))
	cancel()
	<-returned
	if r := <-result; errs.Of(r.Err) != errs.RequestTimedOut {
		t.Fatalf("a record whose ctx ended while it waited: %+v, want REQUEST_TIMED_OUT", r)
	}

	release()
	for i, ch := range first {
		if r := <-ch; r.Err != nil || r.Offset != int64(i) {
			t.Errorf("record %d: %+v, want offset %d", i, r, i)
		}
	}
	if got := values(t, cl.Storage[1], "t"); len(got) != 2 {
		t.Errorf("%d records at the node, want the first 2 only", len(got))
	}
	// The buffer is empty again: the producer goes on.
	if r := p.ProduceSync(ctx(t), kibRecord("t", 2))[0]; r.Err != nil || r.Offset != 2 {
		t.Errorf("a record after the refusals: %+v, want offset 2", r)
	}
}

// A record larger than the whole buffer could never fit: MESSAGE_TOO_LARGE
// at once, and the producer goes on.
func TestRecordLargerThanTheBuffer(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	p := c.NewProducer(client.WithBufferMemory(kib))
	defer p.Close(ctx(t))
	if r := p.ProduceSync(ctx(t), kibRecord("t", 0))[0]; errs.Of(r.Err) != errs.MessageTooLarge || r.MaybeWritten {
		t.Fatalf("a record above buffer.memory: %+v, want MESSAGE_TOO_LARGE, not written", r)
	}
	if r := p.ProduceSync(ctx(t), client.Record{Topic: "t", Value: []byte("small")})[0]; r.Err != nil || r.Offset != 0 {
		t.Errorf("a small record after it: %+v, want offset 0", r)
	}
}

// A record still without an answer when ProduceSync's context ends is in
// flight, and may be written: it answers REQUEST_TIMED_OUT with
// MaybeWritten set (the gateway's UNKNOWN), never as not written — a
// caller that retried on that would write it twice.
func TestProduceSyncTimeoutMayHaveWritten(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	p := c.NewProducer()
	defer p.Close(ctx(t))
	release := cl.Storage[1].HoldAnswers("t", 0)
	defer release()
	short, cancel := context.WithTimeout(ctx(t), 200*time.Millisecond)
	defer cancel()
	r := p.ProduceSync(short, kibRecord("t", 1))[0]
	if errs.Of(r.Err) != errs.RequestTimedOut || !r.MaybeWritten {
		t.Fatalf("a record in flight when the context ended: %+v, want REQUEST_TIMED_OUT, maybe written", r)
	}
	release()
	if err := p.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if n := len(cl.Storage[1].Batches("t", 0)); n != 1 {
		t.Fatalf("%d batches at the node, want the timed-out record's", n)
	}
}

// Flush returns once every callback has returned, not merely once every
// record has its result: a caller reading what its callbacks wrote right
// after Flush sees all of it.
func TestFlushWaitsForTheCallbacks(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	p := c.NewProducer()
	defer p.Close(ctx(t))
	gate := make(chan struct{})
	var got client.Result
	p.Produce(ctx(t), kibRecord("t", 1), func(r client.Result) {
		<-gate
		got = r
	})
	flushed := make(chan error, 1)
	go func() { flushed <- p.Flush(ctx(t)) }()
	select {
	case err := <-flushed:
		t.Fatalf("Flush returned (%v) while a callback was still running", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(gate)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if got.Err != nil || got.Offset != 0 {
		t.Fatalf("the callback's result, read after Flush: %+v", got)
	}
}

// Flush waits for the records produced before it began, as Kafka's does,
// not for the records other goroutines go on producing while it waits.
func TestFlushWaitsOnlyForTheRecordsBeforeIt(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 2, nil)
	st := cl.Storage[1]
	p := c.NewProducer()
	defer p.Close(ctx(t))
	releaseEarlier := st.HoldAnswers("t", 0)
	defer releaseEarlier()
	earlier := make(chan client.Result, 1)
	p.Produce(ctx(t), client.Record{Topic: "t", Partition: ptr(int32(0)), Value: []byte("before")}, func(r client.Result) { earlier <- r })
	flushed := make(chan error, 1)
	go func() { flushed <- p.Flush(ctx(t)) }()
	select {
	case err := <-flushed:
		t.Fatalf("Flush returned (%v) with an earlier record unanswered", err)
	case <-time.After(200 * time.Millisecond): // Flush has begun
	}
	releaseLater := st.HoldAnswers("t", 1)
	defer releaseLater()
	later := make(chan client.Result, 1)
	p.Produce(ctx(t), client.Record{Topic: "t", Partition: ptr(int32(1)), Value: []byte("after")}, func(r client.Result) { later <- r })
	releaseEarlier()
	select {
	case err := <-flushed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Flush still waits, for a record produced after it began")
	}
	select {
	case r := <-earlier:
		if r.Err != nil || r.Offset != 0 {
			t.Fatalf("the earlier record: %+v", r)
		}
	default:
		t.Fatal("Flush returned before the earlier record's callback")
	}
	select {
	case r := <-later:
		t.Fatalf("the later record was answered while its answer is held: %+v", r)
	default:
	}
	releaseLater()
	if r := <-later; r.Err != nil || r.Offset != 0 {
		t.Fatalf("the later record: %+v", r)
	}
}

// recordInFlight starts a producer on a one-node cluster whose node has
// appended its second record and holds the answer until release.
func recordInFlight(t *testing.T) (cl *clienttest.Cluster, c *client.Client, p *client.Producer, release func(), inFlight chan client.Result) {
	t.Helper()
	cl = clienttest.Start(t, 1)
	c = newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	p = c.NewProducer()
	if r := p.ProduceSync(ctx(t), kibRecord("t", 1))[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	release = cl.Storage[1].HoldAnswers("t", 0)
	_, inFlight = produceAsync1(t, p, ctx(t), kibRecord("t", 2))
	for deadline := time.Now().Add(10 * time.Second); len(cl.Storage[1].Batches("t", 0)) < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			release()
			t.Fatal("the second record did not reach the node")
		}
	}
	return cl, c, p, release, inFlight
}

// A client closed before its producer (the wrong order, easy to get with
// defers) leaves no record unanswered: what was in flight fails, as a
// record produced afterwards does, and the producer's Close returns.
func TestClientClosedBeforeItsProducer(t *testing.T) {
	_, c, p, release, inFlight := recordInFlight(t)
	defer release()
	c.Close()
	select {
	case r := <-inFlight:
		if r.Err == nil || !r.MaybeWritten {
			t.Fatalf("a record in flight when the client closed: %+v, want an error, maybe written", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a record in flight when the client closed was never answered")
	}
	_, after := produceAsync1(t, p, ctx(t), kibRecord("t", 3))
	select {
	case r := <-after:
		if r.Err == nil {
			t.Fatalf("a record produced after the client closed: %+v, want an error", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a record produced after the client closed was never answered")
	}
	closeCtx, cancel := context.WithTimeout(ctx(t), 10*time.Second)
	defer cancel()
	if err := p.Close(closeCtx); err != nil {
		t.Fatalf("the producer's Close after its client's: %v", err)
	}
}

// A Close whose context ends with a record in flight answers it before it
// returns (an error, maybe written), and fails what was still queued (not
// written); the late answer of the node changes nothing.
func TestCloseAtItsDeadlineAnswersEveryRecord(t *testing.T) {
	cl, _, p, release, inFlight := recordInFlight(t)
	defer release()
	closeCtx, cancel := context.WithTimeout(ctx(t), 200*time.Millisecond)
	defer cancel()
	if err := p.Close(closeCtx); err == nil {
		t.Fatal("Close answered nil with a record unanswered at its deadline")
	}
	select {
	case r := <-inFlight:
		if r.Err == nil || !r.MaybeWritten {
			t.Fatalf("the record in flight when Close's context ended: %+v, want an error, maybe written", r)
		}
	default:
		t.Fatal("Close returned before answering the record in flight")
	}
	release()
	time.Sleep(50 * time.Millisecond) // the node's late answer comes and is ignored
	if got := len(cl.Storage[1].Batches("t", 0)); got != 2 {
		t.Fatalf("%d batches at the node, want 2", got)
	}
}
