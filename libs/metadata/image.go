package metadata

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/acl"
)

// BrokerID is a storage node's id; NoLeader (-1) marks an offline partition.
type BrokerID int32

// NoLeader is the leader of a partition that has none.
const NoLeader BrokerID = -1

// Version is a metadata version: the Raft index of the last change applied.
type Version uint64

type coordKey struct {
	kind controllerv1.CoordinatorKind
	id   int32
}

// Image is the cluster metadata at one version. The zero value is not usable:
// build one with New or FromProto.
type Image struct {
	clusterID      string
	version        Version
	nextProducerID int64 // the first producer id not yet handed out; never decreases
	// filtered: a client's view under an authorizer, holding only the
	// topics it may describe (see Filtered).
	filtered bool

	brokers map[BrokerID]*controllerv1.BrokerRecord
	topics  map[string]*controllerv1.TopicRecord // by name
	topicID map[string]string                    // topic id -> name
	// partitions[name][p] is partition p; len == the topic's partition count.
	partitions   map[string][]*controllerv1.PartitionRecord
	coordinators map[coordKey]*controllerv1.CoordinatorRecord
	// assignments[kind][p] is the owner of the internal topic's partition p.
	assignments map[controllerv1.CoordinatorKind]map[int32]*controllerv1.CoordinatorAssignmentRecord
	acls        map[acl.Binding]struct{}
}

// New returns an empty image of the named cluster at version 0.
func New(clusterID string) *Image {
	return &Image{
		clusterID:    clusterID,
		brokers:      map[BrokerID]*controllerv1.BrokerRecord{},
		topics:       map[string]*controllerv1.TopicRecord{},
		topicID:      map[string]string{},
		partitions:   map[string][]*controllerv1.PartitionRecord{},
		coordinators: map[coordKey]*controllerv1.CoordinatorRecord{},
		assignments:  map[controllerv1.CoordinatorKind]map[int32]*controllerv1.CoordinatorAssignmentRecord{},
		acls:         map[acl.Binding]struct{}{},
	}
}

// FromProto builds an image from its protobuf form; it refuses an image whose
// records contradict each other (a partition of an unknown topic, say).
func FromProto(p *controllerv1.MetadataImage) (*Image, error) {
	if p == nil {
		return nil, fmt.Errorf("metadata: nil image")
	}
	im := New(p.GetClusterId())
	recs := make([]*controllerv1.MetadataRecord, 0, len(p.GetBrokers())+len(p.GetTopics())+len(p.GetPartitions())+len(p.GetCoordinators())+len(p.GetCoordinatorAssignments())+1)
	for _, b := range p.GetBrokers() {
		recs = append(recs, BrokerRecord(b))
	}
	for _, t := range p.GetTopics() {
		recs = append(recs, TopicRecord(t))
	}
	parts := slices.Clone(p.GetPartitions())
	// Partitions arrive in any order; append them in index order.
	slices.SortStableFunc(parts, func(a, b *controllerv1.PartitionRecord) int {
		if a.GetPartition() != b.GetPartition() {
			return int(a.GetPartition()) - int(b.GetPartition())
		}
		return 0
	})
	for _, pr := range parts {
		recs = append(recs, PartitionRecord(pr))
	}
	for _, c := range p.GetCoordinators() {
		recs = append(recs, CoordinatorRecord(c))
	}
	for _, a := range p.GetCoordinatorAssignments() {
		recs = append(recs, AssignmentRecord(a))
	}
	for _, a := range p.GetAcls() {
		recs = append(recs, &controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_Acl{Acl: a}})
	}
	recs = append(recs, &controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_ProducerIds{
		ProducerIds: &controllerv1.ProducerIdsRecord{NextProducerId: p.GetNextProducerId()}}})
	if err := im.Apply(&controllerv1.MetadataDelta{Version: p.GetVersion(), Records: recs}); err != nil {
		return nil, err
	}
	im.filtered = p.GetFiltered()
	return im, nil
}

// Clone returns an independent copy (records are shared: they are immutable).
func (im *Image) Clone() *Image {
	c := &Image{
		clusterID:      im.clusterID,
		version:        im.version,
		nextProducerID: im.nextProducerID,
		filtered:       im.filtered,
		brokers:        maps.Clone(im.brokers),
		topics:         maps.Clone(im.topics),
		topicID:        maps.Clone(im.topicID),
		partitions:     make(map[string][]*controllerv1.PartitionRecord, len(im.partitions)),
		coordinators:   maps.Clone(im.coordinators),
		assignments:    make(map[controllerv1.CoordinatorKind]map[int32]*controllerv1.CoordinatorAssignmentRecord, len(im.assignments)),
		acls:           maps.Clone(im.acls),
	}
	for k, v := range im.partitions {
		c.partitions[k] = slices.Clone(v)
	}
	for k, v := range im.assignments {
		c.assignments[k] = maps.Clone(v)
	}
	return c
}

// Filtered reports whether the image is a client's view under an
// authorizer: it holds only the topics the client may describe, so a topic
// it lacks may exist all the same.
func (im *Image) Filtered() bool { return im.filtered }

// ClusterID is the cluster's id ("" until the controller bootstrapped it).
func (im *Image) ClusterID() string { return im.clusterID }

// SetClusterID names the cluster; the controller does it once, at bootstrap.
func (im *Image) SetClusterID(id string) { im.clusterID = id }

// Version is the Raft index of the last change the image holds.
func (im *Image) Version() Version { return im.version }

// NextProducerID is the first producer id not yet handed out.
func (im *Image) NextProducerID() int64 { return im.nextProducerID }

// Broker returns a broker's registration.
func (im *Image) Broker(id BrokerID) (*controllerv1.BrokerRecord, bool) {
	b, ok := im.brokers[id]
	return b, ok
}

// Brokers returns every registered broker, fenced or not, by id.
func (im *Image) Brokers() []*controllerv1.BrokerRecord {
	out := slices.Collect(maps.Values(im.brokers))
	slices.SortFunc(out, func(a, b *controllerv1.BrokerRecord) int { return int(a.GetId()) - int(b.GetId()) })
	return out
}

// LiveBrokers returns the unfenced brokers, by id.
func (im *Image) LiveBrokers() []*controllerv1.BrokerRecord {
	return slices.DeleteFunc(im.Brokers(), func(b *controllerv1.BrokerRecord) bool { return b.GetFenced() })
}

// IsLive reports whether the broker is registered and unfenced.
func (im *Image) IsLive(id BrokerID) bool {
	b, ok := im.brokers[id]
	return ok && !b.GetFenced()
}

// Topic returns a topic by name.
func (im *Image) Topic(name string) (*controllerv1.TopicRecord, bool) {
	t, ok := im.topics[name]
	return t, ok
}

// TopicByID returns a topic by id.
func (im *Image) TopicByID(id string) (*controllerv1.TopicRecord, bool) {
	name, ok := im.topicID[id]
	if !ok {
		return nil, false
	}
	return im.Topic(name)
}

// Topics returns every topic, by name.
func (im *Image) Topics() []*controllerv1.TopicRecord {
	out := slices.Collect(maps.Values(im.topics))
	slices.SortFunc(out, func(a, b *controllerv1.TopicRecord) int { return compareStrings(a.GetName(), b.GetName()) })
	return out
}

// TopicConfig returns a topic's override of key, if it has one.
func (im *Image) TopicConfig(topic, key string) (string, bool) {
	t, ok := im.topics[topic]
	if !ok {
		return "", false
	}
	v, ok := t.GetConfigs()[key]
	return v, ok
}

// Partition returns one partition's state.
func (im *Image) Partition(topic string, partition int32) (*controllerv1.PartitionRecord, bool) {
	ps := im.partitions[topic]
	if partition < 0 || int(partition) >= len(ps) {
		return nil, false
	}
	return ps[partition], true
}

// Partitions returns a topic's partitions in index order (nil for an unknown topic).
func (im *Image) Partitions(topic string) []*controllerv1.PartitionRecord {
	return slices.Clone(im.partitions[topic])
}

// PartitionCount is the number of partitions of a topic (0 if unknown).
func (im *Image) PartitionCount(topic string) int32 { return int32(len(im.partitions[topic])) }

// Leader returns a partition's leader (NoLeader when offline).
func (im *Image) Leader(topic string, partition int32) (BrokerID, bool) {
	p, ok := im.Partition(topic, partition)
	if !ok {
		return NoLeader, false
	}
	return BrokerID(p.GetLeader()), true
}

// LeaderAndEpoch returns a partition's leader and leader epoch; ok is false
// when the partition is unknown or has no leader.
func (im *Image) LeaderAndEpoch(topic string, partition int32) (leader BrokerID, epoch int32, ok bool) {
	p, found := im.Partition(topic, partition)
	if !found || p.GetLeader() < 0 {
		return NoLeader, 0, false
	}
	return BrokerID(p.GetLeader()), p.GetLeaderEpoch(), true
}

// Available lists the partitions of a topic that have a leader, in index order.
func (im *Image) Available(topic string) []int32 {
	var out []int32
	for i, p := range im.partitions[topic] {
		if p.GetLeader() >= 0 {
			out = append(out, int32(i))
		}
	}
	return out
}

// OfflinePartitions counts partitions without a leader.
func (im *Image) OfflinePartitions() int {
	n := 0
	for _, ps := range im.partitions {
		for _, p := range ps {
			if p.GetLeader() < 0 {
				n++
			}
		}
	}
	return n
}

// UnderReplicatedPartitions counts partitions whose ISR is smaller than their
// replica set.
func (im *Image) UnderReplicatedPartitions() int {
	n := 0
	for _, ps := range im.partitions {
		for _, p := range ps {
			if len(p.GetIsr()) < len(p.GetReplicas()) {
				n++
			}
		}
	}
	return n
}

// Coordinator returns a coordinator process of a kind.
func (im *Image) Coordinator(kind controllerv1.CoordinatorKind, id int32) (*controllerv1.CoordinatorRecord, bool) {
	c, ok := im.coordinators[coordKey{kind, id}]
	return c, ok
}

// Coordinators returns every known coordinator process, by kind then id.
func (im *Image) Coordinators() []*controllerv1.CoordinatorRecord {
	out := slices.Collect(maps.Values(im.coordinators))
	slices.SortFunc(out, func(a, b *controllerv1.CoordinatorRecord) int {
		if a.GetKind() != b.GetKind() {
			return int(a.GetKind()) - int(b.GetKind())
		}
		return int(a.GetId()) - int(b.GetId())
	})
	return out
}

// Assignment returns who owns partition p of a kind's internal topic.
func (im *Image) Assignment(kind controllerv1.CoordinatorKind, partition int32) (*controllerv1.CoordinatorAssignmentRecord, bool) {
	a, ok := im.assignments[kind][partition]
	return a, ok
}

// Assignments returns a kind's assignments by partition.
func (im *Image) Assignments(kind controllerv1.CoordinatorKind) []*controllerv1.CoordinatorAssignmentRecord {
	out := slices.Collect(maps.Values(im.assignments[kind]))
	slices.SortFunc(out, func(a, b *controllerv1.CoordinatorAssignmentRecord) int {
		return int(a.GetPartition()) - int(b.GetPartition())
	})
	return out
}

// CoordinatorOwner is the answer to "who coordinates this group (or
// transactional id)".
type CoordinatorOwner struct {
	Partition int32 // partition of the internal topic the key hashes to
	NodeID    int32 // the owning coordinator's id
	Epoch     int32 // the coordinator epoch of that ownership
	GRPCAddr  string
}

// CoordinatorFor answers the coordinator owning key (a group id for
// COORDINATOR_KIND_GROUP, a transactional id for COORDINATOR_KIND_TRANSACTION):
// the key's partition of the internal topic, and that partition's owner. ok is
// false while the internal topic does not exist or the partition has no live
// owner.
func (im *Image) CoordinatorFor(kind controllerv1.CoordinatorKind, key string) (CoordinatorOwner, bool) {
	topic, ok := InternalTopic(kind)
	if !ok {
		return CoordinatorOwner{}, false
	}
	p := CoordinatorPartition(key, im.PartitionCount(topic))
	if p < 0 {
		return CoordinatorOwner{}, false
	}
	out := CoordinatorOwner{Partition: p, NodeID: -1}
	a, ok := im.assignments[kind][p]
	if !ok || a.GetOwner() < 0 {
		return out, false
	}
	c, ok := im.coordinators[coordKey{kind, a.GetOwner()}]
	if !ok || !c.GetAlive() {
		return out, false
	}
	out.NodeID, out.Epoch, out.GRPCAddr = a.GetOwner(), a.GetCoordinatorEpoch(), c.GetGrpcAddr()
	return out, true
}

// ToProto returns the image in its protobuf form, every list in a fixed order
// (brokers by id, topics by name, partitions by topic then index), so two equal
// images marshal to equal bytes.
func (im *Image) ToProto() *controllerv1.MetadataImage {
	out := &controllerv1.MetadataImage{
		ClusterId:      im.clusterID,
		Version:        uint64(im.version),
		NextProducerId: im.nextProducerID,
		Filtered:       im.filtered,
	}
	for _, b := range im.Brokers() {
		out.Brokers = append(out.Brokers, proto.CloneOf(b))
	}
	for _, t := range im.Topics() {
		out.Topics = append(out.Topics, proto.CloneOf(t))
		for _, p := range im.partitions[t.GetName()] {
			out.Partitions = append(out.Partitions, proto.CloneOf(p))
		}
	}
	out.Coordinators = cloneAll(im.Coordinators())
	for _, kind := range []controllerv1.CoordinatorKind{controllerv1.CoordinatorKind_COORDINATOR_KIND_GROUP, controllerv1.CoordinatorKind_COORDINATOR_KIND_TRANSACTION} {
		out.CoordinatorAssignments = append(out.CoordinatorAssignments, cloneAll(im.Assignments(kind))...)
	}
	for _, b := range im.Acls() {
		out.Acls = append(out.Acls, AclOf(b))
	}
	return out
}

func cloneAll[M proto.Message](in []M) []M {
	out := make([]M, len(in))
	for i, m := range in {
		out[i] = proto.CloneOf(m)
	}
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// The WatchMetadata stream's liveness contract. A quiet stream is
// ambiguous: no change, or a controller cut off from the quorum whose
// metadata has gone stale. A controller in contact with its quorum sends an
// empty delta at the version the watcher holds every WatchHeartbeat; a
// watcher that hears nothing for WatchSilence moves to another controller.
const (
	WatchHeartbeat = time.Second
	WatchSilence   = 3 * WatchHeartbeat
)

// ControllerLeaderHeader is the gRPC response header in which a follower
// controller that passed a call on to the Raft leader names the leader's
// gRPC address, so that a caller sending calls often (a storage node's
// heartbeats) can send the next ones there directly.
const ControllerLeaderHeader = "skein-controller-leader"
