package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/history"
	"skein/tests/e2e"
	"skein/tests/faultkit"
)

// The fault kinds, in the order the table prints them.
const (
	LeaderKill     = "leader-kill"
	FollowerKill   = "follower-kill"
	ControllerKill = "controller-kill"
	GroupCoordKill = "groupcoord-kill"
	TxnCoordKill   = "txncoord-kill"
	LeaderPause    = "leader-pause"
	DoubleFailover = "double-failover"
	DiskFull       = "disk-full"
)

// Kinds lists every fault kind.
var Kinds = []string{LeaderKill, FollowerKill, ControllerKill, GroupCoordKill, TxnCoordKill, LeaderPause, DoubleFailover, DiskFull}

// diskNode is the storage node whose log directory is a small tmpfs the
// disk-full fault fills; diskSize is that tmpfs's size.
const (
	diskNode = 3
	diskSize = "256m"
)

// baseline names the row of what happened before the first fault.
const baseline = "none (warm-up)"

const (
	topic = "verify"
	group = "verify-group"
	// txnID is the transactional id whose coordinator txncoord-kill kills.
	txnID = "verify-tx"
	// sessionTimeout is the controllers' broker session timeout (their
	// default): a paused leader is held stopped past it.
	sessionTimeout = 2 * time.Second
)

// Options configure one run.
type Options struct {
	// BinDir holds skein and the service binaries.
	BinDir string
	// Out receives the progress lines and the table.
	Out io.Writer
	// Seed derives the schedule; the same seed gives the same schedule.
	Seed uint64
	// Duration: faults are applied one after another until it has passed,
	// and at least once each of Kinds.
	Duration time.Duration
	// Kinds limits the schedule to these fault kinds (all when empty).
	Kinds []string
	// Partitions of the topic (default 4).
	Partitions int
	// KeepData keeps the cluster's data and logs (kept anyway on failure).
	KeepData bool
	// Verbose also prints the history checker's whole table.
	Verbose bool
}

// Fault is one fault the schedule applied.
type Fault struct {
	Kind       string
	What       string // which node, which partition
	Start, End time.Time
	// Unavailable is the longest gap in [Start, End] between
	// acknowledgements on one partition, or between commits of the
	// transactional producer.
	Unavailable time.Duration
	// AckGap and CommitGap are its two parts.
	AckGap, CommitGap time.Duration
	Err               error // the fault could not be applied or the cluster did not heal
}

// Row is one line of the table: every fault of one kind.
type Row struct {
	Kind                                                  string
	Count                                                 int
	Acked, Lost, Duplicated, Inconsistent, Other, Unknown int
	Unavailable                                           time.Duration
}

// Anomalies counts the row's anomalies.
func (r Row) Anomalies() int { return r.Lost + r.Duplicated + r.Inconsistent + r.Other }

// Report is what a run found.
type Report struct {
	Seed   uint64
	Faults []Fault
	Rows   []Row // one per kind applied, then the warm-up and the total
	Audit  *history.Result
	// TxnAudit is the transactional producer's, on its own topic.
	TxnAudit *history.Result
	// Problems: faults that could not be applied, a cluster that did not
	// heal, restarted processes that exited.
	Problems []string
	Dir      string
}

// Valid reports whether the audit found no anomaly and every fault was
// applied and healed.
func (r *Report) Valid() bool {
	return r.Audit != nil && r.Audit.Valid() && r.TxnAudit != nil && r.TxnAudit.Valid() && len(r.Problems) == 0
}

// Table prints the rows.
func (r *Report) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-16s %5s %7s %5s %5s %12s %6s %7s %14s\n", "fault", "count", "acked", "lost", "dup", "inconsistent", "other", "unknown", "unavailable s")
	for _, row := range r.Rows {
		count := fmt.Sprint(row.Count)
		if row.Kind == baseline || row.Kind == "total" {
			count = "-"
		}
		fmt.Fprintf(&b, "%-16s %5s %7d %5d %5d %12d %6d %7d %14.1f\n", row.Kind, count, row.Acked, row.Lost, row.Duplicated,
			row.Inconsistent, row.Other, row.Unknown, row.Unavailable.Seconds())
	}
	return b.String()
}

// run is the state of one run.
type run struct {
	o     *Options
	c     *cluster
	rng   *rand.Rand
	h     *history.Recorder
	txnH  *history.Recorder
	parts int
	start time.Time
	// diskDir: storage node diskNode's log directory, on a tmpfs that
	// unmount takes away, when the schedule has disk-full.
	diskDir string
	unmount func() error
}

func (r *run) say(format string, args ...any) {
	fmt.Fprintf(r.o.Out, "[%6.1fs] %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
}

// Run starts a cluster, runs the workload under the fault schedule, audits
// it and stops the cluster. An error means the run could not be carried
// out; anomalies are in the Report.
func Run(ctx context.Context, o Options) (rep *Report, err error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Partitions == 0 {
		o.Partitions = 4
	}
	kinds := o.Kinds
	if len(kinds) == 0 {
		kinds = Kinds
		if os.Geteuid() != 0 {
			// Filling a disk takes a tmpfs, and mounting one takes root.
			kinds = slices.DeleteFunc(slices.Clone(kinds), func(k string) bool { return k == DiskFull })
			fmt.Fprintf(o.Out, "skein-verify: not root, so no %s fault (it mounts a tmpfs)\n", DiskFull)
		}
	}
	for _, k := range kinds {
		if !slices.Contains(Kinds, k) {
			return nil, fmt.Errorf("no fault kind %q (there are: %s)", k, strings.Join(Kinds, ", "))
		}
	}
	r := &run{o: &o, rng: rand.New(rand.NewPCG(o.Seed, 0x5e1e)), h: history.NewRecorder(), txnH: history.NewRecorder(), parts: o.Partitions, start: time.Now()}
	rep = &Report{Seed: o.Seed}
	fmt.Fprintf(o.Out, "skein-verify: seed %d (replay with --seed %d), %v, faults: %s\n", o.Seed, o.Seed, o.Duration, strings.Join(kinds, ", "))

	dir, err := os.MkdirTemp("", "skein-verify-")
	if err != nil {
		return nil, err
	}
	rep.Dir = dir
	dev, err := e2e.StartDev(o.BinDir, dir, 90*time.Second)
	if err != nil {
		return nil, err
	}
	r.c = &cluster{ctx: ctx, dev: dev, hc: &http.Client{Timeout: 45 * time.Second}, nodes: map[string]*node{}}
	r.start = time.Now()
	r.say("cluster up in %s: REST %s, gRPC %s", dir, dev.BaseURL, dev.GRPCAddr)
	defer func() {
		if serr := r.c.stop(); serr != nil {
			rep.Problems = append(rep.Problems, "stopping the cluster: "+serr.Error())
		}
		if r.unmount != nil {
			if uerr := r.unmount(); uerr != nil {
				rep.Problems = append(rep.Problems, uerr.Error())
			}
		}
		if err != nil || !rep.Valid() || o.KeepData {
			fmt.Fprintf(o.Out, "the cluster's data and logs are kept in %s\n", dir)
		} else {
			os.RemoveAll(dir)
		}
	}()

	if slices.Contains(kinds, DiskFull) {
		if err := r.prepareDisk(); err != nil {
			return rep, fmt.Errorf("putting storage-%d's log directory on a tmpfs: %w", diskNode, err)
		}
	}
	if err := r.createTopic(); err != nil {
		return rep, err
	}
	r.say("topic %s: %d partitions, replication factor 3, min.insync.replicas 2; topic %s: 2 partitions, the same", topic, r.parts, txnTopic)

	stopProducers, stopMembers := make(chan struct{}), make(chan struct{})
	var producers, members sync.WaitGroup
	var all []int32
	for p := range int32(r.parts) {
		all = append(all, p)
		producers.Add(1)
		go r.c.restProducer(r.h, topic, []int32{p}, fmt.Sprintf("rest%d", p), stopProducers, &producers)
	}
	producers.Add(2)
	go r.c.restProducer(r.h, topic, all, "mixed", stopProducers, &producers)
	go r.c.streamProducer(r.h, topic, 0, "stream0", stopProducers, &producers)
	producers.Add(1)
	go r.c.txnProducer(r.txnH, 2, stopProducers, &producers)
	for p := range int32(2) {
		members.Add(1)
		go r.c.txnTail(r.txnH, p, stopMembers, &members)
	}
	for range 2 {
		members.Add(1)
		m := &member{c: r.c, h: r.h, group: group, topic: topic}
		go m.run(stopMembers, &members)
	}
	stopAll := func() {
		select {
		case <-stopProducers:
		default:
			close(stopProducers)
		}
		select {
		case <-stopMembers:
		default:
			close(stopMembers)
		}
	}
	defer func() { stopAll(); producers.Wait(); members.Wait() }()

	if err := r.progress(30*time.Second, 20); err != nil {
		return rep, fmt.Errorf("warm-up: %w", err)
	}
	r.say("producers (REST per partition, REST to all partitions, a gRPC stream, a transactional REST producer), 2 group members and a read_committed tail running")

	// The schedule: rounds of every kind in a seeded order, until Duration
	// has passed and every kind was applied once.
	var round []string
	for i := 0; i < len(kinds) || time.Since(r.start) < o.Duration; i++ {
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		if len(round) == 0 {
			round = slices.Clone(kinds)
			r.rng.Shuffle(len(round), func(a, b int) { round[a], round[b] = round[b], round[a] })
		}
		kind := round[0]
		round = round[1:]
		f := r.apply(kind)
		rep.Faults = append(rep.Faults, f)
		if f.Err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s (%s): %v", f.Kind, f.What, f.Err))
			r.say("%s: %v", kind, f.Err)
			if herr := r.c.healAll(); herr != nil {
				return rep, herr
			}
			if herr := r.heal(true); herr != nil {
				return rep, fmt.Errorf("after %s: %w", kind, herr)
			}
		}
		quiet := time.Duration(1000+r.rng.IntN(2000)) * time.Millisecond
		time.Sleep(quiet)
	}

	r.say("schedule done: %d faults; stopping the producers", len(rep.Faults))
	close(stopProducers)
	producers.Wait()
	if err := r.c.healAll(); err != nil {
		return rep, err
	}
	if err := r.heal(false); err != nil {
		rep.Problems = append(rep.Problems, "final heal: "+err.Error())
	}
	if err := waitFor(ctx, 60*time.Second, "the group caught up (lag 0)", func() error {
		lag, err := r.c.groupLag(group)
		if err == nil && lag != 0 {
			err = fmt.Errorf("lag %d", lag)
		}
		return err
	}); err != nil {
		rep.Problems = append(rep.Problems, err.Error())
	}
	close(stopMembers)
	members.Wait()
	r.say("group caught up; reading the topic (read_committed)")
	final := history.Log{}
	for p := range int32(r.parts) {
		recs, err := r.c.readAll(topic, p, 0)
		if err != nil {
			return rep, err
		}
		final[p] = recs
	}
	txnFinal := history.Log{}
	for p := range int32(2) {
		recs, err := r.c.readAll(txnTopic, p, 10)
		if err != nil {
			return rep, err
		}
		txnFinal[p] = recs
	}
	hist := r.h.History()
	rep.Audit = history.Check(hist, final, history.Options{MaxExamples: 5})
	txnHist := txnHistory(r.txnH.History())
	rep.TxnAudit = history.Check(txnHist, txnFinal, history.Options{MaxExamples: 5})
	txnCounts := map[history.TxnOutcome]int{}
	for _, t := range txnHist.Txns {
		txnCounts[t.Outcome]++
	}
	r.say("transactions: %d committed, %d aborted, %d of unknown outcome", txnCounts[history.TxnCommitted], txnCounts[history.TxnAborted], txnCounts[history.TxnUnknown])
	var commits []time.Time
	for _, t := range txnHist.Txns {
		if t.Outcome == history.TxnCommitted {
			commits = append(commits, t.Complete)
		}
	}
	for i := range rep.Faults {
		f := &rep.Faults[i]
		for p := range int32(r.parts) {
			f.AckGap = max(f.AckGap, history.LongestGap(hist.AckTimes(p), f.Start, f.End))
		}
		f.CommitGap = history.LongestGap(commits, f.Start, f.End)
		f.Unavailable = max(f.AckGap, f.CommitGap)
	}
	if exited := r.c.exitedUnasked(); len(exited) > 0 {
		rep.Problems = append(rep.Problems, "exited on their own: "+strings.Join(exited, ", "))
	}
	rep.Rows = rows(kinds, rep.Faults, []history.History{hist, r.txnH.History()}, []*history.Result{rep.Audit, rep.TxnAudit})
	if o.Verbose || !rep.Audit.Valid() {
		fmt.Fprintf(o.Out, "\nthe idempotent producers and the group:\n%s", rep.Audit)
	}
	if o.Verbose || !rep.TxnAudit.Valid() {
		fmt.Fprintf(o.Out, "\nthe transactional producer:\n%s", rep.TxnAudit)
	}
	fmt.Fprintf(o.Out, "\nseed %d, %d faults in %v\n%s", o.Seed, len(rep.Faults), time.Since(r.start).Round(time.Second), rep.Table())
	fmt.Fprintf(o.Out, "\nfaults (unavailable: longest gap between acknowledgements of one partition / between transaction commits):\n")
	for i, f := range rep.Faults {
		fmt.Fprintf(o.Out, "%3d. at %5.1fs %-16s %s; healed after %.1fs; unavailable %.1fs / %.1fs\n", i+1, f.Start.Sub(r.start).Seconds(), f.Kind, f.What,
			f.End.Sub(f.Start).Seconds(), f.AckGap.Seconds(), f.CommitGap.Seconds())
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(o.Out, "problem: %s\n", p)
	}
	return rep, nil
}

func (r *run) createTopic() error {
	for name, parts := range map[string]int{topic: r.parts, txnTopic: 2} {
		body := map[string]any{"name": name, "partitions": parts, "replication_factor": 3,
			"configs": map[string]string{"min.insync.replicas": "2"}}
		if err := r.c.do(30*time.Second, "POST", "/v1/topics", body, nil); err != nil {
			return err
		}
	}
	return r.inSync(30 * time.Second)
}

// inSync waits until every partition of both topics has a leader and a
// full ISR.
func (r *run) inSync(timeout time.Duration) error {
	return waitFor(r.c.ctx, timeout, "every partition with a leader and 3 replicas in sync", func() error {
		for name, parts := range map[string]int{topic: r.parts, txnTopic: 2} {
			ps, err := r.c.describe(name)
			if err != nil {
				return err
			}
			if len(ps) != parts {
				return fmt.Errorf("%s: %d partitions", name, len(ps))
			}
			for _, p := range ps {
				if p.Leader < 0 || len(p.ISR) != 3 {
					return fmt.Errorf("%s partition %d: leader %d, ISR %v", name, p.Partition, p.Leader, p.ISR)
				}
			}
		}
		return nil
	})
}

// progress waits until every partition has n more acknowledgements.
func (r *run) progress(timeout time.Duration, n int) error {
	from := make([]int, r.parts)
	for p := range from {
		from[p] = r.h.AckCount(int32(p))
	}
	return waitFor(r.c.ctx, timeout, "acknowledgements on every partition", func() error {
		for p := range from {
			if got := r.h.AckCount(int32(p)) - from[p]; got < n {
				return fmt.Errorf("partition %d: %d of %d", p, got, n)
			}
		}
		return nil
	})
}

// heal waits until the cluster is whole again: a Raft leader, every
// partition led with a full ISR, the group's coordinator found and, while
// the producers run (acks), acknowledgements on every partition.
func (r *run) heal(acks bool) error {
	if err := waitFor(r.c.ctx, 60*time.Second, "a Raft leader", func() error { _, err := r.c.raftLeader(); return err }); err != nil {
		return err
	}
	if err := r.inSync(90 * time.Second); err != nil {
		return err
	}
	if err := waitFor(r.c.ctx, 30*time.Second, "the group's coordinator", func() error {
		_, err := r.c.coordinator(controllerv1.CoordinatorKind_COORDINATOR_KIND_GROUP, group)
		return err
	}); err != nil {
		return err
	}
	if !acks {
		return nil
	}
	return r.progress(60*time.Second, 5)
}

// partition draws a partition and describes it.
func (r *run) partition() (partitionDesc, error) {
	p := int32(r.rng.IntN(r.parts))
	ps, err := r.c.describe(topic)
	if err != nil {
		return partitionDesc{}, err
	}
	for _, d := range ps {
		if d.Partition == p && d.Leader >= 0 {
			return d, nil
		}
	}
	return partitionDesc{}, fmt.Errorf("partition %d has no leader", p)
}

// apply applies one fault of kind and waits until the cluster healed. The
// random draws happen before anything can fail, so a seed always gives the
// same schedule.
func (r *run) apply(kind string) Fault {
	f := Fault{Kind: kind, Start: time.Now()}
	down := time.Duration(2000+r.rng.IntN(3000)) * time.Millisecond
	pause := sessionTimeout + time.Duration(3000+r.rng.IntN(3000))*time.Millisecond
	follower := r.rng.IntN(2)
	d, perr := r.partition()
	killRestart := func(n *node) error {
		if err := r.c.kill(n); err != nil {
			return err
		}
		time.Sleep(down)
		return r.c.restart(n)
	}
	f.Err = func() error {
		switch kind {
		case LeaderKill, FollowerKill, LeaderPause, DoubleFailover:
			if perr != nil {
				return perr
			}
		}
		switch kind {
		case LeaderKill:
			f.What = fmt.Sprintf("storage-%d, leader of partition %d, down %v", d.Leader, d.Partition, down)
			n, err := r.c.node("storage", int(d.Leader))
			if err != nil {
				return err
			}
			r.say("%s: SIGKILL %s", kind, f.What)
			return killRestart(n)
		case FollowerKill:
			var fs []int32
			for _, id := range d.Replicas {
				if id != d.Leader {
					fs = append(fs, id)
				}
			}
			if len(fs) == 0 {
				return fmt.Errorf("partition %d has no follower: replicas %v", d.Partition, d.Replicas)
			}
			id := fs[follower%len(fs)]
			f.What = fmt.Sprintf("storage-%d, follower of partition %d (leader %d), down %v", id, d.Partition, d.Leader, down)
			n, err := r.c.node("storage", int(id))
			if err != nil {
				return err
			}
			r.say("%s: SIGKILL %s", kind, f.What)
			return killRestart(n)
		case ControllerKill:
			id, err := r.c.raftLeader()
			if err != nil {
				return err
			}
			f.What = fmt.Sprintf("controller-%d, the Raft leader, down %v", id, down)
			n, err := r.c.node("controller", id)
			if err != nil {
				return err
			}
			r.say("%s: SIGKILL %s", kind, f.What)
			return killRestart(n)
		case GroupCoordKill, TxnCoordKill:
			role, ck, key := "groupcoord", controllerv1.CoordinatorKind_COORDINATOR_KIND_GROUP, group
			if kind == TxnCoordKill {
				role, ck, key = "txncoord", controllerv1.CoordinatorKind_COORDINATOR_KIND_TRANSACTION, txnID
			}
			id, err := r.c.coordinator(ck, key)
			if err != nil {
				return err
			}
			f.What = fmt.Sprintf("%s-%d, coordinator of %s, down %v", role, id, key, down)
			n, err := r.c.node(role, id)
			if err != nil {
				return err
			}
			r.say("%s: SIGKILL %s", kind, f.What)
			return killRestart(n)
		case LeaderPause:
			f.What = fmt.Sprintf("storage-%d, leader of partition %d, stopped %v", d.Leader, d.Partition, pause)
			n, err := r.c.node("storage", int(d.Leader))
			if err != nil {
				return err
			}
			r.say("%s: SIGSTOP %s", kind, f.What)
			if err := r.c.signal(n, syscall.SIGSTOP); err != nil {
				return err
			}
			time.Sleep(pause)
			return r.c.signal(n, syscall.SIGCONT)
		case DiskFull:
			f.What = fmt.Sprintf("storage-%d's log directory (a %s tmpfs) filled, full for %v", diskNode, diskSize, down)
			filler := filepath.Join(r.diskDir, "filler")
			r.say("%s: filling %s", kind, r.diskDir)
			n, err := faultkit.FillDisk(filler)
			if err != nil {
				return err
			}
			err = waitFor(r.c.ctx, 15*time.Second, fmt.Sprintf("storage-%d fenced", diskNode), func() error {
				if st := r.c.brokerState(diskNode); st != "FENCED" {
					return fmt.Errorf("storage-%d %s", diskNode, st)
				}
				return nil
			})
			r.say("%s: %d MiB written; storage-%d fenced %v after", kind, n>>20, diskNode, time.Since(f.Start).Round(time.Millisecond))
			time.Sleep(down)
			return errors.Join(err, os.Remove(filler))
		case DoubleFailover:
			a := d.Leader
			na, err := r.c.node("storage", int(a))
			if err != nil {
				return err
			}
			r.say("%s: SIGKILL storage-%d, leader of partition %d", kind, a, d.Partition)
			if err := r.c.kill(na); err != nil {
				return err
			}
			b, err := r.newLeader(d.Partition, a)
			if err != nil {
				return err
			}
			nb, err := r.c.node("storage", int(b))
			if err != nil {
				return err
			}
			f.What = fmt.Sprintf("storage-%d then storage-%d, leaders of partition %d in turn, down %v", a, b, d.Partition, down)
			r.say("%s: storage-%d leads partition %d %v after; restarting storage-%d and SIGKILL storage-%d",
				kind, b, d.Partition, time.Since(f.Start).Round(time.Millisecond), a, b)
			if err := r.c.restart(na); err != nil {
				return err
			}
			if err := r.c.kill(nb); err != nil {
				return err
			}
			if _, err := r.newLeader(d.Partition, b); err != nil {
				return err
			}
			time.Sleep(down)
			return r.c.restart(nb)
		}
		return fmt.Errorf("no fault kind %q", kind)
	}()
	if f.Err == nil {
		f.Err = r.heal(true)
	}
	f.End = time.Now()
	if f.Err == nil {
		r.say("%s: healed after %v", kind, f.End.Sub(f.Start).Round(100*time.Millisecond))
	}
	return f
}

// prepareDisk moves storage node diskNode's log directory onto a tmpfs of
// diskSize, before any topic exists: the node is SIGKILLed, its logs
// copied onto the tmpfs, and it is started again.
func (r *run) prepareDisk() error {
	n, err := r.c.node("storage", diskNode)
	if err != nil {
		return err
	}
	ps, err := r.c.dev.Processes()
	if err != nil {
		return err
	}
	for _, p := range ps {
		if p.Role == "storage" && p.ID == diskNode {
			r.diskDir = filepath.Join(p.DataDir, "logs")
		}
	}
	if r.diskDir == "" {
		return fmt.Errorf("no storage-%d in cluster.json", diskNode)
	}
	if err := r.c.kill(n); err != nil {
		return err
	}
	unmount, err := faultkit.MountTmpfs(r.diskDir, diskSize)
	r.unmount = unmount
	if err != nil {
		return err
	}
	if err := r.c.restart(n); err != nil {
		return err
	}
	r.say("storage-%d's log directory is a %s tmpfs (for %s)", diskNode, diskSize, DiskFull)
	return waitFor(r.c.ctx, 30*time.Second, fmt.Sprintf("storage-%d alive", diskNode), func() error {
		if st := r.c.brokerState(diskNode); st != "ALIVE" {
			return fmt.Errorf("storage-%d %s", diskNode, st)
		}
		return nil
	})
}

// newLeader waits until partition p is led by a node other than old.
func (r *run) newLeader(p int32, old int32) (int32, error) {
	var leader int32 = -1
	err := waitFor(r.c.ctx, 30*time.Second, fmt.Sprintf("a new leader of partition %d", p), func() error {
		ps, err := r.c.describe(topic)
		if err != nil {
			return err
		}
		for _, d := range ps {
			if d.Partition == p {
				if d.Leader < 0 || d.Leader == old {
					return fmt.Errorf("leader %d", d.Leader)
				}
				leader = d.Leader
				return nil
			}
		}
		return errors.New("no such partition")
	})
	return leader, err
}

// rows attributes the history to the faults: a send (and an anomaly about
// its value) belongs to the fault in progress or last healed when it was
// invoked; before the first fault it is the warm-up's.
func rows(kinds []string, faults []Fault, hs []history.History, results []*history.Result) []Row {
	kindAt := func(t time.Time) string {
		k := baseline
		for _, f := range faults {
			if !f.Start.After(t) {
				k = f.Kind
			}
		}
		return k
	}
	byKind := map[string]*Row{baseline: {Kind: baseline}, "total": {Kind: "total"}}
	for _, k := range kinds {
		byKind[k] = &Row{Kind: k}
	}
	for _, f := range faults {
		row := byKind[f.Kind]
		row.Count++
		row.Unavailable = max(row.Unavailable, f.Unavailable)
	}
	sentAt := map[string]time.Time{}
	total := byKind["total"]
	for _, h := range hs {
		for _, s := range h.Sends {
			if _, ok := sentAt[s.Value]; !ok {
				sentAt[s.Value] = s.Invoke
			}
			row := byKind[kindAt(s.Invoke)]
			switch s.Outcome {
			case history.Written:
				row.Acked++
				total.Acked++
			case history.Unknown:
				row.Unknown++
				total.Unknown++
			}
		}
	}
	var anomalies []history.Anomaly
	for _, res := range results {
		anomalies = append(anomalies, res.Anomalies...)
	}
	for _, a := range anomalies {
		rs := []*Row{total}
		if at, ok := sentAt[a.Value]; ok {
			rs = append(rs, byKind[kindAt(at)])
		}
		for _, row := range rs {
			switch a.Kind {
			case history.LostWrite:
				row.Lost++
			case history.Duplicate:
				row.Duplicated++
			case history.InconsistentOffset:
				row.Inconsistent++
			default:
				row.Other++
			}
		}
	}
	for _, row := range byKind {
		if row.Kind != "total" {
			total.Unavailable = max(total.Unavailable, row.Unavailable)
		}
	}
	out := []Row{*byKind[baseline]}
	for _, k := range kinds {
		if byKind[k].Count > 0 {
			out = append(out, *byKind[k])
		}
	}
	return append(out, *total)
}
