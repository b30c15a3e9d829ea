package server

import (
	"math/rand/v2"
	"testing"

	storagev1 "skein/gen/skein/storage/v1"
	"skein/services/storage/internal/partition"
)

// The session decides, per request, which partitions an answer carries.
func TestSessionCarriesOnlyNews(t *testing.T) {
	a, b := partition.TP{Topic: "a"}, partition.TP{Topic: "b"}
	res := func(tp partition.TP, hw, lso, logStart int64) *storagev1.ReplicaFetchResult {
		return &storagev1.ReplicaFetchResult{Topic: tp.Topic, HighWatermark: hw, LastStableOffset: lso, LogStartOffset: logStart}
	}
	type ask struct {
		tp    partition.TP
		epoch int32
		r     *storagev1.ReplicaFetchResult
		news  bool
	}
	s := newSession()
	for i, round := range [][]ask{
		{{a, 0, res(a, 5, 5, 0), true}, {b, 0, res(b, 1, 1, 0), true}},                                           // a new session: everything
		{{a, 0, res(a, 5, 5, 0), false}, {b, 0, res(b, 1, 1, 0), false}},                                         // nothing moved
		{{a, 0, res(a, 6, 5, 0), true}, {b, 0, res(b, 1, 1, 0), false}},                                          // a's HW
		{{a, 0, res(a, 6, 6, 0), true}, {b, 0, res(b, 1, 1, 1), true}},                                           // a's LSO, b's log start
		{{a, 0, &storagev1.ReplicaFetchResult{HighWatermark: 6, LastStableOffset: 6, Records: []byte{1}}, true}}, // batches; b not asked
		{{a, 0, res(a, 6, 6, 0), false}, {b, 0, res(b, 1, 1, 1), true}},                                          // b was forgotten when not asked
		{{a, 1, res(a, 6, 6, 0), true}, {b, 0, res(b, 1, 1, 1), false}},                                          // a at a new leader epoch
		{{a, 1, &storagev1.ReplicaFetchResult{ErrorCode: 74, HighWatermark: 6, LastStableOffset: 6}, true}},      // an error
		{{a, 1, res(a, 6, 6, 0), true}},                                                                          // after an error: everything again
		{{a, 1, &storagev1.ReplicaFetchResult{HighWatermark: 6, LastStableOffset: 6, DivergingEpoch: &storagev1.EpochEndOffset{}}, true}},
		{{a, 1, res(a, 6, 6, 0), true}}, // after a divergence too
		{{a, 1, res(a, 6, 6, 0), false}},
	} {
		s.begin()
		resp := &storagev1.ReplicateResponse{}
		var carried []*told
		for _, q := range round {
			tl := s.ask(q.tp, q.epoch)
			if got := tl.news(q.r); got != q.news {
				t.Errorf("round %d, %s: news %v, want %v", i, q.tp.Topic, got, q.news)
			}
			if q.news {
				resp.Partitions, carried = append(resp.Partitions, q.r), append(carried, tl)
			}
		}
		s.sent(resp, carried)
		if len(s.parts) != len(round) {
			t.Errorf("round %d: the session remembers %d partitions, %d were asked", i, len(s.parts), len(round))
		}
	}
}

// A follower that applies only what answers carry always knows each
// partition's current HW, LSO and log start, whatever the leader's states
// do between rounds: random moves, errors, new epochs, batches, and
// partitions dropped from and added back to the requests.
func TestSessionNeverLeavesTheFollowerStale(t *testing.T) {
	type state struct {
		epoch             int32
		hw, lso, logStart int64
	}
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 99))
		tps := []partition.TP{{Topic: "a"}, {Topic: "b"}, {Topic: "c", Partition: 1}, {Topic: "d"}}
		leader := map[partition.TP]*state{}
		for _, tp := range tps {
			leader[tp] = &state{}
		}
		seen := map[partition.TP]state{} // what the follower applied
		s := newSession()
		for round := range 300 {
			// The leader moves on; the follower asks for a random subset.
			for _, st := range leader {
				switch r.IntN(6) {
				case 0:
					st.hw++
				case 1:
					st.lso = st.hw
				case 2:
					st.logStart = min(st.logStart+1, st.hw)
				case 3:
					if r.IntN(10) == 0 {
						st.epoch++
					}
				}
			}
			s.begin()
			resp := &storagev1.ReplicateResponse{}
			var carried []*told
			var asked []partition.TP
			for _, tp := range tps {
				if r.IntN(8) == 0 {
					continue
				}
				asked = append(asked, tp)
				st := leader[tp]
				res := &storagev1.ReplicaFetchResult{Topic: tp.Topic, Partition: tp.Partition, HighWatermark: st.hw, LastStableOffset: st.lso, LogStartOffset: st.logStart}
				switch r.IntN(12) {
				case 0:
					res.ErrorCode = 6 // the follower applies nothing of it
				case 1:
					res.Records = []byte{1}
				}
				tl := s.ask(tp, st.epoch)
				if tl.news(res) {
					resp.Partitions, carried = append(resp.Partitions, res), append(carried, tl)
				}
			}
			s.sent(resp, carried)
			for _, res := range resp.GetPartitions() {
				tp := partition.TP{Topic: res.GetTopic(), Partition: res.GetPartition()}
				if res.GetErrorCode() != 0 {
					delete(seen, tp)
					continue
				}
				seen[tp] = state{epoch: leader[tp].epoch, hw: res.GetHighWatermark(), lso: res.GetLastStableOffset(), logStart: res.GetLogStartOffset()}
			}
			for _, tp := range asked {
				got, ok := seen[tp]
				if st := *leader[tp]; ok && got != st {
					t.Fatalf("seed %d round %d: %v: the follower holds %+v, the leader %+v", seed, round, tp, got, st)
				}
			}
		}
	}
}
