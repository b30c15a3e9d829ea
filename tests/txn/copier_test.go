//go:build integration

package txn

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	controllerv1 "skein/gen/skein/controller/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
	"skein/libs/metadata"
	"skein/tests/cluster"
)

// The copier: group "copier" reads copy-in and a transactional producer
// "copier-tx" writes each record to the same partition of copy-out,
// committing the consumed offsets in the same transaction.
const (
	copyIn      = "copy-in"
	copyOut     = "copy-out"
	copyGroup   = "copier"
	copyTxnID   = "copier-tx"
	copyParts   = 6
	commitEvery = 750
	pollMax     = 500
)

// Kafka's transactions system test (copy a topic exactly once while the
// brokers, the transaction coordinator and the copier itself are killed),
// with real processes: 3 controllers, 3 storage nodes, 2 group and 2
// transaction coordinators, and the copier in a process of its own. A
// read_committed reader follows the output throughout. At the end the
// output is the input, partition by partition and in order, and the reader
// never saw a record twice nor one the output does not hold (an aborted
// one).
//
// It copies 100,000 records with each fault three times (about 40 s here);
// SKEIN_TXN_QUICK=1 copies 30,000 with each fault twice, and
// SKEIN_TXN_COPY_RECORDS overrides the count.
func TestCopierExactlyOnce(t *testing.T) {
	n, rounds := 100000, 3
	if os.Getenv("SKEIN_TXN_QUICK") == "1" {
		n, rounds = 30000, 2
	}
	if v := os.Getenv("SKEIN_TXN_COPY_RECORDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < copyParts {
			t.Fatalf("SKEIN_TXN_COPY_RECORDS=%q", v)
		}
	}
	began := time.Now()
	c := cluster.Start(t, cluster.Options{})
	// Short sessions: a killed copier's member is gone within seconds.
	c.StartGroupCoordinators(2, "--min-session-timeout=1s", "--heartbeat-interval=500ms")
	c.StartTxnCoordinators(2)
	cl, err := client.New(client.Config{Controllers: c.ControllerAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	setupCopy(t, cl)
	input := fillInput(t, cl, n)
	t.Logf("cluster up and %d records in %s in %v; data and logs in %s", n, copyIn, time.Since(began).Round(100*time.Millisecond), c.Dir)

	v := startReader(t, cl)
	stats := &copyStats{}
	copiers := 1
	cp := startCopier(t, c, copiers, stats)
	copyBegan := time.Now()

	// The faults, interleaved, each after the copy moved on.
	kinds := []string{"storage", "txncoord", "copier"}
	kills := map[string]int{}
	lastStorage := int32(-1)
	total := rounds * len(kinds)
	step := n / (total + 1)
	for i := range total {
		v.waitFor(t, (i+1)*step, 90*time.Second, cp, c)
		// Strike mid-transaction: records written, not yet committed.
		if !openTxn(cl, 5*time.Second) {
			t.Logf("no open transaction seen within 5 s; the fault strikes between transactions")
		}
		switch kind := kinds[i%len(kinds)]; kind {
		case "storage":
			waitFullISR(t, cl, 60*time.Second)
			// An output partition's leader, another node than last time.
			part, leader := int32(-1), int32(-1)
			for q := range int32(copyParts) {
				b, _, ok := cl.Metadata().LeaderAndEpoch(copyOut, q)
				if l := int32(b); ok && (part < 0 || l != lastStorage) {
					part, leader = q, l
					if l != lastStorage {
						break
					}
				}
			}
			if leader < 0 {
				t.Fatalf("no leader for any partition of %s", copyOut)
			}
			lastStorage = leader
			p := c.StorageByID(leader)
			c.Kill(p)
			waitMetadata(t, cl, 30*time.Second, fmt.Sprintf("a new leader of %s-%d", copyOut, part), func(m *metadata.Image) bool {
				l, _, ok := m.LeaderAndEpoch(copyOut, part)
				return ok && int32(l) != leader
			})
			c.Restart(p)
			c.WaitReady(p, 60*time.Second)
			t.Logf("%v: killed storage-%d (leader of %s-%d) and restarted it; %d records read", time.Since(copyBegan).Round(100*time.Millisecond), leader, copyOut, part, v.count())
		case "txncoord":
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			co, err := cl.FindCoordinator(ctx, client.TransactionCoordinator, copyTxnID)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			var owner *cluster.Proc
			for _, p := range c.TxnCoords {
				if p.GRPCAddr == co.Addr {
					owner = p
				}
			}
			if owner == nil {
				t.Fatalf("no transaction coordinator at %s", co.Addr)
			}
			c.Kill(owner)
			eventually(t, 30*time.Second, "another transaction coordinator owning "+copyTxnID, func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				co, err := cl.FindCoordinator(ctx, client.TransactionCoordinator, copyTxnID)
				if err != nil || co.Addr == owner.GRPCAddr {
					return fmt.Errorf("coordinator %v, %v", co.Addr, err)
				}
				return nil
			})
			c.Restart(owner)
			c.WaitReady(owner, 60*time.Second)
			t.Logf("%v: killed txncoord-%d (owner of %q) and restarted it; %d records read", time.Since(copyBegan).Round(100*time.Millisecond), owner.ID, copyTxnID, v.count())
		case "copier":
			cp.kill()
			copiers++
			cp = startCopier(t, c, copiers, stats)
			t.Logf("%v: killed copier %d and started copier %d; %d records read", time.Since(copyBegan).Round(100*time.Millisecond), copiers-1, copiers, v.count())
		}
		kills[kinds[i%len(kinds)]]++
	}
	v.waitFor(t, n, 120*time.Second, cp, c)
	copyTook := time.Since(copyBegan)
	cp.kill()

	// A last instance of the id aborts whatever the killed copier left open.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	last, err := cl.NewTransactionalProducer(ctx, copyTxnID)
	if err != nil {
		t.Fatalf("a last instance of %q: %v", copyTxnID, err)
	}
	last.Close()
	time.Sleep(500 * time.Millisecond) // one more round of the reader
	seen, dups := v.stop()

	var output [copyParts][]string
	eventually(t, 30*time.Second, "every output partition stable (LSO = HW)", func() error {
		for p := range int32(copyParts) {
			vals, lso, hw := readPartition(t, cl, copyOut, p, skeinv1.IsolationLevel_READ_COMMITTED)
			if lso != hw {
				return fmt.Errorf("%s-%d: LSO %d, HW %d", copyOut, p, lso, hw)
			}
			output[p] = vals
		}
		return nil
	})
	copied, missing, duplicated, inLog := 0, 0, 0, 0
	for p := range copyParts {
		copied += len(output[p])
		all, _, _ := readPartition(t, cl, copyOut, int32(p), skeinv1.IsolationLevel_READ_UNCOMMITTED)
		inLog += len(all)
		in := map[string]int{}
		for _, s := range input[p] {
			in[s]++
		}
		outc := map[string]int{}
		for _, s := range output[p] {
			outc[s]++
			if outc[s] > 1 {
				duplicated++
			}
		}
		for s := range in {
			if outc[s] == 0 {
				missing++
			}
		}
		if !equal(output[p], input[p]) {
			t.Errorf("%s-%d holds %d records, %s-%d %d: not the same values in the same order (first difference at %d)",
				copyOut, p, len(output[p]), copyIn, p, len(input[p]), firstDiff(output[p], input[p]))
		}
		if !equal(seen[p], output[p]) {
			t.Errorf("the read_committed reader saw %d records of %s-%d, the output holds %d: not the same (first difference at %d)",
				len(seen[p]), copyOut, p, len(output[p]), firstDiff(seen[p], output[p]))
		}
	}
	if dups > 0 {
		t.Errorf("the read_committed reader saw %d values twice", dups)
	}
	if duplicated > 0 || missing > 0 {
		t.Errorf("%d duplicates and %d missing records in the output", duplicated, missing)
	}
	commits, aborts, restarts := stats.get()
	t.Logf("copied %d of %d records in %v (test %v): %d commits, %d aborts by the copier, %d copier instances restarted in-process, "+
		"%d aborted records in the output log (read_uncommitted %d); kills: %d storage leaders, %d transaction coordinators, %d copiers; "+
		"%d duplicates, %d missing, %d seen twice",
		copied, n, copyTook.Round(100*time.Millisecond), time.Since(began).Round(100*time.Millisecond), commits, aborts, restarts,
		inLog-copied, inLog, kills["storage"], kills["txncoord"], kills["copier"], duplicated, missing, dups)
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func setupCopy(t *testing.T, cl *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range []string{copyIn, copyOut} {
		if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: name, Partitions: copyParts, ReplicationFactor: 3, Configs: map[string]string{"min.insync.replicas": "2"}}); err != nil {
			t.Fatal(err)
		}
	}
	// Every coordinator partition owned before the copy starts.
	waitMetadata(t, cl, time.Minute, "the topics and every coordinator partition owned", func(m *metadata.Image) bool {
		for _, k := range []struct {
			kind  controllerv1.CoordinatorKind
			topic string
		}{{txnKind, metadata.TransactionStateTopic}, {controllerv1.CoordinatorKind_COORDINATOR_KIND_GROUP, metadata.ConsumerOffsetsTopic}} {
			n, owned := m.PartitionCount(k.topic), 0
			for _, a := range m.Assignments(k.kind) {
				if a.ProducerId != nil {
					owned++
				}
			}
			if n == 0 || int32(owned) != n {
				return false
			}
		}
		return m.PartitionCount(copyIn) == copyParts && m.PartitionCount(copyOut) == copyParts
	})
}

// openTxn waits (up to d) until some output partition has an open
// transaction holding records: its last stable offset below its high
// watermark.
func openTxn(cl *client.Client, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	parts := make([]int32, copyParts)
	for i := range parts {
		parts[i] = int32(i)
	}
	for ctx.Err() == nil {
		lso, err1 := cl.ListOffsets(ctx, copyOut, parts, client.LatestOffset, skeinv1.IsolationLevel_READ_COMMITTED)
		hw, err2 := cl.ListOffsets(ctx, copyOut, parts, client.LatestOffset, skeinv1.IsolationLevel_READ_UNCOMMITTED)
		if err1 == nil && err2 == nil && len(lso) == len(hw) {
			for i := range lso {
				if lso[i].Err == nil && hw[i].Err == nil && lso[i].Offset < hw[i].Offset {
					return true
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

func waitMetadata(t *testing.T, cl *client.Client, d time.Duration, what string, cond func(*metadata.Image) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if _, err := cl.WaitMetadata(ctx, cond); err != nil {
		t.Fatalf("waited %v for %s: %v", d, what, err)
	}
}

// waitFullISR waits until every partition has all its replicas in sync, so
// that a storage node may be killed without going below min.insync.replicas.
func waitFullISR(t *testing.T, cl *client.Client, d time.Duration) {
	t.Helper()
	waitMetadata(t, cl, d, "every partition's ISR full", func(m *metadata.Image) bool {
		for _, tp := range m.Topics() {
			for _, p := range m.Partitions(tp.GetName()) {
				if len(p.GetIsr()) < len(p.GetReplicas()) || p.GetLeader() < 0 {
					return false
				}
			}
		}
		return true
	})
}

// fillInput writes n records to copy-in, record i to partition i%6 with
// the value "p<partition>-<seq>", and answers each partition's values.
func fillInput(t *testing.T, cl *client.Client, n int) [copyParts][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prod := cl.NewProducer()
	defer prod.Close(ctx)
	const chunk = 3000
	for from := 0; from < n; from += chunk {
		var recs []client.Record
		for i := from; i < min(n, from+chunk); i++ {
			p := int32(i % copyParts)
			recs = append(recs, client.Record{Topic: copyIn, Partition: &p, Value: fmt.Appendf(nil, "p%d-%06d", p, i/copyParts)})
		}
		for _, r := range prod.ProduceSync(ctx, recs...) {
			if r.Err != nil {
				t.Fatalf("filling %s: %v", copyIn, r.Err)
			}
		}
	}
	var out [copyParts][]string
	for p := range int32(copyParts) {
		out[p], _, _ = readPartition(t, cl, copyIn, p, skeinv1.IsolationLevel_READ_COMMITTED)
		want := n / copyParts
		if int(p) < n%copyParts {
			want++
		}
		if len(out[p]) != want {
			t.Fatalf("%s-%d holds %d records, want %d", copyIn, p, len(out[p]), want)
		}
	}
	return out
}

// readPartition reads a partition from its start to its end as the
// isolation level sees it, and answers its values, LSO and HW.
func readPartition(t *testing.T, cl *client.Client, topic string, part int32, iso skeinv1.IsolationLevel) ([]string, int64, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []string
	var off int64
	for {
		res, err := cl.Fetch(ctx, client.FetchRequest{Topic: topic, Partition: part, Offset: off, MaxBytes: 1 << 20, Isolation: iso})
		if err != nil {
			t.Fatalf("fetch %s-%d at %d: %v", topic, part, off, err)
		}
		for _, r := range res.Records {
			out = append(out, string(r.Value))
		}
		end := res.HighWatermark
		if iso == skeinv1.IsolationLevel_READ_COMMITTED {
			end = res.LastStableOffset
		}
		if res.NextOffset >= end || res.NextOffset == off {
			return out, res.LastStableOffset, res.HighWatermark
		}
		off = res.NextOffset
	}
}

// reader follows copy-out with read_committed from the start.
type reader struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	seen  [copyParts][]string // guarded by mu
	all   map[string]bool     // guarded by mu
	dups  int                 // guarded by mu
	total int                 // guarded by mu
}

func startReader(t *testing.T, cl *client.Client) *reader {
	ctx, cancel := context.WithCancel(context.Background())
	v := &reader{cancel: cancel, done: make(chan struct{}), all: map[string]bool{}}
	t.Cleanup(func() { v.stop() })
	go func() {
		defer close(v.done)
		var next [copyParts]int64
		for ctx.Err() == nil {
			for p := range int32(copyParts) {
				fctx, fcancel := context.WithTimeout(ctx, 5*time.Second)
				res, err := cl.Fetch(fctx, client.FetchRequest{Topic: copyOut, Partition: p, Offset: next[p], MaxBytes: 1 << 20,
					MaxWait: 50 * time.Millisecond, Isolation: skeinv1.IsolationLevel_READ_COMMITTED})
				fcancel()
				if err != nil {
					continue // a leader moving: read again in the next round
				}
				v.mu.Lock()
				for _, r := range res.Records {
					s := string(r.Value)
					if v.all[s] {
						v.dups++
					}
					v.all[s] = true
					v.seen[p] = append(v.seen[p], s)
					v.total++
				}
				v.mu.Unlock()
				next[p] = res.NextOffset
			}
		}
	}()
	return v
}

func (v *reader) count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.total
}

// stop ends the reader and answers what it saw.
func (v *reader) stop() ([copyParts][]string, int) {
	v.cancel()
	<-v.done
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.seen, v.dups
}

// waitFor waits until the reader has seen n records.
func (v *reader) waitFor(t *testing.T, n int, d time.Duration, cp *copier, c *cluster.Cluster) {
	t.Helper()
	end := time.Now().Add(d)
	for v.count() < n {
		if time.Now().After(end) {
			t.Fatalf("the read_committed reader saw %d records after %v, want %d; copier log tail:\n%s", v.count(), d, n, cp.tail(30))
		}
		select {
		case <-cp.done:
			t.Fatalf("copier %d exited on its own; log tail:\n%s", cp.n, cp.tail(40))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// copyStats counts what the copier processes report.
type copyStats struct {
	mu                        sync.Mutex
	commits, aborts, restarts int
}

func (s *copyStats) get() (int, int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commits, s.aborts, s.restarts
}

// copier is one copier process: this test binary running
// copierProcess (see TestMain).
type copier struct {
	n       int
	cmd     *exec.Cmd
	done    chan struct{}
	logPath string
}

func startCopier(t *testing.T, c *cluster.Cluster, n int, stats *copyStats) *copier {
	t.Helper()
	cp := &copier{n: n, done: make(chan struct{}), logPath: filepath.Join(c.Dir, fmt.Sprintf("copier-%d.log", n))}
	logf, err := os.Create(cp.logPath)
	if err != nil {
		t.Fatal(err)
	}
	cp.cmd = exec.Command(os.Args[0])
	cp.cmd.Env = append(os.Environ(), "SKEIN_COPIER_HELPER=1", "SKEIN_COPIER_CONTROLLERS="+strings.Join(c.ControllerAddrs(), ","))
	cp.cmd.Stderr = logf
	stdout, err := cp.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(cp.done)
		defer logf.Close()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			stats.mu.Lock()
			switch f := strings.Fields(line); {
			case len(f) < 2 || f[0] != "COPIER":
			case f[1] == "COMMIT":
				stats.commits++
			case f[1] == "ABORT":
				stats.aborts++
			case f[1] == "RESTART":
				stats.restarts++
			}
			stats.mu.Unlock()
		}
		_ = cp.cmd.Wait()
	}()
	t.Cleanup(cp.kill)
	return cp
}

// kill SIGKILLs the copier and waits for it to be gone.
func (cp *copier) kill() {
	_ = cp.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-cp.done:
	case <-time.After(10 * time.Second):
	}
}

func (cp *copier) tail(n int) string {
	b, _ := os.ReadFile(cp.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestMain runs the copier process TestCopierExactlyOnce starts (and kills)
// when SKEIN_COPIER_HELPER is set — the test binary re-executed — and the
// tests otherwise.
func TestMain(m *testing.M) {
	if os.Getenv("SKEIN_COPIER_HELPER") == "1" {
		copierProcess()
		return
	}
	os.Exit(m.Run())
}

// copierProcess copies until it is killed, reporting each commit, abort
// and in-process restart on stdout.
func copierProcess() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cl, err := client.New(client.Config{Controllers: strings.Split(os.Getenv("SKEIN_COPIER_CONTROLLERS"), ","), Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "copier:", err)
		os.Exit(1)
	}
	defer cl.Close()
	report := func(format string, args ...any) {
		fmt.Fprintf(os.Stdout, "COPIER "+format+"\n", args...)
	}
	for {
		err := copyInstance(context.Background(), cl, log, report)
		report("RESTART %s", oneLine(err))
		time.Sleep(200 * time.Millisecond)
	}
}

func oneLine(err error) string { return strings.ReplaceAll(fmt.Sprint(err), "\n", " ") }

// copyInstance runs one copier instance (a group member and a
// transactional producer, whose InitProducerId fences the previous
// instance) until an error that an abort does not cure.
func copyInstance(ctx context.Context, cl *client.Client, log *slog.Logger, report func(string, ...any)) error {
	ictx, cancel := context.WithTimeout(ctx, 60*time.Second)
	p, err := cl.NewTransactionalProducer(ictx, copyTxnID, client.WithTransactionTimeout(60*time.Second))
	cancel()
	if err != nil {
		return fmt.Errorf("init producer: %w", err)
	}
	defer p.Close()
	pid, epoch := p.ProducerIdentity()
	log.Info("copier instance up", "producer_id", pid, "epoch", epoch)

	var gc *client.GroupConsumer
	lost := false
	// Partitions revoked or lost mid-transaction: abort and go back to the
	// committed offsets. The consumer commits nothing by itself
	// (ManualCommit): offsets are committed in transactions alone.
	drop := func(context.Context, []client.TopicPartition) {
		lost = true
		gc.SeekToCommitted()
	}
	gc, err = cl.NewGroupConsumer(client.GroupConsumerConfig{
		Group: copyGroup, Topics: []string{copyIn}, AutoOffsetReset: client.ResetEarliest,
		Isolation: skeinv1.IsolationLevel_READ_COMMITTED, SessionTimeout: 5 * time.Second,
		MaxRecords: pollMax, MaxWait: 200 * time.Millisecond, OnRevoked: drop, OnLost: drop, ManualCommit: true,
	})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = gc.Close(cctx)
		cancel()
	}()

	inTxn := 0
	consumed := map[client.TopicPartition]bool{}
	abort := func(cause error) error {
		report("ABORT %s", oneLine(cause))
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := p.Abort(actx)
		cancel()
		if err != nil {
			return fmt.Errorf("abort after %v: %w", cause, err)
		}
		gc.SeekToCommitted()
		inTxn = 0
		clear(consumed)
		return p.Begin()
	}
	if err := p.Begin(); err != nil {
		return err
	}
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		recs, err := gc.Poll(pctx)
		cancel()
		if lost {
			lost = false
			if err := abort(errors.New("partitions revoked or lost")); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			if err := abort(fmt.Errorf("poll: %w", err)); err != nil {
				return err
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if len(recs) > 0 {
			out := make([]client.Record, len(recs))
			for i, r := range recs {
				part := r.Partition
				out[i] = client.Record{Topic: copyOut, Partition: &part, Key: r.Key, Value: r.Value}
				consumed[client.TopicPartition{Topic: r.Topic, Partition: r.Partition}] = true
			}
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, err := p.Send(sctx, out...)
			cancel()
			if err != nil {
				if err := abort(fmt.Errorf("send: %w", err)); err != nil {
					return err
				}
				continue
			}
			inTxn += len(recs)
		}
		if inTxn >= commitEvery || (inTxn > 0 && len(recs) < pollMax) {
			offsets := map[client.TopicPartition]int64{}
			for tp := range consumed {
				if pos := gc.Position(tp); pos >= 0 {
					offsets[tp] = pos
				}
			}
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := p.SendGroupOffsets(cctx, gc.GroupMetadata(), offsets)
			if err == nil {
				err = p.Commit(cctx)
			}
			cancel()
			if err != nil {
				if err := abort(fmt.Errorf("commit: %w", err)); err != nil {
					return err
				}
				continue
			}
			report("COMMIT %d", inTxn)
			inTxn = 0
			clear(consumed)
			if err := p.Begin(); err != nil {
				return err
			}
		}
	}
	return ctx.Err()
}
