package server

import (
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
