package api

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
	"skein/libs/errs"
	"skein/libs/record"
	"skein/libs/rpcerr"
	"skein/libs/topicconfig"
	"skein/services/gateway/internal/budget"
)

// Producer is ProducerService. Unary produces share one producer per acks
// value and requested codec; each ProduceStream is its own idempotent
// producer session.
type Producer struct {
	skeinv1.UnimplementedProducerServiceServer

	c    *client.Client
	txns *client.Transactions // for transactional produces
	log  *slog.Logger
	opts []client.ProducerOption

	mu        sync.Mutex
	producers map[producerKey]*sharedProducer // guarded by mu
	closed    bool                            // guarded by mu
	// reaperStop, once closed, ends the goroutine ExpireIdle starts;
	// Close waits for it on reaper.
	reaperStop chan struct{}
	reaper     sync.WaitGroup

	drain    sync.Once
	draining chan struct{} // closed by Drain

	budget *budget.Budget             // nil: no budget
	exempt func(context.Context) bool // calls already charged elsewhere
}

// SetBudget charges every Produce call and every ProduceStream request its
// size against b while it is served, refusing what does not fit with
// THROTTLING_QUOTA_EXCEEDED; calls for which exempt answers true (REST's,
// charged as bodies) are not charged again. Call it before serving.
func (s *Producer) SetBudget(b *budget.Budget, exempt func(context.Context) bool) {
	s.budget, s.exempt = b, exempt
}

// charge holds size bytes of the budget for the call in ctx; ok is false
// when they do not fit now.
func (s *Producer) charge(ctx context.Context, size int) (h *budget.Hold, ok bool) {
	if s.budget == nil || (s.exempt != nil && s.exempt(ctx)) {
		return nil, true
	}
	h = s.budget.Hold()
	if !h.Grow(int64(size)) {
		s.budget.Throttled("grpc")
		return nil, false
	}
	return h, true
}

// Drain makes every ProduceStream stop taking requests, answer what it took
// and end, so a graceful stop does not wait for sessions that never close.
func (s *Producer) Drain() { s.drain.Do(func() { close(s.draining) }) }

// NewProducer serves ProducerService through c; opts apply to every
// producer it starts.
func NewProducer(c *client.Client, log *slog.Logger, opts ...client.ProducerOption) *Producer {
	return &Producer{c: c, txns: c.Transactions(), log: log, opts: opts, producers: map[producerKey]*sharedProducer{},
		draining: make(chan struct{}), reaperStop: make(chan struct{})}
}

// sharedProducer is a producer the Produce calls of one key share, with
// the calls using it now and since when none has.
type sharedProducer struct {
	p         *client.Producer
	users     int       // guarded by Producer.mu
	idleSince time.Time // guarded by Producer.mu; when users fell to 0
}

// ExpireIdle closes a shared producer that no Produce call has used for
// idle (each producer is one principal's, acks' and codec's: with many
// clients the gateway would otherwise keep every one it ever started),
// checking every idle/2 until Close. A call whose context ends returns
// before its records are settled: idle should be at least the producers'
// delivery timeout, by which they are.
func (s *Producer) ExpireIdle(idle time.Duration) {
	if idle <= 0 {
		return
	}
	s.reaper.Add(1)
	go func() {
		defer s.reaper.Done()
		t := time.NewTicker(idle / 2)
		defer t.Stop()
		for {
			select {
			case <-s.reaperStop:
				return
			case now := <-t.C:
				s.closeIdle(now, idle)
			}
		}
	}()
}

// closeIdle closes the shared producers idle since before now - idle. One
// that no call uses has nothing in flight once the delivery timeout has
// passed (see ExpireIdle).
func (s *Producer) closeIdle(now time.Time, idle time.Duration) {
	var gone []*client.Producer
	s.mu.Lock()
	for k, sp := range s.producers {
		if sp.users == 0 && now.Sub(sp.idleSince) >= idle {
			delete(s.producers, k)
			gone = append(gone, sp.p)
		}
	}
	s.mu.Unlock()
	for _, p := range gone {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := p.Close(ctx); err != nil {
			s.log.Warn("closing an idle shared producer", "err", err)
		}
		cancel()
	}
}

// Shared is how many shared producers are open (a metric).
func (s *Producer) Shared() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.producers)
}

// producerKey tells producers apart: a request's acks and the codec it
// asked for (noCodec: the gateway's own --compression).
type producerKey struct {
	acks  int
	codec record.Compression
	// principal is the client the producer writes for: batches never mix
	// two clients' records, so each storage node authorizes its client's.
	principal string
}

const noCodec record.Compression = -1

// newProducer starts a producer for key: the gateway's options, with the
// request's codec in place of the gateway's when it named one.
func (s *Producer) newProducer(key producerKey) *client.Producer {
	opts := append([]client.ProducerOption{client.WithAcks(key.acks), client.WithPrincipal(key.principal)}, s.opts...)
	if key.codec != noCodec {
		opts = append(opts, client.WithCompression(key.codec))
	}
	return s.c.NewProducer(opts...)
}

// parseCodec reads a request's compression: noCodec when it names none.
func parseCodec(name *string) (record.Compression, error) {
	if name == nil || *name == "" {
		return noCodec, nil
	}
	return record.ParseCompression(*name)
}

// Close flushes and stops the shared producers.
func (s *Producer) Close(ctx context.Context) error {
	s.mu.Lock()
	if !s.closed {
		close(s.reaperStop)
	}
	s.closed = true
	ps := s.producers
	s.producers = map[producerKey]*sharedProducer{}
	s.mu.Unlock()
	s.reaper.Wait() // it may be closing producers it took out
	var errList []error
	for _, sp := range ps {
		errList = append(errList, sp.p.Close(ctx))
	}
	return errors.Join(errList...)
}

// shared answers key's shared producer, started when there is none, and
// counts the caller as using it until release.
func (s *Producer) shared(key producerKey) (_ *client.Producer, release func(), _ error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, errs.Errorf(errs.BrokerNotAvailable, "the gateway is shutting down")
	}
	sp := s.producers[key]
	if sp == nil {
		sp = &sharedProducer{p: s.newProducer(key)}
		s.producers[key] = sp
	}
	sp.users++
	return sp.p, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if sp.users--; sp.users == 0 {
			sp.idleSince = time.Now()
		}
	}, nil
}

// prepared is a validated produce request.
type prepared struct {
	acks    int
	codec   record.Compression // noCodec: the gateway's
	records []client.Record
	// principal is the client it is written for (client.OnBehalfOf).
	principal string
	// With records refused one by one (a stream's): refused are the
	// records refused, and at[i] is the request's index of records[i]
	// (nil while none was refused).
	refused []refusedRecord
	at      []int
}

// refusedRecord is a record of a request refused on its own.
type refusedRecord struct {
	i   int // its index in the request
	err error
}

func (p *prepared) key() producerKey { return producerKey{p.acks, p.codec, p.principal} }

// prepare validates a produce request as a whole: topic, acks, partitions,
// record shapes and sizes. routePartition is the partition route's
// partition, if any. With perRecord, a record refused on its own (its
// shape, partition, timestamp or size) goes into refused and the others
// stay, as a Kafka producer refuses one send and not its neighbours;
// without, it refuses the request.
func (s *Producer) prepare(ctx context.Context, topic string, acks *int32, compression *string, routePartition *int32, recs []*skeinv1.ProduceRecord, perRecord bool) (*prepared, error) {
	a, err := validateAcks(acks)
	if err != nil {
		return nil, err
	}
	codec, err := parseCodec(compression)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, errs.Errorf(errs.InvalidRequest, "no records to produce")
	}
	if IsInternalTopic(topic) {
		// The coordinators' state: only they write it, as in Kafka.
		return nil, errs.Errorf(errs.InvalidTopic, "%s is an internal topic: only Skein's coordinators write to it", topic)
	}
	m, n, err := knownTopic(ctx, s.c, topic)
	if err != nil {
		return nil, err
	}
	if routePartition != nil {
		if err := checkPartition(topic, *routePartition, n); err != nil {
			return nil, err
		}
	}
	limit := client.MaxMessageBytes(m, topic)
	createTimes := client.CreateTimes(m, topic)
	keys := client.KeysRequired(m, topic)
	now := nowMs()
	tp := traceparent(ctx) // once per request, not per record
	out := &prepared{acks: a, codec: codec, records: make([]client.Record, 0, len(recs)), principal: client.PrincipalOf(ctx)}
	for i, pr := range recs {
		r, err := checkRecord(tp, topic, i, pr, now, routePartition, n, createTimes, keys, limit)
		if err != nil {
			if !perRecord {
				return nil, err
			}
			if out.at == nil {
				out.at = make([]int, len(out.records), len(recs))
				for j := range out.at {
					out.at[j] = j
				}
			}
			out.refused = append(out.refused, refusedRecord{i, err})
			continue
		}
		if out.at != nil {
			out.at = append(out.at, i)
		}
		out.records = append(out.records, r)
	}
	return out, nil
}

// checkRecord converts record i of a produce request and checks what
// concerns it alone: its shape, partition, key (keys says the topic needs
// one), timestamp and size.
func checkRecord(tp, topic string, i int, pr *skeinv1.ProduceRecord, now int64, routePartition *int32, partitions int32, createTimes topicconfig.CreateTimes, keys bool, limit int) (client.Record, error) {
	r, err := toClientRecord(tp, topic, i, pr, now)
	if err != nil {
		return client.Record{}, err
	}
	if routePartition != nil {
		if r.Partition != nil && *r.Partition != *routePartition {
			return client.Record{}, errs.Errorf(errs.InvalidRequest, "record %d names partition %d on the route of partition %d", i, *r.Partition, *routePartition)
		}
		r.Partition = routePartition
	}
	if r.Partition != nil {
		if err := checkPartition(topic, *r.Partition, partitions); err != nil {
			return client.Record{}, err
		}
	}
	if err := client.CheckKey(keys, topic, r.Key); err != nil {
		return client.Record{}, errs.Errorf(errs.InvalidRecord, "record %d has no key: %s", i, errs.Message(err))
	}
	if err := client.CheckCreateTime(createTimes, topic, r.Timestamp, now); err != nil {
		return client.Record{}, errs.Errorf(errs.InvalidTimestamp, "record %d: %s", i, errs.Message(err))
	}
	if size := client.SingleRecordBatchSize(r); size > limit {
		return client.Record{}, errs.Errorf(errs.MessageTooLarge, "record %d is %d bytes as a batch, above max.message.bytes %d of topic %q", i, size, limit, topic)
	}
	if !r.TimestampSet {
		// Checked at the gateway's clock; the client stamps it, and
		// knows it did (a retried batch is answered with the time its
		// first write stored).
		r.Timestamp = 0
	}
	return r, nil
}

// Produce writes records and answers one result per record, in order.
func (s *Producer) Produce(ctx context.Context, req *skeinv1.ProduceRequest) (*skeinv1.ProduceResponse, error) {
	size := proto.Size(req)
	hold, ok := s.charge(ctx, size)
	if !ok {
		return nil, s.budget.Status(int64(size))
	}
	defer hold.Release()
	p, err := s.prepare(ctx, req.GetTopic(), req.Acks, req.Compression, req.Partition, req.GetRecords(), false)
	if err != nil {
		return nil, err
	}
	var results []client.Result
	switch {
	case req.ProducerId != nil || req.ProducerEpoch != nil || req.BaseSequence != nil || req.GetTransactionalId() != "":
		id, err := identity(req)
		if err != nil {
			return nil, err
		}
		if p.acks != client.AcksAll {
			// As Kafka's idempotent and transactional producers: with
			// fewer acks a batch the partition refuses (a sequence gap,
			// a fenced epoch) goes unreported, and the next sequences or
			// the transaction's commit go on without it.
			return nil, errs.Errorf(errs.InvalidRequiredAcks, "a produce with a producer identity (producer_id, producer_epoch, base_sequence, transactional_id) needs acks -1 (all), got %d", p.acks)
		}
		// The gateway's own codec and delivery timeout, as its producers'.
		codec, timeout := client.ProducerSettings(s.opts...)
		id.Compression = codec
		if p.codec != noCodec {
			id.Compression = p.codec
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if id.TransactionalID != "" {
			// The partition joins the producer's open transaction (opening
			// one) before its records are written, so the coordinator ends
			// the transaction there too; a fenced or unknown producer is
			// refused here and nothing is written.
			if err = s.txns.AddPartitions(ctx, id.TransactionalID, id.ProducerID, id.ProducerEpoch,
				[]client.TopicPartition{{Topic: req.GetTopic(), Partition: req.GetPartition()}}); err != nil {
				return nil, err
			}
		}
		results, err = s.c.ProduceBatch(ctx, req.GetTopic(), req.GetPartition(), p.acks, id, p.records)
		if err != nil {
			results = make([]client.Result, len(p.records))
			for i := range results {
				results[i] = client.Result{Partition: req.GetPartition(), Offset: -1, Err: err, MaybeWritten: client.MaybeWritten(err)}
			}
		}
	default:
		prod, release, err := s.shared(p.key())
		if err != nil {
			return nil, err
		}
		results = prod.ProduceSync(ctx, p.records...)
		release()
	}
	resp := &skeinv1.ProduceResponse{Results: newResults(len(results))}
	for i, r := range results {
		setResult(resp.Results[i], r)
	}
	return resp, nil
}

// identity is the caller's idempotent or transactional identity, which only
// the partition route may carry, and only whole.
func identity(req *skeinv1.ProduceRequest) (client.BatchIdentity, error) {
	if req.Partition == nil {
		return client.BatchIdentity{}, errs.Errorf(errs.InvalidRequest, "producer_id, base_sequence and transactional_id need the request's partition (over REST, the route /v1/topics/{topic}/partitions/{partition}/records)")
	}
	if req.ProducerId == nil || req.ProducerEpoch == nil || req.BaseSequence == nil {
		return client.BatchIdentity{}, errs.Errorf(errs.InvalidRequest, "an idempotent produce needs producer_id, producer_epoch and base_sequence together")
	}
	switch {
	case *req.ProducerId < 0:
		return client.BatchIdentity{}, errs.Errorf(errs.InvalidRequest, "producer_id %d is negative", *req.ProducerId)
	case *req.ProducerEpoch < 0 || *req.ProducerEpoch > 32767:
		return client.BatchIdentity{}, errs.Errorf(errs.InvalidRequest, "producer_epoch %d is outside [0, 32767]", *req.ProducerEpoch)
	case *req.BaseSequence < 0:
		return client.BatchIdentity{}, errs.Errorf(errs.InvalidRequest, "base_sequence %d is negative", *req.BaseSequence)
	}
	if len(req.GetTransactionalId()) > MaxTransactionalIDLength {
		return client.BatchIdentity{}, errs.Errorf(errs.InvalidRequest, "the transactional id is %d bytes long, more than %d", len(req.GetTransactionalId()), MaxTransactionalIDLength)
	}
	return client.BatchIdentity{
		ProducerID: *req.ProducerId, ProducerEpoch: int16(*req.ProducerEpoch), BaseSequence: *req.BaseSequence,
		TransactionalID: req.GetTransactionalId(),
	}, nil
}

// ProduceStream is a pipelined, idempotent producer session: the stream has
// its own producers (one per acks value and codec, idempotent under acks=-1), and each
// request is answered by correlation id as soon as all its records are.
// A request that fails validation is answered with that error on each record
// (or one result when it has none); the stream goes on.
func (s *Producer) ProduceStream(stream skeinv1.ProducerService_ProduceStreamServer) error {
	ctx := stream.Context()
	producers := map[producerKey]*client.Producer{}
	answers := newStreamAnswers(stream)
	go answers.run()
	defer func() {
		answers.close()
		for _, p := range producers {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), client.DefaultRequestTimeout)
			if err := p.Close(cctx); err != nil {
				s.log.WarnContext(ctx, "closing a stream's producer", "err", err)
			}
			cancel()
		}
	}()
	type received struct {
		req *skeinv1.ProduceStreamRequest
		err error
	}
	// Recv runs apart so that Drain can end the session while it blocks; it
	// returns once the handler does and the stream is torn down.
	reqs := make(chan received)
	go func() {
		for {
			req, err := stream.Recv()
			select {
			case reqs <- received{req, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		var req *skeinv1.ProduceStreamRequest
		select {
		case r := <-reqs:
			if errors.Is(r.err, io.EOF) {
				return nil
			}
			if r.err != nil {
				return r.err
			}
			req = r.req
		case <-ctx.Done():
			// The client went away (cancelled, or its connection broke):
			// the receiver may have left without handing over its error.
			return status.FromContextError(ctx.Err()).Err()
		case <-s.draining:
			// The requests taken are answered before the status (see
			// the deferred close); the status tells the client that the
			// rest were not, and so were not written.
			return rpcerr.ToGRPC(errs.Errorf(errs.BrokerNotAvailable,
				"the gateway is shutting down: a request this stream did not answer was not written; send it again on a new stream"))
		}
		// A request the budget cannot take now is answered like one that
		// fails validation (nothing sent; retriable); the stream goes on.
		size := proto.Size(req)
		hold, ok := s.charge(ctx, size)
		var p *prepared
		var err error
		if ok {
			p, err = s.prepare(ctx, req.GetTopic(), req.Acks, req.Compression, nil, req.GetRecords(), true)
		} else {
			err = s.budget.Error(int64(size))
		}
		if err != nil {
			hold.Release()
			n := max(len(req.GetRecords()), 1)
			resp := &skeinv1.ProduceStreamResponse{CorrelationId: req.GetCorrelationId()}
			for i := 0; i < n; i++ {
				resp.Results = append(resp.Results, toResult(client.Result{Partition: -1, Offset: -1, Err: err}))
			}
			answers.expect()
			answers.ready(resp, nil)
			continue
		}
		resp := &skeinv1.ProduceStreamResponse{CorrelationId: req.GetCorrelationId(), Results: newResults(len(req.GetRecords()))}
		for _, r := range p.refused {
			setResult(resp.Results[r.i], client.Result{Partition: -1, Offset: -1, Err: r.err})
		}
		answers.expect()
		if len(p.records) == 0 {
			answers.ready(resp, hold)
			continue
		}
		prod := producers[p.key()]
		if prod == nil {
			prod = s.newProducer(p.key())
			producers[p.key()] = prod
		}
		var left atomic.Int64
		left.Store(int64(len(p.records)))
		at := p.at
		prod.ProduceAll(ctx, p.records, func(i int, res client.Result) {
			if at != nil {
				i = at[i]
			}
			setResult(resp.Results[i], res)
			if left.Add(-1) == 0 {
				answers.ready(resp, hold)
			}
		})
	}
}

// streamAnswers sends a produce stream's answers from one goroutine, each
// as soon as the last of its request's records is settled. The producers'
// callbacks only queue an answer: they never wait on the client's flow
// control, and no goroutine is started per request (each would grow a
// fresh stack to marshal its answer).
type streamAnswers struct {
	stream skeinv1.ProducerService_ProduceStreamServer
	mu     sync.Mutex
	queue  []streamAnswer
	closed bool
	wake   chan struct{}
	// open counts the answers expected and not yet sent (or dropped after
	// the stream failed).
	open sync.WaitGroup
	done chan struct{}
}

type streamAnswer struct {
	resp *skeinv1.ProduceStreamResponse
	hold *budget.Hold
}

func newStreamAnswers(stream skeinv1.ProducerService_ProduceStreamServer) *streamAnswers {
	return &streamAnswers{stream: stream, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// expect counts an answer to come; ready must follow, once.
func (a *streamAnswers) expect() { a.open.Add(1) }

// ready queues resp, to be sent; hold is released once it is.
func (a *streamAnswers) ready(resp *skeinv1.ProduceStreamResponse, hold *budget.Hold) {
	a.mu.Lock()
	a.queue = append(a.queue, streamAnswer{resp, hold})
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// run sends queued answers in the order they were queued until close.
// After a failed Send the rest are dropped: the stream is broken.
func (a *streamAnswers) run() {
	defer close(a.done)
	var batch []streamAnswer
	var sendErr error
	for {
		<-a.wake
		a.mu.Lock()
		batch, a.queue = a.queue, batch[:0]
		closed := a.closed
		a.mu.Unlock()
		for i, x := range batch {
			if sendErr == nil {
				sendErr = a.stream.Send(x.resp)
			}
			x.hold.Release()
			batch[i] = streamAnswer{}
			a.open.Done()
		}
		if closed {
			return
		}
	}
}

// close waits until every expected answer is sent, then stops run.
func (a *streamAnswers) close() {
	a.open.Wait()
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
	<-a.done
}
