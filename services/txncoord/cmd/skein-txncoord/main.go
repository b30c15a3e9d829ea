// Command skein-txncoord is a Skein transaction coordinator: it serves the
// transactional ids that hash to the __transaction_state partitions the
// controller gives it (TransactionCoordinatorService) — producer ids and
// epochs, the transactions' states, kept in that topic, and the commit and
// abort markers it writes to every partition of a transaction — and gives
// idempotent producers fresh producer ids.
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

	txnv1 "skein/gen/skein/txn/v1"
	"skein/libs/client"
	"skein/libs/cliflag"
	"skein/libs/grpcopt"
	"skein/libs/membership"
	"skein/libs/telemetry"
	"skein/libs/tlsconf"
	"skein/services/txncoord/internal/coordinator"
	"skein/services/txncoord/internal/server"
	"skein/services/txncoord/internal/txn"
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
	maxTimeout      time.Duration
	idExpiration    time.Duration
	writeTimeout    time.Duration
	shutdownTimeout time.Duration
	tls             *tlsconf.Files
	gossipKeyFile   string
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "healthcheck" {
		os.Exit(healthcheck(os.Args[2:]))
	}
	var c config
	d := txn.DefaultConfig()
	fs := flag.NewFlagSet("skein-txncoord", flag.ExitOnError)
	fs.IntVar(&c.nodeID, "node-id", 1, "transaction coordinator id, unique among transaction coordinators")
	fs.StringVar(&c.grpcAddr, "grpc-addr", "127.0.0.1:9601", "gRPC listen address (TransactionCoordinatorService), also advertised in gossip")
	fs.StringVar(&c.httpAddr, "http-addr", "127.0.0.1:9611", "HTTP address for /metrics, /healthz, /readyz, /debug/pprof")
	fs.StringVar(&c.gossipAddr, "gossip-addr", "127.0.0.1:9621", "memberlist bind address")
	fs.StringVar(&c.gossipAdvertise, "gossip-advertise-addr", "", "gossip address others reach (default: --gossip-addr)")
	fs.StringVar(&c.gossipSeeds, "gossip-seeds", "", "comma-separated gossip addresses to join")
	fs.StringVar(&c.controllers, "controllers", "127.0.0.1:9101", "comma-separated controller gRPC addresses")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&c.maxTimeout, "transaction-max-timeout", d.MaxTimeout, "transaction.max.timeout.ms: the longest transaction timeout a producer may ask for")
	fs.DurationVar(&c.idExpiration, "transactional-id-expiration", d.IDExpiration, "transactional.id.expiration.ms: an idle transactional id is forgotten after this long")
	fs.DurationVar(&c.writeTimeout, "write-timeout", 5*time.Second, "bound on one acks=all write to __transaction_state, retries included")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "bound on a graceful stop (SIGTERM: drain gRPC, leave gossip)")
	c.tls = tlsconf.AddFlags(fs)
	fs.StringVar(&c.gossipKeyFile, "gossip-key-file", "", "file holding the cluster's gossip key (base64 of 16, 24 or 32 bytes): gossip is encrypted and members without it are kept out")
	if err := cliflag.Parse(fs, os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "skein-txncoord:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	log, err := telemetry.NewLogger(os.Stderr, "skein-txncoord", c.logLevel)
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

	shutdownTracing, err := telemetry.Tracing(ctx, telemetry.TracingConfig{ServiceName: "skein-txncoord", InstanceID: fmt.Sprint(c.nodeID)})
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

	groupCoordinators := cl.Groups()
	defer groupCoordinators.Close()
	reg := telemetry.NewRegistry()
	coord := coordinator.New(coordinator.Config{
		NodeID:             int32(c.nodeID),
		Txn:                txn.Config{MaxTimeout: c.maxTimeout, IDExpiration: c.idExpiration},
		WriteTimeout:       c.writeTimeout,
		AllocateProducerID: cl.AllocateProducerID,
		CompleteGroupOffsets: func(ctx context.Context, groups []string, pid int64, epoch int16, commit bool) error {
			for _, g := range groups {
				if err := groupCoordinators.CompleteTxnOffsets(ctx, g, pid, epoch, commit); err != nil {
					return fmt.Errorf("group %q: %w", g, err)
				}
			}
			return nil
		},
		Logger: log,
	}, coordinator.ClientLog{C: cl}, markers{cl}, coordinator.NewMetrics(reg))

	srv := grpc.NewServer(grpcopt.Server(telemetry.NewGRPCMetrics(reg))...)
	txnv1.RegisterTransactionCoordinatorServiceServer(srv, server.New(coord))
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
		Meta: membership.Meta{Role: membership.RoleTransactionCoordinator, ID: int32(c.nodeID), GRPCAddr: c.grpcAddr, HTTPAddr: c.httpAddr, Incarnation: incarnation},
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
	log.Info("transaction coordinator serving", "grpc", c.grpcAddr, "http", c.httpAddr, "gossip", c.gossipAddr)

	<-ctx.Done()
	log.Info("shutting down: draining requests, then leaving gossip")
	sctx, cancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
	defer cancel()
	// Stop accepting and let the calls in flight finish: each answers only
	// once its write is acknowledged; markers still being written are left
	// to the partition's next owner, which finishes every PREPARE state.
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
	addr := fs.String("http-addr", "127.0.0.1:9611", "the coordinator's HTTP address")
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the answer")
	files := tlsconf.AddFlags(fs)
	if err := cliflag.Parse(fs, args, os.Getenv); err != nil {
		return 2
	}
	return cliflag.HealthcheckFiles(*addr, *timeout, *files, os.Stderr)
}

// markers writes transaction markers through the storage nodes' leaders.
type markers struct{ cl *client.Client }

func (m markers) WriteMarkers(ctx context.Context, producerID int64, epoch int16, commit bool, coordinatorEpoch int32, partitions []txn.TopicPartition) error {
	tps := make([]client.TopicPartition, len(partitions))
	for i, p := range partitions {
		tps[i] = client.TopicPartition{Topic: p.Topic, Partition: p.Partition}
	}
	return m.cl.WriteTxnMarkers(ctx, client.TxnMarker{ProducerID: producerID, ProducerEpoch: epoch, Commit: commit, CoordinatorEpoch: coordinatorEpoch}, tps)
}
