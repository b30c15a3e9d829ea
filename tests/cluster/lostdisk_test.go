//go:build integration

package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/gen/skein/controller/v1/controllerv1grpc"
	"skein/libs/metadata"
)

// A storage node that comes back with its logs gone (a replaced disk, a
// log volume that was not kept, here under a kept data directory with its
// id and checkpoints) does not lead the partitions it was the last in-sync
// replica of: its records are gone, and leading would answer an empty log
// where records were acknowledged. Such a partition stays offline, its ISR
// empty, until an unclean election, the operator's call. A restart that
// keeps the directory leads again with what it holds. (A whole data
// directory wiped: TestUncleanElectionPassesOverAnEmptiedReplica.)
func TestStorageBackWithAnEmptyDataDirectory(t *testing.T) {
	c := Start(t, Options{StorageNodes: 2})
	cl := NewClient(t, c.ControllerAddrs())
	cl.CreateTopic("solo", 1, 1, nil) // one replica: always the last in sync
	w := newWriter(cl, "solo")
	for i := range 3 {
		if off := w.write(t, fmt.Sprint("before-", i)); off != int64(i) {
			t.Fatalf("record %d written at %d", i, off)
		}
	}
	id, _ := cl.Leader("solo", 0)
	victim := c.StorageByID(id)

	c.Kill(victim)
	waitLive(t, cl, id, false)
	if err := os.RemoveAll(filepath.Join(victim.DataDir, "logs")); err != nil {
		t.Fatal(err)
	}
	c.Restart(victim)
	c.WaitReady(victim, 30*time.Second)
	waitLive(t, cl, id, true)
	if !strings.Contains(c.Tail(victim, 100000), "a new data directory id") {
		t.Errorf("the node did not log its new directory id; its log:\n%s", c.Tail(victim, 30))
	}
	// The election (or none) is in the same metadata change as the
	// registration that made the node live.
	if p, _ := cl.Image().Partition("solo", 0); p.GetLeader() != -1 || len(p.GetIsr()) != 0 {
		t.Fatalf("after the node came back with an empty directory: leader %d, ISR %v; want -1 and none", p.GetLeader(), p.GetIsr())
	}
	// Every controller applies the change and says why the partition is
	// offline.
	logged := func(ctrl *Proc) bool {
		for _, line := range strings.Split(c.Tail(ctrl, 100000), "\n") {
			if strings.Contains(line, `"msg":"partition offline: its last in-sync replica lost its logs"`) &&
				strings.Contains(line, `"topic":"solo"`) && strings.Contains(line, fmt.Sprintf(`"broker":%d`, id)) {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, ctrl := range c.Controllers {
		for !logged(ctrl) {
			if time.Now().After(deadline) {
				t.Fatalf("controller %d did not log the lost replica; its log:\n%s", ctrl.ID, c.Tail(ctrl, 30))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// The operator's unclean election: the node, the only replica, leads
	// its empty log.
	electUnclean(t, cl, "solo", 0)
	// A new producer: the emptied log knows nothing of the first.
	if off := newWriter(cl, "solo").write(t, "after"); off != 0 {
		t.Fatalf("first record after the unclean election at %d, want 0 (an empty log)", off)
	}

	// A restart that keeps the directory: the same id, the node leads again.
	c.Kill(victim)
	waitLive(t, cl, id, false)
	c.Restart(victim)
	c.WaitReady(victim, 30*time.Second)
	cl.WaitFor(fmt.Sprintf("broker %d leading solo-0 again", id), 30*time.Second, func(img *metadata.Image) bool {
		p, _ := img.Partition("solo", 0)
		return p.GetLeader() == id
	})
	got, hw := cl.ReadAll("solo", 0)
	if hw != 1 || len(got) != 1 || got[0].Value != "after" {
		t.Fatalf("after a restart that kept the directory: %v (HW %d), want the one record written since", got, hw)
	}
}

// When the last in-sync replica comes back empty, an unclean election picks
// a replica that holds records over it, though it comes first in
// preference order: what the other replica had fetched survives.
func TestUncleanElectionPassesOverAnEmptiedReplica(t *testing.T) {
	c := Start(t, Options{StorageNodes: 2})
	cl := NewClient(t, c.ControllerAddrs())
	cl.CreateTopic("pair", 1, 2, map[string]string{"min.insync.replicas": "1"})
	p, _ := cl.Image().Partition("pair", 0)
	first, second := p.GetReplicas()[0], p.GetReplicas()[1]
	w := newWriter(cl, "pair")
	for i := range 3 {
		w.write(t, fmt.Sprint("both-", i))
	}
	// Both in the ISR after the writes: the second holds the three (an
	// acks=all write waited for it, or it caught up past them to join).
	cl.WaitFor("both replicas of pair-0 in sync", 30*time.Second, func(img *metadata.Image) bool {
		p, _ := img.Partition("pair", 0)
		return slices.Equal(p.GetIsr(), []int32{first, second})
	})

	// The second replica stops: the first is the last in sync, and takes a
	// record alone.
	c.Kill(c.StorageByID(second))
	cl.WaitFor(fmt.Sprintf("ISR of pair-0 down to %d", first), 30*time.Second, func(img *metadata.Image) bool {
		p, _ := img.Partition("pair", 0)
		return slices.Equal(p.GetIsr(), []int32{first}) && p.GetLeader() == first
	})
	w.write(t, "only-first")

	// The first stops too; the second comes back out of sync, then the
	// first comes back with an empty directory.
	c.Kill(c.StorageByID(first))
	waitLive(t, cl, first, false)
	c.Restart(c.StorageByID(second))
	waitLive(t, cl, second, true)
	if err := os.RemoveAll(c.StorageByID(first).DataDir); err != nil {
		t.Fatal(err)
	}
	c.Restart(c.StorageByID(first))
	waitLive(t, cl, first, true)
	if p, _ := cl.Image().Partition("pair", 0); p.GetLeader() != -1 || len(p.GetIsr()) != 0 {
		t.Fatalf("with the last in-sync replica back empty: leader %d, ISR %v; want -1 and none", p.GetLeader(), p.GetIsr())
	}

	electUnclean(t, cl, "pair", 0)
	if leader, _ := cl.Leader("pair", 0); leader != second {
		t.Fatalf("the unclean election made %d the leader, want %d, the replica that kept its records", leader, second)
	}
	got, hw := cl.ReadAll("pair", 0)
	var values []string
	for _, e := range got {
		values = append(values, e.Value)
	}
	if hw != 3 || !slices.Equal(values, []string{"both-0", "both-1", "both-2"}) {
		t.Fatalf("after the unclean election: %v (HW %d), want the three records both replicas had", values, hw)
	}
}

// writer is an idempotent producer of partition 0 of a topic: a retry of a
// write that was appended but not answered is not written twice.
type writer struct {
	cl    *Client
	topic string
	pid   int64
	seq   int32
}

func newWriter(cl *Client, topic string) *writer {
	return &writer{cl: cl, topic: topic, pid: cl.ProducerID()}
}

// write appends one record with acks=all, retrying for 10 s, and answers
// its offset.
func (w *writer) write(t *testing.T, value string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	batch := Batch(t, w.pid, w.seq, "k", value)
	for {
		off, _, _, err := w.cl.ProduceOnce(ctx, w.topic, 0, batch, -1)
		if err == nil {
			w.seq++
			return off
		}
		if ctx.Err() != nil {
			t.Fatalf("produce %s to %s: %v", value, w.topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitLive(t *testing.T, cl *Client, id int32, live bool) {
	t.Helper()
	cl.WaitFor(fmt.Sprintf("broker %d live=%v", id, live), 30*time.Second, func(img *metadata.Image) bool {
		return img.IsLive(metadata.BrokerID(id)) == live
	})
}

func electUnclean(t *testing.T, cl *Client, topic string, partition int32) {
	t.Helper()
	err := cl.Controller(func(cc controllerv1grpc.ControllerServiceClient) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := cc.ElectLeaders(ctx, &controllerv1.ElectLeadersRequest{Type: controllerv1.ElectionType_ELECTION_TYPE_UNCLEAN,
			Partitions: []*controllerv1.TopicPartitions{{Topic: topic, Partitions: []int32{partition}}}})
		if err == nil && resp.GetResults()[0].GetErrorCode() != 0 {
			return fmt.Errorf("%v", resp.GetResults()[0])
		}
		return err
	})
	if err != nil {
		t.Fatalf("unclean election of %s-%d: %v", topic, partition, err)
	}
	cl.WaitFor(fmt.Sprintf("a leader for %s-%d", topic, partition), 10*time.Second, func(img *metadata.Image) bool {
		p, _ := img.Partition(topic, partition)
		return p.GetLeader() >= 0
	})
}
