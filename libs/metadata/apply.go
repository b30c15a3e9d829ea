package metadata

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/acl"
)

// Apply moves the image to delta.Version by applying its records in order.
// It is all or nothing: a delta that does not fit (version going backwards, a
// partition of an unknown topic, a gap in partition indexes, a topic name held
// by another id, a removal of something absent (an ACL binding not held), an ACL binding
// not valid as stored, producer ids going backwards)
// is refused with an error and the image is left as it was.
func (im *Image) Apply(delta *controllerv1.MetadataDelta) error {
	if delta == nil {
		return fmt.Errorf("metadata: nil delta")
	}
	if Version(delta.GetVersion()) < im.version {
		return fmt.Errorf("metadata: delta version %d is behind the image's %d", delta.GetVersion(), im.version)
	}
	if err := im.check(delta.GetRecords()); err != nil {
		return err
	}
	for _, r := range delta.GetRecords() {
		im.put(r)
	}
	im.version = Version(delta.GetVersion())
	return nil
}

// check replays the records against an overlay of the names and counts they
// touch, so that put, which follows, cannot fail half-way.
func (im *Image) check(records []*controllerv1.MetadataRecord) error {
	type topicState struct {
		id         string
		exists     bool
		partitions int
	}
	topics := map[string]*topicState{} // overlay by name
	ids := map[string]string{}         // overlay id -> name ("" = freed)
	brokers := map[BrokerID]bool{}     // overlay: exists?
	nextPID := im.nextProducerID
	acls := map[acl.Binding]bool{} // overlay: held?
	aclHeld := func(b acl.Binding) bool {
		if h, ok := acls[b]; ok {
			return h
		}
		_, ok := im.acls[b]
		return ok
	}
	topicOf := func(name string) *topicState {
		if t, ok := topics[name]; ok {
			return t
		}
		t := &topicState{}
		if rec, ok := im.topics[name]; ok {
			t.id, t.exists, t.partitions = rec.GetTopicId(), true, len(im.partitions[name])
		}
		topics[name] = t
		return t
	}
	nameOf := func(id string) (string, bool) {
		if name, ok := ids[id]; ok {
			return name, name != ""
		}
		name, ok := im.topicID[id]
		return name, ok
	}
	brokerExists := func(id BrokerID) bool {
		if e, ok := brokers[id]; ok {
			return e
		}
		_, ok := im.brokers[id]
		return ok
	}
	for i, r := range records {
		switch x := r.GetRecord().(type) {
		case *controllerv1.MetadataRecord_Broker:
			if x.Broker == nil || x.Broker.GetId() < 0 {
				return fmt.Errorf("metadata: record %d: broker without a valid id", i)
			}
			brokers[BrokerID(x.Broker.GetId())] = true
		case *controllerv1.MetadataRecord_RemovedBroker:
			if !brokerExists(BrokerID(x.RemovedBroker)) {
				return fmt.Errorf("metadata: record %d: removes unknown broker %d", i, x.RemovedBroker)
			}
			brokers[BrokerID(x.RemovedBroker)] = false
		case *controllerv1.MetadataRecord_Topic:
			name, id := x.Topic.GetName(), x.Topic.GetTopicId()
			if name == "" || id == "" {
				return fmt.Errorf("metadata: record %d: topic without a name or id", i)
			}
			t := topicOf(name)
			if t.exists && t.id != id {
				return fmt.Errorf("metadata: record %d: topic %q has id %s, not %s", i, name, t.id, id)
			}
			if other, ok := nameOf(id); ok && other != name {
				return fmt.Errorf("metadata: record %d: topic id %s belongs to %q, not %q", i, id, other, name)
			}
			t.id, t.exists = id, true
			ids[id] = name
		case *controllerv1.MetadataRecord_RemovedTopic:
			name := x.RemovedTopic.GetName()
			t := topicOf(name)
			if !t.exists {
				return fmt.Errorf("metadata: record %d: removes unknown topic %q", i, name)
			}
			if id := x.RemovedTopic.GetTopicId(); id != "" && id != t.id {
				return fmt.Errorf("metadata: record %d: removes topic %q with id %s, but it has %s", i, name, id, t.id)
			}
			ids[t.id] = ""
			t.id, t.exists, t.partitions = "", false, 0
		case *controllerv1.MetadataRecord_Partition:
			p := x.Partition
			t := topicOf(p.GetTopic())
			if !t.exists {
				return fmt.Errorf("metadata: record %d: partition %s/%d of an unknown topic", i, p.GetTopic(), p.GetPartition())
			}
			if p.GetTopicId() != "" && p.GetTopicId() != t.id {
				return fmt.Errorf("metadata: record %d: partition %s/%d carries topic id %s, the topic has %s", i, p.GetTopic(), p.GetPartition(), p.GetTopicId(), t.id)
			}
			switch idx := int(p.GetPartition()); {
			case idx < 0 || idx > t.partitions:
				return fmt.Errorf("metadata: record %d: partition %s/%d leaves a gap (the topic has %d)", i, p.GetTopic(), idx, t.partitions)
			case idx == t.partitions:
				t.partitions++
			}
		case *controllerv1.MetadataRecord_Coordinator:
			if x.Coordinator == nil || x.Coordinator.GetKind() == controllerv1.CoordinatorKind_COORDINATOR_KIND_UNSPECIFIED {
				return fmt.Errorf("metadata: record %d: coordinator without a kind", i)
			}
		case *controllerv1.MetadataRecord_RemovedCoordinator:
			// Removes the id from every kind; nothing to check.
		case *controllerv1.MetadataRecord_CoordinatorAssignment:
			a := x.CoordinatorAssignment
			if _, ok := InternalTopic(a.GetKind()); !ok || a.GetPartition() < 0 {
				return fmt.Errorf("metadata: record %d: assignment without a kind or with a negative partition", i)
			}
		case *controllerv1.MetadataRecord_ProducerIds:
			next := x.ProducerIds.GetNextProducerId()
			if next < nextPID {
				return fmt.Errorf("metadata: record %d: next producer id %d goes back from %d", i, next, nextPID)
			}
			nextPID = next
		case *controllerv1.MetadataRecord_Acl:
			b := Binding(x.Acl)
			if v, err := b.Validate(); err != nil || v != b {
				return fmt.Errorf("metadata: record %d: ACL binding %s is not valid as stored", i, b)
			}
			acls[b] = true
		case *controllerv1.MetadataRecord_RemovedAcl:
			b := Binding(x.RemovedAcl)
			if !aclHeld(b) {
				return fmt.Errorf("metadata: record %d: removes ACL binding %s, which is not held", i, b)
			}
			acls[b] = false
		default:
			return fmt.Errorf("metadata: record %d: empty or unknown record", i)
		}
	}
	return nil
}

// put applies one record that check accepted.
func (im *Image) put(r *controllerv1.MetadataRecord) {
	switch x := r.GetRecord().(type) {
	case *controllerv1.MetadataRecord_Broker:
		im.brokers[BrokerID(x.Broker.GetId())] = proto.CloneOf(x.Broker)
	case *controllerv1.MetadataRecord_RemovedBroker:
		delete(im.brokers, BrokerID(x.RemovedBroker))
	case *controllerv1.MetadataRecord_Topic:
		t := proto.CloneOf(x.Topic)
		im.topics[t.GetName()] = t
		im.topicID[t.GetTopicId()] = t.GetName()
	case *controllerv1.MetadataRecord_RemovedTopic:
		name := x.RemovedTopic.GetName()
		delete(im.topicID, im.topics[name].GetTopicId())
		delete(im.topics, name)
		delete(im.partitions, name)
	case *controllerv1.MetadataRecord_Partition:
		p := proto.CloneOf(x.Partition)
		if p.TopicId == "" {
			p.TopicId = im.topics[p.GetTopic()].GetTopicId()
		}
		ps := im.partitions[p.GetTopic()]
		if int(p.GetPartition()) == len(ps) {
			im.partitions[p.GetTopic()] = append(ps, p)
		} else {
			ps[p.GetPartition()] = p
		}
	case *controllerv1.MetadataRecord_Coordinator:
		c := proto.CloneOf(x.Coordinator)
		im.coordinators[coordKey{c.GetKind(), c.GetId()}] = c
	case *controllerv1.MetadataRecord_RemovedCoordinator:
		for k := range im.coordinators {
			if k.id == x.RemovedCoordinator {
				delete(im.coordinators, k)
			}
		}
	case *controllerv1.MetadataRecord_CoordinatorAssignment:
		a := proto.CloneOf(x.CoordinatorAssignment)
		m := im.assignments[a.GetKind()]
		if m == nil {
			m = map[int32]*controllerv1.CoordinatorAssignmentRecord{}
			im.assignments[a.GetKind()] = m
		}
		m[a.GetPartition()] = a
	case *controllerv1.MetadataRecord_ProducerIds:
		im.nextProducerID = x.ProducerIds.GetNextProducerId()
	case *controllerv1.MetadataRecord_Acl:
		im.acls[Binding(x.Acl)] = struct{}{}
	case *controllerv1.MetadataRecord_RemovedAcl:
		delete(im.acls, Binding(x.RemovedAcl))
	}
}

// The record constructors wrap one value in a MetadataRecord.

// BrokerRecord wraps an upsert of a broker.
func BrokerRecord(b *controllerv1.BrokerRecord) *controllerv1.MetadataRecord {
	return &controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_Broker{Broker: b}}
}

// TopicRecord wraps an upsert of a topic.
func TopicRecord(t *controllerv1.TopicRecord) *controllerv1.MetadataRecord {
	return &controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_Topic{Topic: t}}
}

// RemovedTopicRecord wraps the removal of a topic and its partitions.
func RemovedTopicRecord(name, id string) *controllerv1.MetadataRecord {
	return &controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_RemovedTopic{
		RemovedTopic: &controllerv1.RemovedTopicRecord{Name: name, TopicId: id}}}
}

// PartitionRecord wraps an upsert of a partition.
func PartitionRecord(p *controllerv1.PartitionRecord) *controllerv1.MetadataRecord {
	return &controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_Partition{Partition: p}}
}

// CoordinatorRecord wraps an upsert of a coordinator process.
func CoordinatorRecord(c *controllerv1.CoordinatorRecord) *controllerv1.MetadataRecord {
	return &controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_Coordinator{Coordinator: c}}
}

// AssignmentRecord wraps an upsert of an internal partition's owner.
func AssignmentRecord(a *controllerv1.CoordinatorAssignmentRecord) *controllerv1.MetadataRecord {
	return &controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_CoordinatorAssignment{CoordinatorAssignment: a}}
}

// ProducerIDsRecord wraps the advance of the next producer id.
func ProducerIDsRecord(next int64) *controllerv1.MetadataRecord {
	return &controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_ProducerIds{
		ProducerIds: &controllerv1.ProducerIdsRecord{NextProducerId: next}}}
}
