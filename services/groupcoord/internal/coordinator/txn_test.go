package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/services/groupcoord/internal/assign"
	"skein/services/groupcoord/internal/group"
	"skein/services/groupcoord/internal/offsetlog"
)

func txnCommit(c *Coordinator, groupID string, pid int64, epoch int32, offsets ...Commit) ([]error, error) {
	return c.TxnCommitOffsets(context.Background(), TxnCommit{TransactionalID: "tx-" + groupID, GroupID: groupID,
		ProducerID: pid, ProducerEpoch: epoch, Commits: offsets})
}

// mustTxnCommit commits one offset of orders:p in a transaction.
func mustTxnCommit(t *testing.T, c *Coordinator, groupID string, pid int64, epoch int32, p int32, off int64) {
	t.Helper()
	res, err := txnCommit(c, groupID, pid, epoch, Commit{Topic: "orders", Partition: p, Offset: off, LeaderEpoch: 2, Metadata: "m"})
	if err != nil || res[0] != nil {
		t.Fatalf("txn commit of %s orders:%d=%d at %d/%d: %v %v", groupID, p, off, pid, epoch, res, err)
	}
}

func complete(t *testing.T, c *Coordinator, groupID string, pid int64, epoch int32, commit bool) {
	t.Helper()
	if err := c.CompleteTxnOffsets(context.Background(), groupID, pid, epoch, commit); err != nil {
		t.Fatalf("complete %s %d/%d commit=%v: %v", groupID, pid, epoch, commit, err)
	}
}

// written renders the records of groupID's partition from offset from on,
// one per record: "offset t:p=N", "offset t:p tombstone", "pending
// pid@epoch t:p=N", "pending pid t:p tombstone", "group", "owner".
func written(t *testing.T, log *memLog, groupID string, from int) []string {
	t.Helper()
	var out []string
	for _, e := range log.records(metadata.CoordinatorPartition(groupID, nParts))[from:] {
		k, err := offsetlog.DecodeKey(e.Key)
		if err != nil {
			t.Fatal(err)
		}
		if k.Group != groupID && k.Kind != offsetlog.KindOwner {
			continue
		}
		tp := assign.TopicPartition{Topic: k.Topic, Partition: k.Partition}
		switch k.Kind {
		case offsetlog.KindOffset:
			if e.Value == nil {
				out = append(out, fmt.Sprintf("offset %s tombstone", tp))
				continue
			}
			o, err := offsetlog.DecodeOffset(e.Value)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("offset %s=%d", tp, o.Offset))
		case offsetlog.KindPending:
			if e.Value == nil {
				out = append(out, fmt.Sprintf("pending %d %s tombstone", k.ProducerID, tp))
				continue
			}
			po, err := offsetlog.DecodePending(e.Value)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("pending %d@%d %s=%d", k.ProducerID, po.Epoch, tp, po.Offset.Offset))
		case offsetlog.KindGroup:
			out = append(out, "group")
		case offsetlog.KindOwner:
			out = append(out, "owner")
		}
	}
	return out
}

func logLen(log *memLog, groupID string) int {
	return len(log.records(metadata.CoordinatorPartition(groupID, nParts)))
}

func expectWritten(t *testing.T, log *memLog, groupID string, from int, want ...string) {
	t.Helper()
	if got := written(t, log, groupID, from); !slices.Equal(got, want) {
		t.Fatalf("records written:\n got %s\nwant %s", strings.Join(got, "; "), strings.Join(want, "; "))
	}
}

func fetchStable(t *testing.T, c *Coordinator, groupID string, p int32) Committed {
	t.Helper()
	got, err := c.FetchOffsets(context.Background(), groupID, []assign.TopicPartition{{Topic: "orders", Partition: p}}, true)
	if err != nil {
		t.Fatal(err)
	}
	return got[0]
}

// TestTxnOffsetsCommitAbort: pending offsets are written but not visible;
// a commit makes them the group's committed offsets, an abort drops them;
// a retried completion changes and writes nothing.
func TestTxnOffsetsCommitAbort(t *testing.T) {
	log := newMemLog()
	c := start(t, log, 1, owning(1, all()...))
	waitLoaded(t, c, nParts)
	// A group with a member: a transactional commit needs no membership.
	m := join(t, c, "app", "orders")
	if err := commit(c, "app", m.MemberID, m.MemberEpoch, "orders", 0, 5); err != nil {
		t.Fatal(err)
	}
	from := logLen(log, "app")
	mustTxnCommit(t, c, "app", 7, 3, 0, 10)
	mustTxnCommit(t, c, "app", 7, 3, 1, 20)
	expectWritten(t, log, "app", from, "pending 7@3 orders:0=10", "pending 7@3 orders:1=20")
	if got := committed(t, c, "app", "orders", 0); got != 5 {
		t.Fatalf("a pending offset is visible: %d, want 5", got)
	}
	if got := committed(t, c, "app", "orders", 1); got != -1 {
		t.Fatalf("a pending offset is visible: %d, want -1", got)
	}
	all, _ := c.FetchOffsets(context.Background(), "app", nil, false)
	if len(all) != 1 || all[0].Partition != 0 || all[0].Offset != 5 {
		t.Fatalf("all offsets: %+v", all)
	}
	if got := fetchStable(t, c, "app", 1); errs.Of(got.Err) != errs.UnstableOffsetCommit || got.Offset != -1 {
		t.Fatalf("require_stable with a pending offset: %+v", got)
	}
	if got := fetchStable(t, c, "app", 2); got.Err != nil || got.Offset != -1 {
		t.Fatalf("require_stable without a pending offset: %+v", got)
	}

	from = logLen(log, "app")
	complete(t, c, "app", 7, 4, true)
	expectWritten(t, log, "app", from, "offset orders:0=10", "offset orders:1=20",
		"pending 7 orders:0 tombstone", "pending 7 orders:1 tombstone")
	if got := committed(t, c, "app", "orders", 0); got != 10 {
		t.Fatalf("committed %d, want 10", got)
	}
	got, _ := c.FetchOffsets(context.Background(), "app", []assign.TopicPartition{{Topic: "orders", Partition: 1}}, true)
	if got[0].Err != nil || got[0].Offset != 20 || got[0].LeaderEpoch != 2 || got[0].Metadata != "m" {
		t.Fatalf("committed: %+v", got[0])
	}
	// Retried (an answer lost), or retried with the other decision by a
	// confused caller: nothing pending, nothing written, OK.
	from = logLen(log, "app")
	complete(t, c, "app", 7, 4, true)
	complete(t, c, "app", 7, 4, false)
	expectWritten(t, log, "app", from)

	// The producer's next transaction, at the bumped epoch, aborts.
	mustTxnCommit(t, c, "app", 7, 4, 0, 11)
	from = logLen(log, "app")
	complete(t, c, "app", 7, 5, false)
	expectWritten(t, log, "app", from, "pending 7 orders:0 tombstone")
	if got := committed(t, c, "app", "orders", 0); got != 10 {
		t.Fatalf("after the abort: %d, want 10", got)
	}
	if got := fetchStable(t, c, "app", 0); got.Err != nil || got.Offset != 10 {
		t.Fatalf("require_stable after the abort: %+v", got)
	}
	// The member's group is unharmed.
	if d, err := c.DescribeGroup(context.Background(), "app"); err != nil || len(d.Members) != 1 {
		t.Fatalf("describe: %+v %v", d, err)
	}
}

// TestTxnOffsetsEpochs: an older epoch is fenced; a late completion of an
// older transaction leaves a newer one's offsets; a newer epoch replaces
// older pending offsets; a TxnOffsetCommit of an ended transaction is
// fenced.
func TestTxnOffsetsEpochs(t *testing.T) {
	log := newMemLog()
	c := start(t, log, 1, owning(1, all()...))
	waitLoaded(t, c, nParts)

	mustTxnCommit(t, c, "app", 7, 3, 0, 10)
	complete(t, c, "app", 7, 4, true)
	// The next transaction runs at epoch 4.
	mustTxnCommit(t, c, "app", 7, 4, 0, 20)
	from := logLen(log, "app")
	// A late or retried completion of the first one (at 4), or of an even
	// older one, must not commit the second's offsets.
	complete(t, c, "app", 7, 4, true)
	complete(t, c, "app", 7, 3, true)
	expectWritten(t, log, "app", from)
	if got := committed(t, c, "app", "orders", 0); got != 10 {
		t.Fatalf("a late completion committed a newer transaction's offset: %d", got)
	}
	// An older epoch is fenced, and writes nothing.
	res, err := txnCommit(c, "app", 7, 3, Commit{Topic: "orders", Partition: 1, Offset: 1})
	if errs.Of(err) != errs.ProducerFenced || res[0] != nil {
		t.Fatalf("older epoch: %v %v", res, err)
	}
	expectWritten(t, log, "app", from)
	// A newer epoch (the producer's next transaction; the completion of
	// the one at 4 never came here) replaces the pending offsets.
	mustTxnCommit(t, c, "app", 7, 6, 1, 30)
	expectWritten(t, log, "app", from, "pending 7@6 orders:1=30", "pending 7 orders:0 tombstone")
	complete(t, c, "app", 7, 7, true)
	if got := committed(t, c, "app", "orders", 0); got != 10 {
		t.Fatalf("the replaced offset was committed: %d", got)
	}
	if got := committed(t, c, "app", "orders", 1); got != 30 {
		t.Fatalf("committed %d, want 30", got)
	}
	// A TxnOffsetCommit delayed past its transaction's end is fenced.
	from = logLen(log, "app")
	if _, err := txnCommit(c, "app", 7, 6, Commit{Topic: "orders", Partition: 2, Offset: 1}); errs.Of(err) != errs.ProducerFenced {
		t.Fatalf("late commit of an ended transaction: %v", err)
	}
	expectWritten(t, log, "app", from)
	// Another producer's offsets are its own.
	mustTxnCommit(t, c, "app", 8, 0, 2, 40)
	complete(t, c, "app", 7, 8, true)
	if got := committed(t, c, "app", "orders", 2); got != -1 {
		t.Fatalf("another producer's completion committed: %d", got)
	}
	complete(t, c, "app", 8, 1, true)
	if got := committed(t, c, "app", "orders", 2); got != 40 {
		t.Fatalf("committed %d, want 40", got)
	}
}

// TestTxnOffsetsFailover: pending offsets survive a change of coordinator
// (the loader restores them), stay invisible, and a completion at the new
// coordinator applies them.
func TestTxnOffsetsFailover(t *testing.T) {
	log := newMemLog()
	a := start(t, log, 1, owning(1, all()...))
	waitLoaded(t, a, nParts)
	mustTxnCommit(t, a, "app", 7, 3, 0, 10)
	mustTxnCommit(t, a, "app", 7, 3, 1, 11)
	mustTxnCommit(t, a, "other", 9, 1, 0, 50)
	mustTxnCommit(t, a, "done", 5, 2, 0, 60)
	complete(t, a, "done", 5, 3, true)
	a.OnMetadata(owning(1))

	b := start(t, log, 2, owning(2, all()...))
	waitLoaded(t, b, nParts)
	if got := committed(t, b, "app", "orders", 0); got != -1 {
		t.Fatalf("a pending offset is visible after the failover: %d", got)
	}
	if got := fetchStable(t, b, "app", 0); errs.Of(got.Err) != errs.UnstableOffsetCommit {
		t.Fatalf("the pending offset was not restored: %+v", got)
	}
	if got := fetchStable(t, b, "done", 0); got.Err != nil || got.Offset != 60 {
		t.Fatalf("a completed transaction after the failover: %+v", got)
	}
	// The epoch rule holds for restored offsets too.
	if _, err := txnCommit(b, "app", 7, 2, Commit{Topic: "orders", Partition: 3, Offset: 1}); errs.Of(err) != errs.ProducerFenced {
		t.Fatalf("older epoch after the failover: %v", err)
	}
	complete(t, b, "app", 7, 3, true) // a completion of an older transaction
	if got := committed(t, b, "app", "orders", 0); got != -1 {
		t.Fatalf("a completion at the pending epoch applied: %d", got)
	}
	complete(t, b, "app", 7, 4, true)
	complete(t, b, "other", 9, 2, false)
	if got := committed(t, b, "app", "orders", 1); got != 11 {
		t.Fatalf("after the completion at the new coordinator: %d, want 11", got)
	}
	// The aborted group held nothing else: it is gone.
	if _, err := b.DescribeGroup(context.Background(), "other"); errs.Of(err) != errs.GroupIDNotFound {
		t.Fatalf("the aborted group: %v", err)
	}
	b.OnMetadata(owning(2))

	// A third coordinator agrees.
	c := start(t, log, 3, owning(3, all()...))
	waitLoaded(t, c, nParts)
	for g, want := range map[string]int64{"app": 10, "other": -1, "done": 60} {
		if got := fetchStable(t, c, g, 0); got.Err != nil || got.Offset != want {
			t.Errorf("%s at the third coordinator: %+v, want %d", g, got, want)
		}
	}
	if _, err := c.DescribeGroup(context.Background(), "other"); errs.Of(err) != errs.GroupIDNotFound {
		t.Fatalf("the aborted group came back: %v", err)
	}
}

// A plain commit made after a transaction's TxnOffsetCommit (the
// partition's new owner, reading uncommitted, say) is the newer: the
// transaction's completion leaves it, as Kafka does, and commits its
// offsets only where no later commit came. A coordinator that loads the
// log after the pending offsets and the plain commit decides the same.
func TestTxnCompletionLeavesALaterCommit(t *testing.T) {
	log := newMemLog()
	a := start(t, log, 1, owning(1, all()...))
	waitLoaded(t, a, nParts)
	if err := commit(a, "app", "", -1, "orders", 2, 100); err != nil { // before the transaction
		t.Fatal(err)
	}
	mustTxnCommit(t, a, "app", 7, 3, 0, 150)
	mustTxnCommit(t, a, "app", 7, 3, 1, 160)
	mustTxnCommit(t, a, "app", 7, 3, 2, 170)
	if err := commit(a, "app", "", -1, "orders", 0, 300); err != nil { // after it
		t.Fatal(err)
	}
	from := logLen(log, "app")
	complete(t, a, "app", 7, 4, true)
	expectWritten(t, log, "app", from, "offset orders:1=160", "offset orders:2=170",
		"pending 7 orders:0 tombstone", "pending 7 orders:1 tombstone", "pending 7 orders:2 tombstone")
	for p, want := range map[int32]int64{0: 300, 1: 160, 2: 170} {
		if got := committed(t, a, "app", "orders", p); got != want {
			t.Errorf("orders:%d after the completion: %d, want %d", p, got, want)
		}
	}

	// The same again, completed by a coordinator that loaded the log.
	mustTxnCommit(t, a, "app", 7, 4, 0, 400)
	mustTxnCommit(t, a, "app", 7, 4, 1, 410)
	if err := commit(a, "app", "", -1, "orders", 1, 500); err != nil {
		t.Fatal(err)
	}
	a.OnMetadata(owning(1))
	b := start(t, log, 2, owning(2, all()...))
	waitLoaded(t, b, nParts)
	complete(t, b, "app", 7, 5, true)
	for p, want := range map[int32]int64{0: 400, 1: 500, 2: 170} {
		if got := committed(t, b, "app", "orders", p); got != want {
			t.Errorf("orders:%d after the completion at the new coordinator: %d, want %d", p, got, want)
		}
	}
}

// TestTxnOffsetsBadInput: every malformed request is refused with its code
// and nothing is written.
func TestTxnOffsetsBadInput(t *testing.T) {
	log := newMemLog()
	p := metadata.CoordinatorPartition("app", nParts)
	c := start(t, log, 1, owning(1, p))
	waitServing(t, c, "app")
	var elsewhere string
	for i := 0; elsewhere == ""; i++ {
		if g := fmt.Sprint("g", i); metadata.CoordinatorPartition(g, nParts) != p {
			elsewhere = g
		}
	}
	good := Commit{Topic: "orders", Partition: 0, Offset: 1}
	before := len(log.records(p))
	for name, tc := range map[string]struct {
		req  TxnCommit
		want *errs.Error
	}{
		"empty group id":         {TxnCommit{TransactionalID: "x", ProducerID: 1, Commits: []Commit{good}}, errs.InvalidGroupID},
		"group of another owner": {TxnCommit{TransactionalID: "x", GroupID: elsewhere, ProducerID: 1, Commits: []Commit{good}}, errs.NotCoordinator},
		"no offsets":             {TxnCommit{TransactionalID: "x", GroupID: "app", ProducerID: 1}, errs.InvalidRequest},
		"empty transactional id": {TxnCommit{GroupID: "app", ProducerID: 1, Commits: []Commit{good}}, errs.InvalidRequest},
		"negative producer id":   {TxnCommit{TransactionalID: "x", GroupID: "app", ProducerID: -1, Commits: []Commit{good}}, errs.InvalidRequest},
		"negative epoch":         {TxnCommit{TransactionalID: "x", GroupID: "app", ProducerID: 1, ProducerEpoch: -1, Commits: []Commit{good}}, errs.InvalidRequest},
		"epoch beyond int16":     {TxnCommit{TransactionalID: "x", GroupID: "app", ProducerID: 1, ProducerEpoch: 1 << 16, Commits: []Commit{good}}, errs.InvalidRequest},
		"epoch never handed out": {TxnCommit{TransactionalID: "x", GroupID: "app", ProducerID: 1, ProducerEpoch: 32767, Commits: []Commit{good}}, errs.InvalidProducerEpoch},
	} {
		_, err := c.TxnCommitOffsets(context.Background(), tc.req)
		if errs.Of(err) != tc.want {
			t.Errorf("%s: %v, want %s", name, err, tc.want.Name)
		}
	}
	// Per partition: each its code; the group is not created.
	res, err := txnCommit(c, "app", 1, 0,
		Commit{Topic: "orders", Partition: 0, Offset: -1},
		Commit{Topic: "nope", Partition: 0, Offset: 1},
		Commit{Topic: "orders", Partition: 9, Offset: 1},
		Commit{Topic: "orders", Partition: 1, Offset: 1, Metadata: strings.Repeat("x", offsetlog.MaxMetadata+1)})
	want := []*errs.Error{errs.InvalidRequest, errs.UnknownTopicOrPartition, errs.UnknownTopicOrPartition, errs.OffsetMetadataTooLarge}
	if err != nil {
		t.Fatalf("request refused as a whole: %v", err)
	}
	for i, w := range want {
		if errs.Of(res[i]) != w {
			t.Errorf("partition %d: %v, want %s", i, res[i], w.Name)
		}
	}
	if _, err := c.DescribeGroup(context.Background(), "app"); errs.Of(err) != errs.GroupIDNotFound {
		t.Errorf("a refused commit created the group: %v", err)
	}
	// Completions.
	for name, tc := range map[string]struct {
		group string
		pid   int64
		epoch int32
		want  *errs.Error
	}{
		"empty group id":         {"", 1, 1, errs.InvalidGroupID},
		"group of another owner": {elsewhere, 1, 1, errs.NotCoordinator},
		"negative producer id":   {"app", -1, 1, errs.InvalidRequest},
		"negative epoch":         {"app", 1, -1, errs.InvalidRequest},
		"epoch beyond int16":     {"app", 1, 1 << 15, errs.InvalidRequest},
		"unknown group":          {"app", 1, 1, errs.None},
	} {
		err := c.CompleteTxnOffsets(context.Background(), tc.group, tc.pid, tc.epoch, true)
		if errs.Of(err) != tc.want && !(tc.want == errs.None && err == nil) {
			t.Errorf("complete, %s: %v, want %s", name, err, tc.want.Name)
		}
	}
	if _, err := c.DescribeGroup(context.Background(), "app"); errs.Of(err) != errs.GroupIDNotFound {
		t.Errorf("a completion created the group: %v", err)
	}
	if after := len(log.records(p)); after != before {
		t.Fatalf("bad input wrote %d records", after-before)
	}
	// A mix: the valid partition is recorded, the invalid one refused.
	res, err = txnCommit(c, "app", 1, 0, good, Commit{Topic: "orders", Partition: 1, Offset: -5})
	if err != nil || res[0] != nil || errs.Of(res[1]) != errs.InvalidRequest {
		t.Fatalf("mixed: %v %v", res, err)
	}
	expectWritten(t, log, "app", before, "pending 1@0 orders:0=1")
}

// TestTxnOffsetsWrites: a completion whose write is refused changes
// nothing and can be retried; one of unknown outcome is settled before the
// next write; a deleted group's pending offsets are tombstoned with it.
func TestTxnOffsetsWrites(t *testing.T) {
	log := newMemLog()
	c := start(t, log, 1, owning(1, all()...))
	waitLoaded(t, c, nParts)
	mustTxnCommit(t, c, "app", 7, 3, 0, 10)

	log.failWith(memFailure{err: errs.Errorf(errs.MessageTooLarge, "injected")})
	if err := c.CompleteTxnOffsets(context.Background(), "app", 7, 4, true); errs.Of(err) != errs.MessageTooLarge {
		t.Fatalf("refused write: %v", err)
	}
	if got := fetchStable(t, c, "app", 0); errs.Of(got.Err) != errs.UnstableOffsetCommit {
		t.Fatalf("after a refused completion: %+v", got)
	}
	// In the log, but the answer was lost: the retry settles it and
	// answers OK without writing again.
	log.failWith(memFailure{err: errs.Errorf(errs.RequestTimedOut, "injected"), appended: true})
	if err := c.CompleteTxnOffsets(context.Background(), "app", 7, 4, true); !errs.IsRetriable(err) {
		t.Fatalf("write of unknown outcome: %v", err)
	}
	from := logLen(log, "app")
	complete(t, c, "app", 7, 4, true)
	expectWritten(t, log, "app", from)
	if got := fetchStable(t, c, "app", 0); got.Err != nil || got.Offset != 10 {
		t.Fatalf("after the settled completion: %+v", got)
	}
	// The same for a TxnOffsetCommit.
	log.failWith(memFailure{err: errs.Errorf(errs.RequestTimedOut, "injected"), appended: true})
	if _, err := txnCommit(c, "app", 7, 4, Commit{Topic: "orders", Partition: 1, Offset: 1}); !errs.IsRetriable(err) {
		t.Fatalf("txn commit of unknown outcome: %v", err)
	}
	mustTxnCommit(t, c, "app", 7, 4, 2, 2) // settles the first
	if got := fetchStable(t, c, "app", 1); errs.Of(got.Err) != errs.UnstableOffsetCommit {
		t.Fatalf("the settled pending offset: %+v", got)
	}

	// Deleting the (member-less) group drops its pending offsets too.
	from = logLen(log, "app")
	if err := c.DeleteGroup(context.Background(), "app"); err != nil {
		t.Fatal(err)
	}
	expectWritten(t, log, "app", from, "offset orders:0 tombstone", "pending 7 orders:1 tombstone", "pending 7 orders:2 tombstone", "group")
	complete(t, c, "app", 7, 5, true)
	if got := committed(t, c, "app", "orders", 1); got != -1 {
		t.Fatalf("a deleted group's pending offset was committed: %d", got)
	}
	b := start(t, log, 2, owning(2, all()...))
	waitLoaded(t, b, nParts)
	if _, err := b.DescribeGroup(context.Background(), "app"); errs.Of(err) != errs.GroupIDNotFound {
		t.Fatalf("the deleted group came back: %v", err)
	}
}

// TestTxnOffsetsFromAMember: offsets that name the member they came from
// are checked as that member's plain commit would be, so a member whose
// partitions moved on cannot commit over the new owner's through its
// transaction; offsets that name no member are taken as before.
func TestTxnOffsetsFromAMember(t *testing.T) {
	log := newMemLog()
	c := start(t, log, 1, owning(1, all()...))
	waitLoaded(t, c, nParts)
	a := join(t, c, "app", "orders")
	send := func(pid int64, m *TxnMember, p int32, off int64) error {
		t.Helper()
		res, err := c.TxnCommitOffsets(context.Background(), TxnCommit{TransactionalID: "tx", GroupID: "app", ProducerID: pid, ProducerEpoch: 0,
			Commits: []Commit{{Topic: "orders", Partition: p, Offset: off}}, Member: m})
		if err != nil {
			t.Fatalf("txn commit: %v", err)
		}
		return res[0]
	}
	if err := send(7, &TxnMember{ID: a.MemberID, Epoch: a.MemberEpoch}, 0, 10); err != nil {
		t.Fatalf("the owner at its epoch: %v", err)
	}
	from := logLen(log, "app")
	for _, tc := range []struct {
		name string
		m    TxnMember
		want *errs.Error
	}{
		{"a stale epoch", TxnMember{ID: a.MemberID, Epoch: a.MemberEpoch + 1}, errs.StaleMemberEpoch},
		{"an unknown member", TxnMember{ID: "nobody", Epoch: a.MemberEpoch}, errs.UnknownMemberID},
	} {
		if err := send(8, &tc.m, 1, 20); errs.Of(err) != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want.Name)
		}
	}
	expectWritten(t, log, "app", from)

	// A leaves; B takes the partitions and commits; A's late transaction
	// is refused and B's offset stays once it completes.
	if _, err := c.Heartbeat(context.Background(), "app", group.HeartbeatRequest{MemberID: a.MemberID, MemberEpoch: group.LeaveEpoch}); err != nil {
		t.Fatal(err)
	}
	b := join(t, c, "app", "orders")
	if err := commit(c, "app", b.MemberID, b.MemberEpoch, "orders", 2, 500); err != nil {
		t.Fatal(err)
	}
	if err := send(9, &TxnMember{ID: a.MemberID, Epoch: a.MemberEpoch}, 2, 200); errs.Of(err) != errs.UnknownMemberID {
		t.Errorf("the member that left: %v, want UNKNOWN_MEMBER_ID", err)
	}
	complete(t, c, "app", 9, 1, true)
	if got := committed(t, c, "app", "orders", 2); got != 500 {
		t.Errorf("orders:2 after the refused transaction: %d, want the new owner's 500", got)
	}
	// Without a member the offsets are taken whoever owns the partition.
	if err := send(10, nil, 3, 30); err != nil {
		t.Errorf("no member: %v", err)
	}
}
