package txn

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestRandom drives one transactional id with random events from a few
// producers (each remembering the last pair it was answered, sometimes a
// stale or made-up one), writes that randomly fail, lost answers and
// failovers, and checks after every step:
//   - the invariants hold, and replaying the log gives the durable state;
//   - a refused event, or one that answers no write, changes nothing;
//   - per producer id the durable epoch never goes down, and a producer id,
//     once left, never comes back;
//   - the markers of a transaction carry an epoch above every epoch with
//     which anything was added to it, and no lower than any epoch handed
//     out for that producer id (so they fence every write made before).
func TestRandom(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomRun(t, seed) })
	}
}

func randomRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	cfg := Config{MaxTimeout: time.Minute, IDExpiration: time.Hour}
	now := epoch0
	nextID := int64(100)
	alloc := func() (int64, error) { nextID++; return nextID - 1, nil }
	x := New(cfg, "tx")
	var log [][2][]byte
	type client struct {
		pid   int64
		epoch int16
	}
	clients := make([]client, 3)
	for i := range clients {
		clients[i] = client{NoProducerID, NoEpoch}
	}
	handed := map[int64]int16{} // highest epoch answered per producer id
	added := map[int64]int16{}  // highest epoch anything was added with
	left := map[int64]bool{}    // producer ids the durable state moved away from
	var history []string

	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: %s\nhistory:\n%v", seed, fmt.Sprintf(format, args...), history)
	}
	// Start near exhaustion sometimes.
	if rng.IntN(3) == 0 {
		r := Record{TransactionalID: "tx", ProducerID: 7, ProducerEpoch: MaxHandedEpoch - int16(rng.IntN(3)), PrevProducerID: NoProducerID,
			PrevProducerEpoch: NoEpoch, NextProducerID: NoProducerID, Timeout: time.Minute, State: CompleteAbort, StartTime: now, UpdateTime: now}
		k, v, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, [2][]byte{k, v})
		x, _ = Load(cfg, r)
		for i := range clients {
			clients[i] = client{7, r.ProducerEpoch}
		}
		handed[7] = r.ProducerEpoch
	}

	deliver := func(c int, r Reply, lost bool) {
		if r.Err != nil || lost {
			return
		}
		clients[c] = client{r.ProducerID, r.ProducerEpoch}
		if r.ProducerEpoch > handed[r.ProducerID] {
			handed[r.ProducerID] = r.ProducerEpoch
		}
	}
	checkMarkers := func() {
		if m, ok := x.MarkersDue(); ok {
			if e, ok := added[m.ProducerID]; ok && m.ProducerEpoch <= e {
				fail("markers at epoch %d, something was added at %d", m.ProducerEpoch, e)
			}
			if m.ProducerEpoch < handed[m.ProducerID] {
				fail("markers at epoch %d, epoch %d was handed out", m.ProducerEpoch, handed[m.ProducerID])
			}
		}
	}
	apply := func(w *Record) bool {
		if rng.IntN(6) == 0 {
			x.Fail()
			return false
		}
		k, v, err := Encode(*w)
		if err != nil {
			fail("encode: %v", err)
		}
		log = append(log, [2][]byte{k, v})
		before := x.Record()
		eff, err := x.Complete(*w)
		if err != nil {
			fail("complete: %v", err)
		}
		after := x.Record()
		if after.ProducerID != before.ProducerID && before.ProducerID != NoProducerID {
			left[before.ProducerID] = true
		}
		if left[after.ProducerID] {
			fail("producer id %d came back", after.ProducerID)
		}
		if after.ProducerID == before.ProducerID && after.ProducerEpoch < before.ProducerEpoch && after.State != Dead {
			fail("epoch went down: %d -> %d", before.ProducerEpoch, after.ProducerEpoch)
		}
		if eff.Deleted {
			x = New(cfg, "tx")
		}
		return true
	}

	for step := range 200 {
		c := rng.IntN(len(clients))
		pid, epoch := clients[c].pid, clients[c].epoch
		switch rng.IntN(10) {
		case 0: // a stale or made-up pair
			epoch += int16(rng.IntN(3) - 1)
		case 1:
			pid = 100 + int64(rng.IntN(5))
		}
		lost := rng.IntN(8) == 0
		before, beforePending := x.Record(), x.pending != nil
		var eff Effects
		var reply *Reply
		var err error
		var what string
		switch op := rng.IntN(12); {
		case op < 2:
			req := InitRequest{Timeout: time.Duration(1+rng.IntN(60)) * time.Second, ExpectedProducerID: NoProducerID, ExpectedEpoch: NoEpoch}
			if rng.IntN(2) == 0 && pid >= 0 && epoch >= 0 {
				req.ExpectedProducerID, req.ExpectedEpoch = pid, epoch
			}
			var r Reply
			r, eff, err = x.InitProducerId(req, now, alloc)
			reply, what = &r, fmt.Sprintf("init %d expect %d/%d", c, req.ExpectedProducerID, req.ExpectedEpoch)
		case op < 5:
			parts := []TopicPartition{{"t", int32(rng.IntN(4))}}
			eff, err = x.AddPartitions(pid, epoch, parts, now)
			what = fmt.Sprintf("add %d %d/%d %v", c, pid, epoch, parts)
			if err == nil {
				if e, ok := added[pid]; !ok || epoch > e {
					added[pid] = epoch
				}
			}
		case op < 6:
			eff, err = x.AddOffsets(pid, epoch, "g", now)
			what = fmt.Sprintf("offsets %d %d/%d", c, pid, epoch)
			if err == nil {
				if e, ok := added[pid]; !ok || epoch > e {
					added[pid] = epoch
				}
			}
		case op < 8:
			var r Reply
			commit := rng.IntN(2) == 0
			r, eff, err = x.EndTxn(pid, epoch, commit, now, alloc)
			reply, what = &r, fmt.Sprintf("end %d %d/%d commit=%v", c, pid, epoch, commit)
		case op < 10:
			eff, err = x.MarkersWritten(now)
			what = "markers"
		case op < 11:
			now = now.Add(time.Duration(rng.IntN(90)) * time.Second)
			eff = x.Tick(now)
			what = "tick " + now.Sub(epoch0).String()
		default:
			if x.pending != nil {
				x.Fail()
			}
			p := NewReplay(cfg)
			for _, r := range log {
				if err := p.Apply(r[0], r[1]); err != nil {
					fail("replay: %v", err)
				}
			}
			x = New(cfg, "tx")
			if txns := p.Txns(); len(txns) == 1 {
				x = txns[0]
			}
			eff = x.Resume(now)
			what = "failover"
		}
		history = append(history, fmt.Sprintf("%d: %s -> %v", step, what, err))
		if err != nil || eff.Write == nil {
			if what != "failover" && (!x.Record().Equal(before) || (x.pending != nil) != beforePending) {
				fail("%s changed the state without a write", what)
			}
		}
		if eff.Write != nil {
			if !apply(eff.Write) {
				reply = nil // the write failed: the producer gets its error
			}
		}
		if reply != nil && err == nil {
			deliver(c, *reply, lost)
		}
		checkMarkers()
		if err := x.check(); err != nil {
			fail("invariant: %v", err)
		}
		p := NewReplay(cfg)
		for _, r := range log {
			if err := p.Apply(r[0], r[1]); err != nil {
				fail("replay: %v", err)
			}
		}
		txns := p.Txns()
		if x.Exists() != (len(txns) == 1) || x.Exists() && !txns[0].Record().Equal(x.Record()) {
			fail("the log does not give the durable state")
		}
	}
}
