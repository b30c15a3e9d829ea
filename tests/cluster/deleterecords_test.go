//go:build integration

package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	storagev1 "skein/gen/skein/storage/v1"
	"skein/libs/checkpoint"
	"skein/libs/metadata"
)

// Records deleted before an offset stay deleted through a crash of every
// storage node right after the answer: the leader saves its new log start
// at once, and each follower saves the one it takes from the leader before
// its next fetch reports it, so the answer comes only once the new start
// is on every replica's disk (read here from each node's checkpoint store
// after the crash). Whichever replica leads afterwards starts there, and
// the records after it are all still there.
func TestDeletedRecordsStayDeletedThroughACrash(t *testing.T) {
	c := Start(t, Options{StorageNodes: 3})
	cl := NewClient(t, c.ControllerAddrs())
	cl.CreateTopic("purge", 1, 3, map[string]string{"min.insync.replicas": "2"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pid := cl.ProducerID()
	for i := range 10 {
		for {
			if _, _, _, err := cl.ProduceOnce(ctx, "purge", 0, Batch(t, pid, int32(i), "", fmt.Sprint(i)), -1); err == nil {
				break
			} else if ctx.Err() != nil {
				t.Fatalf("record %d: %v", i, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	cl.WaitFor("every replica in the ISR", 15*time.Second, func(img *metadata.Image) bool {
		p, ok := img.Partition("purge", 0)
		return ok && len(p.GetIsr()) == 3
	})
	leader, epoch := cl.Leader("purge", 0)
	sc, err := cl.Storage(leader)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := sc.DeleteRecords(ctx, &storagev1.DeleteRecordsRequest{Partitions: []*storagev1.DeleteRecordsPartition{
		{Topic: "purge", Partition: 0, Offset: 6, CurrentLeaderEpoch: epoch},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.GetPartitions()[0]; r.GetErrorCode() != 0 || r.GetLowWatermark() != 6 {
		t.Fatalf("DeleteRecords before 6 on leader %d: %v", leader, r)
	}
	for _, p := range c.Storage {
		c.Kill(p)
	}
	for _, p := range c.Storage {
		store, err := checkpoint.OpenFiles(filepath.Join(p.DataDir, "checkpoints"))
		if err != nil {
			t.Fatal(err)
		}
		all, err := store.LoadOffsets()
		store.Close()
		if got := all[checkpoint.Partition{Topic: "purge", Partition: 0}].LogStartOffset; err != nil || got != 6 {
			t.Errorf("broker %d saved log start %d (%v) before the crash, want 6", p.ID, got, err)
		}
	}
	for _, p := range c.Storage {
		c.Restart(p)
	}
	for _, p := range c.Storage {
		c.WaitReady(p, 30*time.Second)
	}
	entries, hw := cl.ReadAll("purge", 0)
	if hw != 10 || len(entries) != 4 || entries[0].Offset != 6 || entries[0].Value != "6" || entries[3].Value != "9" {
		t.Fatalf("after the crash, HW %d and records %+v; want offsets 6 to 9", hw, entries)
	}
	now, _ := cl.Leader("purge", 0)
	sc, err = cl.Storage(now)
	if err != nil {
		t.Fatal(err)
	}
	lo, err := sc.ListOffsets(ctx, &storagev1.ListOffsetsRequest{Partitions: []*storagev1.ListOffsetsPartition{{Topic: "purge", Partition: 0, CurrentLeaderEpoch: -1, Timestamp: -2}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := lo.GetPartitions()[0]; r.GetErrorCode() != 0 || r.GetOffset() != 6 {
		t.Fatalf("earliest offset on leader %d after the crash (leader %d before): %v", now, leader, r)
	}
	t.Logf("leader %d before the crash, %d after; the log starts at 6 on it", leader, now)
}
