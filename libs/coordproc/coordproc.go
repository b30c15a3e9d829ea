// Package coordproc is the process shell every Skein coordinator shares
// (the group and the transaction coordinator): the common flags, TLS and
// the gossip key, tracing, a new incarnation per start, the cluster client,
// the gRPC and HTTP servers, joining gossip under the coordinator's role,
// following the metadata, and the graceful stop — drain the calls in
// flight, stop following, close the coordinator, leave gossip so its
// partitions move at once. A coordinator main adds its own flags and builds
// its coordinator in Build.
//
// With TLS every call passes the coordinator's guard (libs/peerauth): it
// names the caller and refuses internal methods to peers of other roles
// (Parts.Rules); with --authorizer the coordinator's handlers decide the
// callers' requests with the cluster's ACLs (Env.Authorizer).
package coordproc

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
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"

	"skein/libs/client"
	"skein/libs/cliflag"
	"skein/libs/grpcopt"
	"skein/libs/membership"
	"skein/libs/metadata"
	"skein/libs/peerauth"
	"skein/libs/telemetry"
	"skein/libs/tlsconf"
)

// Config is what the shared flags set, and the coordinator's identity.
type Config struct {
	// Service names the binary ("skein-groupcoord") in logs and traces;
	// What describes it in the serving line ("group coordinator").
	Service, What string
	Role          membership.Role

	NodeID          int
	GRPCAddr        string
	HTTPAddr        string
	GossipAddr      string
	GossipAdvertise string
	GossipSeeds     string
	// GossipTimings answers the failure-detector flags' timings (nil:
	// membership.FastTimings).
	GossipTimings   func() (membership.Timings, error)
	Controllers     string
	LogLevel        string
	ShutdownTimeout time.Duration
	TLS             *tlsconf.Files
	GossipKeyFile   string
	// Auth is --authorizer and --super-users (nil: authorization off).
	Auth *peerauth.Flags
}

// Defaults are a coordinator's default addresses.
type Defaults struct {
	GRPCAddr, HTTPAddr, GossipAddr string
}

// AddFlags registers the flags every coordinator takes on fs; what
// describes the coordinator in their help ("group coordinator",
// "GroupCoordinatorService").
func AddFlags(fs *flag.FlagSet, c *Config, d Defaults, what, service string) {
	fs.IntVar(&c.NodeID, "node-id", 1, what+" id, unique among "+what+"s")
	fs.StringVar(&c.GRPCAddr, "grpc-addr", d.GRPCAddr, "gRPC listen address ("+service+"), also advertised in gossip")
	fs.StringVar(&c.HTTPAddr, "http-addr", d.HTTPAddr, "HTTP address for /metrics, /healthz, /readyz, /debug/pprof")
	fs.StringVar(&c.GossipAddr, "gossip-addr", d.GossipAddr, "memberlist bind address")
	fs.StringVar(&c.GossipAdvertise, "gossip-advertise-addr", "", "gossip address others reach (default: --gossip-addr)")
	fs.StringVar(&c.GossipSeeds, "gossip-seeds", "", "comma-separated gossip addresses to join")
	c.GossipTimings = membership.TimingFlags(fs)
	fs.StringVar(&c.Controllers, "controllers", "127.0.0.1:9101", "comma-separated controller gRPC addresses")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 10*time.Second, "bound on a graceful stop (SIGTERM: drain gRPC, leave gossip)")
	c.TLS = tlsconf.AddFlags(fs)
	fs.StringVar(&c.GossipKeyFile, "gossip-key-file", "", "file holding the cluster's gossip key (base64 of 16, 24 or 32 bytes): gossip is encrypted and members without it are kept out")
	c.Auth = peerauth.AddFlags(fs, "the "+what+"'s calls (its clients' groups, topics and transactional ids)")
}

// Env is what Build gets: the process's client, identity and registry,
// and the authorizer its handlers decide their callers' requests with.
type Env struct {
	Client      *client.Client
	Incarnation string
	Logger      *slog.Logger
	Registry    *prometheus.Registry
	// Authorizer decides with the ACLs of the metadata Client follows; nil
	// without --authorizer (everything allowed).
	Authorizer *peerauth.Authorizer
}

// Parts are what a coordinator plugs into the shell.
type Parts struct {
	// Register adds the coordinator's services to the gRPC server.
	Register func(*grpc.Server)
	// Ready answers /readyz: whether the controllers list this
	// coordinator, with why not.
	Ready func() (bool, string)
	// Follow runs until ctx ends: the coordinator following the metadata.
	Follow func(ctx context.Context)
	// Close closes the coordinator once Follow has returned.
	Close func()
	// Rules name the coordinator's internal methods and the roles that
	// may call them (peerauth.Rules); every other method is open to every
	// verified peer and its handler authorizes the requests.
	Rules peerauth.Rules
}

// Run runs the process until SIGTERM or SIGINT, then stops it gracefully.
func Run(c Config, build func(Env) (Parts, error)) error {
	log, err := telemetry.NewLogger(os.Stderr, c.Service, c.LogLevel)
	if err != nil {
		return err
	}
	log = log.With("node_id", c.NodeID)
	controllers := cliflag.SplitList(c.Controllers)
	if len(controllers) == 0 {
		return errors.New("--controllers: no controller address")
	}
	timings := membership.FastTimings()
	if c.GossipTimings != nil {
		if timings, err = c.GossipTimings(); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if c.TLS != nil {
		if err := grpcopt.SetupTLS(ctx, *c.TLS, log); err != nil {
			return err
		}
	}
	var gossipKey []byte
	if c.GossipKeyFile != "" {
		if gossipKey, err = membership.ReadKeyFile(c.GossipKeyFile); err != nil {
			return err
		}
	}
	shutdownTracing, err := telemetry.Tracing(ctx, telemetry.TracingConfig{ServiceName: c.Service, InstanceID: fmt.Sprint(c.NodeID), Logger: log})
	if err != nil {
		return err
	}
	defer shutdownTracing(context.Background())

	// A new incarnation per process start: the controller gives the
	// partitions this node owns a new coordinator epoch when it sees one, so
	// this process never writes under its predecessor's producer epoch.
	incarnation := uuid.NewString()
	log = log.With("incarnation", incarnation)
	cl, err := client.New(client.Config{Controllers: controllers, NodeID: int32(c.NodeID), Logger: log})
	if err != nil {
		return err
	}
	defer cl.Close()
	authz, err := c.authorizer(cl.Metadata, log)
	if err != nil {
		return err
	}
	reg := telemetry.NewRegistry()
	parts, err := build(Env{Client: cl, Incarnation: incarnation, Logger: log, Registry: reg, Authorizer: authz})
	if err != nil {
		return err
	}

	// The guard comes after the shared options: the trace span (a stats
	// handler) exists when it logs a refusal, and the request metrics count
	// refused calls with their code.
	guard := peerauth.NewGuard(parts.Rules, log)
	srv := grpc.NewServer(append(grpcopt.Server(telemetry.NewGRPCMetrics(reg)), guard.ServerOptions()...)...)
	parts.Register(srv)
	reflection.Register(srv)
	lis, err := net.Listen("tcp", c.GRPCAddr)
	if err != nil {
		return err
	}
	// A server that fails stops the process with its error.
	failed := make(chan error, 2)
	grpcDone := make(chan struct{})
	go func() {
		defer close(grpcDone)
		if err := srv.Serve(lis); err != nil {
			failed <- fmt.Errorf("gRPC server: %w", err)
		}
	}()
	httpSrv, err := serveHTTP(c.HTTPAddr, reg, authz, parts.Ready, failed)
	if err != nil {
		srv.Stop()
		return err
	}
	defer httpSrv.Close()

	gossip, err := membership.Start(membership.Config{
		BindAddr: c.GossipAddr, AdvertiseAddr: c.GossipAdvertise, Seeds: cliflag.SplitList(c.GossipSeeds), Logger: log, Timings: timings, SecretKey: gossipKey,
		Meta: membership.Meta{Role: c.Role, ID: int32(c.NodeID), GRPCAddr: c.GRPCAddr, HTTPAddr: c.HTTPAddr, Incarnation: incarnation},
	})
	if err != nil {
		srv.Stop()
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
		parts.Follow(followCtx)
	}()
	log.Info(c.What+" serving", "grpc", c.GRPCAddr, "http", c.HTTPAddr, "gossip", c.GossipAddr)

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-failed:
		log.Error("a server failed: stopping", "err", serveErr)
	}
	log.Info("shutting down: draining requests, then leaving gossip")
	sctx, cancel := context.WithTimeout(context.Background(), c.ShutdownTimeout)
	defer cancel()
	// Stop accepting and let the calls in flight finish: each answers only
	// once its write is acknowledged; what a coordinator leaves unfinished
	// (a transaction's markers) its partition's next owner completes.
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
	parts.Close()
	// Leaving tells the controller at once: the partitions move to the other
	// coordinators without waiting for the failure detector.
	if err := gossip.Close(2 * time.Second); err != nil && !errors.Is(err, context.Canceled) {
		log.Info("leaving gossip: the leave may not have reached the other members (none left to tell, when the whole cluster stops); they find this one gone by failure detection", "err", err)
	}
	<-gossipDone
	log.Info("stopped")
	return serveErr
}

// authorizer answers the authorizer --authorizer and --super-users ask
// for, over the ACLs of image: nil when off; an error (which stops the
// process at start) for a malformed --super-users, --super-users without
// --authorizer, or --authorizer on a plaintext process.
func (c Config) authorizer(image func() *metadata.Image, log *slog.Logger) (*peerauth.Authorizer, error) {
	if c.Auth == nil {
		return nil, nil
	}
	a, err := c.Auth.Authorizer(image, grpcopt.TLS() != nil, log)
	if err != nil {
		return nil, err
	}
	if a != nil {
		log.Info("authorizing clients' calls with the cluster's ACLs", "super_users", *c.Auth.SuperUsers)
	}
	return a, nil
}

func serveHTTP(addr string, reg *prometheus.Registry, authz *peerauth.Authorizer, ready func() (bool, string), failed chan<- error) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", telemetry.MetricsHandler(reg))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ok, why := ready(); !ok {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	// Profiles for operators chasing a hot path (the HTTP port binds to
	// loopback by default).
	telemetry.Profiling(mux)
	srv := &http.Server{Handler: authz.OpsHandler(mux, "/healthz", "/readyz"), ReadHeaderTimeout: 5 * time.Second}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	lis = grpcopt.Listener(lis, false)
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			failed <- fmt.Errorf("HTTP server: %w", err)
		}
	}()
	return srv, nil
}

// Healthcheck is the coordinators' `healthcheck` subcommand: GET /healthz
// at --http-addr (default httpAddr), over HTTPS with the --tls-* files.
func Healthcheck(args []string, httpAddr string) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	addr := fs.String("http-addr", httpAddr, "the coordinator's HTTP address")
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
