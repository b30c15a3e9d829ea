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

// ElectionType is the kind of leader election ElectLeaders runs.
type ElectionType int

const (
	// PreferredElection moves leadership back to each partition's first
	// replica when it is in sync.
	PreferredElection ElectionType = iota + 1
	// UncleanElection gives an offline partition a leader outside its ISR,
	// at the risk of losing acknowledged records.
	UncleanElection
)

func (t ElectionType) proto() (controllerv1.ElectionType, error) {
	switch t {
	case PreferredElection:
		return controllerv1.ElectionType_ELECTION_TYPE_PREFERRED, nil
	case UncleanElection:
		return controllerv1.ElectionType_ELECTION_TYPE_UNCLEAN, nil
	}
	return 0, errs.Errorf(errs.InvalidRequest, "unknown election type %d", t)
}

// TopicPartitions names partitions of a topic; no Partitions: all of them.
type TopicPartitions struct {
	Topic      string
	Partitions []int32
}

// ElectionResult is one partition's election: its leader afterwards, and
// the refusal (an errs row, ELECTION_NOT_NEEDED say) when there was one.
type ElectionResult struct {
	Topic     string
	Partition int32
	Leader    int32
	Err       error
}

// ElectLeaders runs preferred or unclean elections on partitions (nil: all)
// and answers the per-partition results.
func (c *Client) ElectLeaders(ctx context.Context, typ ElectionType, partitions []TopicPartitions) ([]ElectionResult, error) {
	pt, err := typ.proto()
	if err != nil {
		return nil, err
	}
	req := &controllerv1.ElectLeadersRequest{Type: pt}
	for _, tp := range partitions {
		req.Partitions = append(req.Partitions, &controllerv1.TopicPartitions{Topic: tp.Topic, Partitions: tp.Partitions})
	}
	var resp *controllerv1.ElectLeadersResponse
	err = c.callController(ctx, func(ctx context.Context, cl controllerv1grpc.ControllerServiceClient) error {
		var err error
		resp, err = cl.ElectLeaders(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]ElectionResult, 0, len(resp.GetResults()))
	for _, r := range resp.GetResults() {
		res := ElectionResult{Topic: r.GetTopic(), Partition: r.GetPartition(), Leader: r.GetLeader()}
		if code := r.GetErrorCode(); code != 0 {
			res.Err = errs.Errorf(errs.ForCode(errs.Code(code)), "%s", r.GetErrorMessage())
		}
		out = append(out, res)
	}
	return out, nil
}

// Cluster is the cluster as the controller sees it.
type Cluster struct {
	ClusterID    string
	ControllerID int32  // the controller quorum's leader
	Version      uint64 // the metadata version the answer is from
	Brokers      []Broker
	Controllers  []ControllerNode
	Coordinators []CoordinatorNode
}

// BrokerState is a storage node's standing with the controller.
type BrokerState int

const (
	// BrokerAlive is a registered broker with a live session.
	BrokerAlive BrokerState = iota
	// BrokerFenced leads nothing and is in no ISR.
	BrokerFenced
)

// String is "ALIVE" or "FENCED".
func (s BrokerState) String() string {
	if s == BrokerFenced {
		return "FENCED"
	}
	return "ALIVE"
}

// Broker is a storage node.
type Broker struct {
	ID    int32
	Addr  string // gRPC address
	Rack  string
	State BrokerState
}

// ControllerNode is a member of the controller quorum.
type ControllerNode struct {
	ID     int32
	Addr   string
	Leader bool
	// State is "ALIVE" or "DEAD" as gossip seen from the controller that
	// answered; "" when it runs without gossip.
	State string
}

// CoordinatorNode is a group or transaction coordinator process.
type CoordinatorNode struct {
	ID    int32
	Kind  CoordinatorKind
	Addr  string // gRPC address
	Alive bool
}

// DescribeCluster answers the brokers, controllers and coordinators as the
// controller sees them.
func (c *Client) DescribeCluster(ctx context.Context) (Cluster, error) {
	var resp *controllerv1.DescribeClusterResponse
	err := c.callController(ctx, func(ctx context.Context, cl controllerv1grpc.ControllerServiceClient) error {
		var err error
		resp, err = cl.DescribeCluster(ctx, &controllerv1.DescribeClusterRequest{})
		return err
	})
	if err != nil {
		return Cluster{}, err
	}
	out := Cluster{ClusterID: resp.GetClusterId(), ControllerID: resp.GetControllerId(), Version: resp.GetVersion()}
	for _, b := range resp.GetBrokers() {
		st := BrokerAlive
		if b.GetFenced() {
			st = BrokerFenced
		}
		out.Brokers = append(out.Brokers, Broker{ID: b.GetId(), Addr: b.GetGrpcAddr(), Rack: b.GetRack(), State: st})
	}
	for _, n := range resp.GetControllers() {
		out.Controllers = append(out.Controllers, ControllerNode{ID: n.GetId(), Addr: n.GetAddr(), Leader: n.GetLeader(), State: n.GetState()})
	}
	for _, co := range resp.GetCoordinators() {
		out.Coordinators = append(out.Coordinators, CoordinatorNode{ID: co.GetId(), Kind: kindOf(co.GetKind()), Addr: co.GetGrpcAddr(), Alive: co.GetAlive()})
	}
	return out, nil
}
