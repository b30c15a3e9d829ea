//go:build integration

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	skeinv1 "skein/gen/skein/v1"
)

// groupSession is the session timeout of the members here: the coordinator's
// smallest, so a killed member's partitions move within seconds.
const groupSession = 6000

// secondGateway starts one more skein-gateway on the dev cluster's
// controllers, stopped when the test ends: members call the two in turn.
func secondGateway(t *testing.T, d *Dev) skeinv1.GroupServiceClient {
	t.Helper()
	procs, err := d.Processes()
	if err != nil {
		t.Fatal(err)
	}
	var ctrls []string
	for _, p := range procs {
		if p.Role == "controller" {
			ctrls = append(ctrls, p.GRPCAddr)
		}
	}
	grpcAddr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	httpAddr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(d.Dir, "logs", "gateway-second.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "skein-gateway"), "--grpc-addr", grpcAddr, "--http-addr", httpAddr,
		"--controllers", joinComma(ctrls), "--node-id", "99")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
	})
	cc, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	gs := skeinv1.NewGroupServiceClient(cc)
	// Ready once it answers a group call.
	ctx := testCtx(t, 30*time.Second)
	for {
		if _, err := gs.ListGroups(ctx, &skeinv1.ListGroupsRequest{}); err == nil {
			return gs
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the second gateway never answered ListGroups")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func joinComma(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ","
		}
		out += v
	}
	return out
}

// ledger is what every member read and committed, per partition.
type ledger struct {
	mu        sync.Mutex
	read      map[int32][]int64 // offsets, in the order read, over all members
	committed map[int32]int64
}

func newLedger() *ledger {
	return &ledger{read: map[int32][]int64{}, committed: map[int32]int64{}}
}

// groupMember is a member that fetches with positions and commits them after
// every fetch, over the gateways in turn, until stopped or killed.
type groupMember struct {
	t        *testing.T
	name     string
	group    string
	gws      []skeinv1.GroupServiceClient
	ledger   *ledger
	id       string
	epoch    int32
	mu       sync.Mutex
	owned    []int32 // the last assignment answered
	reads    int     // records read
	stop     chan struct{}
	done     chan struct{}
	leave    bool // leave the group when stopped (else vanish, as a killed process)
	errCount int
}

func joinMember(ctx context.Context, t *testing.T, name, group, topic string, gws []skeinv1.GroupServiceClient, l *ledger) *groupMember {
	t.Helper()
	resp, err := gws[0].JoinGroup(ctx, &skeinv1.JoinGroupRequest{Group: group, Topics: []string{topic},
		SessionTimeoutMs: ptr(int32(groupSession)), AutoOffsetReset: "earliest"})
	if err != nil {
		t.Fatalf("%s joins: %v", name, err)
	}
	m := &groupMember{t: t, name: name, group: group, gws: gws, ledger: l, id: resp.GetMemberId(), epoch: resp.GetMemberEpoch(),
		stop: make(chan struct{}), done: make(chan struct{})}
	go m.run(ctx)
	return m
}

func (m *groupMember) run(ctx context.Context) {
	defer close(m.done)
	var positions []*skeinv1.TopicPartitionOffset
	for call := 1; ; call++ {
		select {
		case <-m.stop:
			if m.leave {
				lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				_, _ = m.gws[call%len(m.gws)].LeaveGroup(lctx, &skeinv1.LeaveGroupRequest{Group: m.group, MemberId: m.id})
				cancel()
			}
			return
		case <-ctx.Done():
			return
		default:
		}
		gw := m.gws[call%len(m.gws)]
		resp, err := gw.FetchGroupRecords(ctx, &skeinv1.FetchGroupRecordsRequest{Group: m.group, MemberId: m.id, MemberEpoch: m.epoch,
			MaxRecords: ptr(int32(50)), MaxWaitMs: ptr(int32(300)), Positions: positions})
		if err != nil {
			m.mu.Lock()
			m.errCount++
			m.mu.Unlock()
			if ctx.Err() == nil {
				m.t.Logf("%s fetch: %v", m.name, status.Convert(err).Message())
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		m.epoch, positions = resp.GetMemberEpoch(), resp.GetPositions()
		var owned []int32
		for _, a := range resp.GetAssignment() {
			owned = append(owned, a.GetPartitions()...)
		}
		slices.Sort(owned)
		m.ledger.mu.Lock()
		for _, r := range resp.GetRecords() {
			m.ledger.read[r.GetPartition()] = append(m.ledger.read[r.GetPartition()], r.GetOffset())
		}
		m.ledger.mu.Unlock()
		m.mu.Lock()
		m.owned, m.reads = owned, m.reads+len(resp.GetRecords())
		m.mu.Unlock()
		if len(resp.GetRecords()) == 0 || len(positions) == 0 {
			continue
		}
		if _, err := gw.CommitOffsets(ctx, &skeinv1.CommitOffsetsRequest{Group: m.group, MemberId: m.id, MemberEpoch: m.epoch, Offsets: positions}); err == nil {
			m.ledger.mu.Lock()
			for _, p := range positions {
				m.ledger.committed[p.GetPartition()] = max(m.ledger.committed[p.GetPartition()], p.GetOffset())
			}
			m.ledger.mu.Unlock()
		}
	}
}

func (m *groupMember) assignment() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.owned)
}

func (m *groupMember) readCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reads
}

// kill stops the member without leaving: it stops heartbeating, as a
// SIGKILLed consumer does.
func (m *groupMember) kill() { close(m.stop); <-m.done }

// close leaves the group.
func (m *groupMember) close() { m.leave = true; close(m.stop); <-m.done }

// waitSplit waits until the members' assignments have the given sizes (in
// order), are disjoint, and cover every partition.
func waitSplit(t *testing.T, within time.Duration, partitions int, ms []*groupMember, sizes ...int) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		seen := map[int32]string{}
		ok := true
		var got [][]int32
		for i, m := range ms {
			a := m.assignment()
			got = append(got, a)
			if len(a) != sizes[i] {
				ok = false
			}
			for _, p := range a {
				if other, dup := seen[p]; dup {
					t.Fatalf("partition %d held by %s and %s at once", p, other, m.name)
				}
				seen[p] = m.name
			}
		}
		if ok && len(seen) == partitions {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("assignments %v after %v, want sizes %v", got, within, sizes)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// producer produces to every partition in turn until stopped, and answers
// the high watermark it reached per partition.
func produceUntil(ctx context.Context, t *testing.T, c *REST, topic string, partitions int, stop <-chan struct{}) map[int32]int64 {
	hw := map[int32]int64{}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return hw
		case <-ctx.Done():
			return hw
		default:
		}
		var recs []ProduceRecord
		for p := range partitions {
			recs = append(recs, ProduceRecord{Value: ptr(fmt.Sprintf("r%d", i)), Partition: ptr(int32(p))})
		}
		var pr ProduceResponse
		if err := mustDo(ctx, t, c, 200, "POST", "/v1/topics/"+topic+"/records", ProduceRequest{Records: recs}).Decode(&pr); err != nil {
			t.Error(err)
			return hw
		}
		for _, r := range pr.Results {
			if r.ErrorCode == "NONE" {
				hw[r.Partition] = max(hw[r.Partition], int64(r.Offset)+1)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitConsumed waits until the ledger has read up to hw on every partition.
func waitConsumed(t *testing.T, l *ledger, hw map[int32]int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		l.mu.Lock()
		done := true
		for p, end := range hw {
			offs := l.read[p]
			if len(offs) == 0 || slices.Max(offs) < end-1 {
				done = false
			}
		}
		l.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every record read within %v", within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkLedger: no offset below the end skipped; duplicates only where allowed.
func checkLedger(t *testing.T, l *ledger, hw map[int32]int64, dupsAllowed map[int32]bool) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for p, end := range hw {
		count := map[int64]int{}
		for _, o := range l.read[p] {
			count[o]++
		}
		for o := int64(0); o < end; o++ {
			switch {
			case count[o] == 0:
				t.Errorf("partition %d: offset %d never read", p, o)
			case count[o] > 1 && !dupsAllowed[p]:
				t.Errorf("partition %d: offset %d read %d times", p, o, count[o])
			}
		}
		if c := l.committed[p]; c > end {
			t.Errorf("partition %d: committed %d beyond the end %d", p, c, end)
		}
	}
}

// Six partitions, members over two gateways in turn: 2 members split 3/3; a
// third makes it 2/2/2 while the first two keep reading; the third is killed
// and its partitions move to the others after its session timeout, resuming
// at its committed offsets: nothing skipped.
func TestGroupRebalancesAcrossMembersAndGateways(t *testing.T) {
	d := devCluster(t)
	ctx := testCtx(t, 3*time.Minute)
	c := restClient(d)
	createTopic(ctx, t, c, "grp6", 6, 3, map[string]string{"min.insync.replicas": "2"})
	gws := []skeinv1.GroupServiceClient{skeinv1.NewGroupServiceClient(grpcConn(t, d)), secondGateway(t, d)}
	l := newLedger()
	stopProduce := make(chan struct{})
	hwc := make(chan map[int32]int64, 1)
	go func() { hwc <- produceUntil(ctx, t, c, "grp6", 6, stopProduce) }()

	m1 := joinMember(ctx, t, "m1", "rebalance", "grp6", gws, l)
	m2 := joinMember(ctx, t, "m2", "rebalance", "grp6", []skeinv1.GroupServiceClient{gws[1], gws[0]}, l)
	waitSplit(t, 20*time.Second, 6, []*groupMember{m1, m2}, 3, 3)

	r1, r2 := m1.readCount(), m2.readCount()
	m3 := joinMember(ctx, t, "m3", "rebalance", "grp6", gws, l)
	waitSplit(t, 20*time.Second, 6, []*groupMember{m1, m2, m3}, 2, 2, 2)
	if m1.readCount() == r1 || m2.readCount() == r2 {
		t.Errorf("the first two members stopped reading during the rebalance: %d->%d, %d->%d", r1, m1.readCount(), r2, m2.readCount())
	}
	time.Sleep(time.Second) // m3 reads and commits some
	m3owned := m3.assignment()
	m3.kill()
	killed := time.Now()
	waitSplit(t, groupSession*time.Millisecond+10*time.Second, 6, []*groupMember{m1, m2}, 3, 3)
	t.Logf("a killed member's partitions moved after %v (session timeout %v)", time.Since(killed).Round(time.Millisecond), groupSession*time.Millisecond)

	close(stopProduce)
	hw := <-hwc
	waitConsumed(t, l, hw, 30*time.Second)
	dups := map[int32]bool{}
	for _, p := range m3owned {
		dups[p] = true // read past its last commit before the kill, then again
	}
	checkLedger(t, l, hw, dups)
	m1.close()
	m2.close()
}

// A fourth member of a group on a three-partition topic gets nothing.
func TestGroupMemberBeyondThePartitionsGetsNothing(t *testing.T) {
	d := devCluster(t)
	ctx := testCtx(t, 2*time.Minute)
	c := restClient(d)
	createTopic(ctx, t, c, "grp3", 3, 3, nil)
	gws := []skeinv1.GroupServiceClient{skeinv1.NewGroupServiceClient(grpcConn(t, d))}
	l := newLedger()
	var ms []*groupMember
	for i := range 4 {
		ms = append(ms, joinMember(ctx, t, fmt.Sprintf("m%d", i+1), "four", "grp3", gws, l))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		sizes := map[int]int{}
		for _, m := range ms {
			sizes[len(m.assignment())]++
		}
		if sizes[1] == 3 && sizes[0] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sizes %v, want three members with one partition and one with none", sizes)
		}
		time.Sleep(100 * time.Millisecond)
	}
	d2, err := gws[0].DescribeGroup(ctx, &skeinv1.DescribeGroupRequest{Group: "four"})
	if err != nil || len(d2.GetMembers()) != 4 {
		t.Errorf("describe %v %v", d2, err)
	}
	for _, m := range ms {
		m.close()
	}
}

// Members that leave cleanly hand their partitions over with their commits:
// every record is read exactly once.
func TestGroupCleanHandoffReadsEveryRecordOnce(t *testing.T) {
	d := devCluster(t)
	ctx := testCtx(t, 2*time.Minute)
	c := restClient(d)
	createTopic(ctx, t, c, "grpho", 4, 3, map[string]string{"min.insync.replicas": "2"})
	gws := []skeinv1.GroupServiceClient{skeinv1.NewGroupServiceClient(grpcConn(t, d)), secondGateway(t, d)}
	l := newLedger()
	stopProduce := make(chan struct{})
	hwc := make(chan map[int32]int64, 1)
	go func() { hwc <- produceUntil(ctx, t, c, "grpho", 4, stopProduce) }()

	a := joinMember(ctx, t, "a", "handoff", "grpho", gws, l)
	waitSplit(t, 20*time.Second, 4, []*groupMember{a}, 4)
	b := joinMember(ctx, t, "b", "handoff", "grpho", gws, l)
	waitSplit(t, 20*time.Second, 4, []*groupMember{a, b}, 2, 2)
	a.close()
	waitSplit(t, 20*time.Second, 4, []*groupMember{b}, 4)
	cm := joinMember(ctx, t, "c", "handoff", "grpho", gws, l)
	waitSplit(t, 20*time.Second, 4, []*groupMember{b, cm}, 2, 2)
	close(stopProduce)
	hw := <-hwc
	waitConsumed(t, l, hw, 30*time.Second)
	checkLedger(t, l, hw, nil)
	b.close()
	cm.close()

	// Describe after everyone left: empty, nothing left to read.
	desc, err := gws[1].DescribeGroup(ctx, &skeinv1.DescribeGroupRequest{Group: "handoff"})
	if err != nil {
		t.Fatal(err)
	}
	if desc.GetState() != "EMPTY" || desc.GetTotalLag() != 0 {
		t.Errorf("after every member left: state %s, lag %d", desc.GetState(), desc.GetTotalLag())
	}
}
