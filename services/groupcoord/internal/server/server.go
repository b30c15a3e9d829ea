// Package server is the gRPC edge of the group coordinator: it turns
// GroupCoordinatorService requests into calls of package coordinator and
// its answers and domain errors (libs/errs rows) into responses. Errors go
// where the proto has room for them — a heartbeat's or offset fetch's
// error_code, a code per partition or per group — and are gRPC statuses
// (rpcerr.ToGRPC) only where it has none.
//
// With an authorizer (--authorizer) each handler first decides its
// caller's request with the cluster's ACLs, as the gateway does for the
// same requests: a member reads its group (joining reads the topics it
// subscribes to too), a transaction's offsets also write its transactional
// id, describing, altering and deleting a group need describe, alter and
// delete on it, deleting a group's offsets delete on it and read on their
// topics (a refused topic's partitions keep their offsets, each answered
// TOPIC_AUTHORIZATION_FAILED, as Kafka's OffsetDelete), and a listing
// shows only the groups the caller may describe. A refusal (GROUP_, TOPIC_
// or TRANSACTIONAL_ID_AUTHORIZATION_FAILED) is answered where the handler
// answers its other errors. Skein's own services are not subject to ACLs;
// CompleteTxnOffsets is for transaction coordinators only (Rules).
package server

import (
	"context"
	"strconv"
	"time"

	groupv1 "skein/gen/skein/group/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/acl"
	"skein/libs/errs"
	"skein/libs/peerauth"
	"skein/libs/rpcerr"
	"skein/services/groupcoord/internal/assign"
	"skein/services/groupcoord/internal/coordinator"
	"skein/services/groupcoord/internal/delivery"
	"skein/services/groupcoord/internal/group"
)

// Server implements groupv1.GroupCoordinatorServiceServer.
type Server struct {
	groupv1.UnimplementedGroupCoordinatorServiceServer
	c  *coordinator.Coordinator
	az *peerauth.Authorizer
}

// New returns the service over c; az decides the callers' requests (nil:
// everything allowed).
func New(c *coordinator.Coordinator, az *peerauth.Authorizer) *Server { return &Server{c: c, az: az} }

// Rules are the roles the guard lets call the coordinator's internal
// methods: only a transaction coordinator completes a transaction's
// offsets (a client doing so would commit or drop another producer's
// pending offsets).
func Rules() peerauth.Rules {
	sd := groupv1.GroupCoordinatorService_ServiceDesc
	return peerauth.Rules{
		peerauth.Method(sd, "CompleteTxnOffsets"): {peerauth.RoleTxnCoord},
	}
}

// group answers nil when the caller of ctx may do op on the group.
func (s *Server) group(ctx context.Context, method, id string, op acl.Operation) error {
	return s.az.Authorize(ctx, method, acl.Group, id, op)
}

// nack answers nil when the caller may nack a record of topic in a group:
// read on the group, and write on the record's dead-letter topic, which
// the coordinator writes as itself once the record has failed its last
// delivery; while that topic does not exist (the coordinator creates it
// then), also create on it or on the cluster, as Kafka's auto-creation.
func (s *Server) nack(ctx context.Context, groupID, topic string) error {
	const method = groupv1.GroupCoordinatorService_Nack_FullMethodName
	if err := s.group(ctx, method, groupID, acl.Read); err != nil {
		return err
	}
	if _, known := peerauth.CallerFrom(ctx); !known || s.az == nil {
		return nil
	}
	m, err := s.c.GroupConfig(ctx, groupID)
	if err != nil {
		return err
	}
	cfg, err := delivery.Parse(m)
	if err != nil {
		cfg = delivery.DefaultConfig()
	}
	dlq := cfg.TopicFor(topic)
	if err := s.az.Authorize(ctx, method, acl.Topic, dlq, acl.Write); err != nil {
		return err
	}
	if s.c.TopicExists(dlq) {
		return nil
	}
	if c, known := peerauth.CallerFrom(ctx); s.az.Allowed(c, known, acl.Cluster, acl.ClusterName, acl.Create) {
		return nil
	}
	return s.az.Authorize(ctx, method, acl.Topic, dlq, acl.Create)
}

// txnOffsets answers nil when the caller may commit a transaction's
// offsets for a group: write on its transactional id, read on the group.
func (s *Server) txnOffsets(ctx context.Context, method, txnID, groupID string) error {
	if err := s.az.Authorize(ctx, method, acl.TransactionalID, txnID, acl.Write); err != nil {
		return err
	}
	return s.group(ctx, method, groupID, acl.Read)
}

// heartbeat answers nil when the caller may be a member of the group
// (read) subscribed to topics (read on each).
func (s *Server) heartbeat(ctx context.Context, groupID string, topics []string) error {
	const method = groupv1.GroupCoordinatorService_ConsumerGroupHeartbeat_FullMethodName
	if err := s.group(ctx, method, groupID, acl.Read); err != nil {
		return err
	}
	for _, t := range topics {
		if err := s.az.Authorize(ctx, method, acl.Topic, t, acl.Read); err != nil {
			return err
		}
	}
	return nil
}

// code answers an error's ErrorCode and message (NONE and "" for nil).
func code(err error) (skeinv1.ErrorCode, string) {
	if err == nil {
		return skeinv1.ErrorCode_NONE, ""
	}
	return skeinv1.ErrorCode(errs.CodeOf(err)), errs.Message(err)
}

func partitionsOf(tps []*groupv1.TopicPartitions) assign.Partitions {
	m := map[string][]int32{}
	for _, tp := range tps {
		m[tp.GetTopic()] = append(m[tp.GetTopic()], tp.GetPartitions()...)
	}
	return assign.Of(m)
}

func protoPartitions(p assign.Partitions) []*groupv1.TopicPartitions {
	out := []*groupv1.TopicPartitions{}
	var last *groupv1.TopicPartitions
	for _, tp := range p.List() {
		if last == nil || last.Topic != tp.Topic {
			last = &groupv1.TopicPartitions{Topic: tp.Topic}
			out = append(out, last)
		}
		last.Partitions = append(last.Partitions, tp.Partition)
	}
	return out
}

func millis(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }

// ConsumerGroupHeartbeat joins, heartbeats or leaves.
func (s *Server) ConsumerGroupHeartbeat(ctx context.Context, req *groupv1.ConsumerGroupHeartbeatRequest) (*groupv1.ConsumerGroupHeartbeatResponse, error) {
	if err := s.heartbeat(ctx, req.GetGroupId(), req.GetSubscribedTopics()); err != nil {
		return heartbeatErr(err), nil
	}
	if req.GetRebalanceTimeoutMs() < 0 {
		return heartbeatErr(errs.Errorf(errs.InvalidRequest, "negative rebalance timeout %d ms", req.GetRebalanceTimeoutMs())), nil
	}
	if req.GetSessionTimeoutMs() < 0 {
		return heartbeatErr(errs.Errorf(errs.InvalidSessionTimeout, "negative session timeout %d ms", req.GetSessionTimeoutMs())), nil
	}
	resp, err := s.c.Heartbeat(ctx, req.GetGroupId(), group.HeartbeatRequest{
		MemberID:         group.MemberID(req.GetMemberId()),
		MemberEpoch:      group.Epoch(req.GetMemberEpoch()),
		InstanceID:       req.GetInstanceId(),
		Rack:             req.GetRackId(),
		RebalanceTimeout: millis(req.GetRebalanceTimeoutMs()),
		SessionTimeout:   millis(req.GetSessionTimeoutMs()),
		Topics:           req.GetSubscribedTopics(),
		Assignor:         req.GetServerAssignor(),
		Owned:            partitionsOf(req.GetOwnedPartitions()), // never nil: proto3 cannot say "not reported"
	})
	if err != nil {
		return heartbeatErr(err), nil
	}
	out := &groupv1.ConsumerGroupHeartbeatResponse{
		MemberId: string(resp.MemberID), MemberEpoch: int32(resp.MemberEpoch),
		HeartbeatIntervalMs: int32(resp.HeartbeatInterval / time.Millisecond),
		Assignment:          protoPartitions(resp.Assignment),
	}
	if resp.MemberEpoch > 0 && resp.Assignment.Count() > 0 {
		tps := resp.Assignment.List()
		ds := s.c.Deliveries(req.GetGroupId(), tps)
		for _, tp := range tps {
			if d := ds[tp]; len(d) > 0 {
				pd := &groupv1.PartitionDeliveries{Topic: tp.Topic, Partition: tp.Partition}
				for _, e := range d {
					pd.Records = append(pd.Records, &groupv1.FailedDelivery{Offset: e.Offset, Failed: e.Nacks})
				}
				out.Deliveries = append(out.Deliveries, pd)
			}
		}
	}
	return out, nil
}

// Nack records a failed delivery; a refusal is in the answer's code.
func (s *Server) Nack(ctx context.Context, req *groupv1.NackRequest) (*groupv1.NackResponse, error) {
	if err := s.nack(ctx, req.GetGroupId(), req.GetTopic()); err != nil {
		c, msg := code(err)
		return &groupv1.NackResponse{ErrorCode: c, ErrorMessage: msg}, nil
	}
	res, err := s.c.Nack(ctx, req.GetGroupId(), group.MemberID(req.GetMemberId()), group.Epoch(req.GetMemberEpoch()),
		req.GetTopic(), req.GetPartition(), req.GetOffset(), req.GetReason())
	if err != nil {
		c, msg := code(err)
		return &groupv1.NackResponse{ErrorCode: c, ErrorMessage: msg}, nil
	}
	return &groupv1.NackResponse{FailedDeliveries: res.Failed, DeadLettered: res.DeadLettered, DlqTopic: res.DLQTopic,
		DlqPartition: res.DLQPartition, DlqOffset: res.DLQOffset, NextOffset: res.Next}, nil
}

// DescribeGroupConfig answers a group's settings.
func (s *Server) DescribeGroupConfig(ctx context.Context, req *groupv1.DescribeGroupConfigRequest) (*groupv1.DescribeGroupConfigResponse, error) {
	err := s.group(ctx, groupv1.GroupCoordinatorService_DescribeGroupConfig_FullMethodName, req.GetGroupId(), acl.Describe)
	var m map[string]string
	if err == nil {
		m, err = s.c.GroupConfig(ctx, req.GetGroupId())
	}
	c, msg := code(err)
	return &groupv1.DescribeGroupConfigResponse{ErrorCode: c, ErrorMessage: msg, Configs: m}, nil
}

// AlterGroupConfig sets some of a group's settings.
func (s *Server) AlterGroupConfig(ctx context.Context, req *groupv1.AlterGroupConfigRequest) (*groupv1.AlterGroupConfigResponse, error) {
	const method = groupv1.GroupCoordinatorService_AlterGroupConfig_FullMethodName
	err := s.group(ctx, method, req.GetGroupId(), acl.Alter)
	// The values as they will be kept: the topic authorized must be the
	// topic written to (" payments" is kept as payments).
	set := delivery.Normalize(req.GetConfigs())
	if t := set[delivery.KeyTopic]; err == nil && t != "" {
		// The coordinator writes dead letters there as itself: whoever
		// names the topic must be allowed to write it.
		err = s.az.Authorize(ctx, method, acl.Topic, t, acl.Write)
	}
	var m map[string]string
	if err == nil {
		m, err = s.c.AlterGroupConfig(ctx, req.GetGroupId(), set)
	}
	c, msg := code(err)
	return &groupv1.AlterGroupConfigResponse{ErrorCode: c, ErrorMessage: msg, Configs: m}, nil
}

func heartbeatErr(err error) *groupv1.ConsumerGroupHeartbeatResponse {
	c, msg := code(err)
	return &groupv1.ConsumerGroupHeartbeatResponse{ErrorCode: c, ErrorMessage: msg}
}

// OffsetCommit commits offsets; every partition gets its own code. A
// refused caller's refusal goes to every partition (a gRPC status when the
// request has none).
func (s *Server) OffsetCommit(ctx context.Context, req *groupv1.OffsetCommitRequest) (*groupv1.OffsetCommitResponse, error) {
	commits := commitsOf(req.GetOffsets())
	if err := s.group(ctx, groupv1.GroupCoordinatorService_OffsetCommit_FullMethodName, req.GetGroupId(), acl.Read); err != nil {
		return refuseCommits(commits, err)
	}
	results := s.c.CommitOffsets(ctx, req.GetGroupId(), group.MemberID(req.GetMemberId()), group.Epoch(req.GetMemberEpoch()), commits)
	return &groupv1.OffsetCommitResponse{Partitions: partitionResults(commits, results, nil)}, nil
}

func commitsOf(offsets []*groupv1.PartitionOffset) []coordinator.Commit {
	commits := make([]coordinator.Commit, len(offsets))
	for i, o := range offsets {
		commits[i] = coordinator.Commit{Topic: o.GetTopic(), Partition: o.GetPartition(), Offset: o.GetOffset(),
			LeaderEpoch: o.GetLeaderEpoch(), Metadata: o.GetMetadata()}
	}
	return commits
}

// partitionResults answers a code per commit: its own result, else all's
// (results may be nil).
func partitionResults(commits []coordinator.Commit, results []error, all error) []*groupv1.PartitionResult {
	out := make([]*groupv1.PartitionResult, len(commits))
	for i, cm := range commits {
		err := all
		if i < len(results) && results[i] != nil {
			err = results[i]
		}
		c, msg := code(err)
		out[i] = &groupv1.PartitionResult{Topic: cm.Topic, Partition: cm.Partition, ErrorCode: c, ErrorMessage: msg}
	}
	return out
}

// refuseCommits answers a commit refused as a whole: err in every
// partition's code, or a gRPC status when there is no partition to carry
// it.
func refuseCommits(commits []coordinator.Commit, err error) (*groupv1.OffsetCommitResponse, error) {
	if len(commits) == 0 {
		return nil, rpcerr.ToGRPC(err)
	}
	return &groupv1.OffsetCommitResponse{Partitions: partitionResults(commits, nil, err)}, nil
}

// OffsetFetch answers committed offsets (-1 where none is).
func (s *Server) OffsetFetch(ctx context.Context, req *groupv1.OffsetFetchRequest) (*groupv1.OffsetFetchResponse, error) {
	// Kafka's OffsetFetch needs describe: lag monitors read offsets.
	if err := s.group(ctx, groupv1.GroupCoordinatorService_OffsetFetch_FullMethodName, req.GetGroupId(), acl.Describe); err != nil {
		c, _ := code(err)
		return &groupv1.OffsetFetchResponse{ErrorCode: c}, nil
	}
	var tps []assign.TopicPartition
	for _, tp := range req.GetPartitions() {
		for _, p := range tp.GetPartitions() {
			tps = append(tps, assign.TopicPartition{Topic: tp.GetTopic(), Partition: p})
		}
	}
	got, err := s.c.FetchOffsets(ctx, req.GetGroupId(), tps, req.GetRequireStable())
	if err != nil {
		c, _ := code(err)
		return &groupv1.OffsetFetchResponse{ErrorCode: c}, nil
	}
	resp := &groupv1.OffsetFetchResponse{Offsets: make([]*groupv1.CommittedOffset, len(got))}
	for i, o := range got {
		c, _ := code(o.Err)
		resp.Offsets[i] = &groupv1.CommittedOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch,
			Metadata: o.Metadata, ErrorCode: c}
	}
	return resp, nil
}

// txnMember is the member a TxnOffsetCommit names: both its id and epoch,
// or neither (nil).
func txnMember(id string, epoch *int32) (*coordinator.TxnMember, error) {
	switch {
	case id == "" && epoch == nil:
		return nil, nil
	case id == "" || epoch == nil:
		return nil, errs.Errorf(errs.InvalidRequest, "member_id %q and member_epoch %v: give both, or neither", id, fmtEpoch(epoch))
	}
	return &coordinator.TxnMember{ID: group.MemberID(id), Epoch: group.Epoch(*epoch)}, nil
}

func fmtEpoch(e *int32) string {
	if e == nil {
		return "unset"
	}
	return strconv.Itoa(int(*e))
}

// TxnOffsetCommit records a transaction's offsets as pending. Every
// partition gets its own code: its own refusal, else the request's (the
// whole request refused: NOT_COORDINATOR, PRODUCER_FENCED, ...). A request
// with no offsets has no partition to carry a code and is a gRPC status
// (INVALID_REQUEST, or a refused caller's refusal).
func (s *Server) TxnOffsetCommit(ctx context.Context, req *groupv1.TxnOffsetCommitRequest) (*groupv1.TxnOffsetCommitResponse, error) {
	commits := commitsOf(req.GetOffsets())
	var results []error
	err := s.txnOffsets(ctx, groupv1.GroupCoordinatorService_TxnOffsetCommit_FullMethodName, req.GetTransactionalId(), req.GetGroupId())
	var member *coordinator.TxnMember
	if err == nil {
		member, err = txnMember(req.GetMemberId(), req.MemberEpoch)
	}
	if err == nil {
		results, err = s.c.TxnCommitOffsets(ctx, coordinator.TxnCommit{TransactionalID: req.GetTransactionalId(), GroupID: req.GetGroupId(),
			ProducerID: req.GetProducerId(), ProducerEpoch: req.GetProducerEpoch(), Commits: commits, Member: member})
	}
	if err != nil && len(commits) == 0 {
		return nil, rpcerr.ToGRPC(err)
	}
	return &groupv1.TxnOffsetCommitResponse{Partitions: partitionResults(commits, results, err)}, nil
}

// CompleteTxnOffsets commits or aborts a transaction's pending offsets in
// a group. The response has no room for a code: a refusal is a gRPC status
// carrying the error row (rpcerr), OK means the transaction's offsets in
// the group are complete (or were already).
func (s *Server) CompleteTxnOffsets(ctx context.Context, req *groupv1.CompleteTxnOffsetsRequest) (*groupv1.CompleteTxnOffsetsResponse, error) {
	if err := s.c.CompleteTxnOffsets(ctx, req.GetGroupId(), req.GetProducerId(), req.GetProducerEpoch(), req.GetCommitted()); err != nil {
		return nil, rpcerr.ToGRPC(err)
	}
	return &groupv1.CompleteTxnOffsetsResponse{}, nil
}

// ListGroups lists the groups this coordinator serves that the caller may
// describe (the others are left out, as Kafka's listing does).
func (s *Server) ListGroups(ctx context.Context, _ *groupv1.ListGroupsRequest) (*groupv1.ListGroupsResponse, error) {
	resp := &groupv1.ListGroupsResponse{}
	caller, known := peerauth.CallerFrom(ctx)
	for _, l := range s.c.ListGroups(ctx) {
		if !s.az.Allowed(caller, known, acl.Group, l.GroupID, acl.Describe) {
			continue
		}
		resp.Groups = append(resp.Groups, &groupv1.GroupListing{GroupId: l.GroupID, State: string(l.State), Members: int32(l.Members)})
	}
	return resp, nil
}

// DescribeGroups describes groups, each with its own code.
func (s *Server) DescribeGroups(ctx context.Context, req *groupv1.DescribeGroupsRequest) (*groupv1.DescribeGroupsResponse, error) {
	resp := &groupv1.DescribeGroupsResponse{}
	for _, id := range req.GetGroupIds() {
		err := s.group(ctx, groupv1.GroupCoordinatorService_DescribeGroups_FullMethodName, id, acl.Describe)
		var d group.Description
		if err == nil {
			d, err = s.c.DescribeGroup(ctx, id)
		}
		if err != nil {
			c, _ := code(err)
			resp.Groups = append(resp.Groups, &groupv1.GroupDescription{GroupId: id, ErrorCode: c, State: string(group.Dead)})
			continue
		}
		gd := &groupv1.GroupDescription{GroupId: id, State: string(d.State), GroupEpoch: int32(d.Epoch),
			AssignmentEpoch: int32(d.AssignmentEpoch), Assignor: d.Assignor}
		for _, m := range d.Members {
			gd.Members = append(gd.Members, &groupv1.MemberDescription{MemberId: string(m.ID), InstanceId: m.InstanceID,
				MemberEpoch: int32(m.Epoch), SubscribedTopics: m.Topics,
				Assignment:       protoPartitions(m.Assigned.Union(m.Revoking)),
				TargetAssignment: protoPartitions(m.Target),
				Revoking:         protoPartitions(m.Revoking)})
		}
		resp.Groups = append(resp.Groups, gd)
	}
	return resp, nil
}

// DeleteGroups deletes empty groups, each with its own code.
func (s *Server) DeleteGroups(ctx context.Context, req *groupv1.DeleteGroupsRequest) (*groupv1.DeleteGroupsResponse, error) {
	resp := &groupv1.DeleteGroupsResponse{}
	for _, id := range req.GetGroupIds() {
		err := s.group(ctx, groupv1.GroupCoordinatorService_DeleteGroups_FullMethodName, id, acl.Delete)
		if err == nil {
			err = s.c.DeleteGroup(ctx, id)
		}
		c, msg := code(err)
		resp.Groups = append(resp.Groups, &groupv1.GroupResult{GroupId: id, ErrorCode: c, ErrorMessage: msg})
	}
	return resp, nil
}

// OffsetDelete deletes a group's committed offsets of partitions whose
// topic no member subscribes to (Kafka's OffsetDelete). As Kafka's: the
// caller needs delete on the group, else the whole request is refused,
// and read on each topic, else that topic's partitions answer
// TOPIC_AUTHORIZATION_FAILED and keep their offsets. Every partition gets
// its own code, in the request's order; a refusal of the request as a
// whole (GROUP_ID_NOT_FOUND, NOT_COORDINATOR, ...) is the answer's code.
func (s *Server) OffsetDelete(ctx context.Context, req *groupv1.OffsetDeleteRequest) (*groupv1.OffsetDeleteResponse, error) {
	const method = groupv1.GroupCoordinatorService_OffsetDelete_FullMethodName
	whole := func(err error) *groupv1.OffsetDeleteResponse {
		c, msg := code(err)
		return &groupv1.OffsetDeleteResponse{ErrorCode: c, ErrorMessage: msg}
	}
	if err := s.group(ctx, method, req.GetGroupId(), acl.Delete); err != nil {
		return whole(err), nil
	}
	var asked, allowed []assign.TopicPartition
	var results []error
	var at []int // where each allowed partition's result goes
	refused := map[string]error{}
	for _, t := range req.GetPartitions() {
		err, decided := refused[t.GetTopic()]
		if !decided {
			err = s.az.Authorize(ctx, method, acl.Topic, t.GetTopic(), acl.Read)
			refused[t.GetTopic()] = err
		}
		for _, p := range t.GetPartitions() {
			tp := assign.TopicPartition{Topic: t.GetTopic(), Partition: p}
			if err == nil {
				allowed = append(allowed, tp)
				at = append(at, len(asked))
			}
			asked = append(asked, tp)
			results = append(results, err)
		}
	}
	res, err := s.c.DeleteOffsets(ctx, req.GetGroupId(), allowed)
	if err != nil {
		return whole(err), nil
	}
	for j, i := range at {
		results[i] = res[j]
	}
	out := &groupv1.OffsetDeleteResponse{Partitions: make([]*groupv1.PartitionResult, len(asked))}
	for i, tp := range asked {
		c, msg := code(results[i])
		out.Partitions[i] = &groupv1.PartitionResult{Topic: tp.Topic, Partition: tp.Partition, ErrorCode: c, ErrorMessage: msg}
	}
	return out, nil
}
