package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	storagev1 "skein/gen/skein/storage/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/acl"
	"skein/libs/errs"
	"skein/libs/grpcopt"
	"skein/libs/metadata"
	"skein/libs/peerauth"
	"skein/libs/record"
	"skein/libs/rpcerr"
	"skein/services/storage/internal/batchtrace"
	"skein/services/storage/internal/partition"
	"skein/services/storage/internal/producer"
)

// Replicas finds the partitions this node hosts.
type Replicas interface {
	// Get answers the hosted replica or UNKNOWN_TOPIC_OR_PARTITION.
	Get(tp partition.TP) (*partition.Partition, error)
}

// Server implements StorageService.
type Server struct {
	storagev1.UnimplementedStorageServiceServer
	replicas Replicas
	log      *slog.Logger
	metrics  *Metrics
	// MaxWaitCap bounds any long poll.
	maxWaitCap time.Duration
	// followRecheck: see SetFollowRecheck.
	followRecheck time.Duration
	// draining is closed by Drain: long-lived streams end so that a
	// graceful stop does not wait on peers' replication streams.
	draining  chan struct{}
	drainOnce sync.Once

	// inflight bounds the record bytes of produce requests being served,
	// acks=all waits in purgatory included (0: no bound).
	inflightMax  int64
	inflightMu   sync.Mutex
	inflightUsed int64 // guarded by inflightMu

	// authz decides clients' produce, fetch and list-offsets per
	// partition; nil when authorization is off.
	authz *peerauth.Authorizer
}

// Authorize makes the node decide its clients' requests with a (nil:
// authorization off). Call it before serving.
func (s *Server) Authorize(a *peerauth.Authorizer) { s.authz = a }

// Rules are the storage service's methods only other Skein services call:
// replication between storage nodes, and transaction markers, which only
// the transaction coordinator writes.
func Rules() peerauth.Rules {
	sd := storagev1.StorageService_ServiceDesc
	return peerauth.Rules{
		peerauth.Method(sd, "Replicate"):            {peerauth.RoleStorage},
		peerauth.Method(sd, "OffsetForLeaderEpoch"): {peerauth.RoleStorage},
		peerauth.Method(sd, "WriteTxnMarkers"):      {peerauth.RoleTxnCoord},
	}
}

// refusals answers, per partition of a request, the refusal of op on its
// topic for the caller of ctx (its principal replaced by named when the
// gateway names the client of one request), nil when every partition is
// allowed.
func (s *Server) refusals(ctx context.Context, named, method string, topics []string, op acl.Operation) []error {
	if s.authz == nil {
		return nil
	}
	c, known := peerauth.CallerFrom(ctx)
	return s.authz.TopicRefusals(ctx, c.For(named), known, method, topics, op)
}

// The bounds a storage node puts on what its callers make it hold.
const (
	// DefaultMaxInflightProduceBytes is the record bytes of produce requests
	// a node serves at once (Kafka's queued.max.request.bytes idea): beyond
	// it a produce is refused with THROTTLING_QUOTA_EXCEEDED before it is
	// appended, and the producer retries.
	DefaultMaxInflightProduceBytes = 256 << 20
	// MinProduceCharge is the least a produce request is charged: it also
	// holds a goroutine and, under acks=all, a waiter in purgatory.
	MinProduceCharge = 4 << 10
	// MaxFetchBytes caps any fetch or replica fetch answer (Kafka's
	// fetch.max.bytes), so a caller's max_bytes cannot make the node read
	// more than that per request; it stays below the 64 MiB gRPC message
	// limit with room for one whole oversized batch.
	MaxFetchBytes = 50 << 20
)

// LimitInflightProduce sets the bound on record bytes of produce requests
// served at once (n <= 0: none). Call it before serving.
func (s *Server) LimitInflightProduce(n int64) { s.inflightMax = n }

// acquire charges a produce request of size record bytes; false when it
// does not fit now. A request larger than the whole bound may pass alone.
func (s *Server) acquire(size int) (charge int64, ok bool) {
	if s.inflightMax <= 0 {
		return 0, true
	}
	charge = min(max(int64(size), MinProduceCharge), s.inflightMax)
	s.inflightMu.Lock()
	defer s.inflightMu.Unlock()
	if s.inflightUsed+charge > s.inflightMax {
		return 0, false
	}
	s.inflightUsed += charge
	return charge, true
}

func (s *Server) release(charge int64) {
	if charge == 0 {
		return
	}
	s.inflightMu.Lock()
	defer s.inflightMu.Unlock()
	s.inflightUsed -= charge
}

// InflightProduceBytes is what produce requests hold of the bound now.
func (s *Server) InflightProduceBytes() int64 {
	s.inflightMu.Lock()
	defer s.inflightMu.Unlock()
	return s.inflightUsed
}

// Drain ends replication and produce streams at their next round and cuts
// long polls short, ahead of grpc.Server.GracefulStop.
func (s *Server) Drain() { s.drainOnce.Do(func() { close(s.draining) }) }

// New returns the gRPC shell over replicas.
func New(replicas Replicas, log *slog.Logger, metrics *Metrics) *Server {
	return &Server{replicas: replicas, log: log, metrics: metrics, maxWaitCap: 30 * time.Second, followRecheck: DefaultFollowRecheck, draining: make(chan struct{}),
		inflightMax: DefaultMaxInflightProduceBytes}
}

var tracer = otel.Tracer("skein/storage")

func code(err error) skeinv1.ErrorCode { return skeinv1.ErrorCode(errs.CodeOf(err)) }

// Produce appends to every partition of the request concurrently and answers
// each when it is acknowledged per acks.
func (s *Server) Produce(ctx context.Context, req *storagev1.ProduceRequest) (*storagev1.ProduceResponse, error) {
	return s.produce(ctx, req, false)
}

// produce serves Produce and each request of a ProduceStream. On a stream
// (traceFromRecords) each partition's span joins the trace named by its
// records' traceparent header, linked to the stream's span, since the
// stream's own context belongs to whoever opened it.
func (s *Server) produce(ctx context.Context, req *storagev1.ProduceRequest, traceFromRecords bool) (*storagev1.ProduceResponse, error) {
	return s.startProduce(ctx, req, traceFromRecords)()
}

// startProduce validates req and appends every partition's batch now, in
// the caller's goroutine, so the requests of one stream are appended in the
// order they arrived (a producer pipelining several batches of a partition
// relies on it); the function it answers waits for the acknowledgements per
// acks and returns the response.
func (s *Server) startProduce(ctx context.Context, req *storagev1.ProduceRequest, traceFromRecords bool) (wait func() (*storagev1.ProduceResponse, error)) {
	acks := int(req.GetAcks())
	if acks != partition.AcksNone && acks != partition.AcksLeader && acks != partition.AcksAll {
		err := rpcerr.ToGRPC(errs.Errorf(errs.InvalidRequiredAcks, "acks=%d: must be 0, 1 or -1", acks))
		return func() (*storagev1.ProduceResponse, error) { return nil, err }
	}
	timeout := time.Duration(req.GetTimeoutMs()) * time.Millisecond
	if timeout <= 0 {
		timeout = partition.ProduceTimeout
	}
	out := &storagev1.ProduceResponse{Partitions: make([]*storagev1.PartitionProduceResult, len(req.GetPartitions()))}
	answer := func() (*storagev1.ProduceResponse, error) { return out, nil }
	size := 0
	for _, pp := range req.GetPartitions() {
		size += len(pp.GetRecords())
	}
	charge, ok := s.acquire(size)
	if !ok {
		// Nothing is appended; the producer retries after a back-off.
		msg := fmt.Sprintf("the node serves its limit of in-flight produce bytes (%d, --max-inflight-produce-bytes); this request has %d", s.inflightMax, size)
		for i, pp := range req.GetPartitions() {
			out.Partitions[i] = &storagev1.PartitionProduceResult{Topic: pp.GetTopic(), Partition: pp.GetPartition(), BaseOffset: -1, LogAppendTimeMs: -1,
				ErrorCode: skeinv1.ErrorCode_THROTTLING_QUOTA_EXCEEDED, ErrorMessage: msg}
			s.metrics.produced(pp.GetTopic(), skeinv1.ErrorCode_THROTTLING_QUOTA_EXCEEDED, len(pp.GetRecords()), 0)
		}
		return answer
	}
	refused := s.produceRefusals(ctx, req)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	pending := make([]*partitionProduce, len(req.GetPartitions()))
	for i, pp := range req.GetPartitions() {
		var denied error
		if refused != nil {
			denied = refused[i]
		}
		if denied == nil && req.GetTransactionalId() == "" && transactional(pp.GetRecords()) {
			// As Kafka: a transaction's batches come with the transactional
			// id the client is authorized for, or a client with write on
			// the topic alone could open a transaction no coordinator ends,
			// holding read_committed readers at its first offset.
			denied = errs.Errorf(errs.TransactionalIDAuthorizationFailed, "a transactional batch for %s-%d with no transactional id in the request", pp.GetTopic(), pp.GetPartition())
		}
		pending[i] = s.appendPartition(ctx, acks, pp, traceFromRecords, denied)
	}
	return func() (*storagev1.ProduceResponse, error) {
		defer cancel()
		defer s.release(charge)
		if len(pending) == 1 {
			// One partition (a producer writing to one partition this node
			// leads, the common case): wait here, without a goroutine.
			out.Partitions[0] = s.awaitPartition(pending[0])
			return out, nil
		}
		var wg sync.WaitGroup
		for i, pp := range pending {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out.Partitions[i] = s.awaitPartition(pp)
			}()
		}
		wg.Wait()
		return out, nil
	}
}

// transactional reports whether records hold a transactional batch (the
// batches' own validation comes later, at the append).
func transactional(records []byte) bool {
	for len(records) >= record.HeaderSize {
		b := record.Batch(records)
		if b.IsTransactional() {
			return true
		}
		n := b.Size()
		if n <= 0 || n > len(records) {
			return false
		}
		records = records[n:]
	}
	return false
}

// produceRefusals answers the partitions of req its client may not write
// (topic write; and transactional id write for a transaction's batches),
// nil when all are allowed.
func (s *Server) produceRefusals(ctx context.Context, req *storagev1.ProduceRequest) []error {
	if s.authz == nil {
		return nil
	}
	const method = "/skein.storage.v1.StorageService/Produce"
	topics := make([]string, len(req.GetPartitions()))
	for i, pp := range req.GetPartitions() {
		topics[i] = pp.GetTopic()
	}
	if id := req.GetTransactionalId(); id != "" {
		c, known := peerauth.CallerFrom(ctx)
		if err := s.authz.AuthorizeCaller(ctx, c.For(req.GetPrincipal()), known, method, acl.TransactionalID, id, acl.Write); err != nil {
			out := make([]error, len(topics))
			for i := range out {
				out[i] = err
			}
			return out
		}
	}
	return s.refusals(ctx, req.GetPrincipal(), method, topics, acl.Write)
}

// partitionProduce is one partition's produce between its append and its
// acknowledgement.
type partitionProduce struct {
	ctx   context.Context
	span  trace.Span
	start time.Time
	tp    partition.TP
	n     int // record bytes
	p     *partition.Partition
	pend  partition.Pending
	err   error
}

// appendPartition appends one partition's batch, unless denied (the
// client may not write there): then nothing is appended and the answer is
// that refusal.
func (s *Server) appendPartition(ctx context.Context, acks int, pp *storagev1.PartitionProduce, traceFromRecords bool, denied error) *partitionProduce {
	tp := partition.TP{Topic: pp.GetTopic(), Partition: pp.GetPartition()}
	opts := []trace.SpanStartOption{trace.WithAttributes(attribute.String("topic", tp.Topic), attribute.Int("partition", int(tp.Partition)), attribute.Int("acks", acks))}
	if traceFromRecords {
		if sc := batchtrace.First(pp.GetRecords()); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.LinkFromContext(ctx)))
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc) // keeps ctx's deadline and cancellation
		}
	}
	ctx, span := tracer.Start(ctx, "storage.append", opts...)
	x := &partitionProduce{ctx: ctx, span: span, start: time.Now(), tp: tp, n: len(pp.GetRecords())}
	if denied != nil {
		x.err = denied
		return x
	}
	x.p, x.err = s.replicas.Get(tp)
	if x.err == nil {
		x.pend, x.err = x.p.Append(acks, pp.GetCurrentLeaderEpoch(), pp.GetRecords())
	}
	return x
}

func (s *Server) awaitPartition(x *partitionProduce) *storagev1.PartitionProduceResult {
	defer x.span.End()
	r, err := x.pend.Result, x.err
	if err == nil {
		r, err = x.p.Await(x.ctx, x.pend)
	}
	res := &storagev1.PartitionProduceResult{Topic: x.tp.Topic, Partition: x.tp.Partition, BaseOffset: int64(r.BaseOffset), LogAppendTimeMs: -1,
		LogStartOffset: int64(r.LogStartOffset), LeaderEpoch: r.LeaderEpoch}
	if x.p == nil {
		res.BaseOffset = -1
	}
	if err == nil {
		if r.LogAppendTime >= 0 {
			res.LogAppendTimeMs = r.LogAppendTime // message.timestamp.type=LogAppendTime
		}
		if r.DuplicateMaxTimestamp >= 0 {
			res.DuplicateMaxTimestampMs = &r.DuplicateMaxTimestamp
		}
		x.span.SetAttributes(attribute.Int64("base_offset", int64(r.BaseOffset)), attribute.Int64("last_offset", int64(r.LastOffset)))
	} else {
		res.ErrorCode, res.ErrorMessage = code(err), errs.Message(err)
		x.span.SetAttributes(attribute.String("error_code", errs.Of(err).Name))
		if msg, level, ok := produceFailureLog(x.ctx, err); ok {
			s.log.Log(x.ctx, level, msg, "partition", x.tp, "err", err)
		}
	}
	s.metrics.produced(x.tp.Topic, res.ErrorCode, x.n, time.Since(x.start))
	s.metrics.appended(x.tp.Topic, x.pend.Result) // appended even when the answer is an error
	return res
}

// produceFailureLog says whether and how a produce's error is logged: an
// unexpected one as an error; one that only says the caller went away (its
// stream ended: a gateway that moved to a new leader, a client that gave
// up), which nobody reads and which is no failure here, at debug level;
// the errors the protocol answers with (NOT_LEADER_OR_FOLLOWER,
// NOT_ENOUGH_REPLICAS...) not at all.
func produceFailureLog(ctx context.Context, err error) (string, slog.Level, bool) {
	switch {
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return "produce abandoned by its caller", slog.LevelDebug, true
	case errs.Of(err) == errs.UnknownServerError:
		return "produce failed", slog.LevelError, true
	}
	return "", 0, false
}

// ProduceStream appends requests in the order they arrive and answers each
// as it is acknowledged, by correlation id.
func (s *Server) ProduceStream(stream storagev1.StorageService_ProduceStreamServer) error {
	ctx := stream.Context()
	var sendMu sync.Mutex
	var wg sync.WaitGroup
	defer wg.Wait()
	// A request's batches are decoded into a pooled buffer, given back once
	// they are appended: appending writes them to the log and keeps no
	// reference to them, and the answer needs only the request's topics and
	// partitions (decoded apart from the buffer).
	reqs := make(chan *grpcopt.Pooled)
	go func() {
		defer close(reqs)
		for {
			reply := &grpcopt.Pooled{Msg: &storagev1.ProduceStreamRequest{}}
			if err := stream.RecvMsg(reply); err != nil {
				return // client closed or went away; in-flight answers are dropped with the stream
			}
			select {
			case reqs <- reply:
			case <-ctx.Done():
				reply.Release()
				return
			}
		}
	}()
	for {
		select {
		case <-s.draining:
			wg.Wait() // answer what was accepted, then end the stream
			return rpcerr.ToGRPC(errs.Errorf(errs.NotLeaderOrFollower, "broker is shutting down"))
		case r, ok := <-reqs:
			if !ok {
				return nil
			}
			req := r.Msg.(*storagev1.ProduceStreamRequest)
			// Append now, in arrival order; wait for the acknowledgements
			// concurrently.
			wait := s.startProduce(ctx, req.GetRequest(), true)
			r.Release()
			s.answerProduce(&wg, &sendMu, stream, req, wait)
		}
	}
}

// answerProduce sends req's answer on stream once wait has it.
func (s *Server) answerProduce(wg *sync.WaitGroup, sendMu *sync.Mutex, stream storagev1.StorageService_ProduceStreamServer,
	req *storagev1.ProduceStreamRequest, wait func() (*storagev1.ProduceResponse, error)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		resp, err := wait()
		if err != nil {
			resp = &storagev1.ProduceResponse{}
			for _, pp := range req.GetRequest().GetPartitions() {
				resp.Partitions = append(resp.Partitions, &storagev1.PartitionProduceResult{Topic: pp.GetTopic(), Partition: pp.GetPartition(), BaseOffset: -1,
					ErrorCode: code(rpcerr.FromStatus(err)), ErrorMessage: errs.Message(rpcerr.FromStatus(err))})
			}
		}
		sendMu.Lock()
		defer sendMu.Unlock()
		_ = stream.Send(&storagev1.ProduceStreamResponse{CorrelationId: req.GetCorrelationId(), Response: resp})
	}()
}

// Fetch reads committed batches; with nothing to return it waits up to
// max_wait_ms for any fetched partition's HW to move.
func (s *Server) Fetch(ctx context.Context, req *storagev1.FetchRequest) (*storagev1.FetchResponse, error) {
	return s.fetch(ctx, req, nil)
}

// Register serves s on r as the StorageService, its Fetch answering
// through FetchEncoded.
func Register(r grpc.ServiceRegistrar, s *Server) {
	r.RegisterService(grpcopt.ReplaceUnary(&storagev1.StorageService_ServiceDesc, "Fetch",
		func(_ any, ctx context.Context, req *storagev1.FetchRequest) (any, error) {
			return s.FetchEncoded(ctx, req)
		}), s)
}

// FetchEncoded is Fetch answering in wire form (grpcopt.Encoded): the
// records are read into pooled buffers, marshalled into the answer's own
// pooled buffer, and the read buffers are back in the pool before it
// returns. Fetch reads each answer into a fresh buffer (a megabyte or more
// a catch-up fetch, zeroed first) and leaves the marshalling to gRPC.
func (s *Server) FetchEncoded(ctx context.Context, req *storagev1.FetchRequest) (any, error) {
	var bufs readBuffers
	defer bufs.release()
	resp, err := s.fetch(ctx, req, &bufs)
	if err != nil {
		return nil, err
	}
	return grpcopt.MarshalNow(resp)
}

// readBuffers are the pooled buffers one fetch read its records into; a
// nil *readBuffers reads into fresh ones.
type readBuffers struct{ held []*[]byte }

// maxPooledRead bounds the buffer a read starts with: a long poll that
// may answer 50 MiB usually answers a few kilobytes, and a larger read
// grows its buffer as an unpooled one would.
const maxPooledRead = 4 << 20

// get answers an empty buffer with room for n bytes (at most maxPooledRead).
func (b *readBuffers) get(n int) []byte {
	p := grpcopt.GetBuffer(min(n, maxPooledRead))
	b.held = append(b.held, p)
	return (*p)[:0]
}

func (b *readBuffers) release() {
	if b == nil {
		return
	}
	for _, p := range b.held {
		grpcopt.PutBuffer(p)
	}
	b.held = b.held[:0]
}

func (s *Server) fetch(ctx context.Context, req *storagev1.FetchRequest, bufs *readBuffers) (*storagev1.FetchResponse, error) {
	if req.GetMaxBytes() < 0 || req.GetMaxWaitMs() < 0 {
		return nil, rpcerr.ToGRPC(errs.Errorf(errs.InvalidRequest, "max_bytes and max_wait_ms must not be negative"))
	}
	wait := min(time.Duration(req.GetMaxWaitMs())*time.Millisecond, s.maxWaitCap)
	deadline := time.Now().Add(wait)
	need := max(1, int(req.GetMinBytes()))
	topics := make([]string, len(req.GetPartitions()))
	for i, pf := range req.GetPartitions() {
		topics[i] = pf.GetTopic()
	}
	denied := s.refusals(ctx, "", "/skein.storage.v1.StorageService/Fetch", topics, acl.Read)
	var w *partition.Waker // registered with the partitions only when the fetch may wait
	if wait > 0 {
		w = partition.NewWaker()
		defer w.Forget()
	}
	for {
		resp, total, found, full := s.fetchOnce(req, denied, bufs, w)
		// As Kafka: an error in any partition answers at once. So does an
		// answer that a partition's max_records or byte bound cut short:
		// waiting for min_bytes could not make it larger.
		if total >= need || full || wait <= 0 || found < len(req.GetPartitions()) || hasError(resp) || time.Now().After(deadline) {
			return resp, nil
		}
		bufs.release() // resp is dropped
		if !s.wait(ctx, w, time.Until(deadline)) {
			resp, _, _, _ := s.fetchOnce(req, denied, bufs, nil)
			return resp, nil
		}
	}
}

func hasError(resp *storagev1.FetchResponse) bool {
	for _, p := range resp.GetPartitions() {
		if p.GetErrorCode() != 0 {
			return true
		}
	}
	return false
}

// fetchOnce reads what each partition has now: the answer, its bytes of
// batches, how many of the partitions this node has, and (when w is not
// nil) whether some partition's read was cut short by its max_records or
// its byte bound.
// denied, unless nil, holds the refusal of each partition the client may
// not read. w, unless nil, is registered with each partition before it is
// read, to wake on the next move of its high watermark.
func (s *Server) fetchOnce(req *storagev1.FetchRequest, denied []error, bufs *readBuffers, w *partition.Waker) (_ *storagev1.FetchResponse, total, found int, full bool) {
	maxBytes := answerBytes(req.GetMaxBytes(), MaxFetchBytes)
	readCommitted := req.GetIsolationLevel() == skeinv1.IsolationLevel_READ_COMMITTED
	resp := &storagev1.FetchResponse{}
	for i, pf := range req.GetPartitions() {
		tp := partition.TP{Topic: pf.GetTopic(), Partition: pf.GetPartition()}
		r := &storagev1.PartitionFetchResult{Topic: tp.Topic, Partition: tp.Partition, HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1}
		resp.Partitions = append(resp.Partitions, r)
		if denied != nil && denied[i] != nil {
			r.ErrorCode, r.ErrorMessage = code(denied[i]), errs.Message(denied[i])
			continue
		}
		p, err := s.replicas.Get(tp)
		if err != nil {
			r.ErrorCode, r.ErrorMessage = code(err), errs.Message(err)
			continue
		}
		found++
		if w != nil {
			p.WakeOnHW(w)
		}
		budget := maxBytes - total
		if pm := int(pf.GetPartitionMaxBytes()); pm > 0 && pm < budget {
			budget = pm
		}
		if budget <= 0 {
			budget = 1 // still one whole batch, as Kafka
			if total > 0 {
				continue
			}
		}
		var buf func() []byte
		if bufs != nil {
			buf = func() []byte { return bufs.get(budget) }
		}
		fr, err := p.FetchInto(buf, record.Offset(pf.GetFetchOffset()), budget, int(pf.GetMaxRecords()), readCommitted, pf.GetCurrentLeaderEpoch())
		r.HighWatermark, r.LastStableOffset, r.LogStartOffset, r.LeaderEpoch = int64(fr.HW), int64(fr.LSO), int64(fr.LogStartOffset), fr.LeaderEpoch
		if err != nil {
			r.ErrorCode, r.ErrorMessage = code(err), errs.Message(err)
			continue
		}
		r.Records = fr.Records
		for _, a := range fr.Aborted {
			r.AbortedTransactions = append(r.AbortedTransactions, &storagev1.AbortedTransaction{ProducerId: a.ProducerID, FirstOffset: int64(a.FirstOffset)})
		}
		total += len(fr.Records)
		if w != nil { // only a fetch that may wait asks whether its answer is full
			full = full || len(fr.Records) >= budget || holdsRecord(fr.Records, pf.GetFetchOffset(), pf.GetMaxRecords())
		}
	}
	s.metrics.fetched(total)
	return resp, total, found, full
}

// holdsRecord reports whether batches hold the last record a reader that
// keeps maxRecords from offset asks for (never, when maxRecords is not
// positive): the read stops at that record's batch.
func holdsRecord(batches []byte, offset int64, maxRecords int32) bool {
	if maxRecords <= 0 || len(batches) == 0 {
		return false
	}
	last := lastBatch(batches)
	return last != nil && int64(last.LastOffset()) >= offset+int64(maxRecords)-1
}

// lastBatch answers the last of batches, nil when there are none.
func lastBatch(batches []byte) record.Batch {
	var last record.Batch
	for it := record.NewBatchIter(batches); it.Next(); {
		last = it.Batch()
	}
	return last
}

// answerBytes is the size bound of one fetch answer: what the caller asked
// (dflt when it asked for none), never above MaxFetchBytes.
func answerBytes(asked int32, dflt int) int {
	if asked <= 0 {
		return min(dflt, MaxFetchBytes)
	}
	return min(int(asked), MaxFetchBytes)
}

// wait blocks until w is woken (true), or d passes, ctx ends or the
// server drains (false).
func (s *Server) wait(ctx context.Context, w *partition.Waker, d time.Duration) bool {
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.C():
		return true
	case <-t.C:
	case <-ctx.Done():
	case <-s.draining:
	}
	return false
}

// maxKeptReadBuffer bounds the read buffer a follower's stream keeps
// between answers; a larger one (a follower catching up) is let go.
const maxKeptReadBuffer = 1 << 20

// Replicate serves one follower's fetch stream. The batches of an answer
// are read into one buffer the stream reuses: an answer is marshalled by
// Send before the next is read.
func (s *Server) Replicate(stream storagev1.StorageService_ReplicateServer) error {
	ctx := stream.Context()
	var buf []byte
	w := partition.NewWaker()
	defer w.Forget()
	sess := newSession()
	for {
		select {
		case <-s.draining:
			return rpcerr.ToGRPC(errs.Errorf(errs.NotLeaderOrFollower, "broker is shutting down"))
		default:
		}
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		wait := min(time.Duration(req.GetMaxWaitMs())*time.Millisecond, s.maxWaitCap)
		deadline := time.Now().Add(wait)
		sess.begin()
		for {
			a := s.replicateOnce(req, buf, w, sess)
			if a.total > 0 || wait <= 0 || a.found == 0 || time.Now().After(deadline) || !s.wait(ctx, w, time.Until(deadline)) {
				w.Forget()
				if ctx.Err() != nil {
					return nil
				}
				if a.total == 0 && wait > 0 {
					a = s.replicateOnce(req, buf, nil, sess) // the latest HW for the answer
				}
				if err := stream.Send(a.resp); err != nil {
					return nil
				}
				sess.sent(a.resp, a.carried)
				if buf = a.used; cap(buf) > maxKeptReadBuffer {
					buf = nil
				}
				break
			}
		}
	}
}

// replicaAnswer is one answer to a follower's request.
type replicaAnswer struct {
	resp *storagev1.ReplicateResponse
	// carried[i] is the session's entry of resp.Partitions[i] (nil for a
	// partition this node does not have), for session.sent.
	carried []*told
	// total counts the records answered (and divergences); found, the
	// asked partitions this node has.
	total, found int
	// used is the read buffer to reuse once the answer has been sent.
	used []byte
}

// replicateOnce reads one answer for req, its batches into buf's capacity
// (and new buffers past it). It carries only the partitions with news for
// the follower (see session). w, unless nil, is registered with each
// partition before it is read, to wake on the next move of its log end
// offset.
func (s *Server) replicateOnce(req *storagev1.ReplicateRequest, buf []byte, w *partition.Waker, sess *session) (a replicaAnswer) {
	resp := &storagev1.ReplicateResponse{}
	a.resp = resp
	a.used = buf[:0]
	free := a.used // where the next partition's batches go
	maxBytes := answerBytes(req.GetMaxBytes(), 16<<20)
	total := 0
	var r *storagev1.ReplicaFetchResult // reused until an answer carries it
	for _, st := range req.GetPartitions() {
		tp := partition.TP{Topic: st.GetTopic(), Partition: st.GetPartition()}
		if r == nil {
			r = &storagev1.ReplicaFetchResult{}
		}
		*r = storagev1.ReplicaFetchResult{Topic: tp.Topic, Partition: tp.Partition, HighWatermark: -1, LogStartOffset: -1}
		p, err := s.replicas.Get(tp)
		if err != nil {
			r.ErrorCode, r.ErrorMessage = code(err), errs.Message(err)
			resp.Partitions, a.carried = append(resp.Partitions, r), append(a.carried, nil)
			r = nil
			continue
		}
		a.found++
		t := sess.ask(tp, st.GetCurrentLeaderEpoch())
		// What is left of the answer's bound, and at most the partition's
		// own: the first partition with records always gets its first
		// whole batch; once the bound is reached the others are answered
		// without records (their follower's offsets still count), so an
		// answer never grows by a batch per partition past the bound and
		// the transport's limit.
		budget := maxBytes - total
		if pm := int(req.GetPartitionMaxBytes()); pm > 0 && pm < budget {
			budget = pm
		}
		fr, err := p.ServeFollower(partition.FollowerFetch{
			ReplicaID: req.GetReplicaId(), BrokerEpoch: req.GetBrokerEpoch(), FetchOffset: record.Offset(st.GetFetchOffset()), LastFetchedEpoch: record.Epoch(st.GetLastFetchedEpoch()),
			LogStartOffset: record.Offset(st.GetLogStartOffset()), CurrentLeaderEpoch: st.GetCurrentLeaderEpoch(), MaxBytes: budget, Buf: free, Waker: w,
		})
		if n := len(fr.Records); n > 0 {
			if cap(fr.Records) > cap(free) {
				// The read outgrew free and took a new buffer, which
				// starts with these batches: reuse the larger one.
				a.used = fr.Records[:0]
			}
			free = fr.Records[n:n]
		}
		r.HighWatermark, r.LogStartOffset, r.LastStableOffset = int64(fr.HW), int64(fr.LogStartOffset), int64(fr.LSO)
		switch {
		case err != nil:
			r.ErrorCode, r.ErrorMessage = code(err), errs.Message(err)
		case fr.Diverging:
			r.DivergingEpoch = &storagev1.EpochEndOffset{Epoch: int32(fr.DivergingEpoch), EndOffset: int64(fr.DivergingEnd)}
			total++ // an answer the follower must act on now
		default:
			r.Records = fr.Records
			total += len(fr.Records)
			if t.known && r.GetLogStartOffset() > t.logStart {
				// The follower takes a higher log start now: a
				// DeleteRecords waits for it.
				total++
			}
		}
		if t.news(r) {
			resp.Partitions, a.carried = append(resp.Partitions, r), append(a.carried, t)
			r = nil
		}
	}
	a.total = total
	return a
}

// OffsetForLeaderEpoch answers where each asked epoch ends on this leader.
func (s *Server) OffsetForLeaderEpoch(ctx context.Context, req *storagev1.OffsetForLeaderEpochRequest) (*storagev1.OffsetForLeaderEpochResponse, error) {
	resp := &storagev1.OffsetForLeaderEpochResponse{}
	for _, q := range req.GetPartitions() {
		tp := partition.TP{Topic: q.GetTopic(), Partition: q.GetPartition()}
		r := &storagev1.OffsetForLeaderEpochResult{Topic: tp.Topic, Partition: tp.Partition, LeaderEpoch: -1, EndOffset: -1}
		resp.Partitions = append(resp.Partitions, r)
		p, err := s.replicas.Get(tp)
		if err == nil {
			var e record.Epoch
			var end record.Offset
			e, end, err = p.EndOffsetForEpoch(record.Epoch(q.GetLeaderEpoch()), q.GetCurrentLeaderEpoch())
			r.LeaderEpoch, r.EndOffset = int32(e), int64(end)
		}
		if err != nil {
			r.ErrorCode, r.ErrorMessage = code(err), errs.Message(err)
		}
	}
	return resp, nil
}

// ListOffsets answers earliest, latest or by-timestamp offsets.
func (s *Server) ListOffsets(ctx context.Context, req *storagev1.ListOffsetsRequest) (*storagev1.ListOffsetsResponse, error) {
	readCommitted := req.GetIsolationLevel() == skeinv1.IsolationLevel_READ_COMMITTED
	resp := &storagev1.ListOffsetsResponse{}
	topics := make([]string, len(req.GetPartitions()))
	for i, q := range req.GetPartitions() {
		topics[i] = q.GetTopic()
	}
	denied := s.refusals(ctx, "", "/skein.storage.v1.StorageService/ListOffsets", topics, acl.Describe)
	for i, q := range req.GetPartitions() {
		tp := partition.TP{Topic: q.GetTopic(), Partition: q.GetPartition()}
		r := &storagev1.ListOffsetsResult{Topic: tp.Topic, Partition: tp.Partition, Offset: -1, Timestamp: -1}
		resp.Partitions = append(resp.Partitions, r)
		if denied != nil && denied[i] != nil {
			r.ErrorCode, r.ErrorMessage = code(denied[i]), errs.Message(denied[i])
			continue
		}
		p, err := s.replicas.Get(tp)
		if err == nil {
			var off record.Offset
			off, r.Timestamp, r.LeaderEpoch, err = p.ListOffset(q.GetTimestamp(), readCommitted, q.GetCurrentLeaderEpoch())
			r.Offset = int64(off)
		}
		if err == nil {
			for _, rl := range p.ReplicaLEOs() {
				r.ReplicaOffsets = append(r.ReplicaOffsets, &storagev1.ReplicaLogEnd{Replica: rl.Replica, LogEndOffset: int64(rl.LEO)})
			}
		}
		if err != nil {
			r.ErrorCode, r.ErrorMessage = code(err), errs.Message(err)
		}
	}
	return resp, nil
}

// DeleteRecords moves the log start offsets of partitions this node leads
// (Kafka's DeleteRecords: delete on each topic), each answered with its low
// watermark once the ISR members have it, or REQUEST_TIMED_OUT when they
// do not within the request's timeout (the leader deleted the records).
func (s *Server) DeleteRecords(ctx context.Context, req *storagev1.DeleteRecordsRequest) (*storagev1.DeleteRecordsResponse, error) {
	timeout := partition.ProduceTimeout
	if t := req.GetTimeoutMs(); t > 0 {
		timeout = min(timeout, time.Duration(t)*time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	topics := make([]string, len(req.GetPartitions()))
	for i, q := range req.GetPartitions() {
		topics[i] = q.GetTopic()
	}
	denied := s.refusals(ctx, "", "/skein.storage.v1.StorageService/DeleteRecords", topics, acl.Delete)
	resp := &storagev1.DeleteRecordsResponse{}
	seen := map[partition.TP]bool{}
	var wg sync.WaitGroup
	for i, q := range req.GetPartitions() {
		tp := partition.TP{Topic: q.GetTopic(), Partition: q.GetPartition()}
		r := &storagev1.DeleteRecordsResult{Topic: tp.Topic, Partition: tp.Partition, LowWatermark: -1}
		resp.Partitions = append(resp.Partitions, r)
		var err error
		switch {
		case denied != nil && denied[i] != nil:
			err = denied[i]
		case seen[tp]:
			err = errs.Errorf(errs.InvalidRequest, "%s is named twice", tp)
		case metadata.IsInternalTopic(tp.Topic):
			// The coordinators' state, as Kafka refuses it: records
			// deleted there would take groups' offsets and transactions
			// with them.
			err = errs.Errorf(errs.InvalidTopic, "cannot delete records of internal topic %q", tp.Topic)
		case q.GetOffset() < -1:
			err = errs.Errorf(errs.OffsetOutOfRange, "%s: cannot delete records before offset %d: it must be -1 (the high watermark) or at least 0", tp, q.GetOffset())
		}
		seen[tp] = true
		if err != nil {
			r.ErrorCode, r.ErrorMessage = code(err), errs.Message(err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := s.replicas.Get(tp)
			var low record.Offset = -1
			if err == nil {
				var start record.Offset
				var epoch int32
				if start, epoch, err = p.DeleteRecords(record.Offset(q.GetOffset()), q.GetCurrentLeaderEpoch()); err == nil {
					low, err = p.AwaitLowWatermark(ctx, start, epoch)
					if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
						err = errs.Errorf(errs.RequestTimedOut, "%s: the leader deleted the records before %d, and the in-sync replicas did not all follow within %v (low watermark %d)", tp, start, timeout, low)
					}
				}
			}
			if err != nil {
				r.ErrorCode, r.ErrorMessage = code(err), errs.Message(err)
				return
			}
			r.LowWatermark = int64(low)
		}()
	}
	wg.Wait()
	return resp, nil
}

// WriteTxnMarkers appends commit/abort markers for the transaction
// coordinator, each partition as its leader, and answers per partition once
// the ISR has the marker.
func (s *Server) WriteTxnMarkers(ctx context.Context, req *storagev1.WriteTxnMarkersRequest) (*storagev1.WriteTxnMarkersResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, partition.ProduceTimeout)
	defer cancel()
	resp := &storagev1.WriteTxnMarkersResponse{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range req.GetMarkers() {
		mr := &storagev1.TxnMarkerResult{ProducerId: m.GetProducerId()}
		resp.Markers = append(resp.Markers, mr)
		for _, tp := range m.GetPartitions() {
			r := &storagev1.TxnMarkerPartitionResult{Topic: tp.GetTopic(), Partition: tp.GetPartition()}
			mr.Partitions = append(mr.Partitions, r)
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				if m.GetProducerEpoch() < 0 || m.GetProducerEpoch() > 1<<15-1 {
					err = errs.Errorf(errs.InvalidProducerEpoch, "producer epoch %d", m.GetProducerEpoch())
				}
				var p *partition.Partition
				if err == nil {
					p, err = s.replicas.Get(partition.TP{Topic: tp.GetTopic(), Partition: tp.GetPartition()})
				}
				if err == nil {
					_, err = p.WriteMarker(ctx, m.GetProducerId(), int16(m.GetProducerEpoch()), m.GetCommitted(), m.GetCoordinatorEpoch(), time.Now().UnixMilli())
				}
				if err != nil {
					mu.Lock()
					r.ErrorCode, r.ErrorMessage = code(err), errs.Message(err)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return resp, nil
}

// DescribeProducers answers the producer state of partitions this node
// leads (Kafka's DescribeProducers: read on each topic), each with its
// own code: NOT_LEADER_OR_FOLLOWER where it does not lead.
func (s *Server) DescribeProducers(ctx context.Context, req *storagev1.DescribeProducersRequest) (*storagev1.DescribeProducersResponse, error) {
	topics := make([]string, len(req.GetPartitions()))
	for i, q := range req.GetPartitions() {
		topics[i] = q.GetTopic()
	}
	denied := s.refusals(ctx, "", "/skein.storage.v1.StorageService/DescribeProducers", topics, acl.Read)
	resp := &storagev1.DescribeProducersResponse{}
	for i, q := range req.GetPartitions() {
		tp := partition.TP{Topic: q.GetTopic(), Partition: q.GetPartition()}
		r := &storagev1.DescribeProducersResult{Topic: tp.Topic, Partition: tp.Partition}
		resp.Partitions = append(resp.Partitions, r)
		if denied != nil && denied[i] != nil {
			r.ErrorCode, r.ErrorMessage = code(denied[i]), errs.Message(denied[i])
			continue
		}
		p, err := s.replicas.Get(tp)
		var ps []producer.Description
		if err == nil {
			ps, err = p.Producers(q.GetCurrentLeaderEpoch())
		}
		if err != nil {
			r.ErrorCode, r.ErrorMessage = code(err), errs.Message(err)
			continue
		}
		for _, d := range ps {
			r.Producers = append(r.Producers, &storagev1.ProducerState{ProducerId: d.ProducerID, ProducerEpoch: int32(d.Epoch),
				LastSequence: d.LastSequence, LastTimestamp: d.LastTimestamp, CoordinatorEpoch: d.CoordinatorEpoch,
				CurrentTxnStartOffset: d.TxnStartOffset})
		}
	}
	return resp, nil
}
