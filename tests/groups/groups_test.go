//go:build integration

package groups

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	controllerv1 "skein/gen/skein/controller/v1"
	controllerv1grpc "skein/gen/skein/controller/v1/controllerv1grpc"
	groupv1 "skein/gen/skein/group/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/libs/record"
	"skein/libs/rpcerr"
	"skein/tests/cluster"
)

const groupKind = controllerv1.CoordinatorKind_COORDINATOR_KIND_GROUP

// env is a cluster with two group coordinators and a topic to consume.
type env struct {
	t  *testing.T
	c  *cluster.Cluster
	cl *cluster.Client

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

func start(t *testing.T) *env {
	e := startWith(t, func(c *cluster.Cluster) { c.StartGroupCoordinators(2) })
	return e
}

// startWith starts the cluster, lets coordinators start them, creates the
// topic and waits until the coordinators own __consumer_offsets.
func startWith(t *testing.T, coordinators func(*cluster.Cluster)) *env {
	c := cluster.Start(t, cluster.Options{})
	coordinators(c)
	e := &env{t: t, c: c, cl: cluster.NewClient(t, c.ControllerAddrs()), conns: map[string]*grpc.ClientConn{}}
	t.Cleanup(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, cc := range e.conns {
			cc.Close()
		}
	})
	e.cl.CreateTopic("orders", 4, 3, map[string]string{"min.insync.replicas": "2"})
	e.cl.WaitFor("__consumer_offsets owned by every coordinator", 30*time.Second, func(im *metadata.Image) bool {
		owners := map[int32]bool{}
		for _, a := range im.Assignments(groupKind) {
			owners[a.GetOwner()] = true
		}
		for _, p := range c.GroupCoords {
			if !owners[int32(p.ID)] {
				return false
			}
		}
		return !owners[-1]
	})
	return e
}

// find asks the controllers which coordinator owns a group.
func (e *env) find(group string) (*controllerv1.FindCoordinatorResponse, error) {
	var resp *controllerv1.FindCoordinatorResponse
	err := e.cl.Controller(func(cc controllerv1grpc.ControllerServiceClient) error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var err error
		resp, err = cc.FindCoordinator(ctx, &controllerv1.FindCoordinatorRequest{Kind: groupKind, Key: group})
		return err
	})
	return resp, rpcerr.FromStatus(err)
}

func (e *env) conn(addr string) groupv1.GroupCoordinatorServiceClient {
	e.mu.Lock()
	defer e.mu.Unlock()
	cc, ok := e.conns[addr]
	if !ok {
		var err error
		if cc, err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
			e.t.Fatal(err)
		}
		e.conns[addr] = cc
	}
	return groupv1.NewGroupCoordinatorServiceClient(cc)
}

// moved reports whether an answer says: look the coordinator up again.
func moved(code skeinv1.ErrorCode) bool {
	switch errs.ForCode(errs.Code(code)) {
	case errs.NotCoordinator, errs.CoordinatorLoadInProgress, errs.CoordinatorNotAvailable, errs.RequestTimedOut, errs.NetworkException:
		return true
	}
	return false
}

// call runs fn against the group's coordinator until it answers something
// other than "elsewhere" or d passes; fn answers the code of its answer.
func (e *env) call(group string, d time.Duration, fn func(ctx context.Context, cl groupv1.GroupCoordinatorServiceClient) (skeinv1.ErrorCode, error)) (skeinv1.ErrorCode, error) {
	deadline := time.Now().Add(d)
	for {
		code, err := skeinv1.ErrorCode_COORDINATOR_NOT_AVAILABLE, error(nil)
		if co, ferr := e.find(group); ferr == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			code, err = fn(ctx, e.conn(co.GetGrpcAddr()))
			cancel()
			if err != nil {
				code = skeinv1.ErrorCode(errs.CodeOf(rpcerr.FromStatus(err)))
			}
		}
		if !moved(code) || time.Now().After(deadline) {
			return code, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type member struct {
	id    string
	epoch int32
	owned []*groupv1.TopicPartitions
}

func (e *env) join(group string, sessionMs int32) member {
	e.t.Helper()
	var resp *groupv1.ConsumerGroupHeartbeatResponse
	code, err := e.call(group, 20*time.Second, func(ctx context.Context, cl groupv1.GroupCoordinatorServiceClient) (skeinv1.ErrorCode, error) {
		var err error
		resp, err = cl.ConsumerGroupHeartbeat(ctx, &groupv1.ConsumerGroupHeartbeatRequest{GroupId: group, SubscribedTopics: []string{"orders"}, SessionTimeoutMs: sessionMs})
		return resp.GetErrorCode(), err
	})
	if code != skeinv1.ErrorCode_NONE || err != nil || resp.GetMemberId() == "" {
		e.t.Fatalf("join %s: %v %v %v", group, code, err, resp)
	}
	return member{id: resp.GetMemberId(), epoch: resp.GetMemberEpoch(), owned: resp.GetAssignment()}
}

func (e *env) commit(group string, m member, partition int32, offset int64, d time.Duration) (skeinv1.ErrorCode, error) {
	return e.call(group, d, func(ctx context.Context, cl groupv1.GroupCoordinatorServiceClient) (skeinv1.ErrorCode, error) {
		resp, err := cl.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: group, MemberId: m.id, MemberEpoch: m.epoch,
			Offsets: []*groupv1.PartitionOffset{{Topic: "orders", Partition: partition, Offset: offset, LeaderEpoch: -1}}})
		if err != nil {
			return 0, err
		}
		return resp.GetPartitions()[0].GetErrorCode(), nil
	})
}

func (e *env) committed(group string, partition int32) int64 {
	e.t.Helper()
	var off int64
	code, err := e.call(group, 20*time.Second, func(ctx context.Context, cl groupv1.GroupCoordinatorServiceClient) (skeinv1.ErrorCode, error) {
		resp, err := cl.OffsetFetch(ctx, &groupv1.OffsetFetchRequest{GroupId: group, Partitions: []*groupv1.TopicPartitions{{Topic: "orders", Partitions: []int32{partition}}}})
		if err != nil || resp.GetErrorCode() != skeinv1.ErrorCode_NONE {
			return resp.GetErrorCode(), err
		}
		off = resp.GetOffsets()[0].GetOffset()
		return skeinv1.ErrorCode_NONE, nil
	})
	if code != skeinv1.ErrorCode_NONE || err != nil {
		e.t.Fatalf("offset fetch of %s: %v %v", group, code, err)
	}
	return off
}

// coordinator answers the process that owns a group now.
func (e *env) coordinator(group string) *cluster.Proc {
	e.t.Helper()
	co, err := e.find(group)
	if err != nil {
		e.t.Fatalf("find coordinator of %s: %v", group, err)
	}
	for _, p := range e.c.GroupCoords {
		if int32(p.ID) == co.GetNodeId() {
			return p
		}
	}
	e.t.Fatalf("coordinator %d is not one of ours", co.GetNodeId())
	return nil
}

func TestJoinHeartbeatCommitFetch(t *testing.T) {
	e := start(t)
	m := e.join("app", 0)
	if m.epoch != 1 || len(m.owned) != 1 || len(m.owned[0].GetPartitions()) != 4 {
		t.Fatalf("join: %+v", m)
	}
	hb, err := e.conn(e.coordinator("app").GRPCAddr).ConsumerGroupHeartbeat(context.Background(), &groupv1.ConsumerGroupHeartbeatRequest{
		GroupId: "app", MemberId: m.id, MemberEpoch: m.epoch, OwnedPartitions: m.owned})
	if err != nil || hb.GetErrorCode() != skeinv1.ErrorCode_NONE || hb.GetMemberEpoch() != 1 {
		t.Fatalf("heartbeat: %v %v", hb, err)
	}
	if code, err := e.commit("app", m, 2, 17, 10*time.Second); code != skeinv1.ErrorCode_NONE || err != nil {
		t.Fatalf("commit: %v %v", code, err)
	}
	if got := e.committed("app", 2); got != 17 {
		t.Fatalf("committed %d, want 17", got)
	}
	if got := e.committed("app", 3); got != -1 {
		t.Fatalf("nothing committed on 3: got %d", got)
	}
	// A stale epoch and an unknown member are refused, nothing changed.
	if code, _ := e.commit("app", member{id: m.id, epoch: 9}, 2, 99, 5*time.Second); code != skeinv1.ErrorCode_STALE_MEMBER_EPOCH {
		t.Fatalf("stale epoch: %v", code)
	}
	if code, _ := e.commit("app", member{id: "nobody", epoch: 1}, 2, 99, 5*time.Second); code != skeinv1.ErrorCode_UNKNOWN_MEMBER_ID {
		t.Fatalf("unknown member: %v", code)
	}
	if got := e.committed("app", 2); got != 17 {
		t.Fatalf("committed %d after refusals, want 17", got)
	}
	desc, err := e.conn(e.coordinator("app").GRPCAddr).DescribeGroups(context.Background(), &groupv1.DescribeGroupsRequest{GroupIds: []string{"app"}})
	if err != nil || desc.GetGroups()[0].GetState() != "Stable" || len(desc.GetGroups()[0].GetMembers()) != 1 {
		t.Fatalf("describe: %v %v", desc, err)
	}
	// Another coordinator answers NOT_COORDINATOR for the group.
	for _, p := range e.c.GroupCoords {
		if p != e.coordinator("app") {
			resp, err := e.conn(p.GRPCAddr).OffsetFetch(context.Background(), &groupv1.OffsetFetchRequest{GroupId: "app"})
			if err != nil || resp.GetErrorCode() != skeinv1.ErrorCode_NOT_COORDINATOR {
				t.Fatalf("the other coordinator: %v %v", resp, err)
			}
		}
	}
}

// TestCoordinatorKilled: the coordinator holding a group is SIGKILLed while
// a member commits an ever-growing offset. Another serves the group within
// seconds; every offset fetched is at least the last commit acknowledged
// before it, and the last acknowledged commit is the final offset.
func TestCoordinatorKilled(t *testing.T) {
	e := start(t)
	m := e.join("app", 30_000)
	owner := e.coordinator("app")

	var mu sync.Mutex
	var acked int64 = -1
	// ackedAt is when the last acknowledged commit was sent: a commit the
	// old owner answered just before the kill may arrive just after it.
	var ackedAt time.Time
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for off := int64(1); ; off++ {
			select {
			case <-stop:
				return
			default:
			}
			sent := time.Now()
			code, err := e.commit("app", m, 0, off, 20*time.Second)
			if code == skeinv1.ErrorCode_NONE && err == nil {
				mu.Lock()
				acked, ackedAt = off, sent
				mu.Unlock()
				continue
			}
			if !moved(code) {
				t.Errorf("commit %d: %v %v", off, code, err)
				return
			}
		}
	}()
	// A fetch never sees less than what was acknowledged before it.
	check := func() {
		mu.Lock()
		floor := acked
		mu.Unlock()
		if got := e.committed("app", 0); got < floor {
			t.Errorf("offset went backwards: fetched %d after %d was acknowledged", got, floor)
		}
	}
	time.Sleep(time.Second)
	check()
	mu.Lock()
	before := acked
	mu.Unlock()
	if before < 1 {
		t.Fatal("no commit acknowledged before the kill")
	}
	killedAt := time.Now()
	e.c.Kill(owner)
	t.Logf("killed %s-%d after %d commits", owner.Role, owner.ID, before)

	// Another coordinator takes over and commits go on.
	deadline := time.Now().Add(15 * time.Second)
	for {
		mu.Lock()
		resumed := ackedAt.After(killedAt) && acked > before
		mu.Unlock()
		if resumed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no commit acknowledged within 15 s of the kill")
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	t.Logf("a commit sent %v after the kill was acknowledged", ackedAt.Sub(killedAt).Round(time.Millisecond))
	mu.Unlock()
	if p := e.coordinator("app"); p == owner {
		t.Fatalf("the dead coordinator still owns the group")
	}
	check()
	time.Sleep(500 * time.Millisecond)
	check()
	close(stop)
	<-done
	mu.Lock()
	final := acked
	mu.Unlock()
	if got := e.committed("app", 0); got != final {
		t.Fatalf("final offset %d, last acknowledged %d", got, final)
	}
	t.Logf("%d commits acknowledged, none lost", final)
}

// TestPausedOwnerFenced: an owner paused (SIGSTOP) while its partition
// moves, and whose metadata stays stale when it wakes (its controller
// connections go through a proxy frozen meanwhile), still believes it owns
// the group: its late commit reaches the storage nodes under its old
// producer epoch, is refused there, and it drops the partition. The new
// owner's state stands.
func TestPausedOwnerFenced(t *testing.T) {
	var proxies []*cluster.Proxy
	var old *cluster.Proc
	e := startWith(t, func(c *cluster.Cluster) {
		c.StartGroupCoordinators(1)
		var addrs []string
		for _, a := range c.ControllerAddrs() {
			p := cluster.NewProxy(t, a)
			proxies = append(proxies, p)
			addrs = append(addrs, p.Addr)
		}
		old = c.StartGroupCoordinator("--controllers", strings.Join(addrs, ","))
	})
	// A group the proxied coordinator owns.
	group := ""
	for i := 0; group == ""; i++ {
		g := fmt.Sprint("app-", i)
		if co, err := e.find(g); err == nil && co.GetNodeId() == int32(old.ID) {
			group = g
		}
	}
	m := e.join(group, 30_000)
	if code, err := e.commit(group, m, 1, 10, 10*time.Second); code != skeinv1.ErrorCode_NONE || err != nil {
		t.Fatalf("commit: %v %v", code, err)
	}
	part := metadata.CoordinatorPartition(group, e.cl.Image().PartitionCount(metadata.ConsumerOffsetsTopic))
	before, _ := e.cl.Image().Assignment(groupKind, part)

	for _, p := range proxies {
		p.Freeze()
	}
	e.c.Pause(old)
	resumed := false
	defer func() {
		if !resumed {
			e.c.Resume(old)
		}
	}()
	e.cl.WaitFor("the group's partition moved", 15*time.Second, func(im *metadata.Image) bool {
		a, _ := im.Assignment(groupKind, part)
		return a.GetOwner() != int32(old.ID) && a.GetOwner() >= 0
	})
	if code, err := e.commit(group, m, 1, 20, 15*time.Second); code != skeinv1.ErrorCode_NONE || err != nil {
		t.Fatalf("commit at the new owner: %v %v", code, err)
	}

	e.c.Resume(old)
	resumed = true
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := e.conn(old.GRPCAddr).OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: group, MemberId: m.id, MemberEpoch: m.epoch,
		Offsets: []*groupv1.PartitionOffset{{Topic: "orders", Partition: 1, Offset: 99, LeaderEpoch: -1}}})
	if err != nil || resp.GetPartitions()[0].GetErrorCode() != skeinv1.ErrorCode_NOT_COORDINATOR {
		t.Fatalf("the late commit of the old owner: %v %v, want NOT_COORDINATOR", resp, err)
	}
	if log := e.c.Tail(old, 100); !strings.Contains(log, "a newer owner fenced this one") {
		t.Fatalf("the old owner was not fenced by the storage nodes; its log:\n%s", log)
	}
	for _, p := range proxies {
		p.Thaw()
	}
	if got := e.committed(group, 1); got != 20 {
		t.Fatalf("committed %d, want the new owner's 20", got)
	}

	// And directly: the storage nodes refuse a write under the old owner's
	// producer epoch.
	pid, oldEpoch := before.GetProducerId(), before.GetCoordinatorEpoch()
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, int16(oldEpoch), 1000
	b := record.NewBuilder(opts)
	b.Append(time.Now().UnixMilli(), []byte("zombie"), []byte("write"))
	batch, _, err := b.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, err = e.cl.ProduceOnce(context.Background(), metadata.ConsumerOffsetsTopic, part, batch, -1)
	if errs.Of(err) != errs.InvalidProducerEpoch {
		t.Fatalf("a write under the old owner's producer epoch %d: %v, want INVALID_PRODUCER_EPOCH", oldEpoch, err)
	}
}

// TestOffsetsExpireOnceTheGroupEmpties: with a short --offsets-retention, a
// group whose last member left loses its committed offsets and is deleted;
// a group whose member still subscribes keeps an offset as old.
func TestOffsetsExpireOnceTheGroupEmpties(t *testing.T) {
	e := startWith(t, func(c *cluster.Cluster) {
		c.StartGroupCoordinators(2, "--offsets-retention", "3s", "--offsets-retention-check-interval", "200ms")
	})
	gone, live := e.join("gone", 30_000), e.join("live", 30_000)
	committedAt := time.Now() // no later than the coordinator's commit time
	for _, g := range []struct {
		id string
		m  member
	}{{"gone", gone}, {"live", live}} {
		if code, err := e.commit(g.id, g.m, 2, 17, 10*time.Second); code != skeinv1.ErrorCode_NONE || err != nil {
			t.Fatalf("commit of %s: %v %v", g.id, code, err)
		}
	}
	left := time.Now()
	code, err := e.call("gone", 10*time.Second, func(ctx context.Context, cl groupv1.GroupCoordinatorServiceClient) (skeinv1.ErrorCode, error) {
		resp, err := cl.ConsumerGroupHeartbeat(ctx, &groupv1.ConsumerGroupHeartbeatRequest{GroupId: "gone", MemberId: gone.id, MemberEpoch: -1})
		return resp.GetErrorCode(), err
	})
	if code != skeinv1.ErrorCode_NONE || err != nil {
		t.Fatalf("leave: %v %v", code, err)
	}
	if got := e.committed("gone", 2); got != 17 {
		t.Fatalf("committed %d right after the member left, want 17", got)
	}
	// The live member heartbeats meanwhile (its session is 30 s).
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			e.call("live", 5*time.Second, func(ctx context.Context, cl groupv1.GroupCoordinatorServiceClient) (skeinv1.ErrorCode, error) {
				resp, err := cl.ConsumerGroupHeartbeat(ctx, &groupv1.ConsumerGroupHeartbeatRequest{GroupId: "live", MemberId: live.id, MemberEpoch: live.epoch, OwnedPartitions: live.owned})
				return resp.GetErrorCode(), err
			})
		}
	}()
	for e.committed("gone", 2) != -1 {
		if time.Since(left) > 20*time.Second {
			t.Fatal("the empty group's offset has not expired 20 s after its member left, with a retention of 3 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if took := time.Since(committedAt); took < 3*time.Second {
		t.Fatalf("the offset expired %v after the commit, before the retention of 3 s", took)
	}
	t.Logf("the empty group's offset expired %v after its member left", time.Since(left).Round(100*time.Millisecond))
	desc, err := e.conn(e.coordinator("gone").GRPCAddr).DescribeGroups(context.Background(), &groupv1.DescribeGroupsRequest{GroupIds: []string{"gone", "live"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range desc.GetGroups() {
		if g.GetGroupId() == "gone" && g.GetErrorCode() != skeinv1.ErrorCode_GROUP_ID_NOT_FOUND {
			t.Errorf("the expired group is still described: %v", g)
		}
	}
	if got := e.committed("live", 2); got != 17 {
		t.Fatalf("the subscribed group's offset is %d, want 17", got)
	}
}
