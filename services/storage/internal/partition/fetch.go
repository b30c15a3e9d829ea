package partition

import (
	"skein/libs/errs"
	"skein/libs/record"
)

// FetchResult is a consumer fetch's answer: whole batches below the HW (or
// the LSO for read_committed), and the partition's positions.
type FetchResult struct {
	Records []byte
	// Aborted lists the aborted transactions overlapping the records
	// (read_committed only).
	Aborted        []AbortedTxn
	HW             record.Offset
	LSO            record.Offset
	LogStartOffset record.Offset
	LeaderEpoch    int32
}

// Fetch reads for a consumer from offset, as leader. It never waits: the
// caller long-polls with a Waker (WakeOnHW) when the answer is empty.
func (p *Partition) Fetch(offset record.Offset, maxBytes int, readCommitted bool, leaderEpoch int32) (FetchResult, error) {
	return p.FetchInto(nil, offset, maxBytes, 0, readCommitted, leaderEpoch)
}

// FetchInto is Fetch reading the records into the spare capacity of the
// buffer buf answers, asked for only when there is something to read (a
// larger read allocates as Fetch does), and, when maxRecords is positive,
// ending with the batch that holds offset+maxRecords-1.
func (p *Partition) FetchInto(buf func() []byte, offset record.Offset, maxBytes, maxRecords int, readCommitted bool, leaderEpoch int32) (FetchResult, error) {
	p.mu.Lock()
	if err := p.checkLeaderLocked(leaderEpoch); err != nil {
		p.mu.Unlock()
		return FetchResult{}, err
	}
	res := FetchResult{HW: p.hw, LSO: p.lsoLocked(), LogStartOffset: p.log.LogStartOffset(), LeaderEpoch: p.st.LeaderEpoch}
	leo := p.log.LogEndOffset()
	limit := res.HW
	if readCommitted {
		limit = res.LSO
	}
	var aborted []AbortedTxn
	if readCommitted && offset < limit && offset >= res.LogStartOffset {
		// Taken with the bounds, not after the read: retention may delete
		// what is read meanwhile and forget its aborted transactions
		// (ForgetAbortedBelow), and the records would go out without them.
		aborted = p.abortedBetweenLocked(offset, limit)
	}
	p.mu.Unlock()

	if offset < res.LogStartOffset || offset > leo {
		return res, errs.Errorf(errs.OffsetOutOfRange, "%s-%d: offset %d is outside [%d, %d]", p.cfg.Topic, p.cfg.Partition, offset, res.LogStartOffset, leo)
	}
	if offset >= limit {
		return res, nil
	}
	var dst []byte
	if buf != nil {
		dst = buf()
	}
	data, err := p.log.ReadInto(dst, offset, maxBytes, limit, maxRecords)
	if err != nil {
		return res, err
	}
	res.Records = data
	if len(data) > 0 {
		res.Aborted = aborted
	}
	return res, nil
}

// ListOffset answers the earliest (-2), latest (-1: the HW, or the LSO for
// read_committed) or first offset at or after a timestamp (-1 offset when
// there is none below the HW, or below the LSO for read_committed).
//
// A new leader starts with the HW it had as a follower, which may be below
// the one its predecessor answered; it moves once the ISR has fetched in
// the new epoch. Until the HW reaches where the epoch began, the latest
// offset, and a lookup by time that finds nothing below the HW, are
// OFFSET_NOT_AVAILABLE (retriable), as Kafka answers them: a reader that
// seeks to the end must not be sent back to before records it may already
// have read.
func (p *Partition) ListOffset(ts int64, readCommitted bool, leaderEpoch int32) (offset record.Offset, timestamp int64, epoch int32, err error) {
	p.mu.Lock()
	if err := p.checkLeaderLocked(leaderEpoch); err != nil {
		p.mu.Unlock()
		return 0, 0, 0, err
	}
	hw, lso, epoch, epochStart := p.hw, p.lsoLocked(), p.st.LeaderEpoch, p.leaderEpochStart
	p.mu.Unlock()
	lagging := func() error {
		if epochStart <= hw {
			return nil
		}
		return errs.Errorf(errs.OffsetNotAvailable, "%s-%d: the high watermark (%d) has not yet reached the start of leader epoch %d (%d) after a leadership change; retry",
			p.cfg.Topic, p.cfg.Partition, hw, epoch, epochStart)
	}
	if ts < -2 {
		return 0, 0, 0, errs.Errorf(errs.InvalidRequest, "timestamp %d: want -2, -1 or a time in ms", ts)
	}
	switch ts {
	case -2:
		return p.log.LogStartOffset(), -1, epoch, nil
	case -1:
		if err := lagging(); err != nil {
			return 0, 0, 0, err
		}
		if readCommitted {
			return lso, -1, epoch, nil
		}
		return hw, -1, epoch, nil
	}
	limit := hw
	if readCommitted {
		limit = lso // not inside a transaction still open
	}
	off, t, ok := p.log.OffsetForTimestamp(ts)
	if !ok || off >= limit {
		if err := lagging(); err != nil {
			return 0, 0, 0, err
		}
		return -1, -1, epoch, nil
	}
	return off, t, epoch, nil
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch as leader.
func (p *Partition) EndOffsetForEpoch(epoch record.Epoch, currentLeaderEpoch int32) (record.Epoch, record.Offset, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkLeaderLocked(currentLeaderEpoch); err != nil {
		return -1, -1, err
	}
	e, end := p.log.EndOffsetFor(epoch)
	return e, end, nil
}
