//go:build integration

package fault

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/history"
	"skein/libs/tlsconf"
	"skein/tests/e2e"
)

// devCluster starts a `skein dev` cluster of its own for one test and stops
// it when the test ends.
type devCluster struct {
	t    *testing.T
	dev  *e2e.Dev
	http *http.Client
}

func startDev(t *testing.T, extra ...string) *devCluster {
	t.Helper()
	bin, err := e2e.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	d, err := e2e.StartDevWith(bin, dir, 90*time.Second, extra...)
	if err != nil {
		t.Fatal(err)
	}
	c := &devCluster{t: t, dev: d, http: &http.Client{Timeout: 45 * time.Second}}
	if slices.Contains(extra, "--secure") {
		// The cluster's CA and client certificate, from cluster.json.
		var cj struct {
			TLS struct {
				CA         string `json:"ca"`
				ClientCert string `json:"client_cert"`
				ClientKey  string `json:"client_key"`
			} `json:"tls"`
		}
		raw, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
		if err == nil {
			err = json.Unmarshal(raw, &cj)
		}
		if err != nil {
			t.Fatal(err)
		}
		tc, err := tlsconf.ClientConfigFiles(cj.TLS.CA, cj.TLS.ClientCert, cj.TLS.ClientKey)
		if err != nil {
			t.Fatal(err)
		}
		c.http.Transport = &http.Transport{TLSClientConfig: tc}
	}
	t.Cleanup(func() {
		// Nothing may stay paused, or the stop would wait for it.
		for _, p := range c.processes() {
			_ = syscall.Kill(p.PID, syscall.SIGCONT)
		}
		if t.Failed() {
			t.Logf("skein dev logs:\n%s", d.LogTails(25))
		}
		if err := d.Stop(60 * time.Second); err != nil {
			t.Errorf("stopping skein dev: %v", err)
		}
	})
	return c
}

func (c *devCluster) processes() []e2e.Process {
	ps, err := c.dev.Processes()
	if err != nil {
		c.t.Fatal(err)
	}
	return ps
}

// storagePID answers the pid of storage node id.
func (c *devCluster) storagePID(id int32) int {
	for _, p := range c.processes() {
		if p.Role == "storage" && int32(p.ID) == id {
			return p.PID
		}
	}
	c.t.Fatalf("no storage node %d in cluster.json", id)
	return 0
}

// do sends a REST call and decodes a 2xx answer into out; any other
// answer is an *e2e.APIError.
func (c *devCluster) do(ctx context.Context, method, path string, body, out any) error {
	return (&e2e.REST{Base: c.dev.BaseURL, HC: c.http}).Call(ctx, method, path, body, out)
}

// num is a JSON number that may come as a string (64-bit integers).
type num = e2e.Int64

type partitionDesc struct {
	Partition int32   `json:"partition"`
	Leader    int32   `json:"leader"`
	ISR       []int32 `json:"isr"`
	Replicas  []int32 `json:"replicas"`
	// HighWatermark is "-1" where the leader did not answer.
	HighWatermark string `json:"high_watermark"`
}

func (c *devCluster) describe(topic string) []partitionDesc {
	var d struct {
		Partitions []partitionDesc `json:"partitions"`
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.do(ctx, "GET", "/v1/topics/"+topic, nil, &d); err != nil {
		c.t.Logf("describe %s: %v", topic, err)
		return nil
	}
	return d.Partitions
}

// eventually retries f every 200 ms until it succeeds or timeout passes.
func (c *devCluster) eventually(timeout time.Duration, what string, f func() error) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// createTopic creates a topic and waits until every partition has a full ISR.
// extra configs are added to min.insync.replicas.
func (c *devCluster) createTopic(name string, partitions, rf int, minISR int, extra ...map[string]string) []partitionDesc {
	c.t.Helper()
	configs := map[string]string{"min.insync.replicas": strconv.Itoa(minISR)}
	for _, m := range extra {
		maps.Copy(configs, m)
	}
	body := map[string]any{"name": name, "partitions": partitions, "replication_factor": rf, "configs": configs}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.do(ctx, "POST", "/v1/topics", body, nil); err != nil {
		c.t.Fatal(err)
	}
	var ps []partitionDesc
	c.eventually(30*time.Second, "topic "+name+" fully in sync", func() error {
		ps = c.describe(name)
		if len(ps) != partitions {
			return fmt.Errorf("%d partitions", len(ps))
		}
		for _, p := range ps {
			if p.Leader < 0 || len(p.ISR) != rf {
				return fmt.Errorf("partition %d: leader %d isr %v", p.Partition, p.Leader, p.ISR)
			}
		}
		return nil
	})
	return ps
}

// restProducer produces one record to each partition of parts per request
// with acks=all until stop closes, recording each outcome in h (the
// producer is named prefix).
func (c *devCluster) restProducer(h *history.Recorder, topic string, parts []int32, prefix string, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		var resp struct {
			Results []struct {
				Offset    num    `json:"offset"`
				ErrorCode string `json:"error_code"`
				Message   string `json:"message"`
				Outcome   string `json:"outcome"`
			} `json:"results"`
		}
		var values []string
		var records []map[string]any
		for _, p := range parts {
			v := fmt.Sprintf("%s-%d-p%d", prefix, seq, p)
			values = append(values, v)
			records = append(records, map[string]any{"value": v, "partition": p})
		}
		body := map[string]any{"acks": -1, "records": records}
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		start := time.Now()
		err := c.do(ctx, "POST", "/v1/topics/"+topic+"/records", body, &resp)
		cancel()
		end := time.Now()
		for i, p := range parts {
			v := values[i]
			switch {
			case err != nil:
				h.Failed(prefix, p, v, history.Unknown, err.Error(), start, end)
			case len(resp.Results) != len(parts):
				h.Failed(prefix, p, v, history.Unknown, fmt.Sprintf("%d results for %d records: %+v", len(resp.Results), len(parts), resp.Results), start, end)
			default:
				r := resp.Results[i]
				if o := history.OutcomeOf(r.Outcome, r.ErrorCode); o != history.Written {
					h.Failed(prefix, p, v, o, r.ErrorCode+": "+r.Message, start, end)
				} else {
					h.Acked(prefix, p, v, int64(r.Offset), start, end)
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// streamProducer produces over the gateway's gRPC ProduceStream, one request
// of one record to partition p in flight at a time, until stop closes.
func (c *devCluster) streamProducer(h *history.Recorder, topic string, p int32, prefix string, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	cc, err := grpc.NewClient(c.dev.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.t.Logf("%s: dial: %v", prefix, err)
		return
	}
	defer cc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stream grpc.BidiStreamingClient[skeinv1.ProduceStreamRequest, skeinv1.ProduceStreamResponse]
	acks := int32(-1)
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		if stream == nil {
			if stream, err = skeinv1.NewProducerServiceClient(cc).ProduceStream(ctx); err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
		}
		v := fmt.Sprintf("%s-%d", prefix, seq)
		start := time.Now()
		err := stream.Send(&skeinv1.ProduceStreamRequest{CorrelationId: uint64(seq), Topic: topic, Acks: &acks,
			Records: []*skeinv1.ProduceRecord{{Value: &v, Partition: &p}}})
		var resp *skeinv1.ProduceStreamResponse
		if err == nil {
			resp, err = stream.Recv()
		}
		end := time.Now()
		switch {
		case err != nil:
			h.SendErr(prefix, p, v, fmt.Errorf("stream: %w", err), start, end)
			stream = nil
		case len(resp.GetResults()) != 1:
			h.Failed(prefix, p, v, history.Unknown, fmt.Sprintf("%d results: %v", len(resp.GetResults()), resp.GetResults()), start, end)
		default:
			h.SendResult(prefix, v, resp.GetResults()[0], start, end)
		}
	}
}

// tail follows partition p from offset 0 with long polls until stop
// closes, recording every poll that answered as the standalone consumer
// "tail".
func (c *devCluster) tail(h *history.Recorder, topic string, p int32, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	next := int64(0)
	for {
		select {
		case <-stop:
			return
		default:
		}
		var f struct {
			Records []struct {
				Offset num    `json:"offset"`
				Value  string `json:"value"`
			} `json:"records"`
			Next num `json:"next_offset"`
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		err := c.do(ctx, "GET", fmt.Sprintf("/v1/topics/%s/partitions/%d/records?offset=%d&max_records=1000&max_wait_ms=1000", topic, p, next), nil, &f)
		cancel()
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		poll := history.Poll{Consumer: "tail", Invoke: start, Complete: time.Now()}
		for _, r := range f.Records {
			poll.Records = append(poll.Records, history.Record{Partition: p, Offset: int64(r.Offset), Value: r.Value})
		}
		h.Poll(poll)
		if int64(f.Next) > next {
			next = int64(f.Next)
		}
	}
}

// grpcTail follows partition p from offset 0 on the gateway's gRPC Tail
// stream until stop closes, recording each response as a poll of the
// standalone consumer "grpc-tail" (from the response before it). A stream
// that ends is opened again from where it stopped.
func (c *devCluster) grpcTail(h *history.Recorder, topic string, p int32, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	cc, err := grpc.NewClient(c.dev.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.t.Logf("grpc-tail: dial: %v", err)
		return
	}
	defer cc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stop
		cancel()
	}()
	cons := skeinv1.NewConsumerServiceClient(cc)
	next := int64(0)
	for ctx.Err() == nil {
		stream, err := cons.Tail(ctx, &skeinv1.TailRequest{Topic: topic, Partition: p, Offset: &next})
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		last := time.Now()
		for {
			resp, err := stream.Recv()
			if err != nil {
				break
			}
			poll := history.Poll{Consumer: "grpc-tail", Invoke: last, Complete: time.Now()}
			for _, r := range resp.GetRecords() {
				poll.Records = append(poll.Records, history.Record{Partition: p, Offset: r.GetOffset(), Value: r.GetValue()})
			}
			h.Poll(poll)
			next, last = max(next, resp.GetNextOffset()), poll.Complete
		}
		if ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// readTimes answers when consumer's polls that returned records of
// partition p completed.
func readTimes(hist history.History, consumer string, p int32) []time.Time {
	var out []time.Time
	for _, poll := range hist.Polls {
		if poll.Consumer == consumer && slices.ContainsFunc(poll.Records, func(r history.Record) bool { return r.Partition == p }) {
			out = append(out, poll.Complete)
		}
	}
	return out
}

// readAll reads partition p from offset 0 to its high watermark.
func (c *devCluster) readAll(topic string, p int32) map[int64]string {
	c.t.Helper()
	out := map[int64]string{}
	next := int64(0)
	for {
		var f struct {
			Records []struct {
				Offset num    `json:"offset"`
				Value  string `json:"value"`
			} `json:"records"`
			Next num `json:"next_offset"`
			HW   num `json:"high_watermark"`
		}
		path := fmt.Sprintf("/v1/topics/%s/partitions/%d/records?offset=%d&max_records=2000", topic, p, next)
		c.eventually(30*time.Second, "a fetch", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return c.do(ctx, "GET", path, nil, &f)
		})
		for _, r := range f.Records {
			if _, dup := out[int64(r.Offset)]; dup {
				c.t.Errorf("partition %d: offset %d answered twice", p, r.Offset)
			}
			out[int64(r.Offset)] = r.Value
		}
		if int64(f.Next) > next {
			next = int64(f.Next)
		}
		if next >= int64(f.HW) {
			return out
		}
	}
}

// audit checks what the clients saw against the final read of the topic
// with libs/history: any anomaly fails the test; the table is logged
// either way.
func audit(t *testing.T, h *history.Recorder, log history.Log) *history.Result {
	t.Helper()
	res := history.Check(h.History(), log, history.Options{})
	if res.Valid() {
		t.Logf("audit:\n%s", res)
	} else {
		t.Errorf("audit:\n%s", res)
	}
	return res
}

func TestMain(m *testing.M) { os.Exit(m.Run()) }
