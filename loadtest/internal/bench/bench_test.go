package bench

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client/clienttest"
)

func TestPayloadCarriesItsSendTime(t *testing.T) {
	at := time.Unix(1_764_400_000, 123_456_789)
	for _, size := range []int{19, 20, 100, 1024} {
		v := Payload(nil, size, at)
		if len(v) != size {
			t.Fatalf("size %d: got %d bytes", size, len(v))
		}
		got, ok := SentAt(v)
		if !ok || !got.Equal(at) {
			t.Errorf("size %d: SentAt = %v %v, want %v", size, got, ok, at)
		}
		for _, c := range v {
			if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
				t.Fatalf("size %d: byte %q needs escaping in JSON", size, c)
			}
		}
	}
	if v := Payload(nil, 10, at); len(v) != 10 {
		t.Errorf("a 10-byte payload has %d bytes", len(v))
	} else if _, ok := SentAt(v); ok {
		t.Error("a payload shorter than the stamp has no send time")
	}
	if _, ok := SentAt([]byte("not a time at all, really")); ok {
		t.Error("text is not a send time")
	}
	early := time.Unix(0, 42)
	if got, ok := SentAt(Payload(nil, 30, early)); !ok || !got.Equal(early) {
		t.Errorf("a short time is zero-padded: got %v %v", got, ok)
	}
}

func TestPayloadFiller(t *testing.T) {
	at := time.Unix(1_764_400_000, 123_456_789)
	for _, size := range []int{0, 1, 18, 19, 20, 26, 45, 46, 1024, len(filler) - 1, len(filler), len(filler) + 7, 3*len(filler) + 100} {
		v := Payload(make([]byte, 0, 8), size, at)
		if len(v) != size {
			t.Fatalf("size %d: got %d bytes", size, len(v))
		}
		from := 0
		if size >= stampLen {
			from = stampLen
		}
		for i := from; i < size; i++ {
			if want := 'a' + byte(i%26); v[i] != want {
				t.Fatalf("size %d: byte %d is %q, want %q", size, i, v[i], want)
			}
		}
	}
}

func BenchmarkPayload(b *testing.B) {
	buf := make([]byte, 1024)
	at := time.Now()
	b.SetBytes(1024)
	for b.Loop() {
		buf = Payload(buf, 1024, at)
	}
}

func TestRESTBodyIsTheAPIsJSON(t *testing.T) {
	vals := [][]byte{Payload(nil, 40, time.Now()), Payload(nil, 25, time.Now())}
	var body struct {
		Acks        int    `json:"acks"`
		Compression string `json:"compression"`
		Records     []struct {
			Value     string `json:"value"`
			Partition *int32 `json:"partition"`
		} `json:"records"`
	}
	if err := json.Unmarshal(restBody(-1, "", 2, vals), &body); err != nil {
		t.Fatal(err)
	}
	if body.Acks != -1 || body.Compression != "" || len(body.Records) != 2 || body.Records[1].Value != string(vals[1]) || *body.Records[0].Partition != 2 {
		t.Errorf("body %+v", body)
	}
	body.Records = nil
	if err := json.Unmarshal(restBody(1, "lz4", -1, vals), &body); err != nil || body.Records[0].Partition != nil || body.Compression != "lz4" {
		t.Errorf("no partition, lz4: %v %+v", err, body)
	}
}

// fakeGateway answers the public ProducerService and ConsumerService from an
// in-memory log per partition.
type fakeGateway struct {
	skeinv1.UnimplementedProducerServiceServer
	skeinv1.UnimplementedConsumerServiceServer
	skeinv1.UnimplementedAdminServiceServer
	mu   sync.Mutex
	logs map[int32][][]byte
	// unnamed counts records that named no partition (all land in 0).
	unnamed int
}

func (g *fakeGateway) append(recs []*skeinv1.ProduceRecord) []*skeinv1.ProduceResult {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*skeinv1.ProduceResult, len(recs))
	for i, r := range recs {
		if r.Partition == nil {
			g.unnamed++
		}
		p := r.GetPartition()
		g.logs[p] = append(g.logs[p], r.GetValueBytes())
		out[i] = &skeinv1.ProduceResult{Partition: p, Offset: int64(len(g.logs[p]) - 1)}
	}
	return out
}

func (g *fakeGateway) Produce(_ context.Context, req *skeinv1.ProduceRequest) (*skeinv1.ProduceResponse, error) {
	return &skeinv1.ProduceResponse{Results: g.append(req.GetRecords())}, nil
}

func (g *fakeGateway) ProduceStream(s skeinv1.ProducerService_ProduceStreamServer) error {
	for {
		req, err := s.Recv()
		if err != nil {
			return nil
		}
		if err := s.Send(&skeinv1.ProduceStreamResponse{CorrelationId: req.GetCorrelationId(), Results: g.append(req.GetRecords())}); err != nil {
			return err
		}
	}
}

func (g *fakeGateway) Fetch(_ context.Context, req *skeinv1.FetchRequest) (*skeinv1.FetchResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	log := g.logs[req.GetPartition()]
	from := int(req.GetOffset())
	to := min(len(log), from+int(req.GetMaxRecords()))
	resp := &skeinv1.FetchResponse{NextOffset: int64(max(to, from)), HighWatermark: int64(len(log))}
	for o := from; o < to; o++ {
		resp.Records = append(resp.Records, &skeinv1.ConsumedRecord{Partition: req.GetPartition(), Offset: int64(o), ValueBytes: log[o]})
	}
	return resp, nil
}

func (g *fakeGateway) CreateTopic(_ context.Context, req *skeinv1.CreateTopicRequest) (*skeinv1.CreateTopicResponse, error) {
	return &skeinv1.CreateTopicResponse{}, nil
}

func (g *fakeGateway) DescribeTopic(context.Context, *skeinv1.DescribeTopicRequest) (*skeinv1.DescribeTopicResponse, error) {
	return &skeinv1.DescribeTopicResponse{Topic: &skeinv1.TopicDescription{Partitions: []*skeinv1.PartitionDescription{{Partition: 0}, {Partition: 1}}}}, nil
}

func (g *fakeGateway) ListOffsets(context.Context, *skeinv1.ListOffsetsRequest) (*skeinv1.ListOffsetsResponse, error) {
	return &skeinv1.ListOffsetsResponse{Offsets: []*skeinv1.PartitionOffset{{Partition: 0}, {Partition: 1}}}, nil
}

func serveFakeGateway(t *testing.T) (*fakeGateway, string) {
	g := &fakeGateway{logs: map[int32][][]byte{}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	skeinv1.RegisterProducerServiceServer(s, g)
	skeinv1.RegisterConsumerServiceServer(s, g)
	skeinv1.RegisterAdminServiceServer(s, g)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return g, lis.Addr().String()
}

func TestProduceAndConsumeThroughTheGatewayGRPC(t *testing.T) {
	g, addr := serveFakeGateway(t)
	ep := Endpoints{Gateway: addr}
	for _, tr := range []string{GRPCStream, GRPC} {
		sum, err := Produce(context.Background(), ProduceConfig{Transport: tr, Endpoints: ep, Topic: Topic{Name: "t", Create: true, Partitions: 2},
			RecordSize: 100, NumRecords: 1001, Batch: 10, Concurrency: 3, InFlight: 4, Acks: -1})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Records != 1001 || sum.Errors != 0 || sum.Bytes != 100100 || sum.Latency.Count != 1001 || sum.RecordsPerS <= 0 {
			t.Errorf("%s: %+v", tr, sum)
		}
	}
	g.mu.Lock()
	n0, n1 := len(g.logs[0]), len(g.logs[1])
	g.mu.Unlock()
	if n0+n1 != 2002 || n0 == 0 || n1 == 0 {
		t.Errorf("partitions got %d and %d records, want 2002 spread over both", n0, n1)
	}
	sum, err := Consume(context.Background(), ConsumeConfig{Transport: GRPC, Endpoints: ep, Topic: "t", NumRecords: 2002, MaxRecords: 300, MaxWait: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != 2002 || sum.Bytes != 200200 || sum.EndToEnd == nil || sum.EndToEnd.Count != 2002 || sum.EndToEnd.P50 < 0 {
		t.Errorf("consume: %+v", sum)
	}
}

// With Keyless no request names a partition, for the producer to place;
// without it every request names one, in turn.
func TestKeylessRecordsNameNoPartition(t *testing.T) {
	for _, tr := range []string{GRPCStream, GRPC} {
		for _, keyless := range []bool{false, true} {
			g, addr := serveFakeGateway(t)
			sum, err := Produce(context.Background(), ProduceConfig{Transport: tr, Endpoints: Endpoints{Gateway: addr}, Topic: Topic{Name: "t", Create: true, Partitions: 2},
				RecordSize: 20, NumRecords: 300, Batch: 10, Concurrency: 2, InFlight: 4, Acks: -1, Keyless: keyless})
			if err != nil {
				t.Fatal(err)
			}
			g.mu.Lock()
			unnamed, n0, n1 := g.unnamed, len(g.logs[0]), len(g.logs[1])
			g.mu.Unlock()
			if sum.Records != 300 || sum.Errors != 0 || sum.Keyless != keyless {
				t.Errorf("%s keyless=%v: %+v", tr, keyless, sum)
			}
			switch {
			case keyless && (unnamed != 300 || n0 != 300):
				t.Errorf("%s keyless: %d of 300 records named no partition (partitions got %d and %d)", tr, unnamed, n0, n1)
			case !keyless && (unnamed != 0 || n0 != 150 || n1 != 150):
				t.Errorf("%s: %d records named no partition, partitions got %d and %d, want 150 each", tr, unnamed, n0, n1)
			}
		}
	}
}

func TestRateLimitedProduce(t *testing.T) {
	_, addr := serveFakeGateway(t)
	start := time.Now()
	sum, err := Produce(context.Background(), ProduceConfig{Transport: GRPCStream, Endpoints: Endpoints{Gateway: addr}, Topic: Topic{Name: "t"},
		RecordSize: 50, NumRecords: 200, Rate: 1000, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 190*time.Millisecond || sum.Records != 200 || sum.TargetRate != 1000 {
		t.Errorf("200 records at 1000/s took %v: %+v", el, sum)
	}
}

func TestWarmupIsNotCounted(t *testing.T) {
	g, addr := serveFakeGateway(t)
	sum, err := Produce(context.Background(), ProduceConfig{Transport: GRPCStream, Endpoints: Endpoints{Gateway: addr}, Topic: Topic{Name: "t"},
		RecordSize: 30, NumRecords: 50, Rate: 2000, Warmup: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	sent := len(g.logs[0]) + len(g.logs[1])
	g.mu.Unlock()
	// The warm-up is time-based (100 ms at 2000/s, ~200 records on an idle
	// box, fewer on a loaded one): what matters is that some were sent and
	// none of them counted.
	if sum.Records != 50 || sum.Latency.Count != 50 || sent <= 50 {
		t.Errorf("summary counts %d records (%d latencies); the gateway got %d, want 50 plus the warm-up's", sum.Records, sum.Latency.Count, sent)
	}
}

func TestProduceOverREST(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "POST" && r.URL.Path == "/v1/topics":
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `{"code":6,"error_code":"TOPIC_ALREADY_EXISTS","message":"exists"}`)
		case r.Method == "GET" && r.URL.Path == "/v1/topics/t":
			io.WriteString(w, `{"name":"t","partitions":[{"partition":0}]}`)
		case r.Method == "POST" && r.URL.Path == "/v1/topics/t/records":
			var body struct {
				Acks    int `json:"acks"`
				Records []struct {
					Value string `json:"value"`
				} `json:"records"`
			}
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Acks != 1 {
				http.Error(w, "bad body", 400)
				return
			}
			mu.Lock()
			var res []string
			for _, rec := range body.Records {
				got = append(got, rec.Value)
				code := "NONE"
				if strings.HasSuffix(rec.Value, "!") {
					code = "CORRUPT_MESSAGE"
				}
				res = append(res, `{"partition":0,"offset":"1","error_code":"`+code+`"}`)
			}
			mu.Unlock()
			io.WriteString(w, `{"results":[`+strings.Join(res, ",")+`]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	sum, err := Produce(context.Background(), ProduceConfig{Transport: REST, Endpoints: Endpoints{REST: srv.URL}, Topic: Topic{Name: "t", Create: true},
		RecordSize: 64, NumRecords: 95, Batch: 10, Concurrency: 2, Acks: 1})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != 95 || sum.Errors != 0 || len(got) != 95 {
		t.Errorf("%+v, server saw %d records", sum, len(got))
	}
	for _, v := range got {
		if _, ok := SentAt([]byte(v)); !ok || len(v) != 64 {
			t.Fatalf("value %q", v)
		}
	}
}

// Straight to the storage nodes through libs/client, against its in-process
// fake cluster.
func TestDirectProduceAndConsume(t *testing.T) {
	c := clienttest.Start(t, 3)
	ep := Endpoints{Controllers: []string{c.ControllerAddr}}
	sum, err := Produce(context.Background(), ProduceConfig{Transport: Direct, Endpoints: ep, Topic: Topic{Name: "d", Create: true, Partitions: 3, ReplicationFactor: 3},
		RecordSize: 200, NumRecords: 3000, Batch: 5, Concurrency: 3, InFlight: 64, Acks: -1})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != 3000 || sum.Errors != 0 {
		t.Fatalf("produce: %+v", sum)
	}
	// Keyless: libs/client's producer places the records, in batches of
	// up to 64 KiB.
	sum, err = Produce(context.Background(), ProduceConfig{Transport: Direct, Endpoints: ep, Topic: Topic{Name: "d"},
		RecordSize: 200, NumRecords: 3000, Batch: 5, Concurrency: 3, InFlight: 64, Acks: -1, Keyless: true, ProducerBatchSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != 3000 || sum.Errors != 0 || !sum.Keyless {
		t.Fatalf("keyless produce: %+v", sum)
	}
	cs, err := Consume(context.Background(), ConsumeConfig{Transport: Direct, Endpoints: ep, Topic: "d", IdleTimeout: 300 * time.Millisecond, MaxWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if cs.Records != 6000 || cs.Bytes != 1200000 || cs.EndToEnd == nil || cs.Concurrency != 3 {
		t.Errorf("consume: %+v", cs)
	}
}

// A transactional producer per worker, committing every TxnRecords records,
// against the in-process fake cluster.
func TestTxnProduce(t *testing.T) {
	c := clienttest.Start(t, 3)
	tc, _ := c.StartTxnCoordinator(t, 1)
	ep := Endpoints{Controllers: []string{c.ControllerAddr}}
	sum, err := Produce(context.Background(), ProduceConfig{Transport: Txn, Endpoints: ep, Topic: Topic{Name: "x", Create: true, Partitions: 3, ReplicationFactor: 3},
		RecordSize: 100, NumRecords: 1000, Batch: 10, Concurrency: 2, TxnRecords: 100, Acks: -1})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != 1000 || sum.Errors != 0 {
		t.Fatalf("produce: %+v", sum)
	}
	ends := 0
	for _, call := range tc.Calls() {
		if call == "end" {
			ends++
		}
	}
	// 100 per transaction, and each worker's last one, partly full,
	// committed at close.
	if ends < 10 || ends > 12 {
		t.Errorf("%d transactions ended, want 10 to 12 (1000 records, 100 per transaction, 2 workers)", ends)
	}
}

func TestCompressionIsValidated(t *testing.T) {
	for _, name := range []string{"", "none", "uncompressed", "gzip", "snappy", "lz4", "zstd"} {
		c := ProduceConfig{Compression: name, Topic: Topic{Name: "t"}}
		if err := c.defaults(); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
	c := ProduceConfig{Compression: "brotli", Topic: Topic{Name: "t"}}
	if err := c.defaults(); err == nil || !strings.Contains(err.Error(), `--compression "brotli"`) {
		t.Errorf("brotli: %v", err)
	}
}

func TestProducerBatchSizeIsValidated(t *testing.T) {
	for _, c := range []struct {
		cfg  ProduceConfig
		want string
	}{
		{ProduceConfig{Transport: Direct, ProducerBatchSize: -1}, "--producer-batch-size -1"},
		{ProduceConfig{Transport: GRPCStream, ProducerBatchSize: 1 << 16}, "only with --transport direct"},
		{ProduceConfig{Transport: Direct, ProducerBatchSize: 1 << 16}, ""},
		{ProduceConfig{Transport: GRPCStream}, ""},
	} {
		c.cfg.Topic = Topic{Name: "t"}
		err := c.cfg.defaults()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s, %d bytes: %v, want %q", c.cfg.Transport, c.cfg.ProducerBatchSize, err, c.want)
		}
	}
}

// Tail answers the partition's log from the asked offset, then whatever is
// appended, polling.
func (g *fakeGateway) Tail(req *skeinv1.TailRequest, s skeinv1.ConsumerService_TailServer) error {
	next := int(req.GetOffset())
	for s.Context().Err() == nil {
		g.mu.Lock()
		log := g.logs[req.GetPartition()]
		to := min(len(log), next+7) // several answers per partition
		resp := &skeinv1.TailResponse{NextOffset: int64(max(to, next)), HighWatermark: int64(len(log))}
		for o := next; o < to; o++ {
			resp.Records = append(resp.Records, &skeinv1.ConsumedRecord{Partition: req.GetPartition(), Offset: int64(o), ValueBytes: log[o]})
		}
		g.mu.Unlock()
		if len(resp.Records) == 0 {
			time.Sleep(time.Millisecond)
			continue
		}
		if err := s.Send(resp); err != nil {
			return err
		}
		next = to
	}
	return nil
}

// A tailing consumer on the gateway's Tail streams reads every record once,
// including those written after it started, and a producer cannot use it.
func TestConsumeThroughTheGatewayTail(t *testing.T) {
	g, addr := serveFakeGateway(t)
	ep := Endpoints{Gateway: addr}
	produce := func(n int64) {
		t.Helper()
		sum, err := Produce(context.Background(), ProduceConfig{Transport: GRPC, Endpoints: ep, Topic: Topic{Name: "t", Create: true, Partitions: 2},
			RecordSize: 50, NumRecords: n, Batch: 10, Concurrency: 2, Acks: -1})
		if err != nil || sum.Records != n {
			t.Fatalf("produce: %+v %v", sum, err)
		}
	}
	produce(300)
	done := make(chan Summary, 1)
	go func() {
		sum, err := Consume(context.Background(), ConsumeConfig{Transport: Tail, Endpoints: ep, Topic: "t", NumRecords: 600, MaxWait: 10 * time.Millisecond, IdleTimeout: 5 * time.Second})
		if err != nil {
			t.Error(err)
		}
		done <- sum
	}()
	time.Sleep(50 * time.Millisecond)
	produce(300)
	sum := <-done
	if sum.Records != 600 || sum.Bytes != 30000 || sum.EndToEnd == nil || sum.EndToEnd.Count != 600 || sum.Transport != Tail {
		t.Errorf("consume: %+v", sum)
	}
	g.mu.Lock()
	n := len(g.logs[0]) + len(g.logs[1])
	g.mu.Unlock()
	if n != 600 {
		t.Errorf("the fake holds %d records, want 600", n)
	}
	if _, err := Produce(context.Background(), ProduceConfig{Transport: Tail, Endpoints: ep, Topic: Topic{Name: "t"}, NumRecords: 1}); err == nil || !strings.Contains(err.Error(), "consumes only") {
		t.Errorf("produce over tail: %v, want a refusal", err)
	}
}
