package lab

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	storagev1 "skein/gen/skein/storage/v1"
	"skein/libs/errs"
	"skein/libs/history"
	"skein/libs/record"
	"skein/libs/rpcerr"
	"skein/tests/e2e"
)

// do sends a REST call to the gateway and decodes a 2xx answer into out;
// any other answer is an *e2e.APIError.
func (l *lab) do(ctx context.Context, method, path string, body, out any) error {
	return (&e2e.REST{Base: l.dev.BaseURL, HC: l.hc}).Call(ctx, method, path, body, out)
}

// call is do bounded by d.
func (l *lab) call(d time.Duration, method, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(l.ctx, d)
	defer cancel()
	return l.do(ctx, method, path, body, out)
}

type partitionDesc struct {
	Partition int32     `json:"partition"`
	Leader    int32     `json:"leader"`
	Epoch     int32     `json:"leader_epoch"`
	Replicas  []int32   `json:"replicas"`
	ISR       []int32   `json:"isr"`
	HW        e2e.Int64 `json:"high_watermark"`
}

// describe answers the partitions of topic.
func (l *lab) describe(topic string) ([]partitionDesc, error) {
	var d struct {
		Partitions []partitionDesc `json:"partitions"`
	}
	if err := l.call(10*time.Second, "GET", "/v1/topics/"+topic, nil, &d); err != nil {
		return nil, err
	}
	return d.Partitions, nil
}

// partition answers partition p of topic.
func (l *lab) partition(topic string, p int32) (partitionDesc, error) {
	ps, err := l.describe(topic)
	if err != nil {
		return partitionDesc{}, err
	}
	for _, d := range ps {
		if d.Partition == p {
			return d, nil
		}
	}
	return partitionDesc{}, fmt.Errorf("topic %s has no partition %d", topic, p)
}

// createTopic creates a topic of RF 3 and waits until every partition has
// a leader and a full ISR.
func (l *lab) createTopic(name string, partitions int, configs map[string]string) ([]partitionDesc, error) {
	body := map[string]any{"name": name, "partitions": partitions, "replication_factor": 3, "configs": configs}
	if err := l.call(30*time.Second, "POST", "/v1/topics", body, nil); err != nil {
		return nil, err
	}
	var ps []partitionDesc
	err := l.waitFor(30*time.Second, "topic "+name+" in sync", func() error {
		var err error
		if ps, err = l.describe(name); err != nil {
			return err
		}
		if len(ps) != partitions {
			return fmt.Errorf("%d partitions", len(ps))
		}
		for _, p := range ps {
			if p.Leader < 0 || len(p.ISR) != 3 {
				return fmt.Errorf("partition %d: leader %d, ISR %v", p.Partition, p.Leader, p.ISR)
			}
		}
		return nil
	})
	return ps, err
}

type produceResult struct {
	Partition int32     `json:"partition"`
	Offset    e2e.Int64 `json:"offset"`
	ErrorCode string    `json:"error_code"`
	Message   string    `json:"message"`
	Outcome   string    `json:"outcome"`
}

// produce sends values to partition p of topic with acks in one request
// and records each record's outcome in h as producer. It answers the
// error codes of the records that failed ("" for those written).
func (l *lab) produce(h *history.Recorder, producer, topic string, p int32, acks int, values []string, timeout time.Duration) []string {
	var records []map[string]any
	for _, v := range values {
		records = append(records, map[string]any{"value": v, "partition": p})
	}
	var resp struct {
		Results []produceResult `json:"results"`
	}
	start := time.Now()
	err := l.call(timeout, "POST", "/v1/topics/"+topic+"/records", map[string]any{"acks": acks, "records": records}, &resp)
	end := time.Now()
	codes := make([]string, len(values))
	for i, v := range values {
		switch {
		case err != nil:
			o := history.ErrOutcome(err)
			code := "TIMEOUT_OR_CONNECTION"
			if e, ok := err.(*e2e.APIError); ok {
				o, code = history.ErrorOutcome(e.ErrorCode), e.ErrorCode
			}
			h.Failed(producer, p, v, o, code+": "+err.Error(), start, end)
			codes[i] = code
		case len(resp.Results) != len(values):
			h.Failed(producer, p, v, history.Unknown, fmt.Sprintf("UNKNOWN: %d results for %d records", len(resp.Results), len(values)), start, end)
			codes[i] = "UNKNOWN"
		default:
			r := resp.Results[i]
			if o := history.OutcomeOf(r.Outcome, r.ErrorCode); o != history.Written {
				h.Failed(producer, p, v, o, r.ErrorCode+": "+r.Message, start, end)
				codes[i] = r.ErrorCode
			} else {
				h.Acked(producer, p, v, int64(r.Offset), start, end)
			}
		}
	}
	return codes
}

// readAll reads partition p of topic from its start to its high watermark.
func (l *lab) readAll(topic string, p int32) (map[int64]string, error) {
	out := map[int64]string{}
	next := int64(0)
	for {
		var f struct {
			Records []struct {
				Offset e2e.Int64 `json:"offset"`
				Value  string    `json:"value"`
			} `json:"records"`
			Next e2e.Int64 `json:"next_offset"`
			HW   e2e.Int64 `json:"high_watermark"`
		}
		path := fmt.Sprintf("/v1/topics/%s/partitions/%d/records?offset=%d&max_records=2000", topic, p, next)
		if err := l.waitFor(20*time.Second, "a fetch", func() error { return l.call(10*time.Second, "GET", path, nil, &f) }); err != nil {
			return nil, err
		}
		for _, r := range f.Records {
			out[int64(r.Offset)] = r.Value
		}
		if int64(f.Next) > next {
			next = int64(f.Next)
		}
		if next >= int64(f.HW) {
			return out, nil
		}
	}
}

// followers answers the replicas of d other than its leader.
func (d partitionDesc) followers() []int32 {
	var out []int32
	for _, r := range d.Replicas {
		if r != d.Leader {
			out = append(out, r)
		}
	}
	return out
}

func nodes(ids []int32) string {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	s := ""
	for i, id := range ids {
		if i > 0 {
			s += ", "
		}
		s += "storage-" + strconv.Itoa(int(id))
	}
	return s
}

// produceToLeader sends values to partition p of topic as one batch with
// acks straight to the leader's storage node over gRPC, once, without the
// gateway's retries, and records the outcome in h. It answers the leader's
// error code ("" when written).
func (l *lab) produceToLeader(h *history.Recorder, producer, topic string, p int32, leader int32, acks int32, values []string) string {
	b := record.NewBuilder(record.DefaultBatchOptions())
	now := time.Now().UnixMilli()
	for _, v := range values {
		b.Append(now, nil, []byte(v))
	}
	batch, _, err := b.Build(nil)
	start := time.Now()
	if err == nil {
		err = l.storageProduce(leader, &storagev1.ProduceRequest{Acks: acks, TimeoutMs: 5000, Partitions: []*storagev1.PartitionProduce{
			{Topic: topic, Partition: p, CurrentLeaderEpoch: -1, Records: batch}}}, func(r *storagev1.PartitionProduceResult) {
			for i, v := range values {
				h.Acked(producer, p, v, r.GetBaseOffset()+int64(i), start, time.Now())
			}
		})
	}
	if err != nil {
		code := errs.Of(err).Name
		for _, v := range values {
			h.Failed(producer, p, v, history.ErrOutcome(err), code+": "+errs.Message(err), start, time.Now())
		}
		return code
	}
	return ""
}

// storageProduce sends req to storage node id and calls ok with the
// partition's result when it is written; an error is the leader's refusal
// (a libs/errs row) or the call's failure.
func (l *lab) storageProduce(id int32, req *storagev1.ProduceRequest, ok func(*storagev1.PartitionProduceResult)) error {
	ps, err := l.dev.Processes()
	if err != nil {
		return err
	}
	addr := ""
	for _, p := range ps {
		if p.Role == "storage" && int32(p.ID) == id {
			addr = p.GRPCAddr
		}
	}
	if addr == "" {
		return fmt.Errorf("no storage node %d in cluster.json", id)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(l.ctx, 10*time.Second)
	defer cancel()
	resp, err := storagev1.NewStorageServiceClient(cc).Produce(ctx, req)
	if err != nil {
		return rpcerr.FromStatus(err)
	}
	if len(resp.GetPartitions()) != 1 {
		return fmt.Errorf("%d partition results", len(resp.GetPartitions()))
	}
	r := resp.GetPartitions()[0]
	if r.GetErrorCode() != 0 {
		return errs.Errorf(errs.ForCode(errs.Code(r.GetErrorCode())), "%s", r.GetErrorMessage())
	}
	ok(r)
	return nil
}
