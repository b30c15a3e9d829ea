package coordinator

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"skein/libs/client"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/libs/record"
	"skein/services/groupcoord/internal/assign"
	"skein/services/groupcoord/internal/delivery"
	"skein/services/groupcoord/internal/group"
	"skein/services/groupcoord/internal/offsetlog"
)

// dlqLog is a memLog that also holds the topics groups consume, so it
// implements DeadLetters.
type dlqLog struct {
	*memLog
	tmu     sync.Mutex
	data    map[string][][]Record // topic -> partition -> records by offset
	appends int
	// failAppend: the next Append answers this error after writing (an
	// unknown outcome).
	failAppend error
	// refuseAppend: the next Append answers this error, writing nothing.
	refuseAppend error
	// missing: offsets ("topic/partition/offset") holding no record (a
	// transaction marker, deleted).
	missing map[string]bool
	// txn: offsets holding a transactional record, and where its
	// transaction stands: "open", "committed" or "aborted".
	txn map[string]string
	// onRead, when set, runs (once) as the next Read begins.
	onRead func()
}

func (l *dlqLog) setTxn(topic string, partition int32, offset int64, state string) {
	l.tmu.Lock()
	defer l.tmu.Unlock()
	if l.txn == nil {
		l.txn = map[string]string{}
	}
	l.txn[fmt.Sprintf("%s/%d/%d", topic, partition, offset)] = state
}

func (l *dlqLog) TxnOutcome(_ context.Context, topic string, partition int32, offset int64) (committed, ended bool, err error) {
	l.tmu.Lock()
	defer l.tmu.Unlock()
	switch l.txn[fmt.Sprintf("%s/%d/%d", topic, partition, offset)] {
	case "open":
		return false, false, nil
	case "aborted":
		return false, true, nil
	}
	return true, true, nil
}

func newDLQLog() *dlqLog {
	return &dlqLog{memLog: newMemLog(), data: map[string][][]Record{}}
}

func (l *dlqLog) put(topic string, partitions int, partition int32, recs ...Record) {
	l.tmu.Lock()
	defer l.tmu.Unlock()
	if l.data[topic] == nil {
		l.data[topic] = make([][]Record, partitions)
	}
	l.data[topic][partition] = append(l.data[topic][partition], recs...)
}

func (l *dlqLog) HighWatermark(_ context.Context, topic string, partition int32) (int64, error) {
	l.tmu.Lock()
	defer l.tmu.Unlock()
	if int(partition) >= len(l.data[topic]) {
		return -1, errs.Errorf(errs.UnknownTopicOrPartition, "no %s:%d", topic, partition)
	}
	return int64(len(l.data[topic][partition])), nil
}

func (l *dlqLog) EnsureTopic(_ context.Context, topic, like string) (int32, error) {
	l.tmu.Lock()
	defer l.tmu.Unlock()
	if l.data[topic] == nil {
		l.data[topic] = make([][]Record, len(l.data[like]))
	}
	return int32(len(l.data[topic])), nil
}

func (l *dlqLog) Read(_ context.Context, topic string, partition int32, offset int64) (Record, bool, error) {
	l.tmu.Lock()
	hook := l.onRead
	l.onRead = nil
	l.tmu.Unlock()
	if hook != nil {
		hook()
	}
	l.tmu.Lock()
	defer l.tmu.Unlock()
	recs := l.data[topic][partition]
	key := fmt.Sprintf("%s/%d/%d", topic, partition, offset)
	if offset >= int64(len(recs)) || l.missing[key] {
		return Record{}, false, nil
	}
	r := recs[offset]
	r.Transactional = l.txn[key] != ""
	return r, true, nil
}

func (l *dlqLog) Find(_ context.Context, topic string, partition int32, from int64, match func([]record.Header) bool) (int64, error) {
	l.tmu.Lock()
	defer l.tmu.Unlock()
	recs := l.data[topic][partition]
	for o := from; o < int64(len(recs)); o++ {
		if match(recs[o].Headers) {
			return o, nil
		}
	}
	return -1, nil
}

func (l *dlqLog) Append(_ context.Context, topic string, partition int32, rec Record) (int64, error) {
	l.tmu.Lock()
	defer l.tmu.Unlock()
	if err := l.refuseAppend; err != nil {
		l.refuseAppend = nil
		return -1, err
	}
	l.data[topic][partition] = append(l.data[topic][partition], rec)
	l.appends++
	if err := l.failAppend; err != nil {
		l.failAppend = nil
		return -1, err
	}
	return int64(len(l.data[topic][partition]) - 1), nil
}

func (l *dlqLog) topic(topic string, partition int32) []Record {
	l.tmu.Lock()
	defer l.tmu.Unlock()
	if int(partition) >= len(l.data[topic]) {
		return nil
	}
	return append([]Record(nil), l.data[topic][partition]...)
}

func sourceRecords(l *dlqLog) {
	for p := int32(0); p < 4; p++ {
		for i := 0; i < 4; i++ {
			l.put("orders", 4, p, Record{Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprint("v", i)),
				Headers: []record.Header{{Key: "h", Value: []byte(fmt.Sprint(i))}}, Timestamp: int64(1000 + i)})
		}
	}
	l.put("audit", 1, 0, Record{Value: []byte("a")})
}

func header(hs []record.Header, key string) string {
	v := ""
	for _, h := range hs {
		if h.Key == key {
			v = string(h.Value)
		}
	}
	return v
}

// TestNackRedeliverThenDeadLetter: a record nacked four times is delivered
// again each time; a new owner keeps the count; the fifth nack writes it to
// orders.dlq once, with its key, value and headers and the dead-letter
// headers (its timestamp among them), and moves the committed offset past it.
func TestNackRedeliverThenDeadLetter(t *testing.T) {
	log := newDLQLog()
	sourceRecords(log)
	a := start(t, log, 1, owning(1, all()...))
	waitLoaded(t, a, nParts)
	m := join(t, a, "app", "orders")
	ctx := context.Background()
	for i := int32(1); i <= 3; i++ {
		res, err := a.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 2, 1, fmt.Sprint("try ", i))
		if err != nil || res.Failed != i || res.DeadLettered || res.Next != 1 {
			t.Fatalf("nack %d: %+v %v", i, res, err)
		}
	}
	if d := a.Deliveries("app", []assign.TopicPartition{{Topic: "orders", Partition: 2}}); d[assign.TopicPartition{Topic: "orders", Partition: 2}].Attempt(1) != 4 {
		t.Fatalf("deliveries after three nacks: %+v", d)
	}

	// A new owner loads the counts from the log.
	b := start(t, log, 2, owning(2, all()...))
	waitServing(t, b, "app")
	res, err := b.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 2, 1, "try 4")
	if err != nil || res.Failed != 4 || res.DeadLettered {
		t.Fatalf("nack 4 at the new owner: %+v %v", res, err)
	}
	res, err = b.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 2, 1, "try 5")
	if err != nil || !res.DeadLettered || res.Failed != 5 || res.DLQTopic != "orders.dlq" || res.DLQPartition != 2 || res.DLQOffset != 0 || res.Next != 2 {
		t.Fatalf("nack 5: %+v %v", res, err)
	}
	dl := log.topic("orders.dlq", 2)
	if len(dl) != 1 {
		t.Fatalf("orders.dlq partition 2 holds %d records, want 1", len(dl))
	}
	r := dl[0]
	if string(r.Key) != "k1" || string(r.Value) != "v1" || header(r.Headers, "h") != "1" {
		t.Fatalf("the dead-letter record %+v", r)
	}
	// The copy is timestamped when dead-lettered (the source record's 1001,
	// from 1970, would fall to the dead-letter topic's retention at once).
	if age := time.Since(time.UnixMilli(r.Timestamp)); age < 0 || age > time.Minute {
		t.Fatalf("the dead-letter copy's timestamp %d is not the time it was dead-lettered", r.Timestamp)
	}
	for k, want := range map[string]string{delivery.HeaderSourceTopic: "orders", delivery.HeaderSourcePartition: "2",
		delivery.HeaderSourceOffset: "1", delivery.HeaderReason: "try 5", delivery.HeaderAttempts: "5", delivery.HeaderGroup: "app",
		delivery.HeaderSourceTimestamp: "1001"} {
		if got := header(r.Headers, k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	if got := committed(t, b, "app", "orders", 2); got != 2 {
		t.Fatalf("committed %d after the dead-letter, want 2", got)
	}
	if d := b.Deliveries("app", []assign.TopicPartition{{Topic: "orders", Partition: 2}}); len(d) != 0 {
		t.Fatalf("deliveries left after the dead-letter: %+v", d)
	}
	// The record is behind the group now.
	if _, err := b.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 2, 1, "again"); errs.Of(err) != errs.OffsetOutOfRange {
		t.Fatalf("a nack of the dead-lettered record: %v", err)
	}
}

// TestDeadLetterResumedOnce: the coordinator fails to move the group past a
// record after writing its dead-letter copy; the next nack finds the copy
// and moves on without a second one. A copy whose write answered an
// unknown outcome is found the same way.
func TestDeadLetterResumedOnce(t *testing.T) {
	log := newDLQLog()
	sourceRecords(log)
	c := start(t, log, 1, owning(1, all()...))
	waitLoaded(t, c, nParts)
	if _, err := c.AlterGroupConfig(context.Background(), "app", map[string]string{delivery.KeyMaxAttempts: "1", delivery.KeyTopic: "dead"}); err != nil {
		t.Fatal(err)
	}
	m := join(t, c, "app", "orders")
	ctx := context.Background()

	// Unknown outcome of the dead-letter write: it is in the topic.
	log.tmu.Lock()
	log.failAppend = errs.Errorf(errs.RequestTimedOut, "no answer")
	log.tmu.Unlock()
	if _, err := c.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 0, 0, "x"); errs.Of(err) != errs.RequestTimedOut {
		t.Fatalf("nack with the dead-letter write timing out: %v", err)
	}
	if got := committed(t, c, "app", "orders", 0); got != -1 {
		t.Fatalf("committed %d before the group moved past", got)
	}
	res, err := c.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 0, 0, "x")
	if err != nil || !res.DeadLettered || res.DLQTopic != "dead" || res.DLQOffset != 0 {
		t.Fatalf("the resumed nack: %+v %v", res, err)
	}

	// The dead-lettering mark is written (the first write: a success), the
	// copy too, then the write that moves the group past fails outright.
	log.failWith(memFailure{appended: true}, memFailure{err: errs.Errorf(errs.InvalidRecord, "refused")})
	if _, err = c.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 1, 0, "y"); errs.Of(err) != errs.InvalidRecord {
		t.Fatalf("the nack whose last write failed: %v", err)
	}
	if n := len(log.topic("dead", 1)); n != 1 {
		t.Fatalf("dead partition 1 holds %d records after the failed nack, want 1", n)
	}
	res, err = c.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 1, 0, "y")
	if err != nil || !res.DeadLettered {
		t.Fatalf("the retried nack: %+v %v", res, err)
	}
	if got := committed(t, c, "app", "orders", 1); got != 1 {
		t.Fatalf("committed %d, want 1", got)
	}
	if n0, n1 := len(log.topic("dead", 0)), len(log.topic("dead", 1)); n0 != 1 || n1 != 1 {
		t.Fatalf("dead holds %d and %d records on partitions 0 and 1, want one each", n0, n1)
	}
	if log.appends != 2 {
		t.Fatalf("%d dead-letter writes, want 2", log.appends)
	}
}

// TestNackRefusals: every refused nack answers its code and writes nothing.
func TestNackRefusals(t *testing.T) {
	log := newDLQLog()
	sourceRecords(log)
	c := start(t, log, 1, owning(1, all()...))
	waitLoaded(t, c, nParts)
	m := join(t, c, "app", "orders")
	ctx := context.Background()
	if err := commit(c, "app", m.MemberID, m.MemberEpoch, "orders", 3, 2); err != nil {
		t.Fatal(err)
	}
	part := func() int32 {
		p, err := c.partitionFor("app")
		if err != nil {
			t.Fatal(err)
		}
		return p.id
	}()
	before := len(log.records(part))
	log.tmu.Lock()
	log.missing = map[string]bool{"orders/2/1": true}
	log.txn = map[string]string{"orders/2/2": "aborted"}
	log.tmu.Unlock()
	for _, tc := range []struct {
		name      string
		group     string
		member    group.MemberID
		epoch     group.Epoch
		topic     string
		partition int32
		offset    int64
		reason    string
		want      *errs.Error
	}{
		{"not assigned to the member", "app", m.MemberID, m.MemberEpoch, "audit", 0, 0, "", errs.StaleMemberEpoch},
		{"stale epoch", "app", m.MemberID, m.MemberEpoch + 1, "orders", 2, 0, "", errs.StaleMemberEpoch},
		{"unknown member", "app", "nobody", 1, "orders", 2, 0, "", errs.UnknownMemberID},
		{"no member id", "app", "", 1, "orders", 2, 0, "", errs.UnknownMemberID},
		{"unknown group", "nope", m.MemberID, 1, "orders", 2, 0, "", errs.UnknownMemberID},
		{"at the high watermark", "app", m.MemberID, m.MemberEpoch, "orders", 2, 4, "", errs.OffsetOutOfRange},
		{"a marker or a deleted record", "app", m.MemberID, m.MemberEpoch, "orders", 2, 1, "", errs.OffsetOutOfRange},
		{"a record of an aborted transaction", "app", m.MemberID, m.MemberEpoch, "orders", 2, 2, "", errs.OffsetOutOfRange},
		{"below the committed offset", "app", m.MemberID, m.MemberEpoch, "orders", 3, 1, "", errs.OffsetOutOfRange},
		{"unknown topic", "app", m.MemberID, m.MemberEpoch, "nope", 0, 0, "", errs.UnknownTopicOrPartition},
		{"partition out of range", "app", m.MemberID, m.MemberEpoch, "orders", 9, 0, "", errs.UnknownTopicOrPartition},
		{"negative offset", "app", m.MemberID, m.MemberEpoch, "orders", 2, -1, "", errs.InvalidRequest},
		{"reason too long", "app", m.MemberID, m.MemberEpoch, "orders", 2, 0, string(make([]byte, delivery.MaxReason+1)), errs.InvalidRequest},
	} {
		if _, err := c.Nack(ctx, tc.group, tc.member, tc.epoch, tc.topic, tc.partition, tc.offset, tc.reason); errs.Of(err) != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if after := len(log.records(part)); after != before {
		t.Fatalf("refused nacks wrote %d records", after-before)
	}
	if d := c.Deliveries("app", []assign.TopicPartition{{Topic: "orders", Partition: 2}, {Topic: "orders", Partition: 3}}); len(d) != 0 {
		t.Fatalf("refused nacks counted: %+v", d)
	}
}

func TestGroupConfig(t *testing.T) {
	log := newDLQLog()
	c := start(t, log, 1, owning(1, all()...))
	waitLoaded(t, c, nParts)
	ctx := context.Background()
	got, err := c.GroupConfig(ctx, "app")
	if err != nil || got[delivery.KeyMaxAttempts] != "5" || got[delivery.KeyTopic] != "" {
		t.Fatalf("defaults: %v %v", got, err)
	}
	if _, err := c.AlterGroupConfig(ctx, "app", map[string]string{delivery.KeyMaxAttempts: "0"}); errs.Of(err) != errs.InvalidConfig {
		t.Fatalf("a bad value: %v", err)
	}
	if _, err := c.AlterGroupConfig(ctx, "app", map[string]string{delivery.KeyMaxAttempts: "3", delivery.KeyTopic: "dl"}); err != nil {
		t.Fatal(err)
	}
	b := start(t, log, 2, owning(2, all()...))
	waitServing(t, b, "app")
	got, err = b.GroupConfig(ctx, "app")
	if err != nil || got[delivery.KeyMaxAttempts] != "3" || got[delivery.KeyTopic] != "dl" {
		t.Fatalf("at the new owner: %v %v", got, err)
	}
	if err := b.DeleteGroup(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	got, err = b.GroupConfig(ctx, "app")
	if err != nil || got[delivery.KeyMaxAttempts] != "5" {
		t.Fatalf("after delete: %v %v", got, err)
	}
}

// A group whose dlq.topic is the record's own topic would dead-letter the
// record back into its own input, for ever: the nack that would do it is
// refused INVALID_CONFIG, nothing written and nothing counted, and the
// nacks before it count as ever.
func TestDeadLetterToTheSourceTopicIsRefused(t *testing.T) {
	log := newDLQLog()
	sourceRecords(log)
	c := start(t, log, 1, owning(1, all()...))
	waitLoaded(t, c, nParts)
	ctx := context.Background()
	if _, err := c.AlterGroupConfig(ctx, "app", map[string]string{delivery.KeyMaxAttempts: "2", delivery.KeyTopic: "orders"}); err != nil {
		t.Fatal(err)
	}
	m := join(t, c, "app", "orders")
	if res, err := c.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 1, 0, "first"); err != nil || res.Failed != 1 || res.DeadLettered {
		t.Fatalf("the first nack: %+v %v", res, err)
	}
	before := len(log.topic("orders", 1))
	for range 2 {
		if _, err := c.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 1, 0, "second"); errs.Of(err) != errs.InvalidConfig || !strings.Contains(err.Error(), "the record's own topic") {
			t.Fatalf("the nack that would dead-letter into the source topic: %v, want INVALID_CONFIG", err)
		}
	}
	if after := len(log.topic("orders", 1)); after != before {
		t.Fatalf("the refused nack wrote %d records to orders:1", after-before)
	}
	tp := assign.TopicPartition{Topic: "orders", Partition: 1}
	if d := c.Deliveries("app", []assign.TopicPartition{tp}); d[tp].Attempt(0) != 2 {
		t.Fatalf("deliveries after the refusals: %+v, want the record at its second delivery still", d)
	}
	// With another dead-letter topic, the same nack goes through.
	if _, err := c.AlterGroupConfig(ctx, "app", map[string]string{delivery.KeyTopic: ""}); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 1, 0, "second"); err != nil || !res.DeadLettered || res.DLQTopic != "orders.dlq" {
		t.Fatalf("with the default dead-letter topic: %+v %v", res, err)
	}
}

// dlqGroup starts a coordinator on log owning every partition, with group
// "app" allowed maxAttempts deliveries and a member of it reading orders.
func dlqGroup(t *testing.T, log *dlqLog, maxAttempts string) (*Coordinator, group.HeartbeatResponse) {
	t.Helper()
	c := start(t, log, 1, owning(1, all()...))
	waitLoaded(t, c, nParts)
	if _, err := c.AlterGroupConfig(context.Background(), "app", map[string]string{delivery.KeyMaxAttempts: maxAttempts}); err != nil {
		t.Fatal(err)
	}
	return c, join(t, c, "app", "orders")
}

// A nack whose dead-letter copy the dead-letter topic refuses (a compacted
// one and a record without a key, say) changes nothing: the record's count
// and mark are undone, so the next nack starts from where the group was,
// under the settings of then, and carries its own reason.
func TestRefusedDeadLetterCopyUndoesTheNack(t *testing.T) {
	log := newDLQLog()
	sourceRecords(log)
	c, m := dlqGroup(t, log, "2")
	ctx := context.Background()
	if res, err := c.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 1, 2, "first"); err != nil || res.Failed != 1 || res.DeadLettered {
		t.Fatalf("first nack: %+v %v", res, err)
	}
	log.tmu.Lock()
	log.refuseAppend = errs.Errorf(errs.InvalidRecord, "a compacted topic does not accept a record without a key")
	log.tmu.Unlock()
	if _, err := c.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 1, 2, "refused"); errs.Of(err) != errs.InvalidRecord {
		t.Fatalf("nack whose copy is refused: %v, want INVALID_RECORD", err)
	}
	nacks := func() float64 { return testutil.ToFloat64(c.metrics.nacks.WithLabelValues("app", "orders")) }
	if n := nacks(); n != 1 {
		t.Fatalf("skein_groupcoord_nacks_total %v after a nack and a refused one, want 1", n)
	}
	tp := assign.TopicPartition{Topic: "orders", Partition: 1}
	if e, ok := c.Deliveries("app", []assign.TopicPartition{tp})[tp].Find(2); !ok || e.Nacks != 1 || e.State != delivery.Nacked || e.Reason != "first" {
		t.Fatalf("after the refused nack the record's entry is %+v (found %v), want the first nack's", e, ok)
	}
	if _, err := c.AlterGroupConfig(ctx, "app", map[string]string{delivery.KeyMaxAttempts: "10"}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 1, 2, "second")
	if err != nil || res.Failed != 2 || res.DeadLettered || res.Next != 2 {
		t.Fatalf("the next nack: %+v %v, want 2 failed deliveries and a redelivery", res, err)
	}
	if n := len(log.topic("orders.dlq", 1)); n != 0 {
		t.Fatalf("the dead-letter topic holds %d records, want none", n)
	}
	// Refused with the group's first nack of a record: no entry is left.
	if _, err := c.AlterGroupConfig(ctx, "app", map[string]string{delivery.KeyMaxAttempts: "1"}); err != nil {
		t.Fatal(err)
	}
	log.tmu.Lock()
	log.refuseAppend = errs.Errorf(errs.MessageTooLarge, "too large")
	log.tmu.Unlock()
	if _, err := c.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 1, 3, "big"); errs.Of(err) != errs.MessageTooLarge {
		t.Fatalf("nack whose copy is too large: %v", err)
	}
	if _, ok := c.Deliveries("app", []assign.TopicPartition{tp})[tp].Find(3); ok {
		t.Fatal("a refused first nack left an entry")
	}
	if n := nacks(); n != 2 {
		t.Fatalf("skein_groupcoord_nacks_total %v after two nacks and two refused ones, want 2", n)
	}
	// A refusal after an attempt without an answer may follow a copy that
	// was written: nothing is undone, and the next nack finds the copy.
	log.tmu.Lock()
	log.refuseAppend = &client.UncertainError{Err: errs.Errorf(errs.CorruptMessage, "refused on a retry")}
	log.tmu.Unlock()
	if _, err := c.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 1, 3, "uncertain"); errs.Of(err) != errs.CorruptMessage {
		t.Fatalf("nack whose copy's outcome is unknown: %v", err)
	}
	if e, ok := c.Deliveries("app", []assign.TopicPartition{tp})[tp].Find(3); !ok || e.State != delivery.DeadLettering {
		t.Fatalf("after an uncertain copy the entry is %+v (found %v), want it still dead-lettering", e, ok)
	}
	if n := nacks(); n != 3 {
		t.Fatalf("skein_groupcoord_nacks_total %v after a nack whose copy's outcome is unknown, want 3: it is counted", n)
	}
}

// A record of a transaction still open is nacked and delivered again as any
// other, but dead-lettered only once its transaction has committed: until
// then the nack that would dead-letter it is refused OFFSET_NOT_AVAILABLE
// (retriable), changing nothing.
func TestNackOfARecordOfAnOpenTransaction(t *testing.T) {
	log := newDLQLog()
	sourceRecords(log)
	log.setTxn("orders", 0, 1, "open")
	c, m := dlqGroup(t, log, "2")
	ctx := context.Background()
	if res, err := c.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 0, 1, "one"); err != nil || res.Failed != 1 || res.DeadLettered {
		t.Fatalf("first nack of the open transaction's record: %+v %v, want it counted", res, err)
	}
	if _, err := c.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 0, 1, "two"); errs.Of(err) != errs.OffsetNotAvailable {
		t.Fatalf("the nack that would dead-letter it: %v, want OFFSET_NOT_AVAILABLE", err)
	}
	tp := assign.TopicPartition{Topic: "orders", Partition: 0}
	if e, _ := c.Deliveries("app", []assign.TopicPartition{tp})[tp].Find(1); e.Nacks != 1 || e.State != delivery.Nacked {
		t.Fatalf("after the refusal the entry is %+v, want one nack", e)
	}
	// The group's settings change while a nack is checked: it is checked
	// again for what it now decides.
	if _, err := c.AlterGroupConfig(ctx, "app", map[string]string{delivery.KeyMaxAttempts: "5"}); err != nil {
		t.Fatal(err)
	}
	log.tmu.Lock()
	log.onRead = func() {
		if _, err := c.AlterGroupConfig(ctx, "app", map[string]string{delivery.KeyMaxAttempts: "2"}); err != nil {
			t.Error(err)
		}
	}
	log.tmu.Unlock()
	if _, err := c.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 0, 1, "two"); errs.Of(err) != errs.OffsetNotAvailable {
		t.Fatalf("a nack that turns into a dead-lettering while it is checked: %v, want OFFSET_NOT_AVAILABLE", err)
	}
	if n := len(log.topic("orders.dlq", 0)); n != 0 {
		t.Fatalf("the open transaction's record was dead-lettered: %d copies", n)
	}
	log.setTxn("orders", 0, 1, "committed")
	res, err := c.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 0, 1, "two")
	if err != nil || !res.DeadLettered || res.Failed != 2 {
		t.Fatalf("once committed: %+v %v, want it dead-lettered", res, err)
	}
	if got := log.topic("orders.dlq", 0); len(got) != 1 || string(got[0].Value) != "v1" || got[0].Transactional {
		t.Fatalf("dead-letter copies %+v, want one plain copy of v1", got)
	}
}

// compacted answers a copy of log as compaction leaves __consumer_offsets:
// only the newest record of each key (a tombstone too), in log order; the
// topics groups consume are the same records.
func compacted(log *dlqLog) *dlqLog {
	out := newDLQLog()
	sourceRecords(out)
	for p := range int32(nParts) {
		recs := log.records(p)
		newest := map[string]int{}
		for i, e := range recs {
			newest[string(e.Key)] = i
		}
		mp := out.part(p)
		for i, e := range recs {
			if newest[string(e.Key)] == i {
				mp.entries = append(mp.entries, Entry{Offset: int64(len(mp.entries)), KV: e.KV})
			}
		}
	}
	return out
}

// A record nacked, then processed (the member commits past it) is done
// with: once the group's offsets are reset to read it again it is at its
// first delivery, and the group's max.delivery.attempts count from there,
// also at a new owner that loads the compacted log. A commit at the record
// (the position its nack moved the member to) keeps the count, as does a
// record the commit does not move past.
func TestCommitPastANackedRecordClearsItsCount(t *testing.T) {
	log := newDLQLog()
	sourceRecords(log)
	c, m := dlqGroup(t, log, "3")
	ctx := context.Background()
	tp := assign.TopicPartition{Topic: "orders", Partition: 0}
	attempts := func(c *Coordinator) (int32, int32) {
		t.Helper()
		d := c.Deliveries("app", []assign.TopicPartition{tp})[tp]
		return d.Attempt(0), d.Attempt(2)
	}
	for i := int32(1); i <= 2; i++ {
		if res, err := c.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 0, 0, "x"); err != nil || res.Failed != i || res.DeadLettered {
			t.Fatalf("nack %d: %+v %v", i, res, err)
		}
	}
	if res, err := c.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 0, 2, "y"); err != nil || res.Failed != 1 {
		t.Fatalf("nack of offset 2: %+v %v", res, err)
	}
	if err := commit(c, "app", m.MemberID, m.MemberEpoch, "orders", 0, 0); err != nil {
		t.Fatal(err)
	}
	if a0, a2 := attempts(c); a0 != 3 || a2 != 2 {
		t.Fatalf("after a commit at offset 0: attempts %d and %d, want 3 and 2", a0, a2)
	}
	// Processed at its third delivery.
	if err := commit(c, "app", m.MemberID, m.MemberEpoch, "orders", 0, 1); err != nil {
		t.Fatal(err)
	}
	// The member leaves and an operator resets the group to offset 0.
	if _, err := c.Heartbeat(ctx, "app", group.HeartbeatRequest{MemberID: m.MemberID, MemberEpoch: group.LeaveEpoch}); err != nil {
		t.Fatal(err)
	}
	if err := c.CommitOffsets(ctx, "app", "", -1, []Commit{{Topic: "orders", Partition: 0, Offset: 0, LeaderEpoch: -1}})[0]; err != nil {
		t.Fatalf("the reset: %v", err)
	}
	if a0, a2 := attempts(c); a0 != 1 || a2 != 2 {
		t.Fatalf("after the reset: attempts %d and %d, want 1 and 2", a0, a2)
	}

	// A new owner of the compacted log rebuilds the same counts.
	c.OnMetadata(owning(1))
	b := start(t, compacted(log), 2, owning(2, all()...))
	waitServing(t, b, "app")
	if a0, a2 := attempts(b); a0 != 1 || a2 != 2 {
		t.Fatalf("at the new owner: attempts %d and %d, want 1 and 2", a0, a2)
	}
	m = join(t, b, "app", "orders")
	for i := int32(1); i <= 2; i++ {
		if res, err := b.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 0, 0, "again"); err != nil || res.Failed != i || res.DeadLettered {
			t.Fatalf("nack %d after the reset: %+v %v, want a redelivery", i, res, err)
		}
	}
}

// A commit clears the counts of the records an earlier commit moved the
// group past and left in the log (a log an earlier version wrote): a reset
// after it does not bring them back.
func TestCommitClearsCountsAnEarlierCommitLeft(t *testing.T) {
	log := newDLQLog()
	sourceRecords(log)
	part := metadata.CoordinatorPartition("app", nParts)
	if _, err := log.Produce(context.Background(), part, Identity{ProducerID: 1}, []KV{
		{Key: offsetlog.DeliveryKey("app", "orders", 0), Value: offsetlog.EncodeDeliveries(delivery.Partition{{Offset: 0, Nacks: 2, DLQFrom: -1}})},
		{Key: offsetlog.OffsetKey("app", "orders", 0), Value: offsetlog.EncodeOffset(offsetlog.Offset{Offset: 1, LeaderEpoch: -1})},
	}); err != nil {
		t.Fatal(err)
	}
	c := start(t, log, 1, owning(1, all()...))
	waitServing(t, c, "app")
	if err := c.CommitOffsets(context.Background(), "app", "", -1, []Commit{{Topic: "orders", Partition: 0, Offset: 0, LeaderEpoch: -1}})[0]; err != nil {
		t.Fatalf("the reset: %v", err)
	}
	tp := assign.TopicPartition{Topic: "orders", Partition: 0}
	if got := c.Deliveries("app", []assign.TopicPartition{tp})[tp].Attempt(0); got != 1 {
		t.Fatalf("after the reset offset 0 is at attempt %d, want 1", got)
	}
	if !tombstoned(log.memLog, offsetlog.DeliveryKey("app", "orders", 0)) {
		t.Fatal("the reset did not tombstone the delivery record")
	}
}

// A transaction's offsets, once committed, clear the counts of the records
// they move the group past, as a plain commit does.
func TestTxnCommitPastANackedRecordClearsItsCount(t *testing.T) {
	log := newDLQLog()
	sourceRecords(log)
	c, m := dlqGroup(t, log, "3")
	ctx := context.Background()
	if res, err := c.Nack(ctx, "app", m.MemberID, m.MemberEpoch, "orders", 1, 0, "x"); err != nil || res.Failed != 1 {
		t.Fatalf("nack: %+v %v", res, err)
	}
	mustTxnCommit(t, c, "app", 7, 0, 1, 1)
	if tombstoned(log.memLog, offsetlog.DeliveryKey("app", "orders", 1)) {
		t.Fatal("a pending offset cleared the count")
	}
	complete(t, c, "app", 7, 1, true)
	if !tombstoned(log.memLog, offsetlog.DeliveryKey("app", "orders", 1)) {
		t.Fatal("the transaction's committed offset did not clear the count")
	}
}
