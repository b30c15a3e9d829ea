package log

import (
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"skein/libs/durable"
	"skein/libs/errs"
	"skein/libs/record"
)

// Offset and Epoch are the record package's, so that batches and the log
// speak the same types.
type (
	Offset = record.Offset
	Epoch  = record.Epoch
)

// NoMaxOffset is a Read bound that lets every batch through.
const NoMaxOffset Offset = math.MaxInt64

// State is what the caller checkpoints for the log (in the storage node's
// checkpoint store) and hands back to Open.
type State struct {
	// LogStartOffset is the first offset readers may ask for; it moves up
	// with DeleteRecordsBefore and retention.
	LogStartOffset Offset
	// RecoveryPoint is the offset below which everything is known to be
	// fsynced; Open re-validates only what lies at or above it.
	RecoveryPoint Offset
}

// Options are what Open needs beyond the topic config.
type Options struct {
	State State
	// Now is the clock for segment.ms rolls, log append time and flush.ms
	// bookkeeping; nil means time.Now.
	Now func() time.Time
	// CacheWindow, when positive, is how many of the newest bytes of the
	// active segment the log leaves in the page cache; older ones are
	// written back and dropped from it (cache.go). Zero leaves the cache
	// to the kernel.
	CacheWindow int64
}

// Log is one partition replica's log. See the package doc for the contract.
type Log struct {
	dir         string
	now         func() time.Time
	cacheWindow int64 // Options.CacheWindow

	// cmu is held by whatever removes or rewrites closed segments:
	// compaction (for its whole run, while appends go on), truncation,
	// deletion, Close. Taken before wmu. Closed segments do not change
	// without it, so compaction may read them without wmu.
	cmu sync.Mutex
	// cleanedTo is where the last compaction ended: the closed segments
	// below it are clean, those from it dirty (min.cleanable.dirty.ratio).
	// Held under cmu; zero at open, so a log is compacted once after a
	// restart.
	cleanedTo Offset

	// wmu is the writer lock: every method that changes the log holds it for
	// its whole run, so there is one writer at a time. The fields below it
	// are the writer's own.
	wmu       sync.Mutex
	cfg       Config
	validator record.RecordIter // scratch for Append's record validation
	scratch   []byte            // scratch for scans
	dirDirty  bool              // segment files were created or removed since the last flush
	failed    error             // a write or fsync failed: refuse further writes
	hasFailed atomic.Bool       // a write or fsync failed (failed, or syncErr not yet moved to it), for readers without wmu
	// readErr: a read the disk could not serve (readFailed), or a failure
	// the caller reported (Fail); it fails the log as a failed write does.
	// Set by readers, which hold mu, under which fmu may not be taken.
	readErr atomic.Pointer[error]
	// recoveryCut: Open found a segment's tail torn or damaged and cut the
	// log before it (RecoveryCut).
	recoveryCut bool
	flushMsgs   atomic.Int64 // cfg.FlushMessages, for SyncIfDue without wmu

	// fmu guards the fsync SyncIfDue runs without wmu, so that appends go
	// on beside it and the next fsync covers them together (a group
	// commit). Taken after wmu, never before it; mu may be taken under it.
	// Whatever closes, truncates or removes segment files waits for that
	// fsync first (waitSyncLocked, with wmu held), so the files it syncs
	// stay open; a new one cannot start then, as it is chosen under wmu.
	fmu       sync.Mutex
	syncing   bool          // an fsync without wmu is running
	syncDone  chan struct{} // closed when it ends
	syncErr   error         // it failed: moved to failed by the next writer
	lastFlush time.Time     // when the last fsync ended, for flush.ms

	// mu guards what readers see: segs and every published segment's
	// mutable fields, leo, lso, rp and the epoch cache. Only the writer
	// (holding wmu) changes them, taking mu for writing just to publish;
	// so the writer may read them without mu. Readers hold mu for reading
	// across their file reads, so a segment is never closed or truncated
	// under a reader.
	mu     sync.RWMutex
	segs   []*segment // ascending base offsets; the last is active; never empty while open
	leo    Offset     // log end offset: the next offset to assign
	lso    Offset     // log start offset; segs[0].base <= lso <= leo
	rp     Offset     // recovery point; rp <= leo
	epochs epochCache // epoch -> start offset; every start offset <= leo
	// epochsUnsaved: AssignEpoch changed the cache in memory only; the next
	// append saves it before writing. Guarded by wmu.
	epochsUnsaved bool
	closed        bool
}

// AppendInfo describes what an append stored.
type AppendInfo struct {
	FirstOffset  Offset
	LastOffset   Offset
	MaxTimestamp int64 // largest batch max timestamp; -1 if none
	// LogAppendTime is the time stamped on the batches under
	// message.timestamp.type=LogAppendTime, -1 otherwise.
	LogAppendTime int64
	Bytes         int
	// UncompressedBytes is what the batches would take with their records
	// decompressed (Bytes for uncompressed batches); Append only, the
	// follower does not decode records.
	UncompressedBytes int
}

// Dir is the partition directory.
func (l *Log) Dir() string { return l.dir }

// LEO is the log end offset: the offset the next record will get.
func (l *Log) LEO() Offset {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.leo
}

// LogStartOffset is the first offset still readable.
func (l *Log) LogStartOffset() Offset {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.lso
}

// State is what the caller should checkpoint now.
func (l *Log) State() State {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return State{LogStartOffset: l.lso, RecoveryPoint: l.rp}
}

// Size is the total bytes of all segments.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// SegmentBases lists the base offsets of the segments, oldest first.
func (l *Log) SegmentBases() []Offset {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]Offset, len(l.segs))
	for i, s := range l.segs {
		out[i] = s.base
	}
	return out
}

// Config is the config in force.
func (l *Log) Config() Config {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return l.cfg
}

// SetConfig changes the config (AlterConfigs); it applies from the next
// operation on.
func (l *Log) SetConfig(cfg Config) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.cfg = cfg.normalized()
	l.flushMsgs.Store(l.cfg.FlushMessages)
}

// Epochs returns the leader-epoch cache.
func (l *Log) Epochs() []EpochEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return slices.Clone(l.epochs.entries)
}

// LatestEpoch is the newest epoch in the cache, or UndefinedEpoch.
func (l *Log) LatestEpoch() Epoch {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if e, ok := l.epochs.latest(); ok {
		return e.Epoch
	}
	return UndefinedEpoch
}

// EndOffsetFor answers OffsetForLeaderEpoch (KIP-101/279): the largest epoch
// <= requested that this log knows and the offset where it ends (the start of
// the next epoch, or the LEO for the latest one); UndefinedEpoch and
// UndefinedOffset when the log cannot say.
func (l *Log) EndOffsetFor(requested Epoch) (Epoch, Offset) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.endOffsetFor(requested, l.leo)
}

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

// updateEpochs changes the epoch cache where readers can see it. The epoch
// file is saved before the batches that need it are written, so it is never
// behind the log; open truncates it when it is ahead.
func (l *Log) updateEpochs(f func(c *epochCache) bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return f(&l.epochs)
}

// Failed reports whether a write or fsync failed: the log refuses writes
// until it is closed and opened again (which recovers it from the disk).
func (l *Log) Failed() bool { return l.hasFailed.Load() }

// Fail marks the log failed, as a failed write does, for a failure its
// caller met on the way to making its state durable (the checkpoint of a
// log start or recovery point the caller must not act on unsaved).
func (l *Log) Fail(err error) {
	l.readErr.CompareAndSwap(nil, &err)
	l.hasFailed.Store(true)
}

// checkWritable is called with wmu held (and not fmu).
func (l *Log) checkWritable() error {
	if l.failed == nil && l.hasFailed.Load() {
		l.fmu.Lock()
		l.failed = l.syncErr
		l.fmu.Unlock()
		if e := l.readErr.Load(); l.failed == nil && e != nil {
			l.failed = *e
		}
	}
	if l.closed {
		return errs.Errorf(errs.KafkaStorageError, "log %s is closed", l.dir)
	}
	if l.failed != nil {
		return errs.Errorf(errs.KafkaStorageError, "log %s failed earlier: %v", l.dir, l.failed)
	}
	return nil
}

// ioError marks the log failed: after a failed write or fsync the state of
// the file is unknown (and after a failed fsync the page cache cannot be
// trusted), so the log refuses writes until it is reopened and recovered.
func (l *Log) ioError(op string, err error) error {
	if l.failed == nil {
		l.failed = err
		l.hasFailed.Store(true)
	}
	return errs.Errorf(errs.KafkaStorageError, "%s in %s: %v", op, l.dir, err)
}

// Append stores batches from a producer, as the leader: every batch is
// validated (framing, CRC, records, max.message.bytes, keys on compacted
// topics), then given consecutive offsets from the LEO and the leader epoch.
// Only those two header fields are rewritten, in place in records (they are
// outside the CRC); the bytes are otherwise stored as they came.
func (l *Log) Append(records []byte, epoch Epoch) (AppendInfo, error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.checkWritable(); err != nil {
		return AppendInfo{}, err
	}
	opts := record.ValidateOptions{
		Strict:          true,
		RequireKeys:     l.cfg.CleanupPolicy&CleanupCompact != 0,
		MaxDecompressed: int(max(l.cfg.MaxMessageBytes*64, record.DefaultMaxDecompressed)),
	}
	if l.cfg.CreateTimes.Check && !l.cfg.LogAppendTime {
		opts.CheckTimestamps = true
		opts.MinTimestamp, opts.MaxTimestamp = l.cfg.CreateTimes.At(l.now().UnixMilli())
	}
	n, uncompressed := 0, 0
	it := record.NewBatchIter(records)
	for it.Next() {
		b := it.Batch()
		if int64(len(b)) > l.cfg.MaxMessageBytes {
			return AppendInfo{}, errs.Errorf(errs.MessageTooLarge, "batch of %d bytes is over max.message.bytes %d", len(b), l.cfg.MaxMessageBytes)
		}
		if err := b.Verify(); err != nil {
			return AppendInfo{}, err
		}
		if err := record.ValidateRecords(&l.validator, b, opts); err != nil {
			return AppendInfo{}, err
		}
		uncompressed += record.HeaderSize + l.validator.RecordsSize()
		n++
	}
	if err := it.Err(); err != nil {
		return AppendInfo{}, err
	}
	if n == 0 {
		return AppendInfo{}, errs.Errorf(errs.InvalidRecord, "no record batch to append")
	}

	info := AppendInfo{FirstOffset: l.leo, MaxTimestamp: -1, LogAppendTime: -1, Bytes: len(records), UncompressedBytes: uncompressed}
	var now int64
	if l.cfg.LogAppendTime {
		now = l.now().UnixMilli()
		info.LogAppendTime = now
	}
	next := l.leo
	it = record.NewBatchIter(records)
	for it.Next() {
		b := it.Batch()
		b.SetBaseOffset(next)
		b.SetPartitionLeaderEpoch(epoch)
		if l.cfg.LogAppendTime {
			b.SetMaxTimestamp(true, now)
		}
		info.MaxTimestamp = max(info.MaxTimestamp, b.MaxTimestamp())
		next = b.NextOffset()
	}
	info.LastOffset = next - 1
	if l.updateEpochs(func(c *epochCache) bool { return c.assign(epoch, info.FirstOffset) }) || l.epochsUnsaved {
		if err := l.epochs.save(l.dir); err != nil {
			return AppendInfo{}, l.ioError("saving the leader-epoch cache", err)
		}
		l.epochsUnsaved = false
	}
	if err := l.write(records); err != nil {
		return AppendInfo{}, err
	}
	return info, nil
}

// AppendAsFollower stores batches fetched from the leader as they are,
// offsets and epochs included. The first batch must start exactly at the
// LEO and each next one where the previous ended; anything else means the
// replica diverged or skipped data, and is refused with OFFSET_OUT_OF_RANGE
// (the caller truncates or resets, then fetches again).
func (l *Log) AppendAsFollower(records []byte) (AppendInfo, error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.checkWritable(); err != nil {
		return AppendInfo{}, err
	}
	info := AppendInfo{FirstOffset: l.leo, MaxTimestamp: -1, LogAppendTime: -1, Bytes: len(records)}
	next := l.leo
	it := record.NewBatchIter(records)
	for it.Next() {
		b := it.Batch()
		if err := b.Verify(); err != nil {
			return AppendInfo{}, err
		}
		if b.BaseOffset() != next {
			return AppendInfo{}, errs.Errorf(errs.OffsetOutOfRange, "follower append of a batch at offset %d, expected %d (log end offset %d)", b.BaseOffset(), next, l.leo)
		}
		next = b.NextOffset()
		info.MaxTimestamp = max(info.MaxTimestamp, b.MaxTimestamp())
	}
	if err := it.Err(); err != nil {
		return AppendInfo{}, err
	}
	if next == l.leo {
		return AppendInfo{}, errs.Errorf(errs.InvalidRecord, "no record batch to append")
	}
	info.LastOffset = next - 1
	changed := l.updateEpochs(func(c *epochCache) bool {
		changed := false
		it := record.NewBatchIter(records)
		for it.Next() {
			changed = c.assign(it.Batch().PartitionLeaderEpoch(), it.Batch().BaseOffset()) || changed
		}
		return changed
	})
	if changed || l.epochsUnsaved {
		if err := l.epochs.save(l.dir); err != nil {
			return AppendInfo{}, l.ioError("saving the leader-epoch cache", err)
		}
		l.epochsUnsaved = false
	}
	if err := l.write(records); err != nil {
		return AppendInfo{}, err
	}
	return info, nil
}

// write appends validated, offset-assigned batches to the active segment
// (rolling first if needed) and publishes them. flush.messages is the
// caller's to apply, with SyncIfDue. Called with wmu held.
func (l *Log) write(records []byte) error {
	first := record.Batch(records)
	if err := l.maybeRoll(int64(len(records)), first.MaxTimestamp(), first.BaseOffset()); err != nil {
		return err
	}
	s := l.active()
	pos := s.size
	end := pos + int64(len(records))
	if l.cfg.FlushMessages <= zeroFillFlushMessages {
		if err := s.zeroFill(end); err != nil {
			return l.ioError("zero-filling a segment", err)
		}
	}
	if _, err := s.f.WriteAt(records, pos); err != nil {
		// Nothing was published; the next write starts at the same
		// position, and open cuts whatever the file holds past it.
		return l.ioError("appending", err)
	}
	s.fileSize = max(s.fileSize, end)
	l.mu.Lock()
	it := record.NewBatchIter(records)
	for it.Next() {
		s.noteBatch(it.Batch(), pos, l.cfg.IndexIntervalBytes)
		pos += int64(len(it.Batch()))
	}
	s.size = pos
	l.leo = s.next
	l.mu.Unlock()
	if l.cacheWindow > 0 {
		s.trimCache(l.cacheWindow)
	}
	return nil
}

// maybeRoll starts a new segment when the active one cannot take size more
// bytes, has spanned segment.ms, or would overflow its 32-bit relative
// offsets. An empty segment is never rolled.
func (l *Log) maybeRoll(size, firstMaxTS int64, firstOffset Offset) error {
	s := l.active()
	if s.empty() {
		return nil
	}
	full := s.size+size > l.cfg.SegmentBytes
	var old bool
	if s.firstTS >= 0 && firstMaxTS >= 0 {
		old = firstMaxTS-s.firstTS > l.cfg.SegmentMS
	} else {
		old = l.now().Sub(s.created).Milliseconds() > l.cfg.SegmentMS
	}
	overflow := int64(firstOffset-s.base) > math.MaxInt32-1<<20
	if !full && !old && !overflow {
		return nil
	}
	return l.roll()
}

// roll closes the active segment's indexes and starts a new one at the LEO.
func (l *Log) roll() error {
	s := l.active()
	l.mu.Lock()
	s.noteTime() // the final time entry: the segment's max timestamp
	l.mu.Unlock()
	if err := s.persistIndexes(); err != nil {
		return l.ioError("writing indexes", err)
	}
	if err := s.cutZeros(); err != nil {
		return l.ioError("truncating a segment", err)
	}
	if l.cacheWindow > 0 {
		s.dropTail()
	}
	now := l.now()
	ns, err := createSegment(l.dir, l.leo, now)
	if err != nil {
		return l.ioError("creating a segment", err)
	}
	s.closedMS = now.UnixMilli()
	l.dirDirty = true
	l.mu.Lock()
	l.segs = append(slices.Clone(l.segs), ns)
	l.mu.Unlock()
	return nil
}

// Roll starts a new segment now if the active one holds anything.
func (l *Log) Roll() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.checkWritable(); err != nil {
		return err
	}
	if l.active().empty() {
		return nil
	}
	return l.roll()
}

// Flush fsyncs everything appended so far and moves the recovery point to
// the LEO.
func (l *Log) Flush() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.checkWritable(); err != nil {
		return err
	}
	return l.flushLocked()
}

// FlushIfDue applies flush.ms: it flushes when there is unflushed data and
// flush.ms has passed since the last flush. The storage node calls it from
// its scheduler.
func (l *Log) FlushIfDue(now time.Time) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.checkWritable(); err != nil {
		return err
	}
	l.fmu.Lock()
	last := l.lastFlush
	l.fmu.Unlock()
	if l.rp >= l.leo || now.Sub(last).Milliseconds() < l.cfg.FlushMS {
		return nil
	}
	return l.flushLocked()
}

// FlushRolled fsyncs the segments rolled since the recovery point, with
// their index files and the directory, and moves the recovery point to the
// active segment's base, as Kafka flushes a segment when it rolls: however
// seldom flush.ms and flush.messages ask for an fsync (by default never),
// a disk that fails under write-back is found out within a segment, and a
// restart after a crash re-validates only the active segment. The fsync
// runs without wmu, as SyncIfDue's, so appends go on beside it; when one
// of SyncIfDue's is under way it does nothing (the next call will). The
// storage node calls it from its scheduler.
func (l *Log) FlushRolled() error {
	l.wmu.Lock()
	if err := l.checkWritable(); err != nil {
		l.wmu.Unlock()
		return err
	}
	upTo := l.active().base
	l.fmu.Lock()
	if l.rp >= upTo || l.syncing {
		l.fmu.Unlock()
		l.wmu.Unlock()
		return nil
	}
	segs, dir := l.segmentsToSyncLocked(), l.dirDirty
	segs = segs[:len(segs)-1] // not the active one
	l.dirDirty = false
	l.syncing, l.syncDone = true, make(chan struct{})
	l.fmu.Unlock()
	l.wmu.Unlock()

	err := syncFiles(l.dir, segs, dir)
	for _, s := range segs {
		if err == nil {
			err = s.syncIndexes()
		}
	}
	l.endSync(err, upTo, false)
	if err != nil {
		return errs.Errorf(errs.KafkaStorageError, "fsync of rolled segments in %s: %v", l.dir, err)
	}
	return nil
}

// SyncIfDue applies flush.messages to the offsets below next, which an
// append has published: when next is flush.messages or more past the
// recovery point, it returns once an fsync that began after they were
// written has ended. The appends only publish: a caller appends under its
// own locks and calls this after releasing them, before it counts the
// batches written.
//
// The fsync runs without wmu, so appends go on beside it, and concurrent
// callers share it: a caller whose offsets an fsync in progress may not
// cover waits for it to end and then starts the next one, which covers
// everything published by then (a group commit).
func (l *Log) SyncIfDue(next Offset) error {
	for {
		l.fmu.Lock()
		if err := l.syncFailedLocked(); err != nil {
			l.fmu.Unlock()
			return err
		}
		l.mu.RLock()
		rp := l.rp
		l.mu.RUnlock()
		if next <= rp || next-rp < Offset(l.flushMsgs.Load()) {
			l.fmu.Unlock()
			return nil
		}
		if l.syncing {
			done := l.syncDone
			l.fmu.Unlock()
			<-done
			continue
		}
		l.fmu.Unlock()

		// What to fsync is chosen under wmu: the segments from the one
		// holding the recovery point on, up to the LEO of now.
		l.wmu.Lock()
		if err := l.checkWritable(); err != nil {
			l.wmu.Unlock()
			return err
		}
		l.fmu.Lock()
		if l.syncing { // another caller started one meanwhile
			l.fmu.Unlock()
			l.wmu.Unlock()
			continue
		}
		if next > l.leo {
			next = l.leo // truncated since it was appended
		}
		if next <= l.rp {
			l.fmu.Unlock()
			l.wmu.Unlock()
			return nil
		}
		segs, upTo, dir := l.segmentsToSyncLocked(), l.leo, l.dirDirty
		l.dirDirty = false
		l.syncing, l.syncDone = true, make(chan struct{})
		l.fmu.Unlock()
		l.wmu.Unlock()

		err := syncFiles(l.dir, segs, dir)
		l.endSync(err, upTo, true)
		if err != nil {
			return errs.Errorf(errs.KafkaStorageError, "fsync in %s: %v", l.dir, err)
		}
	}
}

// endSync ends an fsync run without wmu (SyncIfDue's, FlushRolled's): on
// success the recovery point moves to upTo (and, with flushed, flush.ms
// counts from now), on failure the log is failed; then the next may start.
func (l *Log) endSync(err error, upTo Offset, flushed bool) {
	l.fmu.Lock()
	defer l.fmu.Unlock()
	if err != nil {
		l.syncErr = err
		l.hasFailed.Store(true)
	} else {
		l.mu.Lock()
		l.rp = max(l.rp, upTo)
		l.mu.Unlock()
		if flushed {
			l.lastFlush = l.now()
		}
	}
	l.syncing = false
	close(l.syncDone)
}

// syncFailedLocked answers the error of a failed write or fsync; fmu held.
func (l *Log) syncFailedLocked() error {
	if !l.hasFailed.Load() {
		return nil
	}
	err := l.syncErr
	if e := l.readErr.Load(); err == nil && e != nil {
		err = *e
	}
	if err == nil {
		err = errors.New("a write failed")
	}
	return errs.Errorf(errs.KafkaStorageError, "log %s failed earlier: %v", l.dir, err)
}

// waitSyncLocked waits for SyncIfDue's fsync in progress, if any, to end;
// called with wmu held by whatever closes, truncates or removes segment
// files. No other can start while wmu is held.
func (l *Log) waitSyncLocked() {
	l.fmu.Lock()
	for l.syncing {
		done := l.syncDone
		l.fmu.Unlock()
		<-done
		l.fmu.Lock()
	}
	l.fmu.Unlock()
}

// segmentsToSyncLocked answers the segments holding offsets at or above
// the recovery point: the last one whose base is <= rp and everything
// after it. Called with wmu held.
func (l *Log) segmentsToSyncLocked() []*segment {
	i, _ := slices.BinarySearchFunc(l.segs, l.rp, func(s *segment, o Offset) int { return cmpOffset(s.base, o) })
	i = max(0, min(i, len(l.segs)-1))
	if i > 0 && l.segs[i].base > l.rp {
		i--
	}
	return slices.Clone(l.segs[i:])
}

// syncFiles fsyncs segs' files, and the directory when dir is set.
func syncFiles(path string, segs []*segment, dir bool) error {
	for _, s := range segs {
		if err := s.f.Sync(); err != nil {
			return err
		}
	}
	if dir {
		return durable.SyncDir(path)
	}
	return nil
}

func (l *Log) flushLocked() error {
	// A SyncIfDue fsync in progress may have taken the directory's flag:
	// wait for it, so that nothing is counted durable before its fsyncs
	// end, and fail if it failed.
	l.waitSyncLocked()
	if l.hasFailed.Load() {
		return l.checkWritable()
	}
	for _, s := range l.segmentsToSyncLocked() {
		if err := s.f.Sync(); err != nil {
			return l.ioError("fsync", err)
		}
	}
	if l.dirDirty {
		if err := durable.SyncDir(l.dir); err != nil {
			return l.ioError("fsync of the directory", err)
		}
		l.dirDirty = false
	}
	l.fmu.Lock()
	l.lastFlush = l.now()
	l.fmu.Unlock()
	l.mu.Lock()
	l.rp = l.leo
	l.mu.Unlock()
	return nil
}

func cmpOffset(a, b Offset) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Close flushes and closes the log; it writes the active segment's indexes so
// that the next Open need not rebuild them. Methods called after Close fail.
func (l *Log) Close() error {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.closed {
		return nil
	}
	l.waitSyncLocked()
	var first error
	if !l.hasFailed.Load() { // a failed log counts nothing more durable
		if err := l.active().persistIndexes(); err != nil {
			first = err
		}
		// Cut before the flush, which makes the cut durable: the next open
		// then finds the file as long as its batches and trusts it.
		if err := l.active().cutZeros(); err != nil && first == nil {
			first = err
		}
		if err := l.flushLocked(); err != nil && first == nil {
			first = err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for _, s := range l.segs {
		if err := s.close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// DurableEnd is where a leader may count its own log toward the high
// watermark: the LEO, but when every message is to be fsynced
// (flush.messages=1) only the recovery point, below which everything is
// fsynced — as Kafka's leader flushes within the append, before its HW
// moves, so that no consumer reads a record that is on no disk.
func (l *Log) DurableEnd() Offset {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.flushMsgs.Load() == 1 {
		return min(l.rp, l.leo)
	}
	return l.leo
}

// AssignEpoch records that leader epoch epoch starts at the log end offset.
// A replica that becomes leader calls it before it appends, as Kafka's
// leader does: its answers to OffsetForLeaderEpoch then place the end of
// every older epoch at once, so a follower that holds batches of an epoch
// this log never got is told where that epoch's predecessor ends here, not
// that nothing is known. An epoch not newer than the latest known changes
// nothing. The entry is kept in memory, and saved by the first append
// after it, before its batch is written: a failover that moves many
// leaderships to this node does not wait on a file's fsync for each. An
// entry that no batch followed is dropped when the log is opened again (it
// was never saved, or is cut as ahead of the log), or truncated.
func (l *Log) AssignEpoch(epoch Epoch) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.checkWritable(); err != nil {
		return err
	}
	if l.updateEpochs(func(c *epochCache) bool { return c.assign(epoch, l.leo) }) {
		l.epochsUnsaved = true
	}
	return nil
}

// Truncate removes every batch whose last offset is at or above offset, for a
// follower whose log diverged from the leader's (the offset comes from
// OffsetForLeaderEpoch, so it is a batch boundary; if it is not, the whole
// batch holding it goes and the LEO ends below offset). Later segments are
// deleted; the epoch cache and recovery point are truncated with the log.
// An offset below the log start offset empties the log and restarts it there.
func (l *Log) Truncate(offset Offset) error {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.checkWritable(); err != nil {
		return err
	}
	l.cleanedTo = min(l.cleanedTo, offset)
	if offset >= l.leo {
		// Nothing to cut, but an epoch this replica assigned as leader
		// and never wrote in may stand at the end of the cache: it goes,
		// so that the next fetch names the epoch the last batch carries
		// (Kafka does the same).
		if l.updateEpochs(func(c *epochCache) bool { return c.truncateFromEnd(l.leo) }) {
			if err := l.epochs.save(l.dir); err != nil {
				return l.ioError("saving the leader-epoch cache", err)
			}
		}
		return nil
	}
	if offset < l.lso {
		return l.truncateFullyLocked(offset)
	}
	l.waitSyncLocked()
	// Keep the segments whose base is below offset; the last of them is cut.
	keep := len(l.segs)
	for keep > 1 && l.segs[keep-1].base >= offset {
		keep--
	}
	s := l.segs[keep-1]
	// Rebuild s's in-memory state for the batches that stay, to publish it
	// in one step; the file is cut only after readers can no longer reach
	// past the cut.
	kept := &segment{dir: s.dir, base: s.base, f: s.f, created: s.created}
	kept.resetIndexes()
	var err error
	_, l.scratch, err = scan(s.f, 0, s.size, false, l.scratch, func(b record.Batch, pos int64) bool {
		if b.LastOffset() >= offset {
			return false
		}
		kept.noteBatch(b, pos, l.cfg.IndexIntervalBytes)
		kept.size = pos + int64(len(b))
		return true
	})
	if err != nil {
		return l.ioError("reading for truncation", err)
	}
	dropped := slices.Clone(l.segs[keep:])
	l.mu.Lock()
	l.segs = slices.Clone(l.segs[:keep])
	s.size, s.next, s.index, s.times = kept.size, kept.next, kept.index, kept.times
	s.maxTS, s.maxTSRel, s.firstTS, s.sinceIndex = kept.maxTS, kept.maxTSRel, kept.firstTS, kept.sinceIndex
	s.indexOnDisk = false
	s.closedMS, s.swept = 0, false // active again
	l.leo = s.next
	l.rp = min(l.rp, l.leo)
	l.lso = min(l.lso, l.leo)
	l.mu.Unlock()
	// Newest first, so that a crash leaves a prefix of the log.
	for i := len(dropped) - 1; i >= 0; i-- {
		if err := dropped[i].remove(); err != nil {
			return l.ioError("deleting a segment", err)
		}
		l.dirDirty = true
	}
	if err := s.f.Truncate(s.size); err != nil {
		return l.ioError("truncating a segment", err)
	}
	s.fileSize = s.size
	if err := s.persistIndexes(); err != nil {
		return l.ioError("writing indexes", err)
	}
	if l.updateEpochs(func(c *epochCache) bool { return c.truncateFromEnd(l.leo) }) {
		if err := l.epochs.save(l.dir); err != nil {
			return l.ioError("saving the leader-epoch cache", err)
		}
	}
	return nil
}

// TruncateFullyAndStartAt empties the log and restarts it at offset, for a
// follower whose LEO is below the leader's log start offset.
func (l *Log) TruncateFullyAndStartAt(offset Offset) error {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.checkWritable(); err != nil {
		return err
	}
	return l.truncateFullyLocked(offset)
}

func (l *Log) truncateFullyLocked(offset Offset) error {
	l.cleanedTo = 0
	l.waitSyncLocked()
	// Readers are held off for the whole swap: the new segment may reuse
	// the name (and so the file) of an old one.
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.segs) - 1; i >= 0; i-- {
		if err := l.segs[i].remove(); err != nil {
			return l.ioError("deleting a segment", err)
		}
	}
	l.dirDirty = true
	ns, err := createSegment(l.dir, offset, l.now())
	if err != nil {
		// Keep a usable (empty) view; the log is marked failed anyway.
		l.segs = nil
		return l.ioError("creating a segment", err)
	}
	l.segs = []*segment{ns}
	l.leo, l.lso, l.rp = offset, offset, offset
	l.epochs = epochCache{}
	if err := l.epochs.save(l.dir); err != nil {
		return l.ioError("saving the leader-epoch cache", err)
	}
	return nil
}

// DeleteRecordsBefore moves the log start offset up to offset (Kafka's
// DeleteRecords; the caller checks offset <= HW) and deletes the segments
// that lie wholly below it.
func (l *Log) DeleteRecordsBefore(offset Offset) error {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if moved, err := l.advanceStartLocked(offset); !moved || err != nil {
		return err
	}
	_, err := l.deleteSegmentsLocked(func(s, next *segment) bool { return next.base <= l.lso })
	return err
}

// AdvanceLogStart moves the log start offset up to offset (at most the
// LEO; a lower one changes nothing), as a follower takes its leader's and
// as a leader answers DeleteRecords without waiting: reads below it are
// refused at once, and the segments wholly below it are deleted by the
// next DeleteExpired. Unlike DeleteRecordsBefore it never waits for a
// compaction in progress (it takes only the writer lock), so a caller
// that holds a lock of its own across it is not held by one.
func (l *Log) AdvanceLogStart(offset Offset) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	_, err := l.advanceStartLocked(offset)
	return err
}

// advanceStartLocked moves the log start up to offset, with wmu held;
// moved is false when offset is at or below it already.
func (l *Log) advanceStartLocked(offset Offset) (moved bool, _ error) {
	if err := l.checkWritable(); err != nil {
		return false, err
	}
	if offset > l.leo {
		return false, errs.Errorf(errs.OffsetOutOfRange, "cannot move the log start to %d: log end offset is %d", offset, l.leo)
	}
	if offset <= l.lso {
		return false, nil
	}
	l.mu.Lock()
	l.lso = offset
	l.mu.Unlock()
	return true, nil
}

// deleteSegmentsLocked deletes the oldest closed segments while keep says
// they may go (it sees each segment and its successor), moves the log start
// offset up past them, and returns how many went.
func (l *Log) deleteSegmentsLocked(deletable func(s, next *segment) bool) (int, error) {
	n := 0
	for n < len(l.segs)-1 && deletable(l.segs[n], l.segs[n+1]) {
		n++
	}
	if n == 0 {
		return 0, nil
	}
	l.waitSyncLocked()
	gone := l.segs[:n]
	l.mu.Lock()
	l.segs = slices.Clone(l.segs[n:])
	l.lso = max(l.lso, l.segs[0].base)
	l.rp = max(l.rp, l.segs[0].base)
	l.mu.Unlock()
	// Oldest first, so that a crash leaves a suffix of the log.
	for _, s := range gone {
		if err := s.remove(); err != nil {
			return n, l.ioError("deleting a segment", err)
		}
	}
	l.dirDirty = true
	if l.updateEpochs(func(c *epochCache) bool { return c.truncateFromStart(l.lso) }) {
		if err := l.epochs.save(l.dir); err != nil {
			return n, l.ioError("saving the leader-epoch cache", err)
		}
	}
	return n, nil
}

// RecoveryCut reports whether Open cut the log: a segment's tail was torn
// or damaged (a write the disk lost, or flipped), and the log ends before
// it. What lay past the cut is on the other replicas only.
func (l *Log) RecoveryCut() bool { return l.recoveryCut }
