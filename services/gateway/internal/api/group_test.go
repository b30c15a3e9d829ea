package api

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	groupv1 "skein/gen/skein/group/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
	"skein/libs/client/clienttest"
	"skein/libs/errs"
)

func partitionsOf(tps []*skeinv1.TopicPartitions) []int32 {
	var out []int32
	for _, t := range tps {
		out = append(out, t.GetPartitions()...)
	}
	slices.Sort(out)
	return out
}

// A REST member told to give a partition up gives it up on its next call,
// even when the target hands the partition back to it before that call: it
// gets the partition back and the group settles, instead of the coordinator
// waiting for a revocation the gateway never confirms.
func TestGroupRevocationWhoseTargetComesBack(t *testing.T) {
	s, _, _, ctx := groupFixture(t, map[string]int32{"t": 2})

	a, err := s.JoinGroup(ctx, &skeinv1.JoinGroupRequest{Group: "g", Topics: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := partitionsOf(a.GetAssignment()); !slices.Equal(got, []int32{0, 1}) {
		t.Fatalf("the first member holds %v, want [0 1]", got)
	}
	b, err := s.JoinGroup(ctx, &skeinv1.JoinGroupRequest{Group: "g", Topics: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	epoch := a.GetMemberEpoch()
	heartbeat := func() []int32 {
		t.Helper()
		resp, err := s.Heartbeat(ctx, &skeinv1.HeartbeatRequest{Group: "g", MemberId: a.GetMemberId(), MemberEpoch: epoch})
		if err != nil {
			t.Fatal(err)
		}
		epoch = resp.GetMemberEpoch()
		return partitionsOf(resp.GetAssignment())
	}
	// The second member's arrival takes t:1 from the first, which is told so.
	if got := heartbeat(); !slices.Equal(got, []int32{0}) {
		t.Fatalf("after the second member joined, the first holds %v, want [0]", got)
	}
	// The second member leaves before the first calls again: t:1 is in the
	// first member's target again while its revocation is pending.
	if _, err := s.LeaveGroup(ctx, &skeinv1.LeaveGroupRequest{Group: "g", MemberId: b.GetMemberId()}); err != nil {
		t.Fatal(err)
	}
	var got []int32
	for range 3 {
		if got = heartbeat(); slices.Equal(got, []int32{0, 1}) {
			break
		}
	}
	if !slices.Equal(got, []int32{0, 1}) {
		t.Fatalf("the first member holds %v after the second left, want [0 1]", got)
	}
	d, err := s.groups.Describe(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if d.GetState() != "Stable" {
		t.Fatalf("the group is %s, want Stable", d.GetState())
	}
}

// A read_committed REST member does not start a partition whose committed
// offset is pending in a transaction: it reads nothing of it, its position
// is unknown (-1), and once the transaction commits the next call starts at
// the transaction's offset, neither before it (records the transaction's
// outputs already cover) nor at the reset policy's offset.
func TestGroupReadCommittedWaitsForPendingOffsets(t *testing.T) {
	s, gc, c, ctx := groupFixture(t, map[string]int32{"t": 1})
	p := c.NewProducer()
	defer p.Close(ctx)
	for i := range 10 {
		if r := p.ProduceSync(ctx, client.Record{Topic: "t", Partition: ptrTo(int32(0)), Value: []byte{byte('0' + i)}})[0]; r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if _, err := s.groups.TxnCommitOffsets(ctx, &groupv1.TxnOffsetCommitRequest{GroupId: "g", ProducerId: 5,
		Offsets: []*groupv1.PartitionOffset{{Topic: "t", Partition: 0, Offset: 8}}}); err != nil {
		t.Fatal(err)
	}
	m, err := s.JoinGroup(ctx, &skeinv1.JoinGroupRequest{Group: "g", Topics: []string{"t"}, AutoOffsetReset: "earliest"})
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(positions []*skeinv1.TopicPartitionOffset) *skeinv1.FetchGroupRecordsResponse {
		t.Helper()
		resp, err := s.FetchGroupRecords(ctx, &skeinv1.FetchGroupRecordsRequest{Group: "g", MemberId: m.GetMemberId(), MemberEpoch: m.GetMemberEpoch(),
			IsolationLevel: skeinv1.IsolationLevel_READ_COMMITTED, Positions: positions})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	first := fetch(nil)
	if len(first.GetRecords()) != 0 || len(first.GetPositions()) != 1 || first.GetPositions()[0].GetOffset() != -1 {
		t.Fatalf("with the offset pending: %d records, positions %v; want none and -1", len(first.GetRecords()), first.GetPositions())
	}
	gc.CompleteTxn("g", 5, true)
	second := fetch(first.GetPositions())
	var got []string
	for _, r := range second.GetRecords() {
		got = append(got, r.GetValue())
	}
	if !slices.Equal(got, []string{"8", "9"}) || second.GetPositions()[0].GetOffset() != 10 {
		t.Fatalf("after the commit: records %q, positions %v; want [8 9] and 10", got, second.GetPositions())
	}
}

func ptrTo[T any](v T) *T { return &v }

// A member's commit naming a partition it does not hold is refused whole:
// the partition it does hold keeps its committed offset.
func TestGroupCommitIsWholeOrNothing(t *testing.T) {
	s, _, _, ctx := groupFixture(t, map[string]int32{"t": 1, "u": 1})
	m, err := s.JoinGroup(ctx, &skeinv1.JoinGroupRequest{Group: "g", Topics: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.CommitOffsets(ctx, &skeinv1.CommitOffsetsRequest{Group: "g", MemberId: m.GetMemberId(), MemberEpoch: m.GetMemberEpoch(),
		Offsets: []*skeinv1.TopicPartitionOffset{{Topic: "t", Partition: 0, Offset: 5}, {Topic: "u", Partition: 0, Offset: 3}}})
	if errs.Of(err) != errs.StaleMemberEpoch {
		t.Fatalf("commit of a partition nobody holds: %v, want STALE_MEMBER_EPOCH", err)
	}
	got, err := s.groups.FetchOffsets(ctx, "g", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range got {
		if o.GetOffset() >= 0 {
			t.Errorf("%s:%d committed at %d by a refused commit", o.GetTopic(), o.GetPartition(), o.GetOffset())
		}
	}
}

// A join sent again with the id the caller chose (the answer to the first
// was lost) is the same member, not a second one holding partitions; an
// id outside the allowed characters is refused.
func TestGroupJoinRetriedWithTheCallersID(t *testing.T) {
	s, _, _, ctx := groupFixture(t, map[string]int32{"t": 2})
	join := &skeinv1.JoinGroupRequest{Group: "g", Topics: []string{"t"}, MemberId: "worker-7.a_b"}
	first, err := s.JoinGroup(ctx, join)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.JoinGroup(ctx, join)
	if err != nil {
		t.Fatal(err)
	}
	if again.GetMemberId() != first.GetMemberId() || !strings.HasPrefix(first.GetMemberId(), "worker-7.a_b") {
		t.Fatalf("member ids %q and %q, want one made from worker-7.a_b", first.GetMemberId(), again.GetMemberId())
	}
	d, err := s.groups.Describe(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(d.GetMembers()); n != 1 {
		t.Fatalf("%d members after a retried join, want 1", n)
	}
	if got := partitionsOf(again.GetAssignment()); !slices.Equal(got, []int32{0, 1}) {
		t.Fatalf("the retried join holds %v, want [0 1]", got)
	}
	for _, bad := range []string{"has space", "slash/", strings.Repeat("x", 65)} {
		if _, err := s.JoinGroup(ctx, &skeinv1.JoinGroupRequest{Group: "g", Topics: []string{"t"}, MemberId: bad}); errs.Of(err) != errs.InvalidRequest {
			t.Errorf("member_id %q: %v, want INVALID_REQUEST", bad, err)
		}
	}
}

// An instance id is Kafka's group.instance.id: 1-249 characters of
// [a-zA-Z0-9._-]. Any other is refused INVALID_REQUEST at the join, saying
// which field and why (a long one is not quoted back), before it reaches
// the coordinator, whose log would refuse one too large for it.
func TestGroupJoinValidatesTheInstanceID(t *testing.T) {
	s, _, _, ctx := groupFixture(t, map[string]int32{"t": 2})
	longest := strings.Repeat("i", 249)
	first, err := s.JoinGroup(ctx, &skeinv1.JoinGroupRequest{Group: "g", Topics: []string{"t"}, InstanceId: longest})
	if err != nil {
		t.Fatalf("an instance id of 249 characters: %v", err)
	}
	d, err := s.groups.Describe(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.GetMembers()) != 1 || d.GetMembers()[0].GetInstanceId() != longest || d.GetMembers()[0].GetMemberId() != first.GetMemberId() {
		t.Fatalf("members %+v, want the static member", d.GetMembers())
	}
	for _, bad := range []string{strings.Repeat("i", 250), strings.Repeat("i", 2<<20), " ", "a\x00b", "has space", "slash/", "café"} {
		_, err := s.JoinGroup(ctx, &skeinv1.JoinGroupRequest{Group: "g", Topics: []string{"t"}, InstanceId: bad})
		msg := errs.Message(err)
		if errs.Of(err) != errs.InvalidRequest || !strings.Contains(msg, "instance_id") || len(msg) > 200 {
			name := bad
			if len(name) > 20 {
				name = name[:20] + "..."
			}
			t.Errorf("instance_id %q (%d bytes): %v, want INVALID_REQUEST about the instance_id", name, len(bad), err)
		}
	}
}

// A partition taken from a member that had not started it (position -1)
// is given up in the same call, like one it had read: the member's second
// heartbeat of the call confirms it, and nothing is committed for it.
func TestGroupUnstartedPartitionIsGivenUpInTheSameCall(t *testing.T) {
	s, gc, _, ctx := groupFixture(t, map[string]int32{"t": 2})
	a, err := s.JoinGroup(ctx, &skeinv1.JoinGroupRequest{Group: "g", Topics: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.JoinGroup(ctx, &skeinv1.JoinGroupRequest{Group: "g", Topics: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	resp, err := s.FetchGroupRecords(ctx, &skeinv1.FetchGroupRecordsRequest{Group: "g", MemberId: a.GetMemberId(), MemberEpoch: a.GetMemberEpoch(),
		Positions: []*skeinv1.TopicPartitionOffset{{Topic: "t", Partition: 0, Offset: 0}, {Topic: "t", Partition: 1, Offset: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := partitionsOf(resp.GetAssignment()); len(got) != 1 {
		t.Fatalf("the first member holds %v after the second joined, want one partition", got)
	}
	d, err := s.groups.Describe(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range d.GetMembers() {
		if m.GetMemberId() == a.GetMemberId() && len(m.GetRevoking()) > 0 {
			t.Fatalf("after its call the first member is still giving up %v", m.GetRevoking())
		}
	}
	if n := gc.Commits(); n != 0 {
		t.Fatalf("%d commits for partitions never started", n)
	}
}

// groupFixture is a fake cluster (one storage node, a group coordinator)
// with the topics (name: partition count) in the client's metadata, the
// Group service over it, and a context for the test.
func groupFixture(t *testing.T, topics map[string]int32) (*Group, *clienttest.GroupCoordinator, *client.Client, context.Context) {
	t.Helper()
	s, gc, c, ctx, _ := groupCluster(t, topics)
	return s, gc, c, ctx
}

// groupCluster is groupFixture with its cluster (one storage node, 1).
func groupCluster(t *testing.T, topics map[string]int32) (*Group, *clienttest.GroupCoordinator, *client.Client, context.Context, *clienttest.Cluster) {
	t.Helper()
	cl := clienttest.Start(t, 1)
	gc, _ := cl.StartGroupCoordinator(t, 1)
	c, err := client.New(client.Config{Controllers: []string{cl.ControllerAddr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	for name, n := range topics {
		if _, err := c.CreateTopic(ctx, client.TopicSpec{Name: name, Partitions: n, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
		for c.Metadata().PartitionCount(name) != n {
			if ctx.Err() != nil {
				t.Fatalf("topic %s never reached the client's metadata", name)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	s := NewGroup(c, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { s.Close() })
	return s, gc, c, ctx, cl
}

// A member's fetch waits no longer than its heartbeat interval, whatever
// max_wait_ms asks: the call's heartbeat keeps the member only that long,
// and a longer wait could outlast its session and answer records of
// partitions the group has since given to another member.
func TestGroupFetchWaitsAtMostAHeartbeatInterval(t *testing.T) {
	s, gc, _, ctx := groupFixture(t, map[string]int32{"t": 1})
	gc.SetHeartbeatInterval(300 * time.Millisecond)
	a, err := s.JoinGroup(ctx, &skeinv1.JoinGroupRequest{Group: "g", Topics: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	wait := int32(10_000)
	start := time.Now()
	resp, err := s.FetchGroupRecords(ctx, &skeinv1.FetchGroupRecordsRequest{Group: "g", MemberId: a.GetMemberId(), MemberEpoch: a.GetMemberEpoch(), MaxWaitMs: &wait})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("an empty fetch took %v with a 300 ms heartbeat interval", took)
	}
	if len(resp.GetRecords()) != 0 || !slices.Equal(partitionsOf(resp.GetAssignment()), []int32{0}) {
		t.Fatalf("answered %v", resp)
	}
}

// A description lists every partition the members hold, as Kafka's tool
// does: one with nothing committed has offset and lag -1 (not known: where
// its member starts depends on its reset policy), and the total counts the
// lags that are known.
func TestGroupDescriptionListsAssignedPartitionsWithoutCommits(t *testing.T) {
	s, _, c, ctx := groupFixture(t, map[string]int32{"t": 2})
	p := c.NewProducer()
	defer p.Close(ctx)
	for i := range 5 {
		part := int32(i % 2) // 3 records on t:0, 2 on t:1
		if r := p.ProduceSync(ctx, client.Record{Topic: "t", Partition: &part, Value: []byte{byte('0' + i)}})[0]; r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	m, err := s.JoinGroup(ctx, &skeinv1.JoinGroupRequest{Group: "g", Topics: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	rows := func() (string, int64) {
		t.Helper()
		d, err := s.DescribeGroup(ctx, &skeinv1.DescribeGroupRequest{Group: "g"})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range d.GetOffsets() {
			out = append(out, fmt.Sprintf("%s:%d@%d/%d/%d", o.GetTopic(), o.GetPartition(), o.GetOffset(), o.GetHighWatermark(), o.GetLag()))
		}
		return strings.Join(out, " "), d.GetTotalLag()
	}
	if got, total := rows(); got != "t:0@-1/3/-1 t:1@-1/2/-1" || total != 0 {
		t.Fatalf("before any commit: %s, total %d; want both partitions with offset and lag -1, total 0", got, total)
	}
	if _, err := s.CommitOffsets(ctx, &skeinv1.CommitOffsetsRequest{Group: "g", MemberId: m.GetMemberId(), MemberEpoch: m.GetMemberEpoch(),
		Offsets: []*skeinv1.TopicPartitionOffset{{Topic: "t", Partition: 1, Offset: 1}}}); err != nil {
		t.Fatal(err)
	}
	if got, total := rows(); got != "t:0@-1/3/-1 t:1@1/2/1" || total != 1 {
		t.Fatalf("after a commit on t:1: %s, total %d; want t:1 at 1 with lag 1, t:0 still unknown, total 1", got, total)
	}
}

// A member joined with auto_offset_reset none starts a partition only at a
// committed offset or a position it gives: without one its fetch fails
// with OFFSET_OUT_OF_RANGE naming the partitions, and a position out of
// range fails too (after the records other partitions answered) instead
// of jumping.
func TestGroupAutoOffsetResetNone(t *testing.T) {
	s, _, c, ctx, cl := groupCluster(t, map[string]int32{"t": 2})
	p := c.NewProducer()
	defer p.Close(ctx)
	for part := range int32(2) {
		for i := range 10 {
			if r := p.ProduceSync(ctx, client.Record{Topic: "t", Partition: ptrTo(part), Value: []byte{byte('0' + i)}})[0]; r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	if _, err := s.JoinGroup(ctx, &skeinv1.JoinGroupRequest{Group: "g", Topics: []string{"t"}, AutoOffsetReset: "smallest"}); errs.Of(err) != errs.InvalidRequest {
		t.Errorf("auto_offset_reset smallest: %v, want INVALID_REQUEST", err)
	}
	m, err := s.JoinGroup(ctx, &skeinv1.JoinGroupRequest{Group: "g", Topics: []string{"t"}, AutoOffsetReset: "none"})
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(positions ...*skeinv1.TopicPartitionOffset) (*skeinv1.FetchGroupRecordsResponse, error) {
		return s.FetchGroupRecords(ctx, &skeinv1.FetchGroupRecordsRequest{Group: "g", MemberId: m.GetMemberId(), MemberEpoch: m.GetMemberEpoch(), Positions: positions})
	}
	if _, err := fetch(); errs.Of(err) != errs.OffsetOutOfRange || !strings.Contains(err.Error(), "t:0, t:1") {
		t.Fatalf("fetch without committed offsets: %v, want OFFSET_OUT_OF_RANGE naming t:0, t:1", err)
	}
	if _, err := s.CommitOffsets(ctx, &skeinv1.CommitOffsetsRequest{Group: "g", MemberId: m.GetMemberId(), MemberEpoch: m.GetMemberEpoch(),
		Offsets: []*skeinv1.TopicPartitionOffset{{Topic: "t", Partition: 0, Offset: 3}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := fetch(); errs.Of(err) != errs.OffsetOutOfRange || !strings.Contains(err.Error(), "for t:1 ") {
		t.Fatalf("fetch with t:0 committed: %v, want OFFSET_OUT_OF_RANGE naming t:1 alone", err)
	}
	// Positions given (a seek) need no committed offset. A call answers as
	// soon as one partition has records: the positions go back each time.
	read := map[int32][]int64{}
	positions := []*skeinv1.TopicPartitionOffset{{Topic: "t", Partition: 0, Offset: -1}, {Topic: "t", Partition: 1, Offset: 8}}
	for range 20 {
		resp, err := fetch(positions...)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resp.GetRecords() {
			read[r.GetPartition()] = append(read[r.GetPartition()], r.GetOffset())
		}
		if positions = resp.GetPositions(); len(read[0]) >= 7 && len(read[1]) >= 2 {
			break
		}
	}
	if !slices.Equal(read[0], []int64{3, 4, 5, 6, 7, 8, 9}) || !slices.Equal(read[1], []int64{8, 9}) {
		t.Fatalf("read %v from t:0 at its commit and t:1 at 8, want 3..9 and 8, 9", read)
	}

	// t:0's position falls behind its log start: a call that meets it
	// fails, though t:1 has records (a call that t:1 answers first, before
	// t:0's answer came, reads t:1 alone), t:0 stays where it is; another
	// position for t:0 (a seek) reads on.
	cl.Storage[1].SetLogStart("t", 0, 10)
	positions = []*skeinv1.TopicPartitionOffset{{Topic: "t", Partition: 0, Offset: 5}, {Topic: "t", Partition: 1, Offset: 7}}
	for i := 0; ; i++ {
		resp, err := fetch(positions...)
		if errs.Of(err) == errs.OffsetOutOfRange {
			if !strings.Contains(err.Error(), "auto_offset_reset is none") {
				t.Errorf("t:0 out of range: %v, want the policy named", err)
			}
			break
		}
		if err != nil || i == 20 {
			t.Fatalf("t:0 out of range, call %d: %v; never OFFSET_OUT_OF_RANGE", i, err)
		}
		for _, q := range resp.GetPositions() {
			if q.GetPartition() == 0 && q.GetOffset() != 5 {
				t.Fatalf("t:0 moved to %d, want it kept at 5", q.GetOffset())
			}
		}
		for _, r := range resp.GetRecords() {
			if r.GetPartition() == 0 {
				t.Fatalf("read t:0 offset %d", r.GetOffset())
			}
		}
		positions = resp.GetPositions()
	}
	positions = []*skeinv1.TopicPartitionOffset{{Topic: "t", Partition: 0, Offset: 10}, {Topic: "t", Partition: 1, Offset: 7}}
	clear(read)
	for range 20 {
		resp, err := fetch(positions...)
		if err != nil {
			t.Fatalf("after a seek of t:0 to its log start: %v", err)
		}
		for _, r := range resp.GetRecords() {
			read[r.GetPartition()] = append(read[r.GetPartition()], r.GetOffset())
		}
		if positions = resp.GetPositions(); len(read[1]) >= 3 {
			break
		}
	}
	if len(read[0]) > 0 || !slices.Equal(read[1], []int64{7, 8, 9}) {
		t.Errorf("read %v after the seek, want t:1's 7..9 and nothing of t:0 (none past its end)", read)
	}
}

// A partition without a leader does not fail a member's fetch: the other
// partitions are read, it stays unstarted (position -1), and a later call
// starts it once it has a leader.
func TestGroupFetchReadsAroundAnOfflinePartition(t *testing.T) {
	s, _, c, ctx, cl := groupCluster(t, map[string]int32{"t": 2})
	p := c.NewProducer()
	defer p.Close(ctx)
	for part := range int32(2) {
		for i := range 3 {
			if r := p.ProduceSync(ctx, client.Record{Topic: "t", Partition: ptrTo(part), Value: []byte{byte('0' + i)}})[0]; r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	cl.Controller.SetLeader("t", 1, -1)
	for c.Metadata().Available("t") == nil || len(c.Metadata().Available("t")) != 1 {
		if ctx.Err() != nil {
			t.Fatal("t:1's leader never left the client's metadata")
		}
		time.Sleep(10 * time.Millisecond)
	}
	m, err := s.JoinGroup(ctx, &skeinv1.JoinGroupRequest{Group: "g", Topics: []string{"t"}, AutoOffsetReset: "earliest"})
	if err != nil {
		t.Fatal(err)
	}
	read := map[int32][]int64{}
	var positions []*skeinv1.TopicPartitionOffset
	fetch := func() {
		t.Helper()
		resp, err := s.FetchGroupRecords(ctx, &skeinv1.FetchGroupRecordsRequest{Group: "g", MemberId: m.GetMemberId(), MemberEpoch: m.GetMemberEpoch(), Positions: positions})
		if err != nil {
			t.Fatalf("fetch with t:1 offline: %v", err)
		}
		for _, r := range resp.GetRecords() {
			read[r.GetPartition()] = append(read[r.GetPartition()], r.GetOffset())
		}
		positions = resp.GetPositions()
	}
	fetch()
	pos := map[int32]int64{}
	for _, q := range positions {
		pos[q.GetPartition()] = q.GetOffset()
	}
	if !slices.Equal(read[0], []int64{0, 1, 2}) || len(read[1]) != 0 || pos[1] != -1 {
		t.Fatalf("read %v, positions %v; want t:0's records and t:1 unstarted (-1)", read, pos)
	}
	cl.Controller.SetLeader("t", 1, 1)
	for len(read[1]) < 3 {
		if ctx.Err() != nil {
			t.Fatalf("after t:1 got a leader back: read %v", read)
		}
		fetch()
	}
	if !slices.Equal(read[1], []int64{0, 1, 2}) {
		t.Errorf("t:1 read %v, want 0..2", read[1])
	}
}
