package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	controllerv1grpc "skein/gen/skein/controller/v1/controllerv1grpc"
	"skein/libs/errs"
	"skein/libs/grpcopt"
	"skein/libs/metadata"
	"skein/libs/metadata/watch"
	"skein/libs/rpcerr"
)

// MaxMessageSize bounds one gRPC message the client sends or receives.
const MaxMessageSize = 64 << 20

// Config configures a Client. Controllers is required; zero values of the
// rest take the defaults.
type Config struct {
	// Controllers are controller gRPC addresses; any of them serves metadata
	// and forwards writes to the Raft leader.
	Controllers []string
	// NodeID identifies this process to the controller (WatchMetadata,
	// AllocateProducerIds); -1 or 0 for an anonymous client.
	NodeID int32
	// DialOptions are added to every connection (insecure transport and
	// otelgrpc tracing are always on).
	DialOptions []grpc.DialOption
	// Logger receives reconnects and refusals; slog.Default when nil.
	Logger *slog.Logger
	// RetryBackoff is the first wait before a retry (100 ms); it doubles up to
	// MaxRetryBackoff (1 s), with jitter.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
}

// Client is a connection to a Skein cluster. It is safe for concurrent use.
type Client struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	meta    atomic.Pointer[metadata.Image] // nil until the first image; never modified once stored
	ready   chan struct{}                  // closed when the first image arrives
	readyMu sync.Once

	changedMu sync.Mutex
	changed   chan struct{} // closed and replaced on every metadata change; guarded by changedMu

	ctrlMu    sync.Mutex
	ctrlConns map[string]*grpc.ClientConn // by address; guarded by ctrlMu
	watched   []watch.Controller          // every controller, in cfg.Controllers order
	ctrlNext  int                         // index of the controller to try first; guarded by ctrlMu

	brokerMu sync.Mutex
	brokers  map[int32]*brokerConn // guarded by brokerMu

	pids pidPool
}

// New connects to the cluster and starts following its metadata. It does not
// wait for it: see Ready and WaitReady.
func New(cfg Config) (*Client, error) {
	if len(cfg.Controllers) == 0 {
		return nil, errs.Errorf(errs.InvalidRequest, "client: no controller addresses")
	}
	for _, addr := range cfg.Controllers {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, errs.Errorf(errs.InvalidRequest, "client: controller address %q: want host:port (%v)", addr, err)
		}
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 100 * time.Millisecond
	}
	if cfg.MaxRetryBackoff <= 0 {
		cfg.MaxRetryBackoff = time.Second
	}
	if cfg.MaxRetryBackoff < cfg.RetryBackoff {
		cfg.MaxRetryBackoff = cfg.RetryBackoff
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		cfg:       cfg,
		log:       cfg.Logger,
		ctx:       ctx,
		cancel:    cancel,
		ready:     make(chan struct{}),
		changed:   make(chan struct{}),
		ctrlConns: map[string]*grpc.ClientConn{},
		brokers:   map[int32]*brokerConn{},
	}
	c.pids.c = c
	for i := range cfg.Controllers {
		cl, addr, err := c.controller(i)
		if err != nil {
			cancel()
			c.Close()
			return nil, fmt.Errorf("client: controller %s: %w", addr, err)
		}
		c.watched = append(c.watched, watch.Controller{Addr: addr, Client: cl})
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		watch.Run(c.ctx, watch.Config{
			Controllers: c.watched, NodeID: c.cfg.NodeID, Backoff: c.backoff, Logger: c.log,
		}, c.setMetadata)
	}()
	return c, nil
}

// Close stops the metadata watch and closes every connection. Producers
// must be closed first.
func (c *Client) Close() error {
	c.cancel()
	c.wg.Wait()
	c.ctrlMu.Lock()
	for _, cc := range c.ctrlConns {
		cc.Close()
	}
	c.ctrlMu.Unlock()
	c.brokerMu.Lock()
	for _, b := range c.brokers {
		b.close()
	}
	c.brokerMu.Unlock()
	return nil
}

// Ready is closed once the first metadata image from a controller arrived.
func (c *Client) Ready() <-chan struct{} { return c.ready }

// WaitReady waits for the first metadata image.
func (c *Client) WaitReady(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		// Done already: never a call that goes on as if it were not
		// (which of two ready cases a select takes is random).
		return errs.Errorf(errs.RequestTimedOut, "%v", err)
	}
	select {
	case <-c.ready:
		return nil
	case <-c.ctx.Done():
		return ErrClientClosed
	case <-ctx.Done():
		return errs.Errorf(errs.RequestTimedOut, "no metadata from controllers %v yet: %v", c.cfg.Controllers, ctx.Err())
	}
}

// isReady reports whether the first metadata image has arrived.
func (c *Client) isReady() bool {
	select {
	case <-c.ready:
		return true
	default:
		return false
	}
}

// ErrClientClosed answers a call that waited for metadata on a Client that
// was closed meanwhile.
var ErrClientClosed = errors.New("client: closed")

// Metadata is the current snapshot of the cluster metadata (libs/metadata's
// image, as the controller holds it); empty before Ready. A snapshot is
// never changed once returned: a later version is a new one. Callers must
// not modify it (no Apply, no SetClusterID).
func (c *Client) Metadata() *metadata.Image {
	if m := c.meta.Load(); m != nil {
		return m
	}
	return metadata.New("")
}

// noTopic is the error for a topic the metadata m lacks. Under an
// authorizer a client's metadata holds only the topics it may describe
// (m.Filtered), so the topic may exist: as Kafka answers a topic it may
// not describe, whether it exists or not, that is TOPIC_AUTHORIZATION_FAILED.
func noTopic(m *metadata.Image, topic string) error {
	if m.Filtered() {
		return errs.Errorf(errs.TopicAuthorizationFailed, "topic %q is not in this client's metadata: it does not exist, or this client may not describe it", topic)
	}
	return errs.Errorf(errs.UnknownTopicOrPartition, "topic %q does not exist", topic)
}

// metadataChanged returns a channel closed at the next metadata change.
func (c *Client) metadataChanged() <-chan struct{} {
	c.changedMu.Lock()
	defer c.changedMu.Unlock()
	return c.changed
}

func (c *Client) setMetadata(m *metadata.Image) {
	c.meta.Store(m)
	c.readyMu.Do(func() { close(c.ready) })
	c.changedMu.Lock()
	close(c.changed)
	c.changed = make(chan struct{})
	c.changedMu.Unlock()
}

// WaitMetadata waits until cond holds for the current snapshot and returns
// it, or until ctx ends.
func (c *Client) WaitMetadata(ctx context.Context, cond func(*metadata.Image) bool) (*metadata.Image, error) {
	for {
		ch := c.metadataChanged()
		if m := c.meta.Load(); m != nil && cond(m) {
			return m, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return c.Metadata(), errs.Errorf(errs.RequestTimedOut, "metadata did not reach the expected state: %v", ctx.Err())
		}
	}
}

func (c *Client) dialOptions() []grpc.DialOption {
	return c.dialWith(grpcopt.DataWindows()...)
}

// followDialOptions are those of a storage node's connection for Follow
// streams: the control connections' fixed windows (1 MiB a stream) rather
// than the data connections' 8 MiB. A stream's window is what the leader
// may send ahead of its reader, and what this process then holds for a
// reader that stopped reading: a gateway with many slow tailing callers
// would otherwise hold 8 MiB for each.
func (c *Client) followDialOptions() []grpc.DialOption { return c.dialWith() }

func (c *Client) dialWith(windows ...grpc.DialOption) []grpc.DialOption {
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// Fetch answers carry up to max_bytes of batches per partition.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize)),
	}, append(grpcopt.Dial(), windows...)...)
	return append(opts, c.cfg.DialOptions...)
}

// backoff is the wait before retry number attempt (0-based), with ±20% jitter.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.cfg.RetryBackoff
	for i := 0; i < attempt && d < c.cfg.MaxRetryBackoff; i++ {
		d *= 2
	}
	d = min(d, c.cfg.MaxRetryBackoff)
	return d*4/5 + time.Duration(rand.Int64N(int64(d)*2/5+1))
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// controller returns a client for the i-th controller address (mod the list).
func (c *Client) controller(i int) (controllerv1grpc.ControllerServiceClient, string, error) {
	c.ctrlMu.Lock()
	defer c.ctrlMu.Unlock()
	addr := c.cfg.Controllers[i%len(c.cfg.Controllers)]
	cc, ok := c.ctrlConns[addr]
	if !ok {
		var err error
		if cc, err = grpc.NewClient(addr, c.dialOptions()...); err != nil {
			return nil, addr, err
		}
		c.ctrlConns[addr] = cc
	}
	return controllerv1grpc.NewControllerServiceClient(cc), addr, nil
}

// callController runs fn against a controller, moving on to the next one
// when a controller cannot be reached or is not the active one, round after
// round until the call's deadline (DefaultAPITimeout when it has none), as
// Kafka's admin client retries until default.api.timeout.ms: a quorum that
// is being restarted answers once it is back. Other refusals are answered
// as they are, as errs rows. A call that runs out is answered with what a
// controller said (not the active one, no answer within an attempt) rather
// than that another could not be dialled.
func (c *Client) callController(ctx context.Context, fn func(context.Context, controllerv1grpc.ControllerServiceClient) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultAPITimeout)
		defer cancel()
	}
	c.ctrlMu.Lock()
	start := c.ctrlNext
	c.ctrlMu.Unlock()
	n := len(c.cfg.Controllers)
	var last, said error // said: the last answer of a controller that was reached
	for attempt := 0; ; attempt++ {
		i := start + attempt
		cl, addr, err := c.controller(i)
		if err == nil {
			// A controller cut off or paused does not refuse: it says
			// nothing. Bound each attempt so the call moves on to the next.
			actx, cancel := context.WithTimeout(ctx, ControllerAttemptTimeout)
			err = rpcerr.FromStatus(fn(actx, cl))
			// The attempt's deadline may reach us as the server's
			// DEADLINE_EXCEEDED a moment before our own timer fires.
			silent := err != nil && (actx.Err() != nil || errs.Of(err) == errs.RequestTimedOut) && ctx.Err() == nil
			if silent {
				err = errs.Errorf(errs.NetworkException, "controller %s did not answer within %v (paused, cut off, or without a quorum of the controllers to commit the change)", addr, ControllerAttemptTimeout)
			}
			cancel()
			if err == nil {
				c.ctrlMu.Lock()
				c.ctrlNext = i % n
				c.ctrlMu.Unlock()
				return nil
			}
			row := errs.Of(err)
			ranOutNow := ctx.Err() != nil && (row == errs.RequestTimedOut || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled))
			if row != errs.NetworkException && row != errs.NotController && !ranOutNow {
				return err // the controller's answer
			}
			if ctx.Err() != nil {
				return ranOut(ctx, err, said)
			}
			if row == errs.NotController || silent {
				said = err
			}
			c.log.DebugContext(ctx, "controller unavailable, trying the next", "addr", addr, "err", err)
		}
		last = err
		if ctx.Err() != nil {
			return ranOut(ctx, last, said)
		}
		if attempt%n == n-1 { // every controller refused: back off before another round
			if sleep(ctx, c.backoff(attempt/n)) != nil {
				return ranOut(ctx, last, said)
			}
		}
	}
}

// ranOut answers a controller call whose deadline passed: what a
// controller said, else the last failure, as a retriable error. A call its
// caller cancelled answers that.
func ranOut(ctx context.Context, last, said error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	err := cmp.Or(said, last)
	if err == nil || errs.Of(err) == errs.RequestTimedOut || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return errs.Errorf(errs.RequestTimedOut, "no controller completed the call before its deadline: %v", cmp.Or(ctx.Err(), err))
	}
	return err
}

// Admin calls' bounds: a call without a deadline gets DefaultAPITimeout
// (Kafka's default.api.timeout.ms), and each attempt at one controller gets
// ControllerAttemptTimeout before the call moves to the next controller.
const (
	DefaultAPITimeout        = 60 * time.Second
	ControllerAttemptTimeout = 2 * time.Second
)

// randIntN is the sticky partitioner's random source.
func randIntN(n int) int { return rand.IntN(n) }
