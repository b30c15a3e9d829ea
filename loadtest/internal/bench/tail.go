package bench

import (
	"context"
	"sync"
	"time"

	skeinv1 "skein/gen/skein/v1"
)

// gatewayTail consumes through the gateway's server-streaming Tail: one
// stream per partition, opened at the first fetch and kept, so a tailing
// consumer sends no request per batch. Everything else is gatewayGRPC's.
type gatewayTail struct {
	*gatewayGRPC
	mu   sync.Mutex
	subs map[int32]*tailSub
}

// tailSub is one partition's stream: its answers in order on ch, and the
// offset the next answer starts at.
type tailSub struct {
	cancel context.CancelFunc
	ch     chan tailAnswer
	next   int64
}

type tailAnswer struct {
	values [][]byte
	next   int64
	err    error
}

func newGatewayTail(addr, topic string) (*gatewayTail, error) {
	g, err := newGatewayGRPC(addr, topic, -1)
	if err != nil {
		return nil, err
	}
	return &gatewayTail{gatewayGRPC: g, subs: map[int32]*tailSub{}}, nil
}

// fetch answers the partition's next streamed answer, or nothing after
// maxWait. A fetch from an offset the stream is not at (the first, or one
// after an error) opens the stream there.
func (g *gatewayTail) fetch(ctx context.Context, partition int32, offset int64, lim fetchLimits) ([][]byte, int64, error) {
	g.mu.Lock()
	s := g.subs[partition]
	if s == nil || s.next != offset {
		if s != nil {
			s.cancel()
		}
		s = g.open(partition, offset)
		g.subs[partition] = s
	}
	g.mu.Unlock()
	t := time.NewTimer(lim.maxWait)
	defer t.Stop()
	select {
	case a := <-s.ch:
		if a.err != nil {
			g.mu.Lock()
			if g.subs[partition] == s {
				delete(g.subs, partition)
			}
			g.mu.Unlock()
			return nil, offset, a.err
		}
		s.next = a.next
		return a.values, a.next, nil
	case <-t.C:
		return nil, offset, nil
	case <-ctx.Done():
		return nil, offset, ctx.Err()
	}
}

// open starts reading partition's Tail stream from offset.
func (g *gatewayTail) open(partition int32, offset int64) *tailSub {
	ctx, cancel := context.WithCancel(context.Background())
	s := &tailSub{cancel: cancel, ch: make(chan tailAnswer, 16), next: offset}
	go func() {
		defer cancel()
		stream, err := g.cons.Tail(ctx, &skeinv1.TailRequest{Topic: g.topic, Partition: partition, Offset: &offset, Encoding: skeinv1.Encoding_BYTES})
		for err == nil {
			var resp *skeinv1.TailResponse
			if resp, err = stream.Recv(); err != nil {
				break
			}
			vals := make([][]byte, len(resp.GetRecords()))
			for i, r := range resp.GetRecords() {
				vals[i] = r.GetValueBytes()
			}
			select {
			case s.ch <- tailAnswer{values: vals, next: resp.GetNextOffset()}:
			case <-ctx.Done():
				return
			}
		}
		select {
		case s.ch <- tailAnswer{err: err}:
		case <-ctx.Done():
		}
	}()
	return s
}

func (g *gatewayTail) close() error {
	g.mu.Lock()
	for _, s := range g.subs {
		s.cancel()
	}
	g.subs = map[int32]*tailSub{}
	g.mu.Unlock()
	return g.gatewayGRPC.close()
}
