// Command skein-groupcoord is a Skein group coordinator: it serves the
// consumer groups whose ids hash to the __consumer_offsets partitions the
// controller gives it (GroupCoordinatorService), and keeps their state and
// committed offsets in that topic.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"

	groupv1 "skein/gen/skein/group/v1"
	"skein/libs/client"
	"skein/libs/cliflag"
	"skein/libs/grpcopt"
	"skein/libs/membership"
	"skein/libs/telemetry"
	"skein/libs/tlsconf"
	"skein/services/groupcoord/internal/coordinator"
	"skein/services/groupcoord/internal/group"
	"skein/services/groupcoord/internal/server"
)

type config struct {
	nodeID          int
	grpcAddr        string
	httpAddr        string
	gossipAddr      string
	gossipAdvertise string
	gossipSeeds     string
	controllers     string
	logLevel        string
	minSession      time.Duration
	maxSession      time.Duration
	defaultSession  time.Duration
	heartbeat       time.Duration
	maxGroupSize    int
	writeTimeout    time.Duration
	lagInterval     time.Duration
	shutdownTimeout time.Duration
	tls             *tlsconf.Files
	gossipKeyFile   string
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "healthcheck" {
		os.Exit(healthcheck(os.Args[2:]))
	}
	var c config
	d := group.DefaultConfig()
	fs := flag.NewFlagSet("skein-groupcoord", flag.ExitOnError)
	fs.IntVar(&c.nodeID, "node-id", 1, "group coordinator id, unique among group coordinators")
	fs.StringVar(&c.grpcAddr, "grpc-addr", "127.0.0.1:9501", "gRPC listen address (GroupCoordinatorService), also advertised in gossip")
	fs.StringVar(&c.httpAddr, "http-addr", "127.0.0.1:9511", "HTTP address for /metrics, /healthz, /readyz, /debug/pprof")
	fs.StringVar(&c.gossipAddr, "gossip-addr", "127.0.0.1:9521", "memberlist bind address")
	fs.StringVar(&c.gossipAdvertise, "gossip-advertise-addr", "", "gossip address others reach (default: --gossip-addr)")
	fs.StringVar(&c.gossipSeeds, "gossip-seeds", "", "comma-separated gossip addresses to join")
	fs.StringVar(&c.controllers, "controllers", "127.0.0.1:9101", "comma-separated controller gRPC addresses")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&c.minSession, "min-session-timeout", d.MinSessionTimeout, "group.consumer.min.session.timeout.ms: the shortest session a member may ask for")
	fs.DurationVar(&c.maxSession, "max-session-timeout", d.MaxSessionTimeout, "group.consumer.max.session.timeout.ms: the longest session a member may ask for")
	fs.DurationVar(&c.defaultSession, "session-timeout", d.DefaultSessionTimeout, "group.consumer.session.timeout.ms: a member's session when it asks for none")
	fs.DurationVar(&c.heartbeat, "heartbeat-interval", d.HeartbeatInterval, "group.consumer.heartbeat.interval.ms: answered to every member")
	fs.IntVar(&c.maxGroupSize, "max-group-size", 0, "group.consumer.max.size: most members per group (0: no limit)")
	fs.DurationVar(&c.writeTimeout, "write-timeout", 5*time.Second, "bound on one acks=all write to __consumer_offsets, retries included")
	fs.DurationVar(&c.lagInterval, "lag-interval", 10*time.Second, "how often committed offsets are compared with high watermarks for the lag metrics")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "bound on a graceful stop (SIGTERM: drain gRPC, leave gossip)")
	c.tls = tlsconf.AddFlags(fs)
	fs.StringVar(&c.gossipKeyFile, "gossip-key-file", "", "file holding the cluster's gossip key (base64 of 16, 24 or 32 bytes): gossip is encrypted and members without it are kept out")
	if err := cliflag.Parse(fs, os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "skein-groupcoord:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	log, err := telemetry.NewLogger(os.Stderr, "skein-groupcoord", c.logLevel)
	if err != nil {
		return err
	}
	log = log.With("node_id", c.nodeID)
	controllers := cliflag.SplitList(c.controllers)
	if len(controllers) == 0 {
		return errors.New("--controllers: no controller address")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := grpcopt.SetupTLS(ctx, *c.tls, log); err != nil {
		return err
	}
	var gossipKey []byte
	if c.gossipKeyFile != "" {
		if gossipKey, err = membership.ReadKeyFile(c.gossipKeyFile); err != nil {
			return err
		}
	}

	shutdownTracing, err := telemetry.Tracing(ctx, telemetry.TracingConfig{ServiceName: "skein-groupcoord", InstanceID: fmt.Sprint(c.nodeID)})
	if err != nil {
		return err
	}
	defer shutdownTracing(context.Background())

	// A new incarnation per process start: the controller gives the
	// partitions this node owns a new coordinator epoch when it sees one, so
	// this process never writes under its predecessor's producer epoch.
	incarnation := uuid.NewString()
	log = log.With("incarnation", incarnation)
	cl, err := client.New(client.Config{Controllers: controllers, NodeID: int32(c.nodeID), Logger: log})
	if err != nil {
		return err
	}
	defer cl.Close()

	reg := telemetry.NewRegistry()
	coord := coordinator.New(coordinator.Config{
		NodeID: int32(c.nodeID),
		Group: group.Config{MinSessionTimeout: c.minSession, MaxSessionTimeout: c.maxSession, DefaultSessionTimeout: c.defaultSession,
			HeartbeatInterval: c.heartbeat, MaxSize: c.maxGroupSize},
		WriteTimeout: c.writeTimeout,
		LagInterval:  c.lagInterval,
		NewMemberID:  uuid.NewString,
		Logger:       log,
	}, coordinator.ClientLog{C: cl}, coordinator.NewMetrics(reg))

	srv := grpc.NewServer(grpcopt.Server(telemetry.NewGRPCMetrics(reg))...)
	groupv1.RegisterGroupCoordinatorServiceServer(srv, server.New(coord))
	reflection.Register(srv)
	lis, err := net.Listen("tcp", c.grpcAddr)
	if err != nil {
		return err
	}
	grpcDone := make(chan struct{})
	go func() {
		defer close(grpcDone)
		if err := srv.Serve(lis); err != nil {
			log.Error("gRPC server stopped", "err", err)
		}
	}()

	httpSrv, err := serveHTTP(c.httpAddr, reg, coord, log)
	if err != nil {
		return err
	}
	defer httpSrv.Close()

	gossip, err := membership.Start(membership.Config{
		BindAddr: c.gossipAddr, AdvertiseAddr: c.gossipAdvertise, Seeds: cliflag.SplitList(c.gossipSeeds), Logger: log, Timings: membership.FastTimings(), SecretKey: gossipKey,
		Meta: membership.Meta{Role: membership.RoleGroupCoordinator, ID: int32(c.nodeID), GRPCAddr: c.grpcAddr, HTTPAddr: c.httpAddr, Incarnation: incarnation},
	})
	if err != nil {
		return err
	}
	gossipDone := make(chan struct{})
	go func() {
		defer close(gossipDone)
		for ev := range gossip.Events() {
			log.Debug("gossip", "event", ev.Type.String(), "member", ev.Member.Name)
		}
	}()

	followCtx, stopFollow := context.WithCancel(context.Background())
	followDone := make(chan struct{})
	go func() {
		defer close(followDone)
		coordinator.Follow(followCtx, cl, coord, int32(c.nodeID), incarnation)
	}()
	log.Info("group coordinator serving", "grpc", c.grpcAddr, "http", c.httpAddr, "gossip", c.gossipAddr)

	<-ctx.Done()
	log.Info("shutting down: draining requests, then leaving gossip")
	sctx, cancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
	defer cancel()
	// Stop accepting and let the calls in flight finish: each answers only
	// once its write is acknowledged, so nothing is left to flush after.
	done := make(chan struct{})
	go func() { srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-sctx.Done():
		srv.Stop()
	}
	<-grpcDone
	stopFollow()
	<-followDone
	coord.Close()
	// Leaving tells the controller at once: the partitions move to the other
	// coordinators without waiting for the failure detector.
	if err := gossip.Close(2 * time.Second); err != nil && !errors.Is(err, context.Canceled) {
		log.Warn("leaving gossip", "err", err)
	}
	<-gossipDone
	log.Info("stopped")
	return nil
}

func serveHTTP(addr string, reg *prometheus.Registry, coord *coordinator.Coordinator, log *slog.Logger) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", telemetry.MetricsHandler(reg))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !coord.Registered() {
			http.Error(w, "the controllers' metadata does not list this coordinator yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	// Profiles for operators chasing a hot path (the HTTP port binds to
	// loopback by default).
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	lis = grpcopt.Listener(lis, false)
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("HTTP server stopped", "err", err)
		}
	}()
	return srv, nil
}

// healthcheck GETs the coordinator's /healthz: Docker health checks need no
// shell in a FROM scratch image.
func healthcheck(args []string) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	addr := fs.String("http-addr", "127.0.0.1:9511", "the coordinator's HTTP address")
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the answer")
	files := tlsconf.AddFlags(fs)
	if err := cliflag.Parse(fs, args, os.Getenv); err != nil {
		return 2
	}
	return cliflag.HealthcheckFiles(*addr, *timeout, *files, os.Stderr)
}
