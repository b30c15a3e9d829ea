//go:build integration

package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"skein/libs/client"
	"skein/libs/errs"
	"skein/libs/metadata"
)

// producers runs n idempotent acks=all producers against one partition until
// stop is closed, retrying each batch (same sequence) until it is
// acknowledged, and returns every acknowledgement with the epoch that gave it.
type producers struct {
	mu   sync.Mutex
	acks []Ack
	// ackAt records when and from which leader epoch each ack came.
	epochs []int32
	times  []time.Time
	wg     sync.WaitGroup
	stop   chan struct{}
}

func startProducers(t *testing.T, cl *Client, topic string, partition int32, n int) *producers {
	ps := &producers{stop: make(chan struct{})}
	for w := 0; w < n; w++ {
		pid := cl.ProducerID()
		ps.wg.Add(1)
		go func() {
			defer ps.wg.Done()
			for seq := 0; ; seq++ {
				value := fmt.Sprintf("p%d-%d", w, seq)
				batch := Batch(t, pid, int32(seq), fmt.Sprint(w), value)
				for {
					select {
					case <-ps.stop:
						return
					default:
					}
					ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
					off, epoch, _, err := cl.ProduceOnce(ctx, topic, partition, batch, -1)
					cancel()
					if err == nil {
						ps.mu.Lock()
						ps.acks = append(ps.acks, Ack{Producer: w, Seq: seq, Offset: off, Value: value})
						ps.epochs = append(ps.epochs, epoch)
						ps.times = append(ps.times, time.Now())
						ps.mu.Unlock()
						break
					}
					if errors.Is(err, errs.OutOfOrderSequenceNumber) || errors.Is(err, errs.InvalidProducerEpoch) {
						t.Errorf("producer %d seq %d: %v", w, seq, err)
						return
					}
					time.Sleep(30 * time.Millisecond)
				}
			}
		}()
	}
	return ps
}

func (ps *producers) finish() []Ack {
	close(ps.stop)
	ps.wg.Wait()
	return ps.acks
}

func (ps *producers) count() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.acks)
}

func waitAcks(t *testing.T, ps *producers, more int, d time.Duration) {
	t.Helper()
	start := ps.count()
	deadline := time.Now().Add(d)
	for ps.count() < start+more {
		if time.Now().After(deadline) {
			t.Fatalf("only %d new acknowledgements in %v (wanted %d)", ps.count()-start, d, more)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestKillLeaderLosesNoAcknowledgedRecord(t *testing.T) {
	c := Start(t, Options{StorageNodes: 3, StorageFlags: []string{"--replica-lag-max=3s"}})
	cl := NewClient(t, c.ControllerAddrs())
	cl.CreateTopic("orders", 1, 3, map[string]string{"min.insync.replicas": "2"})

	ps := startProducers(t, cl, "orders", 0, 3)
	// A reader follows the partition through it all, on a Follow stream
	// from whichever node leads.
	fl := startFollower(t, c, "orders")
	waitAcks(t, ps, 100, 30*time.Second)

	leader, epoch := cl.Leader("orders", 0)
	victim := c.StorageByID(leader)
	c.Kill(victim)
	killedAt := time.Now()
	cl.WaitFor("a new leader", 15*time.Second, func(*metadata.Image) bool {
		l, e := cl.Leader("orders", 0)
		return l >= 0 && l != leader && e > epoch
	})
	t.Logf("new leader elected %v after SIGKILL of broker %d", time.Since(killedAt), leader)
	waitAcks(t, ps, 100, 30*time.Second)

	c.Restart(victim)
	c.WaitReady(victim, 30*time.Second)
	waitAcks(t, ps, 100, 30*time.Second)
	acks := ps.finish()

	log, hw := cl.ReadAll("orders", 0)
	t.Logf("%d acknowledged, %d records below HW %d", len(acks), len(log), hw)
	CheckHistory(t, acks, log)
	// The follower saw the log as it is, each record once, in order.
	if got := fl.until(t, hw); fmt.Sprint(got) != fmt.Sprint(log) {
		t.Errorf("the follower read %d records, the log holds %d: they differ", len(got), len(log))
	}
}

// follower reads a topic's partition 0 through libs/client's Follow.
type follower struct {
	mu   sync.Mutex
	read []Entry
	next int64
	stop context.CancelFunc
	done chan error
}

func startFollower(t *testing.T, c *Cluster, topic string) *follower {
	cc, err := client.New(client.Config{Controllers: c.ControllerAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, stop := context.WithCancel(context.Background())
	f := &follower{stop: stop, done: make(chan error, 1)}
	go func() {
		f.done <- cc.Follow(ctx, client.FetchRequest{Topic: topic}, func(res *client.FetchResult) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, r := range res.Records {
				f.read = append(f.read, Entry{Offset: r.Offset, Key: string(r.Key), Value: string(r.Value)})
			}
			f.next = res.NextOffset
			return nil
		})
	}()
	t.Cleanup(stop)
	return f
}

// until waits (30 s at most) for the follower to pass offset, stops it and
// answers what it read.
func (f *follower) until(t *testing.T, offset int64) []Entry {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		f.mu.Lock()
		next := f.next
		f.mu.Unlock()
		if next >= offset {
			break
		}
		select {
		case err := <-f.done:
			t.Fatalf("the follower stopped at %d: %v", next, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower is at %d, not past %d, after 30 s", next, offset)
		}
	}
	f.stop()
	if err := <-f.done; !errors.Is(err, context.Canceled) {
		t.Errorf("the follower ended with %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.read
}

func TestPausedLeaderAcknowledgesNothingAfterFailover(t *testing.T) {
	c := Start(t, Options{StorageNodes: 3, StorageFlags: []string{"--replica-lag-max=3s"}})
	cl := NewClient(t, c.ControllerAddrs())
	cl.CreateTopic("pause", 1, 3, map[string]string{"min.insync.replicas": "2"})

	ps := startProducers(t, cl, "pause", 0, 2)
	waitAcks(t, ps, 50, 30*time.Second)
	leader, epoch := cl.Leader("pause", 0)
	victim := c.StorageByID(leader)
	c.Pause(victim)
	cl.WaitFor("a new leader past the session timeout", 20*time.Second, func(*metadata.Image) bool {
		l, e := cl.Leader("pause", 0)
		return l >= 0 && l != leader && e > epoch
	})
	electedAt := time.Now()
	_, newEpoch := cl.Leader("pause", 0)
	waitAcks(t, ps, 50, 30*time.Second)
	c.Resume(victim)
	waitAcks(t, ps, 50, 30*time.Second)
	acks := ps.finish()

	ps.mu.Lock()
	for i, at := range ps.times {
		if at.After(electedAt.Add(time.Second)) && ps.epochs[i] < newEpoch {
			t.Errorf("ack of %q at %v came from leader epoch %d after epoch %d was elected", acks[i].Value, at.Sub(electedAt), ps.epochs[i], newEpoch)
		}
	}
	ps.mu.Unlock()
	log, _ := cl.ReadAll("pause", 0)
	CheckHistory(t, acks, log)
}

func TestTwoOfThreeDownRefusesAcksAll(t *testing.T) {
	c := Start(t, Options{StorageNodes: 3, StorageFlags: []string{"--replica-lag-max=2s"}})
	cl := NewClient(t, c.ControllerAddrs())
	cl.CreateTopic("quorum", 1, 3, map[string]string{"min.insync.replicas": "2"})
	pid := cl.ProducerID()
	// The new partition's leader may learn of it a moment after the client.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, _, _, err := cl.ProduceOnce(context.Background(), "quorum", 0, Batch(t, pid, 0, "k", "before"), -1)
		if err == nil {
			break
		}
		if !errs.IsRetriable(err) || time.Now().After(deadline) {
			t.Fatalf("produce with all up: %v", err)
		}
	}
	leader, _ := cl.Leader("quorum", 0)
	var down []*Proc
	for _, p := range c.Storage {
		if int32(p.ID) != leader {
			c.Kill(p)
			down = append(down, p)
		}
	}
	cl.WaitFor("ISR shrunk to the leader", 20*time.Second, func(im *metadata.Image) bool {
		p, ok := im.Partition("quorum", 0)
		return ok && len(p.GetIsr()) == 1
	})
	leader2, _ := cl.Leader("quorum", 0)
	if leader2 != leader {
		t.Fatalf("leader moved from %d to %d", leader, leader2)
	}
	for i := 1; i <= 20; i++ {
		_, _, _, err := cl.ProduceOnce(context.Background(), "quorum", 0, Batch(t, pid, int32(i), "k", fmt.Sprintf("during-%d", i)), -1)
		if !errors.Is(err, errs.NotEnoughReplicas) {
			t.Fatalf("produce %d with 2 of 3 down: %v, want NOT_ENOUGH_REPLICAS", i, err)
		}
	}
	log, hw := cl.ReadAll("quorum", 0)
	if hw != 1 || len(log) != 1 || log[0].Value != "before" {
		t.Fatalf("log after refused produces: HW %d %v", hw, log)
	}
}

// A rolling restart with SIGTERM: each node hands its leaderships away before
// it stops (controlled shutdown), comes back on the same data directory, and
// producers running throughout lose nothing.
func TestRollingRestartLosesNothing(t *testing.T) {
	c := Start(t, Options{StorageNodes: 3, StorageFlags: []string{"--replica-lag-max=3s"}})
	cl := NewClient(t, c.ControllerAddrs())
	cl.CreateTopic("rolling", 1, 3, map[string]string{"min.insync.replicas": "2"})
	ps := startProducers(t, cl, "rolling", 0, 2)
	waitAcks(t, ps, 50, 30*time.Second)
	for _, p := range c.Storage {
		cl.WaitFor("full ISR before restarting the next node", 30*time.Second, func(im *metadata.Image) bool {
			pr, ok := im.Partition("rolling", 0)
			return ok && len(pr.GetIsr()) == 3
		})
		c.Terminate(p, 20*time.Second)
		// The node hands leadership away before it exits; the log says so if
		// the controller could not move it.
		if tail := c.Tail(p, 200); strings.Contains(tail, "controlled shutdown failed") || strings.Contains(tail, "controlled shutdown left partitions") {
			t.Errorf("broker %d did not hand its leaderships away:\n%s", p.ID, tail)
		}
		cl.WaitFor("leadership away from the stopped node", 10*time.Second, func(*metadata.Image) bool {
			l, _ := cl.Leader("rolling", 0)
			return l >= 0 && l != int32(p.ID)
		})
		waitAcks(t, ps, 30, 30*time.Second)
		c.Restart(p)
		c.WaitReady(p, 30*time.Second)
	}
	waitAcks(t, ps, 30, 30*time.Second)
	acks := ps.finish()
	log, _ := cl.ReadAll("rolling", 0)
	t.Logf("%d acknowledged through a rolling restart, %d records below the HW", len(acks), len(log))
	CheckHistory(t, acks, log)
}
