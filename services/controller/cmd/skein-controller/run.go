package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"

	controllerv1grpc "skein/gen/skein/controller/v1/controllerv1grpc"
	"skein/libs/cliflag"
	"skein/libs/grpcopt"
	"skein/libs/membership"
	"skein/libs/peerauth"
	"skein/libs/telemetry"
	"skein/libs/tlsconf"
	"skein/services/controller/internal/fsm"
	"skein/services/controller/internal/liveness"
	"skein/services/controller/internal/quorum"
	"skein/services/controller/internal/server"
)

type config struct {
	nodeID                   int
	grpcAddr, httpAddr       string
	raftAddr                 string
	gossipAddr, gossipAdv    string
	gossipSeeds              string
	peers                    string
	dataDir                  string
	clusterID                string
	sessionTimeout           time.Duration
	imbalanceInterval        time.Duration
	offsetsPartitions        int
	txnPartitions            int
	internalMinBrokers       int
	coordinatorGrace         time.Duration
	raftHeartbeat, raftElect time.Duration
	raftLease                time.Duration
	raftCommit               time.Duration
	snapshotThreshold        int
	snapshotInterval         time.Duration
	gossipTimings            membership.Timings
	watchBuffer              int
	shutdownTimeout          time.Duration
	logLevel                 string
	tls                      tlsconf.Files
	gossipKeyFile            string
	auth                     *peerauth.Flags
}

func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	f := newFlags("skein-controller", getenv, stderr)
	var c config
	nodeID := f.integer("node-id", "SKEIN_NODE_ID", 1, "this controller's id; must appear in --peers")
	grpcAddr := f.str("grpc-addr", "SKEIN_GRPC_ADDR", "127.0.0.1:9101", "gRPC listen address (ControllerService)")
	httpAddr := f.str("http-addr", "SKEIN_HTTP_ADDR", "127.0.0.1:9111", "HTTP listen address: /metrics, /healthz, /readyz")
	raftAddr := f.str("raft-addr", "SKEIN_RAFT_ADDR", "127.0.0.1:9121", "Raft transport listen address")
	gossipAddr := f.str("gossip-addr", "SKEIN_GOSSIP_ADDR", "127.0.0.1:9131", "gossip (memberlist) bind address; empty disables gossip")
	gossipAdv := f.str("gossip-advertise-addr", "SKEIN_GOSSIP_ADVERTISE_ADDR", "", "gossip address others reach this controller at (default: --gossip-addr)")
	gossipSeeds := f.str("gossip-seeds", "SKEIN_GOSSIP_SEEDS", "", "comma-separated gossip addresses to join")
	peers := f.str("peers", "SKEIN_PEERS", "", `the Raft voters, "id=raftaddr=grpcaddr,..." (default: this controller alone, at --raft-addr and --grpc-addr)`)
	dataDir := f.str("data-dir", "SKEIN_DATA_DIR", "", "Raft log, stable store and snapshots (default data/controller-<id>)")
	clusterID := f.str("cluster-id", "SKEIN_CLUSTER_ID", "", "cluster id set at bootstrap (default: a random UUID)")
	session := f.dur("broker-session-timeout", "SKEIN_BROKER_SESSION_TIMEOUT", 2*time.Second, "a broker without a heartbeat for this long is fenced (storage nodes heartbeat every 500 ms by default: --heartbeat-interval)")
	imbalance := f.dur("leader-imbalance-check-interval", "SKEIN_LEADER_IMBALANCE_CHECK_INTERVAL", 10*time.Second, "how often leadership moves back to preferred replicas")
	offsets := f.integer("consumer-offsets-partitions", "SKEIN_CONSUMER_OFFSETS_PARTITIONS", 12, "partitions of __consumer_offsets")
	txn := f.integer("transaction-state-partitions", "SKEIN_TRANSACTION_STATE_PARTITIONS", 12, "partitions of __transaction_state")
	minBrokers := f.integer("internal-topics-min-brokers", "SKEIN_INTERNAL_TOPICS_MIN_BROKERS", 3, "live brokers needed before the internal topics are created (RF = min(3, live))")
	grace := f.dur("coordinator-grace", "SKEIN_COORDINATOR_GRACE", 5*time.Second, "after becoming leader, how long a coordinator may be absent from gossip before it is marked dead")
	hb := f.dur("raft-heartbeat-timeout", "SKEIN_RAFT_HEARTBEAT_TIMEOUT", time.Second, "a follower that hears nothing from the Raft leader for this long starts an election; the leader sends a heartbeat to each follower every tenth of it")
	el := f.dur("raft-election-timeout", "SKEIN_RAFT_ELECTION_TIMEOUT", time.Second, "Raft election timeout")
	lease := f.dur("raft-leader-lease-timeout", "SKEIN_RAFT_LEADER_LEASE_TIMEOUT", 500*time.Millisecond, "a Raft leader that hears from no quorum for this long steps down")
	commit := f.dur("raft-commit-timeout", "SKEIN_RAFT_COMMIT_TIMEOUT", time.Second, "longest the Raft leader waits, with nothing new to send, before telling followers the commit index (a proposal's commit is sent at once)")
	snapN := f.integer("raft-snapshot-threshold", "SKEIN_RAFT_SNAPSHOT_THRESHOLD", 8192, "log entries between snapshots")
	snapEvery := f.dur("raft-snapshot-interval", "SKEIN_RAFT_SNAPSHOT_INTERVAL", 2*time.Minute, "how often the snapshot threshold is checked")
	timings := membership.TimingFlags(f.fs)
	for _, name := range []string{"gossip-probe-interval", "gossip-probe-timeout", "gossip-suspicion-mult"} {
		f.twin(name, cliflag.EnvName(name))
	}
	watchBuf := f.integer("watch-buffer", "SKEIN_WATCH_BUFFER", 1024, "deltas queued per metadata watcher before it is sent a new image")
	shutdown := f.dur("shutdown-timeout", "SKEIN_SHUTDOWN_TIMEOUT", 10*time.Second, "how long a graceful stop may take")
	logLevel := f.str("log-level", "SKEIN_LOG_LEVEL", "info", "debug, info, warn or error")
	tlsFiles := f.tls()
	gossipKey := f.str("gossip-key-file", "SKEIN_GOSSIP_KEY_FILE", "", "file holding the cluster's gossip key (base64 of 16, 24 or 32 bytes): gossip is encrypted and members without it are kept out")
	auth := peerauth.AddFlags(f.fs, "admin changes (topics, partitions, configs, elections, ACLs) by clients")
	f.twin("authorizer", "SKEIN_AUTHORIZER")
	f.twin("super-users", "SKEIN_SUPER_USERS")
	if err := f.parse(args); err != nil {
		return c, err
	}
	c = config{
		nodeID: *nodeID, grpcAddr: *grpcAddr, httpAddr: *httpAddr, raftAddr: *raftAddr,
		gossipAddr: *gossipAddr, gossipAdv: *gossipAdv, gossipSeeds: *gossipSeeds, peers: *peers,
		dataDir: *dataDir, clusterID: *clusterID, sessionTimeout: *session, imbalanceInterval: *imbalance,
		offsetsPartitions: *offsets, txnPartitions: *txn, internalMinBrokers: *minBrokers, coordinatorGrace: *grace,
		raftHeartbeat: *hb, raftElect: *el, raftLease: *lease, raftCommit: *commit, snapshotThreshold: *snapN, snapshotInterval: *snapEvery,
		watchBuffer:     *watchBuf,
		shutdownTimeout: *shutdown, logLevel: *logLevel, tls: tlsFiles(), gossipKeyFile: *gossipKey, auth: auth,
	}
	if c.peers == "" {
		c.peers = fmt.Sprintf("%d=%s=%s", c.nodeID, c.raftAddr, c.grpcAddr)
	}
	if c.dataDir == "" {
		c.dataDir = filepath.Join("data", "controller-"+strconv.Itoa(c.nodeID))
	}
	if c.clusterID == "" {
		c.clusterID = randomUUID()
	}
	gossipTimings, err := timings()
	if err != nil {
		return c, err
	}
	c.gossipTimings = gossipTimings
	switch {
	case c.nodeID < 0 || c.nodeID > 1<<31-1:
		return c, fmt.Errorf("--node-id %d is out of range", c.nodeID)
	case c.sessionTimeout <= 0 || c.imbalanceInterval <= 0:
		return c, errors.New("--broker-session-timeout and --leader-imbalance-check-interval must be positive")
	case c.offsetsPartitions < 1 || c.txnPartitions < 1:
		return c, errors.New("internal topics need at least one partition")
	}
	// The authorization flags are checked here, before anything starts; the
	// authorizer itself is made once the metadata it reads exists.
	if _, err := c.auth.Authorizer(nil, c.tls.Enabled(), slog.New(slog.DiscardHandler)); err != nil {
		return c, err
	}
	return c, nil
}

func randomUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// run serves until ctx ends, then stops gracefully. ready, if not nil, is
// called once everything listens.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, ready func()) error {
	c, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	logger, err := telemetry.NewLogger(stderr, "skein-controller", c.logLevel)
	if err != nil {
		return err
	}
	logger = logger.With("node", c.nodeID)
	if err := grpcopt.SetupTLS(ctx, c.tls, logger); err != nil {
		return err
	}
	stopTracing, err := telemetry.Tracing(ctx, telemetry.TracingConfig{ServiceName: "skein-controller", InstanceID: strconv.Itoa(c.nodeID), Logger: logger})
	if err != nil {
		return err
	}
	defer stopTracing(context.Background())

	peers, err := quorum.ParsePeers(c.peers)
	if err != nil {
		return fmt.Errorf("--peers: %w", err)
	}
	var self quorum.Peer
	for _, p := range peers {
		if p.ID == int32(c.nodeID) {
			self = p
		}
	}
	if self.RaftAddr == "" {
		return fmt.Errorf("--node-id %d is not in --peers %s", c.nodeID, c.peers)
	}

	grpcLis, err := net.Listen("tcp", c.grpcAddr)
	if err != nil {
		return err
	}
	defer grpcLis.Close()
	httpLis, err := net.Listen("tcp", c.httpAddr)
	if err != nil {
		return err
	}
	defer httpLis.Close()
	httpLis = grpcopt.Listener(httpLis, false)
	var raftServerTLS, raftClientTLS *tls.Config
	if src := grpcopt.TLS(); src != nil {
		raftServerTLS, raftClientTLS = src.ServerConfig(false), src.ClientConfig()
	}

	var gossip atomic.Pointer[membership.Node] // set once gossip starts
	node, err := quorum.Open(quorum.Config{
		NodeID: int32(c.nodeID), RaftBindAddr: c.raftAddr, DataDir: c.dataDir, Peers: peers,
		AnnouncedRules:   func() map[int32]uint32 { return announcedRules(gossip.Load(), peers) },
		HeartbeatTimeout: c.raftHeartbeat, ElectionTimeout: c.raftElect, LeaderLeaseTimeout: c.raftLease, CommitTimeout: c.raftCommit,
		SnapshotThreshold: uint64(c.snapshotThreshold), SnapshotInterval: c.snapshotInterval,
		WatchBuffer: c.watchBuffer, Logger: logger, TLSServer: raftServerTLS, TLSClient: raftClientTLS,
	})
	if err != nil {
		return err
	}
	nodeOpen := true
	defer func() {
		if nodeOpen {
			node.Close()
		}
	}()

	reg := telemetry.NewRegistry()
	server.RegisterMetrics(reg, node)
	live := liveness.New(liveness.Config{
		Settings: liveness.Settings{
			SessionTimeout: c.sessionTimeout, CoordinatorGrace: c.coordinatorGrace,
			ConsumerOffsetsPartitions: int32(c.offsetsPartitions), TransactionStatePartitions: int32(c.txnPartitions),
			InternalTopicMinBrokers: c.internalMinBrokers, ClusterID: c.clusterID,
		},
		LeaderImbalanceCheckInterval: c.imbalanceInterval,
		Logger:                       logger,
		Registerer:                   reg,
	}, node)

	var members *membership.Node
	var events <-chan membership.Event
	if c.gossipAddr != "" {
		t := c.gossipTimings
		var key []byte
		if c.gossipKeyFile != "" {
			if key, err = membership.ReadKeyFile(c.gossipKeyFile); err != nil {
				return err
			}
		}
		members, err = membership.Start(membership.Config{
			BindAddr: c.gossipAddr, AdvertiseAddr: c.gossipAdv, Seeds: cliflag.SplitList(c.gossipSeeds), Timings: t, Logger: logger, SecretKey: key,
			// Every voter should be in gossip: fewer alive makes this
			// controller join its seeds again (a healed partition).
			ExpectedMembers: func() int { return len(peers) },
			Meta: membership.Meta{Role: membership.RoleController, ID: int32(c.nodeID), GRPCAddr: self.GRPCAddr, HTTPAddr: c.httpAddr, RaftAddr: self.RaftAddr,
				PlacementRule: fsm.MaxPlacementRule},
		})
		if err != nil {
			return err
		}
		gossip.Store(members)
		events = members.Events()
	}

	// The ACLs are the controller's own image; a forwarded call is decided
	// by the leader, for the client the follower names.
	authz, err := c.auth.Authorizer(node.Image, grpcopt.TLS() != nil, logger.With("component", "authz"))
	if err != nil {
		return err
	}
	srv := server.New(node, live, logger, grpcopt.Dial()...)
	srv.SetAuthorizer(authz)
	if members != nil {
		srv.SetGossip(members)
	}
	if authz != nil {
		logger.Info("admin changes by clients need ACLs", "super_users", *c.auth.SuperUsers)
	}
	guard := peerauth.NewGuard(server.Rules(), logger.With("component", "authz"))
	gs := grpc.NewServer(append(grpcopt.Server(telemetry.NewGRPCMetrics(reg)), guard.ServerOptions()...)...)
	controllerv1grpc.RegisterControllerServiceServer(gs, srv)
	reflection.Register(gs)
	var serving atomic.Bool
	hs := &http.Server{Handler: authz.OpsHandler(server.HTTPHandler(reg, srv, &serving), "/healthz", "/readyz"), ReadHeaderTimeout: 5 * time.Second}

	loopCtx, stopLoop := context.WithCancel(context.Background())
	loopDone := make(chan struct{})
	go func() { defer close(loopDone); live.Run(loopCtx, events) }()
	grpcDone := make(chan error, 1)
	go func() { grpcDone <- gs.Serve(grpcLis) }()
	httpDone := make(chan error, 1)
	go func() {
		if err := hs.Serve(httpLis); !errors.Is(err, http.ErrServerClosed) {
			httpDone <- fmt.Errorf("HTTP server: %w", err)
		}
	}()
	serving.Store(true)
	logger.Info("controller serving", "grpc", grpcLis.Addr().String(), "http", httpLis.Addr().String(), "raft", self.RaftAddr,
		"peers", quorum.FormatPeers(peers), "data_dir", c.dataDir)
	if ready != nil {
		ready()
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-grpcDone:
	case serveErr = <-httpDone:
	}
	logger.Info("controller stopping")
	serving.Store(false)

	// gRPC: end watch streams, let in-flight calls finish, then force.
	srv.Stop()
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(c.shutdownTimeout / 2):
		gs.Stop()
	}
	stopLoop()
	<-loopDone
	if members != nil {
		if err := members.Close(2 * time.Second); err != nil {
			logger.Info("leaving gossip: the leave may not have reached the other members (none left to tell, when the whole cluster stops); they find this one gone by failure detection", "err", err)
		}
	}
	if node.IsLeader() && len(peers) > 1 {
		if err := node.LeadershipTransfer(); err != nil {
			logger.Warn("handing leadership over", "err", err)
		}
	}
	nodeOpen = false
	closeErr := node.Close()
	shCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = hs.Shutdown(shCtx)
	logger.Info("controller stopped")
	return errors.Join(serveErr, closeErr)
}

// announcedRules answers the placement rules the controllers of peers
// announced in gossip, as this one last saw each (down ones included: a
// controller restarted with the same build is not of an older one). A peer
// gossip never saw, or whose build announces none, is left out.
func announcedRules(g *membership.Node, peers []quorum.Peer) map[int32]uint32 {
	if g == nil {
		return nil
	}
	out := map[int32]uint32{}
	for _, p := range peers {
		if m, ok := g.Lookup(membership.RoleController, p.ID); ok && m.Meta.PlacementRule > 0 {
			out[p.ID] = m.Meta.PlacementRule
		}
	}
	return out
}
