package log

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"skein/libs/errs"
	"skein/libs/record"
)

// Open opens (creating if needed) the partition log in dir and recovers it:
//
//   - segments wholly below the recovery point are trusted after a cheap
//     check (their index files parse and agree with the .log's tail);
//   - from the segment holding the recovery point on, every batch is
//     re-validated (framing, CRC, offsets following on), indexes are rebuilt,
//     and the log is cut at the first batch that is torn or fails: the rest
//     of that segment and every later segment are deleted;
//   - the leader-epoch cache is reloaded (rebuilt from the batches if its
//     file is missing or unreadable) and truncated to the recovered log.
//
// Open itself fsyncs nothing, so it stays cheap for a node that opens
// thousands of logs; the recovery point stays at the checkpointed one until
// the next flush.
func Open(dir string, cfg Config, opts Options) (*Log, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	l := &Log{dir: dir, now: opts.Now, cacheWindow: max(opts.CacheWindow, 0), cfg: cfg.normalized()}
	l.lastFlush = l.now()
	l.flushMsgs.Store(l.cfg.FlushMessages)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, errs.Errorf(errs.KafkaStorageError, "creating %s: %v", dir, err)
	}
	if err := l.load(opts.State); err != nil {
		for _, s := range l.segs {
			s.close()
		}
		var e *errs.Error
		if errors.As(err, &e) {
			return nil, err
		}
		return nil, errs.Errorf(errs.KafkaStorageError, "recovering %s: %v", dir, err)
	}
	return l, nil
}

func (l *Log) load(st State) error {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return err
	}
	var bases []Offset
	changedDir := false // files were removed or created
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, cleanedSuffix), strings.HasSuffix(name, ".tmp"):
			// An unfinished compaction or checkpoint write: the originals
			// are intact (swaps are renames).
			if err := os.Remove(filepath.Join(l.dir, name)); err != nil {
				return err
			}
			changedDir = true
		case strings.HasSuffix(name, logSuffix):
			if base, ok := parseSegmentName(name); ok {
				bases = append(bases, base)
			}
		}
	}
	slices.Sort(bases)
	now := l.now()

	cut := false // a segment was cut: every later one goes
	for i, base := range bases {
		if cut {
			if err := removeSegmentFiles(l.dir, base); err != nil {
				return err
			}
			changedDir = true
			continue
		}
		s := &segment{dir: l.dir, base: base, created: now}
		if s.f, err = os.OpenFile(s.path(logSuffix), os.O_RDWR, 0o644); err != nil {
			return err
		}
		s.resetIndexes()
		// The batches must follow on from the previous segment's.
		if n := len(l.segs); n > 0 && l.segs[n-1].next != base {
			s.close()
			if err := removeSegmentFiles(l.dir, base); err != nil {
				return err
			}
			cut, changedDir, l.recoveryCut = true, true, true
			continue
		}
		var nextBase Offset = -1
		if i+1 < len(bases) {
			nextBase = bases[i+1]
		}
		clean := false
		if nextBase >= 0 && nextBase <= st.RecoveryPoint {
			clean, err = l.loadClean(s)
		} else if nextBase < 0 && base < st.RecoveryPoint {
			// The active segment: trusted only if the recovery point
			// covers all of it.
			clean, err = l.loadClean(s)
			clean = clean && s.next <= st.RecoveryPoint
		}
		if err != nil {
			s.close()
			return err
		}
		if !clean {
			whole, err := l.recoverSegment(s)
			if err != nil {
				s.close()
				return err
			}
			cut = !whole
			l.recoveryCut = l.recoveryCut || cut
		}
		if s.empty() && len(l.segs) > 0 && (cut || nextBase >= 0) {
			// An empty segment in the middle (its data was torn away):
			// the log ends before it.
			s.close()
			if err := removeSegmentFiles(l.dir, base); err != nil {
				return err
			}
			cut, changedDir = true, true
			continue
		}
		l.segs = append(l.segs, s)
	}

	if len(l.segs) == 0 {
		s, err := createSegment(l.dir, max(st.LogStartOffset, 0), now)
		if err != nil {
			return err
		}
		l.segs = []*segment{s}
		changedDir = true
	}
	// A closed segment was closed, as far as a restart can tell, when its
	// file was last written: delete.retention.ms counts from that.
	for _, s := range l.segs[:len(l.segs)-1] {
		if fi, err := s.f.Stat(); err == nil {
			s.closedMS = fi.ModTime().UnixMilli()
		}
	}
	l.leo = l.active().next
	l.lso = max(st.LogStartOffset, l.segs[0].base)
	if l.lso > l.leo {
		// The checkpointed start is past what survived (unflushed data was
		// lost): the log restarts empty at the start offset.
		l.rp = l.leo
		if err := l.truncateFullyLocked(l.lso); err != nil {
			return err
		}
	}

	if err := l.loadEpochs(); err != nil {
		return err
	}
	// Index files for what was rebuilt. Nothing is fsynced here: the
	// recovery point stays where the checkpoint put it (clamped to the log),
	// so what was validated but may not be durable is validated again by
	// the next open, and the next flush makes it durable.
	for _, s := range l.segs {
		if err := s.persistIndexes(); err != nil {
			return err
		}
	}
	l.dirDirty = changedDir
	l.rp = min(max(st.RecoveryPoint, l.segs[0].base), l.leo)
	return nil
}

func removeSegmentFiles(dir string, base Offset) error {
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		if err := os.Remove(filepath.Join(dir, segmentName(base)+suf)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// loadClean loads a segment below the recovery point from its index files,
// checking them against the .log: the index parses and its last entry points
// at the batch it names, and the tail after it scans (with CRCs) exactly to
// the end of the file. It reports false when anything is off; the caller then
// recovers the segment by a full scan.
func (l *Log) loadClean(s *segment) (bool, error) {
	fi, err := s.f.Stat()
	if err != nil {
		return false, err
	}
	size := fi.Size()
	rawIdx, err := os.ReadFile(s.path(indexSuffix))
	if err != nil {
		return false, nil
	}
	idx, err := decodeIndex(rawIdx, size)
	if err != nil {
		return false, nil
	}
	from := int64(0)
	var rel uint32
	if n := len(idx); n > 0 {
		from, rel = int64(idx[n-1].pos), idx[n-1].rel
		h, err := readHeader(s.f, from, make([]byte, 0, record.HeaderSize))
		if err != nil || h.BaseOffset() != s.base+Offset(rel) {
			return false, nil
		}
	}
	rawTimes, err := os.ReadFile(s.path(timeIndexSuffix))
	if err != nil {
		return false, nil
	}
	// The tail after the last index entry: its batches give the segment's
	// end offset and the max timestamp the time index may not have yet.
	t := &segment{base: s.base}
	t.resetIndexes()
	expect := s.base + Offset(rel)
	ok := true
	var end int64
	end, l.scratch, err = scan(s.f, from, size, true, l.scratch, func(b record.Batch, pos int64) bool {
		if b.BaseOffset() != expect {
			ok = false
			return false
		}
		expect = b.NextOffset()
		t.next = expect
		if b.MaxTimestamp() > t.maxTS {
			t.maxTS, t.maxTSRel = b.MaxTimestamp(), uint32(b.BaseOffset()-s.base)
		}
		return true
	})
	if err != nil {
		return false, err
	}
	if !ok || end != size || (size > 0 && t.next == s.base) {
		return false, nil
	}
	times, err := decodeTimes(rawTimes, uint32(t.next-s.base))
	if err != nil {
		return false, nil
	}
	s.size, s.next, s.index, s.times = size, t.next, idx, times
	s.fileSize = size
	s.maxTS, s.maxTSRel = t.maxTS, t.maxTSRel
	if n := len(times); n > 0 && times[n-1].ts >= s.maxTS {
		s.maxTS, s.maxTSRel = times[n-1].ts, times[n-1].rel
	}
	s.sinceIndex = size - from
	if size > 0 {
		first, err := readHeader(s.f, 0, make([]byte, 0, record.HeaderSize))
		if err != nil {
			return false, err
		}
		s.firstTS = first.MaxTimestamp()
	}
	s.indexOnDisk = true
	return true, nil
}

// recoverSegment rebuilds s from a full scan that verifies every batch and
// that offsets follow on from the segment's base. It truncates the file
// after the last good batch and reports whether the whole file was good.
func (l *Log) recoverSegment(s *segment) (bool, error) {
	fi, err := s.f.Stat()
	if err != nil {
		return false, err
	}
	size := fi.Size()
	s.resetIndexes()
	expect := s.base
	var end int64
	end, l.scratch, err = scan(s.f, 0, size, true, l.scratch, func(b record.Batch, pos int64) bool {
		if b.BaseOffset() != expect {
			return false
		}
		s.noteBatch(b, pos, l.cfg.IndexIntervalBytes)
		s.size = pos + int64(len(b))
		expect = b.NextOffset()
		return true
	})
	if err != nil {
		return false, err
	}
	whole := end == size
	if !whole {
		// Zeros after the last batch are what zero-filling ahead of the
		// appends left (see zeroFill), not a torn write: the segment is
		// whole, and the segments after it (a roll whose cut was lost)
		// stay.
		if whole, err = zeroTail(s.f, end, size, l.scratch); err != nil {
			return false, err
		}
		if err := s.f.Truncate(end); err != nil {
			return false, err
		}
	}
	s.fileSize = end
	s.noteTime()
	return whole, nil
}

// loadEpochs reads the leader-epoch cache, rebuilding it from the batch
// headers if the file is missing or malformed, and truncates it to the log.
func (l *Log) loadEpochs() error {
	data, err := os.ReadFile(filepath.Join(l.dir, epochFile))
	var c epochCache
	if err == nil {
		c, err = decodeEpochs(data)
	}
	rebuilt := false
	if err != nil {
		if c, err = epochsFromLog(l.eachBatchHeader); err != nil {
			return err
		}
		rebuilt = true
	}
	changed := c.truncateFromEnd(l.leo)
	changed = c.truncateFromStart(l.lso) || changed
	l.epochs = c
	if changed || rebuilt {
		return c.save(l.dir)
	}
	return nil
}

// eachBatchHeader calls fn with the header of every batch in the log, reading
// headers only.
func (l *Log) eachBatchHeader(fn func(b record.Batch) bool) error {
	buf := make([]byte, 0, record.HeaderSize)
	for _, s := range l.segs {
		for pos := int64(0); pos < s.size; {
			h, err := readHeader(s.f, pos, buf)
			if err != nil {
				return err
			}
			if !fn(h) {
				return nil
			}
			pos += int64(h.Size())
		}
	}
	return nil
}
