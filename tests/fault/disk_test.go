//go:build integration

package fault

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"skein/libs/history"
	"skein/libs/record"
)

// rejoinBound is how long a restarted storage node may take to recover its
// logs, catch up with the leader and be back in the ISR.
const rejoinBound = 30 * time.Second

// A follower is SIGKILLed under acks=all writes and, while it is down, its
// partition's active segment is damaged as a crash and a bad disk would:
// the last batch is torn in the middle (a write cut short) and one byte of
// the batch before it is flipped (bit rot: its CRC no longer matches). On
// restart the node's log recovery cuts the log at the corrupt batch — the
// LEO it reports is that batch's base offset, none of the damaged bytes
// survive — it fetches the rest from the leader again and rejoins the ISR
// within rejoinBound, with a log byte for byte the leader's. Then the
// partition's leaders are SIGKILLed in turn until it is elected (it is
// not the preferred replica), and the whole partition is read from it: the
// audit finds no acknowledged record lost, none twice, no offset with two
// records.
func TestDamagedSegmentIsRecovered(t *testing.T) {
	d := newDiskTest(t, "disk")
	p := d.c.describe(d.topic)[0]
	victim := otherThan(p.ISR, p.Leader)[0]
	t.Logf("leader storage-%d, isr %v: damaging follower storage-%d", p.Leader, p.ISR, victim)

	d.produceFor(3*time.Second, 100)
	n := d.kill(victim)
	killedAt := time.Now()
	dmg := damageActiveSegment(t, d.partitionDir(n))
	t.Logf("storage-%d SIGKILLed after %d acknowledgements; %s", victim, d.h.AckCount(0), dmg)
	d.c.eventually(15*time.Second, fmt.Sprintf("storage-%d out of the ISR", victim), func() error {
		if p := d.c.describe(d.topic); len(p) != 1 || slices.Contains(p[0].ISR, victim) {
			return fmt.Errorf("%+v", p)
		}
		return nil
	})
	t.Logf("storage-%d out of the ISR %v after the kill", victim, time.Since(killedAt).Round(time.Millisecond))

	d.rejoinThenLead(n, dmg)
}

// The same damage on the leader. Under acks=all writes it is given a tail
// its followers do not have (both are paused for 300 ms while acks=1
// writes go on), then SIGKILLed; another ISR member is elected, and the
// old leader's active segment is torn and bit-flipped while it is down. On
// restart it cuts the damaged tail, then, as a follower of the new leader,
// truncates the rest of its old epoch's tail, which the new leader does
// not have, catches up and rejoins the ISR within rejoinBound with the new
// leader's log byte for byte. A preferred election makes it leader again
// and the whole partition is read from it: nothing acknowledged is lost,
// duplicated or shares an offset.
func TestDamagedSegmentOfOldLeaderIsTruncatedToNewLeader(t *testing.T) {
	d := newDiskTest(t, "disk-leader")
	p := d.c.describe(d.topic)[0]
	victim := p.Leader
	t.Logf("leader storage-%d, isr %v: damaging the leader", p.Leader, p.ISR)
	d.produceFor(3*time.Second, 100)
	before := d.h.AckCount(0)

	// Give the leader a tail its followers do not have: pause both for
	// pauseFor — well below gossip's suspicion timeout, so neither is
	// declared dead — while acks=1 writes go on (acks=1 promises nothing
	// once the leader is lost: they are recorded as unknown), and kill the
	// leader before they resume.
	const pauseFor = 300 * time.Millisecond
	n := d.node(victim)
	var paused []int
	for _, f := range otherThan(p.ISR, victim) {
		pid := d.c.storagePID(f)
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		paused = append(paused, pid)
	}
	pausedAt := time.Now()
	lone := 0
	for i := 0; time.Since(pausedAt) < pauseFor; i++ {
		v := fmt.Sprintf("lone-%d", i)
		var resp struct {
			Results []struct {
				ErrorCode string `json:"error_code"`
			} `json:"results"`
		}
		ctx, cancel := context.WithTimeout(context.Background(), pauseFor)
		start := time.Now()
		err := d.c.do(ctx, "POST", "/v1/topics/"+d.topic+"/records", map[string]any{"acks": 1, "records": []map[string]any{{"value": v, "partition": 0}}}, &resp)
		cancel()
		d.h.Failed("lone", 0, v, history.Unknown, "acks=1", start, time.Now())
		if err == nil && len(resp.Results) == 1 && resp.Results[0].ErrorCode == "NONE" {
			lone++
		}
	}
	if err := syscall.Kill(n.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, pid := range paused {
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	killedAt := time.Now()
	d.waitGone(n)
	dmg := damageActiveSegment(t, d.partitionDir(n))
	t.Logf("followers paused for %v, %d acks=1 writes answered meanwhile; storage-%d SIGKILLed after %d acks=all acknowledgements; %s",
		killedAt.Sub(pausedAt).Round(time.Millisecond), lone, victim, before, dmg)
	d.c.eventually(15*time.Second, "a new leader", func() error {
		if p := d.c.describe(d.topic); len(p) != 1 || p[0].Leader < 0 || p[0].Leader == victim || slices.Contains(p[0].ISR, victim) {
			return fmt.Errorf("%+v", p)
		}
		return nil
	})
	elected := time.Since(killedAt)
	d.c.eventually(15*time.Second, "acknowledgements from the new leader", func() error {
		if n := d.h.AckCount(0); n < before+20 {
			return fmt.Errorf("%d since the kill", n-before)
		}
		return nil
	})
	t.Logf("new leader storage-%d elected %v after the kill; writes acknowledged again %v after it",
		d.c.describe(d.topic)[0].Leader, elected.Round(time.Millisecond), time.Since(killedAt).Round(time.Millisecond))

	d.restartAndRejoin(n, dmg)
	d.produceFor(2*time.Second, 0)
	d.stopClients()
	k, from := divergence(dmg.kept, d.sameLogAsLeader(n))
	t.Logf("of the %d batches storage-%d's recovery kept, %d (offsets %d to %d) were not the new leader's: it truncated them when it followed it",
		dmg.batches-2, victim, k, from, dmg.cutAt-1)
	if k == 0 {
		t.Errorf("storage-%d's recovered log held nothing the new leader lacked (%d acks=1 writes answered while the followers were paused): the test did not set up a diverging tail", victim, lone)
	}
	// The cut is told to the operator, with where the log ended and where
	// it ends now.
	if b, err := os.ReadFile(n.logPath); err != nil || !bytes.Contains(b, []byte(`"msg":"truncated the log where it diverged from the leader's"`)) {
		t.Errorf("storage-%d's log does not tell its truncation (%v)", victim, err)
	}

	d.leadFrom(victim)
	d.audit(victim)
}

// A topic that fsyncs every append (flush.messages=1) keeps its active
// segment zero-filled ahead of the appends. A follower is SIGKILLed under
// acks=all writes, so its segment file ends in those zeros. On restart its
// recovery ends the log at the last batch on disk — every batch stays, the
// zeros go — and it rejoins the ISR within rejoinBound with the leader's
// log byte for byte. Then the leaders are SIGKILLed in turn until it
// leads, and the whole partition is read from it: nothing acknowledged is
// lost, duplicated or shares an offset.
func TestZeroFilledSegmentRecoversAfterKill(t *testing.T) {
	d := newDiskTest(t, "disk-fsync", map[string]string{"flush.messages": "1"})
	p := d.c.describe(d.topic)[0]
	victim := otherThan(p.ISR, p.Leader)[0]
	d.produceFor(3*time.Second, 100)
	n := d.kill(victim)
	dir := d.partitionDir(n)
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no segment in %s (%v)", dir, err)
	}
	slices.Sort(logs)
	raw, err := os.ReadFile(logs[len(logs)-1])
	if err != nil {
		t.Fatal(err)
	}
	batches, at, rest := splitBatches(raw)
	if len(batches) == 0 || rest == 0 || len(withoutZeroTail(raw)) != len(raw)-rest {
		t.Fatalf("%s: %d bytes, %d whole batches, then %d bytes: want batches followed by zeros only", logs[len(logs)-1], len(raw), len(batches), rest)
	}
	last := batches[len(batches)-1]
	g := damage{file: logs[len(logs)-1], size: int64(len(raw)), batches: len(batches), leo: int64(last.NextOffset()),
		cutAt: int64(last.NextOffset()), kept: slices.Clone(raw[:at[len(at)-1]+int64(len(last))])}
	t.Logf("storage-%d SIGKILLed after %d acknowledgements: its active segment holds %d batches (LEO %d), then %d zero bytes",
		victim, d.h.AckCount(0), g.batches, g.leo, rest)

	d.rejoinThenLead(n, g)
}

// rejoinThenLead restarts a killed follower and waits until it is back in
// the ISR, lets the writes go on, checks that its log is the leader's byte
// for byte with nothing of its own kept, then makes it lead and audits the
// partition as read from it.
func (d *diskTest) rejoinThenLead(n *storageNode, dmg damage) {
	d.t.Helper()
	d.restartAndRejoin(n, dmg)
	d.produceFor(2*time.Second, 0)
	d.stopClients()
	if k, from := divergence(dmg.kept, d.sameLogAsLeader(n)); k != 0 {
		d.t.Errorf("storage-%d, a follower, kept %d batches from offset %d that the leader does not have", n.id, k, from)
	}
	d.leadFrom(n.id)
	d.audit(n.id)
}

// diskTest is one cluster with one RF=3, min.insync.replicas=2 topic of one
// partition, an acks=all REST producer and a tailing consumer.
type diskTest struct {
	t     *testing.T
	c     *devCluster
	topic string
	h     *history.Recorder
	stop  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
	nodes map[int32]*storageNode // nodes this test killed
}

func newDiskTest(t *testing.T, topic string, configs ...map[string]string) *diskTest {
	d := &diskTest{t: t, c: startDev(t), topic: topic, h: history.NewRecorder(), stop: make(chan struct{}), nodes: map[int32]*storageNode{}}
	d.c.createTopic(topic, 1, 3, 2, configs...)
	d.wg.Add(2)
	go d.c.restProducer(d.h, topic, []int32{0}, "rest", d.stop, &d.wg)
	go d.c.tail(d.h, topic, 0, d.stop, &d.wg)
	// On a failure the clients are told to stop, not waited for.
	t.Cleanup(func() { d.once.Do(func() { close(d.stop) }) })
	return d
}

// produceFor lets the clients run for at least d and until at least n more
// records are acknowledged (bounded at 20 s).
func (d *diskTest) produceFor(dur time.Duration, n int) {
	d.t.Helper()
	from := d.h.AckCount(0)
	time.Sleep(dur)
	d.c.eventually(20*time.Second, "acknowledgements", func() error {
		if got := d.h.AckCount(0) - from; got < n {
			return fmt.Errorf("%d of %d", got, n)
		}
		return nil
	})
}

func (d *diskTest) stopClients() {
	d.once.Do(func() { close(d.stop) })
	d.wg.Wait()
}

// storageNode is a storage node this test killed, with what it takes to
// start it again as skein dev started it.
type storageNode struct {
	id      int32
	pid     int
	args    []string // its command line, binary first
	env     []string // its environment (skein dev's GOMAXPROCS and GODEBUG among it)
	dataDir string
	logPath string
	cmd     *exec.Cmd // the restarted process; nil while it is down
	exited  chan struct{}
}

// node answers storage node id as this test knows it: for a node it has
// not killed yet, its pid, data directory, log and command line from
// cluster.json and /proc.
func (d *diskTest) node(id int32) *storageNode {
	d.t.Helper()
	if n := d.nodes[id]; n != nil {
		if n.cmd != nil {
			n.pid = n.cmd.Process.Pid
		}
		return n
	}
	n := &storageNode{id: id}
	for _, p := range d.c.processes() {
		if p.Role == "storage" && int32(p.ID) == id {
			n.pid, n.dataDir, n.logPath = p.PID, p.DataDir, p.Log
		}
	}
	if n.pid == 0 {
		d.t.Fatalf("no storage node %d in cluster.json", id)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", n.pid))
	if err != nil {
		d.t.Fatal(err)
	}
	n.args = strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	if raw, err = os.ReadFile(fmt.Sprintf("/proc/%d/environ", n.pid)); err != nil {
		d.t.Fatal(err)
	}
	n.env = strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	d.nodes[id] = n
	return n
}

// kill SIGKILLs storage node id and waits until it is gone; it answers the
// node, ready for restart.
func (d *diskTest) kill(id int32) *storageNode {
	d.t.Helper()
	n := d.node(id)
	if err := syscall.Kill(n.pid, syscall.SIGKILL); err != nil {
		d.t.Fatalf("SIGKILL storage-%d (pid %d): %v", id, n.pid, err)
	}
	d.waitGone(n)
	return n
}

// waitGone waits until a SIGKILLed node's process is gone.
func (d *diskTest) waitGone(n *storageNode) {
	d.t.Helper()
	if n.cmd != nil {
		select {
		case <-n.exited:
		case <-time.After(10 * time.Second):
			d.t.Fatalf("storage-%d (pid %d) still running 10 s after SIGKILL", n.id, n.pid)
		}
		n.cmd = nil
		return
	}
	// skein dev reaps its children; a zombie has closed its files and
	// sockets already.
	d.c.eventually(10*time.Second, fmt.Sprintf("storage-%d (pid %d) gone", n.id, n.pid), func() error {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.pid))
		if err != nil {
			return nil
		}
		if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return nil
		}
		return errors.New("still running")
	})
}

// restart starts a killed node again with its command line, its data
// directory and its addresses, appending to its log file; the test stops
// it when it ends. It answers where the node's log stood before the start.
func (d *diskTest) restart(n *storageNode) int64 {
	d.t.Helper()
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		d.t.Fatal(err)
	}
	defer logf.Close()
	fi, err := logf.Stat()
	if err != nil {
		d.t.Fatal(err)
	}
	cmd := exec.Command(n.args[0], n.args[1:]...)
	cmd.Env = n.env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		d.t.Fatalf("restarting storage-%d: %v", n.id, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	n.cmd, n.exited = cmd, exited
	d.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	return fi.Size()
}

// partitionDir is the node's directory of the test's partition.
func (d *diskTest) partitionDir(n *storageNode) string {
	d.t.Helper()
	dirs, err := filepath.Glob(filepath.Join(n.dataDir, "logs", d.topic+"-0-*"))
	if err != nil || len(dirs) != 1 {
		d.t.Fatalf("storage-%d: partition directories %v (%v)", n.id, dirs, err)
	}
	return dirs[0]
}

// restartAndRejoin restarts a damaged node and checks that its recovery
// cut the log at the corrupt batch and that it is back in the ISR within
// rejoinBound.
func (d *diskTest) restartAndRejoin(n *storageNode, dmg damage) {
	d.t.Helper()
	from := d.restart(n)
	startedAt := time.Now()
	hosted := d.waitHosting(n, from, 20*time.Second)
	d.t.Logf("storage-%d restarted: registered %v after the start, its log of %s recovered and hosted %v after that (%v after the start): LEO %d (was %d on disk; recovery must end it at %d), checkpointed HW %d",
		n.id, hosted.registered.Sub(startedAt).Round(time.Millisecond), d.topic, hosted.at.Sub(hosted.registered).Round(time.Millisecond),
		hosted.at.Sub(startedAt).Round(time.Millisecond), hosted.leo, dmg.leo, dmg.cutAt, hosted.hw)
	if hosted.leo != dmg.cutAt {
		d.t.Errorf("storage-%d recovered its log to LEO %d; the first corrupt batch starts at %d", n.id, hosted.leo, dmg.cutAt)
	}
	d.c.eventually(rejoinBound, fmt.Sprintf("storage-%d back in the ISR", n.id), func() error {
		select {
		case <-n.exited:
			d.t.Fatalf("storage-%d exited after its restart", n.id)
		default:
		}
		if p := d.c.describe(d.topic); len(p) != 1 || !slices.Contains(p[0].ISR, n.id) {
			return fmt.Errorf("%+v", p)
		}
		return nil
	})
	d.t.Logf("storage-%d back in the ISR %v after its restart (bound %v)", n.id, time.Since(startedAt).Round(time.Millisecond), rejoinBound)
}

type hostedLine struct {
	registered, at time.Time
	leo, hw        int64
}

// waitHosting waits for the node's log lines, after offset from, saying it
// registered and hosts the test's partition again.
func (d *diskTest) waitHosting(n *storageNode, from int64, bound time.Duration) hostedLine {
	d.t.Helper()
	var h hostedLine
	d.c.eventually(bound, fmt.Sprintf("storage-%d hosting %s-0 again", n.id, d.topic), func() error {
		select {
		case <-n.exited:
			d.t.Fatalf("storage-%d exited after its restart", n.id)
		default:
		}
		f, err := os.Open(n.logPath)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.Seek(from, io.SeekStart); err != nil {
			return err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var l struct {
				Time      time.Time `json:"time"`
				Msg       string    `json:"msg"`
				Partition struct {
					Topic     string
					Partition int32
				} `json:"partition"`
				LEO int64 `json:"leo"`
				HW  int64 `json:"hw"`
			}
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			switch {
			case l.Msg == "registered with the controller":
				h.registered = l.Time
			case l.Msg == "hosting replica" && l.Partition.Topic == d.topic && l.Partition.Partition == 0:
				h.at, h.leo, h.hw = l.Time, l.LEO, l.HW
				return nil
			}
		}
		return errors.New("no such line yet")
	})
	return h
}

// sameLogAsLeader waits (up to 10 s) until the node's segment files hold
// exactly the leader's bytes: the damaged tail is gone and what it fetched
// again is what the leader has. It answers those bytes. Once the node is
// back in the ISR the controller's preferred-leader check may hand it its
// leadership again (it is the partition's first replica); its bytes are
// then compared with another ISR member's, which hold the same log.
func (d *diskTest) sameLogAsLeader(n *storageNode) []byte {
	d.t.Helper()
	p := d.c.describe(d.topic)
	if len(p) != 1 || p[0].Leader < 0 {
		d.t.Fatalf("no leader: %+v", p)
	}
	ref := p[0].Leader
	if ref == n.id {
		ref = -1
		for _, id := range p[0].ISR {
			if id != n.id {
				ref = id
				break
			}
		}
		if ref < 0 {
			d.t.Fatalf("storage-%d leads again and no other replica is in sync: %+v", n.id, p)
		}
		d.t.Logf("storage-%d leads again (the preferred-leader check); its log is compared with in-sync storage-%d's", n.id, ref)
	}
	var leader *storageNode
	for _, q := range d.c.processes() {
		if q.Role == "storage" && int32(q.ID) == ref {
			leader = &storageNode{id: ref, dataDir: q.DataDir}
		}
	}
	if leader == nil {
		d.t.Fatalf("no storage node %d in cluster.json", ref)
	}
	var mine, theirs []byte
	d.c.eventually(10*time.Second, fmt.Sprintf("storage-%d's log equal to leader storage-%d's", n.id, leader.id), func() error {
		mine, theirs = segmentBytes(d.t, d.partitionDir(n)), segmentBytes(d.t, d.partitionDir(leader))
		if !bytes.Equal(mine, theirs) {
			i := 0
			for i < min(len(mine), len(theirs)) && mine[i] == theirs[i] {
				i++
			}
			return fmt.Errorf("%d and %d bytes, first difference at byte %d", len(mine), len(theirs), i)
		}
		return nil
	})
	batches, _, torn := splitBatches(mine)
	for _, b := range batches {
		if err := b.Verify(); err != nil {
			d.t.Errorf("storage-%d: batch at offset %d: %v", n.id, b.BaseOffset(), err)
		}
	}
	if torn != 0 {
		d.t.Errorf("storage-%d: %d torn bytes at the end of its log", n.id, torn)
	}
	d.t.Logf("storage-%d's log is leader storage-%d's byte for byte: %d bytes, %d batches, every CRC good", n.id, leader.id, len(mine), len(batches))
	return mine
}

// divergence compares what recovery kept of a node's log with the log it
// ended with: it answers how many of the kept batches are not in the final
// log at their place (they were truncated when the node followed the new
// leader) and the base offset of the first of them.
func divergence(kept, final []byte) (int, int64) {
	batches, at, _ := splitBatches(kept)
	for i, b := range batches {
		end := at[i] + int64(len(b))
		if end > int64(len(final)) || !bytes.Equal(b, final[at[i]:end]) {
			return len(batches) - i, int64(b.BaseOffset())
		}
	}
	return 0, -1
}

// leadFrom makes storage node id the partition's leader: a preferred
// election when it is the preferred replica, else the current leader is
// SIGKILLed, in turn, until it is elected.
func (d *diskTest) leadFrom(id int32) {
	d.t.Helper()
	start := time.Now()
	for round := 0; ; round++ {
		var desc struct {
			Partitions []struct {
				Leader   int32   `json:"leader"`
				Replicas []int32 `json:"replicas"`
				ISR      []int32 `json:"isr"`
			} `json:"partitions"`
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := d.c.do(ctx, "GET", "/v1/topics/"+d.topic, nil, &desc)
		cancel()
		if err != nil || len(desc.Partitions) != 1 {
			d.t.Fatalf("describe %s: %v %+v", d.topic, err, desc)
		}
		p := desc.Partitions[0]
		if p.Leader == id {
			d.t.Logf("storage-%d leads (isr %v) %v after the first step", id, p.ISR, time.Since(start).Round(time.Millisecond))
			return
		}
		if round == 3 {
			d.t.Fatalf("storage-%d does not lead after %d rounds: leader %d, isr %v", id, round, p.Leader, p.ISR)
		}
		if len(p.Replicas) > 0 && p.Replicas[0] == id {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			var res struct {
				Results []struct {
					Leader    int32  `json:"leader"`
					ErrorCode string `json:"error_code"`
				} `json:"results"`
			}
			err := d.c.do(ctx, "POST", "/v1/leaders:elect", map[string]any{"topic": d.topic, "type": "PREFERRED"}, &res)
			cancel()
			d.t.Logf("preferred election for storage-%d: %+v %v", id, res.Results, err)
		} else {
			old := p.Leader
			d.kill(old)
			d.t.Logf("SIGKILL leader storage-%d (isr %v)", old, p.ISR)
		}
		d.c.eventually(15*time.Second, "a leader change", func() error {
			if q := d.c.describe(d.topic); len(q) != 1 || q[0].Leader == p.Leader || q[0].Leader < 0 {
				return fmt.Errorf("%+v", q)
			}
			return nil
		})
	}
}

// audit reads the whole partition from node id, its leader, and checks it
// against everything the clients saw. A leader just elected may not know
// yet that its followers hold its last records (as in Kafka, its high
// watermark passes them when they fetch): the read waits, up to 10 s, until
// the high watermark passes the last acknowledged offset.
func (d *diskTest) audit(id int32) {
	d.t.Helper()
	last := int64(-1)
	for _, s := range d.h.History().Acks(0) {
		last = max(last, s.Offset)
	}
	start := time.Now()
	var hw int64
	d.c.eventually(10*time.Second, fmt.Sprintf("storage-%d's high watermark past the last acknowledged offset %d", id, last), func() error {
		var desc struct {
			Partitions []struct {
				Leader int32 `json:"leader"`
				HW     num   `json:"high_watermark"`
			} `json:"partitions"`
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := d.c.do(ctx, "GET", "/v1/topics/"+d.topic, nil, &desc); err != nil {
			return err
		}
		if len(desc.Partitions) != 1 || desc.Partitions[0].Leader != id {
			return fmt.Errorf("%+v", desc.Partitions)
		}
		if hw = int64(desc.Partitions[0].HW); hw <= last {
			return fmt.Errorf("high watermark %d", hw)
		}
		return nil
	})
	d.t.Logf("storage-%d's high watermark %d past the last acknowledged offset %d %v after it led", id, hw, last, time.Since(start).Round(time.Millisecond))
	log := d.c.readAll(d.topic, 0)
	if p := d.c.describe(d.topic); len(p) != 1 || p[0].Leader != id {
		d.t.Fatalf("leadership moved during the read: %+v", p)
	}
	res := audit(d.t, d.h, history.Log{0: log})
	d.t.Logf("read %d records from storage-%d; %d acknowledged, %d unknown, %d not written: %d lost, %d duplicated, %d inconsistent offsets",
		len(log), id, res.Acknowledged, res.Unknown, res.NotWritten,
		res.Count(history.LostWrite), res.Count(history.Duplicate), res.Count(history.InconsistentOffset))
	if res.Acknowledged == 0 {
		d.t.Error("nothing was acknowledged")
	}
}

// damage is what damageActiveSegment did.
type damage struct {
	file          string
	size, torn    int64 // the file's size before; where it now ends
	flipAt        int64 // the byte flipped
	leo           int64 // the offset after the last whole batch before
	cutAt         int64 // the corrupt batch's base offset: where recovery must cut
	batches       int
	tornBatchBase int64
	kept          []byte // the bytes before the corrupt batch: what recovery must keep
}

func (g damage) String() string {
	return fmt.Sprintf("%s: %d bytes, %d whole batches, LEO %d; batch %d torn (file cut to %d bytes), a byte of batch %d flipped at %d",
		filepath.Base(g.file), g.size, g.batches, g.leo, g.tornBatchBase, g.torn, g.cutAt, g.flipAt)
}

// damageActiveSegment tears the last batch of the partition's active
// segment in its middle and flips a byte in the records of the batch
// before it.
func damageActiveSegment(t *testing.T, dir string) damage {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no segment in %s (%v)", dir, err)
	}
	slices.Sort(logs) // 20-digit base offsets: the last is the active segment
	g := damage{file: logs[len(logs)-1]}
	raw, err := os.ReadFile(g.file)
	if err != nil {
		t.Fatal(err)
	}
	g.size = int64(len(raw))
	batches, at, _ := splitBatches(raw)
	if len(batches) < 2 {
		t.Fatalf("%s: %d whole batches, want at least 2", g.file, len(batches))
	}
	n := len(batches)
	last, prev := batches[n-1], batches[n-2]
	g.batches, g.leo = n, int64(last.NextOffset())
	g.tornBatchBase, g.cutAt = int64(last.BaseOffset()), int64(prev.BaseOffset())
	g.torn = at[n-1] + int64(last.Size()/2)
	g.flipAt = at[n-2] + record.HeaderSize + int64(prev.Size()-record.HeaderSize)/2
	g.kept = slices.Clone(raw[:at[n-2]])
	bad := slices.Clone(prev)
	bad[g.flipAt-at[n-2]] ^= 0xff
	if err := bad.Verify(); err == nil {
		t.Fatalf("flipping byte %d of batch %d left it valid", g.flipAt, g.cutAt)
	}
	f, err := os.OpenFile(g.file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{raw[g.flipAt] ^ 0xff}, g.flipAt); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(g.torn); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	return g
}

// splitBatches cuts a segment's bytes into whole batches (by their length
// fields, without checking them), with where each starts, and answers how
// many bytes of a torn batch follow them.
func splitBatches(raw []byte) ([]record.Batch, []int64, int) {
	var out []record.Batch
	var at []int64
	pos := 0
	for pos+record.HeaderSize <= len(raw) {
		size := record.LengthPrefix + int(int32(binary.BigEndian.Uint32(raw[pos+8:])))
		if size < record.HeaderSize || pos+size > len(raw) {
			break
		}
		out, at = append(out, record.Batch(raw[pos:pos+size:pos+size])), append(at, int64(pos))
		pos += size
	}
	return out, at, len(raw) - pos
}

// withoutZeroTail cuts the zeros a segment holds after its batches when its
// log zero-fills ahead of the appends (flush.messages=1): they are not part
// of the log. A torn batch is not cut: its length field is not zero.
func withoutZeroTail(raw []byte) []byte {
	_, _, rest := splitBatches(raw)
	if rest == 0 || bytes.ContainsFunc(raw[len(raw)-rest:], func(r rune) bool { return r != 0 }) {
		return raw
	}
	return raw[:len(raw)-rest]
}

// segmentBytes is every segment of a partition directory, in offset order,
// each without a zero-filled tail.
func segmentBytes(t *testing.T, dir string) []byte {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(logs)
	var out []byte
	for _, l := range logs {
		raw, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, withoutZeroTail(raw)...)
	}
	return out
}

// otherThan answers ids without x.
func otherThan(ids []int32, x int32) []int32 {
	return slices.DeleteFunc(slices.Clone(ids), func(id int32) bool { return id == x })
}
