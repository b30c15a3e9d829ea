package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
	"skein/libs/metadata"
	"skein/libs/record"
)

// Transports a run can use.
const (
	GRPCStream = "grpc-stream" // the gateway's pipelined ProduceStream (produce only)
	GRPC       = "grpc"        // the gateway's unary Produce / Fetch
	REST       = "rest"        // the gateway's REST API
	Direct     = "direct"      // straight to the storage nodes through libs/client
	Txn        = "txn"         // the same, a transactional producer per worker
	Tail       = "tail"        // the gateway's server-streaming Tail, a stream per partition (consume only)
)

// Endpoints says where the cluster is.
type Endpoints struct {
	Gateway     string   // gateway gRPC host:port
	REST        string   // gateway REST base URL, http://host:port
	Controllers []string // controller gRPC addresses, for Direct
}

// sender produces records. send may block (in-flight limits) and calls done
// exactly once with how many of the records failed and the first error.
type sender interface {
	send(ctx context.Context, partition int32, values [][]byte, done func(failed int, err error))
	close() error
}

// fetcher reads one partition from an offset.
type fetcher interface {
	fetch(ctx context.Context, partition int32, offset int64, lim fetchLimits) (values [][]byte, next int64, err error)
}

// fetchLimits bound one fetch: the records it answers, how long it may
// long-poll, and how many bytes it waits for (0: any).
type fetchLimits struct {
	maxRecords int
	maxWait    time.Duration
	minBytes   int32
}

// admin creates topics and looks them up.
type admin interface {
	createTopic(ctx context.Context, name string, partitions, rf int, configs map[string]string) error
	// partitions answers the topic's partitions: leader (-1: none), how
	// many replicas and how many of them are in sync.
	partitions(ctx context.Context, topic string) ([]partState, error)
	// offsets answers each partition's earliest or latest offset.
	offsets(ctx context.Context, topic string, latest bool) (map[int32]int64, error)
}

type partState struct {
	leader        int32
	replicas, isr int
}

func alreadyExists(err error) bool {
	return err != nil && (status.Code(err) == codes.AlreadyExists || strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS"))
}

// dialGateway connects to the gateway as a client built for bulk data
// should: fetch answers of megabytes, and windows that let them arrive
// without waiting for WINDOW_UPDATE frames every few dozen KiB (gRPC's
// default starts at 64 KiB and grows from round-trip estimates).
func dialGateway(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)),
		grpc.WithInitialWindowSize(8<<20), grpc.WithInitialConnWindowSize(32<<20))
}

func resultErr(results []*skeinv1.ProduceResult, want int) (int, error) {
	if len(results) != want {
		return want, fmt.Errorf("%d results for %d records", len(results), want)
	}
	failed := 0
	var first error
	for _, r := range results {
		if r.GetErrorCode() != skeinv1.ErrorCode_NONE {
			failed++
			if first == nil {
				first = fmt.Errorf("%s: %s", r.GetErrorCode(), r.GetMessage())
			}
		}
	}
	return failed, first
}

func produceRecords(partition int32, values [][]byte) []*skeinv1.ProduceRecord {
	recs := make([]*skeinv1.ProduceRecord, len(values))
	for i, v := range values {
		recs[i] = &skeinv1.ProduceRecord{ValueBytes: v}
		if partition >= 0 {
			recs[i].Partition = &partition
		}
	}
	return recs
}

// ---- gateway gRPC ----

type gatewayGRPC struct {
	conn  *grpc.ClientConn
	prod  skeinv1.ProducerServiceClient
	cons  skeinv1.ConsumerServiceClient
	adm   skeinv1.AdminServiceClient
	topic string
	acks  int32
	// compression, when set, goes in every produce request.
	compression string
}

// codec is a validated --compression value for libs/client ("": none).
func codec(name string) record.Compression {
	c, _ := record.ParseCompression(name)
	return c
}

// optString is s as an optional proto field: nil when empty.
func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func newGatewayGRPC(addr, topic string, acks int) (*gatewayGRPC, error) {
	conn, err := dialGateway(addr)
	if err != nil {
		return nil, err
	}
	return &gatewayGRPC{conn: conn, prod: skeinv1.NewProducerServiceClient(conn), cons: skeinv1.NewConsumerServiceClient(conn),
		adm: skeinv1.NewAdminServiceClient(conn), topic: topic, acks: int32(acks)}, nil
}

func (g *gatewayGRPC) close() error { return g.conn.Close() }

// send is the unary Produce: one request in flight per worker.
func (g *gatewayGRPC) send(ctx context.Context, partition int32, values [][]byte, done func(int, error)) {
	acks := g.acks
	resp, err := g.prod.Produce(ctx, &skeinv1.ProduceRequest{Topic: g.topic, Acks: &acks, Compression: optString(g.compression), Records: produceRecords(partition, values)})
	if err != nil {
		done(len(values), err)
		return
	}
	done(resultErr(resp.GetResults(), len(values)))
}

func (g *gatewayGRPC) fetch(ctx context.Context, partition int32, offset int64, lim fetchLimits) ([][]byte, int64, error) {
	mr, mw := int32(lim.maxRecords), int32(lim.maxWait.Milliseconds())
	mb := int32(8 << 20)
	req := &skeinv1.FetchRequest{Topic: g.topic, Partition: partition, Offset: &offset, MaxRecords: &mr,
		MaxBytes: &mb, MaxWaitMs: &mw, Encoding: skeinv1.Encoding_BYTES}
	if lim.minBytes > 0 {
		req.MinBytes = &lim.minBytes
	}
	resp, err := g.cons.Fetch(ctx, req)
	if err != nil {
		return nil, offset, err
	}
	vals := make([][]byte, len(resp.GetRecords()))
	for i, r := range resp.GetRecords() {
		vals[i] = r.GetValueBytes()
	}
	return vals, resp.GetNextOffset(), nil
}

func (g *gatewayGRPC) createTopic(ctx context.Context, name string, partitions, rf int, configs map[string]string) error {
	p, r := int32(partitions), int32(rf)
	req := &skeinv1.CreateTopicRequest{Name: name, Partitions: &p, Configs: configs}
	if rf > 0 {
		req.ReplicationFactor = &r
	}
	_, err := g.adm.CreateTopic(ctx, req)
	return err
}

func (g *gatewayGRPC) partitions(ctx context.Context, topic string) ([]partState, error) {
	resp, err := g.adm.DescribeTopic(ctx, &skeinv1.DescribeTopicRequest{Topic: topic})
	if err != nil {
		return nil, err
	}
	var out []partState
	for _, p := range resp.GetTopic().GetPartitions() {
		out = append(out, partState{leader: p.GetLeader(), replicas: len(p.GetReplicas()), isr: len(p.GetIsr())})
	}
	return out, nil
}

func (g *gatewayGRPC) offsets(ctx context.Context, topic string, latest bool) (map[int32]int64, error) {
	spec := skeinv1.OffsetSpec_EARLIEST
	if latest {
		spec = skeinv1.OffsetSpec_LATEST
	}
	resp, err := g.adm.ListOffsets(ctx, &skeinv1.ListOffsetsRequest{Topic: topic, Spec: spec})
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, o := range resp.GetOffsets() {
		out[o.GetPartition()] = o.GetOffset()
	}
	return out, nil
}

// streamSender pipelines requests on one ProduceStream, up to inFlight
// unanswered at a time, matching answers by correlation id.
type streamSender struct {
	stream   skeinv1.ProducerService_ProduceStreamClient
	cancel   context.CancelFunc
	topic    string
	acks     int32
	codec    *string
	sem      chan struct{}
	mu       sync.Mutex
	pending  map[uint64]func(*skeinv1.ProduceStreamResponse, error)
	broken   error
	next     uint64
	recvDone chan struct{}
}

func newStreamSender(g *gatewayGRPC, inFlight int) (*streamSender, error) {
	ctx, cancel := context.WithCancel(context.Background())
	st, err := g.prod.ProduceStream(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &streamSender{stream: st, cancel: cancel, topic: g.topic, acks: g.acks, codec: optString(g.compression), sem: make(chan struct{}, max(inFlight, 1)),
		pending: map[uint64]func(*skeinv1.ProduceStreamResponse, error){}, recvDone: make(chan struct{})}
	go s.receive()
	return s, nil
}

func (s *streamSender) receive() {
	defer close(s.recvDone)
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the gateway ended the produce stream")
			}
			s.mu.Lock()
			s.broken = err
			pending := s.pending
			s.pending = map[uint64]func(*skeinv1.ProduceStreamResponse, error){}
			s.mu.Unlock()
			for _, cb := range pending {
				cb(nil, err)
			}
			return
		}
		s.mu.Lock()
		cb := s.pending[resp.GetCorrelationId()]
		delete(s.pending, resp.GetCorrelationId())
		s.mu.Unlock()
		if cb != nil {
			cb(resp, nil)
		}
	}
}

// send is called from one goroutine per sender.
func (s *streamSender) send(ctx context.Context, partition int32, values [][]byte, done func(int, error)) {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		done(len(values), ctx.Err())
		return
	}
	n := len(values)
	cb := func(resp *skeinv1.ProduceStreamResponse, err error) {
		<-s.sem
		if err != nil {
			done(n, err)
			return
		}
		done(resultErr(resp.GetResults(), n))
	}
	s.next++
	corr := s.next
	s.mu.Lock()
	if s.broken != nil {
		err := s.broken
		s.mu.Unlock()
		cb(nil, err)
		return
	}
	s.pending[corr] = cb
	s.mu.Unlock()
	acks := s.acks
	if err := s.stream.Send(&skeinv1.ProduceStreamRequest{CorrelationId: corr, Topic: s.topic, Acks: &acks, Compression: s.codec, Records: produceRecords(partition, values)}); err != nil {
		// Recv reports the cause and fails what is pending, this one included.
		return
	}
}

// close waits for every answer, then ends the stream.
func (s *streamSender) close() error {
	for i := 0; i < cap(s.sem); i++ {
		s.sem <- struct{}{}
	}
	err := s.stream.CloseSend()
	select {
	case <-s.recvDone:
	case <-time.After(5 * time.Second):
	}
	s.cancel()
	return err
}

// ---- gateway REST ----

type restClient struct {
	base  string
	hc    *http.Client
	topic string
	acks  int
	// compression, when set, goes in every produce body.
	compression string
}

func newREST(base, topic string, acks, conns int) *restClient {
	tr := &http.Transport{MaxIdleConns: conns * 2, MaxIdleConnsPerHost: conns * 2, IdleConnTimeout: time.Minute}
	return &restClient{base: strings.TrimRight(base, "/"), hc: &http.Client{Transport: tr, Timeout: 2 * time.Minute}, topic: topic, acks: acks}
}

func (r *restClient) close() error { r.hc.CloseIdleConnections(); return nil }

func (r *restClient) do(ctx context.Context, method, path string, body []byte, out any) error {
	b, err := r.call(ctx, method, path, body)
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// call sends one request and returns the body of a 2xx answer.
func (r *restClient) call(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var b []byte
	if n := resp.ContentLength; n >= 0 && n <= 64<<20 {
		// One allocation of the announced size: a fetch's answer is
		// megabytes, which io.ReadAll would copy as it grows.
		b = make([]byte, n)
		_, err = io.ReadFull(resp.Body, b)
	} else {
		b, err = io.ReadAll(resp.Body)
	}
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	return b, nil
}

// restBody is the produce JSON; values are ASCII (Payload), so they need no
// escaping and the body is built by hand.
func restBody(acks int, compression string, partition int32, values [][]byte) []byte {
	var b bytes.Buffer
	b.WriteString(`{"acks":`)
	b.WriteString(strconv.Itoa(acks))
	if compression != "" {
		b.WriteString(`,"compression":"`)
		b.WriteString(compression) // a validated codec name: no escaping
		b.WriteByte('"')
	}
	b.WriteString(`,"records":[`)
	for i, v := range values {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"value":"`)
		b.Write(v)
		b.WriteByte('"')
		if partition >= 0 {
			b.WriteString(`,"partition":`)
			b.WriteString(strconv.Itoa(int(partition)))
		}
		b.WriteByte('}')
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

func (r *restClient) send(ctx context.Context, partition int32, values [][]byte, done func(int, error)) {
	var resp struct {
		Results []struct {
			ErrorCode string `json:"error_code"`
			Message   string `json:"message"`
		} `json:"results"`
	}
	if err := r.do(ctx, "POST", "/v1/topics/"+r.topic+"/records", restBody(r.acks, r.compression, partition, values), &resp); err != nil {
		done(len(values), err)
		return
	}
	if len(resp.Results) != len(values) {
		done(len(values), fmt.Errorf("%d results for %d records", len(resp.Results), len(values)))
		return
	}
	failed := 0
	var first error
	for _, res := range resp.Results {
		if res.ErrorCode != "NONE" {
			failed++
			if first == nil {
				first = fmt.Errorf("%s: %s", res.ErrorCode, res.Message)
			}
		}
	}
	done(failed, first)
}

// jnum reads a protobuf JSON integer, a number or a string.
type jnum int64

func (n *jnum) UnmarshalJSON(b []byte) error {
	v, err := strconv.ParseInt(strings.Trim(string(b), `"`), 10, 64)
	*n = jnum(v)
	return err
}

func (r *restClient) fetch(ctx context.Context, partition int32, offset int64, lim fetchLimits) ([][]byte, int64, error) {
	path := fmt.Sprintf("/v1/topics/%s/partitions/%d/records?offset=%d&max_records=%d&max_bytes=%d&max_wait_ms=%d",
		r.topic, partition, offset, lim.maxRecords, 8<<20, lim.maxWait.Milliseconds())
	if lim.minBytes > 0 {
		path += fmt.Sprintf("&min_bytes=%d", lim.minBytes)
	}
	b, err := r.call(ctx, "GET", path, nil)
	if err != nil {
		return nil, offset, err
	}
	vals, next, err := decodeFetch(b)
	if err != nil {
		return nil, offset, fmt.Errorf("GET %s: %w", path, err)
	}
	return vals, next, nil
}

func (r *restClient) createTopic(ctx context.Context, name string, partitions, rf int, configs map[string]string) error {
	body := map[string]any{"name": name, "partitions": partitions, "configs": configs}
	if rf > 0 {
		body["replication_factor"] = rf
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return r.do(ctx, "POST", "/v1/topics", b, nil)
}

func (r *restClient) partitions(ctx context.Context, topic string) ([]partState, error) {
	var d struct {
		Partitions []struct {
			Leader   int32   `json:"leader"`
			Replicas []int32 `json:"replicas"`
			ISR      []int32 `json:"isr"`
		} `json:"partitions"`
	}
	if err := r.do(ctx, "GET", "/v1/topics/"+topic, nil, &d); err != nil {
		return nil, err
	}
	var out []partState
	for _, p := range d.Partitions {
		out = append(out, partState{leader: p.Leader, replicas: len(p.Replicas), isr: len(p.ISR)})
	}
	return out, nil
}

func (r *restClient) offsets(ctx context.Context, topic string, latest bool) (map[int32]int64, error) {
	spec := "EARLIEST"
	if latest {
		spec = "LATEST"
	}
	var resp struct {
		Offsets []struct {
			Partition int32 `json:"partition"`
			Offset    jnum  `json:"offset"`
		} `json:"offsets"`
	}
	if err := r.do(ctx, "GET", "/v1/topics/"+topic+"/offsets?spec="+spec, nil, &resp); err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, o := range resp.Offsets {
		out[o.Partition] = int64(o.Offset)
	}
	return out, nil
}

// ---- straight to the storage nodes ----

type direct struct {
	c     *client.Client
	p     *client.Producer
	topic string
	sem   chan struct{}
}

// batchSize is the producer's batch.size (0: the client's default).
func newDirect(ctx context.Context, controllers []string, topic string, acks, inFlight int, codec record.Compression, batchSize int) (*direct, error) {
	c, err := client.New(client.Config{Controllers: controllers})
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.WaitReady(wctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("no metadata from controllers %v: %w", controllers, err)
	}
	// Batched as the gateway batches: a partition with nothing in flight
	// sends at once, so the bounded sends in flight are not each held for
	// linger.ms.
	opts := []client.ProducerOption{client.WithAcks(acks), client.WithCompression(codec)}
	if batchSize > 0 {
		opts = append(opts, client.WithBatchSize(batchSize))
	}
	p := c.NewProducer(opts...)
	return &direct{c: c, p: p, topic: topic, sem: make(chan struct{}, max(inFlight, 1))}, nil
}

// send hands the records to the client's producer (which batches per
// partition and pipelines one stream per broker) in one ProduceAll; at
// most inFlight sends are unanswered at a time.
func (d *direct) send(ctx context.Context, partition int32, values [][]byte, done func(int, error)) {
	select {
	case d.sem <- struct{}{}:
	case <-ctx.Done():
		done(len(values), ctx.Err())
		return
	}
	var mu sync.Mutex
	left, failed := len(values), 0
	var first error
	recs := make([]client.Record, len(values))
	for i, v := range values {
		recs[i] = client.Record{Topic: d.topic, Value: v}
		if partition >= 0 {
			p := partition
			recs[i].Partition = &p
		}
	}
	d.p.ProduceAll(ctx, recs, func(_ int, res client.Result) {
		mu.Lock()
		left--
		if res.Err != nil {
			failed++
			if first == nil {
				first = res.Err
			}
		}
		last := left == 0
		mu.Unlock()
		if last {
			<-d.sem
			done(failed, first)
		}
	})
}

func (d *direct) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := d.p.Close(ctx)
	d.c.Close()
	return err
}

func (d *direct) fetch(ctx context.Context, partition int32, offset int64, lim fetchLimits) ([][]byte, int64, error) {
	res, err := d.c.Fetch(ctx, client.FetchRequest{Topic: d.topic, Partition: partition, Offset: offset,
		MaxRecords: lim.maxRecords, MaxBytes: 8 << 20, MaxWait: lim.maxWait, MinBytes: lim.minBytes})
	if err != nil {
		return nil, offset, err
	}
	vals := make([][]byte, len(res.Records))
	for i, r := range res.Records {
		vals[i] = r.Value
	}
	return vals, res.NextOffset, nil
}

func (d *direct) createTopic(ctx context.Context, name string, partitions, rf int, configs map[string]string) error {
	_, err := d.c.CreateTopic(ctx, client.TopicSpec{Name: name, Partitions: int32(partitions), ReplicationFactor: int32(rf), Configs: configs})
	return err
}

func (d *direct) partitions(ctx context.Context, topic string) ([]partState, error) {
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	m, err := d.c.WaitMetadata(wctx, func(m *metadata.Image) bool { return m.PartitionCount(topic) > 0 })
	if err != nil {
		return nil, err
	}
	var out []partState
	for _, p := range m.Partitions(topic) {
		out = append(out, partState{leader: p.GetLeader(), replicas: len(p.GetReplicas()), isr: len(p.GetIsr())})
	}
	return out, nil
}

func (d *direct) offsets(ctx context.Context, topic string, latest bool) (map[int32]int64, error) {
	ps, err := d.partitions(ctx, topic)
	if err != nil {
		return nil, err
	}
	parts := make([]int32, len(ps))
	for i := range parts {
		parts[i] = int32(i)
	}
	spec := client.EarliestOffset
	if latest {
		spec = client.LatestOffset
	}
	res, err := d.c.ListOffsets(ctx, topic, parts, spec, skeinv1.IsolationLevel_READ_UNCOMMITTED)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, o := range res {
		out[o.Partition] = o.Offset
	}
	return out, nil
}

// ---- a transactional producer per worker, straight to the storage nodes ----

func newTxnClient(ctx context.Context, controllers []string) (*client.Client, error) {
	c, err := client.New(client.Config{Controllers: controllers})
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.WaitReady(wctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("no metadata from controllers %v: %w", controllers, err)
	}
	return c, nil
}

// txnSender is one worker's transactional producer: each send writes its
// records in the open transaction (beginning one), and every perTxn records
// the transaction commits. A send is counted once its records are in the
// transaction; a failed commit fails the send that triggered it.
type txnSender struct {
	p      *client.TransactionalProducer
	topic  string
	perTxn int
	n      int // records in the open transaction
}

func newTxnSender(ctx context.Context, c *client.Client, topic, id string, perTxn int, codec record.Compression) (*txnSender, error) {
	p, err := c.NewTransactionalProducer(ctx, id, client.WithTxnCompression(codec))
	if err != nil {
		return nil, fmt.Errorf("transactional producer %s: %w", id, err)
	}
	return &txnSender{p: p, topic: topic, perTxn: perTxn}, nil
}

// send is synchronous: the worker loop calls it one at a time.
func (t *txnSender) send(ctx context.Context, partition int32, values [][]byte, done func(int, error)) {
	if t.n == 0 {
		if err := t.p.Begin(); err != nil {
			done(len(values), err)
			return
		}
	}
	recs := make([]client.Record, len(values))
	for i, v := range values {
		recs[i] = client.Record{Topic: t.topic, Value: v}
		if partition >= 0 {
			p := partition
			recs[i].Partition = &p
		}
	}
	if _, err := t.p.Send(ctx, recs...); err != nil {
		_ = t.p.Abort(ctx)
		t.n = 0
		done(len(values), err)
		return
	}
	t.n += len(values)
	if t.n >= t.perTxn {
		t.n = 0
		if err := t.p.Commit(ctx); err != nil {
			_ = t.p.Abort(ctx)
			done(len(values), err)
			return
		}
	}
	done(0, nil)
}

// close commits what is open and stops the producer.
func (t *txnSender) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	if t.n > 0 {
		err = t.p.Commit(ctx)
	}
	return errors.Join(err, t.p.Close())
}
