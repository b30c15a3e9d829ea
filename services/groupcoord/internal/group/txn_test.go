package group

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"skein/libs/errs"
	"skein/services/groupcoord/internal/assign"
)

// txnStep is one event on a TxnOffsets: a TxnOffsetCommit ("commit pid
// epoch t:p=offset,..."), a CompleteTxnOffsets ("complete|abort pid
// epoch"), or a write that fails ("lost ..." decides but never applies).
// want is the expected error code ("" for none), pending the pending set
// after it ("pid@epoch:t:p=offset ..." sorted, "-" for none), committed
// what the step commits ("t:p=offset,...", "-" for nothing).
type txnStep struct {
	event     string
	want      string
	pending   string
	committed string
}

func offsetsOf(t *testing.T, spec string) map[assign.TopicPartition]Offset {
	t.Helper()
	out := map[assign.TopicPartition]Offset{}
	for _, f := range strings.Split(spec, ",") {
		var topic string
		var p int32
		var off int64
		if _, err := fmt.Sscanf(strings.NewReplacer(":", " ", "=", " ").Replace(f), "%s %d %d", &topic, &p, &off); err != nil {
			t.Fatalf("bad offsets %q: %v", spec, err)
		}
		out[assign.TopicPartition{Topic: topic, Partition: p}] = Offset{Offset: off, LeaderEpoch: -1}
	}
	return out
}

func renderPending(tx *TxnOffsets) string {
	var out []string
	for _, pid := range tx.Producers() {
		offs := tx.Pending(pid)
		for _, tp := range slices.SortedFunc(maps.Keys(offs), compareTP) {
			out = append(out, fmt.Sprintf("%d@%d:%s=%d", pid, offs[tp].Epoch, tp, offs[tp].Offset.Offset))
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, " ")
}

func renderCommitted(m map[assign.TopicPartition]Offset) string {
	var out []string
	for _, tp := range slices.SortedFunc(maps.Keys(m), compareTP) {
		out = append(out, fmt.Sprintf("%s=%d", tp, m[tp].Offset))
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

func TestTxnOffsets(t *testing.T) {
	for name, steps := range map[string][]txnStep{
		"commit applies": {
			{event: "commit 7 3 t:0=10,t:1=20", pending: "7@3:t:0=10 7@3:t:1=20", committed: "-"},
			{event: "commit 7 3 t:1=21,u:0=5", pending: "7@3:t:0=10 7@3:t:1=21 7@3:u:0=5", committed: "-"},
			{event: "complete 7 4", pending: "-", committed: "t:0=10,t:1=21,u:0=5"},
		},
		"abort discards": {
			{event: "commit 7 3 t:0=10", pending: "7@3:t:0=10"},
			{event: "abort 7 4", pending: "-", committed: "-"},
		},
		"retried completion is a no-op": {
			{event: "commit 7 3 t:0=10", pending: "7@3:t:0=10"},
			{event: "complete 7 4", pending: "-", committed: "t:0=10"},
			{event: "complete 7 4", pending: "-", committed: "-"},
			{event: "abort 7 4", pending: "-", committed: "-"},
		},
		"completion of a producer with nothing pending": {
			{event: "complete 9 1", pending: "-", committed: "-"},
		},
		"other producers are untouched": {
			{event: "commit 7 3 t:0=10", pending: "7@3:t:0=10"},
			{event: "commit 8 0 t:0=99", pending: "7@3:t:0=10 8@0:t:0=99"},
			{event: "complete 7 4", pending: "8@0:t:0=99", committed: "t:0=10"},
			{event: "abort 8 1", pending: "-", committed: "-"},
		},
		// The producer's next transaction runs at the completion's epoch:
		// a late completion of the old one must not commit its offsets.
		"late completion of an older transaction leaves the newer's offsets": {
			{event: "commit 7 3 t:0=10", pending: "7@3:t:0=10"},
			{event: "complete 7 4", committed: "t:0=10", pending: "-"},
			{event: "commit 7 4 t:0=11", pending: "7@4:t:0=11"},
			{event: "complete 7 4", pending: "7@4:t:0=11", committed: "-"},
			{event: "abort 7 4", pending: "7@4:t:0=11", committed: "-"},
			{event: "complete 7 3", pending: "7@4:t:0=11", committed: "-"},
			{event: "complete 7 5", pending: "-", committed: "t:0=11"},
		},
		"older epoch fenced": {
			{event: "commit 7 5 t:0=10", pending: "7@5:t:0=10"},
			{event: "commit 7 4 t:0=9", want: "PRODUCER_FENCED", pending: "7@5:t:0=10"},
		},
		"newer epoch replaces the older transaction's offsets": {
			{event: "commit 7 3 t:0=10,t:1=20", pending: "7@3:t:0=10 7@3:t:1=20"},
			{event: "commit 7 5 t:1=25,t:2=30", pending: "7@5:t:1=25 7@5:t:2=30"},
			{event: "complete 7 6", pending: "-", committed: "t:1=25,t:2=30"},
		},
		// A TxnOffsetCommit that arrives after its transaction ended (a
		// delayed or replayed request) is refused, with or without offsets
		// pending when the completion came.
		"late commit of an ended transaction": {
			{event: "complete 7 4", pending: "-"},
			{event: "commit 7 3 t:0=1", want: "PRODUCER_FENCED", pending: "-"},
			{event: "commit 7 4 t:0=2", pending: "7@4:t:0=2"},
			{event: "abort 7 5", pending: "-"},
			{event: "commit 7 4 t:0=3", want: "PRODUCER_FENCED", pending: "-"},
		},
		"a failed write changes nothing": {
			{event: "commit 7 3 t:0=10", pending: "7@3:t:0=10"},
			{event: "lost commit 7 5 t:0=50", pending: "7@3:t:0=10"},
			{event: "lost complete 7 4", pending: "7@3:t:0=10"},
			{event: "complete 7 4", pending: "-", committed: "t:0=10"},
		},
		"out of range": {
			{event: "commit -1 0 t:0=1", want: "INVALID_REQUEST", pending: "-"},
			{event: "commit 7 -1 t:0=1", want: "INVALID_REQUEST", pending: "-"},
			{event: "commit 7 32767 t:0=1", want: "INVALID_PRODUCER_EPOCH", pending: "-"},
			{event: "complete -1 1", want: "INVALID_REQUEST", pending: "-"},
			{event: "complete 7 -3", want: "INVALID_REQUEST", pending: "-"},
		},
		// At an exhausted epoch the markers go out at 32767.
		"exhausted epoch": {
			{event: "commit 7 32766 t:0=1", pending: "7@32766:t:0=1"},
			{event: "complete 7 32767", pending: "-", committed: "t:0=1"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var tx TxnOffsets
			for i, st := range steps {
				f := strings.Fields(st.event)
				lost := f[0] == "lost"
				if lost {
					f = f[1:]
				}
				var pid, epoch int64
				fmt.Sscan(f[1], &pid)
				fmt.Sscan(f[2], &epoch)
				var ch TxnChange
				var err error
				switch f[0] {
				case "commit":
					ch, err = tx.Commit(pid, int16(epoch), offsetsOf(t, f[3]))
				case "complete", "abort":
					ch, err = tx.Complete(pid, int16(epoch), f[0] == "complete")
				default:
					t.Fatalf("step %d: unknown event %q", i, st.event)
				}
				if got := errs.Of(err); (st.want == "" && err != nil) || (st.want != "" && got.Name != st.want) {
					t.Fatalf("step %d %q: error %v, want %q", i, st.event, err, st.want)
				}
				if err == nil {
					checkChange(t, &tx, ch)
					if !lost {
						tx.Apply(ch)
					}
				}
				if st.pending != "" && renderPending(&tx) != st.pending {
					t.Fatalf("step %d %q: pending %s, want %s", i, st.event, renderPending(&tx), st.pending)
				}
				if st.committed != "" && renderCommitted(ch.Commit) != st.committed {
					t.Fatalf("step %d %q: committed %s, want %s", i, st.event, renderCommitted(ch.Commit), st.committed)
				}
			}
		})
	}
}

// checkChange: a change drops only offsets that are pending, puts only at
// one epoch, and commits only offsets it drops.
func checkChange(t *testing.T, tx *TxnOffsets, ch TxnChange) {
	t.Helper()
	pending := tx.Pending(ch.ProducerID)
	for _, tp := range ch.Drop {
		if _, ok := pending[tp]; !ok {
			t.Fatalf("drops %s, which is not pending", tp)
		}
		if _, ok := ch.Put[tp]; ok {
			t.Fatalf("drops and puts %s", tp)
		}
	}
	if !slices.IsSortedFunc(ch.Drop, compareTP) {
		t.Fatalf("drops out of order: %v", ch.Drop)
	}
	for tp, o := range ch.Commit {
		if !slices.Contains(ch.Drop, tp) || pending[tp].Offset != o {
			t.Fatalf("commits %s=%d, which it does not take from the pending offsets", tp, o.Offset)
		}
	}
	epochs := map[int16]bool{}
	for _, po := range ch.Put {
		epochs[po.Epoch] = true
	}
	if len(epochs) > 1 {
		t.Fatalf("puts at several epochs: %v", epochs)
	}
}

// TestTxnOffsetsLoad: pending offsets read back (each with its epoch)
// complete as the ones written did, and Has and Epoch see them.
func TestTxnOffsetsLoad(t *testing.T) {
	var tx TxnOffsets
	tp := assign.TopicPartition{Topic: "t", Partition: 1}
	tx.Load(7, tp, PendingOffset{Epoch: 2, Offset: Offset{Offset: 5}})
	tx.Load(7, assign.TopicPartition{Topic: "t", Partition: 2}, PendingOffset{Epoch: 3, Offset: Offset{Offset: 6}})
	if !tx.Has(tp) || tx.Has(assign.TopicPartition{Topic: "t", Partition: 0}) || tx.Empty() {
		t.Fatal("Has or Empty wrong after Load")
	}
	if e, ok := tx.Epoch(7); !ok || e != 3 {
		t.Fatalf("epoch %d %v, want 3", e, ok)
	}
	// Mixed epochs (never written so, but the rule holds per offset): a
	// completion at 3 takes only the offset of epoch 2.
	ch, err := tx.Complete(7, 3, true)
	if err != nil || renderCommitted(ch.Commit) != "t:1=5" {
		t.Fatalf("complete at 3: %s %v", renderCommitted(ch.Commit), err)
	}
	tx.Apply(ch)
	if renderPending(&tx) != "7@3:t:2=6" {
		t.Fatalf("pending %s", renderPending(&tx))
	}
	// A commit at 3 with a new partition keeps the epoch-3 offset.
	ch, err = tx.Commit(7, 3, offsetsOf(t, "t:4=1"))
	if err != nil || len(ch.Drop) != 0 {
		t.Fatalf("commit at 3: %+v %v", ch, err)
	}
}

// txnProducer is one transactional producer as the transaction coordinator
// drives it: its current epoch, the offsets of its open transaction, and
// its ended transactions (whose completions and TxnOffsetCommits may come
// again, late).
type txnProducer struct {
	epoch int16
	open  map[assign.TopicPartition]Offset // nil: no open transaction
	ended []endedTxn
}

type endedTxn struct {
	epoch   int16 // the completion's
	commit  bool
	offsets map[assign.TopicPartition]Offset
	fenced  bool // ended since the last failover: its late commits are refused
}

// TestTxnOffsetsRandom runs producers through transactions in the order
// the transaction coordinator allows (a transaction's completion comes
// before its producer's next TxnOffsetCommit), with lost writes, late and
// repeated completions of ended transactions, late TxnOffsetCommits of
// ended ones, and failovers (the pending set rebuilt from what was
// written). The pending offsets are always exactly the open transactions'
// and the committed offsets exactly those of the committed transactions,
// in order.
func TestTxnOffsetsRandom(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var tx TxnOffsets
		producers := map[int64]*txnProducer{1: {}, 2: {}}
		committed := map[assign.TopicPartition]Offset{} // applied by the changes
		want := map[assign.TopicPartition]Offset{}      // the model
		apply := func(ch TxnChange) {
			tx.Apply(ch)
			maps.Copy(committed, ch.Commit)
		}
		for step := range rapid.IntRange(1, 80).Draw(t, "steps") {
			pid := rapid.SampledFrom([]int64{1, 2}).Draw(t, "pid")
			p := producers[pid]
			switch rapid.IntRange(0, 5).Draw(t, "event") {
			case 0, 1: // TxnOffsetCommit of the open (or a new) transaction
				offs := map[assign.TopicPartition]Offset{}
				for range rapid.IntRange(1, 3).Draw(t, "n") {
					tp := assign.TopicPartition{Topic: "t", Partition: rapid.Int32Range(0, 3).Draw(t, "partition")}
					offs[tp] = Offset{Offset: int64(step)}
				}
				ch, err := tx.Commit(pid, p.epoch, offs)
				if err != nil {
					t.Fatalf("commit at the current epoch %d: %v", p.epoch, err)
				}
				if rapid.Bool().Draw(t, "lost") {
					continue // the write failed; the producer may retry or not
				}
				apply(ch)
				if p.open == nil {
					p.open = map[assign.TopicPartition]Offset{}
				}
				maps.Copy(p.open, offs)
			case 2: // the transaction ends: markers, then the completion
				commit := rapid.Bool().Draw(t, "commit")
				end := p.epoch + 1
				if rapid.Bool().Draw(t, "lost") {
					if _, err := tx.Complete(pid, end, commit); err != nil {
						t.Fatal(err)
					}
				}
				ch, err := tx.Complete(pid, end, commit)
				if err != nil {
					t.Fatal(err)
				}
				apply(ch)
				if commit {
					maps.Copy(want, p.open)
				}
				p.ended = append(p.ended, endedTxn{epoch: end, commit: commit, offsets: p.open, fenced: true})
				p.epoch, p.open = end, nil
			case 3: // a late or repeated completion of an ended transaction
				if len(p.ended) == 0 {
					continue
				}
				e := rapid.SampledFrom(p.ended).Draw(t, "late")
				ch, err := tx.Complete(pid, e.epoch, rapid.Bool().Draw(t, "commit"))
				if err != nil {
					t.Fatal(err)
				}
				if ch.Writes() {
					t.Fatalf("a late completion at %d writes: %+v", e.epoch, ch)
				}
				apply(ch)
			case 4: // a late TxnOffsetCommit of an ended transaction
				var late []endedTxn
				for _, e := range p.ended {
					if e.fenced && len(e.offsets) > 0 {
						late = append(late, e)
					}
				}
				if len(late) == 0 {
					continue
				}
				e := rapid.SampledFrom(late).Draw(t, "late")
				if _, err := tx.Commit(pid, e.epoch-1, e.offsets); errs.Of(err) != errs.ProducerFenced {
					t.Fatalf("late commit at %d: %v", e.epoch-1, err)
				}
			case 5: // failover: a new coordinator loads what was written
				var loaded TxnOffsets
				for _, id := range tx.Producers() {
					for tp, po := range tx.Pending(id) {
						loaded.Load(id, tp, po)
					}
				}
				tx = loaded
				for _, p := range producers {
					for i := range p.ended {
						p.ended[i].fenced = false // the memory of ended transactions is gone
					}
				}
			}
			for id, p := range producers {
				var got []string
				for tp, po := range tx.Pending(id) {
					if po.Epoch != p.epoch || p.open[tp] != po.Offset {
						t.Fatalf("producer %d: pending %s=%+v, open transaction at %d has %+v", id, tp, po, p.epoch, p.open)
					}
					got = append(got, tp.String())
				}
				if len(got) != len(p.open) {
					t.Fatalf("producer %d: pending %v, open transaction %v", id, got, p.open)
				}
			}
			if !maps.Equal(committed, want) {
				t.Fatalf("committed %v, want %v", committed, want)
			}
		}
	})
}

// Knows tells the shell when a TxnOffsetCommit can be decided from what
// the group holds: after a failover, a producer whose transaction ended
// under the old owner is not known to the new one.
func TestTxnOffsetsKnows(t *testing.T) {
	var tx TxnOffsets
	if tx.Knows(7) {
		t.Fatal("an empty group knows producer 7")
	}
	ch, err := tx.Commit(7, 3, offsetsOf(t, "t:1=5"))
	if err != nil {
		t.Fatal(err)
	}
	tx.Apply(ch)
	if !tx.Knows(7) || tx.Knows(8) {
		t.Fatalf("with 7's offsets pending: knows 7 %v, 8 %v", tx.Knows(7), tx.Knows(8))
	}
	if ch, err = tx.Complete(7, 4, false); err != nil {
		t.Fatal(err)
	}
	tx.Apply(ch)
	if !tx.Knows(7) {
		t.Fatal("a completion seen here is forgotten")
	}
	// The group loaded by another coordinator: nothing pending, no
	// completion seen.
	var loaded TxnOffsets
	if loaded.Knows(7) {
		t.Fatal("a loaded group knows a producer it holds nothing of")
	}
	loaded.Load(9, assign.TopicPartition{Topic: "t", Partition: 2}, PendingOffset{Epoch: 1, Offset: Offset{Offset: 6}})
	if !loaded.Knows(9) {
		t.Fatal("a loaded pending offset is not known")
	}
}
