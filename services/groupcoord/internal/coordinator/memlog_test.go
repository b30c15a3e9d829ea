package coordinator

import (
	"context"
	"sync"

	"skein/libs/errs"
)

// memLog is an in-memory __consumer_offsets with the storage node's
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
	hw   map[string]map[int32]int64
}

type memFailure struct {
	err      error
	appended bool
}

type memPartition struct {
	entries []Entry
	// producer state: epoch and the last batch's sequences, per producer id
	epoch     map[int64]int16
	lastFirst map[int64]int32
	lastSeq   map[int64]int32
	lastOff   map[int64]int64
}

func newMemLog() *memLog {
	return &memLog{parts: map[int32]*memPartition{}, hw: map[string]map[int32]int64{}}
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
		mp.entries = append(mp.entries, Entry{Offset: int64(len(mp.entries)), KV: r})
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
	out := append([]Entry(nil), mp.entries[offset:stop]...)
	return out, stop, end, nil
}

func (l *memLog) HighWatermarks(ctx context.Context, topic string, partitions []int32) (map[int32]int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int32]int64{}
	for _, p := range partitions {
		if h, ok := l.hw[topic][p]; ok {
			out[p] = h
		}
	}
	return out, nil
}

func (l *memLog) failWith(f ...memFailure) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failNext = append(l.failNext, f...)
}

// clearFailures drops the failures failWith queued and were not used.
func (l *memLog) clearFailures() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failNext = nil
}

func (l *memLog) records(partition int32) []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Entry(nil), l.part(partition).entries...)
}
