package verify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/history"
	"skein/tests/e2e"
)

// restProducer produces one record to each partition of parts per request
// with acks=all (the gateway's idempotent producer) until stop closes,
// recording each outcome in h as producer prefix.
func (c *cluster) restProducer(h *history.Recorder, topic string, parts []int32, prefix string, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		var resp struct {
			Results []struct {
				Offset    e2e.Int64 `json:"offset"`
				ErrorCode string    `json:"error_code"`
				Message   string    `json:"message"`
				Outcome   string    `json:"outcome"`
			} `json:"results"`
		}
		var values []string
		var records []map[string]any
		for _, p := range parts {
			v := fmt.Sprintf("%s-%d-p%d", prefix, seq, p)
			values = append(values, v)
			records = append(records, map[string]any{"value": v, "partition": p})
		}
		start := time.Now()
		err := c.do(40*time.Second, "POST", "/v1/topics/"+topic+"/records", map[string]any{"acks": -1, "records": records}, &resp)
		end := time.Now()
		for i, p := range parts {
			v := values[i]
			switch {
			case err != nil:
				o := history.Unknown
				var api *e2e.APIError
				if errors.As(err, &api) {
					o = history.ErrorOutcome(api.ErrorCode)
					if o == history.Written {
						o = history.Unknown
					}
				}
				h.Failed(prefix, p, v, o, err.Error(), start, end)
			case len(resp.Results) != len(parts):
				h.Failed(prefix, p, v, history.Unknown, fmt.Sprintf("%d results for %d records", len(resp.Results), len(parts)), start, end)
			default:
				r := resp.Results[i]
				if o := history.OutcomeOf(r.Outcome, r.ErrorCode); o != history.Written {
					h.Failed(prefix, p, v, o, r.ErrorCode+": "+r.Message, start, end)
				} else {
					h.Acked(prefix, p, v, int64(r.Offset), start, end)
				}
			}
		}
		if err != nil {
			time.Sleep(100 * time.Millisecond)
		} else {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// streamProducer produces over the gateway's gRPC ProduceStream (an
// idempotent producer session), one record to partition p in flight at a
// time, until stop closes.
func (c *cluster) streamProducer(h *history.Recorder, topic string, p int32, prefix string, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	cc, err := grpc.NewClient(c.dev.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
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
				stream = nil
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
			time.Sleep(100 * time.Millisecond)
		case len(resp.GetResults()) != 1:
			h.Failed(prefix, p, v, history.Unknown, fmt.Sprintf("%d results", len(resp.GetResults())), start, end)
		default:
			h.SendResult(prefix, v, resp.GetResults()[0], start, end)
		}
	}
}

type position struct {
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Offset    e2e.Int64 `json:"offset"`
}

type topicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

func flatten(a []topicPartitions) []int32 {
	var out []int32
	for _, tp := range a {
		out = append(out, tp.Partitions...)
	}
	slices.Sort(out)
	return out
}

// member is one REST group member: it joins, fetches (each fetch also its
// heartbeat, sending back the previous answer's positions) and commits its
// positions after every fetch. It joins again, under a new member id, when
// the coordinator no longer knows it or it failed for too long.
type member struct {
	c          *cluster
	h          *history.Recorder
	group      string
	topic      string
	id         string
	epoch      int32
	positions  []position
	assignment []int32
	joins      int
}

func (m *member) join() error {
	var resp struct {
		MemberID   string            `json:"member_id"`
		Epoch      int32             `json:"member_epoch"`
		Assignment []topicPartitions `json:"assignment"`
	}
	body := map[string]any{"topics": []string{m.topic}, "auto_offset_reset": "earliest", "session_timeout_ms": 10000}
	if err := m.c.do(15*time.Second, "POST", "/v1/groups/"+m.group+"/members", body, &resp); err != nil {
		return err
	}
	m.id, m.epoch, m.assignment, m.positions = resp.MemberID, resp.Epoch, flatten(resp.Assignment), nil
	m.joins++
	return nil
}

func (m *member) fetch() error {
	body := map[string]any{"member_epoch": m.epoch, "max_wait_ms": 500, "max_records": 1000}
	if m.positions != nil {
		body["positions"] = m.positions
	}
	var resp struct {
		Records []struct {
			Partition int32     `json:"partition"`
			Offset    e2e.Int64 `json:"offset"`
			Value     string    `json:"value"`
		} `json:"records"`
		Positions  []position        `json:"positions"`
		Epoch      int32             `json:"member_epoch"`
		Assignment []topicPartitions `json:"assignment"`
	}
	start := time.Now()
	if err := m.c.do(15*time.Second, "POST", "/v1/groups/"+m.group+"/members/"+m.id+"/records", body, &resp); err != nil {
		return err
	}
	m.epoch, m.positions, m.assignment = resp.Epoch, resp.Positions, flatten(resp.Assignment)
	if m.positions == nil {
		m.positions = []position{}
	}
	poll := history.Poll{Consumer: m.id, Group: m.group, MemberEpoch: m.epoch, Assignment: m.assignment, Invoke: start, Complete: time.Now()}
	for _, r := range resp.Records {
		poll.Records = append(poll.Records, history.Record{Partition: r.Partition, Offset: int64(r.Offset), Value: r.Value})
	}
	m.h.Poll(poll)
	return nil
}

func (m *member) commit() error {
	// A position of -1 is a partition not started yet: nothing to commit.
	var started []position
	for _, p := range m.positions {
		if p.Offset >= 0 {
			started = append(started, p)
		}
	}
	if len(started) == 0 {
		return nil
	}
	var resp struct {
		Results []struct {
			Partition int32  `json:"partition"`
			ErrorCode string `json:"error_code"`
			Message   string `json:"message"`
		} `json:"results"`
	}
	start := time.Now()
	err := m.c.do(15*time.Second, "POST", "/v1/groups/"+m.group+"/offsets",
		map[string]any{"member_id": m.id, "member_epoch": m.epoch, "offsets": started}, &resp)
	end := time.Now()
	for i, p := range started {
		c := history.Commit{Group: m.group, Member: m.id, MemberEpoch: m.epoch, Partition: p.Partition, Offset: int64(p.Offset), OK: err == nil, Invoke: start, Complete: end}
		if err != nil {
			c.Err = err.Error()
		} else if i < len(resp.Results) && resp.Results[i].ErrorCode != "NONE" && resp.Results[i].ErrorCode != "" {
			c.OK, c.Err = false, resp.Results[i].ErrorCode+": "+resp.Results[i].Message
		}
		m.h.Commit(c)
	}
	return err
}

// rejoinable reports an error after which the member must join again: the
// coordinator no longer knows it or its epoch.
func rejoinable(err error) bool {
	var api *e2e.APIError
	if !errors.As(err, &api) {
		return false
	}
	return strings.Contains(api.ErrorCode, "MEMBER") || strings.Contains(api.ErrorCode, "EPOCH")
}

// run polls and commits until stop closes, then leaves the group.
func (m *member) run(stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	failingSince := time.Time{}
	for {
		select {
		case <-stop:
			if m.id != "" {
				_ = m.c.do(5*time.Second, "DELETE", "/v1/groups/"+m.group+"/members/"+m.id, nil, nil)
			}
			return
		default:
		}
		var err error
		if m.id == "" {
			err = m.join()
		} else if err = m.fetch(); err == nil {
			err = m.commit()
		}
		if err == nil {
			failingSince = time.Time{}
			continue
		}
		if failingSince.IsZero() {
			failingSince = time.Now()
		}
		if rejoinable(err) || time.Since(failingSince) > 15*time.Second {
			m.id, failingSince = "", time.Time{}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// groupLag answers the group's total lag as the gateway describes it.
func (c *cluster) groupLag(group string) (int64, error) {
	var d struct {
		TotalLag e2e.Int64 `json:"total_lag"`
		Members  []any     `json:"members"`
	}
	if err := c.do(10*time.Second, "GET", "/v1/groups/"+group, nil, &d); err != nil {
		return -1, err
	}
	return int64(d.TotalLag), nil
}

// readAll reads partition p from offset 0 to its end, read_committed. A
// read that stays empty below the high watermark ends after settle empty
// answers when markers may lie there (settle > 0), and is an error after 50
// otherwise.
func (c *cluster) readAll(topic string, p int32, settle int) (map[int64]string, error) {
	out := map[int64]string{}
	next, empty := int64(0), 0
	for {
		var f struct {
			Records []struct {
				Offset e2e.Int64 `json:"offset"`
				Value  string    `json:"value"`
			} `json:"records"`
			Next e2e.Int64 `json:"next_offset"`
			HW   e2e.Int64 `json:"high_watermark"`
			LSO  e2e.Int64 `json:"last_stable_offset"`
		}
		path := fmt.Sprintf("/v1/topics/%s/partitions/%d/records?offset=%d&max_records=2000&isolation_level=READ_COMMITTED", topic, p, next)
		if err := waitFor(c.ctx, 30*time.Second, "a fetch", func() error { return c.do(10*time.Second, "GET", path, nil, &f) }); err != nil {
			return nil, err
		}
		if len(f.Records) > 0 {
			empty = 0
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
		if len(f.Records) == 0 {
			empty++
			if settle > 0 && empty >= settle {
				return out, nil
			}
			if empty > 50 {
				return out, fmt.Errorf("partition %d: stuck at offset %d below the high watermark %d", p, next, int64(f.HW))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
