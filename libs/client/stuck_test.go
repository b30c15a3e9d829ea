package client_test

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"skein/libs/client"
	"skein/libs/client/clienttest"
	"skein/libs/metadata"
)

// A leader that stops reading (paused, or its disk stuck) fills its
// produce stream's flow-control window; the producer keeps sending to
// every other node meanwhile, and once the node reads again every record
// is delivered once, in order.
func TestStalledBrokerDoesNotHoldOtherBrokers(t *testing.T) {
	cl := clienttest.Start(t, 2)
	c := newClient(t, cl)
	const parts = 8 // even partitions on broker 1, odd ones on broker 2
	createTopic(t, c, "t", parts, nil)
	p := c.NewProducer(client.WithBatchSize(512<<10), client.WithRequestTimeout(30*time.Second), client.WithDeliveryTimeout(time.Minute))
	defer p.Close(ctx(t))
	for part := range int32(parts) {
		if r := p.ProduceSync(ctx(t), client.Record{Topic: "t", Partition: &part, Value: []byte("first")})[0]; r.Err != nil {
			t.Fatal(r.Err)
		}
	}

	release := cl.Storage[1].Stall()
	defer release()
	const perPartition = 200
	// 4 partitions × 5 batches in flight × 512 KiB is past the stream's
	// 8 MiB window: Send blocks on it.
	value := make([]byte, 16<<10)
	var recs []client.Record
	for part := int32(0); part < parts; part += 2 {
		for i := range perPartition {
			recs = append(recs, client.Record{Topic: "t", Partition: &part, Value: append([]byte(fmt.Sprintf("%d-%04d-", part, i)), value...)})
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []error
	wg.Add(len(recs))
	p.ProduceAll(ctx(t), recs, func(_ int, r client.Result) {
		defer wg.Done()
		if r.Err != nil {
			mu.Lock()
			failed = append(failed, r.Err)
			mu.Unlock()
		}
	})
	time.Sleep(500 * time.Millisecond) // the sender is at the stalled window

	acknowledgedBeside(t, p, 1)

	release()
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d records failed, first: %v", len(failed), failed[0])
	}
	for part := int32(0); part < parts; part += 2 {
		var got []string
		for off := int64(0); off < perPartition+1; {
			res, err := c.Fetch(ctx(t), client.FetchRequest{Topic: "t", Partition: part, Offset: off, MaxBytes: 8 << 20})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Records) == 0 {
				break
			}
			for _, r := range res.Records {
				got = append(got, string(r.Value))
			}
			off = res.Records[len(res.Records)-1].Offset + 1
		}
		if len(got) != perPartition+1 {
			t.Fatalf("partition %d holds %d records, want %d", part, len(got), perPartition+1)
		}
		for i, v := range got[1:] {
			if want := fmt.Sprintf("%d-%04d-", part, i); !strings.HasPrefix(v, want) || len(v) != len(want)+len(value) {
				t.Fatalf("partition %d record %d is %q… (%d bytes), want %q and %d bytes", part, i+1, v[:min(len(v), 9)], len(v), want, len(want)+len(value))
			}
		}
	}
}

// Requests that timed out unanswered on a stream still hold its window
// until the node reads them: a node that stopped reading after taking
// 7 MiB of batches whose delivery timeout passed does not get the next
// requests on the producer's own goroutine, where a Send would wait for
// the node, and the producer keeps serving the other broker.
func TestTimedOutRequestsStillHoldTheWindow(t *testing.T) {
	cl := clienttest.Start(t, 2)
	c := newClient(t, cl)
	const parts = 8 // even partitions on broker 1, odd ones on broker 2
	createTopic(t, c, "t", parts, nil)
	p := c.NewProducer(client.WithLinger(-1), client.WithRequestTimeout(30*time.Second))
	defer p.Close(ctx(t))
	hasty := c.NewProducer(client.WithLinger(-1), client.WithDeliveryTimeout(400*time.Millisecond))
	defer hasty.Close(ctx(t))
	for part := range int32(parts) {
		for _, pr := range []*client.Producer{p, hasty} {
			if r := pr.ProduceSync(ctx(t), client.Record{Topic: "t", Partition: &part, Value: []byte("first")})[0]; r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}

	release := cl.Storage[1].Stall()
	defer release()
	// The node reads one request more before it stops: a small one, so
	// that it gives back no window.
	zero := int32(0)
	hasty.Produce(ctx(t), client.Record{Topic: "t", Partition: &zero, Value: []byte("read")}, func(client.Result) {})
	time.Sleep(100 * time.Millisecond)
	var slow []client.Record
	for i := range 14 {
		part := int32(2 * (i % 4))
		slow = append(slow, client.Record{Topic: "t", Partition: &part, Value: make([]byte, 512<<10)})
	}
	var wg sync.WaitGroup
	wg.Add(len(slow))
	hasty.ProduceAll(ctx(t), slow, func(_ int, r client.Result) {
		defer wg.Done()
		if r.Err == nil {
			t.Error("a batch to the stalled node was acknowledged")
		}
	})
	wg.Wait() // every batch timed out; the node holds 7 MiB unread

	// Two requests for broker 1: 1.5 MiB (three partitions' batches), then
	// 100 KiB (the first partition's next batch). The first takes the
	// window's last MiB and leaves the rest queued in the connection; the
	// second's Send would wait for the node.
	var recs []client.Record
	for _, r := range []struct {
		part int32
		size int
	}{{0, 500 << 10}, {2, 500 << 10}, {4, 500 << 10}, {0, 100 << 10}} {
		recs = append(recs, client.Record{Topic: "t", Partition: &r.part, Value: make([]byte, r.size)})
	}
	p.ProduceAll(ctx(t), recs, func(int, client.Result) {})
	time.Sleep(200 * time.Millisecond) // the sender handed them to broker 1

	acknowledgedBeside(t, p, 2) // after each producer's first
}

// acknowledgedBeside produces a record to partition 1 (broker 2's) and
// fails the test unless it is acknowledged, at offset want, within 5 s.
func acknowledgedBeside(t *testing.T, p *client.Producer, want int64) {
	t.Helper()
	one := int32(1)
	start := time.Now()
	done := make(chan client.Result, 1)
	p.Produce(ctx(t), client.Record{Topic: "t", Partition: &one, Value: []byte("beside")}, func(r client.Result) { done <- r })
	select {
	case r := <-done:
		if r.Err != nil || r.Offset != want {
			t.Fatalf("broker 2's record: %+v, want offset %d", r, want)
		}
		t.Logf("broker 2 acknowledged %v after the produce, broker 1 stalled", time.Since(start).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("broker 2's record waits on the stalled broker 1")
	}
}

// A leader whose address takes connections and never answers (a node cut
// off mid-handshake) holds only its own partitions' records while the
// producer's connection to it waits to open.
func TestUnreachableBrokerDoesNotHoldOtherBrokers(t *testing.T) {
	cl := clienttest.Start(t, 2)
	c := newClient(t, cl)
	createTopic(t, c, "t", 2, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	var mu sync.Mutex
	var conns []net.Conn
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, conn := range conns {
			conn.Close()
		}
	}()
	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn) // held open, never read or written
			mu.Unlock()
		}
	}()
	cl.Controller.AddBroker(1, lis.Addr().String())
	if _, err := c.WaitMetadata(ctx(t), func(m *metadata.Image) bool {
		b, ok := m.Broker(1)
		return ok && b.GetGrpcAddr() == lis.Addr().String()
	}); err != nil {
		t.Fatal(err)
	}

	p := c.NewProducer(client.WithLinger(-1), client.WithRequestTimeout(30*time.Second))
	defer p.Close(ctx(t))
	zero, one := int32(0), int32(1)
	stuck := make(chan client.Result, 1)
	p.Produce(ctx(t), client.Record{Topic: "t", Partition: &zero, Value: []byte("to the black hole")}, func(r client.Result) { stuck <- r })
	time.Sleep(300 * time.Millisecond) // the sender is opening broker 1's stream
	start := time.Now()
	r := p.ProduceSync(ctx(t), client.Record{Topic: "t", Partition: &one, Value: []byte("beside")})[0]
	if r.Err != nil || r.Offset != 0 {
		t.Fatalf("broker 2's record: %+v", r)
	}
	t.Logf("broker 2 acknowledged after %v", time.Since(start))
	if took := time.Since(start); took > time.Second {
		t.Fatalf("broker 2 acknowledged after %v: it waited on broker 1's connection", took)
	}
	select {
	case r := <-stuck:
		t.Fatalf("the record to the unreachable broker was answered: %+v", r)
	default:
	}
	// Its partition moves (the node was fenced): the record goes there.
	cl.Controller.SetLeader("t", 0, 2)
	select {
	case r := <-stuck:
		if r.Err != nil || r.Offset != 0 {
			t.Fatalf("the record once its partition moved: %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer 5 s after the partition moved off the unreachable broker")
	}
}
