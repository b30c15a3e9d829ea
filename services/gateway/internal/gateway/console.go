package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"sort"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/acl"
	"skein/libs/client"
	"skein/libs/metadata"
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
	groups  []consoleGroup
}

// consoleTopic and consoleGroup are one document of the topics and groups
// events, marshalled once for every stream (an event's Payload): a viewer
// that may see only some of them joins the documents it keeps.
type consoleTopic struct {
	name string
	raw  json.RawMessage
}

type consoleGroup struct {
	d   *skeinv1.DescribeGroupResponse // read only: shared by every stream
	raw json.RawMessage
}

var consoleJSON = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

func (s *consoleSource) Version() uint64 { return uint64(s.c.Metadata().Version()) }

var _ console.Forgetter = (*consoleSource)(nil)

// Forget drops what the last refresh read: the hub calls it when no one is
// subscribed any more, so that a later stream is not answered from
// minutes-old reads when its first refresh cannot reach a node.
func (s *consoleSource) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cluster, s.offsets, s.groups = nil, nil, nil
}

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
		out = append(out, console.Event{Name: "groups", Data: listDoc("groups", groupRaws(s.groups)), Payload: s.groups})
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
	var groups []consoleGroup
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
func (s *consoleSource) readGroups(ctx context.Context) []consoleGroup {
	list, err := s.group.ListGroups(ctx, &skeinv1.ListGroupsRequest{})
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(list.GetGroups()))
	for _, g := range list.GetGroups() {
		names = append(names, g.GetGroup())
	}
	sort.Strings(names)
	docs := make([]consoleGroup, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			d, err := s.group.DescribeGroup(ctx, &skeinv1.DescribeGroupRequest{Group: name})
			if err != nil {
				return
			}
			docs[i] = consoleGroup{d: d, raw: marshalDoc(d)}
		})
	}
	wg.Wait()
	out := make([]consoleGroup, 0, len(docs))
	for _, d := range docs {
		if d.d != nil {
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
	topics := []consoleTopic{}
	for _, t := range m.Topics() {
		d := &skeinv1.TopicDescription{Name: t.GetName(), TopicId: t.GetTopicId(), Configs: topicconfig.Effective(t.GetConfigs()), OverriddenConfigs: topicconfig.Overridden(t.GetConfigs()),
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
		topics = append(topics, consoleTopic{name: d.GetName(), raw: marshalDoc(d)})
	}
	raws := make([]json.RawMessage, len(topics))
	for i, t := range topics {
		raws[i] = t.raw
	}
	return console.Event{Name: "topics", Data: listDoc("topics", raws), Payload: topics}
}

// listDoc is an event's document: {"<name>": [docs...]}.
func listDoc(name string, docs []json.RawMessage) []byte {
	b := []byte(`{"` + name + `":[`)
	for i, d := range docs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, d...)
	}
	return append(b, "]}"...)
}

func groupRaws(groups []consoleGroup) []json.RawMessage {
	raws := make([]json.RawMessage, len(groups))
	for i, g := range groups {
		raws[i] = g.raw
	}
	return raws
}

// consoleViewer shows one principal the event stream under --authorizer.
// The stream needs the credentials it opened with to verify still as the
// same principal (a token removed from the token file, an expired JWT or
// certificate end it) and cluster describe, both checked again while it
// is open. The topics shown are those the principal may describe, and the
// groups those it may describe, each with its offsets and members' topics
// filtered as DescribeGroup filters them for the principal. What it showed
// of each event is kept, and computed again only when the event or the
// metadata image (which holds the ACLs) is another.
type consoleViewer struct {
	z         *authorizer
	principal string
	// valid answers nil while the stream's credentials still verify as
	// principal.
	valid func() error
	shown map[string]viewed
}

// viewed is what a viewer showed of an event: out, for data under image.
type viewed struct {
	data  []byte
	image *metadata.Image
	out   []byte
}

func newConsoleViewer(z *authorizer, principal string, valid func() error) *consoleViewer {
	return &consoleViewer{z: z, principal: principal, valid: valid, shown: map[string]viewed{}}
}

func (v *consoleViewer) Check() error {
	if err := v.valid(); err != nil {
		return err
	}
	if v.z.allowed(v.principal, acl.Cluster, "", acl.Describe) {
		return nil
	}
	return acl.Refusal(acl.Request{Principal: v.principal, Resource: acl.Cluster, Operation: acl.Describe})
}

func (v *consoleViewer) Show(e console.Event) []byte {
	img := v.z.image()
	// The same document (the hub passes on the slice it built, so this
	// compares pointers first) under the same image: the same answer.
	if last, ok := v.shown[e.Name]; ok && last.image == img && bytes.Equal(last.data, e.Data) {
		return last.out
	}
	out := v.show(e)
	v.shown[e.Name] = viewed{data: e.Data, image: img, out: out}
	return out
}

func (v *consoleViewer) show(e console.Event) []byte {
	describes := func(typ acl.ResourceType, name string) bool { return v.z.allowed(v.principal, typ, name, acl.Describe) }
	switch docs := e.Payload.(type) {
	case []consoleTopic:
		var kept []json.RawMessage
		for _, t := range docs {
			if describes(acl.Topic, t.name) {
				kept = append(kept, t.raw)
			}
		}
		return listDoc(e.Name, kept)
	case []consoleGroup:
		var kept []json.RawMessage
		for _, g := range docs {
			if !describes(acl.Group, g.d.GetGroup()) {
				continue
			}
			if groupTopicsDescribed(g.d, describes) {
				kept = append(kept, g.raw)
				continue
			}
			c := proto.Clone(g.d).(*skeinv1.DescribeGroupResponse)
			v.z.filter(v.principal, c)
			kept = append(kept, marshalDoc(c))
		}
		return listDoc(e.Name, kept)
	}
	if e.Name == "cluster" {
		return e.Data // cluster describe, which the stream needs, shows it
	}
	// An event this viewer does not know is shown empty, to every
	// principal: a new event says here what a principal may see of it.
	return []byte(`{}`)
}

// groupTopicsDescribed reports whether every topic a group's description
// names (its offsets, its members' subscriptions and assignments) is one
// the principal may describe: the description is then shown as it is.
func groupTopicsDescribed(d *skeinv1.DescribeGroupResponse, describes func(acl.ResourceType, string) bool) bool {
	for _, o := range d.GetOffsets() {
		if !describes(acl.Topic, o.GetTopic()) {
			return false
		}
	}
	for _, m := range d.GetMembers() {
		for _, t := range m.GetTopics() {
			if !describes(acl.Topic, t) {
				return false
			}
		}
		for _, a := range m.GetAssignment() {
			if !describes(acl.Topic, a.GetTopic()) {
				return false
			}
		}
	}
	return true
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
