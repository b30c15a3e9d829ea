package log

import (
	"math"
	"time"
)

// DeleteExpired applies retention and returns how many segments it deleted.
// Only whole segments wholly below upTo go, oldest first, and the log start
// offset moves up to the first remaining segment (to the LEO when
// retention.ms takes the active segment too, as below). The storage node
// passes the partition's high watermark: what lies above it may not be on
// every in-sync replica yet, and a consumer must never find the log start
// past what it was allowed to read (Kafka bounds deletion the same way).
// Within that bound a segment goes when:
//
//   - whatever the policy, it lies wholly below the log start offset
//     (DeleteRecords);
//   - with cleanup.policy delete, its newest timestamp is older than
//     now - retention.ms (the file's modification time stands in for a
//     segment whose batches carry no timestamps), or it is among the oldest
//     segments while the log without them is still at least retention.bytes
//     (the active segment too, after a roll, so retention.bytes=0 keeps
//     nothing below the bound).
//
// The storage node calls it periodically with its clock.
func (l *Log) DeleteExpired(now time.Time, upTo Offset) (int, error) {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.checkWritable(); err != nil {
		return 0, err
	}
	below := func(next *segment) bool { return next.base <= upTo }
	deleted, err := l.deleteSegmentsLocked(func(s, next *segment) bool { return below(next) && next.base <= l.lso })
	if err != nil || l.cfg.CleanupPolicy&CleanupDelete == 0 {
		return deleted, err
	}
	if ms := l.cfg.RetentionMS; ms >= 0 {
		cutoff := now.UnixMilli() - ms
		expired := func(s, next *segment) bool { return below(next) && s.newestTimestamp() < cutoff }
		n, err := l.deleteSegmentsLocked(expired)
		deleted += n
		if err != nil {
			return deleted, err
		}
		// What is left is the active segment alone: when all of it has
		// expired and lies below the bound, a new segment starts at the
		// LEO and the old one goes, as Kafka rolls before deleting its
		// last segment. A quiet topic's records then leave on time instead
		// of waiting for an append to roll their segment.
		if s := l.active(); len(l.segs) == 1 && !s.empty() && l.leo <= upTo && s.newestTimestamp() < cutoff {
			if err := l.roll(); err != nil {
				return deleted, err
			}
			n, err := l.deleteSegmentsLocked(expired)
			deleted += n
			if err != nil {
				return deleted, err
			}
		}
	}
	if limit := l.cfg.RetentionBytes; limit >= 0 {
		var total int64
		for _, s := range l.segs {
			total += s.size
		}
		n, err := l.deleteSegmentsLocked(func(s, next *segment) bool {
			if !below(next) || total-s.size < limit {
				return false
			}
			total -= s.size
			return true
		})
		deleted += n
		if err != nil {
			return deleted, err
		}
		// The active segment alone left, and the log without it still at
		// least retention.bytes (0: keep nothing): it goes too, after a
		// roll, as Kafka deletes every segment that breaches the size.
		if s := l.active(); len(l.segs) == 1 && !s.empty() && l.leo <= upTo && total-s.size >= limit {
			if err := l.roll(); err != nil {
				return deleted, err
			}
			n, err := l.deleteSegmentsLocked(func(old, next *segment) bool { return old == s })
			deleted += n
			if err != nil {
				return deleted, err
			}
		}
	}
	return deleted, nil
}

// newestTimestamp is the segment's largest batch timestamp, or its file's
// modification time when no batch has one (Kafka does the same).
func (s *segment) newestTimestamp() int64 {
	if s.maxTS >= 0 {
		return s.maxTS
	}
	fi, err := s.f.Stat()
	if err != nil {
		return math.MaxInt64 // cannot tell its age: keep it
	}
	return fi.ModTime().UnixMilli()
}
