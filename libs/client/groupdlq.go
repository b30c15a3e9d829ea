package client

import (
	"context"

	groupv1 "skein/gen/skein/group/v1"
)

// Nack tells the group's coordinator that a member could not process a
// record it owns: the record is delivered again, or, after the group's
// max.delivery.attempts, written to the group's dead-letter topic and the
// group moved past it. A refusal (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH,
// OFFSET_OUT_OF_RANGE, ...) is the error. A nack retried after a
// coordinator failover may count as two failed deliveries.
func (g *Groups) Nack(ctx context.Context, req *groupv1.NackRequest) (*groupv1.NackResponse, error) {
	var resp *groupv1.NackResponse
	err := g.call(ctx, req.GetGroupId(), func(ctx context.Context, cl groupv1.GroupCoordinatorServiceClient) error {
		var err error
		if resp, err = cl.Nack(ctx, req); err != nil {
			return err
		}
		return codeErr(resp.GetErrorCode(), resp.GetErrorMessage())
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// DescribeConfig answers a group's settings (max.delivery.attempts,
// dlq.topic), defaults included.
func (g *Groups) DescribeConfig(ctx context.Context, group string) (map[string]string, error) {
	var resp *groupv1.DescribeGroupConfigResponse
	err := g.call(ctx, group, func(ctx context.Context, cl groupv1.GroupCoordinatorServiceClient) error {
		var err error
		if resp, err = cl.DescribeGroupConfig(ctx, &groupv1.DescribeGroupConfigRequest{GroupId: group}); err != nil {
			return err
		}
		return codeErr(resp.GetErrorCode(), resp.GetErrorMessage())
	})
	if err != nil {
		return nil, err
	}
	return resp.GetConfigs(), nil
}

// AlterConfig sets some of a group's settings ("" resets one to its
// default) and answers all of them.
func (g *Groups) AlterConfig(ctx context.Context, group string, set map[string]string) (map[string]string, error) {
	var resp *groupv1.AlterGroupConfigResponse
	err := g.call(ctx, group, func(ctx context.Context, cl groupv1.GroupCoordinatorServiceClient) error {
		var err error
		if resp, err = cl.AlterGroupConfig(ctx, &groupv1.AlterGroupConfigRequest{GroupId: group, Configs: set}); err != nil {
			return err
		}
		return codeErr(resp.GetErrorCode(), resp.GetErrorMessage())
	})
	if err != nil {
		return nil, err
	}
	return resp.GetConfigs(), nil
}
