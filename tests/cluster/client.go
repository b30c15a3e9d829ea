package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	controllerv1 "skein/gen/skein/controller/v1"
	controllerv1grpc "skein/gen/skein/controller/v1/controllerv1grpc"
	storagev1 "skein/gen/skein/storage/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/libs/metadata/watch"
	"skein/libs/record"
	"skein/libs/rpcerr"
)

// Client is a minimal Skein client for cluster tests: it follows the
// metadata stream and talks to controllers and partition leaders directly.
type Client struct {
	t           testing.TB
	controllers []*grpc.ClientConn

	mu    sync.Mutex
	image *metadata.Image
	conns map[string]*grpc.ClientConn

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewClient connects to the controllers and starts following metadata.
func NewClient(t testing.TB, controllers []string) *Client {
	c := &Client{t: t, conns: map[string]*grpc.ClientConn{}}
	for _, a := range controllers {
		cc, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		c.controllers = append(c.controllers, cc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(1)
	go c.watch(ctx, controllers)
	t.Cleanup(c.Close)
	return c
}

// Close stops the watch and closes connections.
func (c *Client) Close() {
	c.cancel()
	c.wg.Wait()
	for _, cc := range c.controllers {
		cc.Close()
	}
	c.mu.Lock()
	for _, cc := range c.conns {
		cc.Close()
	}
	c.conns = map[string]*grpc.ClientConn{}
	c.mu.Unlock()
}

func (c *Client) watch(ctx context.Context, addrs []string) {
	defer c.wg.Done()
	ctrls := make([]watch.Controller, len(c.controllers))
	for i, cc := range c.controllers {
		ctrls[i] = watch.Controller{Addr: addrs[i], Client: controllerv1grpc.NewControllerServiceClient(cc)}
	}
	watch.Run(ctx, watch.Config{
		Controllers: ctrls, NodeID: -1, Logger: slog.New(slog.DiscardHandler),
		Backoff: func(int) time.Duration { return 100 * time.Millisecond },
	}, func(im *metadata.Image) {
		c.mu.Lock()
		c.image = im
		c.mu.Unlock()
	})
}

// Image is the latest metadata (nil before the first).
func (c *Client) Image() *metadata.Image {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.image
}

// Controller runs fn against the controllers until one answers without a
// transport error.
func (c *Client) Controller(fn func(controllerv1grpc.ControllerServiceClient) error) error {
	var err error
	for _, cc := range c.controllers {
		if err = rpcerr.FromStatus(fn(controllerv1grpc.NewControllerServiceClient(cc))); err == nil || !errs.IsRetriable(err) {
			return err
		}
	}
	return err
}

// CreateTopic creates a topic and waits until every partition has a leader.
func (c *Client) CreateTopic(name string, partitions, rf int32, configs map[string]string) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var resp *controllerv1.CreateTopicsResponse
		err := c.Controller(func(cc controllerv1grpc.ControllerServiceClient) error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var err error
			resp, err = cc.CreateTopics(ctx, &controllerv1.CreateTopicsRequest{Topics: []*controllerv1.CreatableTopic{{Name: name, Partitions: partitions, ReplicationFactor: rf, Configs: configs}}})
			return err
		})
		if err == nil && resp.GetTopics()[0].GetErrorCode() == 0 {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("create topic %s: %v %v", name, err, resp)
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.WaitFor("leaders for "+name, 30*time.Second, func(im *metadata.Image) bool {
		parts := im.Partitions(name)
		if int32(len(parts)) != partitions {
			return false
		}
		for _, p := range parts {
			if p.GetLeader() < 0 {
				return false
			}
		}
		return true
	})
}

// WaitFor polls the metadata until cond holds.
func (c *Client) WaitFor(what string, d time.Duration, cond func(*metadata.Image) bool) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if im := c.Image(); im != nil && cond(im) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("timed out after %v waiting for %s", d, what)
}

// Leader answers a partition's leader and epoch (-1 when offline or unknown).
func (c *Client) Leader(topic string, partition int32) (int32, int32) {
	im := c.Image()
	if im == nil {
		return -1, -1
	}
	p, ok := im.Partition(topic, partition)
	if !ok {
		return -1, -1
	}
	return p.GetLeader(), p.GetLeaderEpoch()
}

// Storage returns a client for a broker.
func (c *Client) Storage(broker int32) (storagev1.StorageServiceClient, error) {
	im := c.Image()
	if im == nil {
		return nil, errs.Errorf(errs.LeaderNotAvailable, "no metadata yet")
	}
	b, ok := im.Broker(metadata.BrokerID(broker))
	if !ok {
		return nil, errs.Errorf(errs.BrokerNotAvailable, "broker %d unknown", broker)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cc, ok := c.conns[b.GetGrpcAddr()]
	if !ok {
		var err error
		if cc, err = grpc.NewClient(b.GetGrpcAddr(), grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
			return nil, err
		}
		c.conns[b.GetGrpcAddr()] = cc
	}
	return storagev1.NewStorageServiceClient(cc), nil
}

// ProducerID allocates one producer id from the controller.
func (c *Client) ProducerID() int64 {
	c.t.Helper()
	var resp *controllerv1.AllocateProducerIdsResponse
	err := c.Controller(func(cc controllerv1grpc.ControllerServiceClient) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		resp, err = cc.AllocateProducerIds(ctx, &controllerv1.AllocateProducerIdsRequest{NodeId: -1, Count: 1})
		return err
	})
	if err != nil {
		c.t.Fatalf("allocate producer id: %v", err)
	}
	return resp.GetFirstProducerId()
}

// ProduceOnce sends one batch to the partition's current leader with
// acks=all and answers the base offset and the answering leader's epoch.
func (c *Client) ProduceOnce(ctx context.Context, topic string, partition int32, batch []byte, acks int32) (offset int64, epoch int32, leader int32, err error) {
	leader, _ = c.Leader(topic, partition)
	if leader < 0 {
		return -1, -1, leader, errs.Errorf(errs.LeaderNotAvailable, "%s-%d has no leader", topic, partition)
	}
	sc, err := c.Storage(leader)
	if err != nil {
		return -1, -1, leader, err
	}
	resp, err := sc.Produce(ctx, &storagev1.ProduceRequest{Acks: acks, TimeoutMs: 5000, Partitions: []*storagev1.PartitionProduce{
		{Topic: topic, Partition: partition, CurrentLeaderEpoch: -1, Records: batch},
	}})
	if err != nil {
		return -1, -1, leader, rpcerr.FromStatus(err)
	}
	r := resp.GetPartitions()[0]
	if r.GetErrorCode() != 0 {
		return -1, r.GetLeaderEpoch(), leader, errs.Errorf(errs.ForCode(errs.Code(r.GetErrorCode())), "%s", r.GetErrorMessage())
	}
	return r.GetBaseOffset(), r.GetLeaderEpoch(), leader, nil
}

// Batch builds a one-record batch, idempotent when pid >= 0.
func Batch(t testing.TB, pid int64, seq int32, key, value string) []byte {
	opts := record.DefaultBatchOptions()
	if pid >= 0 {
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, 0, seq
	}
	b := record.NewBuilder(opts)
	b.Append(time.Now().UnixMilli(), []byte(key), []byte(value))
	batch, _, err := b.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	return batch
}

// Entry is one record read back.
type Entry struct {
	Offset int64
	Key    string
	Value  string
}

// ReadAll reads a partition from its log start to its HW from the leader.
func (c *Client) ReadAll(topic string, partition int32) ([]Entry, int64) {
	c.t.Helper()
	var out []Entry
	var hw int64 = -1
	offset := int64(0)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		leader, _ := c.Leader(topic, partition)
		sc, err := c.Storage(leader)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := sc.Fetch(ctx, &storagev1.FetchRequest{MaxBytes: 1 << 20, Partitions: []*storagev1.PartitionFetch{{Topic: topic, Partition: partition, FetchOffset: offset, CurrentLeaderEpoch: -1}}})
		cancel()
		if err == nil && offset == 0 && resp.GetPartitions()[0].GetErrorCode() == skeinv1.ErrorCode_OFFSET_OUT_OF_RANGE && resp.GetPartitions()[0].GetLogStartOffset() > 0 {
			offset = resp.GetPartitions()[0].GetLogStartOffset() // records were deleted before it
			continue
		}
		if err != nil || resp.GetPartitions()[0].GetErrorCode() != 0 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		r := resp.GetPartitions()[0]
		hw = r.GetHighWatermark()
		it := record.NewBatchIter(r.GetRecords())
		for it.Next() {
			var ri record.RecordIter
			if err := ri.Reset(it.Batch()); err != nil {
				c.t.Fatalf("decode: %v", err)
			}
			for ri.Next() {
				if int64(ri.Offset()) >= offset {
					out = append(out, Entry{Offset: int64(ri.Offset()), Key: string(ri.Record().Key), Value: string(ri.Record().Value)})
				}
			}
			offset = int64(it.Batch().NextOffset())
		}
		if offset >= hw {
			return out, hw
		}
	}
	c.t.Fatalf("reading %s-%d did not reach the HW in time (at %d, HW %d)", topic, partition, offset, hw)
	return nil, -1
}

// Ack is an acknowledged write.
type Ack struct {
	Producer int
	Seq      int
	Offset   int64
	Value    string
}

// CheckHistory asserts that every acknowledged record is in the log at the
// offset it was acknowledged with, that no value appears twice, that no
// offset holds two records, and that each producer's records are in order.
func CheckHistory(t testing.TB, acks []Ack, log []Entry) {
	t.Helper()
	byOffset := map[int64]string{}
	seen := map[string]int64{}
	for _, e := range log {
		if v, dup := byOffset[e.Offset]; dup {
			t.Errorf("offset %d holds %q and %q", e.Offset, v, e.Value)
		}
		byOffset[e.Offset] = e.Value
		if o, dup := seen[e.Value]; dup {
			t.Errorf("value %q written twice, at %d and %d", e.Value, o, e.Offset)
		}
		seen[e.Value] = e.Offset
	}
	lost := 0
	for _, a := range acks {
		if got, ok := byOffset[a.Offset]; !ok || got != a.Value {
			lost++
			if lost <= 10 {
				t.Errorf("acknowledged %q at offset %d, log has %q", a.Value, a.Offset, got)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged records lost", lost, len(acks))
	}
	last := map[string]int64{}
	for _, e := range log {
		var p, s int
		if _, err := fmt.Sscanf(e.Value, "p%d-%d", &p, &s); err != nil {
			continue
		}
		k := fmt.Sprint(p)
		if prev, ok := last[k]; ok && int64(s) <= prev {
			t.Errorf("producer %d: sequence %d after %d", p, s, prev)
		}
		last[k] = int64(s)
	}
}
