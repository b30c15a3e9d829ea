package gateway

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/test/bufconn"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
	"skein/libs/grpcopt"
	"skein/libs/telemetry"
	"skein/services/gateway/internal/api"
	"skein/services/gateway/internal/authn"
	"skein/services/gateway/internal/budget"
	"skein/services/gateway/internal/console"
)

// The gateway's batching defaults: libs/client's. It funnels many
// callers' records into each partition's batches, and its callers wait for
// their answers with a bounded number of requests in flight, so a linger
// that every record waits out would cap a caller at its records in flight
// per linger: a partition's batch goes at once when none of that
// partition's batches is out, and lingers only while one is, which is when
// a batch has something to gain by waiting.
const (
	DefaultBatchSize    = client.DefaultBatchSize
	DefaultLinger       = client.DefaultLinger
	DefaultSendWhenIdle = client.DefaultSendWhenIdle
)

// DefaultProducerIdleTimeout is how long a producer of Produce calls is
// kept with no call using it (Kafka's connections.max.idle.ms, a close
// cousin: an idle client's resources go after ten minutes or so).
const DefaultProducerIdleTimeout = 10 * time.Minute

// DeliveryTimeout bounds how long a produce through the gateway waits for
// its records' results, retries included.
const DeliveryTimeout = 30 * time.Second

// Config configures a Gateway.
type Config struct {
	GRPCAddr    string // e.g. 127.0.0.1:9090; port 0 picks one
	HTTPAddr    string // e.g. 127.0.0.1:8080; port 0 picks one
	Controllers []string
	NodeID      int32
	Logger      *slog.Logger
	// Registry receives the gateway's metrics and is served at /metrics; a
	// new one when nil.
	Registry *prometheus.Registry
	// ShutdownGrace bounds how long Serve waits for in-flight calls and
	// producer flushes after its context ends (default 10 s).
	ShutdownGrace time.Duration
	// ProducerIdleTimeout closes a producer of Produce calls (one per
	// client principal, acks and codec) that no call has used for this
	// long (default DefaultProducerIdleTimeout).
	ProducerIdleTimeout time.Duration
	// ProducerOptions apply to every producer the gateway starts.
	ProducerOptions []client.ProducerOption
	// MaxRequestBytes bounds one REST body and one gRPC message the gateway
	// receives (default DefaultMaxRequestBytes).
	MaxRequestBytes int64
	// MaxInflightProduceBytes is the budget of produce request bytes the
	// gateway holds at once, all callers together (default
	// DefaultMaxInflightProduceBytes).
	MaxInflightProduceBytes int64
	// ConsoleDemos turns on the console's demo routes, which signal the
	// storage nodes DevClusterFile (a `skein dev` cluster.json) lists.
	ConsoleDemos   bool
	DevClusterFile string
	// Auth verifies bearer tokens (nil: none are accepted; verified client
	// certificates still name their principal). AuthRequired refuses
	// every public call without a principal with SASL_AUTHENTICATION_FAILED.
	Auth         *authn.Verifier
	AuthRequired bool
	// Authorizer checks every public call against the ACL bindings of the
	// cluster's metadata (libs/acl): refused calls are 403 with the
	// resource's *_AUTHORIZATION_FAILED. SuperUsers are allowed everything.
	Authorizer bool
	SuperUsers map[string]bool
}

// Gateway is a running gateway's listeners and servers.
type Gateway struct {
	cfg      Config
	log      *slog.Logger
	client   *client.Client
	producer *api.Producer
	inflight *budget.Budget
	consumer *api.Consumer
	group    *api.Group
	txn      *api.Transaction
	events   *console.Hub
	auth     *auth
	grpcLis  net.Listener
	httpLis  net.Listener
	loopLis  *bufconn.Listener
	loop     *grpc.ClientConn
	grpc     *grpc.Server
	health   *health.Server
	http     *http.Server
}

// New binds the listeners and builds the servers; Serve runs them.
func New(cfg Config) (*Gateway, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registry == nil {
		cfg.Registry = telemetry.NewRegistry()
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 10 * time.Second
	}
	if cfg.ProducerIdleTimeout <= 0 {
		cfg.ProducerIdleTimeout = DefaultProducerIdleTimeout
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.MaxInflightProduceBytes <= 0 {
		cfg.MaxInflightProduceBytes = DefaultMaxInflightProduceBytes
	}
	g := &Gateway{cfg: cfg, log: cfg.Logger}
	ok := false
	defer func() {
		if !ok {
			g.closeAll()
		}
	}()
	var err error
	if g.client, err = client.New(client.Config{Controllers: cfg.Controllers, NodeID: cfg.NodeID, Logger: cfg.Logger}); err != nil {
		return nil, err
	}
	if g.grpcLis, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
		return nil, err
	}
	if g.httpLis, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return nil, err
	}
	// With TLS (grpcopt.UseTLS) the public listeners serve HTTPS and gRPC
	// over TLS; a client certificate is checked when given, not required.
	g.httpLis = grpcopt.Listener(g.httpLis, true)

	unaryErr, streamErr := api.ErrorInterceptors()
	g.auth = &auth{verifier: cfg.Auth, required: cfg.AuthRequired, log: g.log}
	if cfg.Authorizer {
		g.auth.authz = newAuthorizer(g.client.Metadata, cfg.SuperUsers)
	}
	unaryAuth, streamAuth := g.auth.interceptors()
	opts := append(grpcopt.PublicServer(telemetry.NewGRPCMetrics(cfg.Registry)),
		grpc.ChainUnaryInterceptor(unaryErr, unaryAuth), grpc.ChainStreamInterceptor(streamErr, streamAuth),
		// A message above the limit is refused by gRPC before it is
		// allocated (RESOURCE_EXHAUSTED). The slack lets REST's loopback
		// calls through: a REST body within the limit is no larger as
		// protobuf, save the path fields (topic, partition) it adds.
		grpc.MaxRecvMsgSize(int(min(cfg.MaxRequestBytes+grpcSlack, math.MaxInt32))), grpc.MaxSendMsgSize(client.MaxMessageSize))
	// A producer's stream keeps many requests in flight (16 of 10 KiB in
	// the benchmarks): with gRPC's 64 KiB starting window it waits for
	// WINDOW_UPDATE frames.
	opts = append(opts, grpcopt.ServerDataWindows()...)
	g.grpc = grpc.NewServer(opts...)
	// An HTTP caller should not wait Kafka's two minutes for a record. The
	// gateway's budget (MaxInflightProduceBytes) bounds what its producers
	// hold and answers a caller past it at once; a producer's own
	// buffer.memory would instead make a stream wait, so it does not bind.
	popts := append([]client.ProducerOption{client.WithDeliveryTimeout(DeliveryTimeout),
		client.WithBatchSize(DefaultBatchSize), client.WithLinger(DefaultLinger), client.WithSendWhenIdle(DefaultSendWhenIdle),
		client.WithBufferMemory(math.MaxInt64)}, cfg.ProducerOptions...)
	g.inflight = budget.New(cfg.MaxInflightProduceBytes, cfg.Registry)
	g.producer = api.NewProducer(g.client, g.log, popts...)
	g.producer.SetBudget(g.inflight, fromLoopback)
	cfg.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "skein_gateway_shared_producers",
		Help: "Producers of Produce calls open now: one per client principal, acks and codec used within --producer-idle-timeout.",
	}, func() float64 { return float64(g.producer.Shared()) }))
	admin := api.NewAdmin(g.client, g.log)
	skeinv1.RegisterAdminServiceServer(g.grpc, admin)
	skeinv1.RegisterProducerServiceServer(g.grpc, g.producer)
	g.consumer = api.NewConsumer(g.client, g.log)
	api.RegisterConsumerService(g.grpc, g.consumer)
	g.group = api.NewGroup(g.client, g.log)
	skeinv1.RegisterGroupServiceServer(g.grpc, g.group)
	g.txn = api.NewTransaction(g.client, g.log)
	skeinv1.RegisterTransactionServiceServer(g.grpc, g.txn)
	g.health = health.NewServer()
	healthpb.RegisterHealthServer(g.grpc, g.health)
	reflection.Register(g.grpc)

	// REST reaches the same gRPC server (interceptors, tracing, metrics)
	// through an in-memory connection.
	g.loopLis = bufconn.Listen(1 << 20)
	dial := append([]grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return g.loopLis.DialContext(ctx) }),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(client.MaxMessageSize), grpc.MaxCallSendMsgSize(client.MaxMessageSize)),
	}, append(grpcopt.Dial(), grpcopt.DataWindows()...)...)
	if grpcopt.TLS() != nil {
		// The gRPC server speaks TLS on the loopback too; the gateway's own
		// certificate names localhost.
		dial = append(dial, grpc.WithAuthority("localhost"))
	}
	if g.loop, err = grpc.NewClient("passthrough:///gateway-loopback", dial...); err != nil {
		return nil, err
	}
	rl := restLimits{maxBody: cfg.MaxRequestBytes, budget: g.inflight}
	mux, err := newRESTMux(context.Background(), g.loop, rl)
	if err != nil {
		return nil, err
	}
	ready := func() bool {
		select {
		case <-g.client.Ready():
			return true
		default:
			return false
		}
	}
	handler := newHTTPHandler(mux, rl, ready, telemetry.MetricsHandler(cfg.Registry))
	var viewers func(*http.Request) console.Viewer
	if z := g.auth.authz; z != nil {
		viewers = func(r *http.Request) console.Viewer {
			p := principalFrom(r.Context())
			creds, _ := g.auth.credentials(r) // verified as p by wrapHTTP
			return newConsoleViewer(z, display(p), func() error { return g.auth.stillValid(creds, p) })
		}
	}
	g.events = console.NewHub(console.HubConfig{Source: &consoleSource{c: g.client, admin: admin, group: g.group}, Viewers: viewers, Logger: g.log})
	console.Register(handler, g.events, &console.Demos{Enabled: cfg.ConsoleDemos, ClusterFile: cfg.DevClusterFile}, g.auth.consoleGuard)
	g.http = &http.Server{
		Handler:           countREST(newRESTAnswers(cfg.Registry), crossOrigin().Handler(g.auth.wrapHTTP(refuseUncleanPath(handler)))),
		ReadHeaderTimeout: 10 * time.Second,
	}
	ok = true
	return g, nil
}

// GRPCAddr is the bound gRPC address.
func (g *Gateway) GRPCAddr() string { return g.grpcLis.Addr().String() }

// HTTPAddr is the bound HTTP address.
func (g *Gateway) HTTPAddr() string { return g.httpLis.Addr().String() }

// Client is the gateway's cluster client.
func (g *Gateway) Client() *client.Client { return g.client }

// Serve runs until ctx ends, then shuts down gracefully: stop accepting,
// finish in-flight calls, flush producers, close the client.
func (g *Gateway) Serve(ctx context.Context) error {
	g.producer.ExpireIdle(g.cfg.ProducerIdleTimeout) // until the shutdown's Close
	eg, ectx := errgroup.WithContext(ctx)
	eg.Go(func() error { return g.grpc.Serve(g.grpcLis) })
	eg.Go(func() error { return g.grpc.Serve(g.loopLis) })
	eg.Go(func() error {
		if err := g.http.Serve(g.httpLis); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	eg.Go(func() error {
		select {
		case <-g.client.Ready():
			g.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
			g.log.Info("gateway ready", "grpc", g.GRPCAddr(), "http", g.HTTPAddr())
		case <-ectx.Done():
		}
		return nil
	})
	g.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	g.log.Info("gateway listening", "grpc", g.GRPCAddr(), "http", g.HTTPAddr(), "controllers", g.cfg.Controllers)
	<-ectx.Done()
	g.shutdown()
	err := eg.Wait()
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	return err
}

// shutdown stops everything within the grace period.
func (g *Gateway) shutdown() {
	g.log.Info("gateway shutting down")
	g.health.Shutdown()
	// Event streams never end on their own: close them first, or Shutdown
	// would wait the whole grace period for them.
	g.events.Close()
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.ShutdownGrace)
	defer cancel()
	_ = g.http.Shutdown(ctx)
	g.consumer.Drain()
	g.group.Drain()
	g.producer.Drain()
	stopped := make(chan struct{})
	go func() {
		g.grpc.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		g.grpc.Stop()
	}
	if err := g.producer.Close(ctx); err != nil {
		g.log.Warn("flushing producers at shutdown", "err", err)
	}
	g.closeAll()
}

func (g *Gateway) closeAll() {
	if g.loop != nil {
		g.loop.Close()
	}
	if g.group != nil {
		g.group.Close()
	}
	if g.txn != nil {
		g.txn.Close()
	}
	if g.client != nil {
		g.client.Close()
	}
	for _, l := range []net.Listener{g.grpcLis, g.httpLis} {
		if l != nil {
			l.Close()
		}
	}
}
