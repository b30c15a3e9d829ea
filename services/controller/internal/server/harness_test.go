package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	controllerv1 "skein/gen/skein/controller/v1"
	controllerv1grpc "skein/gen/skein/controller/v1/controllerv1grpc"
	"skein/libs/loopback"
	"skein/libs/membership"
	"skein/libs/peerauth"
	"skein/libs/tlsconf"
	"skein/services/controller/internal/liveness"
	"skein/services/controller/internal/quorum"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// gossipTimings are FastTimings with more patience per probe: these tests
// run beside others on two cores, where a 100 ms probe timeout declares
// live members dead. Deaths are still seen in about 1.5-2.5 s.
func gossipTimings() membership.Timings {
	t := membership.FastTimings()
	t.ProbeTimeout = 300 * time.Millisecond
	t.SuspicionMult = 4
	return t
}

// controller is one in-process controller: Raft node, reconciler, gRPC
// server on a real loopback port, and (optionally) gossip.
type controller struct {
	id      int32
	node    *quorum.Node
	srv     *Server
	gs      *grpc.Server
	members *membership.Node
	reg     *prometheus.Registry
	cancel  context.CancelFunc
	done    chan struct{}
	stopped bool
}

type cluster struct {
	t       *testing.T
	dir     string
	peers   []quorum.Peer
	ctrls   []*controller
	gossip  bool
	seed    string
	session time.Duration
	mu      sync.Mutex
	sec     *secured // nil: plaintext
}

// secured is a cluster's mutual TLS: its CA, the certificates issued from
// it by name, and whether the controllers run an authorizer.
type secured struct {
	certs map[string]*tlsconf.Source
	// authorizer, when set, gives every controller one with these super
	// users.
	authorizer bool
	super      map[string]bool
	log        *slog.Logger // the guard's and authorizer's audit lines
}

// newSecuredCluster is newCluster over mutual TLS (gRPC and Raft), each
// controller's server guarded by Rules. Certificates: controller-<id>,
// storage-1, gateway-1 (the gateway), and clients alice, bob, carol and
// admin.
func newSecuredCluster(t *testing.T, n int, sec *secured) *cluster {
	t.Helper()
	ca, err := tlsconf.OpenCA(t.TempDir(), "test CA")
	if err != nil {
		t.Fatal(err)
	}
	leaves := []tlsconf.Leaf{
		{Name: "storage-1", Role: peerauth.RoleStorage, ID: "1"},
		{Name: "gateway-1", Role: peerauth.RoleGateway, ID: "1"},
		{Name: "alice", Role: "client", ID: "alice"},
		{Name: "bob", Role: "client", ID: "bob"},
		{Name: "carol", Role: "client", ID: "carol"},
		{Name: "admin", Role: "client", ID: "admin"},
	}
	for i := range n {
		leaves = append(leaves, tlsconf.Leaf{Name: fmt.Sprintf("controller-%d", i+1), Role: peerauth.RoleController, ID: fmt.Sprint(i + 1)})
	}
	sec.certs = map[string]*tlsconf.Source{}
	for _, l := range leaves {
		l.Hosts = []string{"127.0.0.1"}
		f, err := ca.Issue(l)
		if err != nil {
			t.Fatal(err)
		}
		if sec.certs[l.Name], err = tlsconf.Load(f); err != nil {
			t.Fatal(err)
		}
	}
	if sec.log == nil {
		sec.log = quiet
	}
	return newClusterWith(t, n, false, time.Minute, sec)
}

func newCluster(t *testing.T, n int, gossip bool, session time.Duration) *cluster {
	t.Helper()
	return newClusterWith(t, n, gossip, session, nil)
}

func newClusterWith(t *testing.T, n int, gossip bool, session time.Duration, sec *secured) *cluster {
	t.Helper()
	addrs := loopback.Addrs(t, 2*n)
	c := &cluster{t: t, dir: t.TempDir(), gossip: gossip, session: session, sec: sec}
	for i := range n {
		c.peers = append(c.peers, quorum.Peer{ID: int32(i + 1), RaftAddr: addrs[2*i], GRPCAddr: addrs[2*i+1]})
	}
	for i := range n {
		c.ctrls = append(c.ctrls, c.start(int32(i+1)))
	}
	t.Cleanup(c.stopAll)
	return c
}

func (c *cluster) start(id int32) *controller {
	c.t.Helper()
	p := c.peers[id-1]
	var cert *tlsconf.Source
	var raftServer, raftClient *tls.Config
	if c.sec != nil {
		cert = c.sec.certs[fmt.Sprintf("controller-%d", id)]
		raftServer, raftClient = cert.ServerConfig(false), cert.ClientConfig()
	}
	node, err := quorum.Open(quorum.Config{
		NodeID: id, Peers: c.peers, DataDir: filepath.Join(c.dir, fmt.Sprint(id)),
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond, LeaderLeaseTimeout: 250 * time.Millisecond,
		Logger: quiet, TLSServer: raftServer, TLSClient: raftClient,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	live := liveness.New(liveness.Config{
		Settings: liveness.Settings{SessionTimeout: c.session, CoordinatorGrace: 3 * time.Second,
			ConsumerOffsetsPartitions: 3, TransactionStatePartitions: 3, InternalTopicMinBrokers: 3, ClusterID: "test"},
		Tick: 50 * time.Millisecond, LeaderImbalanceCheckInterval: 500 * time.Millisecond, Logger: quiet, Registerer: reg,
	}, node)
	ctl := &controller{id: id, node: node, reg: reg, done: make(chan struct{})}
	var events <-chan membership.Event
	if c.gossip {
		var seeds []string
		c.mu.Lock()
		if c.seed != "" {
			seeds = []string{c.seed}
		}
		c.mu.Unlock()
		ctl.members, err = membership.Start(membership.Config{BindAddr: "127.0.0.1:0", Seeds: seeds, Logger: quiet, Timings: gossipTimings(),
			Meta: membership.Meta{Role: membership.RoleController, ID: id, GRPCAddr: p.GRPCAddr}})
		if err != nil {
			c.t.Fatal(err)
		}
		c.mu.Lock()
		if c.seed == "" {
			c.seed = ctl.members.Addr()
		}
		c.mu.Unlock()
		events = ctl.members.Events()
	}
	var serverOpts []grpc.ServerOption
	var dialOpts []grpc.DialOption
	if c.sec != nil {
		serverOpts = append([]grpc.ServerOption{grpc.Creds(credentials.NewTLS(cert.ServerConfig(false)))},
			peerauth.NewGuard(Rules(), c.sec.log).ServerOptions()...)
		dialOpts = []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(cert.ClientConfig()))}
	}
	ctl.srv = New(node, live, quiet, dialOpts...)
	if ctl.members != nil {
		ctl.srv.SetGossip(ctl.members)
	}
	if c.sec != nil && c.sec.authorizer {
		ctl.srv.SetAuthorizer(peerauth.NewAuthorizer(node.Image, c.sec.super, c.sec.log))
	}
	ctl.gs = grpc.NewServer(serverOpts...)
	controllerv1grpc.RegisterControllerServiceServer(ctl.gs, ctl.srv)
	lis, err := net.Listen("tcp", p.GRPCAddr)
	if err != nil {
		c.t.Fatal(err)
	}
	go ctl.gs.Serve(lis)
	ctx, cancel := context.WithCancel(context.Background())
	ctl.cancel = cancel
	go func() { defer close(ctl.done); live.Run(ctx, events) }()
	return ctl
}

// stop kills a controller: no goodbye to gossip, Raft just stops.
func (ctl *controller) stop() {
	if ctl.stopped {
		return
	}
	ctl.stopped = true
	ctl.srv.Stop()
	ctl.gs.Stop()
	ctl.cancel()
	<-ctl.done
	if ctl.members != nil {
		ctl.members.Kill()
	}
	ctl.node.Close()
}

func (c *cluster) stopAll() {
	for _, ctl := range c.ctrls {
		ctl.stop()
	}
}

func (c *cluster) leader() *controller {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, ctl := range c.ctrls {
			if !ctl.stopped && ctl.node.IsLeader() {
				return ctl
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatal("no leader")
	return nil
}

func (c *cluster) follower() *controller {
	l := c.leader()
	for _, ctl := range c.ctrls {
		if ctl != l && !ctl.stopped {
			return ctl
		}
	}
	c.t.Fatal("no follower")
	return nil
}

func dial(t *testing.T, addr string) controllerv1grpc.ControllerServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return controllerv1grpc.NewControllerServiceClient(conn)
}

func (c *cluster) client(ctl *controller) controllerv1grpc.ControllerServiceClient {
	return dial(c.t, c.peers[ctl.id-1].GRPCAddr)
}

// clientAs dials ctl over mutual TLS with the certificate named (a
// secured cluster's).
func (c *cluster) clientAs(ctl *controller, cert string) controllerv1grpc.ControllerServiceClient {
	c.t.Helper()
	src, ok := c.sec.certs[cert]
	if !ok {
		c.t.Fatalf("no certificate %q", cert)
	}
	conn, err := grpc.NewClient(c.peers[ctl.id-1].GRPCAddr, grpc.WithTransportCredentials(credentials.NewTLS(src.ClientConfig())))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { conn.Close() })
	return controllerv1grpc.NewControllerServiceClient(conn)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// broker is a fake storage node: it registers, heartbeats every interval
// over real gRPC, and (optionally) gossips as role storage.
type broker struct {
	id          int32
	epoch       int64
	incarnation string
	members     *membership.Node
	stopHB      chan struct{}
	hbDone      chan struct{}
}

func (c *cluster) startBroker(ctl controllerv1grpc.ControllerServiceClient, id int32, every time.Duration) *broker {
	c.t.Helper()
	b := &broker{id: id, incarnation: fmt.Sprintf("inc-%d-%d", id, time.Now().UnixNano()), stopHB: make(chan struct{}), hbDone: make(chan struct{})}
	resp, err := ctl.RegisterBroker(ctxT(c.t), &controllerv1.RegisterBrokerRequest{BrokerId: id, GrpcAddr: fmt.Sprintf("127.0.0.1:%d", 20000+id), IncarnationId: b.incarnation})
	if err != nil {
		c.t.Fatal(err)
	}
	b.epoch = resp.GetBrokerEpoch()
	if c.gossip {
		c.mu.Lock()
		seed := c.seed
		c.mu.Unlock()
		b.members, err = membership.Start(membership.Config{BindAddr: "127.0.0.1:0", Seeds: []string{seed}, Logger: quiet, Timings: gossipTimings(),
			Meta: membership.Meta{Role: membership.RoleStorage, ID: id, Incarnation: b.incarnation}})
		if err != nil {
			c.t.Fatal(err)
		}
	}
	go func() {
		defer close(b.hbDone)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-b.stopHB:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				ctl.BrokerHeartbeat(ctx, &controllerv1.BrokerHeartbeatRequest{BrokerId: id, BrokerEpoch: b.epoch})
				cancel()
			}
		}
	}()
	return b
}

// kill stops heartbeats and gossip as a crash would.
func (b *broker) kill() {
	select {
	case <-b.stopHB:
	default:
		close(b.stopHB)
	}
	<-b.hbDone
	if b.members != nil {
		b.members.Kill()
	}
}

// counter reads a counter of ctl's registry for one broker label (0 when absent).
func (ctl *controller) counter(t *testing.T, name string, broker int32) float64 {
	t.Helper()
	mfs, err := ctl.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "broker" && l.GetValue() == fmt.Sprint(broker) {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
