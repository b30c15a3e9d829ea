package client_test

import (
	"context"
	"slices"
	"testing"
	"time"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/client"
	"skein/libs/client/clienttest"
	"skein/libs/errs"
	"skein/libs/metadata"
)

// A topic that leaves the client's metadata and comes back with its log
// (a Describe grant taken away and given back hides it for a while) must
// not restart the producer's sequences under an id the node knows: a batch
// at sequence 0 would be answered as a duplicate of the first one, with its
// offsets, and never written.
func TestATopicThatComesBackIsWrittenUnderAFreshID(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", 1, nil)
	p := c.NewProducer(client.WithLinger(time.Hour), client.WithSendWhenIdle(false))
	defer p.Close(ctx(t))
	res := make(chan client.Result, 3)
	produce := func(v string) {
		p.Produce(ctx(t), client.Record{Topic: "t", Partition: ptr(int32(0)), Value: []byte(v)}, func(r client.Result) { res <- r })
	}
	produce("a")
	p.Flush(ctx(t))
	if r := <-res; r.Err != nil || r.Offset != 0 {
		t.Fatalf("a: %+v", r)
	}

	produce("queued while hidden")
	if _, err := cl.Controller.DeleteTopics(context.Background(), &controllerv1.DeleteTopicsRequest{Names: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	c.WaitMetadata(ctx(t), func(m *metadata.Image) bool { return m.PartitionCount("t") == 0 })
	p.Flush(ctx(t))
	if r := <-res; errs.Of(r.Err) != errs.UnknownTopicOrPartition {
		t.Fatalf("a record queued while its topic was gone: %+v, want UNKNOWN_TOPIC_OR_PARTITION", r)
	}

	if _, err := cl.Controller.CreateTopics(context.Background(), &controllerv1.CreateTopicsRequest{Topics: []*controllerv1.CreatableTopic{{Name: "t", Partitions: 1, ReplicationFactor: 1}}}); err != nil {
		t.Fatal(err)
	}
	c.WaitMetadata(ctx(t), func(m *metadata.Image) bool { return m.PartitionCount("t") == 1 })
	produce("b")
	p.Flush(ctx(t))
	if r := <-res; r.Err != nil || r.Offset != 1 {
		t.Fatalf("b: %+v, want written at offset 1", r)
	}
	if got := values(t, cl.Storage[1], "t"); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("log %q, want [a b]", got)
	}
}

// A node that has forgotten the producer id (--producer-id-expiration)
// takes only sequence 0 from it. When the first of a pipelined burst is
// refused before its append, the ones behind it are refused too, and all
// of them are written in order under a fresh id.
func TestAForgottenIDKeepsAPipelinedBurstInOrder(t *testing.T) {
	cl, _, p := pipelinedProducer(t, 1)
	st := cl.Storage[1]
	st.ForgetProducers("t", 0)
	st.FailNext("t", 0, errs.Errorf(errs.ThrottlingQuotaExceeded, "busy"), 1)
	var recs []client.Record
	for _, v := range []string{"a", "b", "c"} {
		recs = append(recs, client.Record{Topic: "t", Partition: ptr(int32(0)), Value: []byte(v)})
	}
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, r := range p.ProduceSync(c, recs...) {
		if r.Err != nil || r.Offset != int64(i+1) {
			t.Errorf("record %d: %+v, want offset %d", i, r, i+1)
		}
	}
	if got := values(t, st, "t"); !slices.Equal(got, []string{"first", "a", "b", "c"}) {
		t.Fatalf("log %q, want [first a b c]", got)
	}
}
