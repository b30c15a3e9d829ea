package log

import (
	"bufio"
	"os"
	"slices"
	"time"

	"skein/libs/durable"
	"skein/libs/errs"
	"skein/libs/record"
)

// CompactStats reports what a compaction pass did.
type CompactStats struct {
	SegmentsRewritten int
	RecordsRemoved    int
	BytesBefore       int64 // of the closed segments
	BytesAfter        int64
}

// Compact applies cleanup.policy=compact to the closed segments that end at
// or below upTo (the caller passes the smaller of its high watermark and
// last stable offset, as Kafka's cleaner stops at the first uncleanable
// offset): of each key only the record with the newest offset among them
// survives, and a tombstone (a null value) that survives is dropped too once
// its segment was closed more than delete.retention.ms before now, by the
// log's clock: a tombstone stays at least that long after it was written,
// whatever timestamp its producer gave it. A record above upTo may still be
// truncated away, so it neither supersedes an older one nor is itself
// rewritten. The active segment is never touched.
//
// Below upTo every transaction has ended, and aborted answers whether the
// transactional batch of producerID at offset belongs to one that was
// aborted. A committed transaction's records are compacted as any others;
// an aborted one's are removed and supersede nothing, so an aborted write
// never causes a committed record to go, as Kafka's cleaner removes
// aborted transactions' records. With aborted nil, which transactions
// committed is not known: transactional batches are kept whole and their
// records supersede nothing.
//
// What stays as it is:
//   - offsets: surviving records keep theirs, and a batch keeps its base and
//     last offset (and its producer, sequence and transactional flag) even
//     when records inside it go; a batch that loses every record stays as an
//     empty batch header, so the batches still tile the offset space
//     (followers and readers never meet a gap), an idempotent producer's
//     last sequence is still in the log, and a transaction's first batch
//     still opens it for read_committed readers and for recovery;
//   - control batches (transaction markers), whole.
//
// A record without a key (a compacted topic refuses them, so it was written
// while the topic was not compacted) has no newer version to wait for and is
// removed, as Kafka's cleaner removes it.
//
// Each rewritten segment is written to <base>.log.cleaned, fsynced, and
// swapped in by rename while readers are held off, so a reader sees either
// the old segment or the new one. Appends go on while compaction reads and
// writes; they wait only for each swap. Truncation, deletion and Close wait
// for compaction to finish.
func (l *Log) Compact(now time.Time, upTo Offset, aborted func(producerID int64, offset Offset) bool) (st CompactStats, err error) {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	l.wmu.Lock()
	err = l.checkWritable()
	cfg := l.cfg
	var closed []*segment
	if len(l.segs) > 1 {
		closed = slices.Clone(l.segs[:len(l.segs)-1])
	}
	for len(closed) > 0 && closed[len(closed)-1].next > upTo {
		closed = closed[:len(closed)-1]
	}
	l.wmu.Unlock()
	if err != nil || cfg.CleanupPolicy&CleanupCompact == 0 {
		return st, err
	}
	closed = compactable(closed, l.cleanedTo, cfg, now.UnixMilli())
	if len(closed) == 0 {
		return st, nil
	}
	defer func() {
		if err == nil {
			l.cleanedTo = closed[len(closed)-1].next
		}
	}()

	// The newest offset of every key in the closed segments.
	latest := map[string]Offset{}
	var it record.RecordIter
	var scratch []byte
	for _, s := range closed {
		st.BytesBefore += s.size
		var ierr error
		_, scratch, err = scan(s.f, 0, s.size, false, scratch, func(b record.Batch, _ int64) bool {
			if b.IsControl() || isAborted(b, aborted) {
				return true
			}
			if ierr = it.Reset(b); ierr != nil {
				return false
			}
			for it.Next() {
				if k := it.Record().Key; k != nil {
					latest[string(k)] = it.Offset()
				}
			}
			ierr = it.Err()
			return ierr == nil
		})
		if err == nil {
			err = ierr
		}
		if err != nil {
			return st, l.compactError(err)
		}
	}

	horizon := now.UnixMilli() - cfg.DeleteRetentionMS
	c := cleaner{latest: latest, aborted: aborted, indexInterval: cfg.IndexIntervalBytes, scratch: scratch}
	for i, s := range closed {
		sweep := s.closedBefore(horizon)
		ns, removed, err := c.clean(s, sweep)
		if err != nil {
			return st, l.compactError(err)
		}
		if ns == nil {
			st.BytesAfter += s.size
			s.swept = s.swept || sweep
			continue
		}
		ns.swept = sweep
		if err := l.swap(i, s, ns); err != nil {
			return st, err
		}
		st.SegmentsRewritten++
		st.RecordsRemoved += removed
		st.BytesAfter += ns.size
	}
	return st, nil
}

// compactable answers the closed segments (oldest first, all below the
// caller's bound) a compaction should rewrite now, none when it should
// wait: those before the first segment holding a record younger than
// min.compaction.lag.ms, once the dirty ones among them (from cleanedTo)
// are min.cleanable.dirty.ratio of their bytes, or the oldest dirty one
// began more than max.compaction.lag.ms ago, or a clean one may hold
// tombstones past delete.retention.ms (Kafka's delete horizon, counted from
// when the segment was closed). Segments without timestamps count as old
// enough.
func compactable(closed []*segment, cleanedTo Offset, cfg Config, now int64) []*segment {
	if cfg.MinCompactionLagMS > 0 {
		for i, s := range closed {
			if s.maxTS > now-cfg.MinCompactionLagMS {
				closed = closed[:i]
				break
			}
		}
	}
	var clean, dirty int64
	var firstDirty *segment
	sweep := false
	for _, s := range closed {
		if s.next <= cleanedTo {
			clean += s.size
			sweep = sweep || (!s.swept && s.closedBefore(now-cfg.DeleteRetentionMS))
			continue
		}
		if firstDirty == nil {
			firstDirty = s
		}
		dirty += s.size
	}
	switch {
	case sweep:
		return closed
	case firstDirty == nil:
		return nil // nothing written since the last compaction
	case float64(dirty) >= cfg.MinCleanableDirtyRatio*float64(clean+dirty):
		return closed
	case cfg.MaxCompactionLagMS > 0 && firstDirty.firstTS >= 0 && firstDirty.firstTS <= now-cfg.MaxCompactionLagMS:
		return closed
	}
	return nil
}

// compactError keeps the log usable after a compaction that failed on bad
// input (the segments are untouched), but fails it on I/O trouble.
func (l *Log) compactError(err error) error {
	if e := errs.Of(err); e != errs.UnknownServerError {
		return err
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return l.ioError("compacting", err)
}

// isAborted reports whether b is a transactional batch of an aborted
// transaction, or of one whose outcome is not known (aborted is nil).
func isAborted(b record.Batch, aborted func(int64, Offset) bool) bool {
	return b.IsTransactional() && (aborted == nil || aborted(b.ProducerID(), b.BaseOffset()))
}

// closedBefore reports whether the segment was closed before ms (by the
// log's clock): its tombstones may go once that is delete.retention.ms ago.
func (s *segment) closedBefore(ms int64) bool {
	return s.closedMS > 0 && s.closedMS < ms
}

// cleaner is one compaction pass's state.
type cleaner struct {
	latest        map[string]Offset
	aborted       func(int64, Offset) bool
	indexInterval int64
	scratch       []byte
	it            record.RecordIter
	builder       *record.Builder
	out           []byte
	headers       []record.Header
}

// clean writes the surviving batches of s to <base>.log.cleaned and returns
// the new segment, or nil when nothing in s would change.
func (c *cleaner) clean(s *segment, dropTombstones bool) (*segment, int, error) {
	var abortedBatch bool // the batch being read is an aborted transaction's
	keep := func(r *record.Record, off Offset) bool {
		if abortedBatch {
			return false
		}
		if r.Key == nil {
			return false // written before the topic became compacted; Kafka's cleaner drops them too
		}
		if c.latest[string(r.Key)] != off {
			return false
		}
		return r.Value != nil || !dropTombstones
	}
	// First pass: is there anything to remove at all?
	it := &c.it
	removed := 0
	var ierr error
	var err error
	_, c.scratch, err = scan(s.f, 0, s.size, false, c.scratch, func(b record.Batch, _ int64) bool {
		if b.IsControl() || (b.IsTransactional() && c.aborted == nil) {
			return true
		}
		abortedBatch = isAborted(b, c.aborted)
		if ierr = it.Reset(b); ierr != nil {
			return false
		}
		for it.Next() {
			if !keep(it.Record(), it.Offset()) {
				removed++
			}
		}
		ierr = it.Err()
		return ierr == nil
	})
	if err == nil {
		err = ierr
	}
	if err != nil || removed == 0 {
		return nil, 0, err
	}

	tmpPath := s.path(logSuffix + cleanedSuffix)
	f, err := os.OpenFile(tmpPath, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
	if err != nil {
		return nil, 0, err
	}
	ns := &segment{dir: s.dir, base: s.base, f: f, created: s.created, closedMS: s.closedMS}
	ns.resetIndexes()
	fail := func(err error) (*segment, int, error) {
		f.Close()
		os.Remove(tmpPath)
		return nil, 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var werr error
	emit := func(b record.Batch) bool {
		if _, werr = w.Write(b); werr != nil {
			return false
		}
		ns.noteBatch(b, ns.size, c.indexInterval)
		ns.size += int64(len(b))
		return true
	}
	_, c.scratch, err = scan(s.f, 0, s.size, false, c.scratch, func(b record.Batch, _ int64) bool {
		if b.IsControl() || (b.IsTransactional() && c.aborted == nil) {
			return emit(b)
		}
		abortedBatch = isAborted(b, c.aborted)
		if ierr = it.Reset(b); ierr != nil {
			return false
		}
		opts := record.BatchOptions{
			BaseOffset: b.BaseOffset(), PartitionLeaderEpoch: b.PartitionLeaderEpoch(), Compression: b.Compression(),
			LogAppendTime: b.LogAppendTime(), Transactional: b.IsTransactional(),
			ProducerID: b.ProducerID(), ProducerEpoch: b.ProducerEpoch(), BaseSequence: b.BaseSequence(),
		}
		if c.builder == nil {
			c.builder = record.NewBuilder(opts)
		} else {
			c.builder.Reset(opts)
		}
		builder := c.builder
		builder.SetBaseTimestamp(b.BaseTimestamp())
		all := true
		for it.Next() {
			r := it.Record()
			if !keep(r, it.Offset()) {
				all = false
				continue
			}
			c.headers = r.AppendHeaders(c.headers[:0])
			builder.AppendRaw(r.OffsetDelta, r.TimestampDelta, r.Key, r.Value, c.headers)
		}
		if ierr = it.Err(); ierr != nil {
			return false
		}
		if all {
			return emit(b)
		}
		builder.OverrideLastOffsetDelta(b.LastOffsetDelta())
		builder.OverrideMaxTimestamp(b.MaxTimestamp())
		var nb record.Batch
		if nb, c.out, ierr = builder.Build(c.out[:0]); ierr != nil {
			return false
		}
		return emit(nb)
	})
	for _, e := range []error{err, ierr, werr} {
		if e != nil {
			return fail(e)
		}
	}
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	// The cleaned file keeps the segment's modification time, from which a
	// restart takes when it was closed. Best effort: without it a restart
	// takes a later time, which keeps tombstones longer, never shorter.
	if fi, err := s.f.Stat(); err == nil {
		_ = os.Chtimes(tmpPath, time.Time{}, fi.ModTime())
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	ns.fileSize = ns.size
	ns.noteTime()
	return ns, removed, nil
}

// swap replaces closed segment i (s) with its cleaned version ns. Closed
// segments only change under cmu, which the caller holds, so s is still at i.
func (l *Log) swap(i int, s, ns *segment) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.waitSyncLocked()
	if err := l.checkWritable(); err != nil {
		ns.f.Close()
		os.Remove(s.path(logSuffix + cleanedSuffix))
		return err
	}
	l.mu.Lock()
	// Drop the old indexes first: a crash after the rename then finds a
	// .log without indexes, which open rebuilds, never a stale index.
	for _, suf := range []string{indexSuffix, timeIndexSuffix} {
		if err := os.Remove(s.path(suf)); err != nil && !os.IsNotExist(err) {
			l.mu.Unlock()
			return l.ioError("compacting", err)
		}
	}
	if err := os.Rename(s.path(logSuffix+cleanedSuffix), s.path(logSuffix)); err != nil {
		l.mu.Unlock()
		return l.ioError("compacting", err)
	}
	segs := slices.Clone(l.segs)
	segs[i] = ns
	l.segs = segs
	l.mu.Unlock()
	s.close()
	if err := durable.SyncDir(l.dir); err != nil {
		return l.ioError("compacting", err)
	}
	if err := ns.persistIndexes(); err != nil {
		return l.ioError("compacting", err)
	}
	return nil
}
