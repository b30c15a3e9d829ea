package lab

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"time"

	"skein/libs/history"
)

func runUnclean(ctx context.Context, o *Options) (out *Outcome, err error) {
	fmt.Fprintln(o.Out, "demo unclean: what unclean leader election trades for availability")
	l, err := startLab(ctx, o)
	if err != nil {
		return nil, err
	}
	defer func() { l.stop(err != nil) }()
	topic := "lab-unclean"
	ps, err := l.createTopic(topic, 1, map[string]string{"unclean.leader.election.enable": "true", "min.insync.replicas": "1"})
	if err != nil {
		return nil, err
	}
	p := ps[0]
	leader, followers := p.Leader, p.followers()
	laggard, other := followers[0], followers[1]
	l.stepf("created topic %s: 1 partition on 3 storage nodes, unclean.leader.election.enable=true, min.insync.replicas=1; leader storage-%d, followers %s",
		topic, leader, nodes(followers))

	h := history.NewRecorder()
	seq := 0
	produce := func(prefix string, n int, acks int) (acked int, codes map[string]int) {
		codes = map[string]int{}
		for ; n > 0; n -= 10 {
			v := make([]string, min(n, 10))
			for i := range v {
				v[i] = fmt.Sprintf("%s-%d", prefix, seq)
				seq++
			}
			for _, c := range l.produce(h, prefix, topic, 0, acks, v, 15*time.Second) {
				if c == "" {
					acked++
				} else {
					codes[c]++
				}
			}
		}
		return acked, codes
	}
	if err := l.waitFor(10*time.Second, "a first produce", func() error {
		if n, c := produce("before", 10, -1); n != 10 {
			return fmt.Errorf("%s", describeFailed(c))
		}
		return nil
	}); err != nil {
		return nil, err
	}
	n, _ := produce("before", 40, -1)
	l.stepf("produced 50 records with acks=all: every replica has them (%d acknowledged)", n+10)

	if err := l.signal(syscall.SIGSTOP, laggard); err != nil {
		return nil, err
	}
	stopped := time.Now()
	var np partitionDesc
	if err := l.waitFor(20*time.Second, "the ISR without the paused follower", func() error {
		var err error
		if np, err = l.partition(topic, 0); err != nil {
			return err
		}
		if slices.Contains(np.ISR, laggard) {
			return fmt.Errorf("ISR %v", np.ISR)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	l.stepf("paused follower storage-%d (SIGSTOP); %v later it was declared dead and left the ISR, now %v", laggard, time.Since(stopped).Round(time.Millisecond), np.ISR)

	during, _ := produce("while-lagging", 100, -1)
	l.stepf("produced 100 more with acks=all: %d acknowledged by the ISR %v; storage-%d has none of them", during, np.ISR, laggard)

	if err := l.signal(syscall.SIGKILL, leader, other); err != nil {
		return nil, err
	}

	if err := l.waitFor(10*time.Second, "the partition offline", func() error {
		var err error
		if np, err = l.partition(topic, 0); err != nil {
			return err
		}
		if np.Leader >= 0 {
			return fmt.Errorf("leader %d", np.Leader)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	l.stepf("killed storage-%d and storage-%d (SIGKILL), the two replicas that had everything: the partition is offline (leader -1, ISR %v)", leader, other, np.ISR)
	l.note("a clean election would wait here for one of them to come back")

	if err := l.signal(syscall.SIGCONT, laggard); err != nil {
		return nil, err
	}
	resumed := time.Now()
	asked := false
	if err := l.waitFor(20*time.Second, "the lagging replica elected", func() error {
		var err error
		if np, err = l.partition(topic, 0); err != nil {
			return err
		}
		if np.Leader != laggard {
			if !asked && time.Since(resumed) > 8*time.Second {
				// The topic config elects it as soon as it is live again;
				// should that not happen, ask for the election explicitly.
				asked = true
				l.note("no leader yet: asking for an unclean election (POST /v1/leaders:elect type UNCLEAN)")
				_ = l.call(10*time.Second, "POST", "/v1/leaders:elect", map[string]any{"topic": topic, "type": "UNCLEAN"}, nil)
			}
			return fmt.Errorf("leader %d, ISR %v", np.Leader, np.ISR)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	l.stepf("resumed storage-%d: %v later it is the leader (leader epoch %d, ISR %v), elected although it was out of the ISR: an unclean election",
		laggard, time.Since(resumed).Round(time.Millisecond), np.Epoch, np.ISR)

	after := 0
	if err := l.waitFor(15*time.Second, "produces to the new leader", func() error {
		n, c := produce("after", 10, -1)
		after += n
		if n == 0 {
			return fmt.Errorf("%s", describeFailed(c))
		}
		return nil
	}); err != nil {
		return nil, err
	}
	n, _ = produce("after", 20, -1)
	after += n
	l.stepf("produced 30 more with acks=all to the new leader: %d acknowledged", after)

	log, err := l.readAll(topic, 0)
	if err != nil {
		return nil, err
	}
	l.stepf("read the partition back: %d records", len(log))
	res := l.audit(h, history.Log{0: log})
	out = &Outcome{Acknowledged: res.Acknowledged, Lost: res.Count(history.LostWrite), Failed: failedCounts(h.History()), Audit: res, Attempts: 1}
	fmt.Fprintln(o.Out)
	fmt.Fprintf(o.Out, "LOST: %d of %d acknowledged records are gone, every one of them acks=all.\n", out.Lost, out.Acknowledged)
	if lost := res.Of(history.LostWrite); len(lost) > 0 {
		if v, ok := log[lost[0].Offset]; ok {
			fmt.Fprintf(o.Out, "Offset %d was acknowledged as %q; it now holds %q, written after the election.\n", lost[0].Offset, lost[0].Value, v)
		}
	}
	fmt.Fprintln(o.Out, "Why: acks=all promises a record to the replicas in the ISR, and a clean election only ever picks a leader from the ISR. The paused follower had left the ISR, so the records acknowledged afterwards were on the two replicas that were then killed. With unclean.leader.election.enable=true the controller made the lagging replica leader rather than keep the partition offline, and everything it lacked was lost; new records took the same offsets. Leave unclean election off unless availability matters more than the data.")
	return out, nil
}
