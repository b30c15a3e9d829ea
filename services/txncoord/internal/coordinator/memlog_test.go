package coordinator

import (
	"context"
	"sync"

	"skein/libs/errs"
)

// memLog is an in-memory __transaction_state with the storage node's
// producer checks (epoch fencing, sequences, duplicates), shared by the
// coordinators of a test as one cluster's log is.
type memLog struct {
	mu    sync.Mutex
	parts map[int32]*memPartition
	// failNext: the next produce calls answer these errors; with appended,
	// the batch is in the log anyway (an unknown outcome).
	failNext []memFailure
	// hold, when not nil, blocks every Fetch until closed.
	hold chan struct{}
}

type memFailure struct {
	err      error
	appended bool
}

type memPartition struct {
	entries []memEntry
	// producer state: epoch and the last batch's sequences, per producer id
	epoch     map[int64]int16
	lastFirst map[int64]int32
	lastSeq   map[int64]int32
	lastOff   map[int64]int64
}

// memEntry is a record and the producer identity it was written under.
type memEntry struct {
	Entry
	id Identity
}

func newMemLog() *memLog {
	return &memLog{parts: map[int32]*memPartition{}}
}

func (l *memLog) part(p int32) *memPartition {
	mp := l.parts[p]
	if mp == nil {
		mp = &memPartition{epoch: map[int64]int16{}, lastFirst: map[int64]int32{}, lastSeq: map[int64]int32{}, lastOff: map[int64]int64{}}
		l.parts[p] = mp
	}
	return mp
}

func (l *memLog) Produce(ctx context.Context, partition int32, id Identity, recs []KV) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	mp := l.part(partition)
	var fail *memFailure
	if len(l.failNext) > 0 {
		fail = &l.failNext[0]
		l.failNext = l.failNext[1:]
		if !fail.appended {
			return -1, fail.err
		}
	}
	cur, known := mp.epoch[id.ProducerID]
	last := id.Sequence + int32(len(recs)) - 1
	switch {
	case known && id.Epoch < cur:
		// The storage node fences an older epoch of the producer: a newer
		// owner of the partition wrote.
		return -1, errs.Errorf(errs.InvalidProducerEpoch, "epoch %d is older than %d", id.Epoch, cur)
	case known && id.Epoch == cur && id.Sequence == mp.lastFirst[id.ProducerID] && last == mp.lastSeq[id.ProducerID]:
		if fail != nil {
			return -1, fail.err
		}
		return mp.lastOff[id.ProducerID], nil // a duplicate
	case known && id.Epoch == cur && id.Sequence != mp.lastSeq[id.ProducerID]+1:
		return -1, errs.Errorf(errs.OutOfOrderSequenceNumber, "expected %d, got %d", mp.lastSeq[id.ProducerID]+1, id.Sequence)
	case known && id.Epoch > cur && id.Sequence != 0:
		return -1, errs.Errorf(errs.OutOfOrderSequenceNumber, "new epoch must start at 0")
	}
	for _, r := range recs {
		mp.entries = append(mp.entries, memEntry{Entry: Entry{Offset: int64(len(mp.entries)), KV: r}, id: id})
	}
	mp.epoch[id.ProducerID], mp.lastFirst[id.ProducerID], mp.lastSeq[id.ProducerID] = id.Epoch, id.Sequence, last
	mp.lastOff[id.ProducerID] = int64(len(mp.entries) - 1)
	if fail != nil {
		return -1, fail.err
	}
	return int64(len(mp.entries) - 1), nil
}

func (l *memLog) Fetch(ctx context.Context, partition int32, offset int64) ([]Entry, int64, int64, error) {
	l.mu.Lock()
	hold := l.hold
	l.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, 0, 0, errs.Errorf(errs.RequestTimedOut, "held")
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	mp := l.part(partition)
	end := int64(len(mp.entries))
	if offset >= end {
		return nil, end, end, nil
	}
	// A few records per fetch, so the loader must loop.
	stop := min(end, offset+3)
	out := make([]Entry, 0, stop-offset)
	for _, e := range mp.entries[offset:stop] {
		out = append(out, e.Entry)
	}
	return out, stop, end, nil
}

func (l *memLog) failWith(f ...memFailure) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failNext = append(l.failNext, f...)
}

func (l *memLog) setHold(ch chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hold = ch
}

func (l *memLog) records(partition int32) []memEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]memEntry(nil), l.part(partition).entries...)
}

func (l *memLog) size(partition int32) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.part(partition).entries)
}
