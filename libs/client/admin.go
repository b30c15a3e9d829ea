package client

import (
	"context"

	controllerv1 "skein/gen/skein/controller/v1"
	controllerv1grpc "skein/gen/skein/controller/v1/controllerv1grpc"
	"skein/libs/errs"
)

// TopicSpec is a topic to create.
type TopicSpec struct {
	Name string
	// Partitions 0 lets the controller choose its default (1).
	Partitions int32
	// ReplicationFactor 0 lets the controller choose min(3, live brokers).
	ReplicationFactor int32
	Configs           map[string]string
}

// topicErr turns a controller's per-topic result into an error.
func topicErr(r *controllerv1.TopicResult) error {
	if r == nil {
		return errs.Errorf(errs.UnknownServerError, "the controller answered no result")
	}
	if code := r.GetErrorCode(); code != 0 {
		return errs.Errorf(errs.ForCode(errs.Code(code)), "%s", r.GetErrorMessage())
	}
	return nil
}

// CreateTopic creates a topic and answers its id. The metadata snapshot may
// not hold it yet: see WaitMetadata.
func (c *Client) CreateTopic(ctx context.Context, t TopicSpec) (topicID string, err error) {
	var resp *controllerv1.CreateTopicsResponse
	err = c.callController(ctx, func(ctx context.Context, cl controllerv1grpc.ControllerServiceClient) error {
		var err error
		resp, err = cl.CreateTopics(ctx, &controllerv1.CreateTopicsRequest{Topics: []*controllerv1.CreatableTopic{{
			Name: t.Name, Partitions: t.Partitions, ReplicationFactor: t.ReplicationFactor, Configs: t.Configs,
		}}})
		return err
	})
	if err != nil {
		return "", err
	}
	for _, r := range resp.GetTopics() {
		if r.GetName() == t.Name {
			return r.GetTopicId(), topicErr(r)
		}
	}
	return "", topicErr(nil)
}

// DeleteTopic deletes a topic.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	var resp *controllerv1.DeleteTopicsResponse
	err := c.callController(ctx, func(ctx context.Context, cl controllerv1grpc.ControllerServiceClient) error {
		var err error
		resp, err = cl.DeleteTopics(ctx, &controllerv1.DeleteTopicsRequest{Names: []string{name}})
		return err
	})
	if err != nil {
		return err
	}
	for _, r := range resp.GetTopics() {
		if r.GetName() == name {
			return topicErr(r)
		}
	}
	return topicErr(nil)
}

// CreatePartitions grows a topic to count partitions.
func (c *Client) CreatePartitions(ctx context.Context, topic string, count int32) error {
	var resp *controllerv1.CreatePartitionsResponse
	err := c.callController(ctx, func(ctx context.Context, cl controllerv1grpc.ControllerServiceClient) error {
		var err error
		resp, err = cl.CreatePartitions(ctx, &controllerv1.CreatePartitionsRequest{Topics: []*controllerv1.PartitionCount{{Name: topic, Count: count}}})
		return err
	})
	if err != nil {
		return err
	}
	for _, r := range resp.GetTopics() {
		if r.GetName() == topic {
			return topicErr(r)
		}
	}
	return topicErr(nil)
}

// AlterConfigs sets topic configs; an empty value removes the override.
func (c *Client) AlterConfigs(ctx context.Context, topic string, configs map[string]string) error {
	var resp *controllerv1.AlterConfigsResponse
	err := c.callController(ctx, func(ctx context.Context, cl controllerv1grpc.ControllerServiceClient) error {
		var err error
		resp, err = cl.AlterConfigs(ctx, &controllerv1.AlterConfigsRequest{Topic: topic, Configs: configs})
		return err
	})
	if err != nil {
		return err
	}
	return topicErr(resp.GetResult())
}

// ElectLeaders runs preferred or unclean elections on partitions (nil: all)
// and answers the controller's per-partition results.
func (c *Client) ElectLeaders(ctx context.Context, typ controllerv1.ElectionType, partitions []*controllerv1.TopicPartitions) ([]*controllerv1.ElectionResult, error) {
	var resp *controllerv1.ElectLeadersResponse
	err := c.callController(ctx, func(ctx context.Context, cl controllerv1grpc.ControllerServiceClient) error {
		var err error
		resp, err = cl.ElectLeaders(ctx, &controllerv1.ElectLeadersRequest{Type: typ, Partitions: partitions})
		return err
	})
	return resp.GetResults(), err
}

// DescribeCluster answers the brokers, controllers and coordinators as the
// controller sees them.
func (c *Client) DescribeCluster(ctx context.Context) (*controllerv1.DescribeClusterResponse, error) {
	var resp *controllerv1.DescribeClusterResponse
	err := c.callController(ctx, func(ctx context.Context, cl controllerv1grpc.ControllerServiceClient) error {
		var err error
		resp, err = cl.DescribeCluster(ctx, &controllerv1.DescribeClusterRequest{})
		return err
	})
	return resp, err
}
