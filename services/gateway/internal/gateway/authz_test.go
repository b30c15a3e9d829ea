package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	controllerv1 "skein/gen/skein/controller/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/acl"
	"skein/libs/client"
	"skein/libs/errs"
	"skein/libs/metadata"
)

// Every public request that needs a permission is refused with its
// resource's row when no binding grants it, and allowed for a super user.
func TestNeedsRefuseWithTheResourceRow(t *testing.T) {
	z := newAuthorizer(func() *metadata.Image { return metadata.New("c") }, map[string]bool{"User:root": true})
	cases := []struct {
		req  any
		want *errs.Error
	}{
		{&skeinv1.GetClusterRequest{}, errs.ClusterAuthorizationFailed},
		{&skeinv1.CreateTopicRequest{Name: "t"}, errs.TopicAuthorizationFailed},
		{&skeinv1.DescribeTopicRequest{Topic: "t"}, errs.TopicAuthorizationFailed},
		{&skeinv1.DeleteTopicRequest{Topic: "t"}, errs.TopicAuthorizationFailed},
		{&skeinv1.CreatePartitionsRequest{Topic: "t"}, errs.TopicAuthorizationFailed},
		{&skeinv1.AlterTopicConfigsRequest{Topic: "t"}, errs.TopicAuthorizationFailed},
		{&skeinv1.ListOffsetsRequest{Topic: "t"}, errs.TopicAuthorizationFailed},
		{&skeinv1.DeleteRecordsRequest{Topic: "t"}, errs.TopicAuthorizationFailed},
		{&skeinv1.DescribeProducersRequest{Topic: "t"}, errs.TopicAuthorizationFailed},
		{&skeinv1.ElectLeadersRequest{}, errs.ClusterAuthorizationFailed},
		{&skeinv1.CreateAclsRequest{}, errs.ClusterAuthorizationFailed},
		{&skeinv1.DescribeAclsRequest{}, errs.ClusterAuthorizationFailed},
		{&skeinv1.DeleteAclsRequest{}, errs.ClusterAuthorizationFailed},
		{&skeinv1.ProduceRequest{Topic: "t"}, errs.TopicAuthorizationFailed},
		{&skeinv1.ProduceStreamRequest{Topic: "t"}, errs.TopicAuthorizationFailed},
		{&skeinv1.FetchRequest{Topic: "t"}, errs.TopicAuthorizationFailed},
		{&skeinv1.TailRequest{Topic: "t"}, errs.TopicAuthorizationFailed},
		{&skeinv1.JoinGroupRequest{Group: "g", Topics: []string{"t"}}, errs.GroupAuthorizationFailed},
		{&skeinv1.HeartbeatRequest{Group: "g"}, errs.GroupAuthorizationFailed},
		{&skeinv1.FetchGroupRecordsRequest{Group: "g"}, errs.GroupAuthorizationFailed},
		{&skeinv1.CommitOffsetsRequest{Group: "g"}, errs.GroupAuthorizationFailed},
		{&skeinv1.GetOffsetsRequest{Group: "g"}, errs.GroupAuthorizationFailed},
		{&skeinv1.LeaveGroupRequest{Group: "g"}, errs.GroupAuthorizationFailed},
		{&skeinv1.NackRecordRequest{Group: "g"}, errs.GroupAuthorizationFailed},
		{&skeinv1.DescribeGroupRequest{Group: "g"}, errs.GroupAuthorizationFailed},
		{&skeinv1.GetGroupConfigRequest{Group: "g"}, errs.GroupAuthorizationFailed},
		{&skeinv1.SetGroupConfigRequest{Group: "g"}, errs.GroupAuthorizationFailed},
		{&skeinv1.DeleteGroupRequest{Group: "g"}, errs.GroupAuthorizationFailed},
		{&skeinv1.DeleteOffsetsRequest{Group: "g", Topic: "t"}, errs.GroupAuthorizationFailed},
		{&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Subscribe{Subscribe: &skeinv1.JoinGroupRequest{Group: "g"}}}, errs.GroupAuthorizationFailed},
		{&skeinv1.InitProducerRequest{TransactionalId: "x"}, errs.TransactionalIDAuthorizationFailed},
		{&skeinv1.SendOffsetsRequest{TransactionalId: "x", Group: "g"}, errs.TransactionalIDAuthorizationFailed},
		{&skeinv1.CommitTransactionRequest{TransactionalId: "x"}, errs.TransactionalIDAuthorizationFailed},
		{&skeinv1.AbortTransactionRequest{TransactionalId: "x"}, errs.TransactionalIDAuthorizationFailed},
		{&skeinv1.DescribeTransactionRequest{TransactionalId: "x"}, errs.TransactionalIDAuthorizationFailed},
		// An idempotent (non-transactional) producer: write on some topic,
		// refused as Kafka does.
		{&skeinv1.InitProducerRequest{}, errs.ClusterAuthorizationFailed},
		// Needing nothing: a listing, a commit or nack on a Consume stream
		// (for the stream's own group, checked at its subscribe).
		{&skeinv1.ListTopicsRequest{}, nil},
		{&skeinv1.ListGroupsRequest{}, nil},
		{&skeinv1.ListTransactionsRequest{}, nil},
		{&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Commit{Commit: &skeinv1.CommitOffsetsRequest{}}}, nil},
		{&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Nack{Nack: &skeinv1.NackRecordRequest{}}}, nil},
		// ... but read on the topics they name.
		{&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Commit{Commit: &skeinv1.CommitOffsetsRequest{
			Offsets: []*skeinv1.TopicPartitionOffset{{Topic: "t"}}}}}, errs.TopicAuthorizationFailed},
		{&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Nack{Nack: &skeinv1.NackRecordRequest{Topic: "t"}}}, errs.TopicAuthorizationFailed},
	}
	// Every public RPC is in the table: an RPC added without a case in
	// needs would be allowed to everyone.
	tested := map[protoreflect.FullName]bool{}
	for _, tc := range cases {
		tested[tc.req.(proto.Message).ProtoReflect().Descriptor().FullName()] = true
	}
	protoregistry.GlobalFiles.RangeFilesByPackage("skein.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				if m := sd.Methods().Get(j); !tested[m.Input().FullName()] {
					t.Errorf("%s takes %s, which the table does not check", m.FullName(), m.Input().FullName())
				}
			}
		}
		return true
	})
	for _, tc := range cases {
		_, err := z.check("User:bob", tc.req)
		if got := errs.Of(err); (tc.want == nil && err != nil) || (tc.want != nil && got != tc.want) {
			t.Errorf("%T: %v, want %v", tc.req, err, tc.want)
		}
		if _, err := z.check("User:root", tc.req); err != nil {
			t.Errorf("%T refused to a super user: %v", tc.req, err)
		}
	}
}

// Committing offsets, plainly, in a transaction or on a Consume stream,
// and nacking a record, read their topics as well as the group, as Kafka's
// offset commits: read on the group alone does not commit offsets of (or
// dead-letter a record from) a topic the principal may not read.
func TestOffsetCommitsReadTheirTopics(t *testing.T) {
	img := metadata.New("c")
	grants := []acl.Binding{
		{Principal: "User:bob", Resource: acl.Group, Name: "g", Pattern: acl.Literal, Operation: acl.Read, Permission: acl.Allow},
		{Principal: "User:bob", Resource: acl.TransactionalID, Name: "x", Pattern: acl.Literal, Operation: acl.Write, Permission: acl.Allow},
		{Principal: "User:bob", Resource: acl.Topic, Name: "mine", Pattern: acl.Literal, Operation: acl.Read, Permission: acl.Allow},
	}
	var recs []*controllerv1.MetadataRecord
	for _, b := range grants {
		recs = append(recs, metadata.AclRecord(b))
	}
	if err := img.Apply(&controllerv1.MetadataDelta{Version: 1, Records: recs}); err != nil {
		t.Fatal(err)
	}
	z := newAuthorizer(func() *metadata.Image { return img }, nil)
	offsets := func(topics ...string) []*skeinv1.TopicPartitionOffset {
		var out []*skeinv1.TopicPartitionOffset
		for _, tp := range topics {
			out = append(out, &skeinv1.TopicPartitionOffset{Topic: tp})
		}
		return out
	}
	for _, tc := range []struct {
		req  any
		want *errs.Error
	}{
		{&skeinv1.CommitOffsetsRequest{Group: "g", Offsets: offsets("mine")}, nil},
		{&skeinv1.CommitOffsetsRequest{Group: "g", Offsets: offsets("mine", "theirs")}, errs.TopicAuthorizationFailed},
		{&skeinv1.SendOffsetsRequest{TransactionalId: "x", Group: "g", Offsets: offsets("mine")}, nil},
		{&skeinv1.SendOffsetsRequest{TransactionalId: "x", Group: "g", Offsets: offsets("theirs")}, errs.TopicAuthorizationFailed},
		// A nack dead-letters the record and commits past it: read on its
		// topic too, whether or not the topic exists.
		{&skeinv1.NackRecordRequest{Group: "g", Topic: "mine"}, nil},
		{&skeinv1.NackRecordRequest{Group: "g", Topic: "theirs"}, errs.TopicAuthorizationFailed},
		{&skeinv1.NackRecordRequest{Group: "g", Topic: "no-such-topic"}, errs.TopicAuthorizationFailed},
		{&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Nack{Nack: &skeinv1.NackRecordRequest{Topic: "mine"}}}, nil},
		{&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Nack{Nack: &skeinv1.NackRecordRequest{Topic: "theirs"}}}, errs.TopicAuthorizationFailed},
		{&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Commit{Commit: &skeinv1.CommitOffsetsRequest{Offsets: offsets("mine")}}}, nil},
		{&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Commit{Commit: &skeinv1.CommitOffsetsRequest{Offsets: offsets("theirs")}}}, errs.TopicAuthorizationFailed},
	} {
		_, err := z.check("User:bob", tc.req)
		if got := errs.Of(err); (tc.want == nil && err != nil) || (tc.want != nil && got != tc.want) {
			t.Errorf("%v: %v, want %v", tc.req, err, tc.want)
		}
	}
}

// Deleting a group's offsets needs delete on the group and read on the
// topic, as Kafka's OffsetDelete: read on the group is not delete, and
// delete on the group does not reach a topic the principal may not read.
func TestDeleteOffsetsNeedsDeleteAndRead(t *testing.T) {
	img := metadata.New("c")
	var recs []*controllerv1.MetadataRecord
	for _, b := range []acl.Binding{
		{Principal: "User:bob", Resource: acl.Group, Name: "g", Pattern: acl.Literal, Operation: acl.Delete, Permission: acl.Allow},
		{Principal: "User:bob", Resource: acl.Group, Name: "r", Pattern: acl.Literal, Operation: acl.Read, Permission: acl.Allow},
		{Principal: "User:bob", Resource: acl.Topic, Name: "mine", Pattern: acl.Literal, Operation: acl.Read, Permission: acl.Allow},
	} {
		recs = append(recs, metadata.AclRecord(b))
	}
	if err := img.Apply(&controllerv1.MetadataDelta{Version: 1, Records: recs}); err != nil {
		t.Fatal(err)
	}
	z := newAuthorizer(func() *metadata.Image { return img }, nil)
	for _, tc := range []struct {
		req  *skeinv1.DeleteOffsetsRequest
		want *errs.Error
	}{
		{&skeinv1.DeleteOffsetsRequest{Group: "g", Topic: "mine"}, nil},
		{&skeinv1.DeleteOffsetsRequest{Group: "g", Topic: "mine", Partition: []int32{0, 1}}, nil},
		{&skeinv1.DeleteOffsetsRequest{Group: "g", Topic: "theirs"}, errs.TopicAuthorizationFailed},
		{&skeinv1.DeleteOffsetsRequest{Group: "r", Topic: "mine"}, errs.GroupAuthorizationFailed},
		// No topic: the handler refuses it (INVALID_REQUEST), not the topic "".
		{&skeinv1.DeleteOffsetsRequest{Group: "g"}, nil},
	} {
		_, err := z.check("User:bob", tc.req)
		if got := errs.Of(err); (tc.want == nil && err != nil) || (tc.want != nil && got != tc.want) {
			t.Errorf("%v: %v, want %v", tc.req, err, tc.want)
		}
	}
}

// An idempotent producer's id needs write on some topic: read is not
// enough, and a write denied where it was allowed leaves nothing.
func TestIdempotentProducerNeedsWriteOnSomeTopic(t *testing.T) {
	img := metadata.New("c")
	var recs []*controllerv1.MetadataRecord
	for _, b := range []acl.Binding{
		{Principal: "User:bob", Resource: acl.Topic, Name: "orders-", Pattern: acl.Prefixed, Operation: acl.Write, Permission: acl.Allow},
		{Principal: "User:eve", Resource: acl.Topic, Name: "*", Pattern: acl.Literal, Operation: acl.Read, Permission: acl.Allow},
		{Principal: "User:mallory", Resource: acl.Topic, Name: "orders", Pattern: acl.Literal, Operation: acl.Write, Permission: acl.Allow},
		{Principal: "User:mallory", Resource: acl.Topic, Name: "orders", Pattern: acl.Prefixed, Operation: acl.All, Permission: acl.Deny},
	} {
		recs = append(recs, metadata.AclRecord(b))
	}
	if err := img.Apply(&controllerv1.MetadataDelta{Version: 1, Records: recs}); err != nil {
		t.Fatal(err)
	}
	z := newAuthorizer(func() *metadata.Image { return img }, nil)
	for principal, want := range map[string]*errs.Error{"User:bob": nil, "User:eve": errs.ClusterAuthorizationFailed, "User:mallory": errs.ClusterAuthorizationFailed} {
		_, err := z.check(principal, &skeinv1.InitProducerRequest{})
		if got := errs.Of(err); (want == nil && err != nil) || (want != nil && got != want) {
			t.Errorf("%s: %v, want %v", principal, err, want)
		}
	}
}

// A group's offsets and lag, and its members' subscriptions and
// assignments, show only the topics the principal may describe, as
// Kafka's offset fetch.
func TestGroupOffsetsShowOnlyDescribedTopics(t *testing.T) {
	img := metadata.New("c")
	if err := img.Apply(&controllerv1.MetadataDelta{Version: 1, Records: []*controllerv1.MetadataRecord{metadata.AclRecord(
		acl.Binding{Principal: "User:bob", Resource: acl.Topic, Name: "mine", Pattern: acl.Literal, Operation: acl.Read, Permission: acl.Allow})}}); err != nil {
		t.Fatal(err)
	}
	z := newAuthorizer(func() *metadata.Image { return img }, map[string]bool{"User:root": true})
	offsets := func() []*skeinv1.CommittedOffset {
		return []*skeinv1.CommittedOffset{{Topic: "mine", Lag: 3}, {Topic: "theirs", Lag: 5}, {Topic: "mine", Partition: 1, Lag: 1},
			{Topic: "mine", Partition: 2, Offset: -1, Lag: -1}} // assigned, nothing committed: no lag known
	}
	get := &skeinv1.GetOffsetsResponse{Offsets: offsets()}
	z.filter("User:bob", get)
	if len(get.GetOffsets()) != 3 || get.GetOffsets()[0].GetTopic() != "mine" || get.GetOffsets()[1].GetTopic() != "mine" {
		t.Errorf("offsets shown to bob: %v, want mine's three", get.GetOffsets())
	}
	desc := &skeinv1.DescribeGroupResponse{Offsets: offsets(), TotalLag: 9}
	z.filter("User:bob", desc)
	if len(desc.GetOffsets()) != 3 || desc.GetTotalLag() != 4 {
		t.Errorf("a description shown to bob: %v with total lag %d, want mine's three offsets and lag 4", desc.GetOffsets(), desc.GetTotalLag())
	}
	members := func() []*skeinv1.GroupMember {
		return []*skeinv1.GroupMember{{MemberId: "m", Topics: []string{"theirs", "mine"},
			Assignment: []*skeinv1.TopicPartitions{{Topic: "theirs", Partitions: []int32{0}}, {Topic: "mine", Partitions: []int32{0, 1}}}}}
	}
	desc = &skeinv1.DescribeGroupResponse{Offsets: offsets(), TotalLag: 9, Members: members()}
	z.filter("User:bob", desc)
	if m := desc.GetMembers()[0]; len(m.GetTopics()) != 1 || m.GetTopics()[0] != "mine" || len(m.GetAssignment()) != 1 || m.GetAssignment()[0].GetTopic() != "mine" {
		t.Errorf("a member shown to bob: %v, want only mine", m)
	}
	desc = &skeinv1.DescribeGroupResponse{Offsets: offsets(), TotalLag: 9, Members: members()}
	z.filter("User:root", desc)
	if m := desc.GetMembers()[0]; len(m.GetTopics()) != 2 || len(m.GetAssignment()) != 2 {
		t.Errorf("a member shown to a super user: %v, want all", m)
	}
	if len(desc.GetOffsets()) != 4 || desc.GetTotalLag() != 9 {
		t.Errorf("a description shown to a super user: %v with total lag %d, want all", desc.GetOffsets(), desc.GetTotalLag())
	}
}

// What a member's heartbeat and fetch answer is filtered as a group's
// description is: a principal with read on the group alone, calling in
// another member's name, learns neither the topics it reads nor their
// records.
func TestMemberAnswersShowOnlyPermittedTopics(t *testing.T) {
	img := metadata.New("c")
	if err := img.Apply(&controllerv1.MetadataDelta{Version: 1, Records: []*controllerv1.MetadataRecord{
		metadata.AclRecord(acl.Binding{Principal: "User:bob", Resource: acl.Topic, Name: "mine", Pattern: acl.Literal, Operation: acl.Read, Permission: acl.Allow}),
		metadata.AclRecord(acl.Binding{Principal: "User:bob", Resource: acl.Topic, Name: "seen", Pattern: acl.Literal, Operation: acl.Describe, Permission: acl.Allow}),
	}}); err != nil {
		t.Fatal(err)
	}
	z := newAuthorizer(func() *metadata.Image { return img }, map[string]bool{"User:root": true})
	assignment := func() []*skeinv1.TopicPartitions {
		return []*skeinv1.TopicPartitions{{Topic: "secret", Partitions: []int32{0}}, {Topic: "mine", Partitions: []int32{0}}, {Topic: "seen", Partitions: []int32{0}}}
	}
	topics := func(tps []*skeinv1.TopicPartitions) string {
		var out []string
		for _, a := range tps {
			out = append(out, a.GetTopic())
		}
		return strings.Join(out, ",")
	}
	hb := &skeinv1.HeartbeatResponse{Assignment: assignment()}
	z.filter("User:bob", hb)
	join := &skeinv1.JoinGroupResponse{Assignment: assignment()}
	z.filter("User:bob", join)
	if topics(hb.GetAssignment()) != "mine,seen" || topics(join.GetAssignment()) != "mine,seen" {
		t.Errorf("assignments shown to bob: %s and %s, want mine,seen", topics(hb.GetAssignment()), topics(join.GetAssignment()))
	}
	fetch := func() *skeinv1.FetchGroupRecordsResponse {
		return &skeinv1.FetchGroupRecordsResponse{Assignment: assignment(),
			Records:   []*skeinv1.ConsumedRecord{{Topic: "secret", Offset: 4}, {Topic: "mine", Offset: 7}, {Topic: "seen", Offset: 1}},
			Positions: []*skeinv1.TopicPartitionOffset{{Topic: "secret", Offset: 5}, {Topic: "mine", Offset: 8}, {Topic: "seen", Offset: 2}}}
	}
	f := fetch()
	z.filter("User:bob", f)
	if topics(f.GetAssignment()) != "mine,seen" || len(f.GetRecords()) != 1 || f.GetRecords()[0].GetTopic() != "mine" ||
		len(f.GetPositions()) != 1 || f.GetPositions()[0].GetTopic() != "mine" {
		t.Errorf("a fetch shown to bob: %v, want mine's record and position (seen is described, not read)", f)
	}
	f = fetch()
	z.filter("User:root", f)
	if len(f.GetAssignment()) != 3 || len(f.GetRecords()) != 3 || len(f.GetPositions()) != 3 {
		t.Errorf("a fetch shown to a super user: %v, want all", f)
	}
}

// A topic created with create alone is answered by its name: its id,
// configs and placement are for those who may describe it.
func TestCreatedTopicShownOnlyToDescribers(t *testing.T) {
	img := metadata.New("c")
	if err := img.Apply(&controllerv1.MetadataDelta{Version: 1, Records: []*controllerv1.MetadataRecord{
		metadata.AclRecord(acl.Binding{Principal: "User:bob", Resource: acl.Topic, Name: "bob-", Pattern: acl.Prefixed, Operation: acl.Create, Permission: acl.Allow}),
		metadata.AclRecord(acl.Binding{Principal: "User:carol", Resource: acl.Topic, Name: "bob-", Pattern: acl.Prefixed, Operation: acl.All, Permission: acl.Allow}),
	}}); err != nil {
		t.Fatal(err)
	}
	z := newAuthorizer(func() *metadata.Image { return img }, nil)
	created := func() *skeinv1.CreateTopicResponse {
		return &skeinv1.CreateTopicResponse{Topic: &skeinv1.TopicDescription{Name: "bob-1", TopicId: "id-1", ReplicationFactor: 3,
			Configs: map[string]string{"retention.ms": "1"}, Partitions: []*skeinv1.PartitionDescription{{Leader: 2, Replicas: []int32{2, 3, 1}}}}}
	}
	r := created()
	z.filter("User:bob", r)
	if !proto.Equal(r.GetTopic(), &skeinv1.TopicDescription{Name: "bob-1"}) {
		t.Errorf("shown to its creator, who may not describe it: %v, want the name only", r.GetTopic())
	}
	r = created()
	z.filter("User:carol", r)
	if !proto.Equal(r, created()) {
		t.Errorf("shown to a principal who may describe it: %v, want all of it", r.GetTopic())
	}
}

// With --authorizer, calls without a granting binding are 403 with the
// resource's row and logged; bindings added through the controller grant
// them; listings show only what the principal may describe.
func TestAuthorizer(t *testing.T) {
	logs := &syncBuffer{}
	e := startWith(t, func(c *Config) {
		c.Authorizer = true
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	e.cluster.StartGroupCoordinator(t, 1)
	e.waitReady()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := e.gw.Client()
	if _, err := c.CreateTopic(ctx, client.TopicSpec{Name: "orders", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitMetadata(ctx, func(m *metadata.Image) bool { return m.PartitionCount("orders") == 1 }); err != nil {
		t.Fatal(err)
	}
	produce := `{"records": [{"value": "x"}]}`
	for _, tc := range []struct{ method, path, body, row string }{
		{"POST", "/v1/topics/orders/records", produce, "TOPIC_AUTHORIZATION_FAILED"},
		{"GET", "/v1/topics/orders/partitions/0/records?offset=0", "", "TOPIC_AUTHORIZATION_FAILED"},
		{"POST", "/v1/topics", `{"name": "new"}`, "TOPIC_AUTHORIZATION_FAILED"},
		{"POST", "/v1/groups/g/members", `{"topics": ["orders"]}`, "GROUP_AUTHORIZATION_FAILED"},
		{"POST", "/v1/acls", `{"acls": [{"principal": "User:ANONYMOUS", "resource_type": "cluster", "operation": "all"}]}`, "CLUSTER_AUTHORIZATION_FAILED"},
	} {
		code, out := e.do(tc.method, tc.path, tc.body)
		if code != http.StatusForbidden || out["error_code"] != tc.row || !strings.Contains(out["message"].(string), "User:ANONYMOUS may not") {
			t.Errorf("%s %s: %d %v, want 403 %s", tc.method, tc.path, code, out, tc.row)
		}
	}
	if ts := e.mustDo("GET", "/v1/topics", "")["topics"].([]any); len(ts) != 0 {
		t.Errorf("topics listed without describe: %v", ts)
	}
	if l := logs.String(); !strings.Contains(l, `msg="call denied" principal=User:ANONYMOUS operation=/skein.v1.ProducerService/Produce resource=topic:orders acl_operation=write error_code=TOPIC_AUTHORIZATION_FAILED`) {
		t.Errorf("no denial log line:\n%s", l)
	}

	grant := []acl.Binding{
		{Principal: "User:ANONYMOUS", Resource: acl.Topic, Name: "ord", Pattern: acl.Prefixed, Operation: acl.Write, Permission: acl.Allow},
		{Principal: "User:*", Resource: acl.Topic, Name: "orders", Pattern: acl.Literal, Operation: acl.Read, Permission: acl.Allow},
		{Principal: "User:ANONYMOUS", Resource: acl.Group, Name: "g", Pattern: acl.Literal, Operation: acl.Read, Permission: acl.Allow},
		{Principal: "User:ANONYMOUS", Resource: acl.Cluster, Name: acl.ClusterName, Pattern: acl.Literal, Operation: acl.Create, Permission: acl.Allow},
	}
	if res, err := c.CreateAcls(ctx, grant); err != nil || res[0] != nil {
		t.Fatal(res, err)
	}
	if _, err := c.WaitMetadata(ctx, func(m *metadata.Image) bool { return len(m.Acls()) == len(grant) }); err != nil {
		t.Fatal(err)
	}
	e.mustDo("POST", "/v1/topics/orders/records", produce)
	e.mustDo("GET", "/v1/topics/orders/partitions/0/records?offset=0", "")
	e.mustDo("POST", "/v1/topics", `{"name": "new"}`) // through cluster create
	e.mustDo("POST", "/v1/groups/g/members", `{"topics": ["orders"]}`)
	// Read implies describe: orders is listed, "new" is not.
	if ts := e.mustDo("GET", "/v1/topics", "")["topics"].([]any); len(ts) != 1 || ts[0].(map[string]any)["name"] != "orders" {
		t.Errorf("listed %v, want only orders", ts)
	}

	// A deny wins over the allows.
	deny := acl.Binding{Principal: "User:*", Resource: acl.Topic, Name: "*", Pattern: acl.Literal, Operation: acl.Write, Permission: acl.Deny}
	if _, err := c.CreateAcls(ctx, []acl.Binding{deny}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitMetadata(ctx, func(m *metadata.Image) bool { return m.HasAcl(deny) }); err != nil {
		t.Fatal(err)
	}
	if code, out := e.do("POST", "/v1/topics/orders/records", produce); code != http.StatusForbidden || out["error_code"] != "TOPIC_AUTHORIZATION_FAILED" {
		t.Errorf("produce against a deny: %d %v", code, out)
	}
}

// A listing of transactions shows only the ids the principal may describe
// (write implies describe), as Kafka's ListTransactions.
func TestTransactionListShowsOnlyDescribedIDs(t *testing.T) {
	img := metadata.New("c")
	if err := img.Apply(&controllerv1.MetadataDelta{Version: 1, Records: []*controllerv1.MetadataRecord{
		metadata.AclRecord(acl.Binding{Principal: "User:bob", Resource: acl.TransactionalID, Name: "seen", Pattern: acl.Literal, Operation: acl.Describe, Permission: acl.Allow}),
		metadata.AclRecord(acl.Binding{Principal: "User:bob", Resource: acl.TransactionalID, Name: "app-", Pattern: acl.Prefixed, Operation: acl.Write, Permission: acl.Allow}),
	}}); err != nil {
		t.Fatal(err)
	}
	z := newAuthorizer(func() *metadata.Image { return img }, map[string]bool{"User:root": true})
	list := func() *skeinv1.ListTransactionsResponse {
		return &skeinv1.ListTransactionsResponse{Transactions: []*skeinv1.TransactionSummary{
			{TransactionalId: "app-1"}, {TransactionalId: "hidden"}, {TransactionalId: "seen"}}}
	}
	ids := func(r *skeinv1.ListTransactionsResponse) (out []string) {
		for _, x := range r.GetTransactions() {
			out = append(out, x.GetTransactionalId())
		}
		return out
	}
	for principal, want := range map[string][]string{"User:bob": {"app-1", "seen"}, "User:eve": nil, "User:root": {"app-1", "hidden", "seen"}} {
		r := list()
		z.filter(principal, r)
		if got := ids(r); !slices.Equal(got, want) {
			t.Errorf("listed to %s: %v, want %v", principal, got, want)
		}
	}
	if _, err := z.check("User:bob", &skeinv1.DescribeTransactionRequest{TransactionalId: "app-1"}); err != nil {
		t.Errorf("describe with write on the id: %v", err)
	}
	if _, err := z.check("User:bob", &skeinv1.DescribeTransactionRequest{TransactionalId: "hidden"}); errs.Of(err) != errs.TransactionalIDAuthorizationFailed {
		t.Errorf("describe without describe on the id: %v", err)
	}
}
