package quorum

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	controllerv1 "skein/gen/skein/controller/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/acl"
	"skein/libs/errs"
	"skein/libs/loopback"
	"skein/libs/metadata"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testPeers names n controllers on distinct free loopback Raft ports.
func testPeers(t *testing.T, n int) []Peer {
	addrs := loopback.Addrs(t, n)
	var peers []Peer
	for i, a := range addrs {
		peers = append(peers, Peer{ID: int32(i + 1), RaftAddr: a, GRPCAddr: fmt.Sprintf("127.0.0.1:%d", 1+i)})
	}
	return peers
}

func openNode(t *testing.T, id int32, peers []Peer, dir string) *Node {
	t.Helper()
	return openNodeCommit(t, id, peers, dir, 0)
}

func openNodeCommit(t *testing.T, id int32, peers []Peer, dir string, commit time.Duration) *Node {
	t.Helper()
	n, err := Open(Config{
		NodeID: id, Peers: peers, DataDir: filepath.Join(dir, fmt.Sprint(id)),
		HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond, LeaderLeaseTimeout: 150 * time.Millisecond,
		CommitTimeout: commit, WatchBuffer: 4, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// startThree opens a three-node quorum in dir (closed when the test ends)
// and commits the bootstrap on its leader.
func startThree(t *testing.T, peers []Peer, dir string) ([]*Node, *Node) {
	t.Helper()
	nodes := []*Node{openNode(t, 1, peers, dir), openNode(t, 2, peers, dir), openNode(t, 3, peers, dir)}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.Close()
		}
	})
	leader := waitLeader(t, nodes...)
	propose(t, leader, &controllerv1.Command{Command: &controllerv1.Command_Bootstrap{Bootstrap: &controllerv1.BootstrapCommand{ClusterId: "c"}}}, nodes...)
	return nodes, leader
}

func waitLeader(t *testing.T, nodes ...*Node) *Node {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range nodes {
			if n.IsLeader() {
				return n
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no leader elected")
	return nil
}

// propose commits cmd on n, or on whichever node leads once n lost the
// lead (under load an election can come at any time); a create retried that
// way may find its topic made by the first try.
func propose(t *testing.T, n *Node, cmd *controllerv1.Command, others ...*Node) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	retried := false
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := n.Propose(ctx, cmd)
		cancel()
		if errs.Of(err) == errs.NotController && time.Now().Before(deadline) {
			n, retried = waitLeader(t, append(others, n)...), true
			continue
		}
		if err != nil {
			t.Fatalf("propose %v: %v", cmd, err)
		}
		if r, ok := res.Reply.(*controllerv1.CreateTopicsResponse); ok {
			if c := r.GetTopics()[0].GetErrorCode(); c != 0 && !(retried && c == int32(skeinv1.ErrorCode_TOPIC_ALREADY_EXISTS)) {
				t.Fatalf("create topic: %v", r)
			}
		}
		return
	}
}

func registerCmd(id int32) *controllerv1.Command {
	return &controllerv1.Command{Command: &controllerv1.Command_RegisterBroker{RegisterBroker: &controllerv1.RegisterBrokerRequest{
		BrokerId: id, GrpcAddr: "127.0.0.1:1", IncarnationId: "i"}}}
}

func createCmd(name string) *controllerv1.Command {
	return &controllerv1.Command{Command: &controllerv1.Command_CreateTopics{CreateTopics: &controllerv1.CreateTopicsRequest{
		Topics: []*controllerv1.CreatableTopic{{Name: name, Partitions: 3, ReplicationFactor: 2}}}}}
}

// waitTopics polls until every node's image holds the topics.
func waitTopics(t *testing.T, nodes []*Node, names ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range nodes {
		for {
			missing := ""
			n.Read(func(img *metadata.Image) {
				for _, name := range names {
					if img.PartitionCount(name) != 3 {
						missing = name
					}
				}
			})
			if missing == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d lacks topic %s", n.ID(), missing)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// With a commit timeout of an hour, the followers still apply a proposal
// at once: Propose tells them of the commit rather than leaving it to the
// next timeout.
func TestFollowersLearnOfAProposalsCommitAtOnce(t *testing.T) {
	dir := t.TempDir()
	peers := testPeers(t, 3)
	var nodes []*Node
	for _, p := range peers {
		n := openNodeCommit(t, p.ID, peers, dir, time.Hour)
		defer n.Close()
		nodes = append(nodes, n)
	}
	leader := waitLeader(t, nodes...)
	propose(t, leader, registerCmd(1), nodes...)
	propose(t, leader, registerCmd(2), nodes...)
	for i := range 3 {
		name := fmt.Sprintf("announced-%d", i)
		propose(t, leader, createCmd(name), nodes...)
		start := time.Now()
		waitTopics(t, nodes, name) // fails after 10 s
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("the followers applied %s after %v", name, took)
		}
	}
}

// Three voters over real TCP: the leader dies, another is elected and takes
// writes with the earlier metadata intact; then all three restart from their
// data directories (snapshot + log) and recover everything.
func TestThreeControllersFailoverAndRestart(t *testing.T) {
	dir := t.TempDir()
	peers := testPeers(t, 3)
	nodes, leader := startThree(t, peers, dir)
	defer func() {
		for _, n := range nodes {
			n.Close()
		}
	}()
	for id := int32(1); id <= 3; id++ {
		propose(t, leader, registerCmd(id), nodes...)
	}
	propose(t, leader, createCmd("before"), nodes...)
	leader = waitLeader(t, nodes...)
	waitTopics(t, nodes, "before")

	// A follower refuses to propose.
	for _, n := range nodes {
		if n != leader {
			if _, err := n.Propose(context.Background(), createCmd("x")); errs.Of(err) != errs.NotController {
				t.Errorf("follower %d proposed: %v", n.ID(), err)
			}
			if p, ok := n.Leader(); !ok || p.ID != leader.ID() {
				t.Errorf("follower %d thinks the leader is %v %v", n.ID(), p, ok)
			}
		}
	}
	// One follower snapshots, so its restart replays snapshot + log.
	for _, n := range nodes {
		if n != leader {
			if err := n.Snapshot(); err != nil {
				t.Fatal(err)
			}
			break
		}
	}

	killed := time.Now()
	leader.Close()
	var rest []*Node
	for _, n := range nodes {
		if n != leader {
			rest = append(rest, n)
		}
	}
	next := waitLeader(t, rest...)
	t.Logf("controller failover: new leader %d after %v", next.ID(), time.Since(killed))
	propose(t, next, createCmd("after"), rest...)
	waitTopics(t, rest, "before", "after")

	for _, n := range nodes {
		n.Close()
	}
	nodes = []*Node{openNode(t, 1, peers, dir), openNode(t, 2, peers, dir), openNode(t, 3, peers, dir)}
	leader = waitLeader(t, nodes...)
	propose(t, leader, createCmd("restarted"), nodes...)
	waitTopics(t, nodes, "before", "after", "restarted")
	var brokers int
	nodes[0].Read(func(img *metadata.Image) { brokers = len(img.Brokers()) })
	if brokers != 3 {
		t.Errorf("brokers after restart: %d", brokers)
	}
}

// A watcher gets the image, then deltas; falling behind gets it a resync; a
// reconnect with a recent version gets deltas only.
func TestWatch(t *testing.T) {
	peers := testPeers(t, 1)
	n := openNode(t, 1, peers, t.TempDir())
	defer n.Close()
	waitLeader(t, n)
	propose(t, n, registerCmd(1))
	propose(t, n, registerCmd(2))

	sub, img := n.Subscribe(0)
	defer sub.Close()
	if img == nil || len(img.GetBrokers()) != 2 {
		t.Fatalf("first image %v", img)
	}
	propose(t, n, createCmd("a"))
	d := <-sub.Deltas()
	if d.GetVersion() <= img.GetVersion() || len(d.GetRecords()) != 4 {
		t.Fatalf("delta %v after image %d", d, img.GetVersion())
	}
	// A reconnect at the image's version gets the delta, not an image.
	sub2, img2 := n.Subscribe(img.GetVersion())
	defer sub2.Close()
	if img2 != nil {
		t.Fatal("a recent version got an image")
	}
	if d2 := <-sub2.Deltas(); d2.GetVersion() != d.GetVersion() {
		t.Fatalf("replayed delta %d, want %d", d2.GetVersion(), d.GetVersion())
	}
	// A version from the future (another cluster's) gets an image.
	if _, img3 := n.Subscribe(1 << 40); img3 == nil {
		t.Fatal("a future version got no image")
	}

	// The buffer holds 4: six changes unread make the watcher lag.
	for i := range 6 {
		propose(t, n, createCmd(fmt.Sprint("t", i)))
	}
	select {
	case <-sub.Resync():
	case <-time.After(5 * time.Second):
		t.Fatal("no resync after overflow")
	}
	fresh := sub.Image()
	if len(fresh.GetTopics()) != 7 {
		t.Fatalf("resync image holds %d topics", len(fresh.GetTopics()))
	}
	propose(t, n, createCmd("last"))
	if d := <-sub.Deltas(); d.GetVersion() <= fresh.GetVersion() {
		t.Fatalf("delta %d not after the resync image %d", d.GetVersion(), fresh.GetVersion())
	}
}

func TestParsePeers(t *testing.T) {
	p, err := ParsePeers("2=127.0.0.1:2=127.0.0.1:12, 1=127.0.0.1:1=127.0.0.1:11")
	if err != nil || len(p) != 2 || p[0].ID != 1 || p[1].GRPCAddr != "127.0.0.1:12" {
		t.Fatalf("%v %v", p, err)
	}
	if FormatPeers(p) != "1=127.0.0.1:1=127.0.0.1:11,2=127.0.0.1:2=127.0.0.1:12" {
		t.Error(FormatPeers(p))
	}
	for _, bad := range []string{"", "1=a", "x=a=b", "1=a=b,1=c=d", "1==b"} {
		if _, err := ParsePeers(bad); err == nil {
			t.Errorf("ParsePeers(%q) accepted", bad)
		}
	}
}

// Image is a copy later commands leave alone, made once per version.
func TestImageIsAFrozenCopy(t *testing.T) {
	n := openNode(t, 1, testPeers(t, 1), t.TempDir())
	defer n.Close()
	waitLeader(t, n)
	grant := func(principal string) *controllerv1.Command {
		return &controllerv1.Command{Command: &controllerv1.Command_CreateAcls{CreateAcls: &controllerv1.CreateAclsRequest{Acls: []*controllerv1.AclRecord{
			metadata.AclOf(acl.Binding{Principal: principal, Resource: acl.Topic, Name: "t", Pattern: acl.Literal, Operation: acl.Read, Permission: acl.Allow}),
		}}}}
	}
	propose(t, n, grant("User:a"))
	first := n.Image()
	if again := n.Image(); again != first {
		t.Error("a second Image at the same version made another copy")
	}
	propose(t, n, grant("User:b"))
	if got := len(first.Acls()); got != 1 {
		t.Errorf("the first copy changed: %d ACLs", got)
	}
	second := n.Image()
	if second == first || len(second.Acls()) != 2 || second.Version() <= first.Version() {
		t.Errorf("after a change: same copy %v, %d ACLs, version %d after %d", second == first, len(second.Acls()), second.Version(), first.Version())
	}
}

// After a restart Raft counts entries as applied once they are queued for
// the state machine, before it runs them: a node must not call itself
// caught up (and serve its image to watchers) until the machine has run
// them.
func TestCaughtUpWaitsForTheStateMachine(t *testing.T) {
	dir := t.TempDir()
	peers := testPeers(t, 3)
	nodes, leader := startThree(t, peers, dir)
	for id := int32(1); id <= 3; id++ {
		propose(t, leader, registerCmd(id), nodes...)
	}
	names := []string{"t1", "t2", "t3", "t4"}
	for _, name := range names {
		propose(t, leader, createCmd(name), nodes...)
	}
	waitTopics(t, nodes, names...)
	for _, n := range nodes {
		n.Close()
	}

	release := make(chan struct{})
	slow, err := Open(Config{
		NodeID: 3, Peers: peers, DataDir: filepath.Join(dir, "3"),
		HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond, LeaderLeaseTimeout: 150 * time.Millisecond,
		WatchBuffer: 4, Logger: quiet,
		beforeApply: func(uint64) { <-release },
	})
	if err != nil {
		t.Fatal(err)
	}
	nodes = []*Node{openNode(t, 1, peers, dir), openNode(t, 2, peers, dir), slow}
	defer func() {
		for _, n := range nodes {
			n.Close()
		}
	}()
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	waitLeader(t, nodes...)
	deadline := time.Now().Add(10 * time.Second)
	for slow.AppliedIndex() < slow.startIndex || slow.AppliedIndex() < slow.CommitIndex() {
		if time.Now().After(deadline) {
			t.Fatalf("node 3 never queued its log: applied %d, start %d", slow.AppliedIndex(), slow.startIndex)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var version metadata.Version
	slow.Read(func(img *metadata.Image) { version = img.Version() })
	if slow.CaughtUp() || slow.Settled() {
		t.Fatalf("node 3 says it is caught up with its state machine held (image version %d, raft applied %d)", version, slow.AppliedIndex())
	}
	close(release)
	released = true
	for !slow.CaughtUp() {
		if time.Now().After(deadline) {
			t.Fatal("node 3 never caught up after its state machine was released")
		}
		time.Sleep(10 * time.Millisecond)
	}
	missing := ""
	slow.Read(func(img *metadata.Image) {
		for _, name := range names {
			if img.PartitionCount(name) != 3 {
				missing = name
			}
		}
	})
	if missing != "" {
		t.Fatalf("node 3 is caught up without topic %s", missing)
	}
}

// An entry the state machine cannot read is refused, and still counts as
// taken: a node whose last entry is one is caught up all the same.
func TestCaughtUpPastAnEntryThatIsNotACommand(t *testing.T) {
	dir := t.TempDir()
	peers := testPeers(t, 3)
	nodes, leader := startThree(t, peers, dir)
	f := leader.raft.Apply([]byte{0xff, 0xff, 0xff}, 5*time.Second)
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	if r, ok := f.Response().(applyResult); !ok || errs.Of(r.err) != errs.InvalidRequest {
		t.Fatalf("a garbage entry answered %v", f.Response())
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range nodes {
		for !n.CaughtUp() || n.AppliedIndex() < f.Index() {
			if time.Now().After(deadline) {
				t.Fatalf("node %d is not caught up past the garbage entry %d (applied %d)", n.ID(), f.Index(), n.AppliedIndex())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
