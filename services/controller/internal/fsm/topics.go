package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/libs/topicconfig"
	"skein/libs/topicname"
)

// MaxPartitions bounds one topic's partition count: far above what a Skein
// cluster serves, low enough that a typo cannot build a giant image.
const MaxPartitions = 10000

// code is err's number in the error table, as the controller's results
// carry it (a skein.v1.ErrorCode number).
func code(err error) int32 { return int32(errs.CodeOf(err)) }

func topicResult(name string, err error) *controllerv1.TopicResult {
	return &controllerv1.TopicResult{Name: name, ErrorCode: code(err), ErrorMessage: errs.Message(err)}
}

// ValidateTopicName applies Kafka's rules (topicname.Validate).
func ValidateTopicName(name string) error { return topicname.Validate(name) }

// collisionKey is Kafka's: '.' and '_' collide in metric names, so two topics
// differing only there may not both exist.
func collisionKey(name string) string { return strings.ReplaceAll(name, ".", "_") }

// topicID derives a topic's id from the cluster, the entry index and the
// name: unique (the index is) and the same on every controller.
func topicID(cluster string, index uint64, name string) string {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], index)
	h := sha256.New()
	h.Write([]byte(cluster))
	h.Write(buf[:])
	h.Write([]byte(name))
	s := h.Sum(nil)[:16]
	s[6] = s[6]&0x0f | 0x80 // UUID version 8: application-defined
	s[8] = s[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", s[0:4], s[4:6], s[6:8], s[8:10], s[10:16])
}

func (t *tx) createTopics(r *controllerv1.CreateTopicsRequest) (proto.Message, error) {
	resp := &controllerv1.CreateTopicsResponse{}
	count := map[string]int{}
	for _, ct := range r.GetTopics() {
		count[ct.GetName()]++
	}
	for _, ct := range r.GetTopics() {
		name := ct.GetName()
		if count[name] > 1 {
			resp.Topics = append(resp.Topics, topicResult(name, errs.Errorf(errs.InvalidRequest, "topic %q is named more than once", name)))
			continue
		}
		id, err := t.createTopic(ct, r.GetValidateOnly())
		res := topicResult(name, err)
		res.TopicId = id
		resp.Topics = append(resp.Topics, res)
	}
	return resp, nil
}

func (t *tx) createTopic(ct *controllerv1.CreatableTopic, validateOnly bool) (string, error) {
	name := ct.GetName()
	if err := ValidateTopicName(name); err != nil {
		return "", err
	}
	if strings.HasPrefix(name, "__") {
		return "", errs.Errorf(errs.InvalidTopic, "names starting with __ are reserved for internal topics")
	}
	if _, ok := t.img.Topic(name); ok {
		return "", errs.Errorf(errs.TopicAlreadyExists, "topic %q already exists", name)
	}
	for _, other := range t.img.Topics() {
		if collisionKey(other.GetName()) == collisionKey(name) {
			return "", errs.Errorf(errs.InvalidTopic, "topic %q collides with existing %q ('.' and '_' collide)", name, other.GetName())
		}
	}
	if n := ct.GetPartitions(); n < 1 || n > MaxPartitions {
		return "", errs.Errorf(errs.InvalidPartitions, "%d partitions: want 1..%d", n, MaxPartitions)
	}
	live := len(t.img.LiveBrokers())
	rf := ct.GetReplicationFactor()
	if rf == 0 {
		rf = int32(min(3, live))
	}
	if rf < 1 || int(rf) > live {
		return "", errs.Errorf(errs.InvalidReplicationFactor, "replication factor %d with %d live brokers", ct.GetReplicationFactor(), live)
	}
	if err := topicconfig.Validate(ct.GetConfigs()); err != nil {
		return "", err
	}
	if validateOnly {
		return "", nil
	}
	return t.addTopic(name, ct.GetPartitions(), rf, ct.GetConfigs(), false)
}

// addTopic creates a validated topic with its placed partitions.
func (t *tx) addTopic(name string, partitions, rf int32, configs map[string]string, internal bool) (string, error) {
	id := topicID(t.img.ClusterID(), t.version, name)
	tr := &controllerv1.TopicRecord{TopicId: id, Name: name, Configs: configs, Internal: internal}
	if len(configs) == 0 {
		tr.Configs = nil
	}
	recs := []*controllerv1.MetadataRecord{metadata.TopicRecord(tr)}
	for i, replicas := range place(t.img, int(partitions), int(rf), t.placementRule) {
		isr := t.startISR(replicas)
		recs = append(recs, metadata.PartitionRecord(&controllerv1.PartitionRecord{
			Topic: name, TopicId: id, Partition: int32(i),
			Replicas: replicas, Isr: isr, Leader: isr[0],
		}))
	}
	return id, t.put(recs...)
}

func (t *tx) deleteTopics(r *controllerv1.DeleteTopicsRequest) (proto.Message, error) {
	resp := &controllerv1.DeleteTopicsResponse{}
	for _, name := range r.GetNames() {
		tp, ok := t.img.Topic(name)
		var err error
		switch {
		case !ok:
			err = errs.Errorf(errs.UnknownTopicOrPartition, "no topic %q", name)
		case tp.GetInternal() || metadata.IsInternalTopic(name):
			err = errs.Errorf(errs.InvalidTopic, "internal topic %q cannot be deleted", name)
		default:
			err = t.put(metadata.RemovedTopicRecord(name, tp.GetTopicId()))
		}
		res := topicResult(name, err)
		if ok {
			res.TopicId = tp.GetTopicId()
		}
		resp.Topics = append(resp.Topics, res)
	}
	return resp, nil
}

func (t *tx) createPartitions(r *controllerv1.CreatePartitionsRequest) (proto.Message, error) {
	resp := &controllerv1.CreatePartitionsResponse{}
	count := map[string]int{}
	for _, pc := range r.GetTopics() {
		count[pc.GetName()]++
	}
	for _, pc := range r.GetTopics() {
		name := pc.GetName()
		var err error
		tp, ok := t.img.Topic(name)
		switch {
		case count[name] > 1:
			err = errs.Errorf(errs.InvalidRequest, "topic %q is named more than once", name)
		case !ok:
			err = errs.Errorf(errs.UnknownTopicOrPartition, "no topic %q", name)
		case tp.GetInternal():
			err = errs.Errorf(errs.InvalidTopic, "internal topic %q cannot grow", name)
		default:
			err = t.growTopic(tp, pc.GetCount())
		}
		res := topicResult(name, err)
		if ok {
			res.TopicId = tp.GetTopicId()
		}
		resp.Topics = append(resp.Topics, res)
	}
	return resp, nil
}

func (t *tx) growTopic(tp *controllerv1.TopicRecord, count int32) error {
	name := tp.GetName()
	have := t.img.PartitionCount(name)
	if count <= have || count > MaxPartitions {
		return errs.Errorf(errs.InvalidPartitions, "topic %q has %d partitions; the new count must be above that and at most %d, not %d", name, have, MaxPartitions, count)
	}
	p0, _ := t.img.Partition(name, 0)
	rf := len(p0.GetReplicas())
	if live := len(t.img.LiveBrokers()); rf > live {
		return errs.Errorf(errs.InvalidReplicationFactor, "topic %q has replication factor %d, only %d brokers are live", name, rf, live)
	}
	var recs []*controllerv1.MetadataRecord
	for i, replicas := range place(t.img, int(count-have), rf, t.placementRule) {
		isr := t.startISR(replicas)
		recs = append(recs, metadata.PartitionRecord(&controllerv1.PartitionRecord{
			Topic: name, TopicId: tp.GetTopicId(), Partition: have + int32(i),
			Replicas: replicas, Isr: isr, Leader: isr[0],
		}))
	}
	return t.put(recs...)
}

// alterConfigs sets (or, with an empty value, removes) topic config
// overrides. Turning unclean.leader.election.enable on elects leaders for
// the topic's offline partitions at once, as Kafka does.
func (t *tx) alterConfigs(r *controllerv1.AlterConfigsRequest) (proto.Message, error) {
	name := r.GetTopic()
	tp, ok := t.img.Topic(name)
	if !ok {
		return &controllerv1.AlterConfigsResponse{Result: topicResult(name, errs.Errorf(errs.UnknownTopicOrPartition, "no topic %q", name))}, nil
	}
	res := &controllerv1.AlterConfigsResponse{Result: topicResult(name, nil)}
	res.Result.TopicId = tp.GetTopicId()
	configs := map[string]string{}
	for k, v := range tp.GetConfigs() {
		configs[k] = v
	}
	set := map[string]string{}
	for k, v := range r.GetConfigs() {
		if v == "" {
			if _, known := topicconfig.Lookup(k); !known {
				set[k] = v // refused below as unknown
				continue
			}
			delete(configs, k)
			continue
		}
		set[k], configs[k] = v, v
	}
	err := topicconfig.Validate(set)
	if err == nil {
		err = topicconfig.CheckCombined(configs)
	}
	if err != nil {
		res.Result = topicResult(name, err)
		res.Result.TopicId = tp.GetTopicId()
		return res, nil
	}
	if r.GetValidateOnly() {
		return res, nil
	}
	nt := proto.CloneOf(tp)
	nt.Configs = configs
	if len(configs) == 0 {
		nt.Configs = nil
	}
	if !proto.Equal(nt, tp) {
		if err := t.put(metadata.TopicRecord(nt)); err != nil {
			return nil, err
		}
	}
	if err := t.electOffline(func(string) bool { return false }); err != nil {
		return nil, err
	}
	return res, nil
}

// createInternalTopics creates the missing internal topics with RF =
// min(3, live brokers), compacted, min.insync.replicas = min(2, RF), and
// assigns their partitions to the live coordinators of their kind.
func (t *tx) createInternalTopics(c *controllerv1.CreateInternalTopicsCommand) error {
	live := len(t.img.LiveBrokers())
	if live == 0 {
		return errs.Errorf(errs.InvalidReplicationFactor, "no live broker to hold the internal topics")
	}
	rf := int32(min(3, live))
	for _, it := range []struct {
		kind controllerv1.CoordinatorKind
		n    int32
	}{
		{controllerv1.CoordinatorKind_COORDINATOR_KIND_GROUP, c.GetConsumerOffsetsPartitions()},
		{controllerv1.CoordinatorKind_COORDINATOR_KIND_TRANSACTION, c.GetTransactionStatePartitions()},
	} {
		name, _ := metadata.InternalTopic(it.kind)
		if _, ok := t.img.Topic(name); ok {
			continue
		}
		if it.n < 1 || it.n > MaxPartitions {
			return errs.Errorf(errs.InvalidPartitions, "%s with %d partitions: want 1..%d", name, it.n, MaxPartitions)
		}
		configs := map[string]string{
			"cleanup.policy":      "compact",
			"min.insync.replicas": strconv.Itoa(int(min(2, rf))),
		}
		if _, err := t.addTopic(name, it.n, rf, configs, true); err != nil {
			return err
		}
		if err := t.rebalanceCoordinators(it.kind, -1); err != nil {
			return err
		}
	}
	return nil
}

// startISR is a new partition's ISR: its replicas, but for a broker in a
// controlled shutdown (placed like any live broker, it follows once it is
// back), unless no other replica is eligible. The first member leads.
func (t *tx) startISR(replicas []int32) []int32 {
	isr := slices.DeleteFunc(slices.Clone(replicas), func(r int32) bool { return !t.eligible(metadata.BrokerID(r)) })
	if len(isr) == 0 {
		return replicas
	}
	return isr
}
