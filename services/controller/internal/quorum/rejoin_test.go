package quorum

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"skein/libs/metadata"
)

func TestCatchUpRules(t *testing.T) {
	type learnt struct{ term, last, commit, snapshot, candidate uint64 }
	for _, tc := range []struct {
		name      string
		learn     []learnt
		candidate [2]uint64 // a candidate's last log index and term
		vote      bool
		at        uint64 // this controller's last index
		done      bool
	}{
		{name: "a new quorum's first election", candidate: [2]uint64{1, 1}, vote: true},
		{name: "a candidate holding entries", candidate: [2]uint64{2, 2}, vote: false},
		{name: "a quorum seen holding entries has had its first election", learn: []learnt{{candidate: 5}},
			candidate: [2]uint64{1, 1}, vote: false},
		{name: "after a leader's append, neither", learn: []learnt{{term: 3, last: 40, commit: 90}}, candidate: [2]uint64{1, 1}, vote: false},
		{name: "a candidate short of the target", learn: []learnt{{term: 3, last: 40, commit: 90}}, candidate: [2]uint64{89, 3}, vote: false},
		{name: "a candidate at the target", learn: []learnt{{term: 3, last: 40, commit: 90}}, candidate: [2]uint64{90, 3}, vote: true},
		{name: "a candidate past the target of an older term", learn: []learnt{{term: 3, last: 40, commit: 90}}, candidate: [2]uint64{95, 2}, vote: false},
		{name: "a candidate of a later term", learn: []learnt{{term: 3, last: 40, commit: 90}}, candidate: [2]uint64{60, 4}, vote: true},
		{name: "no leader heard from: not caught up", at: 100, done: false},
		{name: "short of what the leader committed", learn: []learnt{{term: 3, last: 40, commit: 90}}, at: 89, done: false},
		{name: "at what the leader committed", learn: []learnt{{term: 3, last: 40, commit: 90}}, at: 90, done: true},
		{name: "short of the leader's log sent", learn: []learnt{{term: 3, last: 95, commit: 90}}, at: 94, done: false},
		{name: "a later append of the same term moves nothing", learn: []learnt{{term: 3, last: 40, commit: 90}, {term: 3, last: 200, commit: 200}}, at: 90, done: true},
		{name: "a later leader's append moves the target", learn: []learnt{{term: 3, last: 40, commit: 90}, {term: 4, last: 120, commit: 110}}, at: 100, done: false},
		{name: "a deposed leader's does not", learn: []learnt{{term: 4, last: 40, commit: 90}, {term: 3, last: 200, commit: 200}}, at: 90, done: true},
		{name: "a snapshot alone sets no target", learn: []learnt{{snapshot: 50}}, at: 60, done: false},
		{name: "a snapshot raises a target", learn: []learnt{{term: 3, last: 40, commit: 90}, {snapshot: 150}}, at: 120, done: false},
		{name: "an older snapshot does not lower it", learn: []learnt{{term: 3, last: 40, commit: 90}, {snapshot: 50}}, at: 60, done: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c catchUp
			for _, l := range tc.learn {
				switch {
				case l.snapshot != 0:
					c.snapshot(l.snapshot)
				case l.candidate != 0:
					c.candidate(l.candidate)
				default:
					c.learn(l.term, l.last, l.commit)
				}
			}
			// What a restart reads back from the marker.
			path := filepath.Join(t.TempDir(), rejoinMarker)
			if err := writeMarker(path, c); err != nil {
				t.Fatal(err)
			}
			if back := readMarker(path); back != c {
				t.Fatalf("marker read back as %+v, written %+v", back, c)
			}
			if tc.candidate[0] != 0 {
				if got := c.vote(tc.candidate[0], tc.candidate[1]); got != tc.vote {
					t.Errorf("vote(%v) = %v, want %v", tc.candidate, got, tc.vote)
				}
				return
			}
			if got := c.done(tc.at); got != tc.done {
				t.Errorf("done(%d) = %v, want %v (target %d)", tc.at, got, tc.done, c.target)
			}
		})
	}
}

// A controller whose data directory was lost comes back empty while the one
// controller holding the last commits is down: it must not vote the lagging
// third into the lead, which would overwrite those commits once the third
// returns. No leader is elected until the controller holding them is back,
// and then every controller holds them.
func TestAControllerBackOnAnEmptyDirectoryDoesNotLoseCommits(t *testing.T) {
	dir := t.TempDir()
	peers := testPeers(t, 3)
	nodes, leader := startThree(t, peers, dir)
	propose(t, leader, registerCmd(1), nodes...)
	propose(t, leader, registerCmd(2), nodes...)
	propose(t, leader, createCmd("before"), nodes...)
	waitTopics(t, nodes, "before")

	// The lagging one: down while the others commit.
	var lagging, holder, wiped *Node
	for _, n := range nodes {
		if n != leader && lagging == nil {
			lagging = n
		}
	}
	lagging.Close()
	leader = waitLeader(t, nodes[0], nodes[1], nodes[2])
	var rest []*Node
	for _, n := range nodes {
		if n != lagging {
			rest = append(rest, n)
		}
	}
	propose(t, leader, createCmd("committed-without-the-laggard"), rest...)
	waitTopics(t, rest, "committed-without-the-laggard")
	holder, wiped = rest[0], rest[1]
	holder.Close()
	wiped.Close()
	if err := os.RemoveAll(filepath.Join(dir, fmt.Sprint(wiped.ID()))); err != nil {
		t.Fatal(err)
	}

	back := openNode(t, wiped.ID(), peers, dir)
	defer back.Close()
	if _, err := os.Stat(filepath.Join(dir, fmt.Sprint(wiped.ID()), rejoinMarker)); err != nil {
		t.Fatalf("no catching-up marker on the empty directory: %v", err)
	}
	third := openNode(t, lagging.ID(), peers, dir)
	defer third.Close()
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		for _, n := range []*Node{back, third} {
			if n.IsLeader() {
				t.Fatalf("controller %d (%s) was elected without the controller holding the last commits",
					n.ID(), map[bool]string{true: "the lagging one", false: "the empty one"}[n == third])
			}
		}
	}

	returned := openNode(t, holder.ID(), peers, dir)
	defer returned.Close()
	all := []*Node{back, third, returned}
	waitLeader(t, all...)
	waitTopics(t, all, "before", "committed-without-the-laggard")
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprint(wiped.ID()), rejoinMarker)); os.IsNotExist(err) {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the empty controller caught up but kept its catching-up marker")
		}
	}
	var version int64
	back.Read(func(img *metadata.Image) { version = int64(img.Version()) })
	if version == 0 {
		t.Fatal("the controller back on an empty directory applied nothing")
	}
}

func hasMarker(dir string, n *Node) bool {
	_, err := os.Stat(filepath.Join(dir, fmt.Sprint(n.ID()), rejoinMarker))
	return err == nil
}

// A new quorum's controllers all start on empty directories; once it has a
// leader every one of them, the leader too, is caught up and votes again.
func TestANewQuorumEndsItsCatchUp(t *testing.T) {
	dir := t.TempDir()
	peers := testPeers(t, 3)
	nodes, leader := startThree(t, peers, dir)
	propose(t, leader, registerCmd(1), nodes...)
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var marked []int32
		for _, n := range nodes {
			if hasMarker(dir, n) {
				marked = append(marked, n.ID())
			}
		}
		if len(marked) == 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("controllers %v still catching up 10 s after the quorum elected %d", marked, leader.ID())
		}
	}
}

// A controller that had caught up only part of the way when it stopped
// (its marker still there) does not stand for election either: its own
// vote and a lagging controller's would elect it without what the quorum
// committed after the part it holds.
func TestAControllerPartWayCaughtUpDoesNotStand(t *testing.T) {
	dir := t.TempDir()
	peers := testPeers(t, 3)
	nodes, leader := startThree(t, peers, dir)
	propose(t, leader, registerCmd(1), nodes...)
	propose(t, leader, registerCmd(2), nodes...)
	var lagging, partway *Node
	for _, n := range nodes {
		switch {
		case n == leader:
		case lagging == nil:
			lagging = n
		default:
			partway = n
		}
	}
	lagging.Close()
	leader = waitLeader(t, leader, partway)
	propose(t, leader, createCmd("held-part-way"), leader, partway)
	waitTopics(t, []*Node{leader, partway}, "held-part-way")
	partway.Close()
	pdir := filepath.Join(dir, fmt.Sprint(partway.ID()))
	saved := filepath.Join(t.TempDir(), "saved")
	if err := os.CopyFS(saved, os.DirFS(pdir)); err != nil {
		t.Fatal(err)
	}
	again := openNode(t, partway.ID(), peers, dir)
	leader = waitLeader(t, leader, again)
	propose(t, leader, createCmd("committed-after"), leader, again)
	waitTopics(t, []*Node{leader, again}, "committed-after")
	again.Close()
	leader.Close()
	// What it held part way through a catch-up from an empty directory.
	if err := os.RemoveAll(pdir); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(pdir, os.DirFS(saved)); err != nil {
		t.Fatal(err)
	}
	if err := writeMarker(filepath.Join(pdir, rejoinMarker), catchUp{}); err != nil {
		t.Fatal(err)
	}

	marked := openNode(t, partway.ID(), peers, dir)
	defer marked.Close()
	third := openNode(t, lagging.ID(), peers, dir)
	defer third.Close()
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		for _, n := range []*Node{marked, third} {
			if n.IsLeader() {
				t.Fatalf("controller %d was elected without the controller holding the last commits", n.ID())
			}
		}
	}
	returned := openNode(t, leader.ID(), peers, dir)
	defer returned.Close()
	all := []*Node{marked, third, returned}
	waitLeader(t, all...)
	waitTopics(t, all, "held-part-way", "committed-after")
}
