//go:build integration

package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"skein/libs/record"
)

// BenchmarkProduceRF3AcksAll produces 1 KiB records in 16-record batches
// straight to the partition leaders of a real 3-node cluster (RF=3,
// acks=all, min.insync.replicas=2) from 8 concurrent producers, and reports
// MB/s, records/s and per-request latency percentiles.
//
//	make build && go test -tags integration -run '^$' -bench ProduceRF3 -benchtime 20000x ./tests/cluster/
func BenchmarkProduceRF3AcksAll(b *testing.B) {
	const (
		recordSize  = 1024
		perBatch    = 16
		partitions  = 3
		concurrency = 8
	)
	c := Start(b, Options{StorageNodes: 3})
	cl := NewClient(b, c.ControllerAddrs())
	cl.CreateTopic("bench", partitions, 3, map[string]string{"min.insync.replicas": "2"})

	value := make([]byte, recordSize)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	build := func() []byte {
		bl := record.NewBuilder(record.DefaultBatchOptions())
		for i := 0; i < perBatch; i++ {
			bl.Append(time.Now().UnixMilli(), nil, value)
		}
		out, _, err := bl.Build(nil)
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	batch := build()
	// Each partition's leader may learn of the topic a moment after the client.
	for p := int32(0); p < partitions; p++ {
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			_, _, _, err := cl.ProduceOnce(context.Background(), "bench", p, batch, -1)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("partition %d not writable: %v", p, err)
			}
		}
	}
	var next atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var failures atomic.Int64
	b.SetBytes(int64(perBatch * recordSize))
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					break
				}
				t0 := time.Now()
				if _, _, _, err := cl.ProduceOnce(context.Background(), "bench", int32(i%partitions), batch, -1); err != nil {
					if failures.Add(1) <= 3 {
						b.Logf("produce failed: %v", err)
					}
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if f := failures.Load(); f > int64(b.N)/100 {
		b.Fatalf("%d of %d produces failed", f, b.N)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
	}
	recs := float64(len(lat) * perBatch)
	b.ReportMetric(recs/elapsed.Seconds(), "records/s")
	b.ReportMetric(recs*recordSize/elapsed.Seconds()/1e6, "MB/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.Log(fmt.Sprintf("%d batches in %v, %d failed", len(lat), elapsed, failures.Load()))
}
