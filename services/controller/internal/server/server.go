package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	controllerv1 "skein/gen/skein/controller/v1"
	controllerv1grpc "skein/gen/skein/controller/v1/controllerv1grpc"
	"skein/libs/acl"
	"skein/libs/errs"
	"skein/libs/membership"
	md "skein/libs/metadata"
	"skein/libs/peerauth"
	"skein/libs/rpcerr"
	"skein/libs/topicconfig"
	"skein/services/controller/internal/liveness"
	"skein/services/controller/internal/quorum"
)

// forwardedKey marks a call a follower forwarded, so it is never forwarded twice.
const forwardedKey = "x-skein-forwarded-by"

// Server implements ControllerService.
type Server struct {
	controllerv1grpc.UnimplementedControllerServiceServer

	node     *quorum.Node
	live     *liveness.Loop
	log      *slog.Logger
	dialOpts []grpc.DialOption
	// auth decides admin changes by callers ACLs apply to (nil: off).
	auth *peerauth.Authorizer
	// gossip tells which controllers are reachable (nil: run without
	// gossip, and DescribeCluster leaves their state empty).
	gossip MemberStates
	// leaderWait bounds how long a call waits for a leader to be known;
	// catchUpWait how long a watcher waits for this controller to catch up.
	leaderWait, catchUpWait time.Duration

	mu    sync.Mutex // guards conns
	conns map[string]*grpc.ClientConn

	done     chan struct{} // closed by Stop: ends watch streams
	stopOnce sync.Once

	// ready is set once Ready has found this controller caught up;
	// readyTarget is the leader's version a follower must reach first
	// (readyAsked: it has been asked).
	readyMu     sync.Mutex
	ready       bool
	readyAsked  bool
	readyTarget uint64
}

// New returns the service. dialOpts are added to the forwarding connections
// (grpcopt.Dial, say); they are plaintext unless dialOpts give transport
// credentials. On a secured cluster they must present this controller's
// certificate: the leader believes the client a forwarded call names from
// a controller only.
func New(node *quorum.Node, live *liveness.Loop, logger *slog.Logger, dialOpts ...grpc.DialOption) *Server {
	if logger == nil {
		logger = slog.Default()
	}
	return &Server{
		node: node, live: live, log: logger.With("component", "grpc"),
		dialOpts:   append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, dialOpts...),
		leaderWait: 3 * time.Second, catchUpWait: 5 * time.Second,
		conns: map[string]*grpc.ClientConn{},
		done:  make(chan struct{}),
	}
}

// Stop ends the watch streams (so a graceful gRPC stop can finish) and
// closes the forwarding connections.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		close(s.done)
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.conns {
			c.Close()
		}
		clear(s.conns)
	})
}

func (s *Server) client(addr string) (controllerv1grpc.ControllerServiceClient, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.conns[addr]; ok {
		return controllerv1grpc.NewControllerServiceClient(c), nil
	}
	c, err := grpc.NewClient(addr, s.dialOpts...)
	if err != nil {
		return nil, err
	}
	s.conns[addr] = c
	return controllerv1grpc.NewControllerServiceClient(c), nil
}

func wasForwarded(ctx context.Context) bool {
	m, _ := metadata.FromIncomingContext(ctx)
	return len(m.Get(forwardedKey)) > 0
}

// waitLeader polls until a leader is known or the wait ends.
func (s *Server) waitLeader(ctx context.Context) (quorum.Peer, bool) {
	deadline := time.Now().Add(s.leaderWait)
	for {
		if p, ok := s.node.Leader(); ok {
			return p, true
		}
		if time.Now().After(deadline) {
			return quorum.Peer{}, false
		}
		select {
		case <-ctx.Done():
			return quorum.Peer{}, false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

type remoteCall[Req, Resp any] func(controllerv1grpc.ControllerServiceClient, context.Context, Req, ...grpc.CallOption) (Resp, error)

// onLeader runs local on the leader, or forwards the call to it.
func onLeader[Req, Resp any](s *Server, ctx context.Context, req Req, remote remoteCall[Req, Resp], local func(context.Context) (Resp, error)) (Resp, error) {
	var zero Resp
	// Leadership moving (an election, a forward to a leader that just died)
	// is retried for up to leaderWait.
	budget := time.Now().Add(s.leaderWait)
	for {
		retry := func() bool {
			if time.Now().After(budget) || ctx.Err() != nil {
				return false
			}
			select {
			case <-ctx.Done():
				return false
			case <-time.After(50 * time.Millisecond):
				return true
			}
		}
		if s.node.IsLeader() {
			resp, err := local(ctx)
			if errs.Of(err) == errs.NotController && retry() {
				continue
			}
			return resp, rpcerr.ToGRPC(err)
		}
		if wasForwarded(ctx) {
			return zero, rpcerr.ToGRPC(errs.Errorf(errs.NotController, "controller %d is not the leader", s.node.ID()))
		}
		leader, ok := s.waitLeader(ctx)
		if !ok {
			return zero, rpcerr.ToGRPC(errs.Errorf(errs.NotController, "no controller leader is known"))
		}
		if leader.ID == s.node.ID() {
			continue // elected meanwhile
		}
		c, err := s.client(leader.GRPCAddr)
		if err != nil {
			return zero, rpcerr.ToGRPC(errs.Errorf(errs.NetworkException, "dialing leader %d: %v", leader.ID, err))
		}
		resp, err := remote(c, s.forwardContext(ctx), req)
		if err == nil {
			// Named only once the leader answered; outside a gRPC call (a
			// test calling the method) there is no header to set.
			_ = grpc.SetHeader(ctx, metadata.Pairs(md.ControllerLeaderHeader, leader.GRPCAddr))
		}
		if err != nil && errs.Of(rpcerr.FromStatus(err)) == errs.NotController && retry() {
			continue
		}
		if err != nil && status.Code(err) == codes.Unavailable /* the leader went away */ && retry() {
			continue
		}
		return resp, err
	}
}

// propose commits cmd and answers the reply as T.
func propose[T proto.Message](s *Server, ctx context.Context, cmd *controllerv1.Command) (T, error) {
	var zero T
	res, err := s.node.Propose(ctx, cmd)
	if err != nil {
		return zero, err
	}
	r, ok := res.Reply.(T)
	if !ok {
		return zero, errs.Errorf(errs.UnknownServerError, "command answered %T", res.Reply)
	}
	return r, nil
}

func (s *Server) RegisterBroker(ctx context.Context, req *controllerv1.RegisterBrokerRequest) (*controllerv1.RegisterBrokerResponse, error) {
	return onLeader(s, ctx, req, controllerv1grpc.ControllerServiceClient.RegisterBroker, func(ctx context.Context) (*controllerv1.RegisterBrokerResponse, error) {
		id := req.GetBrokerId()
		if s.live.HeldDown(id, req.GetIncarnationId()) {
			// Accepting would unfence it, and the liveness loop would fence
			// it again within a tick: a Raft write and a metadata delta to
			// every watcher twice a second for as long as gossip cannot
			// reach the node. It registers once gossip sees it alive.
			return nil, errs.Errorf(errs.BrokerNotAvailable,
				"broker %d (incarnation %s) is held dead by gossip: the controllers cannot reach its gossip address; it may register once they can (retry with backoff)",
				id, req.GetIncarnationId())
		}
		var wasFenced bool
		var current *controllerv1.BrokerRecord
		var cluster string
		s.node.Read(func(img *md.Image) {
			cluster = img.ClusterID()
			if b, ok := img.Broker(md.BrokerID(id)); ok {
				wasFenced, current = b.GetFenced(), b
			}
		})
		if theirs := req.GetClusterId(); theirs != "" && cluster != "" && theirs != cluster {
			return nil, errs.Errorf(errs.InconsistentClusterID,
				"broker %d's partition directories belong to cluster %s, not to this cluster (%s): it may not join (start it on an empty data directory to give it to this cluster)",
				id, theirs, cluster)
		}
		if err := s.duplicate(current, req); err != nil {
			return nil, err
		}
		resp, err := propose[*controllerv1.RegisterBrokerResponse](s, ctx, &controllerv1.Command{Command: &controllerv1.Command_RegisterBroker{RegisterBroker: req}})
		if err == nil {
			if wasFenced {
				s.live.Unfenced(id)
			}
			s.live.Heartbeat(req.GetBrokerId(), resp.GetBrokerEpoch())
			s.log.InfoContext(ctx, "broker registered", "broker", req.GetBrokerId(), "epoch", resp.GetBrokerEpoch(), "addr", req.GetGrpcAddr())
		}
		return resp, err
	})
}

// duplicate refuses a registration that is another process with the id of
// a live broker, as Kafka refuses DUPLICATE_BROKER_REGISTRATION: a new
// incarnation on another data directory while the current one's session
// runs unfenced. Accepted, it would fence that broker, which registers
// again and fences this one, twice a second each for as long as both run,
// with every partition of theirs out of its ISR. A restarted process
// comes back on its data directory (a lock keeps two processes off one)
// and fences its old incarnation at once; a node on a new disk registers
// once the old session has run out.
func (s *Server) duplicate(current *controllerv1.BrokerRecord, req *controllerv1.RegisterBrokerRequest) error {
	if current == nil || current.GetFenced() || current.GetIncarnationId() == req.GetIncarnationId() ||
		current.GetLogDirId() == "" || req.GetLogDirId() == "" || current.GetLogDirId() == req.GetLogDirId() {
		return nil
	}
	live, silent := s.live.SessionLive(req.GetBrokerId(), current.GetBrokerEpoch())
	if !live {
		return nil
	}
	return errs.Errorf(errs.DuplicateBrokerRegistration,
		"broker %d is registered by a live process (incarnation %s, data directory %s, heard from %v ago) and this one (incarnation %s) has data directory %s: two processes with one node id? It may register once that session runs out (--broker-session-timeout without a heartbeat)",
		req.GetBrokerId(), current.GetIncarnationId(), current.GetLogDirId(), silent.Round(time.Millisecond), req.GetIncarnationId(), req.GetLogDirId())
}

func (s *Server) BrokerHeartbeat(ctx context.Context, req *controllerv1.BrokerHeartbeatRequest) (*controllerv1.BrokerHeartbeatResponse, error) {
	return onLeader(s, ctx, req, controllerv1grpc.ControllerServiceClient.BrokerHeartbeat, func(ctx context.Context) (*controllerv1.BrokerHeartbeatResponse, error) {
		id, epoch := req.GetBrokerId(), req.GetBrokerEpoch()
		var b *controllerv1.BrokerRecord
		s.node.Read(func(img *md.Image) { b, _ = img.Broker(md.BrokerID(id)) })
		switch {
		case b == nil:
			return nil, errs.Errorf(errs.BrokerIDNotRegistered, "broker %d is not registered", id)
		case b.GetBrokerEpoch() != epoch:
			return nil, errs.Errorf(errs.StaleBrokerEpoch, "broker %d epoch %d is not the current %d", id, epoch, b.GetBrokerEpoch())
		}
		if err := ctx.Err(); err != nil {
			return nil, err // the broker gave up on this heartbeat: it must not extend the session
		}
		s.live.Heartbeat(id, epoch)
		s.live.UnreachableLeaders(id, epoch, req.GetUnreachableLeaders())
		s.live.LogDirFailed(id, req.GetLogDirFailed())
		if req.GetLogDirFailed() {
			// The liveness loop fences it at its next tick; until its
			// directory works again it stays fenced.
			if !b.GetFenced() {
				s.log.WarnContext(ctx, "broker reports its log directory failed", "broker", id, "epoch", epoch)
			}
			return &controllerv1.BrokerHeartbeatResponse{Fenced: b.GetFenced()}, nil
		}
		if req.GetWantShutdown() {
			s.live.ShuttingDown(id, epoch)
			r, err := propose[*controllerv1.ControlledShutdownResponse](s, ctx, &controllerv1.Command{Command: &controllerv1.Command_ControlledShutdown{
				ControlledShutdown: &controllerv1.ControlledShutdownRequest{BrokerId: id, BrokerEpoch: epoch}}})
			if err != nil {
				return nil, err
			}
			done := r.GetRemainingLeaderships() == 0
			return &controllerv1.BrokerHeartbeatResponse{Fenced: done || b.GetFenced(), ShouldShutdown: done}, nil
		}
		// A broker in a controlled shutdown stays fenced, also when this
		// controller took over after its shutdown began (the liveness
		// tracker's record of it is this controller's alone).
		if b.GetFenced() && !b.GetInControlledShutdown() && s.live.MayUnfence(id, epoch, b.GetIncarnationId()) {
			if _, err := s.node.Propose(ctx, &controllerv1.Command{Command: &controllerv1.Command_UnfenceBroker{
				UnfenceBroker: &controllerv1.UnfenceBrokerCommand{BrokerId: id, BrokerEpoch: epoch}}}); err != nil {
				return nil, err
			}
			s.live.Unfenced(id)
			s.log.InfoContext(ctx, "broker unfenced by its heartbeat", "broker", id, "epoch", epoch)
			return &controllerv1.BrokerHeartbeatResponse{}, nil
		}
		return &controllerv1.BrokerHeartbeatResponse{Fenced: b.GetFenced()}, nil
	})
}

func (s *Server) ControlledShutdown(ctx context.Context, req *controllerv1.ControlledShutdownRequest) (*controllerv1.ControlledShutdownResponse, error) {
	return onLeader(s, ctx, req, controllerv1grpc.ControllerServiceClient.ControlledShutdown, func(ctx context.Context) (*controllerv1.ControlledShutdownResponse, error) {
		resp, err := propose[*controllerv1.ControlledShutdownResponse](s, ctx, &controllerv1.Command{Command: &controllerv1.Command_ControlledShutdown{ControlledShutdown: req}})
		if err == nil {
			s.live.ShuttingDown(req.GetBrokerId(), req.GetBrokerEpoch())
		}
		return resp, err
	})
}

// refusedTopic is a topic's answer to a refused request.
func refusedTopic(name string, err error) *controllerv1.TopicResult {
	return &controllerv1.TopicResult{Name: name, ErrorCode: int32(errs.CodeOf(err)), ErrorMessage: errs.Message(err)}
}

// proposeAllowed runs a per-topic request of which some items were
// refused (refused[i], for the topic names[i]): the command of the allowed
// items, when there are any, then every item's result in the request's
// order — a refused item's being its refusal.
func proposeAllowed[T proto.Message, Item any](s *Server, ctx context.Context, refused []error, names []string, items []Item,
	command func(allowed []Item) *controllerv1.Command, results func(T) []*controllerv1.TopicResult) ([]*controllerv1.TopicResult, error) {
	var got []*controllerv1.TopicResult
	if allowed := allowedOnly(items, refused); len(allowed) > 0 {
		resp, err := propose[T](s, ctx, command(allowed))
		if err != nil {
			return nil, err
		}
		got = results(resp)
	}
	return merged(refused, got, func(i int, err error) *controllerv1.TopicResult { return refusedTopic(names[i], err) })
}

// CreateTopics creates topics; under an authorizer each needs CREATE on
// the topic or on the cluster, and a refused one is answered
// TOPIC_AUTHORIZATION_FAILED among the others' results.
func (s *Server) CreateTopics(ctx context.Context, req *controllerv1.CreateTopicsRequest) (*controllerv1.CreateTopicsResponse, error) {
	return onLeader(s, ctx, req, controllerv1grpc.ControllerServiceClient.CreateTopics, func(ctx context.Context) (*controllerv1.CreateTopicsResponse, error) {
		req = normalizedTopics(req)
		names := make([]string, len(req.GetTopics()))
		for i, t := range req.GetTopics() {
			names[i] = t.GetName()
		}
		refused := s.topicRefusals(ctx, controllerv1grpc.ControllerService_CreateTopics_FullMethodName, names, acl.Create, acl.Create)
		if refused == nil {
			return propose[*controllerv1.CreateTopicsResponse](s, ctx, &controllerv1.Command{Command: &controllerv1.Command_CreateTopics{CreateTopics: req}})
		}
		results, err := proposeAllowed(s, ctx, refused, names, req.GetTopics(), func(allowed []*controllerv1.CreatableTopic) *controllerv1.Command {
			sub := proto.CloneOf(req)
			sub.Topics = allowed
			return &controllerv1.Command{Command: &controllerv1.Command_CreateTopics{CreateTopics: sub}}
		}, (*controllerv1.CreateTopicsResponse).GetTopics)
		return &controllerv1.CreateTopicsResponse{Topics: results}, err
	})
}

// DeleteTopics deletes topics; under an authorizer each needs DELETE on the
// topic.
func (s *Server) DeleteTopics(ctx context.Context, req *controllerv1.DeleteTopicsRequest) (*controllerv1.DeleteTopicsResponse, error) {
	return onLeader(s, ctx, req, controllerv1grpc.ControllerServiceClient.DeleteTopics, func(ctx context.Context) (*controllerv1.DeleteTopicsResponse, error) {
		refused := s.topicRefusals(ctx, controllerv1grpc.ControllerService_DeleteTopics_FullMethodName, req.GetNames(), acl.Delete, 0)
		if refused == nil {
			return propose[*controllerv1.DeleteTopicsResponse](s, ctx, &controllerv1.Command{Command: &controllerv1.Command_DeleteTopics{DeleteTopics: req}})
		}
		results, err := proposeAllowed(s, ctx, refused, req.GetNames(), req.GetNames(), func(allowed []string) *controllerv1.Command {
			sub := proto.CloneOf(req)
			sub.Names = allowed
			return &controllerv1.Command{Command: &controllerv1.Command_DeleteTopics{DeleteTopics: sub}}
		}, (*controllerv1.DeleteTopicsResponse).GetTopics)
		return &controllerv1.DeleteTopicsResponse{Topics: results}, err
	})
}

// CreateAcls adds ACL bindings through the Raft log; under an authorizer
// it needs ALTER on the cluster, else every binding is answered
// CLUSTER_AUTHORIZATION_FAILED.
func (s *Server) CreateAcls(ctx context.Context, req *controllerv1.CreateAclsRequest) (*controllerv1.CreateAclsResponse, error) {
	return onLeader(s, ctx, req, controllerv1grpc.ControllerServiceClient.CreateAcls, func(ctx context.Context) (*controllerv1.CreateAclsResponse, error) {
		if err := s.authorize(ctx, controllerv1grpc.ControllerService_CreateAcls_FullMethodName, acl.Cluster, acl.ClusterName, acl.Alter); err != nil {
			resp := &controllerv1.CreateAclsResponse{}
			for range req.GetAcls() {
				resp.Results = append(resp.Results, &controllerv1.AclResult{ErrorCode: int32(errs.CodeOf(err)), ErrorMessage: errs.Message(err)})
			}
			return resp, nil
		}
		// A new binding passes ValidateNew here, before it is proposed: the
		// state machine checks only Validate, which every binding a
		// cluster already holds passes, so that replaying its log and
		// restoring its snapshots come to the same bindings whatever the
		// version.
		refused := make([]error, len(req.GetAcls()))
		some := false
		for i, a := range req.GetAcls() {
			if _, err := md.Binding(a).ValidateNew(); err != nil {
				refused[i], some = err, true
			}
		}
		if !some {
			return propose[*controllerv1.CreateAclsResponse](s, ctx, &controllerv1.Command{Command: &controllerv1.Command_CreateAcls{CreateAcls: req}})
		}
		var got []*controllerv1.AclResult
		if allowed := allowedOnly(req.GetAcls(), refused); len(allowed) > 0 {
			resp, err := propose[*controllerv1.CreateAclsResponse](s, ctx, &controllerv1.Command{Command: &controllerv1.Command_CreateAcls{CreateAcls: &controllerv1.CreateAclsRequest{Acls: allowed}}})
			if err != nil {
				return nil, err
			}
			got = resp.GetResults()
		}
		results, err := merged(refused, got, func(_ int, err error) *controllerv1.AclResult {
			return &controllerv1.AclResult{ErrorCode: int32(errs.CodeOf(err)), ErrorMessage: errs.Message(err)}
		})
		return &controllerv1.CreateAclsResponse{Results: results}, err
	})
}

// DeleteAcls removes the ACL bindings each filter selects through the Raft
// log; under an authorizer it needs ALTER on the cluster, else every filter
// is answered CLUSTER_AUTHORIZATION_FAILED.
func (s *Server) DeleteAcls(ctx context.Context, req *controllerv1.DeleteAclsRequest) (*controllerv1.DeleteAclsResponse, error) {
	return onLeader(s, ctx, req, controllerv1grpc.ControllerServiceClient.DeleteAcls, func(ctx context.Context) (*controllerv1.DeleteAclsResponse, error) {
		if err := s.authorize(ctx, controllerv1grpc.ControllerService_DeleteAcls_FullMethodName, acl.Cluster, acl.ClusterName, acl.Alter); err != nil {
			resp := &controllerv1.DeleteAclsResponse{}
			for range req.GetFilters() {
				resp.Results = append(resp.Results, &controllerv1.AclFilterResult{ErrorCode: int32(errs.CodeOf(err)), ErrorMessage: errs.Message(err)})
			}
			return resp, nil
		}
		return propose[*controllerv1.DeleteAclsResponse](s, ctx, &controllerv1.Command{Command: &controllerv1.Command_DeleteAcls{DeleteAcls: req}})
	})
}

// CreatePartitions grows topics; under an authorizer each needs ALTER on
// the topic.
func (s *Server) CreatePartitions(ctx context.Context, req *controllerv1.CreatePartitionsRequest) (*controllerv1.CreatePartitionsResponse, error) {
	return onLeader(s, ctx, req, controllerv1grpc.ControllerServiceClient.CreatePartitions, func(ctx context.Context) (*controllerv1.CreatePartitionsResponse, error) {
		names := make([]string, len(req.GetTopics()))
		for i, t := range req.GetTopics() {
			names[i] = t.GetName()
		}
		refused := s.topicRefusals(ctx, controllerv1grpc.ControllerService_CreatePartitions_FullMethodName, names, acl.Alter, 0)
		if refused == nil {
			return propose[*controllerv1.CreatePartitionsResponse](s, ctx, &controllerv1.Command{Command: &controllerv1.Command_CreatePartitions{CreatePartitions: req}})
		}
		results, err := proposeAllowed(s, ctx, refused, names, req.GetTopics(), func(allowed []*controllerv1.PartitionCount) *controllerv1.Command {
			sub := proto.CloneOf(req)
			sub.Topics = allowed
			return &controllerv1.Command{Command: &controllerv1.Command_CreatePartitions{CreatePartitions: sub}}
		}, (*controllerv1.CreatePartitionsResponse).GetTopics)
		return &controllerv1.CreatePartitionsResponse{Topics: results}, err
	})
}

// normalizedTopics is req with its topics' config values as they are kept
// (topicconfig.Normalize). It is done before the command is proposed, so
// that the log carries the values stored and a replay of an older entry
// reads it as it was first applied.
func normalizedTopics(req *controllerv1.CreateTopicsRequest) *controllerv1.CreateTopicsRequest {
	out := req
	for i, t := range req.GetTopics() {
		if len(t.GetConfigs()) == 0 {
			continue
		}
		if out == req {
			out = proto.CloneOf(req)
		}
		out.Topics[i].Configs = topicconfig.Normalize(t.GetConfigs())
	}
	return out
}

// AlterConfigs changes a topic's configs; under an authorizer it needs
// ALTER on the topic.
func (s *Server) AlterConfigs(ctx context.Context, req *controllerv1.AlterConfigsRequest) (*controllerv1.AlterConfigsResponse, error) {
	return onLeader(s, ctx, req, controllerv1grpc.ControllerServiceClient.AlterConfigs, func(ctx context.Context) (*controllerv1.AlterConfigsResponse, error) {
		if refused := s.topicRefusals(ctx, controllerv1grpc.ControllerService_AlterConfigs_FullMethodName, []string{req.GetTopic()}, acl.Alter, 0); refused != nil {
			return &controllerv1.AlterConfigsResponse{Result: refusedTopic(req.GetTopic(), refused[0])}, nil
		}
		if req.GetConfigs() != nil {
			req = proto.CloneOf(req)
			req.Configs = topicconfig.Normalize(req.GetConfigs())
		}
		if v, ok := req.GetConfigs()["cleanup.policy"]; ok && v != "compact" && md.IsInternalTopic(req.GetTopic()) {
			// The coordinators' state is a compacted log: deleted by age or
			// by DeleteRecords, it would take the groups' offsets and the
			// transactions' states with it. Setting compact is taken, so
			// that a cluster changed before this check can be put back.
			// Checked here, not in the state machine, so that the log
			// replays as it was first applied.
			return &controllerv1.AlterConfigsResponse{Result: refusedTopic(req.GetTopic(), errs.Errorf(errs.InvalidConfig,
				"cleanup.policy of internal topic %q stays compact (it is the coordinators' state), not %q", req.GetTopic(), v))}, nil
		}
		return propose[*controllerv1.AlterConfigsResponse](s, ctx, &controllerv1.Command{Command: &controllerv1.Command_AlterConfigs{AlterConfigs: req}})
	})
}

func (s *Server) AlterPartition(ctx context.Context, req *controllerv1.AlterPartitionRequest) (*controllerv1.AlterPartitionResponse, error) {
	return onLeader(s, ctx, req, controllerv1grpc.ControllerServiceClient.AlterPartition, func(ctx context.Context) (*controllerv1.AlterPartitionResponse, error) {
		return propose[*controllerv1.AlterPartitionResponse](s, ctx, &controllerv1.Command{Command: &controllerv1.Command_AlterPartition{AlterPartition: req}})
	})
}

// ElectLeaders runs elections; under an authorizer it needs ALTER on the
// cluster, else the call is refused CLUSTER_AUTHORIZATION_FAILED.
func (s *Server) ElectLeaders(ctx context.Context, req *controllerv1.ElectLeadersRequest) (*controllerv1.ElectLeadersResponse, error) {
	return onLeader(s, ctx, req, controllerv1grpc.ControllerServiceClient.ElectLeaders, func(ctx context.Context) (*controllerv1.ElectLeadersResponse, error) {
		if err := s.authorize(ctx, controllerv1grpc.ControllerService_ElectLeaders_FullMethodName, acl.Cluster, acl.ClusterName, acl.Alter); err != nil {
			return nil, err
		}
		return propose[*controllerv1.ElectLeadersResponse](s, ctx, &controllerv1.Command{Command: &controllerv1.Command_ElectLeaders{ElectLeaders: req}})
	})
}

// AllocateProducerIds hands out a block of producer ids; under an
// authorizer a client (not a Skein service) needs write on some topic, as
// Kafka's idempotent InitProducerId, else CLUSTER_AUTHORIZATION_FAILED.
func (s *Server) AllocateProducerIds(ctx context.Context, req *controllerv1.AllocateProducerIdsRequest) (*controllerv1.AllocateProducerIdsResponse, error) {
	return onLeader(s, ctx, req, controllerv1grpc.ControllerServiceClient.AllocateProducerIds, func(ctx context.Context) (*controllerv1.AllocateProducerIdsResponse, error) {
		c, known := caller(ctx)
		if err := s.auth.AuthorizeAnyCaller(ctx, c, known, controllerv1grpc.ControllerService_AllocateProducerIds_FullMethodName, acl.Topic, acl.Write); err != nil {
			return nil, err
		}
		return propose[*controllerv1.AllocateProducerIdsResponse](s, ctx, &controllerv1.Command{Command: &controllerv1.Command_AllocateProducerIds{AllocateProducerIds: req}})
	})
}

// MemberStates is what DescribeCluster asks gossip (a membership.Node).
type MemberStates interface {
	Lookup(role membership.Role, id int32) (membership.Member, bool)
}

// SetGossip lets DescribeCluster report which controllers gossip reaches.
func (s *Server) SetGossip(g MemberStates) { s.gossip = g }

// controllerState is controller id's state for DescribeCluster: ALIVE
// while gossip reaches it, DEAD once gossip declared it failed or gone or
// has never seen it, "" without gossip.
func (s *Server) controllerState(id int32) string {
	if s.gossip == nil {
		return ""
	}
	if m, ok := s.gossip.Lookup(membership.RoleController, id); ok && m.State == membership.StateAlive {
		return "ALIVE"
	}
	return "DEAD"
}

func (s *Server) DescribeCluster(ctx context.Context, _ *controllerv1.DescribeClusterRequest) (*controllerv1.DescribeClusterResponse, error) {
	resp := &controllerv1.DescribeClusterResponse{ControllerId: -1}
	leader, hasLeader := s.node.Leader()
	if hasLeader {
		resp.ControllerId = leader.ID
	}
	for _, p := range s.node.Peers() {
		resp.Controllers = append(resp.Controllers, &controllerv1.ControllerNode{
			Id: p.ID, Addr: p.GRPCAddr, RaftAddr: p.RaftAddr, Leader: hasLeader && p.ID == leader.ID, State: s.controllerState(p.ID),
		})
	}
	s.node.Read(func(img *md.Image) {
		resp.ClusterId = img.ClusterID()
		resp.Version = uint64(img.Version())
		for _, b := range img.Brokers() {
			resp.Brokers = append(resp.Brokers, proto.CloneOf(b))
		}
		for _, c := range img.Coordinators() {
			resp.Coordinators = append(resp.Coordinators, proto.CloneOf(c))
		}
	})
	if resp.ClusterId == "" {
		// Nothing applied yet (just started, with no snapshot, and no leader
		// to learn the commit from; or a new cluster before its first
		// entry): an empty cluster is not what the cluster holds. The
		// caller asks another controller, and waits for one that knows.
		return nil, rpcerr.ToGRPC(errs.Errorf(errs.NotController,
			"controller %d holds no metadata yet (starting, or out of contact with a quorum of the controllers)", s.node.ID()))
	}
	return resp, nil
}

func (s *Server) FindCoordinator(ctx context.Context, req *controllerv1.FindCoordinatorRequest) (*controllerv1.FindCoordinatorResponse, error) {
	if _, ok := md.InternalTopic(req.GetKind()); !ok {
		return nil, rpcerr.ToGRPC(errs.Errorf(errs.InvalidRequest, "coordinator kind %v", req.GetKind()))
	}
	var owner md.CoordinatorOwner
	var ok bool
	s.node.Read(func(img *md.Image) { owner, ok = img.CoordinatorFor(req.GetKind(), req.GetKey()) })
	if !ok {
		return nil, rpcerr.ToGRPC(errs.Errorf(errs.CoordinatorNotAvailable, "no live %v coordinator owns key %q (partition %d)", req.GetKind(), req.GetKey(), owner.Partition))
	}
	return &controllerv1.FindCoordinatorResponse{Partition: owner.Partition, NodeId: owner.NodeID, GrpcAddr: owner.GRPCAddr, CoordinatorEpoch: owner.Epoch}, nil
}

// waitCaughtUp holds a watcher until this controller's image is caught up —
// on a follower: holds at least the version the leader holds, asked over
// gRPC; on the leader: everything committed and everything in its log at
// startup is applied — and is not older than the version the watcher
// already holds. So a watcher never moves backwards by switching to a
// lagging or just restarted controller, and never takes an empty image for
// the cluster's state. After the wait, a settled controller serves anyway
// (the watcher's version is then from another history); one still catching
// up answers NOT_CONTROLLER, so the watcher tries another.
func (s *Server) waitCaughtUp(ctx context.Context, known uint64) error {
	deadline := time.Now().Add(s.catchUpWait)
	target, asked := known, false
	for {
		leader := s.node.IsLeader()
		if !leader && !asked {
			if v, ok := s.leaderVersion(ctx); ok {
				target, asked = max(target, v), true
			}
		}
		var version uint64
		s.node.Read(func(img *md.Image) { version = uint64(img.Version()) })
		if s.node.CaughtUp() && version >= target && (leader || asked) {
			return nil
		}
		if time.Now().After(deadline) {
			if s.node.Settled() {
				return nil
			}
			return errs.Errorf(errs.NotController, "controller %d is catching up", s.node.ID())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return errs.Errorf(errs.NotController, "controller %d is shutting down", s.node.ID())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Ready answers nil once this controller can be counted on: a leader is
// known and its image is caught up — on the leader, everything committed
// and everything in its log at startup applied; on a follower, also the
// version the leader held when first asked. A follower started again after
// a while down knows the leader at once but learns the commit only from
// the leader's next append, which Raft's backoff towards a peer it could
// not reach can delay for seconds: an operator rolling the controllers
// must not stop the next one meanwhile. Caught up once, it stays ready
// while a leader is known (a follower applies each commit a moment after
// learning it).
func (s *Server) Ready(ctx context.Context) (leader int32, err error) {
	p, ok := s.node.Leader()
	if !ok {
		return 0, errs.Errorf(errs.NotController, "no raft leader known")
	}
	s.readyMu.Lock()
	defer s.readyMu.Unlock()
	if s.ready {
		return p.ID, nil
	}
	if !s.node.IsLeader() && !s.readyAsked {
		v, ok := s.leaderVersion(ctx)
		if !ok {
			return 0, errs.Errorf(errs.NotController, "catching up: the leader (controller %d) has not answered for its metadata version", p.ID)
		}
		s.readyTarget, s.readyAsked = v, true
	}
	var version uint64
	s.node.Read(func(img *md.Image) { version = uint64(img.Version()) })
	// A follower that heard the leader's version needs only to have
	// applied what it knows committed (Settled): entries at the end of its
	// log from before its restart may have been cut by a new leader and
	// never come back, so its start index is no target.
	caughtUp := s.node.CaughtUp()
	if s.readyAsked {
		caughtUp = s.node.Settled()
	}
	if !caughtUp || version < s.readyTarget {
		return 0, errs.Errorf(errs.NotController, "catching up: metadata version %d of the leader's %d, applied index %d, committed %d",
			version, s.readyTarget, s.node.AppliedIndex(), s.node.CommitIndex())
	}
	if s.node.CatchingUp() {
		return 0, errs.Errorf(errs.NotController, "catching up after starting on an empty data directory: this controller votes in no election until a leader has brought its Raft log up to date")
	}
	s.ready = true
	return p.ID, nil
}

// leaderVersion asks the leader for the metadata version it holds.
func (s *Server) leaderVersion(ctx context.Context) (uint64, bool) {
	leader, ok := s.node.Leader()
	if !ok || leader.ID == s.node.ID() {
		return 0, false
	}
	c, err := s.client(leader.GRPCAddr)
	if err != nil {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	d, err := c.DescribeCluster(ctx, &controllerv1.DescribeClusterRequest{})
	if err != nil {
		return 0, false
	}
	return d.GetVersion(), true
}

// WatchMetadata streams the image (unless the watcher's known version can be
// carried forward by deltas), then every committed change; a watcher that
// falls behind its bounded buffer is sent a new image.
func (s *Server) WatchMetadata(req *controllerv1.WatchMetadataRequest, stream grpc.ServerStreamingServer[controllerv1.WatchMetadataResponse]) error {
	if err := s.waitCaughtUp(stream.Context(), req.GetKnownVersion()); err != nil {
		return rpcerr.ToGRPC(err)
	}
	sub, img := s.node.Subscribe(req.GetKnownVersion())
	defer sub.Close()
	// A client's watch (not a Skein service's) under an authorizer shows
	// only what the client may see (watchView).
	view := s.watchView(stream.Context())
	if view != nil && img == nil {
		// Its image may hold what it may no longer see: a new one.
		img = sub.Image()
	}
	var sent uint64 // the version the watcher holds after what was sent
	send := func(m *controllerv1.WatchMetadataResponse) error {
		if view != nil {
			m = view.filter(m, sub.Image)
		}
		if im := m.GetImage(); im != nil {
			sent = im.GetVersion()
		} else if d := m.GetDelta(); d != nil && d.GetVersion() > sent {
			sent = d.GetVersion()
		}
		return stream.Send(m)
	}
	if img != nil {
		if err := send(&controllerv1.WatchMetadataResponse{Update: &controllerv1.WatchMetadataResponse_Image{Image: img}}); err != nil {
			return err
		}
	} else {
		sent = req.GetKnownVersion()
	}
	ctx := stream.Context()
	// While in contact with the quorum, say so to a quiet watcher (see
	// md.WatchHeartbeat): a cut-off controller falls silent and its watchers
	// move to another.
	heartbeat := time.NewTicker(md.WatchHeartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-heartbeat.C:
			if !s.node.InContact(2 * md.WatchHeartbeat) {
				continue
			}
			if err := send(&controllerv1.WatchMetadataResponse{Update: &controllerv1.WatchMetadataResponse_Delta{Delta: &controllerv1.MetadataDelta{Version: sent}}}); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return rpcerr.ToGRPC(errs.Errorf(errs.NotController, "controller %d is shutting down", s.node.ID()))
		case <-sub.Resync():
			s.log.Info("watcher fell behind: sending a new image", "node", req.GetNodeId())
			if err := send(&controllerv1.WatchMetadataResponse{Update: &controllerv1.WatchMetadataResponse_Image{Image: sub.Image()}}); err != nil {
				return err
			}
		case d := <-sub.Deltas():
			if err := send(&controllerv1.WatchMetadataResponse{Update: &controllerv1.WatchMetadataResponse_Delta{Delta: d}}); err != nil {
				return err
			}
		}
	}
}
