package client_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"skein/libs/client"
	"skein/libs/client/clienttest"
	"skein/libs/errs"
)

// pollUntil polls gc until it has read n records (or fails the test after
// 10 s), and answers them in the order Poll gave them.
func pollUntil(t *testing.T, gc *client.GroupConsumer, n int) []client.ConsumedRecord {
	t.Helper()
	var out []client.ConsumedRecord
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n {
		if time.Now().After(deadline) {
			t.Fatalf("read %d records in 10 s, want %d", len(out), n)
		}
		recs, err := gc.Poll(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, recs...)
	}
	return out
}

// groupOn starts a one-broker fake cluster with a group coordinator, and
// a topic "t" of partitions partitions holding perPartition records each.
func groupOn(t *testing.T, partitions int32, perPartition int) (*clienttest.Cluster, *clienttest.GroupCoordinator, *client.Client) {
	t.Helper()
	cl := clienttest.Start(t, 1)
	gcoord, _ := cl.StartGroupCoordinator(t, 1)
	c := newClient(t, cl)
	createTopic(t, c, "t", partitions, nil)
	produceN(t, c, "t", partitions, perPartition)
	return cl, gcoord, c
}

func offsetsOf(recs []client.ConsumedRecord) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.Offset
	}
	return out
}

func seq(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// A member reads each owned partition through one Follow stream, kept
// from Poll to Poll: records produced later come on the same stream, and
// the member sends no fetch requests.
func TestGroupConsumerKeepsOneStreamPerPartition(t *testing.T) {
	cl, _, c := groupOn(t, 2, 5)

	m := newMember(t, c, "g", client.GroupConsumerConfig{})
	defer m.Close(ctx(t))
	got := pollUntil(t, m, 10)
	produceN(t, c, "t", 2, 5)
	got = append(got, pollUntil(t, m, 10)...)

	byPart := map[int32][]int64{}
	for _, r := range got {
		byPart[r.Partition] = append(byPart[r.Partition], r.Offset)
		if want := fmt.Sprintf("%d-%d", r.Partition, r.Offset%5); string(r.Value) != want {
			t.Errorf("%d@%d holds %q, want %q", r.Partition, r.Offset, r.Value, want)
		}
	}
	for p := range int32(2) {
		if !slices.Equal(byPart[p], seq(0, 10)) {
			t.Errorf("partition %d read %v, want 0..9 once each", p, byPart[p])
		}
	}
	s := cl.Storage[1]
	if n := len(s.Follows()); n != 2 {
		t.Errorf("%d follow streams opened, want one per partition", n)
	}
	if n := len(s.Fetches()); n != 0 {
		t.Errorf("%d fetch requests, want none", n)
	}
}

// A seek (a nack's, say) moves the partition's stream: the next records are
// read from the new offset, in order, and what the old stream had sent on
// is not handed out.
func TestGroupConsumerSeekRestartsTheStream(t *testing.T) {
	cl, _, c := groupOn(t, 1, 12)
	tp := client.TopicPartition{Topic: "t", Partition: 0}

	m := newMember(t, c, "g", client.GroupConsumerConfig{MaxRecords: 5})
	defer m.Close(ctx(t))
	if got := offsetsOf(pollUntil(t, m, 5)); !slices.Equal(got, seq(0, 5)) {
		t.Fatalf("first poll read %v, want 0..4", got)
	}
	// The stream has sent 5..11 on already; the member goes back to 2.
	if err := m.Seek(tp, 2); err != nil {
		t.Fatal(err)
	}
	got := offsetsOf(pollUntil(t, m, 10))
	if !slices.Equal(got, seq(2, 12)) {
		t.Errorf("after a seek to 2, read %v, want 2..11", got)
	}
	if pos := m.Position(tp); pos != 12 {
		t.Errorf("position %d, want 12", pos)
	}
	if n := len(cl.Storage[1].Follows()); n != 2 {
		t.Errorf("%d follow streams opened, want 2: the first, and one from the seek", n)
	}
	if err := m.Seek(tp, -1); errs.Of(err) != errs.InvalidRequest {
		t.Errorf("a seek to -1: %v", err)
	}
	if err := m.Seek(client.TopicPartition{Topic: "t", Partition: 7}, 0); errs.Of(err) != errs.StaleMemberEpoch {
		t.Errorf("a seek in a partition not owned: %v", err)
	}
}

// A position below the log's start makes the stream fail with
// OFFSET_OUT_OF_RANGE; the member moves to AutoOffsetReset and reads on
// from there.
func TestGroupConsumerResetsAPositionOutOfRange(t *testing.T) {
	cl, _, c := groupOn(t, 1, 10)
	tp := client.TopicPartition{Topic: "t", Partition: 0}

	m := newMember(t, c, "g", client.GroupConsumerConfig{MaxRecords: 3})
	defer m.Close(ctx(t))
	pollUntil(t, m, 3)
	cl.Storage[1].SetLogStart("t", 0, 6)
	if err := m.Seek(tp, 1); err != nil {
		t.Fatal(err)
	}
	got := offsetsOf(pollUntil(t, m, 4))
	if !slices.Equal(got, seq(6, 10)) {
		t.Errorf("after a seek below the log start, read %v, want the earliest on: 6..9", got)
	}
}

// Poll hands out at most MaxRecords; what an answer holds past them comes
// first in the next Poll. A revoked partition's stream ends with the
// revocation: the records that come after are not the member's.
func TestGroupConsumerSplitsAnswersAndDropsRevokedStreams(t *testing.T) {
	_, _, c := groupOn(t, 2, 8)

	a := newMember(t, c, "g", client.GroupConsumerConfig{MaxRecords: 3})
	defer a.Close(ctx(t))
	seen := consumed{}
	for total(seen) < 16 {
		seen.poll(t, a)
	}
	for p := range int32(2) {
		if got := seen[client.TopicPartition{Topic: "t", Partition: p}]; !slices.Equal(got, seq(0, 8)) {
			t.Errorf("partition %d read %v, want 0..7", p, got)
		}
	}

	b := newMember(t, c, "g", client.GroupConsumerConfig{MaxRecords: 3})
	defer b.Close(ctx(t))
	deadline := time.Now().Add(10 * time.Second)
	for len(a.Assignment()) != 1 || len(b.Assignment()) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no 1/1 split: a %v, b %v", a.Assignment(), b.Assignment())
		}
		seen.poll(t, a)
		seen.poll(t, b)
	}
	produceN(t, c, "t", 2, 4)
	for total(seen) < 24 && time.Now().Before(deadline) {
		seen.poll(t, a)
		seen.poll(t, b)
	}
	for p := range int32(2) {
		if got := seen[client.TopicPartition{Topic: "t", Partition: p}]; !slices.Equal(got, seq(0, 12)) {
			t.Errorf("partition %d read %v, want 0..11 once each", p, got)
		}
	}
}

// Close ends the member's streams: the leader stops serving them (it sees
// a stream's end a moment after the reader ends it), and a record produced
// after that is sent to no one.
func TestGroupConsumerCloseEndsItsStreams(t *testing.T) {
	cl, _, c := groupOn(t, 1, 2)
	m := newMember(t, c, "g", client.GroupConsumerConfig{})
	pollUntil(t, m, 2)
	if cl.Storage[1].FollowOpen() == 0 {
		t.Fatal("the leader serves no Follow stream of the member")
	}
	if err := m.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Poll(ctx(t)); err == nil {
		t.Error("a closed member polled")
	}
	deadline := time.Now().Add(10 * time.Second)
	for cl.Storage[1].FollowOpen() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the leader still serves %d Follow streams after Close", cl.Storage[1].FollowOpen())
		}
		time.Sleep(5 * time.Millisecond)
	}
	sent := cl.Storage[1].FollowSending()
	produceN(t, c, "t", 1, 2)
	time.Sleep(300 * time.Millisecond) // the fake leader's long poll is 100 ms
	if got := cl.Storage[1].FollowSending(); got != sent {
		t.Errorf("the leader sent %d more bytes after Close", got-sent)
	}
}

// The streams read for the client a Poll's ctx names (OnBehalfOf), as its
// fetches did: the leader checks that client's ACLs. A Poll for another
// client replaces them.
func TestGroupConsumerStreamsReadForThePollsClient(t *testing.T) {
	cl, _, c := groupOn(t, 1, 4)

	m := newMember(t, c, "g", client.GroupConsumerConfig{MaxRecords: 2})
	defer m.Close(ctx(t))
	poll := func(principal string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			recs, err := m.Poll(client.OnBehalfOf(ctx(t), principal))
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) > 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("nothing read for %s in 10 s", principal)
			}
		}
	}
	poll("User:alice")
	poll("User:bob")
	named := cl.Storage[1].Named()
	if named["follow:User:alice"] != 1 || named["follow:User:bob"] != 1 {
		t.Errorf("follow streams named %v, want one for alice, then one for bob", named)
	}
}

// Records an earlier Poll had no room for are answered at once, whatever
// MinBytes asks: they do not wait for more bytes to come.
func TestGroupConsumerAnswersHeldRecordsAtOnce(t *testing.T) {
	_, gcoord, c := groupOn(t, 1, 5)         // one batch of 5, larger than MinBytes
	gcoord.SetHeartbeatInterval(time.Minute) // no heartbeat cuts a Poll's wait short

	m := newMember(t, c, "g", client.GroupConsumerConfig{MaxRecords: 3, MinBytes: 64, MaxWait: 10 * time.Second})
	defer m.Close(ctx(t))
	if got := offsetsOf(pollUntil(t, m, 3)); !slices.Equal(got, seq(0, 3)) {
		t.Fatalf("first poll read %v, want 0..2", got)
	}
	start := time.Now()
	recs, err := m.Poll(ctx(t))
	if err != nil || !slices.Equal(offsetsOf(recs), seq(3, 5)) {
		t.Fatalf("second poll read %v, %v; want 3 and 4", offsetsOf(recs), err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the records held from the first poll took %v, as long as MaxWait", took)
	}
}

// Wake, from another goroutine, ends a Poll's wait for records at once;
// one while no Poll waits makes the next one return without waiting.
func TestGroupConsumerWakeEndsAPollsWait(t *testing.T) {
	_, gcoord, c := groupOn(t, 1, 1)
	gcoord.SetHeartbeatInterval(time.Minute) // no heartbeat cuts a Poll's wait short

	m := newMember(t, c, "g", client.GroupConsumerConfig{MaxWait: 30 * time.Second})
	defer m.Close(ctx(t))
	pollUntil(t, m, 1) // joined, positioned, read to the end
	type polled struct {
		n   int
		err error
		d   time.Duration
	}
	done := make(chan polled, 1)
	go func() {
		start := time.Now()
		recs, err := m.Poll(ctx(t))
		done <- polled{len(recs), err, time.Since(start)}
	}()
	time.Sleep(100 * time.Millisecond) // the Poll waits
	m.Wake()
	select {
	case p := <-done:
		if p.err != nil || p.n != 0 {
			t.Errorf("the woken Poll answered %d records, %v", p.n, p.err)
		}
		t.Logf("the Poll returned %v after it began", p.d.Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("a woken Poll still waited after 10 s of its 30 s")
	}

	m.Wake()
	start := time.Now()
	if recs, err := m.Poll(ctx(t)); err != nil || len(recs) != 0 {
		t.Fatalf("a Poll after a Wake: %d records, %v", len(recs), err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a Poll after a Wake waited %v", d)
	}
}
