//go:build integration

package fault

import (
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"skein/libs/history"
)

// pulse pauses pid for on, then lets it run for off, until stop closes.
func pulse(pid int, on, off time.Duration, stop <-chan struct{}) {
	for {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
		time.Sleep(on)
		_ = syscall.Kill(pid, syscall.SIGCONT)
		select {
		case <-stop:
			return
		case <-time.After(off):
		}
	}
}

// A slow node — paused for 300 ms of every second, a stalling disk or a
// starved CPU — is slow, not dead: as leader it keeps its leadership and
// its followers (they keep up, so they stay in the ISR), as follower it
// stays in the ISR; writers see acknowledgements at least every pause plus
// a round trip, never a stall, and nothing is lost or duplicated.
func TestSlowNodeIsNotDead(t *testing.T) {
	c := startDev(t)
	const topic = "slow"
	parts := c.createTopic(topic, 1, 3, 2)
	leader := parts[0].Leader
	follower := parts[0].ISR[0]
	if follower == leader {
		follower = parts[0].ISR[1]
	}
	h := history.NewRecorder()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go c.restProducer(h, topic, []int32{0}, "rest", stop, &wg)
	go c.tail(h, topic, 0, stop, &wg)
	c.eventually(20*time.Second, "acknowledgements before the pulses", func() error {
		if n := h.AckCount(0); n < 50 {
			return fmt.Errorf("%d", n)
		}
		return nil
	})

	for _, victim := range []struct {
		role string
		id   int32
	}{{"leader", leader}, {"follower", follower}} {
		pulses := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			pulse(c.storagePID(victim.id), 300*time.Millisecond, 700*time.Millisecond, pulses)
		}()
		from := time.Now()
		before := h.AckCount(0)
		time.Sleep(10 * time.Second)
		close(pulses)
		<-done
		to := time.Now()
		gap := history.LongestGap(h.History().AckTimes(0), from, to)
		p := c.describe(topic)[0]
		t.Logf("slow %s (storage-%d, 300 ms paused every second for 10 s): %d acknowledgements, longest gap %v; after: leader %d, isr %v",
			victim.role, victim.id, h.AckCount(0)-before, gap.Round(time.Millisecond), p.Leader, p.ISR)
		if gap > 2*time.Second {
			t.Errorf("slow %s: writers stalled %v", victim.role, gap.Round(time.Millisecond))
		}
		if p.Leader != leader {
			t.Errorf("slow %s: leadership moved from %d to %d: a slow node was taken for dead", victim.role, leader, p.Leader)
		}
		if !slices.Contains(p.ISR, victim.id) {
			t.Errorf("slow %s: storage-%d left the ISR %v although it keeps up", victim.role, victim.id, p.ISR)
		}
	}
	close(stop)
	wg.Wait()
	audit(t, h, history.Log{0: c.readAll(topic, 0)})
}
