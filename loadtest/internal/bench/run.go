// Package bench is skein-bench's engine: produce and consume load through
// the gateway (gRPC ProduceStream, unary gRPC, REST) or straight to the
// storage nodes (libs/client), measured with log-linear histograms, and the
// raw limits of the machine (sequential fsynced writes, loopback TCP) that
// its figures are compared with.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"skein/libs/record"
	"skein/loadtest/internal/rate"
)

// Topic says which topic to use and how to create it when it is missing.
type Topic struct {
	Name              string
	Create            bool
	Partitions        int // also how many partitions records are spread over
	ReplicationFactor int // 0: the cluster's default
	Configs           map[string]string
}

// ProduceConfig is one produce run.
type ProduceConfig struct {
	Transport   string
	Endpoints   Endpoints
	Topic       Topic
	RecordSize  int
	NumRecords  int64         // 0: until Duration
	Duration    time.Duration // 0: until NumRecords
	Rate        float64       // records/s over all workers; <= 0 unlimited
	Acks        int
	Batch       int // records per request
	Concurrency int // workers (a stream or connection each)
	InFlight    int // unanswered requests per stream (grpc-stream) or in all (direct)
	// Keyless sends records with neither a key nor a partition, for the
	// producer to place (the gateway's, or libs/client's with direct and
	// txn): one partition per batch, as Kafka's default partitioner does.
	// Otherwise each request names a partition, in turn over the topic's.
	Keyless bool
	// ProducerBatchSize is libs/client's batch.size in bytes with transport
	// direct; 0 keeps its default (256 KiB).
	ProducerBatchSize int
	// TxnRecords: with transport txn, records per transaction (100).
	TxnRecords int
	// Compression is the codec of the batches for a topic whose
	// compression.type is producer: through the gateway it travels in each
	// request; direct and txn producers encode with it. "" keeps the
	// default (the gateway's, none for direct).
	Compression string
	// Warmup is produced at the same rate before the measured run and not
	// counted: first connections, producer ids, the batching steady state.
	Warmup   time.Duration
	Progress time.Duration
	Log      io.Writer // progress lines
}

func (c *ProduceConfig) defaults() error {
	if c.Transport == Tail {
		return fmt.Errorf("--transport %s consumes only", Tail)
	}
	if c.Compression != "" {
		if _, err := record.ParseCompression(c.Compression); err != nil {
			return fmt.Errorf("--compression %q: not one of none, gzip, snappy, lz4, zstd", c.Compression)
		}
	}
	if c.RecordSize <= 0 {
		c.RecordSize = 1024
	}
	if c.ProducerBatchSize < 0 {
		return fmt.Errorf("--producer-batch-size %d: want a number of bytes, or 0 for the client's default", c.ProducerBatchSize)
	}
	if c.ProducerBatchSize > 0 && c.Transport != Direct {
		return fmt.Errorf("--producer-batch-size is libs/client's batch.size: only with --transport %s", Direct)
	}
	c.Batch = max(c.Batch, 1)
	c.Concurrency = max(c.Concurrency, 1)
	c.InFlight = max(c.InFlight, 1)
	if c.TxnRecords <= 0 {
		c.TxnRecords = 100
	}
	c.Topic.Partitions = max(c.Topic.Partitions, 1)
	if c.NumRecords <= 0 && c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.Topic.Name == "" {
		return errors.New("a topic is required")
	}
	return nil
}

// openAdmin connects the transport's admin surface (Direct: libs/client;
// otherwise the gateway's gRPC API, or REST for REST).
func openAdmin(ctx context.Context, transport string, ep Endpoints, topic string) (admin, func() error, error) {
	switch transport {
	case REST:
		r := newREST(ep.REST, topic, -1, 1)
		return r, r.close, nil
	case Direct, Txn:
		d, err := newDirect(ctx, ep.Controllers, topic, -1, 1, record.None, 0)
		if err != nil {
			return nil, nil, err
		}
		return d, d.close, nil
	case GRPC, GRPCStream:
		g, err := newGatewayGRPC(ep.Gateway, topic, -1)
		if err != nil {
			return nil, nil, err
		}
		return g, g.close, nil
	case Tail:
		g, err := newGatewayTail(ep.Gateway, topic)
		if err != nil {
			return nil, nil, err
		}
		return g, g.close, nil
	}
	return nil, nil, fmt.Errorf("unknown transport %q: want %s, %s, %s, %s, %s or %s", transport, GRPCStream, GRPC, REST, Direct, Txn, Tail)
}

// ensureTopic creates the topic when asked (an existing one is fine) and
// answers its partition count once every partition has a leader and all its
// replicas in sync, so that a run does not time a fresh topic's start-up.
func ensureTopic(ctx context.Context, a admin, t Topic) (int, error) {
	if t.Create {
		if err := a.createTopic(ctx, t.Name, t.Partitions, t.ReplicationFactor, t.Configs); err != nil && !alreadyExists(err) {
			return 0, fmt.Errorf("creating topic %s: %w", t.Name, err)
		}
	}
	var lastErr error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		ps, err := a.partitions(ctx, t.Name)
		if err != nil {
			lastErr = err
			continue
		}
		lastErr = fmt.Errorf("no partitions yet")
		ready := len(ps) > 0
		for i, p := range ps {
			if p.leader < 0 || p.isr < p.replicas {
				ready, lastErr = false, fmt.Errorf("partition %d: leader %d, %d of %d replicas in sync", i, p.leader, p.isr, p.replicas)
				break
			}
		}
		if ready {
			return len(ps), nil
		}
	}
	return 0, fmt.Errorf("topic %s: %v", t.Name, lastErr)
}

// Produce runs a produce load and returns its summary.
func Produce(ctx context.Context, cfg ProduceConfig) (Summary, error) {
	if err := cfg.defaults(); err != nil {
		return Summary{}, err
	}
	adm, closeAdm, err := openAdmin(ctx, cfg.Transport, cfg.Endpoints, cfg.Topic.Name)
	if err != nil {
		return Summary{}, err
	}
	nParts, err := ensureTopic(ctx, adm, cfg.Topic)
	closeAdm()
	if err != nil {
		return Summary{}, err
	}

	// One sender per worker (a stream, a connection), or one shared client.
	senders := make([]sender, cfg.Concurrency)
	var closers []func() error
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	switch cfg.Transport {
	case GRPCStream, GRPC:
		g, err := newGatewayGRPC(cfg.Endpoints.Gateway, cfg.Topic.Name, cfg.Acks)
		if err != nil {
			return Summary{}, err
		}
		g.compression = cfg.Compression
		closers = append(closers, g.close)
		for i := range senders {
			if cfg.Transport == GRPC {
				senders[i] = g
				continue
			}
			s, err := newStreamSender(g, cfg.InFlight)
			if err != nil {
				return Summary{}, err
			}
			senders[i] = s
		}
	case REST:
		r := newREST(cfg.Endpoints.REST, cfg.Topic.Name, cfg.Acks, cfg.Concurrency)
		r.compression = cfg.Compression
		closers = append(closers, r.close)
		for i := range senders {
			senders[i] = r
		}
	case Direct:
		d, err := newDirect(ctx, cfg.Endpoints.Controllers, cfg.Topic.Name, cfg.Acks, cfg.InFlight, codec(cfg.Compression), cfg.ProducerBatchSize)
		if err != nil {
			return Summary{}, err
		}
		closers = append(closers, d.close)
		for i := range senders {
			senders[i] = d
		}
	case Txn:
		c, err := newTxnClient(ctx, cfg.Endpoints.Controllers)
		if err != nil {
			return Summary{}, err
		}
		closers = append(closers, func() error { c.Close(); return nil })
		for i := range senders {
			ts, err := newTxnSender(ctx, c, cfg.Topic.Name, fmt.Sprintf("skein-bench-%d-%d", os.Getpid(), i), cfg.TxnRecords, codec(cfg.Compression))
			if err != nil {
				return Summary{}, err
			}
			closers = append([]func() error{ts.close}, closers...) // before the client closes
			senders[i] = ts
		}
	}

	if cfg.Warmup > 0 {
		wctx, cancel := context.WithTimeout(ctx, cfg.Warmup)
		produceLoad(ctx, wctx, cfg, senders, nParts, 0, newStats())
		cancel()
	}
	runCtx := ctx
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	st := newStats()
	stop := make(chan struct{})
	go st.progress(cfg.Log, cfg.Progress, "produced", stop)
	produceLoad(ctx, runCtx, cfg, senders, nParts, cfg.NumRecords, st)
	close(stop)
	acks := cfg.Acks
	return st.summary(Summary{Mode: "produce", Transport: cfg.Transport, Topic: cfg.Topic.Name, Acks: &acks, RecordSize: cfg.RecordSize,
		Batch: cfg.Batch, Concurrency: cfg.Concurrency, InFlight: cfg.InFlight, Keyless: cfg.Keyless, TargetRate: max(cfg.Rate, 0)}), nil
}

// produceLoad runs the workers until runCtx ends or num records (if > 0)
// were sent, and waits for every answer; requests are bound to ctx.
func produceLoad(ctx, runCtx context.Context, cfg ProduceConfig, senders []sender, nParts int, num int64, st *stats) {
	pacer := rate.New(cfg.Rate)
	var vals valuePool
	var claimed atomic.Int64
	var inflight sync.WaitGroup
	var workers sync.WaitGroup
	for w := 0; w < cfg.Concurrency; w++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			s := senders[w]
			part := int32(w % nParts)
			for runCtx.Err() == nil {
				n := int64(cfg.Batch)
				if num > 0 {
					got := claimed.Add(n)
					if got-n >= num {
						return
					}
					n = min(n, num-(got-n))
				}
				due, err := pacer.Wait(runCtx, int(n))
				if err != nil {
					return
				}
				values := vals.get(int(n))
				for i := range values {
					values[i] = Payload(values[i], cfg.RecordSize, due)
				}
				inflight.Add(1)
				to := part
				if cfg.Keyless {
					to = -1
				}
				s.send(ctx, to, values, func(failed int, err error) {
					defer inflight.Done()
					if failed == 0 && err == nil {
						vals.put(values)
					}
					lat := time.Since(due)
					if ok := n - int64(failed); ok > 0 {
						st.ok(ok, ok*int64(cfg.RecordSize), lat)
					}
					if failed > 0 || err != nil {
						st.fail(int64(failed), err)
					}
				})
				part = (part + 1) % int32(nParts)
			}
		}()
	}
	workers.Wait()
	inflight.Wait()
}

// valuePool recycles a request's values once it is answered in full: every
// sender is done with them by then (a failed request's are left to the
// garbage collector, in case a retry still holds them). A value allocated
// per record made the garbage collector a quarter of the load generator's
// CPU, on the cores the servers it measures run on.
type valuePool struct{ p sync.Pool }

// get returns n values, each with whatever capacity it had.
func (v *valuePool) get(n int) [][]byte {
	if b, _ := v.p.Get().(*[][]byte); b != nil && cap(*b) >= n {
		return (*b)[:n]
	}
	return make([][]byte, n)
}

func (v *valuePool) put(values [][]byte) { v.p.Put(&values) }

// ConsumeConfig is one consume run: a worker per partition reading from
// the earliest (or latest) offset until NumRecords, Duration, or no new
// record for IdleTimeout.
type ConsumeConfig struct {
	Transport   string
	Endpoints   Endpoints
	Topic       string
	FromLatest  bool
	NumRecords  int64
	Duration    time.Duration
	IdleTimeout time.Duration
	MaxRecords  int           // per fetch
	MaxWait     time.Duration // long-poll per fetch
	MinBytes    int32         // bytes a fetch waits for, up to MaxWait (0: any)
	Progress    time.Duration
	Log         io.Writer
}

// Consume runs a consume load and returns its summary.
func Consume(ctx context.Context, cfg ConsumeConfig) (Summary, error) {
	if cfg.Transport == GRPCStream {
		cfg.Transport = GRPC
	}
	if cfg.MaxRecords <= 0 {
		cfg.MaxRecords = 2000
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 500 * time.Millisecond
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 5 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	adm, closeAdm, err := openAdmin(ctx, cfg.Transport, cfg.Endpoints, cfg.Topic)
	if err != nil {
		return Summary{}, err
	}
	defer closeAdm()
	n, err := ensureTopic(ctx, adm, Topic{Name: cfg.Topic})
	if err != nil {
		return Summary{}, err
	}
	start, err := adm.offsets(ctx, cfg.Topic, cfg.FromLatest)
	if err != nil {
		return Summary{}, err
	}
	f := adm.(fetcher)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.Duration > 0 {
		runCtx, cancel = context.WithTimeout(runCtx, cfg.Duration)
		defer cancel()
	}
	st := newStats()
	stop := make(chan struct{})
	go st.progress(cfg.Log, cfg.Progress, "consumed", stop)
	var total atomic.Int64
	var wg sync.WaitGroup
	for p := 0; p < n; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			off := start[int32(p)]
			lastData := time.Now()
			for runCtx.Err() == nil {
				t0 := time.Now()
				vals, next, err := f.fetch(runCtx, int32(p), off, fetchLimits{maxRecords: cfg.MaxRecords, maxWait: cfg.MaxWait, minBytes: cfg.MinBytes})
				now := time.Now()
				if err != nil {
					if runCtx.Err() != nil {
						return
					}
					st.fail(0, err)
					time.Sleep(100 * time.Millisecond)
					continue
				}
				var bytes int64
				for _, v := range vals {
					bytes += int64(len(v))
					if sent, ok := SentAt(v); ok {
						st.endToEnd(now.Sub(sent))
					}
				}
				if len(vals) > 0 {
					st.fetched(int64(len(vals)), bytes, now.Sub(t0))
					lastData = now
					if cfg.NumRecords > 0 && total.Add(int64(len(vals))) >= cfg.NumRecords {
						cancel()
						return
					}
				} else if now.Sub(lastData) > cfg.IdleTimeout {
					return
				}
				if next > off {
					off = next
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	return st.summary(Summary{Mode: "consume", Transport: cfg.Transport, Topic: cfg.Topic, Concurrency: n}), nil
}
