package client

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"

	storagev1 "skein/gen/skein/storage/v1"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/libs/rpcerr"
)

// brokerConn is the connection to one storage node, and its one pipelined
// ProduceStream: requests go out in order with a correlation id and are
// answered by id as each is acknowledged.
type brokerConn struct {
	c    *Client
	id   int32
	addr string
	cc   *grpc.ClientConn
	st   storagev1.StorageServiceClient

	// sendMu serializes Sends (and stream creation) and is never held while
	// waiting for mu's holders' answers: the receive goroutine only takes mu,
	// so a Send blocked on flow control cannot stop answers being read.
	sendMu   sync.Mutex
	mu       sync.Mutex
	stream   *produceStream // nil until the first produce or after a failure; guarded by mu
	nextCorr uint64         // guarded by sendMu

	// follow is the connection of Follow streams (see followDialOptions),
	// dialled on first use; guarded by mu, as closed (after close, no new
	// one is dialled).
	follow *grpc.ClientConn
	closed bool
}

// produceStream is one incarnation of the ProduceStream; when it fails every
// request pending on it fails with it.
type produceStream struct {
	s       storagev1.StorageService_ProduceStreamClient
	cancel  context.CancelFunc
	pending map[uint64]*pendingProduce // guarded by brokerConn.mu
	dead    bool                       // guarded by brokerConn.mu
}

type pendingProduce struct {
	cb    func(*storagev1.ProduceResponse, error)
	timer *time.Timer
}

// broker returns the connection to a broker, (re)dialing when the broker's
// address changed in the metadata.
func (c *Client) broker(id int32) (*brokerConn, error) {
	b, ok := c.Metadata().Broker(metadata.BrokerID(id))
	if !ok {
		return nil, errs.Errorf(errs.BrokerNotAvailable, "broker %d is not in the metadata", id)
	}
	c.brokerMu.Lock()
	defer c.brokerMu.Unlock()
	if bc, ok := c.brokers[id]; ok && bc.addr == b.GetGrpcAddr() {
		return bc, nil
	} else if ok {
		bc.close()
		delete(c.brokers, id)
	}
	cc, err := grpc.NewClient(b.GetGrpcAddr(), c.dialOptions()...)
	if err != nil {
		return nil, errs.Errorf(errs.BrokerNotAvailable, "broker %d at %s: %v", id, b.GetGrpcAddr(), err)
	}
	bc := &brokerConn{c: c, id: id, addr: b.GetGrpcAddr(), cc: cc, st: storagev1.NewStorageServiceClient(cc)}
	c.brokers[id] = bc
	return bc, nil
}

func (b *brokerConn) close() {
	b.mu.Lock()
	s, follow := b.stream, b.follow
	b.follow, b.closed = nil, true
	b.mu.Unlock()
	if s != nil {
		b.fail(s, errs.Errorf(errs.NetworkException, "connection to broker %d closed", b.id))
	}
	b.cc.Close()
	if follow != nil {
		follow.Close()
	}
}

// followClient answers the client of the broker's Follow connection.
func (b *brokerConn) followClient() (storagev1.StorageServiceClient, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errs.Errorf(errs.BrokerNotAvailable, "the connection to broker %d is closed", b.id)
	}
	if b.follow == nil {
		cc, err := grpc.NewClient(b.addr, b.c.followDialOptions()...)
		if err != nil {
			return nil, errs.Errorf(errs.BrokerNotAvailable, "broker %d at %s: %v", b.id, b.addr, err)
		}
		b.follow = cc
	}
	return storagev1.NewStorageServiceClient(b.follow), nil
}

// produce sends req on the broker's stream. cb, unless nil (acks=0: no
// answer is awaited), is called exactly once, with the answer or with a
// retriable error when the stream breaks or no answer came within timeout.
// cb must not block; it runs on the stream's receive goroutine or a timer's.
// With endStream, a request with no answer within timeout (the request
// timeout) ends the stream, as Kafka closes the connection: every request
// pending on it fails (retriable; a resend goes on a new stream, and the
// storage node's sequences make it no duplicate), and a Send held by flow
// control on a stuck stream returns. Without it (a shorter wait, bounded
// by a delivery deadline) only the request fails. With cb nil, the error
// says the request did not reach the stream.
func (b *brokerConn) produce(req *storagev1.ProduceRequest, timeout time.Duration, endStream bool, cb func(*storagev1.ProduceResponse, error)) error {
	b.sendMu.Lock()
	defer b.sendMu.Unlock()
	b.mu.Lock()
	s := b.stream
	b.mu.Unlock()
	if s == nil {
		ctx, cancel := context.WithCancel(b.c.ctx)
		raw, err := b.st.ProduceStream(ctx)
		if err != nil {
			cancel()
			err = errs.Errorf(errs.NetworkException, "produce stream to broker %d: %v", b.id, rpcerr.FromStatus(err))
			if cb != nil {
				cb(nil, err)
			}
			return err
		}
		s = &produceStream{s: raw, cancel: cancel, pending: map[uint64]*pendingProduce{}}
		b.mu.Lock()
		b.stream = s
		b.mu.Unlock()
		go b.receive(s)
	}
	b.nextCorr++
	corr := b.nextCorr
	if cb != nil {
		p := &pendingProduce{cb: cb}
		b.mu.Lock()
		if s.dead {
			b.mu.Unlock()
			err := errs.Errorf(errs.NetworkException, "produce stream to broker %d failed", b.id)
			cb(nil, err)
			return err
		}
		s.pending[corr] = p
		p.timer = time.AfterFunc(timeout, func() {
			err := errs.Errorf(errs.RequestTimedOut, "broker %d did not answer produce %d within %v", b.id, corr, timeout)
			if endStream {
				b.fail(s, err)
			} else {
				b.finish(s, corr, nil, err)
			}
		})
		b.mu.Unlock()
	}
	err := s.s.Send(&storagev1.ProduceStreamRequest{CorrelationId: corr, Request: req})
	if err != nil {
		// The real cause comes from Recv; fail everything pending on s.
		err = errs.Errorf(errs.NetworkException, "produce stream to broker %d: %v", b.id, err)
		b.fail(s, err)
		return err
	}
	return nil
}

// receive dispatches answers by correlation id until the stream fails.
func (b *brokerConn) receive(s *produceStream) {
	for {
		resp, err := s.s.Recv()
		if err != nil {
			ferr := rpcerr.FromStatus(err)
			if errs.Of(ferr) == errs.UnknownServerError || ferr == err {
				ferr = errs.Errorf(errs.NetworkException, "produce stream to broker %d: %v", b.id, err)
			}
			b.fail(s, ferr)
			return
		}
		b.finish(s, resp.GetCorrelationId(), resp.GetResponse(), nil)
	}
}

// finish completes one pending request, once.
func (b *brokerConn) finish(s *produceStream, corr uint64, resp *storagev1.ProduceResponse, err error) {
	b.mu.Lock()
	p := s.pending[corr]
	delete(s.pending, corr)
	b.mu.Unlock()
	if p == nil {
		return // acks=0, or already timed out
	}
	p.timer.Stop()
	p.cb(resp, err)
}

// fail ends stream s and fails all that is pending on it.
func (b *brokerConn) fail(s *produceStream, err error) {
	b.mu.Lock()
	if s.dead {
		b.mu.Unlock()
		return
	}
	s.dead = true
	if b.stream == s {
		b.stream = nil
	}
	pending := s.pending
	s.pending = map[uint64]*pendingProduce{}
	b.mu.Unlock()
	s.cancel()
	for _, p := range pending {
		p.timer.Stop()
		p.cb(nil, err)
	}
}
