// Command skein-storage is a Skein storage node: it hosts partition replicas,
// answers produce and fetch, and replicates from and to the other nodes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/checkpoint"
	"skein/libs/cliflag"
	"skein/libs/grpcopt"
	"skein/libs/membership"
	"skein/libs/metadata"
	"skein/libs/peerauth"
	"skein/libs/telemetry"
	"skein/libs/tlsconf"
	"skein/services/storage/internal/controllerlink"
	"skein/services/storage/internal/dirid"
	"skein/services/storage/internal/fetcher"
	"skein/services/storage/internal/isrsender"
	"skein/services/storage/internal/partition"
	"skein/services/storage/internal/replica"
	"skein/services/storage/internal/server"
)

// maxMessage bounds every gRPC message a storage node sends or receives.
const maxMessage = 64 << 20

type config struct {
	nodeID        int
	grpcAddr      string
	httpAddr      string
	gossipAddr    string
	gossipSeeds   string
	controllers   string
	dataDir       string
	rack          string
	logLevel      string
	replicaLagMax time.Duration
	heartbeat     time.Duration
	producerIDExp time.Duration
	shutdownWait  time.Duration
	maxInflight   int64
	cacheWindow   int64
	tls           *tlsconf.Files
	authz         *peerauth.Flags
	gossipKeyFile string
	gossipTimings membership.Timings
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "healthcheck" {
		os.Exit(healthcheck(os.Args[2:]))
	}
	var c config
	fs := flag.NewFlagSet("skein-storage", flag.ExitOnError)
	fs.IntVar(&c.nodeID, "node-id", 1, "broker id, unique in the cluster")
	fs.StringVar(&c.grpcAddr, "grpc-addr", "127.0.0.1:9201", "gRPC listen address (StorageService), also advertised to peers")
	fs.StringVar(&c.httpAddr, "http-addr", "127.0.0.1:9301", "HTTP address for /metrics, /healthz, /readyz")
	fs.StringVar(&c.gossipAddr, "gossip-addr", "127.0.0.1:9401", "memberlist gossip address")
	fs.StringVar(&c.gossipSeeds, "gossip-seeds", "", "comma-separated gossip addresses to join")
	timings := membership.TimingFlags(fs)
	fs.StringVar(&c.controllers, "controllers", "127.0.0.1:9101", "comma-separated controller gRPC addresses")
	fs.StringVar(&c.dataDir, "data-dir", "data/storage-1", "directory for partition logs and checkpoints")
	fs.StringVar(&c.rack, "rack", "", "rack id, for rack-aware replica placement")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&c.replicaLagMax, "replica-lag-max", 10*time.Second, "replica.lag.time.max.ms: a follower behind this long leaves the ISR")
	fs.DurationVar(&c.heartbeat, "heartbeat-interval", controllerlink.DefaultHeartbeatInterval, "how often the node renews its session with the leading controller; keep it well under the controllers' --broker-session-timeout (2 s by default), which fences a node whose heartbeats stop; heartbeats also carry the leaders this node cannot reach as a follower")
	fs.DurationVar(&c.producerIDExp, "producer-id-expiration", replica.DefaultProducerIDExpiration, "producer.id.expiration.ms: a producer id without an open transaction that writes nothing to a partition for this long is forgotten there (a retry sent later is written again)")
	fs.DurationVar(&c.shutdownWait, "shutdown-wait", 10*time.Second, "how long SIGTERM waits for leadership to move and requests to finish")
	fs.Int64Var(&c.maxInflight, "max-inflight-produce-bytes", server.DefaultMaxInflightProduceBytes, "record bytes of produce requests served at once, acks=all waits included; beyond it a produce is refused with THROTTLING_QUOTA_EXCEEDED (retriable)")
	fs.Int64Var(&c.cacheWindow, "log-cache-window", replica.DefaultLogCacheWindow, "bytes at the end of each partition's active segment left in the page cache; older written bytes are written back and dropped from it, so that new writes reuse memory the node has already used instead of growing the cache (dear on a virtual machine whose host takes back free memory) and a catch-up consumer reads them from the disk; 0 leaves the whole log to the kernel's page cache, as Kafka does")
	c.tls = tlsconf.AddFlags(fs)
	c.authz = peerauth.AddFlags(fs, "produce, fetch and list-offsets calls")
	fs.StringVar(&c.gossipKeyFile, "gossip-key-file", "", "file holding the cluster's gossip key (base64 of 16, 24 or 32 bytes): gossip is encrypted and members without it are kept out")
	if err := cliflag.Parse(fs, os.Args[1:], os.Getenv); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(cliflag.ExitCode(err))
	}
	var err error
	if c.gossipTimings, err = timings(); err != nil {
		fmt.Fprintln(os.Stderr, "skein-storage:", err)
		os.Exit(2)
	}
	if c.cacheWindow < 0 {
		fmt.Fprintf(os.Stderr, "skein-storage: --log-cache-window %d: want a number of bytes, or 0 to leave the cache to the kernel\n", c.cacheWindow)
		os.Exit(2)
	}
	if c.maxInflight <= 0 {
		fmt.Fprintf(os.Stderr, "skein-storage: --max-inflight-produce-bytes %d: want a positive number of bytes\n", c.maxInflight)
		os.Exit(2)
	}
	if c.heartbeat <= 0 {
		fmt.Fprintf(os.Stderr, "skein-storage: --heartbeat-interval %v: want a positive duration\n", c.heartbeat)
		os.Exit(2)
	}
	if c.producerIDExp <= 0 {
		fmt.Fprintf(os.Stderr, "skein-storage: --producer-id-expiration %v: want a positive duration\n", c.producerIDExp)
		os.Exit(2)
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "skein-storage:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	log, err := telemetry.NewLogger(os.Stderr, "skein-storage", c.logLevel)
	if err != nil {
		return err
	}
	log = log.With("node_id", c.nodeID)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := grpcopt.SetupTLS(ctx, *c.tls, log); err != nil {
		return err
	}

	shutdownTracing, err := telemetry.Tracing(ctx, telemetry.TracingConfig{ServiceName: "skein-storage", InstanceID: fmt.Sprint(c.nodeID), Logger: log})
	if err != nil {
		return err
	}
	defer shutdownTracing(context.Background())

	dirID, replaced, err := dirid.Load(c.dataDir)
	if err != nil {
		return err
	}
	if replaced != "" {
		log.Warn("a new data directory id: " + replaced)
	}
	ckpt, err := checkpoint.OpenFiles(filepath.Join(c.dataDir, "checkpoints"))
	if err != nil {
		return err
	}
	if ckpt.Converted() {
		log.Info("converted the checkpoints from the badger store of an earlier version into files; an earlier version started on this data directory now finds no checkpoints (OPERATIONS.md, \"Upgrading\")",
			"dir", filepath.Join(c.dataDir, "checkpoints"))
	}
	defer ckpt.Close()

	var mgr *replica.Manager
	link, err := controllerlink.New(controllerlink.Config{
		BrokerID: int32(c.nodeID), GRPCAddr: c.grpcAddr, HTTPAddr: c.httpAddr, Rack: c.rack,
		Controllers: cliflag.SplitList(c.controllers), HeartbeatInterval: c.heartbeat, LogDirID: dirID,
		ClusterID: func() string { return mgr.DirsClusterID() }, // registration comes after mgr is made
	}, log)
	if err != nil {
		return err
	}
	defer link.Close()

	// Replica fetch answers reach 16 MiB (fetcher.Config.MaxBytes) plus a
	// whole first batch, and any fetch answer up to MaxFetchBytes: receive
	// what the peers' servers may send (gRPC's default of 4 MiB would
	// refuse such an answer every time, and the follower would never
	// catch up).
	conns := controllerlink.NewConns(append(append(grpcopt.Dial(), grpcopt.DataWindows()...),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage)))...)
	defer conns.Close()

	fetchers := fetcher.New(fetcher.Config{Self: int32(c.nodeID), BrokerEpoch: link.BrokerEpoch, SaveStarts: func(tps []partition.TP) { mgr.Checkpoint(tps) }}, func(broker int32) (*grpc.ClientConn, bool) {
		addr, ok := mgr.BrokerAddr(broker)
		if !ok {
			return nil, false
		}
		cc, err := conns.Get(addr)
		return cc, err == nil
	}, log)
	isr := isrsender.New(link.AlterPartition)
	mgr = replica.New(replica.Config{Self: int32(c.nodeID), DataDir: c.dataDir, ReplicaLagMax: c.replicaLagMax, ProducerIDExpiration: c.producerIDExp, LogCacheWindow: c.cacheWindow}, log, isr, fetchers, ckpt)

	reg := telemetry.NewRegistry()
	reg.MustRegister(replica.NewCollector(mgr))
	authz, err := c.authz.Authorizer(mgr.Image, grpcopt.TLS() != nil, log)
	if err != nil {
		return err
	}
	guard := peerauth.NewGuard(server.Rules(), log)
	// Replication streams carry megabytes per round: the default dynamic
	// flow-control windows cost ~40% of stream throughput here.
	srv := grpc.NewServer(append(append(append(grpcopt.Server(telemetry.NewGRPCMetrics(reg)), guard.ServerOptions()...), grpcopt.ServerDataWindows()...),
		grpc.MaxRecvMsgSize(maxMessage), grpc.MaxSendMsgSize(maxMessage))...)
	metrics := server.NewMetrics(reg)
	storageSrv := server.New(mgr, log, metrics)
	storageSrv.LimitInflightProduce(c.maxInflight)
	storageSrv.Authorize(authz)
	server.Register(srv, storageSrv)
	reflection.Register(srv)
	lis, err := net.Listen("tcp", c.grpcAddr)
	if err != nil {
		return err
	}
	// The servers: either failing stops the node with its error.
	servers, serving := errgroup.WithContext(ctx)
	servers.Go(func() error {
		if err := srv.Serve(lis); err != nil {
			return fmt.Errorf("gRPC server: %w", err)
		}
		return nil
	})

	var ready atomic.Bool
	mux := http.NewServeMux()
	mux.Handle("/metrics", telemetry.MetricsHandler(reg))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	telemetry.Profiling(mux)
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "not registered or no metadata yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	httpSrv := &http.Server{Addr: c.httpAddr, Handler: authz.OpsHandler(mux, "/healthz", "/readyz"), ReadHeaderTimeout: 5 * time.Second}
	httpLis, err := net.Listen("tcp", c.httpAddr)
	if err != nil {
		srv.Stop()
		return errors.Join(err, servers.Wait())
	}
	httpLis = grpcopt.Listener(httpLis, false)
	servers.Go(func() error {
		if err := httpSrv.Serve(httpLis); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("HTTP server: %w", err)
		}
		return nil
	})
	stopServers := func() error {
		srv.Stop()
		_ = httpSrv.Close()
		return servers.Wait()
	}

	var gossipKey []byte
	if c.gossipKeyFile != "" {
		if gossipKey, err = membership.ReadKeyFile(c.gossipKeyFile); err != nil {
			return errors.Join(err, stopServers())
		}
	}
	// Registered before it joins gossip: a process the controllers refuse
	// (another one holds this node id, DUPLICATE_BROKER_REGISTRATION) keeps
	// trying without ever gossiping under the live node's name.
	if err := link.Register(serving); err != nil {
		if ctx.Err() != nil {
			// Told to stop (SIGTERM, SIGINT) before the controllers
			// answered: a clean stop, not a failure.
			log.Info("stopped before registering with the controllers")
			_ = stopServers()
			return nil
		}
		return errors.Join(err, stopServers())
	}
	gossip, err := membership.Start(membership.Config{
		BindAddr: c.gossipAddr, Seeds: cliflag.SplitList(c.gossipSeeds), Logger: log, Timings: c.gossipTimings, SecretKey: gossipKey,
		Meta: membership.Meta{Role: membership.RoleStorage, ID: int32(c.nodeID), GRPCAddr: c.grpcAddr, HTTPAddr: c.httpAddr, Incarnation: link.Incarnation()},
	})
	if err != nil {
		return errors.Join(err, stopServers())
	}

	go func() { // ends when gossip closes its events
		for ev := range gossip.Events() {
			log.Debug("gossip", "event", ev.Type.String(), "member", ev.Member.Name)
		}
	}()

	// The node's own loops, each stopped by cancelBG and waited for before
	// the replicas close.
	bg, cancelBG := context.WithCancel(context.Background())
	var loops errgroup.Group
	loops.Go(func() error { link.Heartbeat(bg, unreachableLeaders(fetchers, log), mgr.LogDirFailed); return nil })
	loops.Go(func() error {
		link.Watch(bg, func(im *metadata.Image) {
			mgr.OnImage(im)
			metrics.ForgetDeletedTopics(im)
			ready.Store(true)
		})
		return nil
	})
	loops.Go(func() error { mgr.Run(bg); return nil })
	loops.Go(func() error { isr.Run(bg); return nil })
	log.Info("storage node serving", "grpc", c.grpcAddr, "http", c.httpAddr, "gossip", c.gossipAddr)

	<-serving.Done()
	if ctx.Err() == nil {
		log.Error("a server failed: stopping", "err", context.Cause(serving))
	}
	log.Info("shutting down: moving leadership away")
	sctx, cancel := context.WithTimeout(context.Background(), c.shutdownWait)
	defer cancel()
	if remaining, err := link.ControlledShutdown(sctx); err != nil {
		// No controller to hand leadership to: stop now; the others fence
		// this node when its session lapses.
		log.Warn("controlled shutdown failed", "err", err)
	} else {
		if remaining > 0 {
			log.Warn("controlled shutdown left partitions led here", "partitions", remaining)
		}
		// Let the new leadership reach this node before it stops serving.
		waitFor(sctx, func() bool { return mgr.Stats().Leading <= int(remaining) })
	}
	// Our own replication streams to other leaders go first; then the
	// streams peers hold open to us are ended, so the graceful stop only
	// waits for requests in flight.
	fetchers.Close()
	storageSrv.Drain()
	done := make(chan struct{})
	go func() { srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-sctx.Done():
		srv.Stop()
	}
	cancelBG()
	_ = loops.Wait()
	mgr.Close()
	if err := gossip.Close(2 * time.Second); err != nil && !errors.Is(err, context.Canceled) {
		log.Info("leaving gossip: the leave may not have reached the other members (none left to tell, when the whole cluster stops); they find this one gone by failure detection", "err", err)
	}
	serveErr := stopServers()
	log.Info("stopped")
	return serveErr
}

func waitFor(ctx context.Context, cond func() bool) {
	for !cond() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// healthcheck GETs the node's /healthz: Docker health checks need no shell
// in a FROM scratch image.
func healthcheck(args []string) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	addr := fs.String("http-addr", "127.0.0.1:9301", "the node's HTTP address")
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the answer")
	files := tlsconf.AddFlags(fs)
	if err := cliflag.Parse(fs, args, os.Getenv); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "healthcheck:", err)
		}
		return cliflag.ExitCode(err)
	}
	return cliflag.HealthcheckFiles(*addr, *timeout, *files, os.Stderr)
}

// unreachableLeaders answers, for each heartbeat, the partitions whose
// leader this node's fetchers have not heard from, and logs when the set of
// such leaders changes.
func unreachableLeaders(f *fetcher.Manager, log *slog.Logger) func(resumed time.Time) []*controllerv1.UnreachableLeader {
	var last []int32 // leaders reported in the previous heartbeat
	return func(resumed time.Time) []*controllerv1.UnreachableLeader {
		silent := f.Unreachable(time.Now(), resumed)
		out := make([]*controllerv1.UnreachableLeader, 0, len(silent))
		var leaders []int32
		for _, s := range silent {
			out = append(out, &controllerv1.UnreachableLeader{Topic: s.TP.Topic, Partition: s.TP.Partition, Leader: s.Leader, LeaderEpoch: s.LeaderEpoch, SilentMs: s.For.Milliseconds()})
			if !slices.Contains(leaders, s.Leader) {
				leaders = append(leaders, s.Leader)
			}
		}
		slices.Sort(leaders)
		if !slices.Equal(leaders, last) {
			if len(leaders) > 0 {
				log.Warn("leaders not answering replica fetches: reporting them to the controller", "leaders", leaders, "partitions", len(out))
			} else {
				log.Info("every leader answers replica fetches again")
			}
			last = leaders
		}
		return out
	}
}
