// Command skein-gateway serves Skein's public API — AdminService,
// ProducerService and ConsumerService — over gRPC (with server reflection)
// and REST/JSON, in front of the controllers and storage nodes. It keeps no
// durable state; run as many as you like behind a load balancer.
//
// Usage:
//
//	skein-gateway --controllers 127.0.0.1:9091,127.0.0.1:9092,127.0.0.1:9093
//	skein-gateway healthcheck [--http-addr 127.0.0.1:8080]
//
// Every flag has an environment twin SKEIN_<FLAG> (upper snake case), used
// when the flag is not given: SKEIN_GRPC_ADDR, SKEIN_HTTP_ADDR,
// SKEIN_CONTROLLERS, SKEIN_NODE_ID, SKEIN_MAX_REQUEST_BYTES,
// SKEIN_MAX_INFLIGHT_PRODUCE_BYTES, SKEIN_LOG_LEVEL, ...
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"skein/libs/acl"
	"skein/libs/client"
	"skein/libs/cliflag"
	"skein/libs/grpcopt"
	"skein/libs/record"
	"skein/libs/telemetry"
	"skein/libs/tlsconf"
	"skein/services/gateway/internal/authn"
	"skein/services/gateway/internal/gateway"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "healthcheck" {
		os.Exit(healthcheck(os.Args[2:]))
	}
	if err := run(os.Args[1:]); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "skein-gateway:", err)
		}
		os.Exit(cliflag.ExitCode(err))
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("skein-gateway", flag.ContinueOnError)
	grpcAddr := fs.String("grpc-addr", "127.0.0.1:9090", "gRPC listen address")
	httpAddr := fs.String("http-addr", "127.0.0.1:8080", "REST/HTTP listen address (also /healthz, /readyz, /metrics, /openapi.json)")
	controllers := fs.String("controllers", "", "comma-separated controller gRPC addresses")
	nodeID := fs.Int("node-id", 0, "this gateway's id, as the controllers see it")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	batchSize := fs.Int("batch-size", gateway.DefaultBatchSize, "batch.size: bytes per partition batch sent to a storage node")
	linger := fs.Duration("linger", gateway.DefaultLinger, "linger.ms: how long a partition batch waits to fill (negative: send at once)")
	sendWhenIdle := fs.Bool("send-when-idle", gateway.DefaultSendWhenIdle, "send a partition's batch at once when none of its batches is in flight; linger applies only while one is (false: every batch lingers, as Kafka's linger.ms)")
	compression := fs.String("compression", "none", "codec of the gateway's batches for topics whose compression.type is producer: none, gzip, snappy, lz4 or zstd")
	maxRequestBytes := fs.Int64("max-request-bytes", gateway.DefaultMaxRequestBytes, "largest REST body and gRPC message accepted; a larger REST body is answered 413 RECORD_LIST_TOO_LARGE without being decoded")
	maxInflight := fs.Int64("max-inflight-produce-bytes", gateway.DefaultMaxInflightProduceBytes, "buffer.memory: produce request bytes held at once by all callers; beyond it, 429 / RESOURCE_EXHAUSTED THROTTLING_QUOTA_EXCEEDED")
	producerIdle := fs.Duration("producer-idle-timeout", gateway.DefaultProducerIdleTimeout, "close a Produce producer (one per client principal, acks and codec) that no call has used for this long")
	memoryLimit := fs.Int64("memory-limit", 0, "the Go runtime's soft memory limit in bytes (GOMEMLIMIT, which wins when set); 0: 6 × --max-inflight-produce-bytes, so a gateway under hostile load collects its garbage before its heap doubles")
	consoleDemos := fs.Bool("console-demos", false, "let the console at /console/ kill, pause and resume the storage nodes --dev-cluster-file lists (a skein dev cluster; never in production)")
	devClusterFile := fs.String("dev-cluster-file", "", "the cluster.json of the skein dev cluster this gateway belongs to (skein dev passes it); the console's demos signal only the storage pids it lists")
	debugAddr := fs.String("debug-addr", "", "serves /debug/pprof here when set (an operations address: keep it on loopback, never the public API port)")
	authRequired := fs.Bool("auth-required", false, "refuse every public API call without a principal (a verified client certificate or a bearer token) with 401 / UNAUTHENTICATED SASL_AUTHENTICATION_FAILED")
	authTokenFile := fs.String("auth-token-file", "", "static bearer tokens, one \"token principal\" line each (e.g. \"s3cret User:alice\"); reloaded on SIGHUP and when it changes")
	authJWTKeyFile := fs.String("auth-jwt-key-file", "", "HS256 key for JSON Web Token bearer tokens (principal User:<sub>, whatever sub holds; exp required and checked, nbf checked when present; a header with crit refused); reloaded on SIGHUP and when it changes")
	authorizer := fs.Bool("authorizer", false, "authorize every public API call with the cluster's ACL bindings (skein acl, /v1/acls); a refused call is 403 / PERMISSION_DENIED TOPIC_, GROUP_, CLUSTER_ or TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
	superUsersFlag := fs.String("super-users", "", "principals allowed everything under --authorizer, separated by commas or semicolons (e.g. \"User:admin;User:ops\")")
	tlsFiles := tlsconf.AddFlags(fs)
	if err := cliflag.Parse(fs, args, os.Getenv); err != nil {
		return err
	}
	superUsers, err := acl.ParseSuperUsers(*superUsersFlag)
	if err != nil {
		return fmt.Errorf("--super-users: %w", err)
	}
	if len(superUsers) > 0 && !*authorizer {
		return errors.New("--super-users needs --authorizer")
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *batchSize <= 0 {
		return fmt.Errorf("--batch-size %d: want a positive number of bytes", *batchSize)
	}
	codec, err := record.ParseCompression(*compression)
	if err != nil {
		return fmt.Errorf("--compression: %w", err)
	}
	if *maxRequestBytes <= 0 || *maxRequestBytes > math.MaxInt32-(64<<10) {
		return fmt.Errorf("--max-request-bytes %d: want a positive number of bytes below 2 GiB", *maxRequestBytes)
	}
	if *maxInflight <= 0 {
		return fmt.Errorf("--max-inflight-produce-bytes %d: want a positive number of bytes", *maxInflight)
	}
	if *producerIdle < gateway.DeliveryTimeout {
		return fmt.Errorf("--producer-idle-timeout %v: want at least the delivery timeout, %v (a call that gave up may leave records in flight that long)", *producerIdle, gateway.DeliveryTimeout)
	}
	if *memoryLimit < 0 {
		return fmt.Errorf("--memory-limit %d: want a number of bytes, or 0 for 6 × --max-inflight-produce-bytes", *memoryLimit)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(gateway.MemoryLimit(*memoryLimit, *maxInflight))
	}
	var ctrls []string
	for _, a := range strings.Split(*controllers, ",") {
		if a = strings.TrimSpace(a); a != "" {
			ctrls = append(ctrls, a)
		}
	}
	if len(ctrls) == 0 {
		return errors.New("--controllers (or SKEIN_CONTROLLERS) is required")
	}
	log, err := telemetry.NewLogger(os.Stderr, "skein-gateway", *logLevel)
	if err != nil {
		return err
	}
	log = log.With("node_id", *nodeID) // several gateways' lines told apart
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := grpcopt.SetupTLS(ctx, *tlsFiles, log); err != nil {
		return err
	}
	verifier, err := authVerifier(ctx, *authTokenFile, *authJWTKeyFile, *authRequired, tlsFiles.Enabled(), log)
	if err != nil {
		return err
	}
	shutdownTracing, err := telemetry.Tracing(ctx, telemetry.TracingConfig{ServiceName: "skein-gateway", InstanceID: strconv.Itoa(*nodeID), Logger: log})
	if err != nil {
		return err
	}
	defer shutdownTracing(context.Background())
	g, err := gateway.New(gateway.Config{
		GRPCAddr: *grpcAddr, HTTPAddr: *httpAddr, Controllers: ctrls, NodeID: int32(*nodeID), Logger: log,
		ProducerOptions: []client.ProducerOption{client.WithBatchSize(*batchSize), client.WithLinger(*linger), client.WithSendWhenIdle(*sendWhenIdle), client.WithCompression(codec)},
		MaxRequestBytes: *maxRequestBytes, MaxInflightProduceBytes: *maxInflight, ProducerIdleTimeout: *producerIdle,
		ConsoleDemos: *consoleDemos, DevClusterFile: *devClusterFile,
		Auth: verifier, AuthRequired: *authRequired,
		Authorizer: *authorizer, SuperUsers: superUsers,
	})
	if err != nil {
		return err
	}
	if *debugAddr != "" {
		lis, err := net.Listen("tcp", *debugAddr)
		if err != nil {
			return fmt.Errorf("--debug-addr: %w", err)
		}
		mux := http.NewServeMux()
		telemetry.Profiling(mux)
		dbg := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = dbg.Serve(lis) }()
		defer dbg.Close()
		log.Info("profiles on /debug/pprof", "addr", lis.Addr().String())
	}
	return g.Serve(ctx)
}

// authVerifier loads the token sources and reloads them on SIGHUP and on
// change until ctx ends; nil when none is configured. A required principal
// needs some way to present one.
func authVerifier(ctx context.Context, tokenFile, jwtKeyFile string, required, tls bool, log *slog.Logger) (*authn.Verifier, error) {
	if tokenFile == "" && jwtKeyFile == "" {
		if required && !tls {
			return nil, errors.New("--auth-required needs a way to authenticate: --auth-token-file, --auth-jwt-key-file or TLS client certificates (--tls-cert, --tls-key, --tls-ca)")
		}
		if required {
			log.Info("authentication required: client certificates only")
		}
		return nil, nil
	}
	v, err := authn.NewVerifier(authn.Config{TokenFile: tokenFile, JWTKeyFile: jwtKeyFile})
	if err != nil {
		return nil, err
	}
	log.Info("bearer tokens accepted", "token_file", tokenFile, "jwt_key_file", jwtKeyFile, "required", required)
	go v.Watch(ctx, grpcopt.ReloadEvery, func(err error) {
		if err != nil {
			log.Error("auth file reload failed; keeping the previous tokens", "err", err)
			return
		}
		log.Info("auth files reloaded")
	})
	return v, nil
}

// healthcheck GETs /healthz, for container health checks in images with no
// shell: exit 0 when it answers 200.
func healthcheck(args []string) int {
	fs := flag.NewFlagSet("skein-gateway healthcheck", flag.ContinueOnError)
	httpAddr := fs.String("http-addr", "127.0.0.1:8080", "the gateway's HTTP address")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	files := tlsconf.AddFlags(fs)
	if err := cliflag.Parse(fs, args, os.Getenv); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "healthcheck:", err)
		}
		return cliflag.ExitCode(err)
	}
	return cliflag.HealthcheckFiles(*httpAddr, *timeout, *files, os.Stderr)
}
