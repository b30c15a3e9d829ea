package server

import (
	storagev1 "skein/gen/skein/storage/v1"
	"skein/services/storage/internal/partition"
)

// session is what a leader remembers of one follower's replication
// stream: for each partition the follower asks for, what the last answer
// told it. An answer carries a partition only when there is something new
// for the follower: batches, an error, a divergence, or a high watermark,
// last stable offset or log start offset that moved. A follower of many
// mostly idle partitions then decodes and applies only the few that
// moved, as with Kafka's incremental fetch sessions. A new stream starts
// with nothing remembered, so its first answer carries every partition;
// so does a partition asked at another leader epoch, or after an answer
// that carried an error for it.
type session struct {
	round uint64 // the request being answered
	asked int    // how many partitions it asks for (that this node has)
	parts map[partition.TP]*told
}

// told is what the follower was last told of one partition.
type told struct {
	round             uint64 // the last request that asked for it
	epoch             int32  // the leader epoch it was asked at
	known             bool   // hw, lso and logStart were sent at epoch
	hw, lso, logStart int64
}

func newSession() *session { return &session{parts: map[partition.TP]*told{}} }

// begin starts the answer to a new request.
func (s *session) begin() { s.round, s.asked = s.round+1, 0 }

// ask notes that the request asks for tp at epoch.
func (s *session) ask(tp partition.TP, epoch int32) *told {
	t := s.parts[tp]
	if t == nil {
		t = &told{}
		s.parts[tp] = t
	}
	if t.round != s.round {
		t.round = s.round
		s.asked++
	}
	if t.epoch != epoch {
		t.epoch, t.known = epoch, false
	}
	return t
}

// news reports whether r, the partition's answer, tells the follower
// anything it was not told already.
func (t *told) news(r *storagev1.ReplicaFetchResult) bool {
	return !t.known || r.GetErrorCode() != 0 || r.GetDivergingEpoch() != nil || len(r.GetRecords()) > 0 ||
		r.GetHighWatermark() != t.hw || r.GetLastStableOffset() != t.lso || r.GetLogStartOffset() != t.logStart
}

// sent records an answer the follower was sent: carried[i] is what it
// told of resp.Partitions[i]. It forgets the partitions this request did
// not ask for (the follower stopped following them here).
func (s *session) sent(resp *storagev1.ReplicateResponse, carried []*told) {
	for i, r := range resp.GetPartitions() {
		t := carried[i]
		if t == nil {
			continue // a partition this node does not have
		}
		t.known = r.GetErrorCode() == 0 && r.GetDivergingEpoch() == nil
		t.hw, t.lso, t.logStart = r.GetHighWatermark(), r.GetLastStableOffset(), r.GetLogStartOffset()
	}
	if len(s.parts) == s.asked {
		return // the usual case: the same partitions as last time
	}
	for tp, t := range s.parts {
		if t.round != s.round {
			delete(s.parts, tp)
		}
	}
}
