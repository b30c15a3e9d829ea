package clienttest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	controllerv1 "skein/gen/skein/controller/v1"
	controllerv1grpc "skein/gen/skein/controller/v1/controllerv1grpc"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/libs/rpcerr"
	"skein/libs/topicconfig"
)

// Controller is a fake controller quorum of one.
type Controller struct {
	controllerv1grpc.UnimplementedControllerServiceServer

	mu         sync.Mutex
	clusterID  string
	version    uint64
	brokers    map[int32]*controllerv1.BrokerRecord
	topics     map[string]*controllerv1.TopicRecord
	partitions map[string][]*controllerv1.PartitionRecord
	nextPID    int64
	nextTopic  int
	watchers   map[chan *controllerv1.WatchMetadataResponse]bool
	pidCalls   int
	pidRefusal error // AllocateProducerIds answers it when set
	addr       string
	paused     bool                                  // deltas wait in held
	held       []*controllerv1.WatchMetadataResponse // guarded by mu
	coords     map[int32]*controllerv1.CoordinatorRecord
	coordFor   map[string]int32 // FindCoordinator overrides by key
	// assigns: the owner of partition 0 of each kind's internal topic once
	// MoveCoordinatorFor moved one; coordEpoch is its coordinator epoch.
	assigns    map[controllerv1.CoordinatorKind]*controllerv1.CoordinatorAssignmentRecord
	coordEpoch int32
	acls       *metadata.Image // only its ACL bindings are used
	filtered   bool            // images marked as a client's filtered view
}

// NewController returns a controller with an empty image.
func NewController(clusterID string) *Controller {
	return &Controller{
		clusterID:  clusterID,
		version:    1,
		brokers:    map[int32]*controllerv1.BrokerRecord{},
		topics:     map[string]*controllerv1.TopicRecord{},
		partitions: map[string][]*controllerv1.PartitionRecord{},
		nextPID:    1000,
		watchers:   map[chan *controllerv1.WatchMetadataResponse]bool{},
		coords:     map[int32]*controllerv1.CoordinatorRecord{},
		coordFor:   map[string]int32{},
		assigns:    map[controllerv1.CoordinatorKind]*controllerv1.CoordinatorAssignmentRecord{},
		coordEpoch: 1,
		acls:       metadata.New(""),
	}
}

// publishLocked stamps records with the next version and sends them to
// every watcher.
func (c *Controller) publishLocked(recs ...*controllerv1.MetadataRecord) {
	c.version++
	d := &controllerv1.WatchMetadataResponse{Update: &controllerv1.WatchMetadataResponse_Delta{Delta: &controllerv1.MetadataDelta{Version: c.version, Records: recs}}}
	if c.paused {
		c.held = append(c.held, d)
		return
	}
	c.sendLocked(d)
}

func (c *Controller) sendLocked(d *controllerv1.WatchMetadataResponse) {
	for w := range c.watchers {
		select {
		case w <- d:
		default: // a watcher that falls behind is cut off, as the real one would get a new image
			close(w)
			delete(c.watchers, w)
		}
	}
}

func (c *Controller) imageLocked() *controllerv1.MetadataImage {
	im := &controllerv1.MetadataImage{ClusterId: c.clusterID, Version: c.version, NextProducerId: c.nextPID}
	for _, id := range slices.Sorted(maps.Keys(c.brokers)) {
		im.Brokers = append(im.Brokers, c.brokers[id])
	}
	for _, name := range slices.Sorted(maps.Keys(c.topics)) {
		im.Topics = append(im.Topics, c.topics[name])
		im.Partitions = append(im.Partitions, c.partitions[name]...)
	}
	for _, id := range slices.Sorted(maps.Keys(c.coords)) {
		im.Coordinators = append(im.Coordinators, c.coords[id])
	}
	for _, k := range slices.Sorted(maps.Keys(c.assigns)) {
		im.CoordinatorAssignments = append(im.CoordinatorAssignments, c.assigns[k])
	}
	im.Acls = c.acls.ToProto().GetAcls()
	im.Filtered = c.filtered
	return im
}

// SetFiltered marks the images of the watches started after it as a
// client's view under an authorizer (the topics it may describe only),
// as a controller does for a client's certificate.
func (c *Controller) SetFiltered(filtered bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.filtered = filtered
}

// CreateAcls adds the valid bindings, as the controller's state machine does.
func (c *Controller) CreateAcls(_ context.Context, req *controllerv1.CreateAclsRequest) (*controllerv1.CreateAclsResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := &controllerv1.CreateAclsResponse{}
	for _, r := range req.GetAcls() {
		b, err := metadata.Binding(r).ValidateNew()
		if err == nil && !c.acls.HasAcl(b) {
			rec := metadata.AclRecord(b)
			if err = c.acls.Apply(&controllerv1.MetadataDelta{Records: []*controllerv1.MetadataRecord{rec}}); err == nil {
				c.publishLocked(rec)
			}
		}
		resp.Results = append(resp.Results, &controllerv1.AclResult{ErrorCode: int32(errs.CodeOf(err)), ErrorMessage: errs.Message(err)})
	}
	return resp, nil
}

// DeleteAcls removes the bindings each filter selects (exact fields, zero
// for any).
func (c *Controller) DeleteAcls(_ context.Context, req *controllerv1.DeleteAclsRequest) (*controllerv1.DeleteAclsResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := &controllerv1.DeleteAclsResponse{}
	for _, f := range req.GetFilters() {
		res := &controllerv1.AclFilterResult{}
		for _, b := range c.acls.MatchingAcls(metadata.AclFilter(f)) {
			rec := metadata.RemovedAclRecord(b)
			if err := c.acls.Apply(&controllerv1.MetadataDelta{Records: []*controllerv1.MetadataRecord{rec}}); err != nil {
				return nil, err
			}
			c.publishLocked(rec)
			res.Deleted = append(res.Deleted, metadata.AclOf(b))
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

// Pause holds back metadata changes from watchers (the state changes at
// once, as the storage nodes see it): watchers see stale metadata until Resume.
func (c *Controller) Pause() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paused = true
}

// Resume sends the held changes and lets later ones through.
func (c *Controller) Resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paused = false
	for _, d := range c.held {
		c.sendLocked(d)
	}
	c.held = nil
}

// AddBroker registers (or re-registers) a live broker.
func (c *Controller) AddBroker(id int32, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := &controllerv1.BrokerRecord{Id: id, GrpcAddr: addr, BrokerEpoch: int64(c.version)}
	c.brokers[id] = b
	c.publishLocked(&controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_Broker{Broker: b}})
}

// FenceBroker marks a broker fenced (or live again).
func (c *Controller) FenceBroker(id int32, fenced bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := proto.Clone(c.brokers[id]).(*controllerv1.BrokerRecord)
	b.Fenced = fenced
	c.brokers[id] = b
	c.publishLocked(&controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_Broker{Broker: b}})
}

// SetLeader moves a partition's leadership (bumping its leader epoch) and
// publishes the change.
func (c *Controller) SetLeader(topic string, partition, leader int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := proto.Clone(c.partitions[topic][partition]).(*controllerv1.PartitionRecord)
	p.Leader = leader
	p.LeaderEpoch++
	p.PartitionEpoch++
	c.partitions[topic][partition] = p
	c.publishLocked(&controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_Partition{Partition: p}})
}

// LoseLastReplica takes a partition offline as the controllers do when its
// last in-sync replica comes back without its logs: no leader, an empty
// ISR, and the lost replica with the directory id it had.
func (c *Controller) LoseLastReplica(topic string, partition, broker int32, logDirID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := proto.Clone(c.partitions[topic][partition]).(*controllerv1.PartitionRecord)
	p.Leader, p.Isr = -1, []int32{}
	p.LostIsrReplica = &controllerv1.LostReplica{Broker: broker, LogDirId: logDirID}
	p.LeaderEpoch++
	p.PartitionEpoch++
	c.partitions[topic][partition] = p
	c.publishLocked(&controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_Partition{Partition: p}})
}

// Leader answers a partition's leader and epoch; ok is false for an unknown
// partition.
func (c *Controller) Leader(topic string, partition int32) (leader, epoch int32, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := c.partitions[topic]
	if partition < 0 || int(partition) >= len(ps) {
		return -1, 0, false
	}
	return ps[partition].GetLeader(), ps[partition].GetLeaderEpoch(), true
}

// TopicConfig answers a topic's effective config.
func (c *Controller) TopicConfig(topic string) (topicconfig.Config, bool) {
	c.mu.Lock()
	t, ok := c.topics[topic]
	c.mu.Unlock()
	if !ok {
		return topicconfig.Config{}, false
	}
	cfg, err := topicconfig.Parse(t.GetConfigs())
	return cfg, err == nil
}

// ProducerIDCalls counts AllocateProducerIds calls.
func (c *Controller) ProducerIDCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pidCalls
}

// WatchMetadata sends the image, then every change.
func (c *Controller) WatchMetadata(req *controllerv1.WatchMetadataRequest, stream controllerv1grpc.ControllerService_WatchMetadataServer) error {
	ch := make(chan *controllerv1.WatchMetadataResponse, 1024)
	c.mu.Lock()
	im := c.imageLocked()
	c.watchers[ch] = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.watchers[ch] {
			delete(c.watchers, ch)
		}
		c.mu.Unlock()
	}()
	if err := stream.Send(&controllerv1.WatchMetadataResponse{Update: &controllerv1.WatchMetadataResponse_Image{Image: im}}); err != nil {
		return err
	}
	sent := im.GetVersion()
	heartbeat := time.NewTicker(metadata.WatchHeartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-heartbeat.C: // as a controller in contact with its quorum does
			if err := stream.Send(&controllerv1.WatchMetadataResponse{Update: &controllerv1.WatchMetadataResponse_Delta{Delta: &controllerv1.MetadataDelta{Version: sent}}}); err != nil {
				return err
			}
		case d, ok := <-ch:
			if !ok {
				return rpcerr.ToGRPC(errs.Errorf(errs.RequestTimedOut, "watcher fell behind"))
			}
			sent = d.GetDelta().GetVersion()
			if err := stream.Send(d); err != nil {
				return err
			}
		case <-stream.Context().Done():
			return nil
		}
	}
}

// RefuseProducerIDs makes AllocateProducerIds answer err (nil: serve
// again), as a controller refuses a client that may write no topic.
func (c *Controller) RefuseProducerIDs(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pidRefusal = err
}

// AllocateProducerIds hands out the next block.
func (c *Controller) AllocateProducerIds(_ context.Context, req *controllerv1.AllocateProducerIdsRequest) (*controllerv1.AllocateProducerIdsResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pidCalls++
	if c.pidRefusal != nil {
		return nil, rpcerr.ToGRPC(c.pidRefusal)
	}
	n := req.GetCount()
	if n <= 0 {
		n = 1000
	}
	first := c.nextPID
	c.nextPID += int64(n)
	return &controllerv1.AllocateProducerIdsResponse{FirstProducerId: first, Count: n}, nil
}

// DescribeCluster lists the brokers and this one controller.
func (c *Controller) DescribeCluster(context.Context, *controllerv1.DescribeClusterRequest) (*controllerv1.DescribeClusterResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	im := c.imageLocked()
	return &controllerv1.DescribeClusterResponse{
		ClusterId: c.clusterID, ControllerId: 1, Brokers: im.Brokers, Version: c.version,
		Controllers: []*controllerv1.ControllerNode{{Id: 1, Addr: c.addr, Leader: true}},
	}, nil
}

func result(name string, err error) *controllerv1.TopicResult {
	return &controllerv1.TopicResult{Name: name, ErrorCode: int32(errs.CodeOf(err)), ErrorMessage: errs.Message(err)}
}

// CreateTopics creates topics with leaders spread round-robin.
func (c *Controller) CreateTopics(_ context.Context, req *controllerv1.CreateTopicsRequest) (*controllerv1.CreateTopicsResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := &controllerv1.CreateTopicsResponse{}
	for _, t := range req.GetTopics() {
		id, err := c.createLocked(t, req.GetValidateOnly())
		r := result(t.GetName(), err)
		r.TopicId = id
		resp.Topics = append(resp.Topics, r)
	}
	return resp, nil
}

func (c *Controller) liveLocked() []int32 {
	var live []int32
	for _, id := range slices.Sorted(maps.Keys(c.brokers)) {
		if !c.brokers[id].GetFenced() {
			live = append(live, id)
		}
	}
	return live
}

func (c *Controller) createLocked(t *controllerv1.CreatableTopic, validateOnly bool) (string, error) {
	if _, ok := c.topics[t.GetName()]; ok {
		return "", errs.Errorf(errs.TopicAlreadyExists, "topic %q already exists", t.GetName())
	}
	live := c.liveLocked()
	parts, rf := t.GetPartitions(), t.GetReplicationFactor()
	if parts == 0 {
		parts = 1
	}
	if rf == 0 {
		rf = int32(min(3, len(live)))
	}
	switch {
	case parts < 0:
		return "", errs.Errorf(errs.InvalidPartitions, "partitions must be at least 1, got %d", parts)
	case rf < 1:
		return "", errs.Errorf(errs.InvalidReplicationFactor, "replication factor must be at least 1, got %d", rf)
	case int(rf) > len(live):
		return "", errs.Errorf(errs.InvalidReplicationFactor, "replication factor %d is above the %d live brokers", rf, len(live))
	}
	if err := topicconfig.Validate(t.GetConfigs()); err != nil {
		return "", err
	}
	if validateOnly {
		return "", nil
	}
	c.nextTopic++
	rec := &controllerv1.TopicRecord{TopicId: fmt.Sprintf("topic-%d", c.nextTopic), Name: t.GetName(), Configs: topicconfig.Normalize(t.GetConfigs())} // kept as the controllers keep them
	recs := []*controllerv1.MetadataRecord{{Record: &controllerv1.MetadataRecord_Topic{Topic: rec}}}
	c.topics[rec.Name] = rec
	for p := int32(0); p < parts; p++ {
		pr := c.newPartitionLocked(rec, p, rf, live)
		recs = append(recs, &controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_Partition{Partition: pr}})
	}
	c.publishLocked(recs...)
	return rec.TopicId, nil
}

func (c *Controller) newPartitionLocked(t *controllerv1.TopicRecord, p, rf int32, live []int32) *controllerv1.PartitionRecord {
	var replicas []int32
	for i := int32(0); i < rf; i++ {
		replicas = append(replicas, live[(int(p)+int(i))%len(live)])
	}
	pr := &controllerv1.PartitionRecord{Topic: t.GetName(), TopicId: t.GetTopicId(), Partition: p, Replicas: replicas, Isr: slices.Clone(replicas), Leader: replicas[0]}
	c.partitions[t.GetName()] = append(c.partitions[t.GetName()], pr)
	return pr
}

// DeleteTopics deletes topics.
func (c *Controller) DeleteTopics(_ context.Context, req *controllerv1.DeleteTopicsRequest) (*controllerv1.DeleteTopicsResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := &controllerv1.DeleteTopicsResponse{}
	for _, name := range req.GetNames() {
		t, ok := c.topics[name]
		if !ok {
			resp.Topics = append(resp.Topics, result(name, errs.Errorf(errs.UnknownTopicOrPartition, "topic %q does not exist", name)))
			continue
		}
		delete(c.topics, name)
		delete(c.partitions, name)
		c.publishLocked(&controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_RemovedTopic{RemovedTopic: &controllerv1.RemovedTopicRecord{TopicId: t.GetTopicId(), Name: name}}})
		resp.Topics = append(resp.Topics, result(name, nil))
	}
	return resp, nil
}

// CreatePartitions grows topics.
func (c *Controller) CreatePartitions(_ context.Context, req *controllerv1.CreatePartitionsRequest) (*controllerv1.CreatePartitionsResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := &controllerv1.CreatePartitionsResponse{}
	for _, pc := range req.GetTopics() {
		t, ok := c.topics[pc.GetName()]
		cur := int32(len(c.partitions[pc.GetName()]))
		switch {
		case !ok:
			resp.Topics = append(resp.Topics, result(pc.GetName(), errs.Errorf(errs.UnknownTopicOrPartition, "topic %q does not exist", pc.GetName())))
			continue
		case pc.GetCount() <= cur:
			resp.Topics = append(resp.Topics, result(pc.GetName(), errs.Errorf(errs.InvalidPartitions, "topic %q has %d partitions; the new count %d must be larger", pc.GetName(), cur, pc.GetCount())))
			continue
		}
		rf := int32(len(c.partitions[pc.GetName()][0].GetReplicas()))
		var recs []*controllerv1.MetadataRecord
		for p := cur; p < pc.GetCount(); p++ {
			recs = append(recs, &controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_Partition{Partition: c.newPartitionLocked(t, p, rf, c.liveLocked())}})
		}
		c.publishLocked(recs...)
		resp.Topics = append(resp.Topics, result(pc.GetName(), nil))
	}
	return resp, nil
}

// AlterConfigs sets topic configs.
func (c *Controller) AlterConfigs(_ context.Context, req *controllerv1.AlterConfigsRequest) (*controllerv1.AlterConfigsResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topics[req.GetTopic()]
	if !ok {
		return &controllerv1.AlterConfigsResponse{Result: result(req.GetTopic(), errs.Errorf(errs.UnknownTopicOrPartition, "topic %q does not exist", req.GetTopic()))}, nil
	}
	next := maps.Clone(t.GetConfigs())
	if next == nil {
		next = map[string]string{}
	}
	for k, v := range topicconfig.Normalize(req.GetConfigs()) { // kept as the controllers keep them
		if v == "" {
			delete(next, k)
		} else {
			next[k] = v
		}
	}
	if err := topicconfig.Validate(next); err != nil {
		return &controllerv1.AlterConfigsResponse{Result: result(req.GetTopic(), err)}, nil
	}
	if !req.GetValidateOnly() {
		nt := proto.Clone(t).(*controllerv1.TopicRecord)
		nt.Configs = next
		c.topics[nt.Name] = nt
		c.publishLocked(&controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_Topic{Topic: nt}})
	}
	return &controllerv1.AlterConfigsResponse{Result: result(req.GetTopic(), nil)}, nil
}

// ElectLeaders moves leadership to the first live replica (preferred), or
// answers ELECTION_NOT_NEEDED where it already is.
func (c *Controller) ElectLeaders(_ context.Context, req *controllerv1.ElectLeadersRequest) (*controllerv1.ElectLeadersResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	want := map[string]bool{}
	for _, tp := range req.GetPartitions() {
		want[tp.GetTopic()] = true
	}
	resp := &controllerv1.ElectLeadersResponse{}
	for _, name := range slices.Sorted(maps.Keys(c.partitions)) {
		if len(want) > 0 && !want[name] {
			continue
		}
		for i, p := range c.partitions[name] {
			r := &controllerv1.ElectionResult{Topic: name, Partition: p.GetPartition(), Leader: p.GetLeader()}
			if pref := p.GetReplicas()[0]; p.GetLeader() == pref {
				r.ErrorCode, r.ErrorMessage = int32(skeinv1.ErrorCode_ELECTION_NOT_NEEDED), "the preferred replica already leads"
			} else {
				np := proto.Clone(p).(*controllerv1.PartitionRecord)
				np.Leader, np.LeaderEpoch, np.PartitionEpoch = pref, np.LeaderEpoch+1, np.PartitionEpoch+1
				c.partitions[name][i] = np
				c.publishLocked(&controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_Partition{Partition: np}})
				r.Leader = pref
			}
			resp.Results = append(resp.Results, r)
		}
	}
	if len(want) > 0 && len(resp.Results) == 0 {
		return nil, rpcerr.ToGRPC(errs.Errorf(errs.UnknownTopicOrPartition, "no such topic"))
	}
	return resp, nil
}

// CutOff is a controller of the same quorum that has been cut off from the
// rest: it accepts connections, sends a watcher its image once and then
// nothing (no changes, no heartbeats), and leaves admin calls unanswered.
type CutOff struct {
	*Controller
}

// WatchMetadata sends the image and then falls silent.
func (c CutOff) WatchMetadata(req *controllerv1.WatchMetadataRequest, stream controllerv1grpc.ControllerService_WatchMetadataServer) error {
	c.mu.Lock()
	im := c.imageLocked()
	c.mu.Unlock()
	if err := stream.Send(&controllerv1.WatchMetadataResponse{Update: &controllerv1.WatchMetadataResponse_Image{Image: im}}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return stream.Context().Err()
}

// CreateTopics never answers.
func (c CutOff) CreateTopics(ctx context.Context, _ *controllerv1.CreateTopicsRequest) (*controllerv1.CreateTopicsResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// DescribeCluster never answers.
func (c CutOff) DescribeCluster(ctx context.Context, _ *controllerv1.DescribeClusterRequest) (*controllerv1.DescribeClusterResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
