package gateway

import (
	"context"
	"encoding/json"
	"sort"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/acl"
	"skein/libs/client"
	"skein/libs/topicconfig"
	"skein/services/gateway/internal/api"
	"skein/services/gateway/internal/console"
)

// consoleSource feeds the console's event stream from this gateway: the
// metadata it follows, and (on refresh) the public services' answers for
// the cluster, the partitions' offsets and the groups. Documents have the
// same JSON shapes as the REST answers they mirror.
type consoleSource struct {
	c     *client.Client
	admin *api.Admin
	group *api.Group

	mu      sync.Mutex
	cluster *skeinv1.GetClusterResponse
	// offsets are the partitions' offsets as last read, by topic and partition.
	offsets map[string]map[int32]*skeinv1.PartitionDescription
	groups  []*skeinv1.DescribeGroupResponse
}

var consoleJSON = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

func (s *consoleSource) Version() uint64 { return uint64(s.c.Metadata().Version()) }

// Collect answers the events "cluster", "topics" and "groups" (see
// docs/API.md, the event stream).
func (s *consoleSource) Collect(ctx context.Context, refresh bool) []console.Event {
	if refresh {
		s.refresh(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []console.Event
	if ev, ok := s.clusterEvent(); ok {
		out = append(out, ev)
	}
	out = append(out, s.topicsEvent())
	if s.groups != nil {
		out = append(out, console.Event{Name: "groups", Data: groupsDoc(s.groups), Payload: s.groups})
	}
	return out
}

// refresh reads what the metadata does not hold: the controllers, every
// partition's offsets from its leader, and every group.
func (s *consoleSource) refresh(ctx context.Context) {
	var wg sync.WaitGroup
	var cluster *skeinv1.GetClusterResponse
	wg.Go(func() {
		if c, err := s.admin.GetCluster(ctx, &skeinv1.GetClusterRequest{}); err == nil {
			cluster = c
		}
	})
	m := s.c.Metadata()
	offsets := map[string]map[int32]*skeinv1.PartitionDescription{}
	var omu sync.Mutex
	for _, t := range m.Topics() {
		wg.Go(func() {
			d, err := s.admin.DescribeTopic(ctx, &skeinv1.DescribeTopicRequest{Topic: t.GetName()})
			if err != nil {
				return
			}
			byPart := map[int32]*skeinv1.PartitionDescription{}
			for _, p := range d.GetTopic().GetPartitions() {
				byPart[p.GetPartition()] = p
			}
			omu.Lock()
			offsets[t.GetName()] = byPart
			omu.Unlock()
		})
	}
	var groups []*skeinv1.DescribeGroupResponse
	wg.Go(func() { groups = s.readGroups(ctx) })
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if cluster != nil {
		s.cluster = cluster
	}
	if s.offsets == nil {
		s.offsets = map[string]map[int32]*skeinv1.PartitionDescription{}
	}
	for topic, parts := range offsets {
		s.offsets[topic] = parts
	}
	for topic := range s.offsets {
		if _, ok := m.Topic(topic); !ok {
			delete(s.offsets, topic)
		}
	}
	if groups != nil {
		s.groups = groups
	}
}

// readGroups describes every group, nil when the list failed.
func (s *consoleSource) readGroups(ctx context.Context) []*skeinv1.DescribeGroupResponse {
	list, err := s.group.ListGroups(ctx, &skeinv1.ListGroupsRequest{})
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(list.GetGroups()))
	for _, g := range list.GetGroups() {
		names = append(names, g.GetGroup())
	}
	sort.Strings(names)
	docs := make([]*skeinv1.DescribeGroupResponse, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			d, err := s.group.DescribeGroup(ctx, &skeinv1.DescribeGroupRequest{Group: name})
			if err != nil {
				return
			}
			docs[i] = d
		})
	}
	wg.Wait()
	out := make([]*skeinv1.DescribeGroupResponse, 0, len(docs))
	for _, d := range docs {
		if d != nil {
			out = append(out, d)
		}
	}
	return out
}

// clusterEvent is GetCluster as last read, with the brokers' states as
// this gateway's metadata has them now (a fence shows at once), and the
// coordinators from the metadata.
func (s *consoleSource) clusterEvent() (console.Event, bool) {
	if s.cluster == nil {
		return console.Event{}, false
	}
	m := s.c.Metadata()
	c := proto.Clone(s.cluster).(*skeinv1.GetClusterResponse)
	fenced := map[int32]bool{}
	for _, rec := range m.Brokers() {
		fenced[rec.GetId()] = rec.GetFenced()
	}
	for _, b := range c.GetBrokers() {
		if f, ok := fenced[b.GetId()]; ok {
			b.State = "ALIVE"
			if f {
				b.State = "FENCED"
			}
		}
	}
	type coordinator struct {
		ID       int32  `json:"id"`
		Kind     string `json:"kind"`
		GRPCAddr string `json:"grpc_addr"`
		Alive    bool   `json:"alive"`
	}
	coords := []coordinator{}
	for _, co := range m.Coordinators() {
		coords = append(coords, coordinator{ID: co.GetId(), Kind: co.GetKind().String(), GRPCAddr: co.GetGrpcAddr(), Alive: co.GetAlive()})
	}
	var doc map[string]json.RawMessage
	_ = json.Unmarshal(marshalDoc(c), &doc)
	doc["coordinators"], _ = json.Marshal(coords)
	raw, _ := json.Marshal(doc)
	return console.Event{Name: "cluster", Data: raw}, true
}

// topicsEvent describes every topic, internal ones included, as GET
// /v1/topics/{topic} does: the layout from the metadata now, the offsets
// as last read (-1 until they are).
func (s *consoleSource) topicsEvent() console.Event {
	m := s.c.Metadata()
	topics := []*skeinv1.TopicDescription{}
	for _, t := range m.Topics() {
		d := &skeinv1.TopicDescription{Name: t.GetName(), TopicId: t.GetTopicId(), Configs: topicconfig.Effective(t.GetConfigs()),
			Internal: t.GetInternal() || api.IsInternalTopic(t.GetName()), Partitions: []*skeinv1.PartitionDescription{}}
		for i, p := range m.Partitions(t.GetName()) {
			pd := &skeinv1.PartitionDescription{Partition: int32(i), Leader: -1, LogStartOffset: -1, HighWatermark: -1, LastStableOffset: -1}
			if last, ok := s.offsets[t.GetName()][int32(i)]; ok {
				pd = proto.Clone(last).(*skeinv1.PartitionDescription)
			}
			if p != nil {
				pd.Leader, pd.LeaderEpoch, pd.Replicas, pd.Isr = p.GetLeader(), p.GetLeaderEpoch(), p.GetReplicas(), p.GetIsr()
				pd.LostReplica = api.LostReplica(p)
				d.ReplicationFactor = int32(len(p.GetReplicas()))
			}
			d.Partitions = append(d.Partitions, pd)
		}
		topics = append(topics, d)
	}
	return console.Event{Name: "topics", Data: topicsDoc(topics), Payload: topics}
}

func topicsDoc(topics []*skeinv1.TopicDescription) []byte {
	docs := make([]json.RawMessage, 0, len(topics))
	for _, t := range topics {
		docs = append(docs, marshalDoc(t))
	}
	raw, _ := json.Marshal(map[string]any{"topics": docs})
	return raw
}

func groupsDoc(groups []*skeinv1.DescribeGroupResponse) []byte {
	docs := make([]json.RawMessage, 0, len(groups))
	for _, g := range groups {
		docs = append(docs, marshalDoc(g))
	}
	raw, _ := json.Marshal(map[string]any{"groups": docs})
	return raw
}

// consoleViewer shows one principal the event stream under --authorizer:
// the stream needs cluster describe, checked again while it is open; the
// topics are those it may describe, and the groups those it may describe,
// each with its offsets and members' topics filtered as DescribeGroup
// filters them for the principal.
type consoleViewer struct {
	z         *authorizer
	principal string
}

func (v consoleViewer) Check() error {
	if v.z.allowed(v.principal, acl.Cluster, "", acl.Describe) {
		return nil
	}
	return acl.Refusal(acl.Request{Principal: v.principal, Resource: acl.Cluster, Operation: acl.Describe})
}

func (v consoleViewer) Show(e console.Event) []byte {
	switch docs := e.Payload.(type) {
	case []*skeinv1.TopicDescription:
		kept := []*skeinv1.TopicDescription{}
		for _, t := range docs {
			if v.z.allowed(v.principal, acl.Topic, t.GetName(), acl.Describe) {
				kept = append(kept, t)
			}
		}
		return topicsDoc(kept)
	case []*skeinv1.DescribeGroupResponse:
		kept := []*skeinv1.DescribeGroupResponse{}
		for _, g := range docs {
			if v.z.allowed(v.principal, acl.Group, g.GetGroup(), acl.Describe) {
				c := proto.Clone(g).(*skeinv1.DescribeGroupResponse)
				v.z.filter(v.principal, c)
				kept = append(kept, c)
			}
		}
		return groupsDoc(kept)
	}
	return e.Data
}

func marshalDoc(m proto.Message) json.RawMessage {
	raw, err := consoleJSON.Marshal(m)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	// Compact: protojson may add spaces, and an event's data is one line.
	var out json.RawMessage
	if err := json.Unmarshal(raw, &out); err != nil {
		return json.RawMessage(`{}`)
	}
	return compact(out)
}

func compact(raw json.RawMessage) json.RawMessage {
	var b []byte
	b, err := json.Marshal(raw)
	if err != nil {
		return raw
	}
	return b
}
