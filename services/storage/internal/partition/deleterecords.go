package partition

import (
	"context"

	"skein/libs/errs"
	"skein/libs/record"
)

// DeleteRecords moves the log start offset of this leader up to offset
// (Kafka's DeleteRecords): records below it are no longer served, and the
// segments wholly below it go. offset -1 means the high watermark; an
// offset above the high watermark is refused (OFFSET_OUT_OF_RANGE), as a
// record there may not survive a leader change. An offset at or below the
// log start changes nothing. The segments wholly below the new start go
// at the next retention pass; the call never waits for a compaction. It answers the log start offset after the
// deletion and the leader epoch it was made at; followers take it from
// their next fetch (see AwaitLowWatermark).
func (p *Partition) DeleteRecords(offset record.Offset, leaderEpoch int32) (start record.Offset, epoch int32, _ error) {
	p.mu.Lock()
	if err := p.checkLeaderLocked(leaderEpoch); err != nil {
		p.mu.Unlock()
		return -1, -1, err
	}
	epoch = p.st.LeaderEpoch
	if p.cfg.Compacted {
		p.mu.Unlock()
		return -1, -1, errs.Errorf(errs.PolicyViolation, "%s-%d: records of a topic whose cleanup.policy is compact cannot be deleted", p.cfg.Topic, p.cfg.Partition)
	}
	if offset == -1 {
		offset = p.hw
	}
	if offset < 0 || offset > p.hw {
		p.mu.Unlock()
		return -1, -1, errs.Errorf(errs.OffsetOutOfRange, "%s-%d: cannot delete records before offset %d: it must be -1 (the high watermark) or within [0, %d]",
			p.cfg.Topic, p.cfg.Partition, offset, p.hw)
	}
	moved := offset > p.log.LogStartOffset()
	if moved {
		if err := p.log.AdvanceLogStart(offset); err != nil {
			p.mu.Unlock()
			return -1, -1, errs.Errorf(errs.KafkaStorageError, "%s-%d: delete records before %d: %v", p.cfg.Topic, p.cfg.Partition, offset, err)
		}
		// Followers parked on a long poll are answered now, with the new
		// start (the leader answers a rise of the log start at once);
		// readers below it are told.
		p.notifyLEOLocked()
		p.notifyHWLocked()
		p.notifyStartLocked()
	}
	start = p.log.LogStartOffset()
	onCut := p.cfg.Truncated
	p.mu.Unlock()
	if moved && onCut != nil {
		onCut()
	}
	return start, epoch, nil
}

// lowWatermarkLocked answers the low watermark, the lowest log start
// offset of this leader and every other ISR member as each last fetched
// (Kafka's low watermark, over the ISR the HW counts, a pending expansion
// included; a member that has not fetched from this leader yet counts as
// 0), and a channel closed when it may have moved.
func (p *Partition) lowWatermarkLocked() (record.Offset, <-chan struct{}) {
	low := p.log.LogStartOffset()
	for _, r := range p.maximalISRLocked() {
		if int32(r) == p.cfg.Self {
			continue
		}
		f, ok := p.followers[int32(r)]
		if !ok {
			continue
		}
		low = min(low, max(f.logStart, 0))
	}
	if p.startMoved == nil {
		p.startMoved = make(chan struct{})
	}
	return low, p.startMoved
}

// AwaitLowWatermark waits until the low watermark reaches offset, ctx ends
// (its error) or this replica stops leading at leaderEpoch (the leader
// check's error). It answers the low watermark last seen.
func (p *Partition) AwaitLowWatermark(ctx context.Context, offset record.Offset, leaderEpoch int32) (record.Offset, error) {
	for {
		p.mu.Lock()
		if err := p.checkLeaderLocked(leaderEpoch); err != nil {
			p.mu.Unlock()
			return -1, err
		}
		low, moved := p.lowWatermarkLocked()
		p.mu.Unlock()
		if low >= offset {
			return low, nil
		}
		select {
		case <-ctx.Done():
			return low, ctx.Err()
		case <-moved:
		}
	}
}

// notifyStartLocked wakes the DeleteRecords waiting for the low watermark.
func (p *Partition) notifyStartLocked() {
	if p.startMoved != nil {
		close(p.startMoved)
		p.startMoved = nil
	}
}
