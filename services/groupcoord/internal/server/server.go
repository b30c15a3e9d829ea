// Package server is the gRPC edge of the group coordinator: it turns
// GroupCoordinatorService requests into calls of package coordinator and
// its answers and domain errors (libs/errs rows) into responses. Errors go
// where the proto has room for them — a heartbeat's or offset fetch's
// error_code, a code per partition or per group — and are gRPC statuses
// (rpcerr.ToGRPC) only where it has none.
package server

import (
	"context"
	"time"

	groupv1 "skein/gen/skein/group/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/rpcerr"
	"skein/services/groupcoord/internal/assign"
	"skein/services/groupcoord/internal/coordinator"
	"skein/services/groupcoord/internal/group"
)

// Server implements groupv1.GroupCoordinatorServiceServer.
type Server struct {
	groupv1.UnimplementedGroupCoordinatorServiceServer
	c *coordinator.Coordinator
}

// New returns the service over c.
func New(c *coordinator.Coordinator) *Server { return &Server{c: c} }

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
	m, err := s.c.GroupConfig(ctx, req.GetGroupId())
	c, msg := code(err)
	return &groupv1.DescribeGroupConfigResponse{ErrorCode: c, ErrorMessage: msg, Configs: m}, nil
}

// AlterGroupConfig sets some of a group's settings.
func (s *Server) AlterGroupConfig(ctx context.Context, req *groupv1.AlterGroupConfigRequest) (*groupv1.AlterGroupConfigResponse, error) {
	m, err := s.c.AlterGroupConfig(ctx, req.GetGroupId(), req.GetConfigs())
	c, msg := code(err)
	return &groupv1.AlterGroupConfigResponse{ErrorCode: c, ErrorMessage: msg, Configs: m}, nil
}

func heartbeatErr(err error) *groupv1.ConsumerGroupHeartbeatResponse {
	c, msg := code(err)
	return &groupv1.ConsumerGroupHeartbeatResponse{ErrorCode: c, ErrorMessage: msg}
}

// OffsetCommit commits offsets; every partition gets its own code.
func (s *Server) OffsetCommit(ctx context.Context, req *groupv1.OffsetCommitRequest) (*groupv1.OffsetCommitResponse, error) {
	commits := make([]coordinator.Commit, len(req.GetOffsets()))
	for i, o := range req.GetOffsets() {
		commits[i] = coordinator.Commit{Topic: o.GetTopic(), Partition: o.GetPartition(), Offset: o.GetOffset(),
			LeaderEpoch: o.GetLeaderEpoch(), Metadata: o.GetMetadata()}
	}
	results := s.c.CommitOffsets(ctx, req.GetGroupId(), group.MemberID(req.GetMemberId()), group.Epoch(req.GetMemberEpoch()), commits)
	resp := &groupv1.OffsetCommitResponse{Partitions: make([]*groupv1.PartitionResult, len(commits))}
	for i, cm := range commits {
		c, msg := code(results[i])
		resp.Partitions[i] = &groupv1.PartitionResult{Topic: cm.Topic, Partition: cm.Partition, ErrorCode: c, ErrorMessage: msg}
	}
	return resp, nil
}

// OffsetFetch answers committed offsets (-1 where none is).
func (s *Server) OffsetFetch(ctx context.Context, req *groupv1.OffsetFetchRequest) (*groupv1.OffsetFetchResponse, error) {
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

// TxnOffsetCommit records a transaction's offsets as pending. Every
// partition gets its own code: its own refusal, else the request's (the
// whole request refused: NOT_COORDINATOR, PRODUCER_FENCED, ...). A request
// with no offsets has no partition to carry a code and is a gRPC status
// (INVALID_REQUEST).
func (s *Server) TxnOffsetCommit(ctx context.Context, req *groupv1.TxnOffsetCommitRequest) (*groupv1.TxnOffsetCommitResponse, error) {
	commits := make([]coordinator.Commit, len(req.GetOffsets()))
	for i, o := range req.GetOffsets() {
		commits[i] = coordinator.Commit{Topic: o.GetTopic(), Partition: o.GetPartition(), Offset: o.GetOffset(),
			LeaderEpoch: o.GetLeaderEpoch(), Metadata: o.GetMetadata()}
	}
	results, err := s.c.TxnCommitOffsets(ctx, coordinator.TxnCommit{TransactionalID: req.GetTransactionalId(), GroupID: req.GetGroupId(),
		ProducerID: req.GetProducerId(), ProducerEpoch: req.GetProducerEpoch(), Commits: commits})
	if err != nil && len(commits) == 0 {
		return nil, rpcerr.ToGRPC(err)
	}
	resp := &groupv1.TxnOffsetCommitResponse{Partitions: make([]*groupv1.PartitionResult, len(commits))}
	for i, cm := range commits {
		perr := results[i]
		if perr == nil {
			perr = err
		}
		c, msg := code(perr)
		resp.Partitions[i] = &groupv1.PartitionResult{Topic: cm.Topic, Partition: cm.Partition, ErrorCode: c, ErrorMessage: msg}
	}
	return resp, nil
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

// ListGroups lists the groups this coordinator serves.
func (s *Server) ListGroups(ctx context.Context, _ *groupv1.ListGroupsRequest) (*groupv1.ListGroupsResponse, error) {
	resp := &groupv1.ListGroupsResponse{}
	for _, l := range s.c.ListGroups(ctx) {
		resp.Groups = append(resp.Groups, &groupv1.GroupListing{GroupId: l.GroupID, State: string(l.State), Members: int32(l.Members)})
	}
	return resp, nil
}

// DescribeGroups describes groups, each with its own code.
func (s *Server) DescribeGroups(ctx context.Context, req *groupv1.DescribeGroupsRequest) (*groupv1.DescribeGroupsResponse, error) {
	resp := &groupv1.DescribeGroupsResponse{}
	for _, id := range req.GetGroupIds() {
		d, err := s.c.DescribeGroup(ctx, id)
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
				TargetAssignment: protoPartitions(m.Target)})
		}
		resp.Groups = append(resp.Groups, gd)
	}
	return resp, nil
}

// DeleteGroups deletes empty groups, each with its own code.
func (s *Server) DeleteGroups(ctx context.Context, req *groupv1.DeleteGroupsRequest) (*groupv1.DeleteGroupsResponse, error) {
	resp := &groupv1.DeleteGroupsResponse{}
	for _, id := range req.GetGroupIds() {
		c, msg := code(s.c.DeleteGroup(ctx, id))
		resp.Groups = append(resp.Groups, &groupv1.GroupResult{GroupId: id, ErrorCode: c, ErrorMessage: msg})
	}
	return resp, nil
}
