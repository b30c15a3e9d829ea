package lab

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"skein/libs/history"
)

// The window the followers are paused for before the leader is killed.
// Below gossip's suspicion timeout and the broker session timeout (2 s), so
// the followers stay in the ISR and one of them is elected cleanly.
var acks1Windows = []time.Duration{400 * time.Millisecond, 800 * time.Millisecond}

func runAcks1Loss(ctx context.Context, o *Options) (*Outcome, error) {
	fmt.Fprintln(o.Out, "demo acks1-loss: what acks=1 gives up")
	total := &Outcome{}
	for i, w := range acks1Windows {
		out, err := leaderCrash(ctx, o, 1, w)
		if out != nil {
			out.Attempts = i + 1
			total = out
		}
		if errors.Is(err, errNoLoss) && i+1 < len(acks1Windows) {
			fmt.Fprintf(o.Out, "\nnothing was lost this time: the followers had copied the tail before the crash. Again with the followers paused for %v.\n", acks1Windows[i+1])
			continue
		}
		if errors.Is(err, errNoLoss) {
			fmt.Fprintln(o.Out, "\nnothing was lost in any attempt: the lesson did not show on this machine this time.")
			return total, nil
		}
		return total, err
	}
	return total, nil
}

func runAcksAll(ctx context.Context, o *Options) (*Outcome, error) {
	fmt.Fprintln(o.Out, "demo acks-all: the acks=1 crash again, with acks=all and min.insync.replicas=2")
	out, err := leaderCrash(ctx, o, -1, acks1Windows[0])
	if out != nil {
		out.Attempts = 1
	}
	return out, err
}

// leaderCrash produces to a one-partition topic (RF 3,
// min.insync.replicas=2) with acks, pauses both followers for window so
// the leader alone holds what arrives meanwhile, SIGKILLs the leader,
// resumes the followers, waits for one of them to be elected, and audits
// what the producer was told against what the partition holds.
func leaderCrash(ctx context.Context, o *Options, acks int, window time.Duration) (out *Outcome, err error) {
	l, err := startLab(ctx, o)
	if err != nil {
		return nil, err
	}
	defer func() { l.stop(err != nil && !errors.Is(err, errNoLoss)) }()
	acksName := "acks=1"
	if acks == -1 {
		acksName = "acks=all"
	}
	topic := "lab-acks"
	ps, err := l.createTopic(topic, 1, map[string]string{"min.insync.replicas": "2"})
	if err != nil {
		return nil, err
	}
	p := ps[0]
	leader, followers := p.Leader, p.followers()
	l.stepf("created topic %s: 1 partition on 3 storage nodes, min.insync.replicas=2; leader storage-%d, followers %s", topic, leader, nodes(followers))

	h := history.NewRecorder()
	var (
		stop    = make(chan struct{})
		wg      sync.WaitGroup
		sent    atomic.Int64
		lastErr atomic.Value
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for seq := 0; ; seq++ {
			select {
			case <-stop:
				return
			default:
			}
			values := make([]string, 5)
			for i := range values {
				values[i] = fmt.Sprintf("r%d", seq*5+i)
			}
			codes := l.produce(h, "producer", topic, 0, acks, values, 15*time.Second)
			sent.Add(int64(len(values)))
			for _, c := range codes {
				if c != "" {
					lastErr.Store(c)
					time.Sleep(50 * time.Millisecond) // do not spin while there is no leader
					break
				}
			}
		}
	}()
	stopProducer := func() { close(stop); wg.Wait() }
	defer func() {
		select {
		case <-stop:
		default:
			stopProducer()
		}
	}()

	if err := l.waitFor(20*time.Second, "the first acknowledgements", func() error {
		if n := h.AckCount(0); n < 200 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	// Every replica has what was acknowledged so far once the high
	// watermark (the lowest log end over the ISR) passes it.
	target := maxAckedOffset(h) + 1
	caughtUp := time.Now()
	if err := l.waitFor(20*time.Second, "the followers copying the first records", func() error {
		d, err := l.partition(topic, 0)
		if err != nil {
			return err
		}
		if int64(d.HW) < target {
			return fmt.Errorf("high watermark %d, want %d", d.HW, target)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	before := h.AckCount(0)
	l.stepf("a producer sends records with %s, 5 per request: %d acknowledged so far; the high watermark passed offset %d %v later, so all three replicas have the first %d",
		acksName, before, target-1, time.Since(caughtUp).Round(time.Millisecond), target)

	if err := l.signal(syscall.SIGSTOP, followers...); err != nil {
		return nil, err
	}
	paused := time.Now()
	l.stepf("paused both followers (SIGSTOP on %s) for %v: from now on only the leader has the new records", nodes(followers), window)
	time.Sleep(window)
	duringPause := h.AckCount(0) - before
	if err := l.signal(syscall.SIGKILL, leader); err != nil {
		return nil, err
	}
	killed := time.Now()
	if err := l.signal(syscall.SIGCONT, followers...); err != nil {
		return nil, err
	}
	l.stepf("killed the leader storage-%d (SIGKILL) %v into the pause and resumed the followers; %d more records were acknowledged while the followers were paused",
		leader, killed.Sub(paused).Round(time.Millisecond), duringPause)

	var np partitionDesc
	if err := l.waitFor(20*time.Second, "a new leader", func() error {
		var err error
		if np, err = l.partition(topic, 0); err != nil {
			return err
		}
		if np.Leader < 0 || np.Leader == leader {
			return fmt.Errorf("leader %d, ISR %v", np.Leader, np.ISR)
		}
		return nil
	}); err != nil {
		l.note("the partition has no new leader: the followers were declared dead while paused, so only the dead leader was in the ISR, and a clean election waits for it to come back")
		return nil, err
	}
	elected := time.Now()
	l.stepf("storage-%d is the new leader %v after the kill (leader epoch %d, ISR %v): it was in the ISR, so this is a clean election",
		np.Leader, elected.Sub(killed).Round(time.Millisecond), np.Epoch, np.ISR)

	// Writes go on at the new leader for a moment.
	afterElect := h.AckCount(0)
	if err := l.waitFor(20*time.Second, "acknowledgements from the new leader", func() error {
		if h.AckCount(0) < afterElect+50 {
			return fmt.Errorf("%d acknowledged since the election", h.AckCount(0)-afterElect)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	stopProducer()
	hist := h.History()
	failed := failedCounts(hist)
	nFailed := 0
	for _, n := range failed {
		nFailed += n
	}
	l.stepf("the producer went on against the new leader, then stopped: %d records sent, %d acknowledged, %d failed", sent.Load(), h.AckCount(0), nFailed)
	if nFailed > 0 {
		l.note("failed sends, each answered with an error the producer saw: %s", describeFailed(failed))
	}

	log, err := l.readAll(topic, 0)
	if err != nil {
		return nil, err
	}
	l.stepf("read the partition back from offset 0: %d records", len(log))
	res := l.audit(h, history.Log{0: log})
	out = &Outcome{Acknowledged: res.Acknowledged, Lost: res.Count(history.LostWrite), Failed: failed, Audit: res}

	fmt.Fprintln(o.Out)
	if out.Lost > 0 {
		lost := res.Of(history.LostWrite)
		offs := make([]int64, 0, len(lost))
		for _, a := range lost {
			offs = append(offs, a.Offset)
		}
		slices.Sort(offs)
		fmt.Fprintf(o.Out, "LOST: %d of %d acknowledged records are gone (acknowledged at offsets %d to %d).\n", out.Lost, out.Acknowledged, offs[0], offs[len(offs)-1])
		if v, ok := log[offs[0]]; ok {
			fmt.Fprintf(o.Out, "Offset %d now holds another record, %q: the new leader handed out the same offsets again.\n", offs[0], v)
		}
	} else {
		fmt.Fprintf(o.Out, "0 of %d acknowledged records lost.\n", out.Acknowledged)
	}
	if acks == 1 {
		fmt.Fprintln(o.Out, "Why: acks=1 answers as soon as the leader has written a record, before any follower has it. The followers were paused, so the records acknowledged then existed only on the leader; the leader died, a follower that never had them was elected (cleanly: it was in the ISR), and the records are gone for good. The old leader, when it returns, truncates its log to the new leader's.")
		if out.Lost == 0 {
			return out, errNoLoss
		}
		return out, nil
	}
	fmt.Fprintln(o.Out, "Why: acks=all answers only once every in-sync replica has a record (and refuses when fewer than min.insync.replicas are in sync). A record that reached the leader while the followers were paused could not be acknowledged, so every acknowledged record was on the follower that was elected. The requests caught by the crash were re-sent by the gateway to the new leader under the same producer id and sequence numbers, or answered with an error: a failed send is visible, a lost acknowledged one is not possible here.")
	return out, nil
}

// maxAckedOffset answers the highest acknowledged offset of partition 0
// (-1 when none).
func maxAckedOffset(h *history.Recorder) int64 {
	top := int64(-1)
	for _, s := range h.History().Acks(0) {
		top = max(top, s.Offset)
	}
	return top
}
