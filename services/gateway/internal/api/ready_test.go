package api

import (
	"context"
	"testing"
	"time"

	"skein/libs/client"
	"skein/libs/client/clienttest"
	"skein/libs/errs"
)

// A call that names a topic waits for the gateway's first metadata, is
// refused LEADER_NOT_AVAILABLE when none comes before its deadline, and once
// metadata is there is never refused as not ready, whatever its context.
func TestKnownTopicWaitsForMetadata(t *testing.T) {
	cold, err := client.New(client.Config{Controllers: []string{clienttest.DeadAddr(t)}})
	if err != nil {
		t.Fatal(err)
	}
	defer cold.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, _, err := knownTopic(ctx, cold, "orders"); errs.Of(err) != errs.LeaderNotAvailable {
		t.Errorf("no metadata: %v (%s), want LEADER_NOT_AVAILABLE", err, errs.Of(err))
	}
	if waited := time.Since(start); waited > 3*time.Second {
		t.Errorf("no metadata: refused after %s, not at the call's deadline", waited)
	}

	cl := clienttest.Start(t, 1)
	warm, err := client.New(client.Config{Controllers: []string{cl.ControllerAddr}})
	if err != nil {
		t.Fatal(err)
	}
	defer warm.Close()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if _, err := warm.CreateTopic(wctx, client.TopicSpec{Name: "orders", Partitions: 3, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	for warm.Metadata().PartitionCount("orders") != 3 {
		if wctx.Err() != nil {
			t.Fatal("the topic never reached the client's metadata")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ended, end := context.WithCancel(context.Background())
	end()
	for i := 0; i < 100; i++ { // a select between two ready channels picks either
		if _, n, err := knownTopic(ended, warm, "orders"); err != nil || n != 3 {
			t.Fatalf("with metadata, a call whose context has ended: %d partitions, %v", n, err)
		}
	}
	if _, _, err := knownTopic(wctx, warm, "missing"); errs.Of(err) != errs.UnknownTopicOrPartition {
		t.Errorf("an unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	if _, _, err := knownTopic(wctx, warm, "a/b"); errs.Of(err) != errs.InvalidTopic {
		t.Errorf("an invalid name: %v, want INVALID_TOPIC_EXCEPTION", err)
	}
}
