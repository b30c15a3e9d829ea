package client_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"skein/libs/client"
	"skein/libs/client/clienttest"
)

// BenchmarkProduce measures the producer's own cost per record: 1 KiB
// records, round-robin over three partitions led by three fake storage
// nodes in this process (which append to memory and answer at once), with
// the producer's defaults. The fake nodes' cost is in the figure too, the
// same for every build of the producer, so compare builds by their ratio:
//
//	go test -run '^$' -bench BenchmarkProduce -benchmem skein/libs/client
func BenchmarkProduce(b *testing.B) {
	cl := clienttest.Start(b, 3)
	c, err := client.New(client.Config{Controllers: []string{cl.ControllerAddr}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, client.TopicSpec{Name: "t", Partitions: 3, ReplicationFactor: 1}); err != nil {
		b.Fatal(err)
	}
	p := c.NewProducer()
	defer p.Close(ctx)
	value := make([]byte, 1024)
	parts := [3]int32{0, 1, 2}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	done := func(r client.Result) {
		if r.Err != nil {
			mu.Lock()
			failed = r.Err
			mu.Unlock()
		}
		wg.Done()
	}
	// The topic's metadata and every partition's stream, before the clock.
	for i := range parts {
		if r := p.ProduceSync(ctx, client.Record{Topic: "t", Partition: &parts[i], Value: value})[0]; r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	b.ResetTimer()
	wg.Add(b.N)
	for i := 0; i < b.N; i++ {
		p.Produce(ctx, client.Record{Topic: "t", Partition: &parts[i%3], Value: value}, done)
	}
	wg.Wait()
	b.StopTimer()
	if failed != nil {
		b.Fatal(failed)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
