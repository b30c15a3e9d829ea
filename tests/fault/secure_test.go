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

// The failover audit on a secured cluster (skein dev --secure: mutual TLS
// on every hop, HTTPS, TLS Raft, encrypted gossip): acks=all REST
// producers and a tailing reader over HTTPS while the partition's leader is
// SIGKILLed; another ISR member leads and the audit finds every
// acknowledged record once, nothing lost.
func TestSecureClusterLeaderKillLosesNothing(t *testing.T) {
	c := startDev(t, "--secure")
	p := c.createTopic("secure-failover", 1, 3, 2)[0]
	h := history.NewRecorder()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var once sync.Once
	stopClients := func() { once.Do(func() { close(stop) }); wg.Wait() }
	t.Cleanup(func() { once.Do(func() { close(stop) }) })
	wg.Add(2)
	go c.restProducer(h, "secure-failover", []int32{0}, "rest", stop, &wg)
	go c.tail(h, "secure-failover", 0, stop, &wg)

	c.eventually(20*time.Second, "acknowledgements before the kill", func() error {
		if n := h.AckCount(0); n < 200 {
			return fmt.Errorf("%d", n)
		}
		return nil
	})
	leader := p.Leader
	if err := syscall.Kill(c.storagePID(leader), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed, before := time.Now(), h.AckCount(0)
	c.eventually(15*time.Second, "a new leader", func() error {
		if q := c.describe("secure-failover"); len(q) != 1 || q[0].Leader < 0 || q[0].Leader == leader || slices.Contains(q[0].ISR, leader) {
			return fmt.Errorf("%+v", q)
		}
		return nil
	})
	c.eventually(20*time.Second, "acknowledgements after the kill", func() error {
		if n := h.AckCount(0) - before; n < 200 {
			return fmt.Errorf("%d", n)
		}
		return nil
	})
	t.Logf("storage-%d (leader) SIGKILLed; a new leader and 200 more acknowledgements %v later", leader, time.Since(killed).Round(time.Millisecond))
	stopClients()
	res := audit(t, h, history.Log{0: c.readAll("secure-failover", 0)})
	if res.Acknowledged < 400 {
		t.Errorf("%d acknowledged, want at least 400", res.Acknowledged)
	}
}
