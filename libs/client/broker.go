package client

import (
	"context"
	"slices"
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
//
// Nothing a caller of produce does waits on the node. A request goes out
// on the caller's goroutine only when the stream is open, nothing is queued
// before it and the bytes still unanswered on the stream leave room for it
// in the stream's flow-control window, so that its Send cannot block.
// Otherwise it is queued for a writer goroutine, which opens the stream
// when needed and sends in order. A paused, cut-off or slow node then holds
// only its own requests: the producer goes on sending to every other node.
type brokerConn struct {
	c    *Client
	id   int32
	addr string
	cc   *grpc.ClientConn
	st   storagev1.StorageServiceClient

	// mu guards the stream, the queue and the send turn. Sends and stream
	// creation run outside it, by whoever holds the turn (writing): the
	// receive goroutine and the timers only take mu, so a Send blocked on
	// flow control cannot stop answers being read or requests timing out.
	mu       sync.Mutex
	stream   *produceStream // nil until the first produce or after a failure
	nextCorr uint64
	queue    []*produceCall // waiting for the writer, oldest first
	writing  bool           // a goroutine has the turn to send
	// opening cancels the stream being opened, nil when none is: a queued
	// request that waited a whole request timeout ends the attempt, as it
	// ends a stream whose Send is stuck.
	opening context.CancelFunc

	// follow is the connection of Follow streams (see followDialOptions),
	// dialled on first use; guarded by mu, as closed (after close, no new
	// one is dialled).
	follow *grpc.ClientConn
	closed bool
}

// inlineSendBytes bounds the bytes unanswered on a stream, the request's
// own included, for a request to be sent on the caller's goroutine. A node
// returns window as it reads (in steps of a quarter of it, 2 MiB), and it
// has read every request it answered, so the window (8 MiB) still has room
// for the request; a stopped node's socket buffers take about as much.
const inlineSendBytes = 2 << 20

// produceStream is one incarnation of the ProduceStream; when it fails every
// request pending on it fails with it.
type produceStream struct {
	s       storagev1.StorageService_ProduceStreamClient
	cancel  context.CancelFunc
	pending map[uint64]*produceCall // guarded by brokerConn.mu
	// unanswered is the record bytes of the requests pending here, those
	// that timed out included: not known to be read. unmetered: an acks=0
	// request went out here, whose reading is never known. Both guarded by
	// brokerConn.mu.
	unanswered int
	unmetered  bool
	dead       bool // guarded by brokerConn.mu
}

// produceCall is one request on its way to a broker and back.
type produceCall struct {
	req *storagev1.ProduceRequest
	// timeout bounds the wait for the answer, from the call to produce.
	// With endStream, a request with no answer within it (the request
	// timeout) ends the stream, as Kafka closes the connection: every
	// request pending on it fails (retriable; a resend goes on a new stream,
	// and the storage node's sequences make it no duplicate), and a Send
	// held by flow control on a stuck stream returns. Without it (a shorter
	// wait, bounded by a delivery deadline) only the request fails.
	timeout   time.Duration
	endStream bool
	// noAnswer: acks=0. done is called once the request is sent (nil) or
	// could not be (the error); the timeout bounds the wait to be sent.
	noAnswer bool
	// done is called exactly once, with the answer or with a retriable
	// error when the request could not be sent, the stream broke or no
	// answer came within timeout. It must not block; it runs on a caller's,
	// the writer's, the stream's receive or a timer's goroutine.
	done func(*storagev1.ProduceResponse, error)
	// unused, unless nil, is called exactly once when the request's bytes
	// will not be read again: its Send returned, or it was dropped unsent.
	unused func()

	size  int         // record bytes, counted in produceStream.unanswered
	timer *time.Timer // the timeout
	// Guarded by brokerConn.mu: queued while in brokerConn.queue; s once
	// its Send is under way, and corr once it is pending an answer there;
	// finished once done was called or is being called.
	queued   bool
	s        *produceStream
	corr     uint64
	finished bool
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

// produce hands call to the broker's stream; it never waits on the node
// (see brokerConn).
func (b *brokerConn) produce(call *produceCall) {
	for _, pp := range call.req.GetPartitions() {
		call.size += len(pp.GetRecords())
	}
	b.mu.Lock()
	call.timer = time.AfterFunc(call.timeout, func() { b.expire(call) })
	s := b.stream
	if !b.writing && len(b.queue) == 0 && s != nil && !s.dead && !s.unmetered && !call.noAnswer && s.unanswered+call.size <= inlineSendBytes {
		b.writing = true
		b.mu.Unlock()
		if !b.transmit(call, s) {
			return // the writer took it over, with the send turn
		}
		b.mu.Lock()
		b.writing = false
		if len(b.queue) > 0 { // queued by another producer meanwhile
			b.writing = true
			go b.write()
		}
		b.mu.Unlock()
		return
	}
	call.queued = true
	b.queue = append(b.queue, call)
	if !b.writing {
		b.writing = true
		go b.write()
	}
	b.mu.Unlock()
}

// write is the writer: it sends the queued requests in order and ends when
// none is left.
func (b *brokerConn) write() {
	for {
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.writing = false
			b.mu.Unlock()
			return
		}
		call := b.queue[0]
		b.queue[0] = nil
		b.queue = b.queue[1:]
		call.queued = false
		b.mu.Unlock()
		b.transmit(call, nil)
	}
}

// transmit sends call on the stream, opening one when there is none. The
// caller holds the send turn. With inline (the stream the caller saw open),
// a stream that broke meanwhile is not opened here: the call goes to the
// front of the queue and a writer, given the send turn, sends it; transmit
// then answers false.
func (b *brokerConn) transmit(call *produceCall, inline *produceStream) bool {
	b.mu.Lock()
	s := b.stream
	if inline != nil && (s != inline || s.dead) {
		call.queued = true
		b.queue = slices.Insert(b.queue, 0, call)
		b.mu.Unlock()
		go b.write()
		return false
	}
	if call.unused != nil {
		defer call.unused()
	}
	if call.finished { // timed out before its turn
		b.mu.Unlock()
		return true
	}
	if s == nil {
		ctx, cancel := context.WithCancel(b.c.ctx)
		b.opening = cancel
		b.mu.Unlock()
		raw, err := b.st.ProduceStream(ctx)
		b.mu.Lock()
		b.opening = nil
		if err != nil {
			b.mu.Unlock()
			cancel()
			b.end(call, errs.Errorf(errs.NetworkException, "produce stream to broker %d: %v", b.id, rpcerr.FromStatus(err)))
			return true
		}
		s = &produceStream{s: raw, cancel: cancel, pending: map[uint64]*produceCall{}}
		b.stream = s
		go b.receive(s)
	}
	if call.finished {
		b.mu.Unlock()
		return true
	}
	if s.dead {
		b.mu.Unlock()
		b.end(call, errs.Errorf(errs.NetworkException, "produce stream to broker %d failed", b.id))
		return true
	}
	b.nextCorr++
	corr := b.nextCorr
	call.s = s
	if call.noAnswer {
		// Never answered, so never known to be read: no more requests go
		// out inline on this stream.
		s.unmetered = true
	} else {
		call.corr = corr
		s.pending[corr] = call
		s.unanswered += call.size
	}
	b.mu.Unlock()
	if err := s.s.Send(&storagev1.ProduceStreamRequest{CorrelationId: corr, Request: call.req}); err != nil {
		// The real cause comes from Recv; fail everything pending on s.
		err = errs.Errorf(errs.NetworkException, "produce stream to broker %d: %v", b.id, err)
		b.fail(s, err)
		if call.noAnswer {
			b.end(call, err)
		}
		return true
	}
	if call.noAnswer {
		b.end(call, nil)
	}
	return true
}

// end answers call with err (nil: an acks=0 call sent), unless it was
// answered.
func (b *brokerConn) end(call *produceCall, err error) {
	b.mu.Lock()
	if call.finished {
		b.mu.Unlock()
		return
	}
	call.finished = true
	b.mu.Unlock()
	call.timer.Stop()
	call.done(nil, err)
}

// expire is call's timeout.
func (b *brokerConn) expire(call *produceCall) {
	err := errs.Errorf(errs.RequestTimedOut, "broker %d did not answer a produce request within %v", b.id, call.timeout)
	b.mu.Lock()
	if call.finished {
		b.mu.Unlock()
		return
	}
	if s := call.s; s != nil && !call.noAnswer {
		if call.endStream {
			b.mu.Unlock()
			b.fail(s, err)
			return
		}
		// Only this request fails. It stays pending, its bytes counted as
		// unread, until the node answers it or the stream ends.
		call.finished = true
		b.mu.Unlock()
		call.done(nil, err)
		return
	}
	// Not sent yet: still queued, or its sender is waiting on the stream
	// (opening it, or in its Send). A whole request timeout of that means
	// the stream (or its opening) is stuck: end it, so the requests behind
	// it go on a new one.
	call.finished = true
	dropped := call.queued
	if dropped {
		call.queued = false
		b.queue = slices.DeleteFunc(b.queue, func(c *produceCall) bool { return c == call })
	}
	var stuck *produceStream
	var opening context.CancelFunc
	if call.endStream {
		stuck, opening = b.stream, b.opening
		if call.s != nil {
			stuck = call.s
		}
	}
	b.mu.Unlock()
	if opening != nil {
		opening()
	}
	if stuck != nil {
		b.fail(stuck, err)
	}
	if dropped && call.unused != nil {
		call.unused()
	}
	call.done(nil, err)
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
		b.answer(s, resp.GetCorrelationId(), resp.GetResponse())
	}
}

// answer completes the request the node answered, unless it timed out.
func (b *brokerConn) answer(s *produceStream, corr uint64, resp *storagev1.ProduceResponse) {
	b.mu.Lock()
	call := s.pending[corr]
	if call == nil {
		b.mu.Unlock()
		return
	}
	delete(s.pending, corr)
	s.unanswered -= call.size
	if call.finished {
		b.mu.Unlock()
		return // timed out: its answer came late
	}
	call.finished = true
	b.mu.Unlock()
	call.timer.Stop()
	call.done(resp, nil)
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
	var calls []*produceCall
	for _, call := range s.pending {
		if !call.finished {
			call.finished = true
			calls = append(calls, call)
		}
	}
	s.pending, s.unanswered = map[uint64]*produceCall{}, 0
	b.mu.Unlock()
	s.cancel()
	for _, call := range calls {
		call.timer.Stop()
		call.done(nil, err)
	}
}
