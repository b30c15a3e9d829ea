package client

import (
	"context"
	"sync"
	"time"

	controllerv1 "skein/gen/skein/controller/v1"
	controllerv1grpc "skein/gen/skein/controller/v1/controllerv1grpc"
	"skein/libs/errs"
)

// pidBlockSize is how many producer ids the Client asks the controller for
// at a time.
const pidBlockSize = 1000

// pidPool hands out producer ids from blocks the controller allocated to this
// client; every id is used by one producer (or one partition of it after a
// reset) and never handed out twice.
type pidPool struct {
	c *Client

	mu        sync.Mutex
	next, end int64         // the unused ids [next, end) of the current block; guarded by mu
	refilling bool          // a refill is running; guarded by mu
	done      chan struct{} // closed when the running refill ends; guarded by mu
	failures  int           // refills that failed in a row; guarded by mu
	// refused is the last refill's error when the controller refused this
	// client ids (CLUSTER_AUTHORIZATION_FAILED: it may write no topic);
	// nil after a refill that got some. Guarded by mu.
	refused error
}

// refusal answers why the controller refused this client producer ids at
// its last refill, nil when it did not: a producer fails the batches
// waiting for an id with it rather than holding them to their delivery
// timeout (refills go on, so ids come once the client is allowed).
func (p *pidPool) refusal() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

// tryTake answers an id when one is at hand; otherwise it starts a refill
// (if none runs) and answers a channel closed when the refill ends.
func (p *pidPool) tryTake() (int64, bool, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next < p.end {
		id := p.next
		p.next++
		return id, true, nil
	}
	if !p.refilling {
		p.refilling = true
		p.done = make(chan struct{})
		go p.refill(p.failures)
	}
	return 0, false, p.done
}

// AllocateProducerID answers a producer id no other producer has had, from
// a block the controller allocated to this client (a new block when the
// current one is used up).
func (c *Client) AllocateProducerID(ctx context.Context) (int64, error) {
	return c.pids.take(ctx)
}

// take waits for an id.
func (p *pidPool) take(ctx context.Context) (int64, error) {
	for {
		id, ok, wait := p.tryTake()
		if ok {
			return id, nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return 0, errs.Errorf(errs.RequestTimedOut, "no producer id from the controller: %v", ctx.Err())
		}
	}
}

func (p *pidPool) refill(failures int) {
	if failures > 0 {
		_ = sleep(p.c.ctx, p.c.backoff(failures-1))
	}
	ctx, cancel := context.WithTimeout(p.c.ctx, 10*time.Second)
	defer cancel()
	var resp *controllerv1.AllocateProducerIdsResponse
	err := p.c.callController(ctx, func(ctx context.Context, cl controllerv1grpc.ControllerServiceClient) error {
		var err error
		resp, err = cl.AllocateProducerIds(ctx, &controllerv1.AllocateProducerIdsRequest{NodeId: p.c.cfg.NodeID, BrokerEpoch: -1, Count: pidBlockSize})
		return err
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil && resp.GetCount() > 0 {
		p.next, p.end = resp.GetFirstProducerId(), resp.GetFirstProducerId()+int64(resp.GetCount())
		p.failures, p.refused = 0, nil
	} else {
		p.failures++
		if errs.Of(err) == errs.ClusterAuthorizationFailed {
			p.refused = err
		}
		p.c.log.Warn("allocating producer ids failed", "err", err)
	}
	p.refilling = false
	close(p.done)
}
