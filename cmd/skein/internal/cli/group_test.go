package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/rpcerr"
)

// fakeGroups is GroupService with one group "g" whose member count tests set.
type fakeGroups struct {
	skeinv1.UnimplementedGroupServiceServer

	mu        sync.Mutex
	members   int
	exists    bool
	commits   []*skeinv1.CommitOffsetsRequest
	deleted   bool
	subscribe *skeinv1.JoinGroupRequest
	// refuse: partitions whose commits are answered with this code.
	refuse map[int32]skeinv1.ErrorCode
	// firstTwice: the answer holds the first partition's result twice and
	// no other.
	firstTwice bool
	// positions go with the records; noRecords sends them alone, as the
	// gateway does for a partition started at its reset offset.
	positions []*skeinv1.TopicPartitionOffset
	noRecords bool
	// refuseOnce: partitions whose next commit is refused with this code,
	// once.
	refuseOnce map[int32]skeinv1.ErrorCode
	// dlqTopic is every group's dlq.topic; configReads counts the
	// GetGroupConfig calls.
	dlqTopic    string
	configReads int
	// again sends the same records once more after the first commit is
	// answered, as a topic deleted and made again hands out its offsets
	// anew.
	again bool
	// offsetDeletes are the DeleteOffsets requests, in order.
	offsetDeletes []*skeinv1.DeleteOffsetsRequest
}

// DeleteOffsets answers as the gateway for topic "t" of three partitions:
// every partition without one named, GROUP_SUBSCRIBED_TO_TOPIC while the
// group has members, UNKNOWN_TOPIC_OR_PARTITION past the count.
func (f *fakeGroups) DeleteOffsets(_ context.Context, req *skeinv1.DeleteOffsetsRequest) (*skeinv1.DeleteOffsetsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offsetDeletes = append(f.offsetDeletes, req)
	switch {
	case req.GetTopic() != "t":
		return nil, rpcerr.ToGRPC(errs.Errorf(errs.UnknownTopicOrPartition, "topic %q does not exist", req.GetTopic()))
	case req.GetGroup() != "g" || !f.exists:
		return nil, rpcerr.ToGRPC(errs.Errorf(errs.GroupIDNotFound, "group %q does not exist", req.GetGroup()))
	}
	parts := req.GetPartition()
	if len(parts) == 0 {
		parts = []int32{0, 1, 2}
	}
	out := &skeinv1.DeleteOffsetsResponse{}
	for _, p := range parts {
		r := &skeinv1.DeleteOffsetsResult{Topic: "t", Partition: p}
		switch {
		case p > 2:
			r.ErrorCode, r.Message = skeinv1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, fmt.Sprintf("topic \"t\" has 3 partitions, no partition %d", p)
		case f.members > 0:
			r.ErrorCode, r.Message = skeinv1.ErrorCode_GROUP_SUBSCRIBED_TO_TOPIC, "group \"g\" has members subscribed to topic \"t\""
		}
		out.Results = append(out.Results, r)
	}
	return out, nil
}

// group delete-offsets prints each partition's outcome, as
// kafka-consumer-groups --delete-offsets, and fails when a partition kept
// its offset.
func TestGroupDeleteOffsets(t *testing.T) {
	f, addr := startFakeGroups(t)
	f.members = 1
	code, out, errOut := run(t, "", "group", "delete-offsets", "g", "--topic", "t", "--gateway", addr)
	if code != 1 || strings.Count(out, "GROUP_SUBSCRIBED_TO_TOPIC") != 3 || !strings.Contains(errOut, "group g's offsets of 3 of 3 partition(s) of t were not deleted: members of the group read t") {
		t.Errorf("delete-offsets of a subscribed topic: %d %q %q", code, out, errOut)
	}
	if r := f.offsetDeletes[0]; r.GetGroup() != "g" || r.GetTopic() != "t" || len(r.GetPartition()) != 0 {
		t.Errorf("sent %v, want every partition of t", r)
	}
	f.members = 0
	code, out, errOut = run(t, "", "group", "delete-offsets", "g", "--topic", "t", "--gateway", addr)
	if code != 0 || strings.Count(out, "deleted") != 3 || !strings.Contains(out, "TOPIC") || errOut != "" {
		t.Errorf("delete-offsets of an empty group: %d %q %q", code, out, errOut)
	}
	// Named partitions are sent in order; one the topic lacks is named
	// with its error, and the exit status says so.
	code, out, errOut = run(t, "", "group", "delete-offsets", "g", "--topic", "t", "--partition", "7", "--partition", "1", "--gateway", addr)
	if code != 1 || !strings.Contains(out, "UNKNOWN_TOPIC_OR_PARTITION: topic \"t\" has 3 partitions, no partition 7") ||
		!strings.Contains(errOut, "1 of 2 partition(s)") {
		t.Errorf("delete-offsets of partitions 1 and 7: %d %q %q", code, out, errOut)
	}
	if got := f.offsetDeletes[len(f.offsetDeletes)-1].GetPartition(); !slices.Equal(got, []int32{1, 7}) {
		t.Errorf("sent partitions %v, want [1 7]", got)
	}
	code, out, _ = run(t, "", "group", "delete-offsets", "g", "--topic", "t", "--partition", "0", "--json", "--gateway", addr)
	if code != 0 || !json.Valid([]byte(out)) || !strings.Contains(out, `"error_code": "NONE"`) {
		t.Errorf("delete-offsets --json: %d %q, want the API's JSON", code, out)
	}
	// Refused as a whole: the gateway's error, exit 1.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nope", "--topic", "t"}, "GROUP_ID_NOT_FOUND"},
		{[]string{"g", "--topic", "nosuch"}, "UNKNOWN_TOPIC_OR_PARTITION"},
	} {
		if code, out, errOut := run(t, "", append([]string{"group", "delete-offsets", "--gateway", addr}, tc.args...)...); code != 1 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("delete-offsets %q: %d %q %q, want %s", tc.args, code, out, errOut, tc.want)
		}
	}
	// Usage errors, exit 2, nothing sent.
	sent := len(f.offsetDeletes)
	for _, args := range [][]string{
		{"g"},                      // no --topic
		{"g", "--topic", ""},       // an empty one
		{"--topic", "t"},           // no group
		{"g", "h", "--topic", "t"}, // two groups
		{"g", "--topic", "t", "--partition", "-1"},
		{"g", "--topic", "t", "--partition", "x"},
		{"g", "--topic", "t", "--partition", "1", "--partition", "1"},
		{"g", "--topic", "t", "--topic", "u"},
	} {
		if code, _, errOut := run(t, "", append([]string{"group", "delete-offsets", "--gateway", addr}, args...)...); code != 2 {
			t.Errorf("delete-offsets %q: exit %d %q, want 2", args, code, errOut)
		}
	}
	if len(f.offsetDeletes) != sent {
		t.Errorf("a usage error sent %v", f.offsetDeletes[sent:])
	}
}

func (f *fakeGroups) ListGroups(context.Context, *skeinv1.ListGroupsRequest) (*skeinv1.ListGroupsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &skeinv1.ListGroupsResponse{Groups: []*skeinv1.GroupSummary{{Group: "g", State: "STABLE", Members: int32(f.members)}}}, nil
}

func (f *fakeGroups) DescribeGroup(_ context.Context, req *skeinv1.DescribeGroupRequest) (*skeinv1.DescribeGroupResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if req.GetGroup() != "g" || !f.exists {
		return nil, rpcerr.ToGRPC(errs.Errorf(errs.GroupIDNotFound, "group %q does not exist", req.GetGroup()))
	}
	d := &skeinv1.DescribeGroupResponse{Group: "g", State: "STABLE", GroupEpoch: 4, Assignor: "uniform", TotalLag: 7,
		Offsets: []*skeinv1.CommittedOffset{{Topic: "t", Partition: 0, Offset: 3, HighWatermark: 10, Lag: 7}}}
	for range f.members {
		d.Members = append(d.Members, &skeinv1.GroupMember{MemberId: "m1", MemberEpoch: 4, Topics: []string{"t"},
			Assignment: []*skeinv1.TopicPartitions{{Topic: "t", Partitions: []int32{0}}}})
	}
	if f.members == 0 {
		d.State = "EMPTY"
	}
	return d, nil
}

// GetOffsets answers the offset DescribeGroup shows: t:0 at 3.
func (f *fakeGroups) GetOffsets(_ context.Context, req *skeinv1.GetOffsetsRequest) (*skeinv1.GetOffsetsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if req.GetGroup() != "g" || !f.exists {
		return nil, rpcerr.ToGRPC(errs.Errorf(errs.GroupIDNotFound, "group %q does not exist", req.GetGroup()))
	}
	return &skeinv1.GetOffsetsResponse{Offsets: []*skeinv1.CommittedOffset{{Topic: "t", Partition: 0, Offset: 3, HighWatermark: 10, Lag: 7}}}, nil
}

func (f *fakeGroups) CommitOffsets(_ context.Context, req *skeinv1.CommitOffsetsRequest) (*skeinv1.CommitOffsetsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commits = append(f.commits, req)
	out := &skeinv1.CommitOffsetsResponse{}
	for _, o := range req.GetOffsets() {
		r := &skeinv1.PartitionCommitResult{Topic: o.GetTopic(), Partition: o.GetPartition()}
		if c, ok := f.refuse[o.GetPartition()]; ok {
			r.ErrorCode, r.Message = c, "refused by the test"
		}
		if c, ok := f.refuseOnce[o.GetPartition()]; ok {
			r.ErrorCode, r.Message = c, "refused once by the test"
			delete(f.refuseOnce, o.GetPartition())
		}
		out.Results = append(out.Results, r)
	}
	if f.firstTwice && len(out.Results) > 0 {
		out.Results = []*skeinv1.PartitionCommitResult{out.Results[0], out.Results[0]}
	}
	return out, nil
}

func (f *fakeGroups) DeleteGroup(context.Context, *skeinv1.DeleteGroupRequest) (*skeinv1.DeleteGroupResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = true
	return &skeinv1.DeleteGroupResponse{}, nil
}

// Consume answers the join, then five records of partition 0, then commits.
func (f *fakeGroups) Consume(stream skeinv1.GroupService_ConsumeServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.subscribe = first.GetSubscribe()
	f.mu.Unlock()
	assignment := []*skeinv1.TopicPartitions{{Topic: "t", Partitions: []int32{0}}}
	if err := stream.Send(&skeinv1.ConsumeResponse{Kind: &skeinv1.ConsumeResponse_Joined{Joined: &skeinv1.JoinGroupResponse{MemberId: "m", MemberEpoch: 1, Assignment: assignment}}}); err != nil {
		return err
	}
	f.mu.Lock()
	recs := &skeinv1.FetchGroupRecordsResponse{MemberEpoch: 1, Assignment: assignment, Positions: f.positions}
	n := 5
	if f.noRecords {
		n = 0
	}
	f.mu.Unlock()
	for i := range n {
		v := string(rune('a' + i))
		recs.Records = append(recs.Records, &skeinv1.ConsumedRecord{Topic: "t", Partition: 0, Offset: int64(i), Value: &v})
	}
	if err := stream.Send(&skeinv1.ConsumeResponse{Kind: &skeinv1.ConsumeResponse_Records{Records: recs}}); err != nil {
		return err
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		resp, _ := f.CommitOffsets(stream.Context(), m.GetCommit())
		if err := stream.Send(&skeinv1.ConsumeResponse{Kind: &skeinv1.ConsumeResponse_Committed{Committed: resp}}); err != nil {
			return err
		}
		f.mu.Lock()
		again := f.again
		f.again = false
		f.mu.Unlock()
		if again {
			if err := stream.Send(&skeinv1.ConsumeResponse{Kind: &skeinv1.ConsumeResponse_Records{Records: recs}}); err != nil {
				return err
			}
		}
	}
}

func (f *fakeGroups) GetGroupConfig(_ context.Context, req *skeinv1.GetGroupConfigRequest) (*skeinv1.GetGroupConfigResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.configReads++
	return &skeinv1.GetGroupConfigResponse{Group: req.GetGroup(), Configs: map[string]string{"dlq.topic": f.dlqTopic, "max.delivery.attempts": "5"}}, nil
}

// Before a group dead-letters anything its dead-letter topic does not
// exist: group dlq lists nothing, it does not fail.
func TestGroupDLQBeforeTheFirstDeadLetter(t *testing.T) {
	_, addr := startFakeGroups(t)
	code, out, errOut := run(t, "", "group", "dlq", "g", "--topic", "t", "--gateway", addr)
	if code != 0 || !strings.Contains(errOut, "0 record(s) of group g from t in t.dlq") || strings.Count(out, "\n") != 1 {
		t.Fatalf("group dlq with no dead-letter topic yet: %d %q %q", code, out, errOut)
	}
	if code, out, _ := run(t, "", "group", "dlq", "g", "--topic", "t", "--gateway", addr, "--json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("group dlq --json with none: %d %q", code, out)
	}
	for _, sub := range []string{"dlq", "dlq-replay"} {
		code, out, errOut := run(t, "", "group", sub, "g", "--topic", "nosuch", "--gateway", addr)
		if code != 1 || out != "" || !strings.Contains(errOut, "UNKNOWN_TOPIC_OR_PARTITION") || !strings.Contains(errOut, `"nosuch"`) {
			t.Fatalf("group %s of a topic that does not exist: %d %q %q", sub, code, out, errOut)
		}
	}
}

func startFakeGroups(t *testing.T) (*fakeGroups, string) {
	_, f, addr := startFakeGatewayWithGroups(t)
	return f, addr
}

// startFakeGatewayWithGroups serves a fakeGateway with topic "t" (two
// partitions) and a fakeGroups on one address.
func startFakeGatewayWithGroups(t *testing.T) (*fakeGateway, *fakeGroups, string) {
	g := &fakeGateway{topics: map[string][][]*skeinv1.ConsumedRecord{"t": make([][]*skeinv1.ConsumedRecord, 2)}, grew: make(chan struct{})}
	f := &fakeGroups{exists: true}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	skeinv1.RegisterAdminServiceServer(s, g)
	skeinv1.RegisterProducerServiceServer(s, g)
	skeinv1.RegisterConsumerServiceServer(s, g)
	skeinv1.RegisterGroupServiceServer(s, f)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return g, f, lis.Addr().String()
}

func TestGroupCommands(t *testing.T) {
	f, addr := startFakeGroups(t)
	f.members = 2
	code, out, errOut := run(t, "", "group", "list", "--gateway", addr)
	if code != 0 || !strings.Contains(out, "g") || !strings.Contains(out, "STABLE") {
		t.Errorf("list: %d %q %q", code, out, errOut)
	}
	if code, out, _ := run(t, "", "group", "list", "--state", "Empty,stable", "--gateway", addr); code != 0 || !strings.Contains(out, "STABLE") {
		t.Errorf("list --state Empty,stable: %d %q", code, out)
	}
	if code, out, _ := run(t, "", "group", "list", "--state", "empty", "--gateway", addr); code != 0 || strings.Contains(out, "STABLE") {
		t.Errorf("list --state empty of a stable group: %d %q, want no row", code, out)
	}
	if code, _, errOut := run(t, "", "group", "list", "--state", "rebalancing", "--gateway", addr); code != 2 || !strings.Contains(errOut, "--state") {
		t.Errorf("list --state rebalancing: %d %q, want a usage error", code, errOut)
	}
	code, out, _ = run(t, "", "group", "describe", "g", "--gateway", addr)
	if code != 0 || !strings.Contains(out, "total lag 7") || !strings.Contains(out, "t:[0]") {
		t.Errorf("describe: %d %q", code, out)
	}
	if code, _, errOut := run(t, "", "group", "describe", "nope", "--gateway", addr); code != 1 || !strings.Contains(errOut, "GROUP_ID_NOT_FOUND") {
		t.Errorf("describe of an unknown group: %d %q", code, errOut)
	}

	// A group with members is neither reset nor deleted, with a clear error.
	code, _, errOut = run(t, "", "group", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--gateway", addr)
	if code != 1 || !strings.Contains(errOut, "has 2 member(s)") || len(f.commits) != 0 {
		t.Errorf("reset of a busy group: %d %q, commits %v", code, errOut, f.commits)
	}
	code, _, errOut = run(t, "", "group", "delete", "g", "--gateway", addr)
	if code != 1 || !strings.Contains(errOut, "has 2 member(s)") || f.deleted {
		t.Errorf("delete of a busy group: %d %q", code, errOut)
	}
	if code, _, _ := run(t, "", "group", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--to-latest", "--gateway", addr); code != 2 {
		t.Errorf("two targets: exit %d, want 2", code)
	}
	for _, target := range []string{"--to-offset", "--to-timestamp"} {
		if code, _, errOut := run(t, "", "group", "reset-offsets", "g", "--topic", "t", target, "-5", "--gateway", addr); code != 2 || !strings.Contains(errOut, target+" -5: want 0 or more") {
			t.Errorf("%s -5: exit %d %q, want 2 naming the value", target, code, errOut)
		}
	}

	for _, args := range [][]string{
		{"--topic", "t", "--all-topics", "--to-earliest"},
		{"--to-earliest"},
		{"--topic", "t", "--shift-by", "1", "--to-earliest"},
		{"--topic", "t", "--to-datetime", "yesterday"},
		{"--topic", "t", "--by-duration", "soon"},
		{"--topic", "t:x", "--to-earliest"},
	} {
		if code, _, errOut := run(t, "", append([]string{"group", "reset-offsets", "g", "--gateway", addr}, args...)...); code != 2 {
			t.Errorf("reset-offsets %q: exit %d %q, want 2", args, code, errOut)
		}
	}

	f.members = 0
	// Kafka's scopes and targets: every topic the group committed, some
	// partitions of a topic, a shift of the committed offset (kept within
	// the log, whose every offset is 0 here).
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--all-topics", "--to-latest"}, "t      0          0\nt      1          0\n"},
		{[]string{"--topic", "t:1", "--to-earliest"}, "t      1          0\n"},
		{[]string{"--topic", "t:0", "--shift-by", "-2"}, "t      0          0\n"},
		{[]string{"--topic", "t", "--by-duration", "PT1H"}, "t      0          0\nt      1          0\n"},
	} {
		code, out, errOut := run(t, "", append([]string{"group", "reset-offsets", "g", "--gateway", addr}, tc.args...)...)
		if _, rows, _ := strings.Cut(out, "NEW OFFSET\n"); code != 0 || rows != tc.want {
			t.Errorf("reset-offsets %q: %d %q %q, want rows %q", tc.args, code, out, errOut, tc.want)
		}
	}
	if code, _, errOut := run(t, "", "group", "reset-offsets", "g", "--topic", "t", "--shift-by", "1", "--gateway", addr); code != 1 || !strings.Contains(errOut, "partition(s) 1: the group has none committed") {
		t.Errorf("a shift of a partition with nothing committed: %d %q", code, errOut)
	}
	if len(f.commits) != 0 {
		t.Fatalf("dry runs committed %v", f.commits)
	}
	// As Kafka's tool, a reset without --execute changes nothing.
	code, out, errOut = run(t, "", "group", "reset-offsets", "g", "--topic", "t", "--to-offset", "0", "--gateway", addr)
	if code != 0 || len(f.commits) != 0 || !strings.Contains(out, "NEW OFFSET") || !strings.Contains(errOut, "add --execute") {
		t.Fatalf("reset without --execute: %d %q %q, commits %v", code, out, errOut, f.commits)
	}
	code, out, errOut = run(t, "", "group", "reset-offsets", "g", "--topic", "t", "--to-offset", "0", "--dry-run", "--gateway", addr)
	if code != 0 || len(f.commits) != 0 || !strings.Contains(out, "NEW OFFSET") || errOut != "" {
		t.Fatalf("reset --dry-run: %d %q %q, commits %v", code, out, errOut, f.commits)
	}
	code, out, _ = run(t, "", "group", "reset-offsets", "g", "--topic", "t", "--to-offset", "0", "--json", "--gateway", addr)
	var plan struct {
		Group   string `json:"group"`
		Offsets []struct {
			Partition int32  `json:"partition"`
			Offset    string `json:"offset"`
		} `json:"offsets"`
	}
	if err := json.Unmarshal([]byte(out), &plan); code != 0 || err != nil || plan.Group != "g" || len(plan.Offsets) != 2 || len(f.commits) != 0 {
		t.Fatalf("reset --json without --execute: %d %q (%v), commits %v; want the commit it would send", code, out, err, f.commits)
	}
	if code, _, _ := run(t, "", "group", "reset-offsets", "g", "--topic", "t", "--to-offset", "0", "--dry-run", "--execute", "--gateway", addr); code != 2 || len(f.commits) != 0 {
		t.Errorf("--dry-run with --execute: exit %d, want 2", code)
	}
	code, out, errOut = run(t, "", "group", "reset-offsets", "g", "--topic", "t", "--to-offset", "0", "--execute", "--gateway", addr)
	if code != 0 || len(f.commits) != 1 || !strings.Contains(out, "NEW OFFSET") || strings.Count(out, "committed") != 2 {
		t.Fatalf("reset --execute of an empty group: %d %q %q", code, out, errOut)
	}
	c := f.commits[0]
	if c.GetMemberId() != "" || c.GetMemberEpoch() != -1 || len(c.GetOffsets()) != 2 {
		t.Errorf("reset committed %v", c)
	}
	// A partition the coordinator refuses is named, and the exit status says so.
	f.refuse = map[int32]skeinv1.ErrorCode{1: skeinv1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION}
	code, out, errOut = run(t, "", "group", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--execute", "--gateway", addr)
	if code != 1 || !strings.Contains(out, "UNKNOWN_TOPIC_OR_PARTITION: refused by the test") || !strings.Contains(errOut, "1 of 2 partitions of t were not reset") {
		t.Errorf("reset --execute with a refused partition: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := run(t, "", "group", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--execute", "--json", "--gateway", addr); code != 1 || !strings.Contains(errOut, "were not reset") {
		t.Errorf("reset --execute --json with a refused partition: %d %q", code, errOut)
	}
	f.refuse = nil
	// A result twice and one missing: the partition without one was not reset.
	f.firstTwice = true
	if code, _, errOut := run(t, "", "group", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--execute", "--gateway", addr); code != 1 || !strings.Contains(errOut, "1 of 2 partitions of t were not reset") {
		t.Errorf("reset --execute answered one partition twice: %d %q", code, errOut)
	}
	f.firstTwice = false
	if code, out, _ := run(t, "", "group", "delete", "g", "--gateway", addr); code != 0 || !f.deleted || !strings.Contains(out, "deleted group g") {
		t.Errorf("delete of an empty group: %d %q", code, out)
	}
	if code, out, _ := run(t, "", "group", "delete", "g", "--gateway", addr, "--json"); code != 0 || !json.Valid([]byte(out)) {
		t.Errorf("delete --json: %d %q, want the API's JSON", code, out)
	}
}

// consume --group prints what the group assigns, commits what it printed
// and ends the stream (leaving the group) at --max.
func TestConsumeAsGroupMember(t *testing.T) {
	f, addr := startFakeGroups(t)
	code, out, errOut := run(t, "", "consume", "t", "--group", "g", "--max", "3", "--from", "latest", "--gateway", addr)
	if code != 0 || out != "a\nb\nc\n" {
		t.Fatalf("consume --group: %d %q %q", code, out, errOut)
	}
	if s := f.subscribe; s.GetGroup() != "g" || s.GetAutoOffsetReset() != "latest" || s.GetTopics()[0] != "t" {
		t.Errorf("subscribed with %v", s)
	}
	if n := len(f.commits); n != 1 || f.commits[0].GetOffsets()[0].GetOffset() != 3 {
		t.Errorf("commits %v, want one of offset 3", f.commits)
	}
	if code, _, _ := run(t, "", "consume", "t", "--group", "g", "--partition", "1", "--gateway", addr); code != 2 {
		t.Errorf("--group with --partition: exit %d, want 2", code)
	}
	if code, _, errOut := run(t, "", "consume", "t", "--group", "g", "--max", "3", "--from", "none", "--gateway", addr); code != 0 || f.subscribe.GetAutoOffsetReset() != "none" {
		t.Errorf("--from none: %d %q, subscribed with %v; want auto_offset_reset none", code, errOut, f.subscribe)
	}
}

// An explicit --group with an empty value ("--group $GROUP" with $GROUP
// unset) is a usage error, not a plain consumer that joins no group and
// commits nothing. Only "" is: " " is a group id the gateway takes. An
// empty SKEIN_GROUP counts as unset, as every empty environment twin does.
func TestConsumeWithAnEmptyGroup(t *testing.T) {
	f, addr := startFakeGroups(t)
	for _, args := range [][]string{
		{"--group", "", "--max", "2"},
		{"--group=", "--max", "2"},
		{"--group", "", "--idle", "2s"},
	} {
		code, out, errOut := run(t, "", append([]string{"consume", "t", "--gateway", addr}, args...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, "--group is empty") {
			t.Errorf("consume t %q: %d %q %q, want a usage error saying --group is empty", args, code, out, errOut)
		}
	}
	f.mu.Lock()
	joined, commits := f.subscribe, len(f.commits)
	f.mu.Unlock()
	if joined != nil || commits != 0 {
		t.Fatalf("an empty --group joined %v and sent %d commit(s)", joined, commits)
	}

	t.Setenv("SKEIN_GROUP", "")
	if code, out, errOut := run(t, "", "consume", "t", "--max", "2", "--gateway", addr); code != 0 || out != "" {
		t.Errorf("consume with SKEIN_GROUP empty: %d %q %q, want a plain consumer", code, out, errOut)
	}
	f.mu.Lock()
	joined = f.subscribe
	f.mu.Unlock()
	if joined != nil {
		t.Fatalf("an empty SKEIN_GROUP joined %v", joined)
	}

	if code, out, errOut := run(t, "", "consume", "t", "--group", " ", "--max", "1", "--gateway", addr); code != 0 || out != "a\n" {
		t.Fatalf("consume --group ' ': %d %q %q", code, out, errOut)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.subscribe.GetGroup() != " " {
		t.Errorf("consume --group ' ' joined %q", f.subscribe.GetGroup())
	}
}

// A member commits where it stands, also in partitions that gave it no
// record (started at their reset offset), as a Kafka console consumer
// does: a group run from latest would otherwise skip what is written
// between two runs. A partition without a position (-1) is not committed.
func TestConsumeAsGroupMemberCommitsItsPositions(t *testing.T) {
	f, addr := startFakeGroups(t)
	f.positions = []*skeinv1.TopicPartitionOffset{{Topic: "t", Partition: 0, Offset: 42}, {Topic: "t", Partition: 1, Offset: -1}}
	f.noRecords = true
	if code, out, errOut := run(t, "", "consume", "t", "--group", "g", "--from", "latest", "--idle", "300ms", "--gateway", addr); code != 0 || out != "" {
		t.Fatalf("consume --group with nothing to read: %d %q %q", code, out, errOut)
	}
	f.mu.Lock()
	if len(f.commits) != 1 || len(f.commits[0].GetOffsets()) != 1 || f.commits[0].GetOffsets()[0].GetPartition() != 0 || f.commits[0].GetOffsets()[0].GetOffset() != 42 {
		t.Errorf("commits %v, want one of t:0 at 42", f.commits)
	}
	// With records, the positions that follow them are committed, the
	// partitions that gave none included.
	f.commits, f.noRecords = nil, false
	f.positions = []*skeinv1.TopicPartitionOffset{{Topic: "t", Partition: 0, Offset: 5}, {Topic: "t", Partition: 1, Offset: 7}}
	f.mu.Unlock()
	if code, out, errOut := run(t, "", "consume", "t", "--group", "g", "--idle", "300ms", "--gateway", addr); code != 0 || out != "a\nb\nc\nd\ne\n" {
		t.Fatalf("consume --group: %d %q %q", code, out, errOut)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	got := map[int32]int64{}
	for _, c := range f.commits {
		for _, o := range c.GetOffsets() {
			got[o.GetPartition()] = o.GetOffset()
		}
	}
	if len(got) != 2 || got[0] != 5 || got[1] != 7 {
		t.Errorf("committed %v, want t:0 at 5 and t:1 at 7", got)
	}
}

// A position told once, with nothing after it, is committed again when its
// commit is refused (a coordinator moving, say): the run ends with it
// committed. Position 0 (an empty partition) is committed too.
func TestConsumeAsGroupMemberRetriesARefusedCommit(t *testing.T) {
	f, addr := startFakeGroups(t)
	f.positions = []*skeinv1.TopicPartitionOffset{{Topic: "t", Partition: 0, Offset: 42}, {Topic: "t", Partition: 1, Offset: 0}}
	f.noRecords = true
	f.refuseOnce = map[int32]skeinv1.ErrorCode{0: skeinv1.ErrorCode_NOT_COORDINATOR}
	if code, _, errOut := run(t, "", "consume", "t", "--group", "g", "--from", "latest", "--idle", "300ms", "--gateway", addr); code != 0 {
		t.Fatalf("consume --group: %d %q", code, errOut)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var sent []string
	for _, c := range f.commits {
		for _, o := range c.GetOffsets() {
			sent = append(sent, fmt.Sprintf("%d@%d", o.GetPartition(), o.GetOffset()))
		}
	}
	slices.Sort(sent)
	if !slices.Equal(sent, []string{"0@42", "0@42", "1@0"}) {
		t.Errorf("commits sent %q, want 0@42 twice (refused once) and 1@0", sent)
	}
}

// syncBuffer is a bytes.Buffer a command writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// interrupted runs consume with args until out holds want, then
// interrupts it (Ctrl-C) and answers its error.
func interrupted(t *testing.T, want string, args ...string) (error, string) {
	t.Helper()
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() { done <- consumeCmd(ctx, args, IO{In: strings.NewReader(""), Out: &out, Err: &errOut}) }()
	for deadline := time.Now().Add(5 * time.Second); out.String() != want; {
		if time.Now().After(deadline) {
			t.Fatalf("consume %v printed %q, want %q", args, out.String(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	interrupt()
	select {
	case err := <-done:
		return err, errOut.String()
	case <-time.After(10 * time.Second):
		t.Fatalf("consume %v still runs after an interrupt", args)
	}
	return nil, ""
}

// An interrupted consume, as an interrupted produce, ends with the
// interrupt (exit status 130), after what it printed; a group member first
// commits what it printed and leaves.
func TestConsumeInterrupted(t *testing.T) {
	f, addr := startFakeGroups(t)
	err, errOut := interrupted(t, "a\nb\nc\nd\ne\n", "t", "--group", "g", "--from", "earliest", "--gateway", addr)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("consume --group interrupted: %v (%q), want context.Canceled (exit status 130)", err, errOut)
	}
	f.mu.Lock()
	commits := f.commits
	f.mu.Unlock()
	if n := len(commits); n == 0 || commits[n-1].GetOffsets()[0].GetOffset() != 5 {
		t.Errorf("commits %v, want the last at offset 5", commits)
	}

	_, addr2 := startFake(t)
	t.Setenv("SKEIN_GATEWAY", addr2)
	run(t, "", "topic", "create", "orders")
	run(t, "x\ny\n", "produce", "orders")
	if err, errOut := interrupted(t, "x\ny\n", "orders", "--follow"); !errors.Is(err, context.Canceled) {
		t.Fatalf("consume --follow interrupted: %v (%q), want context.Canceled (exit status 130)", err, errOut)
	}
}

// Records below what the member committed (its topic deleted and made
// again, its position reset) are committed again once printed, though the
// offset to commit is the one committed before: that commit may be gone.
func TestConsumeAsGroupMemberCommitsAgainAfterGoingBack(t *testing.T) {
	f, addr := startFakeGroups(t)
	f.again = true
	if code, out, errOut := run(t, "", "consume", "t", "--group", "g", "--idle", "500ms", "--gateway", addr); code != 0 || out != "a\nb\nc\nd\ne\na\nb\nc\nd\ne\n" {
		t.Fatalf("consume --group: %d %q %q", code, out, errOut)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var at5 int
	for _, c := range f.commits {
		for _, o := range c.GetOffsets() {
			if o.GetPartition() == 0 && o.GetOffset() == 5 {
				at5++
			}
		}
	}
	if at5 != 2 {
		t.Errorf("t:0 committed at 5 %d times in %v, want twice: once for each time its records were printed", at5, f.commits)
	}
}
