package lab

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"time"

	"skein/libs/history"
)

func runMinISR(ctx context.Context, o *Options) (out *Outcome, err error) {
	fmt.Fprintln(o.Out, "demo min-isr: what min.insync.replicas refuses, and what acks=1 does not")
	l, err := startLab(ctx, o)
	if err != nil {
		return nil, err
	}
	defer func() { l.stop(err != nil) }()
	topic := "lab-min-isr"
	ps, err := l.createTopic(topic, 1, map[string]string{"min.insync.replicas": "2"})
	if err != nil {
		return nil, err
	}
	p := ps[0]
	leader, followers := p.Leader, p.followers()
	l.stepf("created topic %s: 1 partition on 3 storage nodes, min.insync.replicas=2; leader storage-%d, followers %s", topic, leader, nodes(followers))

	h := history.NewRecorder()
	seq := 0
	batch := func(prefix string) []string {
		v := make([]string, 5)
		for i := range v {
			v[i] = fmt.Sprintf("%s-%d", prefix, seq)
			seq++
		}
		return v
	}
	// The new partition's leader may learn of it a moment after the gateway.
	if err := l.waitFor(10*time.Second, "a first acks=all produce", func() error {
		if c := l.produce(h, "acks-all", topic, 0, -1, batch("all-before"), 10*time.Second); c[0] != "" {
			return fmt.Errorf("%s", c[0])
		}
		return nil
	}); err != nil {
		return nil, err
	}
	l.produce(h, "acks-1", topic, 0, 1, batch("one-before"), 10*time.Second)
	l.stepf("with all three in sync, acks=all and acks=1 records are acknowledged (%d of %d)", h.AckCount(0), seq)

	if err := l.signal(syscall.SIGSTOP, followers...); err != nil {
		return nil, err
	}
	stopped := time.Now()
	l.stepf("stopped both followers (SIGSTOP on %s)", nodes(followers))
	var np partitionDesc
	if err := l.waitFor(20*time.Second, "the ISR shrinking to the leader", func() error {
		var err error
		if np, err = l.partition(topic, 0); err != nil {
			return err
		}
		if !slices.Equal(np.ISR, []int32{leader}) {
			return fmt.Errorf("leader %d, ISR %v", np.Leader, np.ISR)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	l.stepf("%v later the controller had declared them dead and shrunk the ISR to [%d]: one replica in sync, fewer than min.insync.replicas=2", time.Since(stopped).Round(time.Millisecond), leader)

	// What a REST caller sees: the gateway's producer retries the
	// retriable NOT_ENOUGH_REPLICAS, as Kafka's producer does, until its
	// delivery timeout.
	type restAnswer struct {
		codes []string
		took  time.Duration
	}
	restDone := make(chan restAnswer, 1)
	if !o.Short {
		vals := batch("all-rest")
		go func() {
			start := time.Now()
			codes := l.produce(h, "acks-all-rest", topic, 0, -1, vals, 45*time.Second)
			restDone <- restAnswer{codes, time.Since(start)}
		}()
	}

	refused := map[string]int{}
	for range 3 {
		start := time.Now()
		code := l.produceToLeader(h, "acks-all-direct", topic, 0, leader, -1, batch("all-during"))
		if code == "" {
			code = "acknowledged"
		}
		refused[code] += 5
		l.note("acks=all, 5 records sent straight to the leader: %s (answered in %v)", code, time.Since(start).Round(time.Millisecond))
	}
	l.stepf("acks=all is refused by the leader: %s", describeFailed(refused))
	ok := 0
	for range 3 {
		start := time.Now()
		codes := l.produce(h, "acks-1", topic, 0, 1, batch("one-during"), 15*time.Second)
		for _, c := range codes {
			if c == "" {
				ok++
			}
		}
		l.note("acks=1, 5 records through the gateway: %s (answered in %v)", summarize(codes), time.Since(start).Round(time.Millisecond))
	}
	l.stepf("acks=1 goes on: %d of 15 records acknowledged, held by the leader alone", ok)
	var rest restAnswer
	if !o.Short {
		l.stepf("meanwhile 5 acks=all records went through the gateway's REST API: its producer retries NOT_ENOUGH_REPLICAS until its delivery timeout (30 s)...")
		rest = <-restDone
		l.note("answered after %v: %s", rest.took.Round(100*time.Millisecond), summarize(rest.codes))
	}

	if err := l.signal(syscall.SIGCONT, followers...); err != nil {
		return nil, err
	}
	resumed := time.Now()
	if err := l.waitFor(30*time.Second, "the followers back in the ISR", func() error {
		var err error
		if np, err = l.partition(topic, 0); err != nil {
			return err
		}
		if len(np.ISR) != 3 {
			return fmt.Errorf("leader %d, ISR %v", np.Leader, np.ISR)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	l.stepf("resumed the followers: back in the ISR %v after %v (they re-registered and copied what they missed)", np.ISR, time.Since(resumed).Round(time.Millisecond))
	if err := l.waitFor(15*time.Second, "an acks=all produce after the heal", func() error {
		if c := l.produce(h, "acks-all", topic, 0, -1, batch("all-after"), 10*time.Second); c[0] != "" {
			return fmt.Errorf("%s", c[0])
		}
		return nil
	}); err != nil {
		return nil, err
	}
	l.stepf("acks=all is acknowledged again")

	log, err := l.readAll(topic, 0)
	if err != nil {
		return nil, err
	}
	l.stepf("read the partition back: %d records", len(log))
	res := l.audit(h, history.Log{0: log})
	out = &Outcome{Acknowledged: res.Acknowledged, Lost: res.Count(history.LostWrite), Failed: failedCounts(h.History()), Audit: res, Attempts: 1}
	fmt.Fprintln(o.Out)
	inLog := "none of them is in the log (they were refused before the append)"
	if n := res.Count(history.FailedWritten); n > 0 {
		inLog = fmt.Sprintf("yet %d records answered as not written are in the log", n)
	}
	fmt.Fprintf(o.Out, "REFUSED: %d acks=all records with NOT_ENOUGH_REPLICAS; %s. %d acks=1 records were acknowledged meanwhile; %d acknowledged records lost.\n",
		out.FailedWith("NOT_ENOUGH_REPLICAS"), inLog, ok, out.Lost)
	if !o.Short {
		fmt.Fprintf(o.Out, "Through the gateway, acks=all waited %v and was answered %s: its producer kept retrying the leader's NOT_ENOUGH_REPLICAS until the delivery timeout, as Kafka's producer does.\n",
			rest.took.Round(100*time.Millisecond), summarize(rest.codes))
	}
	fmt.Fprintln(o.Out, "Why: acks=all promises that min.insync.replicas replicas hold a record before it is acknowledged. With the followers out of the ISR the leader cannot keep that promise, so it refuses before writing (NOT_ENOUGH_REPLICAS, a definite and retriable failure) instead of acknowledging a record that one more crash would lose. acks=1 asks only for the leader's copy, so it goes on, and those records were on one disk until the followers came back.")
	return out, nil
}

// summarize says what a request's records were answered, e.g. "5
// acknowledged" or "5 NOT_ENOUGH_REPLICAS".
func summarize(codes []string) string {
	m := map[string]int{}
	for _, c := range codes {
		m[c]++
	}
	return summarizeMap(m)
}

func summarizeMap(m map[string]int) string {
	named := map[string]int{}
	for c, n := range m {
		if c == "" {
			c = "acknowledged"
		}
		named[c] += n
	}
	return describeFailed(named)
}
