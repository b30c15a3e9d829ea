package server

import (
	"time"

	storagev1 "skein/gen/skein/storage/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/acl"
	"skein/libs/errs"
	"skein/libs/record"
	"skein/libs/rpcerr"
	"skein/services/storage/internal/partition"
)

// DefaultFollowBytes bounds one answer of a Follow stream that asked for
// no bound.
const DefaultFollowBytes = 1 << 20

// DefaultFollowRecheck is how long a Follow stream waits for the high
// watermark before it reads again anyway: a change the partition does not
// announce to its readers (a deleted topic's replica replaced by a new
// one) is still noticed.
const DefaultFollowRecheck = time.Second

// FollowReauthorize is how often a Follow stream checks its reader's ACLs
// again: a Read permission taken away ends the streams it allowed within
// about this long (plus a wait for the high watermark), as it refuses the
// next fetch of a fetching reader.
const FollowReauthorize = time.Second

// SetFollowRecheck sets how long a Follow stream waits for a move of the
// high watermark before it reads again anyway (DefaultFollowRecheck). Call
// it before serving.
func (s *Server) SetFollowRecheck(d time.Duration) { s.followRecheck = d }

// Follow serves one reader's stream of a partition: it reads from the
// asked offset, sends what the high watermark (or, read_committed, the last
// stable offset) lets it, and goes on from the end of what it sent,
// waiting for the next move of the high watermark when there is nothing
// new. gRPC's flow control holds it back when the reader is slow. It ends
// with the reader, and with an error status when the partition cannot be
// read here (no longer led, the offset out of range) or the node drains.
func (s *Server) Follow(req *storagev1.FollowRequest, stream storagev1.StorageService_FollowServer) error {
	ctx := stream.Context()
	if req.GetFetchOffset() < 0 || req.GetMaxBytes() < 0 || req.GetMaxRecords() < 0 {
		return rpcerr.ToGRPC(errs.Errorf(errs.InvalidRequest, "fetch_offset, max_bytes and max_records must not be negative"))
	}
	authorize := func() error {
		if denied := s.refusals(ctx, "", storagev1.StorageService_Follow_FullMethodName, []string{req.GetTopic()}, acl.Read); denied != nil && denied[0] != nil {
			return rpcerr.ToGRPC(denied[0])
		}
		return nil
	}
	if err := authorize(); err != nil {
		return err
	}
	authorized := time.Now()
	tp := partition.TP{Topic: req.GetTopic(), Partition: req.GetPartition()}
	readCommitted := req.GetIsolationLevel() == skeinv1.IsolationLevel_READ_COMMITTED
	maxBytes := answerBytes(req.GetMaxBytes(), DefaultFollowBytes)
	offset := req.GetFetchOffset()
	w := partition.NewWaker()
	defer w.Forget()
	recheck := time.NewTimer(s.followRecheck)
	defer recheck.Stop()
	// held is the read buffer, reused once Send has marshalled the answer
	// it holds.
	var held []byte
	buf := func() []byte { return held[:0] }
	for {
		select {
		case <-s.draining: // also when the reader is never left waiting
			return rpcerr.ToGRPC(errs.Errorf(errs.NotLeaderOrFollower, "broker is shutting down"))
		default:
		}
		if time.Since(authorized) >= FollowReauthorize {
			if err := authorize(); err != nil {
				return err
			}
			authorized = time.Now()
		}
		p, err := s.replicas.Get(tp)
		if err != nil {
			return rpcerr.ToGRPC(err)
		}
		// Registered before the read, so a move after it is not missed.
		p.WakeOnHW(w)
		fr, err := p.FetchInto(buf, record.Offset(offset), maxBytes, int(req.GetMaxRecords()), readCommitted, req.GetCurrentLeaderEpoch())
		if err != nil {
			return rpcerr.ToGRPC(err)
		}
		if last := lastBatch(fr.Records); last != nil {
			r := &storagev1.PartitionFetchResult{
				Topic: tp.Topic, Partition: tp.Partition, HighWatermark: int64(fr.HW), LastStableOffset: int64(fr.LSO),
				LogStartOffset: int64(fr.LogStartOffset), LeaderEpoch: fr.LeaderEpoch, Records: fr.Records,
			}
			for _, a := range fr.Aborted {
				r.AbortedTransactions = append(r.AbortedTransactions, &storagev1.AbortedTransaction{ProducerId: a.ProducerID, FirstOffset: int64(a.FirstOffset)})
			}
			if err := stream.Send(&storagev1.FollowResponse{Partition: r}); err != nil {
				return nil // the reader is gone
			}
			s.metrics.fetched(len(fr.Records))
			if cap(fr.Records) <= maxKeptReadBuffer {
				held = fr.Records[:0]
			}
			offset = int64(last.NextOffset())
			continue // more may be there already: read before waiting
		}
		select {
		case <-w.C():
		case <-recheck.C:
		case <-ctx.Done():
			return nil
		case <-s.draining:
			return rpcerr.ToGRPC(errs.Errorf(errs.NotLeaderOrFollower, "broker is shutting down"))
		}
		recheck.Reset(s.followRecheck) // drops a firing it supersedes
	}
}
