package client_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	groupv1 "skein/gen/skein/group/v1"
	"skein/libs/client"
	"skein/libs/client/clienttest"
	"skein/libs/errs"
	"skein/libs/record"
)

func produceN(t *testing.T, c *client.Client, topic string, partitions int32, perPartition int) {
	t.Helper()
	p := c.NewProducer()
	defer p.Close(ctx(t))
	var recs []client.Record
	for part := range partitions {
		for i := range perPartition {
			recs = append(recs, client.Record{Topic: topic, Partition: ptr(part), Value: fmt.Appendf(nil, "%d-%d", part, i)})
		}
	}
	for _, r := range p.ProduceSync(ctx(t), recs...) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
}

func newMember(t *testing.T, c *client.Client, group string, cfg client.GroupConsumerConfig) *client.GroupConsumer {
	t.Helper()
	cfg.Group = group
	if cfg.Topics == nil {
		cfg.Topics = []string{"t"}
	}
	if cfg.AutoOffsetReset == "" {
		cfg.AutoOffsetReset = client.ResetEarliest
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = 50 * time.Millisecond
	}
	gc, err := c.NewGroupConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return gc
}

// consumed records what members read, by partition and offset.
type consumed map[client.TopicPartition][]int64

func (c consumed) poll(t *testing.T, gc *client.GroupConsumer) {
	t.Helper()
	recs, err := gc.Poll(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		tp := client.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		c[tp] = append(c[tp], r.Offset)
	}
	if err := gc.CommitSync(ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// Two members split six partitions 3/3; the first gives three up only after
// committing them, and every record is read exactly once.
func TestGroupConsumerHandoffIsExactlyOnce(t *testing.T) {
	cl := clienttest.Start(t, 2)
	gcoord, _ := cl.StartGroupCoordinator(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 6, nil)
	produceN(t, c, "t", 6, 20)

	var assigned, revoked []client.TopicPartition
	a := newMember(t, c, "g", client.GroupConsumerConfig{MaxRecords: 7,
		OnAssigned: func(_ context.Context, tps []client.TopicPartition) { assigned = append(assigned, tps...) },
		OnRevoked:  func(_ context.Context, tps []client.TopicPartition) { revoked = append(revoked, tps...) },
	})
	seen := consumed{}
	for range 3 {
		seen.poll(t, a)
	}
	if len(a.Assignment()) != 6 || len(assigned) != 6 {
		t.Fatalf("alone, a owns %v (assigned %v)", a.Assignment(), assigned)
	}
	b := newMember(t, c, "g", client.GroupConsumerConfig{MaxRecords: 7})
	deadline := time.Now().Add(10 * time.Second)
	for len(a.Assignment()) != 3 || len(b.Assignment()) != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("no 3/3 split: a %v, b %v", a.Assignment(), b.Assignment())
		}
		seen.poll(t, a)
		seen.poll(t, b)
	}
	if len(revoked) != 3 {
		t.Errorf("revoked %v, want 3 partitions", revoked)
	}
	for _, tp := range a.Assignment() {
		if slices.Contains(b.Assignment(), tp) {
			t.Errorf("%v owned by both", tp)
		}
	}
	for total(seen) < 120 && time.Now().Before(deadline) {
		seen.poll(t, a)
		seen.poll(t, b)
	}
	for p := range int32(6) {
		got := seen[client.TopicPartition{Topic: "t", Partition: p}]
		want := make([]int64, 20)
		for i := range want {
			want[i] = int64(i)
		}
		if !slices.Equal(got, want) {
			t.Errorf("partition %d read %v, want each of 0..19 once", p, got)
		}
		if off := gcoord.Committed("g", "t", p); off != 20 {
			t.Errorf("partition %d committed %d, want 20", p, off)
		}
	}
	for _, m := range []*client.GroupConsumer{a, b} {
		if err := m.Close(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if ms := gcoord.Members("g"); len(ms) != 0 {
		t.Errorf("members after both closed: %v", ms)
	}
}

func total(c consumed) int {
	n := 0
	for _, offs := range c {
		n += len(offs)
	}
	return n
}

// A member that closes commits its positions; the next one starts there.
// Without a commit, AutoOffsetReset decides.
func TestGroupConsumerResumesAtCommittedOffsets(t *testing.T) {
	cl := clienttest.Start(t, 1)
	cl.StartGroupCoordinator(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	produceN(t, c, "t", 1, 10)

	latest := newMember(t, c, "g-latest", client.GroupConsumerConfig{AutoOffsetReset: client.ResetLatest})
	if recs, err := latest.Poll(ctx(t)); err != nil || len(recs) != 0 {
		t.Fatalf("latest reads %d records, %v; want none", len(recs), err)
	}
	if pos := latest.Position(client.TopicPartition{Topic: "t"}); pos != 10 {
		t.Errorf("latest starts at %d, want 10", pos)
	}

	a := newMember(t, c, "g", client.GroupConsumerConfig{MaxRecords: 4})
	recs, err := a.Poll(ctx(t))
	if err != nil || len(recs) != 4 || recs[0].Offset != 0 {
		t.Fatalf("first poll %v %v", recs, err)
	}
	if err := a.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	b := newMember(t, c, "g", client.GroupConsumerConfig{})
	recs, err = b.Poll(ctx(t))
	if err != nil || len(recs) != 6 || recs[0].Offset != 4 {
		t.Fatalf("after a closed, b reads %v %v; want offsets 4..9", recs, err)
	}
}

// A member the coordinator expired loses its partitions uncommitted and
// rejoins on its next poll.
func TestGroupConsumerRejoinsAfterExpiry(t *testing.T) {
	cl := clienttest.Start(t, 1)
	gcoord, _ := cl.StartGroupCoordinator(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 2, nil)
	var lost []client.TopicPartition
	a := newMember(t, c, "g", client.GroupConsumerConfig{
		OnLost: func(_ context.Context, tps []client.TopicPartition) { lost = append(lost, tps...) },
	})
	if _, err := a.Poll(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if len(a.Assignment()) != 2 {
		t.Fatalf("owns %v", a.Assignment())
	}
	gcoord.Expire("g", a.MemberID())
	time.Sleep(250 * time.Millisecond) // the next heartbeat falls due
	if _, err := a.Poll(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if len(lost) != 2 {
		t.Errorf("lost %v, want both partitions", lost)
	}
	for range 3 {
		if _, err := a.Poll(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.Assignment()) != 2 || a.MemberEpoch() <= 0 {
		t.Errorf("after rejoining: owns %v at epoch %d", a.Assignment(), a.MemberEpoch())
	}
}

// Leaving a group the member is already out of (its session ran out, or
// a retried leave found its first try done) is not an error for Close.
func TestCloseAfterTheMemberIsGone(t *testing.T) {
	cl := clienttest.Start(t, 1)
	gcoord, _ := cl.StartGroupCoordinator(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	a := newMember(t, c, "g", client.GroupConsumerConfig{})
	b := newMember(t, c, "g", client.GroupConsumerConfig{})
	for range 3 {
		for _, m := range []*client.GroupConsumer{a, b} {
			if _, err := m.Poll(ctx(t)); err != nil {
				t.Fatal(err)
			}
		}
	}
	idle := b
	if len(a.Assignment()) == 0 {
		idle = a
	}
	if len(idle.Assignment()) != 0 || idle.MemberEpoch() <= 0 {
		t.Fatalf("want a member in the group with no partition: owns %v at epoch %d", idle.Assignment(), idle.MemberEpoch())
	}
	gcoord.Expire("g", idle.MemberID())
	if err := idle.Close(ctx(t)); err != nil {
		t.Fatalf("Close of a member already out of the group: %v", err)
	}
}

// twoGroupCoordinators starts a cluster with group coordinators 1 (first,
// the one FindCoordinator names) and 2, topic t, and a Groups handle.
func twoGroupCoordinators(t *testing.T) (cl *clienttest.Cluster, first, second *clienttest.GroupCoordinator, groups *client.Groups) {
	t.Helper()
	cl = clienttest.Start(t, 1)
	first, _ = cl.StartGroupCoordinator(t, 1)
	second, _ = cl.StartGroupCoordinator(t, 2)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	groups = c.Groups()
	t.Cleanup(func() { groups.Close() })
	return cl, first, second, groups
}

// A coordinator that says the group lives elsewhere makes the client look
// the coordinator up again and retry there.
func TestGroupsFollowTheCoordinator(t *testing.T) {
	cl, first, second, groups := twoGroupCoordinators(t)
	join := &groupv1.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: "m1", SubscribedTopics: []string{"t"}}
	if _, err := groups.Heartbeat(ctx(t), join); err != nil {
		t.Fatal(err)
	}
	if len(first.Members("g")) != 1 {
		t.Fatalf("the first coordinator holds %v", first.Members("g"))
	}
	// The group moves: the old owner refuses, the controller names the new one.
	first.FailNext(errs.Errorf(errs.NotCoordinator, "moved"), 1)
	cl.Controller.SetCoordinatorFor("g", 2)
	join.MemberId = "m2"
	if _, err := groups.Heartbeat(ctx(t), join); err != nil {
		t.Fatal(err)
	}
	if len(second.Members("g")) != 1 {
		t.Errorf("the second coordinator holds %v after the move", second.Members("g"))
	}
	// Loading is retried in place.
	second.FailNext(errs.Errorf(errs.CoordinatorLoadInProgress, "loading"), 2)
	if _, err := groups.Describe(ctx(t), "g"); err != nil {
		t.Errorf("describe while loading: %v", err)
	}
	// Refusals that are the caller's are answered at once.
	_, err := groups.Heartbeat(ctx(t), &groupv1.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: "nobody", MemberEpoch: 3})
	if errs.Of(err) != errs.UnknownMemberID {
		t.Errorf("heartbeat of an unknown member: %v", err)
	}
	if err := groups.Delete(ctx(t), "g"); errs.Of(err) != errs.NonEmptyGroup {
		t.Errorf("delete of a group with members: %v", err)
	}
	list, err := groups.List(ctx(t))
	if err != nil || len(list) != 1 || list[0].GetGroupId() != "g" {
		t.Errorf("list %v %v", list, err)
	}
}

// FetchAny with minBytes counts the bytes of every partition together: two
// partitions that each hold less than minBytes answer at once when their sum
// reaches it; a sum that falls short waits for more, and answers once a
// record arriving later makes it up; one that never does answers what
// there is when MaxWait is up; maxRecords ends the wait too.
func TestFetchAnyCountsBytesAcrossPartitions(t *testing.T) {
	cl := clienttest.Start(t, 2)
	c := newClient(t, cl)
	createTopic(t, c, "t", 2, nil)
	p := c.NewProducer()
	defer p.Close(ctx(t))
	value := func(part int32, i int) client.Record {
		v := slices.Repeat([]byte{byte('a' + i)}, 600)
		return client.Record{Topic: "t", Partition: ptr(part), Value: v}
	}
	produce := func(recs ...client.Record) {
		t.Helper()
		for _, r := range p.ProduceSync(ctx(t), recs...) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	produce(value(0, 0))
	produce(value(1, 1))
	reqs := func(wait time.Duration) []client.FetchRequest {
		return []client.FetchRequest{
			{Topic: "t", Partition: 0, Offset: 0, MaxWait: wait},
			{Topic: "t", Partition: 1, Offset: 0, MaxWait: wait},
		}
	}
	// offsets answers each partition's records' offsets and next position.
	offsets := func(as []client.FetchAnswer) string {
		var out []string
		for _, a := range as {
			if a.Err != nil {
				t.Fatalf("partition %d: %v", a.Request.Partition, a.Err)
			}
			var offs []int64
			for _, r := range a.Records {
				if len(r.Value) != 600 {
					t.Fatalf("partition %d offset %d: a %d-byte value, want 600", r.Partition, r.Offset, len(r.Value))
				}
				offs = append(offs, r.Offset)
			}
			out = append(out, fmt.Sprintf("p%d %v next %d", a.Request.Partition, offs, a.Next))
		}
		return strings.Join(out, "; ")
	}

	both := "p0 [0] next 1; p1 [0] next 1"
	for _, tc := range []struct {
		name       string
		minBytes   int32
		maxRecords int
		wait       time.Duration
		want       []string // any of them: which partition answers first is a race
		atLeast    time.Duration
	}{
		{"each partition short, together enough", 1000, 0, 20 * time.Second, []string{both}, 0},
		{"no min_bytes: the first answer is enough", 0, 0, 20 * time.Second,
			[]string{both, "p0 [0] next 1; p1 [] next 0", "p0 [] next 0; p1 [0] next 1"}, 0},
		{"never enough: MaxWait is up", 1 << 20, 0, 300 * time.Millisecond, []string{both}, 300 * time.Millisecond},
		{"max_records reached first", 1 << 20, 1, 20 * time.Second,
			[]string{"p0 [0] next 1; p1 [] next 0", "p0 [] next 0; p1 [0] next 1"}, 0},
	} {
		start := time.Now()
		got := offsets(c.FetchAny(ctx(t), reqs(tc.wait), tc.maxRecords, tc.minBytes))
		took := time.Since(start)
		if !slices.Contains(tc.want, got) {
			t.Errorf("%s: %s, want one of %q", tc.name, got, tc.want)
		}
		if took < tc.atLeast || took >= tc.atLeast+10*time.Second {
			t.Errorf("%s: answered after %v, want [%v, %v)", tc.name, took, tc.atLeast, tc.atLeast+10*time.Second)
		}
	}

	// 1,200 bytes of values are there, 2,000 are asked for: the call waits
	// until a third record comes, on either partition, then answers all
	// three.
	done := make(chan []client.FetchAnswer, 1)
	go func() { done <- c.FetchAny(ctx(t), reqs(20*time.Second), 0, 2000) }()
	select {
	case as := <-done:
		t.Fatalf("answered with 1,200 bytes there: %s", offsets(as))
	case <-time.After(300 * time.Millisecond):
	}
	produce(value(0, 2))
	select {
	case as := <-done:
		if got, want := offsets(as), "p0 [0 1] next 2; p1 [0] next 1"; got != want {
			t.Errorf("after the third record: %s, want %s", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer once 1,800 bytes of values and their batches were there")
	}
}

func TestGroupConsumerRefusesNegativeMinBytes(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	_, err := c.NewGroupConsumer(client.GroupConsumerConfig{Group: "g", Topics: []string{"t"}, MinBytes: -1})
	if errs.Of(err) != errs.InvalidRequest {
		t.Fatalf("MinBytes -1: %v, want INVALID_REQUEST", err)
	}
}

// A call parked on a group coordinator that stopped answering (paused, cut
// off) ends as soon as the metadata names a new owner of the group's
// partition, and is answered there: it does not wait for the connection's
// keepalive to fail.
func TestGroupCallFollowsACoordinatorMove(t *testing.T) {
	cl, first, second, groups := twoGroupCoordinators(t)
	commit := func(offset int64) error {
		_, err := groups.CommitOffsets(ctx(t), &groupv1.OffsetCommitRequest{GroupId: "g", MemberEpoch: -1,
			Offsets: []*groupv1.PartitionOffset{{Topic: "t", Partition: 0, Offset: offset}}})
		return err
	}
	if err := commit(1); err != nil || first.Commits() != 1 {
		t.Fatalf("commit at the first coordinator: %v (it served %d)", err, first.Commits())
	}
	release := first.Stall()
	defer release()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- commit(2) }()
	time.Sleep(300 * time.Millisecond)
	cl.Controller.MoveCoordinatorFor("g", 2)
	select {
	case err := <-done:
		if err != nil || second.Commits() != 1 {
			t.Fatalf("the commit after the move: %v (the new coordinator served %d)", err, second.Commits())
		}
		t.Logf("answered %v after it began, by the new coordinator", time.Since(start).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("the commit still waits on the stalled coordinator 10 s after the move")
	}
}

// A batch damaged on the leader: a fetch answers the records before it
// and then fails at once with CORRUPT_MESSAGE (not retried until its
// timeout), and a group member's Poll that has nothing else to answer
// says so, as Kafka's poll throws CorruptRecordException, rather than
// answering nothing for ever.
func TestACorruptBatchIsReported(t *testing.T) {
	cl := clienttest.Start(t, 1)
	cl.StartGroupCoordinator(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	build := func(base int64, values ...string) record.Batch {
		opts := record.DefaultBatchOptions()
		opts.BaseOffset = record.Offset(base)
		b := record.NewBuilder(opts)
		for _, v := range values {
			b.Append(1, nil, []byte(v))
		}
		out, _, err := b.Build(nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	bad := build(2, "c", "d")
	bad[len(bad)-2] ^= 0xff // inside what the CRC covers
	cl.Storage[1].SetBatches("t", 0, build(0, "a", "b"), bad)

	start := time.Now()
	res, err := c.Fetch(ctx(t), client.FetchRequest{Topic: "t", Partition: 0, Offset: 0})
	if err != nil || len(res.Records) != 2 || res.NextOffset != 2 {
		t.Fatalf("fetch from 0: %+v %v; want a and b, next 2", res, err)
	}
	if _, err := c.Fetch(ctx(t), client.FetchRequest{Topic: "t", Partition: 0, Offset: 2}); errs.Of(err) != errs.CorruptMessage {
		t.Fatalf("fetch from the damaged batch: %v, want CORRUPT_MESSAGE", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the fetches took %v: the damaged batch was retried", took)
	}

	gc := newMember(t, c, "g", client.GroupConsumerConfig{})
	defer gc.Close(ctx(t))
	var got []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		recs, err := gc.Poll(ctx(t))
		for _, r := range recs {
			got = append(got, string(r.Value))
		}
		if errs.Of(err) == errs.CorruptMessage {
			break
		}
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("polls answered %v and never CORRUPT_MESSAGE", got)
		}
	}
	if strings.Join(got, ",") != "a,b" {
		t.Errorf("the member read %v before the damaged batch, want a,b", got)
	}
}

// Under auto offset reset none a partition starts nowhere by itself: a
// Poll fails with OFFSET_OUT_OF_RANGE naming it until an offset is
// committed, a member then starts there, and a position that falls out of
// range fails too instead of jumping.
func TestGroupConsumerAutoOffsetResetNone(t *testing.T) {
	cl := clienttest.Start(t, 1)
	cl.StartGroupCoordinator(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 2, nil)
	produceN(t, c, "t", 2, 10)

	if _, err := c.NewGroupConsumer(client.GroupConsumerConfig{Group: "g", Topics: []string{"t"}, AutoOffsetReset: "smallest"}); errs.Of(err) != errs.InvalidRequest {
		t.Errorf("auto offset reset smallest: %v, want INVALID_REQUEST", err)
	}
	a := newMember(t, c, "g", client.GroupConsumerConfig{AutoOffsetReset: client.ResetNone})
	var err error
	for range 20 { // the first Polls may join before the assignment arrives
		var recs []client.ConsumedRecord
		if recs, err = a.Poll(ctx(t)); err != nil || len(recs) > 0 {
			break
		}
	}
	if errs.Of(err) != errs.OffsetOutOfRange || !strings.Contains(err.Error(), "t:0, t:1") {
		t.Fatalf("poll without committed offsets: %v, want OFFSET_OUT_OF_RANGE naming t:0, t:1", err)
	}
	if err := a.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}

	groups := c.Groups()
	if _, err := groups.CommitOffsets(ctx(t), &groupv1.OffsetCommitRequest{GroupId: "g", MemberEpoch: -1, Offsets: []*groupv1.PartitionOffset{
		{Topic: "t", Partition: 0, Offset: 4}, {Topic: "t", Partition: 1, Offset: 7}}}); err != nil {
		t.Fatal(err)
	}
	b := newMember(t, c, "g", client.GroupConsumerConfig{AutoOffsetReset: client.ResetNone})
	got := consumed{}
	for deadline := time.Now().Add(10 * time.Second); len(got[client.TopicPartition{Topic: "t"}])+len(got[client.TopicPartition{Topic: "t", Partition: 1}]) < 9; {
		got.poll(t, b)
		if time.Now().After(deadline) {
			t.Fatalf("after the commits the member read %v, want t:0 4..9 and t:1 7..9", got)
		}
	}
	if p0, p1 := got[client.TopicPartition{Topic: "t"}], got[client.TopicPartition{Topic: "t", Partition: 1}]; !slices.Equal(p0, []int64{4, 5, 6, 7, 8, 9}) || !slices.Equal(p1, []int64{7, 8, 9}) {
		t.Errorf("read t:0 %v and t:1 %v, want 4..9 and 7..9", p0, p1)
	}

	// Its positions (10 each) fall behind the log start.
	cl.Storage[1].SetLogStart("t", 0, 12)
	produceN(t, c, "t", 2, 5) // t:0 now ends at 15
	for deadline := time.Now().Add(10 * time.Second); ; {
		recs, err := b.Poll(ctx(t))
		for _, r := range recs {
			if r.Partition == 0 {
				t.Fatalf("read t:0 offset %d past a position out of range", r.Offset)
			}
		}
		if errs.Of(err) == errs.OffsetOutOfRange {
			if !strings.Contains(err.Error(), "auto offset reset is none") {
				t.Errorf("out of range: %v, want the reset policy named", err)
			}
			break
		}
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("a position out of range under none was never reported")
		}
	}
	if pos := b.Position(client.TopicPartition{Topic: "t"}); pos != 10 {
		t.Errorf("t:0 position %d after the failure, want it kept at 10", pos)
	}
	// Every Poll says so while the position stays, though t:1 has records.
	produceN(t, c, "t", 2, 1)
	for range 3 {
		if recs, err := b.Poll(ctx(t)); errs.Of(err) != errs.OffsetOutOfRange || len(recs) != 0 {
			t.Fatalf("a later Poll: %d records, %v; want OFFSET_OUT_OF_RANGE", len(recs), err)
		}
	}
	if err := b.Seek(client.TopicPartition{Topic: "t"}, 13); err != nil {
		t.Fatal(err)
	}
	got = consumed{}
	for deadline := time.Now().Add(10 * time.Second); len(got[client.TopicPartition{Topic: "t"}]) < 3 || len(got[client.TopicPartition{Topic: "t", Partition: 1}]) < 1; {
		got.poll(t, b)
		if time.Now().After(deadline) {
			t.Fatalf("after a seek to 13 the member read %v, want t:0 from 13 and t:1 from 10", got)
		}
	}
	if p0 := got[client.TopicPartition{Topic: "t"}]; p0[0] != 13 || p0[len(p0)-1] != 13+int64(len(p0))-1 {
		t.Errorf("after the seek t:0 read %v, want 13 on, in order", p0)
	}
}

// A partition without a leader does not stop a member reading its other
// partitions: it stays unstarted, is tried again, and is read once it has
// a leader.
func TestGroupConsumerReadsAroundAnOfflinePartition(t *testing.T) {
	cl := clienttest.Start(t, 1)
	cl.StartGroupCoordinator(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 2, nil)
	produceN(t, c, "t", 2, 5)
	cl.Controller.SetLeader("t", 1, -1)
	for deadline := time.Now().Add(10 * time.Second); len(c.Metadata().Available("t")) != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("t:1's leader never left the client's metadata")
		}
	}
	gc := newMember(t, c, "g", client.GroupConsumerConfig{})
	defer gc.Close(ctx(t))
	got := consumed{}
	p0, p1 := client.TopicPartition{Topic: "t"}, client.TopicPartition{Topic: "t", Partition: 1}
	for deadline := time.Now().Add(10 * time.Second); len(got[p0]) < 5; {
		got.poll(t, gc)
		if time.Now().After(deadline) {
			t.Fatalf("with t:1 offline the member read %v, want t:0's 5 records", got)
		}
	}
	if len(got[p1]) != 0 {
		t.Fatalf("read %v of the offline partition", got[p1])
	}
	cl.Controller.SetLeader("t", 1, 1)
	for deadline := time.Now().Add(10 * time.Second); len(got[p1]) < 5; {
		got.poll(t, gc)
		if time.Now().After(deadline) {
			t.Fatalf("after t:1 got its leader back the member read %v, want its 5 records", got[p1])
		}
	}
	if !slices.Equal(got[p1], []int64{0, 1, 2, 3, 4}) {
		t.Errorf("t:1 read %v, want 0..4 from its start", got[p1])
	}
}

// Under ManualCommit a member commits nothing by itself: not at Close, not
// the partitions a rebalance takes from it; its CommitSync still commits.
func TestGroupConsumerManualCommit(t *testing.T) {
	cl := clienttest.Start(t, 1)
	cl.StartGroupCoordinator(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 2, nil)
	produceN(t, c, "t", 2, 5)
	committed := func() map[int32]int64 {
		t.Helper()
		offs, err := c.Groups().FetchOffsets(ctx(t), "g", nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]int64{}
		for _, o := range offs {
			if o.GetOffset() >= 0 {
				out[o.GetPartition()] = o.GetOffset()
			}
		}
		return out
	}
	read := func(gc *client.GroupConsumer, n int) {
		t.Helper()
		got := 0
		for deadline := time.Now().Add(10 * time.Second); got < n; {
			recs, err := gc.Poll(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			got += len(recs)
			if time.Now().After(deadline) {
				t.Fatalf("read %d records, want %d", got, n)
			}
		}
	}
	a := newMember(t, c, "g", client.GroupConsumerConfig{ManualCommit: true})
	read(a, 10)
	b := newMember(t, c, "g", client.GroupConsumerConfig{ManualCommit: true})
	for deadline := time.Now().Add(10 * time.Second); len(a.Assignment()) != 1 || len(b.Assignment()) != 1; {
		if _, err := a.Poll(ctx(t)); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Poll(ctx(t)); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 1/1 split: a %v, b %v", a.Assignment(), b.Assignment())
		}
	}
	if got := committed(); len(got) != 0 {
		t.Fatalf("after a revocation: committed %v, want nothing", got)
	}
	if err := a.CommitSync(ctx(t)); err != nil {
		t.Fatal(err)
	}
	kept := a.Assignment()[0]
	if got := committed(); len(got) != 1 || got[kept.Partition] != 5 {
		t.Fatalf("after CommitSync: %v, want t:%d at 5 alone", got, kept.Partition)
	}
	if err := b.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if got := committed(); len(got) != 1 {
		t.Errorf("after Close: %v, want the CommitSync's alone", got)
	}
}
