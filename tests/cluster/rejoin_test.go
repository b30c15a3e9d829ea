//go:build integration

package cluster

import (
	"slices"
	"testing"
	"time"

	"skein/libs/metadata"
)

// A storage node that comes back at other addresses (gRPC, HTTP and gossip:
// a container rescheduled) rejoins under its id: the controllers record its
// new address, the leaders' followers and clients dial it there, it is back
// in every ISR, and acks=all producers running throughout lose nothing.
func TestStorageRejoinsAtNewAddress(t *testing.T) {
	c := Start(t, Options{StorageNodes: 3, StorageFlags: []string{"--replica-lag-max=3s"}})
	cl := NewClient(t, c.ControllerAddrs())
	cl.CreateTopic("moves", 3, 3, map[string]string{"min.insync.replicas": "2"})
	var ps []*producers
	for p := range int32(3) {
		ps = append(ps, startProducers(t, cl, "moves", p, 2))
	}
	for _, p := range ps {
		waitAcks(t, p, 50, 30*time.Second)
	}

	victim := c.StorageByID(2)
	old := victim.GRPCAddr
	c.Kill(victim)
	cl.WaitFor("broker 2 fenced", 15*time.Second, func(img *metadata.Image) bool { return !img.IsLive(2) })
	c.RestartAt(victim)
	restarted := time.Now()
	c.WaitReady(victim, 30*time.Second)
	cl.WaitFor("broker 2 live at its new address and in every ISR", 45*time.Second, func(img *metadata.Image) bool {
		b, ok := img.Broker(2)
		if !ok || !img.IsLive(2) || b.GetGrpcAddr() != victim.GRPCAddr {
			return false
		}
		for _, p := range img.Partitions("moves") {
			if !slices.Contains(p.GetIsr(), 2) {
				return false
			}
		}
		return true
	})
	t.Logf("broker 2 moved %s -> %s: live and in every ISR %v after the restart", old, victim.GRPCAddr, time.Since(restarted).Round(time.Millisecond))

	// It leads again (preferred leader of one partition) and serves writes.
	cl.WaitFor("broker 2 leads a partition again", 30*time.Second, func(img *metadata.Image) bool {
		for _, p := range img.Partitions("moves") {
			if p.GetLeader() == 2 {
				return true
			}
		}
		return false
	})
	for _, p := range ps {
		waitAcks(t, p, 50, 30*time.Second)
	}
	for i, p := range ps {
		acks := p.finish()
		log, hw := cl.ReadAll("moves", int32(i))
		t.Logf("partition %d: %d acknowledged, %d records below HW %d", i, len(acks), len(log), hw)
		CheckHistory(t, acks, log)
	}
}
