package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"syscall"
	"time"

	"skein/libs/history"
	"skein/tests/e2e"
)

// Options configure a run of one demo.
type Options struct {
	// BinDir holds skein and the service binaries.
	BinDir string
	// Out receives the plain-words report.
	Out io.Writer
	// Verbose also prints the audit's whole table.
	Verbose bool
	// Short leaves out the slow part of a demo: min-isr does not wait out
	// the gateway's 30 s delivery timeout.
	Short bool
	// KeepData keeps the cluster's data and logs after the run (they are
	// kept anyway when the demo fails).
	KeepData bool
}

// Outcome is what a demo measured; the tests assert on it.
type Outcome struct {
	Demo string
	// Acknowledged records, and those of them the final log lacks.
	Acknowledged, Lost int
	// Failed sends by error code (NONE never appears).
	Failed map[string]int
	// Redelivered counts records a group handed out twice (demo group).
	Redelivered int
	// Attempts is how many clusters the demo needed (demo acks1-loss
	// retries with a larger window when nothing was lost).
	Attempts int
	// Audit is the history checker's verdict of the last attempt.
	Audit *history.Result
}

// FailedWith answers how many sends failed with code.
func (o *Outcome) FailedWith(code string) int { return o.Failed[code] }

// Demo is one lab demo.
type Demo struct {
	Name string
	What string
	run  func(context.Context, *Options) (*Outcome, error)
}

// Demos lists every demo in the order `skein-lab` prints them.
var Demos = []Demo{
	{"acks1-loss", "an acks=1 producer loses acknowledged records when the leader dies before its followers copy them", runAcks1Loss},
	{"acks-all", "the same crash with acks=all and min.insync.replicas=2: nothing acknowledged is lost", runAcksAll},
	{"min-isr", "two of three replicas stopped: acks=all is refused with NOT_ENOUGH_REPLICAS, acks=1 goes on", runMinISR},
	{"group", "two group members split 6 partitions 3/3, one leaves, a crash before commit re-delivers", runGroup},
	{"unclean", "unclean leader election: a lagging replica becomes leader and acknowledged records are gone", runUnclean},
}

// Run runs the demo called name.
func Run(ctx context.Context, name string, o Options) (*Outcome, error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	for _, d := range Demos {
		if d.Name == name {
			out, err := d.run(ctx, &o)
			if out != nil {
				out.Demo = name
			}
			return out, err
		}
	}
	var names []string
	for _, d := range Demos {
		names = append(names, d.Name)
	}
	return nil, fmt.Errorf("no demo %q (there are: %s)", name, strings.Join(names, ", "))
}

// lab is one cluster of one demo run: a `skein dev` in a temporary
// directory, a REST client for its gateway and the report being printed.
type lab struct {
	ctx   context.Context
	o     *Options
	dev   *e2e.Dev
	dir   string
	hc    *http.Client
	start time.Time
	step  int
}

// startLab starts a `skein dev` cluster on free loopback ports.
func startLab(ctx context.Context, o *Options) (*lab, error) {
	dir, err := os.MkdirTemp("", "skein-lab-")
	if err != nil {
		return nil, err
	}
	l := &lab{ctx: ctx, o: o, dir: dir, hc: &http.Client{Timeout: 60 * time.Second}, start: time.Now()}
	fmt.Fprintf(o.Out, "starting a cluster (3 controllers, 3 storage nodes, 2 group coordinators, a gateway) in %s\n", dir)
	dev, err := e2e.StartDev(o.BinDir, dir, 60*time.Second)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	l.dev = dev
	l.start = time.Now()
	l.say("the cluster is up: REST %s", dev.BaseURL)
	return l, nil
}

// stop resumes anything paused and stops the cluster. Its data is removed
// unless the demo failed or KeepData is set.
func (l *lab) stop(failed bool) {
	if l == nil || l.dev == nil {
		return
	}
	if ps, err := l.dev.Processes(); err == nil {
		for _, p := range ps {
			_ = syscall.Kill(p.PID, syscall.SIGCONT)
		}
	}
	if err := l.dev.Stop(30 * time.Second); err != nil && failed {
		fmt.Fprintf(l.o.Out, "stopping the cluster: %v\n", err)
	}
	if failed || l.o.KeepData {
		fmt.Fprintf(l.o.Out, "the cluster's data and logs are kept in %s\n", l.dir)
		return
	}
	os.RemoveAll(l.dir)
}

// say prints one line of the report, stamped with the time since the
// cluster came up.
func (l *lab) say(format string, args ...any) {
	fmt.Fprintf(l.o.Out, "[%5.1fs] %s\n", time.Since(l.start).Seconds(), fmt.Sprintf(format, args...))
}

// stepf prints a numbered step.
func (l *lab) stepf(format string, args ...any) {
	l.step++
	l.say("%d. %s", l.step, fmt.Sprintf(format, args...))
}

// note prints an indented line without a time.
func (l *lab) note(format string, args ...any) {
	fmt.Fprintf(l.o.Out, "         %s\n", fmt.Sprintf(format, args...))
}

// storagePID answers the pid of storage node id, from cluster.json.
func (l *lab) storagePID(id int32) (int, error) {
	ps, err := l.dev.Processes()
	if err != nil {
		return 0, err
	}
	for _, p := range ps {
		if p.Role == "storage" && int32(p.ID) == id {
			return p.PID, nil
		}
	}
	return 0, fmt.Errorf("no storage node %d in cluster.json", id)
}

// signal sends sig to each storage node of ids.
func (l *lab) signal(sig syscall.Signal, ids ...int32) error {
	for _, id := range ids {
		pid, err := l.storagePID(id)
		if err != nil {
			return err
		}
		if err := syscall.Kill(pid, sig); err != nil {
			return fmt.Errorf("%v to storage-%d (pid %d): %w", sig, id, pid, err)
		}
	}
	return nil
}

// waitFor retries f every 100 ms until it answers nil or timeout passes.
func (l *lab) waitFor(timeout time.Duration, what string, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v: %w", what, timeout, err)
		}
		select {
		case <-l.ctx.Done():
			return l.ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// audit checks the history against the final read of the topic and prints
// what it found in a few lines (the whole table when Verbose).
func (l *lab) audit(h *history.Recorder, log history.Log) *history.Result {
	res := history.Check(h.History(), log, history.Options{MaxExamples: 3})
	if l.o.Verbose {
		for _, line := range strings.Split(strings.TrimRight(res.String(), "\n"), "\n") {
			l.note("%s", line)
		}
		return res
	}
	var found []string
	counts := res.Counts()
	for _, k := range history.Kinds {
		if counts[k] > 0 {
			found = append(found, fmt.Sprintf("%s %d", k, counts[k]))
		}
	}
	if len(found) == 0 {
		l.note("audit (libs/history): %d acknowledged, %d not written, %d unknown; no anomaly", res.Acknowledged, res.NotWritten, res.Unknown)
	} else {
		l.note("audit (libs/history): %d acknowledged, %d not written, %d unknown; anomalies: %s",
			res.Acknowledged, res.NotWritten, res.Unknown, strings.Join(found, ", "))
	}
	return res
}

// failedCounts counts the failed sends of a history by error code.
func failedCounts(h history.History) map[string]int {
	out := map[string]int{}
	for _, s := range h.Sends {
		if s.Outcome == history.Written {
			continue
		}
		code := s.Err
		if i := strings.IndexByte(code, ':'); i > 0 {
			code = code[:i]
		}
		out[code]++
	}
	return out
}

// describeFailed says which errors the failed sends had, most common first.
func describeFailed(m map[string]int) string {
	type kv struct {
		k string
		n int
	}
	var all []kv
	for k, n := range m {
		all = append(all, kv{k, n})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n || all[i].n == all[j].n && all[i].k < all[j].k })
	var parts []string
	for _, e := range all {
		parts = append(parts, fmt.Sprintf("%d %s", e.n, e.k))
	}
	return strings.Join(parts, ", ")
}

// errNoLoss marks an acks=1 run where the crash lost nothing.
var errNoLoss = errors.New("nothing was lost")
