package api

import (
	"context"

	groupv1 "skein/gen/skein/group/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
	"skein/libs/errs"
)

// MaxNackReason bounds a nack's reason, in bytes.
const MaxNackReason = 1024

// checkNack validates a nack's record fields: topic, partition and offset
// are required (a partition or offset of 0 must be sent).
func (s *Group) checkNack(ctx context.Context, req *skeinv1.NackRecordRequest) error {
	switch {
	case req.GetTopic() == "":
		return errs.Errorf(errs.InvalidRequest, "topic is missing: a nack names the record's topic, partition and offset")
	case req.Partition == nil:
		return errs.Errorf(errs.InvalidRequest, "partition is missing: a nack names the record's topic, partition and offset")
	case req.Offset == nil:
		return errs.Errorf(errs.InvalidRequest, "offset is missing: a nack names the record's topic, partition and offset")
	case req.GetOffset() < 0:
		return errs.Errorf(errs.InvalidRequest, "offset %d is negative", req.GetOffset())
	case len(req.GetReason()) > MaxNackReason:
		return errs.Errorf(errs.InvalidRequest, "reason is %d bytes, more than %d", len(req.GetReason()), MaxNackReason)
	}
	_, n, err := knownTopic(ctx, s.c, req.GetTopic())
	if err != nil {
		return err
	}
	return checkPartition(req.GetTopic(), req.GetPartition(), n)
}

func nackResponse(req *skeinv1.NackRecordRequest, r *groupv1.NackResponse) *skeinv1.NackRecordResponse {
	return &skeinv1.NackRecordResponse{Topic: req.GetTopic(), Partition: req.GetPartition(), Offset: req.GetOffset(),
		FailedDeliveries: r.GetFailedDeliveries(), DeadLettered: r.GetDeadLettered(), DlqTopic: r.GetDlqTopic(),
		DlqPartition: r.GetDlqPartition(), DlqOffset: r.GetDlqOffset(), NextOffset: r.GetNextOffset()}
}

// NackRecord rejects a record the member owns: the coordinator counts the
// failed delivery and answers where the member reads the partition next —
// the record again (a REST member sends next_offset as the partition's
// position), or the record after it once it went to the dead-letter topic.
func (s *Group) NackRecord(ctx context.Context, req *skeinv1.NackRecordRequest) (*skeinv1.NackRecordResponse, error) {
	if err := validateMember(req.GetGroup(), req.GetMemberId(), req.GetMemberEpoch()); err != nil {
		return nil, err
	}
	if err := s.checkNack(ctx, req); err != nil {
		return nil, err
	}
	resp, err := s.groups.Nack(ctx, &groupv1.NackRequest{GroupId: req.GetGroup(), MemberId: req.GetMemberId(), MemberEpoch: req.GetMemberEpoch(),
		Topic: req.GetTopic(), Partition: req.GetPartition(), Offset: req.GetOffset(), Reason: req.GetReason()})
	if err != nil {
		return nil, err
	}
	return nackResponse(req, resp), nil
}

// streamNack nacks for a Consume stream's member and moves its position;
// a refusal is answered in the response, the stream goes on.
func (s *Group) streamNack(ctx context.Context, gc *client.GroupConsumer, req *skeinv1.NackRecordRequest) *skeinv1.NackRecordResponse {
	fail := func(err error) *skeinv1.NackRecordResponse {
		return &skeinv1.NackRecordResponse{Topic: req.GetTopic(), Partition: req.GetPartition(), Offset: req.GetOffset(),
			ErrorCode: skeinv1.ErrorCode(errs.CodeOf(err)), Message: errs.Message(err)}
	}
	if req.GetGroup() != "" && req.GetGroup() != gc.Group() {
		return fail(errs.Errorf(errs.InvalidRequest, "the stream nacks for its group %q, not %q", gc.Group(), req.GetGroup()))
	}
	if err := s.checkNack(ctx, req); err != nil {
		return fail(err)
	}
	resp, err := gc.Nack(ctx, client.TopicPartition{Topic: req.GetTopic(), Partition: req.GetPartition()}, req.GetOffset(), req.GetReason())
	if err != nil {
		return fail(err)
	}
	return nackResponse(req, resp)
}

// GetGroupConfig answers a group's settings, defaults included.
func (s *Group) GetGroupConfig(ctx context.Context, req *skeinv1.GetGroupConfigRequest) (*skeinv1.GetGroupConfigResponse, error) {
	if err := validateGroupID(req.GetGroup()); err != nil {
		return nil, err
	}
	if err := waitReady(ctx, s.c); err != nil {
		return nil, err
	}
	m, err := s.groups.DescribeConfig(ctx, req.GetGroup())
	if err != nil {
		return nil, err
	}
	return &skeinv1.GetGroupConfigResponse{Group: req.GetGroup(), Configs: m}, nil
}

// SetGroupConfig sets some of a group's settings and answers all of them.
func (s *Group) SetGroupConfig(ctx context.Context, req *skeinv1.SetGroupConfigRequest) (*skeinv1.SetGroupConfigResponse, error) {
	if err := validateGroupID(req.GetGroup()); err != nil {
		return nil, err
	}
	if len(req.GetConfigs()) == 0 {
		return nil, errs.Errorf(errs.InvalidConfig, "configs is empty")
	}
	if err := waitReady(ctx, s.c); err != nil {
		return nil, err
	}
	m, err := s.groups.AlterConfig(ctx, req.GetGroup(), req.GetConfigs())
	if err != nil {
		return nil, err
	}
	return &skeinv1.SetGroupConfigResponse{Group: req.GetGroup(), Configs: m}, nil
}

// deliveryAttempts indexes a heartbeat's failed deliveries.
func deliveryAttempts(ds []*groupv1.PartitionDeliveries) map[client.TopicPartition]map[int64]int32 {
	out := map[client.TopicPartition]map[int64]int32{}
	for _, d := range ds {
		m := map[int64]int32{}
		for _, r := range d.GetRecords() {
			m[r.GetOffset()] = r.GetFailed()
		}
		out[client.TopicPartition{Topic: d.GetTopic(), Partition: d.GetPartition()}] = m
	}
	return out
}
