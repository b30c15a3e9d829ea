package client

import (
	"fmt"
	"maps"
	"slices"

	controllerv1 "skein/gen/skein/controller/v1"
)

// Metadata is an immutable snapshot of the cluster metadata: the controller's
// image plus the deltas applied since. The records it returns are shared and
// must not be modified.
type Metadata struct {
	clusterID    string
	version      uint64
	brokers      map[int32]*controllerv1.BrokerRecord
	topics       map[string]*topicMeta
	coordinators map[coordKey]*controllerv1.CoordinatorRecord
	// assignments: the owner of every internal-topic partition, by kind.
	assignments map[controllerv1.CoordinatorKind]map[int32]*controllerv1.CoordinatorAssignmentRecord
}

// coordKey names a coordinator process: ids are per kind.
type coordKey struct {
	kind controllerv1.CoordinatorKind
	id   int32
}

// topicMeta is one topic: its record (nil while only partitions are known)
// and its partitions indexed by number (nil where none is known).
type topicMeta struct {
	rec   *controllerv1.TopicRecord
	parts []*controllerv1.PartitionRecord
}

func emptyMetadata() *Metadata {
	return &Metadata{
		brokers:      map[int32]*controllerv1.BrokerRecord{},
		topics:       map[string]*topicMeta{},
		coordinators: map[coordKey]*controllerv1.CoordinatorRecord{},
		assignments:  map[controllerv1.CoordinatorKind]map[int32]*controllerv1.CoordinatorAssignmentRecord{},
	}
}

// MetadataFromImage builds a snapshot from a controller image.
func MetadataFromImage(im *controllerv1.MetadataImage) *Metadata {
	m := emptyMetadata()
	m.clusterID, m.version = im.GetClusterId(), im.GetVersion()
	for _, b := range im.GetBrokers() {
		m.brokers[b.GetId()] = b
	}
	for _, t := range im.GetTopics() {
		m.topics[t.GetName()] = &topicMeta{rec: t}
	}
	for _, p := range im.GetPartitions() {
		m.putPartition(p)
	}
	for _, c := range im.GetCoordinators() {
		m.coordinators[coordKey{c.GetKind(), c.GetId()}] = c
	}
	for _, a := range im.GetCoordinatorAssignments() {
		m.putAssignment(a)
	}
	return m
}

// Apply returns the snapshot moved to delta's version; m is unchanged.
// Records are upserts (the whole new value) or removals, applied in order.
// A delta older than m is refused.
func (m *Metadata) Apply(delta *controllerv1.MetadataDelta) (*Metadata, error) {
	if delta.GetVersion() < m.version {
		return nil, fmt.Errorf("metadata delta version %d is behind %d", delta.GetVersion(), m.version)
	}
	n := &Metadata{
		clusterID:    m.clusterID,
		version:      delta.GetVersion(),
		brokers:      maps.Clone(m.brokers),
		topics:       maps.Clone(m.topics),
		coordinators: maps.Clone(m.coordinators),
		assignments:  maps.Clone(m.assignments),
	}
	copiedKinds := map[controllerv1.CoordinatorKind]bool{} // assignment maps already copied
	copied := map[string]bool{}                            // topics already copied for this delta
	own := func(name string) *topicMeta {
		t := n.topics[name]
		switch {
		case t == nil:
			t = &topicMeta{}
		case !copied[name]:
			t = &topicMeta{rec: t.rec, parts: slices.Clone(t.parts)}
		}
		copied[name] = true
		n.topics[name] = t
		return t
	}
	for _, r := range delta.GetRecords() {
		switch v := r.GetRecord().(type) {
		case *controllerv1.MetadataRecord_Broker:
			n.brokers[v.Broker.GetId()] = v.Broker
		case *controllerv1.MetadataRecord_RemovedBroker:
			delete(n.brokers, v.RemovedBroker)
		case *controllerv1.MetadataRecord_Topic:
			t := own(v.Topic.GetName())
			if t.rec != nil && t.rec.GetTopicId() != v.Topic.GetTopicId() {
				t.parts = nil // the name now belongs to a new topic
			}
			t.rec = v.Topic
		case *controllerv1.MetadataRecord_RemovedTopic:
			if t := n.topics[v.RemovedTopic.GetName()]; t != nil && (t.rec == nil || v.RemovedTopic.GetTopicId() == "" || t.rec.GetTopicId() == v.RemovedTopic.GetTopicId()) {
				delete(n.topics, v.RemovedTopic.GetName())
			}
		case *controllerv1.MetadataRecord_Partition:
			own(v.Partition.GetTopic())
			n.putPartition(v.Partition)
		case *controllerv1.MetadataRecord_Coordinator:
			n.coordinators[coordKey{v.Coordinator.GetKind(), v.Coordinator.GetId()}] = v.Coordinator
		case *controllerv1.MetadataRecord_RemovedCoordinator:
			for k := range n.coordinators {
				if k.id == v.RemovedCoordinator {
					delete(n.coordinators, k)
				}
			}
		case *controllerv1.MetadataRecord_CoordinatorAssignment:
			kind := v.CoordinatorAssignment.GetKind()
			if !copiedKinds[kind] {
				n.assignments[kind] = maps.Clone(n.assignments[kind])
				copiedKinds[kind] = true
			}
			n.putAssignment(v.CoordinatorAssignment)
		}
	}
	return n, nil
}

// putAssignment stores a in its kind's map, which the caller owns.
func (m *Metadata) putAssignment(a *controllerv1.CoordinatorAssignmentRecord) {
	byPart := m.assignments[a.GetKind()]
	if byPart == nil {
		byPart = map[int32]*controllerv1.CoordinatorAssignmentRecord{}
		m.assignments[a.GetKind()] = byPart
	}
	byPart[a.GetPartition()] = a
}

// putPartition stores p in its topic, which the caller owns (or just built).
func (m *Metadata) putPartition(p *controllerv1.PartitionRecord) {
	t := m.topics[p.GetTopic()]
	if t == nil {
		t = &topicMeta{}
		m.topics[p.GetTopic()] = t
	}
	i := int(p.GetPartition())
	if i < 0 {
		return
	}
	for len(t.parts) <= i {
		t.parts = append(t.parts, nil)
	}
	t.parts[i] = p
}

// ClusterID is the cluster's id.
func (m *Metadata) ClusterID() string { return m.clusterID }

// Version is the Raft index of the last change the snapshot holds.
func (m *Metadata) Version() uint64 { return m.version }

// Broker returns a registered broker.
func (m *Metadata) Broker(id int32) (*controllerv1.BrokerRecord, bool) {
	b, ok := m.brokers[id]
	return b, ok
}

// Brokers lists registered brokers by id.
func (m *Metadata) Brokers() []*controllerv1.BrokerRecord {
	out := slices.Collect(maps.Values(m.brokers))
	slices.SortFunc(out, func(a, b *controllerv1.BrokerRecord) int { return int(a.GetId() - b.GetId()) })
	return out
}

// LiveBrokers lists the brokers that are not fenced.
func (m *Metadata) LiveBrokers() []*controllerv1.BrokerRecord {
	return slices.DeleteFunc(m.Brokers(), func(b *controllerv1.BrokerRecord) bool { return b.GetFenced() })
}

// Topic returns a topic's record.
func (m *Metadata) Topic(name string) (*controllerv1.TopicRecord, bool) {
	t := m.topics[name]
	if t == nil || t.rec == nil {
		return nil, false
	}
	return t.rec, true
}

// Topics lists topics by name.
func (m *Metadata) Topics() []*controllerv1.TopicRecord {
	var out []*controllerv1.TopicRecord
	for _, t := range m.topics {
		if t.rec != nil {
			out = append(out, t.rec)
		}
	}
	slices.SortFunc(out, func(a, b *controllerv1.TopicRecord) int {
		if a.GetName() < b.GetName() {
			return -1
		}
		if a.GetName() > b.GetName() {
			return 1
		}
		return 0
	})
	return out
}

// Partition returns one partition's state.
func (m *Metadata) Partition(topic string, partition int32) (*controllerv1.PartitionRecord, bool) {
	t := m.topics[topic]
	if t == nil || partition < 0 || int(partition) >= len(t.parts) || t.parts[partition] == nil {
		return nil, false
	}
	return t.parts[partition], true
}

// Partitions lists a topic's partitions by number (nil entries for numbers
// no record was seen for yet).
func (m *Metadata) Partitions(topic string) []*controllerv1.PartitionRecord {
	if t := m.topics[topic]; t != nil {
		return t.parts
	}
	return nil
}

// PartitionCount is the number of partitions of a topic (0 when unknown).
func (m *Metadata) PartitionCount(topic string) int32 {
	if t := m.topics[topic]; t != nil && t.rec != nil {
		return int32(len(t.parts))
	}
	return 0
}

// Leader returns a partition's leader and leader epoch; ok is false when the
// partition is unknown or offline.
func (m *Metadata) Leader(topic string, partition int32) (leader, epoch int32, ok bool) {
	p, found := m.Partition(topic, partition)
	if !found || p.GetLeader() < 0 {
		return -1, 0, false
	}
	return p.GetLeader(), p.GetLeaderEpoch(), true
}

// Available lists the partitions of a topic that have a leader.
func (m *Metadata) Available(topic string) []int32 {
	var out []int32
	for i, p := range m.Partitions(topic) {
		if p != nil && p.GetLeader() >= 0 {
			out = append(out, int32(i))
		}
	}
	return out
}

// Coordinators lists group and transaction coordinators by kind, then id.
func (m *Metadata) Coordinators() []*controllerv1.CoordinatorRecord {
	out := slices.Collect(maps.Values(m.coordinators))
	slices.SortFunc(out, func(a, b *controllerv1.CoordinatorRecord) int {
		if a.GetKind() != b.GetKind() {
			return int(a.GetKind() - b.GetKind())
		}
		return int(a.GetId() - b.GetId())
	})
	return out
}

// Coordinator answers a coordinator process of a kind.
func (m *Metadata) Coordinator(kind controllerv1.CoordinatorKind, id int32) (*controllerv1.CoordinatorRecord, bool) {
	c, ok := m.coordinators[coordKey{kind, id}]
	return c, ok
}

// CoordinatorAssignments lists the owners of a kind's internal-topic
// partitions, by partition.
func (m *Metadata) CoordinatorAssignments(kind controllerv1.CoordinatorKind) []*controllerv1.CoordinatorAssignmentRecord {
	out := slices.Collect(maps.Values(m.assignments[kind]))
	slices.SortFunc(out, func(a, b *controllerv1.CoordinatorAssignmentRecord) int {
		return int(a.GetPartition() - b.GetPartition())
	})
	return out
}
