package api

import (
	"context"
	"log/slog"
	"sync"
	"time"

	controllerv1 "skein/gen/skein/controller/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/libs/topicconfig"
)

// metadataWait bounds how long an admin call waits for its change to reach
// this gateway's metadata before describing the result.
const metadataWait = 10 * time.Second

// Admin is AdminService.
type Admin struct {
	skeinv1.UnimplementedAdminServiceServer

	c   *client.Client
	log *slog.Logger
}

// NewAdmin serves AdminService through c.
func NewAdmin(c *client.Client, log *slog.Logger) *Admin { return &Admin{c: c, log: log} }

// GetCluster describes brokers and controllers as the controller sees them.
func (s *Admin) GetCluster(ctx context.Context, _ *skeinv1.GetClusterRequest) (*skeinv1.GetClusterResponse, error) {
	dc, err := s.c.DescribeCluster(ctx)
	if err != nil {
		return nil, err
	}
	out := &skeinv1.GetClusterResponse{ClusterId: dc.ClusterID, ControllerId: dc.ControllerID}
	for _, b := range dc.Brokers {
		out.Brokers = append(out.Brokers, &skeinv1.BrokerInfo{Id: b.ID, GrpcAddr: b.Addr, Rack: b.Rack, State: b.State.String()})
	}
	for _, c := range dc.Controllers {
		out.Controllers = append(out.Controllers, &skeinv1.ControllerInfo{Id: c.ID, Addr: c.Addr, Leader: c.Leader, State: c.State})
	}
	for _, c := range dc.Coordinators {
		state := "DEAD"
		if c.Alive {
			state = "ALIVE"
		}
		out.Coordinators = append(out.Coordinators, &skeinv1.CoordinatorInfo{Id: c.ID, Kind: c.Kind.String(), GrpcAddr: c.Addr, State: state})
	}
	return out, nil
}

// CreateTopic validates and creates a topic, then answers its description
// once this gateway's metadata holds all its partitions.
func (s *Admin) CreateTopic(ctx context.Context, req *skeinv1.CreateTopicRequest) (*skeinv1.CreateTopicResponse, error) {
	if err := ValidateTopicName(req.GetName()); err != nil {
		return nil, err
	}
	if IsInternalTopic(req.GetName()) {
		return nil, errs.Errorf(errs.InvalidTopic, "names starting with \"__\" are reserved for internal topics")
	}
	spec := client.TopicSpec{Name: req.GetName(), Partitions: 1, Configs: req.GetConfigs()}
	if req.Partitions != nil {
		if spec.Partitions = *req.Partitions; spec.Partitions < 1 {
			return nil, errs.Errorf(errs.InvalidPartitions, "partitions must be at least 1, got %d", spec.Partitions)
		}
	}
	if req.ReplicationFactor != nil {
		if spec.ReplicationFactor = *req.ReplicationFactor; spec.ReplicationFactor < 1 {
			return nil, errs.Errorf(errs.InvalidReplicationFactor, "replication_factor must be at least 1, got %d", spec.ReplicationFactor)
		}
	}
	if err := topicconfig.Validate(req.GetConfigs()); err != nil {
		return nil, err
	}
	id, err := s.c.CreateTopic(ctx, spec)
	if err != nil {
		return nil, err
	}
	m, err := s.await(ctx, func(m *metadata.Image) bool {
		t, ok := m.Topic(spec.Name)
		return ok && (id == "" || t.GetTopicId() == id) && complete(m, spec.Name, spec.Partitions)
	})
	if err != nil {
		return nil, err
	}
	// A topic just created holds nothing: its offsets are all 0.
	return &skeinv1.CreateTopicResponse{Topic: s.describe(m, spec.Name, nil)}, nil
}

// complete reports whether the metadata holds partitions 0..n-1 of topic.
func complete(m *metadata.Image, topic string, n int32) bool {
	parts := m.Partitions(topic)
	if int32(len(parts)) < n {
		return false
	}
	for _, p := range parts {
		if p == nil {
			return false
		}
	}
	return true
}

// await waits for this gateway's metadata to show a change the controller
// accepted.
func (s *Admin) await(ctx context.Context, cond func(*metadata.Image) bool) (*metadata.Image, error) {
	wctx, cancel := context.WithTimeout(ctx, metadataWait)
	defer cancel()
	m, err := s.c.WaitMetadata(wctx, cond)
	if err != nil {
		return nil, errs.Errorf(errs.RequestTimedOut, "the controller accepted the change but it has not reached this gateway's metadata yet")
	}
	return m, nil
}

// ListTopics lists topics, internal ones only when asked.
func (s *Admin) ListTopics(ctx context.Context, req *skeinv1.ListTopicsRequest) (*skeinv1.ListTopicsResponse, error) {
	if err := waitReady(ctx, s.c); err != nil {
		return nil, err
	}
	m := s.c.Metadata()
	out := &skeinv1.ListTopicsResponse{Topics: []*skeinv1.TopicSummary{}}
	for _, t := range m.Topics() {
		internal := t.GetInternal() || IsInternalTopic(t.GetName())
		if internal && !req.GetIncludeInternal() {
			continue
		}
		out.Topics = append(out.Topics, &skeinv1.TopicSummary{
			Name: t.GetName(), Partitions: m.PartitionCount(t.GetName()), Internal: internal,
			ReplicationFactor: replicationFactor(m, t.GetName()),
		})
	}
	return out, nil
}

func replicationFactor(m *metadata.Image, topic string) int32 {
	for _, p := range m.Partitions(topic) {
		if p != nil {
			return int32(len(p.GetReplicas()))
		}
	}
	return 0
}

// partitionOffsets are a partition's log start, HW and LSO from its leader,
// and each replica's LEO as the leader knows it.
type partitionOffsets struct {
	logStart, hw, lso int64
	replicas          []client.ReplicaOffset
}

// offsets asks the leaders for every partition's log start, HW and LSO;
// partitions whose leader did not answer get -1.
func (s *Admin) offsets(ctx context.Context, topic string) map[int32]partitionOffsets {
	out := map[int32]partitionOffsets{}
	set := func(offs []client.PartitionOffset, field func(*partitionOffsets, client.PartitionOffset)) {
		for _, o := range offs {
			po, ok := out[o.Partition]
			if !ok {
				po = partitionOffsets{logStart: -1, hw: -1, lso: -1}
			}
			if o.Err != nil {
				o.Offset, o.Replicas = -1, nil
			}
			field(&po, o)
			out[o.Partition] = po
		}
	}
	// The three lookups go out together: one round trip, and a leader that
	// does not answer costs the deadline once, not three times.
	queries := []struct {
		at    int64
		iso   skeinv1.IsolationLevel
		field func(*partitionOffsets, client.PartitionOffset)
	}{
		{client.EarliestOffset, skeinv1.IsolationLevel_READ_UNCOMMITTED, func(p *partitionOffsets, o client.PartitionOffset) { p.logStart = o.Offset }},
		// The replicas' LEOs come with the HW: the leader takes both from
		// the same moment's view.
		{client.LatestOffset, skeinv1.IsolationLevel_READ_UNCOMMITTED, func(p *partitionOffsets, o client.PartitionOffset) { p.hw, p.replicas = o.Offset, o.Replicas }},
		{client.LatestOffset, skeinv1.IsolationLevel_READ_COMMITTED, func(p *partitionOffsets, o client.PartitionOffset) { p.lso = o.Offset }},
	}
	results := make([][]client.PartitionOffset, len(queries))
	var wg sync.WaitGroup
	for i, q := range queries {
		wg.Go(func() {
			if offs, err := s.c.ListOffsets(ctx, topic, nil, q.at, q.iso); err == nil {
				results[i] = offs
			}
		})
	}
	wg.Wait()
	for i, q := range queries {
		set(results[i], q.field)
	}
	return out
}

// describe renders a topic from the metadata; offs nil means a new topic
// (all offsets 0), a missing partition in offs means its leader did not answer.
func (s *Admin) describe(m *metadata.Image, topic string, offs map[int32]partitionOffsets) *skeinv1.TopicDescription {
	t, _ := m.Topic(topic)
	d := &skeinv1.TopicDescription{
		Name: topic, TopicId: t.GetTopicId(), Configs: topicconfig.Effective(t.GetConfigs()), OverriddenConfigs: topicconfig.Overridden(t.GetConfigs()),
		Internal: t.GetInternal() || IsInternalTopic(topic), ReplicationFactor: replicationFactor(m, topic),
		Partitions: []*skeinv1.PartitionDescription{},
	}
	for i, p := range m.Partitions(topic) {
		pd := &skeinv1.PartitionDescription{Partition: int32(i), Leader: -1, LogStartOffset: -1, HighWatermark: -1, LastStableOffset: -1}
		if p != nil {
			pd.Leader, pd.LeaderEpoch, pd.Replicas, pd.Isr = p.GetLeader(), p.GetLeaderEpoch(), p.GetReplicas(), p.GetIsr()
			pd.LostReplica = LostReplica(p)
		}
		pd.ReplicaOffsets = []*skeinv1.ReplicaOffset{}
		if offs == nil {
			pd.LogStartOffset, pd.HighWatermark, pd.LastStableOffset = 0, 0, 0
			for _, r := range pd.Replicas {
				pd.ReplicaOffsets = append(pd.ReplicaOffsets, &skeinv1.ReplicaOffset{Replica: r, LogEndOffset: 0})
			}
		} else if o, ok := offs[int32(i)]; ok {
			pd.LogStartOffset, pd.HighWatermark, pd.LastStableOffset = o.logStart, o.hw, o.lso
			for _, r := range o.replicas {
				pd.ReplicaOffsets = append(pd.ReplicaOffsets, &skeinv1.ReplicaOffset{Replica: r.Replica, LogEndOffset: r.LogEndOffset})
			}
		}
		d.Partitions = append(d.Partitions, pd)
	}
	return d
}

// LostReplica answers the replica an offline partition waits for, the last
// in-sync one that came back without its logs; nil for any other.
func LostReplica(p *controllerv1.PartitionRecord) *skeinv1.LostReplica {
	l := p.GetLostIsrReplica()
	if l == nil {
		return nil
	}
	return &skeinv1.LostReplica{Broker: l.GetBroker(), LogDirId: l.GetLogDirId()}
}

// describeOffsetsTimeout bounds the offset lookups of a topic description:
// a partition whose leader has not answered by then shows -1.
const describeOffsetsTimeout = 2 * time.Second

// DescribeTopic shows configs and per-partition state, offsets from the
// leaders (-1 where a leader did not answer).
func (s *Admin) DescribeTopic(ctx context.Context, req *skeinv1.DescribeTopicRequest) (*skeinv1.DescribeTopicResponse, error) {
	before, n, err := knownTopic(ctx, s.c, req.GetTopic())
	if err != nil {
		return nil, err
	}
	octx, cancel := context.WithTimeout(ctx, describeOffsetsTimeout)
	offs := s.offsets(octx, req.GetTopic())
	cancel()
	// The leaders as they are now, not as they were before a leader that
	// did not answer made the lookups wait.
	m, _, err := knownTopic(ctx, s.c, req.GetTopic())
	if err != nil {
		return nil, err
	}
	// A leader that did not answer and was replaced meanwhile (a failover
	// during the wait): its partitions' offsets are asked of the new
	// leaders once, rather than shown as -1 beside them.
	if again := unansweredAndMoved(n, leaderOf(before, req.GetTopic()), leaderOf(m, req.GetTopic()), offs); len(again) > 0 {
		octx, cancel := context.WithTimeout(ctx, describeOffsetsTimeout/2)
		fresh := s.offsets(octx, req.GetTopic())
		cancel()
		for _, p := range again {
			if o, ok := fresh[p]; ok && o.hw >= 0 {
				offs[p] = o
			}
		}
	}
	return &skeinv1.DescribeTopicResponse{Topic: s.describe(m, req.GetTopic(), offs)}, nil
}

// leaderOf answers a partition's leader in m (-1: none, or no partition).
func leaderOf(m *metadata.Image, topic string) func(int32) int32 {
	return func(p int32) int32 {
		if pr, ok := m.Partition(topic, p); ok {
			return pr.GetLeader()
		}
		return -1
	}
}

// unansweredAndMoved answers the partitions (of n) whose offsets no leader
// gave (absent from offs, or a high watermark of -1) and whose leader
// changed from before to after to another broker.
func unansweredAndMoved(n int32, before, after func(int32) int32, offs map[int32]partitionOffsets) []int32 {
	var out []int32
	for p := range n {
		if o, ok := offs[p]; ok && o.hw >= 0 {
			continue
		}
		if l := after(p); l >= 0 && l != before(p) {
			out = append(out, p)
		}
	}
	return out
}

// DeleteTopic deletes a topic and answers once this gateway no longer sees it.
func (s *Admin) DeleteTopic(ctx context.Context, req *skeinv1.DeleteTopicRequest) (*skeinv1.DeleteTopicResponse, error) {
	if err := ValidateTopicName(req.GetTopic()); err != nil {
		return nil, err
	}
	if err := s.c.DeleteTopic(ctx, req.GetTopic()); err != nil {
		return nil, err
	}
	if _, err := s.await(ctx, func(m *metadata.Image) bool { _, ok := m.Topic(req.GetTopic()); return !ok }); err != nil {
		return nil, err
	}
	return &skeinv1.DeleteTopicResponse{Topic: req.GetTopic()}, nil
}

// CreatePartitions grows a topic to count partitions.
func (s *Admin) CreatePartitions(ctx context.Context, req *skeinv1.CreatePartitionsRequest) (*skeinv1.CreatePartitionsResponse, error) {
	_, n, err := knownTopic(ctx, s.c, req.GetTopic())
	if err != nil {
		return nil, err
	}
	if req.GetCount() == 0 {
		// protobuf reads a missing count as 0: say what is asked for.
		return nil, errs.Errorf(errs.InvalidPartitions, "count is missing or 0: the topic's new number of partitions, larger than its %d", n)
	}
	if req.GetCount() <= n {
		return nil, errs.Errorf(errs.InvalidPartitions, "topic %q has %d partitions; count %d must be larger", req.GetTopic(), n, req.GetCount())
	}
	if err := s.c.CreatePartitions(ctx, req.GetTopic(), req.GetCount()); err != nil {
		return nil, err
	}
	m, err := s.await(ctx, func(m *metadata.Image) bool { return complete(m, req.GetTopic(), req.GetCount()) })
	if err != nil {
		return nil, err
	}
	octx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return &skeinv1.CreatePartitionsResponse{Topic: s.describe(m, req.GetTopic(), s.offsets(octx, req.GetTopic()))}, nil
}

// AlterTopicConfigs sets configs (an empty value removes the override).
func (s *Admin) AlterTopicConfigs(ctx context.Context, req *skeinv1.AlterTopicConfigsRequest) (*skeinv1.AlterTopicConfigsResponse, error) {
	if _, _, err := knownTopic(ctx, s.c, req.GetTopic()); err != nil {
		return nil, err
	}
	if len(req.GetConfigs()) == 0 {
		return nil, errs.Errorf(errs.InvalidRequest, "no configs to change")
	}
	set := map[string]string{}
	for k, v := range req.GetConfigs() {
		if _, ok := topicconfig.Lookup(k); !ok {
			return nil, errs.Errorf(errs.InvalidConfig, "unknown topic config %q", k)
		}
		if v != "" {
			set[k] = v
		}
	}
	if err := topicconfig.Validate(set); err != nil {
		return nil, err
	}
	if err := s.c.AlterConfigs(ctx, req.GetTopic(), req.GetConfigs()); err != nil {
		return nil, err
	}
	m, err := s.await(ctx, func(m *metadata.Image) bool {
		t, ok := m.Topic(req.GetTopic())
		if !ok {
			return false
		}
		// The controllers keep a value as Normalize makes it (without the
		// spaces around it, a list without empty or repeated items); an
		// older controller may keep less tidy values, so both sides are
		// compared as Normalize makes them.
		have := topicconfig.Normalize(t.GetConfigs())
		for k, v := range topicconfig.Normalize(req.GetConfigs()) {
			if got, ok := have[k]; (v == "" && ok) || (v != "" && got != v) {
				return false
			}
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	octx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return &skeinv1.AlterTopicConfigsResponse{Topic: s.describe(m, req.GetTopic(), s.offsets(octx, req.GetTopic()))}, nil
}

// ListOffsets answers per partition the earliest, latest or by-timestamp offset.
func (s *Admin) ListOffsets(ctx context.Context, req *skeinv1.ListOffsetsRequest) (*skeinv1.ListOffsetsResponse, error) {
	if _, _, err := knownTopic(ctx, s.c, req.GetTopic()); err != nil {
		return nil, err
	}
	var spec int64
	switch req.GetSpec() {
	case skeinv1.OffsetSpec_LATEST:
		spec = client.LatestOffset
	case skeinv1.OffsetSpec_EARLIEST:
		spec = client.EarliestOffset
	case skeinv1.OffsetSpec_TIMESTAMP:
		if spec = req.GetTimestampMs(); spec < 0 {
			return nil, errs.Errorf(errs.InvalidTimestamp, "timestamp_ms %d is negative", spec)
		}
	default:
		return nil, errs.Errorf(errs.InvalidRequest, "unknown offset spec %d", req.GetSpec())
	}
	if req.GetSpec() != skeinv1.OffsetSpec_TIMESTAMP && req.GetTimestampMs() != 0 {
		// A lookup by time that forgot spec=TIMESTAMP would otherwise
		// answer the latest offsets as if they were the time's.
		return nil, errs.Errorf(errs.InvalidRequest, "timestamp_ms is read only with spec TIMESTAMP, not %s", req.GetSpec())
	}
	if err := validateRead(req.GetIsolationLevel(), skeinv1.Encoding_TEXT); err != nil {
		return nil, err
	}
	offs, err := s.c.ListOffsets(ctx, req.GetTopic(), nil, spec, req.GetIsolationLevel())
	if err != nil {
		return nil, err
	}
	out := &skeinv1.ListOffsetsResponse{Offsets: []*skeinv1.PartitionOffset{}}
	for _, o := range offs {
		po := &skeinv1.PartitionOffset{Partition: o.Partition, Offset: o.Offset, TimestampMs: o.Timestamp}
		if o.Err != nil {
			// -1 for both, as a lookup that found nothing answers: 0 is a
			// time a record may have.
			po.Offset, po.TimestampMs, po.ErrorCode, po.Message = -1, -1, skeinv1.ErrorCode(errs.CodeOf(o.Err)), errs.Message(o.Err)
		}
		out.Offsets = append(out.Offsets, po)
	}
	return out, nil
}

// DeleteRecords deletes a topic's records before an offset per partition,
// as Kafka's DeleteRecords: each partition's log start offset moves up to
// it on every in-sync replica. A malformed request (no partitions, one
// named twice or not in the topic, an offset below -1) is refused whole;
// what a partition's leader refuses (an offset above its high watermark, a
// compacted topic) is in that partition's result.
func (s *Admin) DeleteRecords(ctx context.Context, req *skeinv1.DeleteRecordsRequest) (*skeinv1.DeleteRecordsResponse, error) {
	if IsInternalTopic(req.GetTopic()) {
		// The coordinators' state, as Kafka refuses it (the storage nodes
		// refuse it too).
		return nil, errs.Errorf(errs.InvalidTopic, "cannot delete records of internal topic %q", req.GetTopic())
	}
	_, n, err := knownTopic(ctx, s.c, req.GetTopic())
	if err != nil {
		return nil, err
	}
	if len(req.GetPartitions()) == 0 {
		return nil, errs.Errorf(errs.InvalidRequest, "name at least one partition and the offset to delete its records before")
	}
	before := make(map[int32]int64, len(req.GetPartitions()))
	for _, p := range req.GetPartitions() {
		switch part, off := p.GetPartition(), p.GetOffset(); {
		case part < 0 || part >= n:
			return nil, errs.Errorf(errs.UnknownTopicOrPartition, "topic %q has no partition %d (it has %d)", req.GetTopic(), part, n)
		case off < -1:
			return nil, errs.Errorf(errs.InvalidRequest, "offset %d of partition %d: want -1 (the high watermark) or an offset of 0 or more", off, part)
		default:
			if _, dup := before[part]; dup {
				return nil, errs.Errorf(errs.InvalidRequest, "partition %d is named twice", part)
			}
			before[part] = off
		}
	}
	res, err := s.c.DeleteRecords(ctx, req.GetTopic(), before)
	if err != nil {
		return nil, err
	}
	out := &skeinv1.DeleteRecordsResponse{Partitions: make([]*skeinv1.DeleteRecordsResult, 0, len(res))}
	for _, r := range res {
		out.Partitions = append(out.Partitions, &skeinv1.DeleteRecordsResult{
			Partition: r.Partition, LowWatermark: r.LowWatermark,
			ErrorCode: skeinv1.ErrorCode(errs.CodeOf(r.Err)), Message: errs.Message(r.Err),
		})
	}
	return out, nil
}

// ElectLeaders runs a preferred or unclean election on a topic or everywhere.
func (s *Admin) ElectLeaders(ctx context.Context, req *skeinv1.ElectLeadersRequest) (*skeinv1.ElectLeadersResponse, error) {
	var parts []client.TopicPartitions
	if req.GetTopic() != "" {
		if _, _, err := knownTopic(ctx, s.c, req.GetTopic()); err != nil {
			return nil, err
		}
		parts = []client.TopicPartitions{{Topic: req.GetTopic()}}
	}
	typ := client.PreferredElection
	switch req.GetType() {
	case skeinv1.ElectionType_PREFERRED:
	case skeinv1.ElectionType_UNCLEAN:
		typ = client.UncleanElection
	default:
		return nil, errs.Errorf(errs.InvalidRequest, "unknown election type %d", req.GetType())
	}
	res, err := s.c.ElectLeaders(ctx, typ, parts)
	if err != nil {
		return nil, err
	}
	out := &skeinv1.ElectLeadersResponse{Results: []*skeinv1.ElectionResult{}}
	for _, r := range res {
		out.Results = append(out.Results, &skeinv1.ElectionResult{
			Topic: r.Topic, Partition: r.Partition, Leader: r.Leader,
			ErrorCode: skeinv1.ErrorCode(errs.CodeOf(r.Err)), Message: errs.Message(r.Err),
		})
	}
	return out, nil
}

// DescribeProducers answers the producers of a partition from its leader
// (kafka-transactions.sh describe-producers), by producer id: an open
// transaction's current_transaction_start_offset holds the partition's
// last stable offset back.
func (s *Admin) DescribeProducers(ctx context.Context, req *skeinv1.DescribeProducersRequest) (*skeinv1.DescribeProducersResponse, error) {
	_, n, err := knownTopic(ctx, s.c, req.GetTopic())
	if err != nil {
		return nil, err
	}
	if err := checkPartition(req.GetTopic(), req.GetPartition(), n); err != nil {
		return nil, err
	}
	ps, err := s.c.DescribeProducers(ctx, req.GetTopic(), req.GetPartition())
	if err != nil {
		return nil, err
	}
	out := &skeinv1.DescribeProducersResponse{Topic: req.GetTopic(), Partition: req.GetPartition(), Producers: []*skeinv1.ProducerDescription{}}
	for _, p := range ps {
		out.Producers = append(out.Producers, &skeinv1.ProducerDescription{ProducerId: p.GetProducerId(), ProducerEpoch: p.GetProducerEpoch(),
			LastSequence: p.GetLastSequence(), LastTimestampMs: p.GetLastTimestamp(), CoordinatorEpoch: p.GetCoordinatorEpoch(),
			CurrentTransactionStartOffset: p.GetCurrentTxnStartOffset()})
	}
	return out, nil
}
