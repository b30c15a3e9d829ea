//go:build integration

package fault

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"skein/libs/history"
	"skein/tests/faultkit"
)

// fullDiskBound is how long writers may wait for acknowledgements after the
// leader's disk fills: its next append fails, its heartbeat says so, the
// controller fences it and another ISR member leads.
const fullDiskBound = 5 * time.Second

// The partition leader's log directory is a small tmpfs, filled to the
// last byte under acks=all writes. Its next append fails with ENOSPC: the
// producer is answered KAFKA_STORAGE_ERROR (retriable), the log refuses
// writes, the node's heartbeat says its log directory failed and the
// controller fences it — out of the ISR, leadership moved to a follower —
// so writers go on within fullDiskBound. The process stays up, fenced,
// while the disk is full. Once space is freed it recovers its logs from
// the disk (the probe wants 1 MiB), is unfenced, catches up and is back in
// the ISR; led from it again, the whole partition reads back with no
// acknowledged record lost, none twice. It needs root (mount).
//
// Run twice: with the log directory alone on the tmpfs, and with the whole
// data directory there, so that the checkpoint store's writes find the disk
// full too (they fail and are retried; the process stays up).
func TestFullDiskMovesLeadershipAndRecovers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts a tmpfs: run it as root (make test does, on the project's machines)")
	}
	t.Run("logs", func(t *testing.T) { fullDisk(t, "logs") })
	t.Run("data-dir", func(t *testing.T) { fullDisk(t, "") })
}

// fullDisk runs TestFullDiskMovesLeadershipAndRecovers with the tmpfs at
// sub of the leader's data directory.
func fullDisk(t *testing.T, sub string) {
	d := newDiskTest(t, "diskfull")
	p := d.c.describe(d.topic)[0]
	victim := p.Replicas[0] // the preferred replica: a preferred election makes it lead
	t.Logf("leader storage-%d, replicas %v, isr %v: storage-%d's data directory (%q of it) goes on a tmpfs", p.Leader, p.Replicas, p.ISR, victim, sub)

	d.produceFor(2*time.Second, 100)
	n := d.kill(victim)
	logs := filepath.Join(n.dataDir, sub)
	unmount, err := faultkit.MountTmpfs(logs, "64m")
	if unmount != nil {
		t.Cleanup(func() {
			if err := unmount(); err != nil {
				t.Error(err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	from := d.restart(n)
	d.waitHosting(n, from, 20*time.Second)
	d.c.eventually(rejoinBound, fmt.Sprintf("storage-%d back in the ISR", victim), func() error {
		if p := d.c.describe(d.topic); len(p) != 1 || !slices.Contains(p[0].ISR, victim) {
			return fmt.Errorf("%+v", p)
		}
		return nil
	})
	d.leadFrom(victim)
	d.produceFor(time.Second, 50)

	filler := filepath.Join(logs, "filler")
	fillAt := time.Now()
	filled, err := faultkit.FillDisk(filler)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("storage-%d's log directory filled with %d MiB at %s", victim, filled>>20, fillAt.Format("15:04:05.000"))

	var moved time.Time
	d.c.eventually(15*time.Second, fmt.Sprintf("leadership moved off storage-%d and storage-%d out of the ISR", victim, victim), func() error {
		if p := d.c.describe(d.topic); len(p) != 1 || p[0].Leader == victim || p[0].Leader < 0 || slices.Contains(p[0].ISR, victim) {
			return fmt.Errorf("%+v", p)
		}
		moved = time.Now()
		return nil
	})
	// Fenced the whole time the disk stays full, not now and then: a node
	// that finds room where its logs are not would be unfenced, fail its
	// next appends and be fenced again, over and over.
	states := map[string]int{}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			states[d.brokerState(victim)]++
		}
	}()
	d.produceFor(2*time.Second, 100)
	<-watched
	if len(states) != 1 || states["FENCED"] == 0 {
		t.Errorf("storage-%d's states while its disk is full, with how often each was seen: %v; want FENCED only", victim, states)
	}
	select {
	case <-n.exited:
		t.Fatalf("storage-%d exited when its disk filled", victim)
	default:
	}
	fullFor := time.Since(fillAt)
	gap := history.LongestGap(d.h.History().AckTimes(0), fillAt, time.Now())
	t.Logf("storage-%d lost leadership and the ISR %v after the disk filled; longest gap between acknowledgements %v (bound %v); still up and FENCED",
		victim, moved.Sub(fillAt).Round(time.Millisecond), gap.Round(time.Millisecond), fullDiskBound)
	if gap > fullDiskBound {
		t.Errorf("no acknowledgement for %v after the leader's disk filled (bound %v)", gap.Round(time.Millisecond), fullDiskBound)
	}
	if !d.logSays(n, from, "log directory failed") {
		t.Errorf("storage-%d's log does not say its log directory failed", victim)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freedAt := time.Now()
	d.c.eventually(rejoinBound, fmt.Sprintf("storage-%d unfenced and back in the ISR", victim), func() error {
		if st := d.brokerState(victim); st != "ALIVE" {
			return fmt.Errorf("storage-%d %s", victim, st)
		}
		if p := d.c.describe(d.topic); len(p) != 1 || !slices.Contains(p[0].ISR, victim) {
			return fmt.Errorf("%+v", p)
		}
		return nil
	})
	t.Logf("disk full for %v; after space was freed storage-%d was unfenced and back in the ISR in %v (bound %v)",
		fullFor.Round(time.Millisecond), victim, time.Since(freedAt).Round(time.Millisecond), rejoinBound)
	if !d.logSays(n, from, "log directory writable again") {
		t.Errorf("storage-%d's log does not say its log directory recovered", victim)
	}
	d.produceFor(2*time.Second, 100)
	d.stopClients()
	d.leadFrom(victim)
	d.audit(victim)
}

// brokerState answers the broker's state in GET /v1/cluster.
func (d *diskTest) brokerState(id int32) string {
	d.t.Helper()
	var cl struct {
		Brokers []struct {
			ID    int32  `json:"id"`
			State string `json:"state"`
		} `json:"brokers"`
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.c.do(ctx, "GET", "/v1/cluster", nil, &cl); err != nil {
		return err.Error()
	}
	for _, b := range cl.Brokers {
		if b.ID == id {
			return b.State
		}
	}
	return "absent"
}

// logSays reports whether the node's log, after offset from, has a line
// whose message starts with msg.
func (d *diskTest) logSays(n *storageNode, from int64, msg string) bool {
	raw, err := os.ReadFile(n.logPath)
	if err != nil || int64(len(raw)) < from {
		return false
	}
	return strings.Contains(string(raw[from:]), `"msg":"`+msg)
}
