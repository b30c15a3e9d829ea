package partition

import (
	"fmt"
	"slices"
	"sync"

	"skein/libs/errs"
	"skein/libs/record"
)

// memLog is an in-memory Log for replication tests: whole batches in a
// slice and a leader-epoch cache, with the same contract as libs/log.
type memLog struct {
	mu      sync.Mutex
	batches []record.Batch
	epochs  []epochStart
	start   record.Offset
	// synced is the highest offset SyncIfDue was asked to cover; syncErr,
	// when set, is what it fails with.
	synced  record.Offset
	syncErr error
	// failed is set once SyncIfDue has failed, as libs/log marks itself.
	failed bool
	// everyMessage is flush.messages=1: DurableEnd is what SyncIfDue
	// covered. syncGate, when set, holds SyncIfDue until it is closed.
	everyMessage bool
	syncGate     chan struct{}
	// readFrom is every offset Read was asked for, in order.
	readFrom []record.Offset
	// onRead, when set, runs in ReadInto after the read, unlocked.
	onRead func()
}

func (l *memLog) SyncIfDue(next record.Offset) error {
	l.mu.Lock()
	gate := l.syncGate
	l.mu.Unlock()
	if gate != nil {
		<-gate
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.syncErr != nil {
		l.failed = true
		return l.syncErr
	}
	l.synced = max(l.synced, next)
	return nil
}

type epochStart struct {
	epoch record.Epoch
	start record.Offset
}

func (l *memLog) LogEndOffset() record.Offset {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leoLocked()
}

func (l *memLog) leoLocked() record.Offset {
	if len(l.batches) == 0 {
		return l.start
	}
	return l.batches[len(l.batches)-1].NextOffset()
}

func (l *memLog) LogStartOffset() record.Offset { return l.start }

func (l *memLog) noteEpochLocked(e record.Epoch, at record.Offset) {
	if n := len(l.epochs); n == 0 || l.epochs[n-1].epoch < e {
		l.epochs = append(l.epochs, epochStart{e, at})
	}
}

func (l *memLog) AppendAsLeader(b record.Batch, epoch record.Epoch) (Appended, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var it record.RecordIter
	if err := it.Reset(b); err != nil {
		return Appended{}, err
	}
	c := record.Batch(slices.Clone(b))
	leo := l.leoLocked()
	c.SetBaseOffset(leo)
	c.SetPartitionLeaderEpoch(epoch)
	l.noteEpochLocked(epoch, leo)
	l.batches = append(l.batches, c)
	return Appended{First: c.BaseOffset(), Last: c.LastOffset(), Uncompressed: record.HeaderSize + it.RecordsSize(), LogAppendTime: -1}, nil
}

func (l *memLog) AppendAsFollower(data []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	it := record.NewBatchIter(data)
	for it.Next() {
		b := it.Batch()
		if b.BaseOffset() != l.leoLocked() {
			return errs.Errorf(errs.InvalidRecord, "follower append at %d, LEO %d", b.BaseOffset(), l.leoLocked())
		}
		l.noteEpochLocked(b.PartitionLeaderEpoch(), b.BaseOffset())
		l.batches = append(l.batches, record.Batch(slices.Clone([]byte(b))))
	}
	return it.Err()
}

func (l *memLog) ReadInto(dst []byte, offset record.Offset, maxBytes int, maxOffset record.Offset, maxRecords int) ([]byte, error) {
	data, err := l.Read(offset, maxBytes, maxOffset)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	onRead := l.onRead
	l.mu.Unlock()
	if onRead != nil {
		onRead()
	}
	if maxRecords > 0 {
		end, it := 0, record.NewBatchIter(data)
		for it.Next() && int64(end) < int64(len(data)) {
			b := it.Batch()
			end += len(b)
			if b.LastOffset() >= offset+record.Offset(maxRecords)-1 {
				break
			}
		}
		data = data[:end]
	}
	out := append(dst[len(dst):len(dst)], data...)
	if len(data) == 0 {
		return nil, nil
	}
	return out, nil
}

func (l *memLog) Read(offset record.Offset, maxBytes int, maxOffset record.Offset) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.readFrom = append(l.readFrom, offset)
	var out []byte
	for _, b := range l.batches {
		if b.LastOffset() < offset {
			continue
		}
		if b.LastOffset() >= maxOffset || (len(out) > 0 && len(out)+b.Size() > maxBytes) {
			break
		}
		out = append(out, b...)
	}
	return out, nil
}

func (l *memLog) Truncate(offset record.Offset) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.batches) > 0 && l.batches[len(l.batches)-1].BaseOffset() >= offset {
		l.batches = l.batches[:len(l.batches)-1]
	}
	// As libs/log: the epochs that start at or past the new end go, an
	// entry assigned at the LEO that no batch followed included.
	for end := l.leoLocked(); len(l.epochs) > 0 && l.epochs[len(l.epochs)-1].start >= end; {
		l.epochs = l.epochs[:len(l.epochs)-1]
	}
	return nil
}

func (l *memLog) TruncateFullyAndStartAt(offset record.Offset) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.batches, l.epochs, l.start = nil, nil, offset
	return nil
}

// AdvanceLogStart is libs/log's: the start moves up to offset (at most
// the LEO); the whole batches below it go at once here (libs/log leaves
// them to its next retention pass, and refuses reads below the start as
// the partition does).
func (l *memLog) AdvanceLogStart(offset record.Offset) error {
	if leo := l.LogEndOffset(); offset > leo {
		return fmt.Errorf("cannot delete records before %d: log end offset is %d", offset, leo)
	}
	if offset > l.LogStartOffset() {
		l.deleteBefore(offset)
	}
	return nil
}

// deleteBefore drops whole batches below offset (retention).
func (l *memLog) deleteBefore(offset record.Offset) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.batches) > 0 && l.batches[0].NextOffset() <= offset {
		l.batches = l.batches[1:]
	}
	l.start = offset
}

func (l *memLog) EndOffsetFor(epoch record.Epoch) (record.Epoch, record.Offset) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.epochs); epoch < 0 || n == 0 || epoch > l.epochs[n-1].epoch {
		// As libs/log: newer than every known epoch, this log cannot say.
		return -1, -1
	}
	for i := len(l.epochs) - 1; i >= 0; i-- {
		if l.epochs[i].epoch <= epoch {
			if i == len(l.epochs)-1 {
				return l.epochs[i].epoch, l.leoLocked()
			}
			return l.epochs[i].epoch, l.epochs[i+1].start
		}
	}
	// Older than every known epoch: it ends where the first known starts.
	return epoch, l.epochs[0].start
}

func (l *memLog) LatestEpoch() record.Epoch {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.epochs) == 0 {
		return -1
	}
	return l.epochs[len(l.epochs)-1].epoch
}

func (l *memLog) AssignEpoch(e record.Epoch) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.noteEpochLocked(e, l.leoLocked())
	return nil
}

func (l *memLog) DurableEnd() record.Offset {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.everyMessage {
		return min(l.synced, l.leoLocked())
	}
	return l.leoLocked()
}

func (l *memLog) Failed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

func (l *memLog) OffsetForTimestamp(ts int64) (record.Offset, int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range l.batches {
		if b.MaxTimestamp() >= ts {
			return b.BaseOffset(), b.MaxTimestamp(), true
		}
	}
	return 0, 0, false
}

// values lists every record value in the log, in offset order.
func (l *memLog) values() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, b := range l.batches {
		var it record.RecordIter
		if err := it.Reset(b); err != nil {
			panic(err)
		}
		for it.Next() {
			out = append(out, string(it.Record().Value))
		}
	}
	return out
}
