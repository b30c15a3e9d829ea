package accumulator

import (
	"cmp"
	"slices"
	"time"

	"skein/libs/record"
)

// Defaults are Kafka's producer defaults.
const (
	DefaultBatchSize = 16 << 10
	DefaultLinger    = 5 * time.Millisecond
)

// TP names a partition of a topic.
type TP struct {
	Topic     string
	Partition int32
}

// Record is one record waiting in a batch. Token is the producer's handle
// (its completion callback, say) and Held what the producer counts the
// record as (against its buffer, say); the accumulator looks at neither.
type Record struct {
	Timestamp int64 // ms since the epoch
	Key       []byte
	Value     []byte
	Headers   []record.Header
	Token     any
	Held      int64
	Gen       uint64 // the producer's flush generation when it was queued
}

// Batch is an ordered run of records of one partition.
type Batch struct {
	TP      TP
	Records []Record
	// Bytes is the uncompressed RecordBatch v2 size of the batch.
	Bytes   int
	Created time.Time
	// limit is min(batch size, the topic's max.message.bytes) when the batch
	// was opened; full is set once a record did not fit.
	limit int
	full  bool
	// baseTS is the first record's timestamp, which deltas are taken from.
	baseTS int64
}

// Config is the batching policy. Zero fields take the defaults.
type Config struct {
	BatchSize int           // bytes; Kafka's batch.size
	Linger    time.Duration // Kafka's linger.ms; negative means send at once
}

// Accumulator holds open and full batches per partition.
type Accumulator struct {
	batchSize int
	linger    time.Duration
	queues    map[TP][]*Batch // oldest first; only the last may be open
	records   int
	// popped is how many records each partition's last popped batch held:
	// a new batch starts with room for as many, so a steady stream fills
	// its batches without growing them record by record.
	popped map[TP]int
}

// New returns an empty accumulator.
func New(cfg Config) *Accumulator {
	a := &Accumulator{batchSize: cfg.BatchSize, linger: cfg.Linger, queues: make(map[TP][]*Batch), popped: make(map[TP]int)}
	if a.batchSize <= 0 {
		a.batchSize = DefaultBatchSize
	}
	if a.linger == 0 {
		a.linger = DefaultLinger
	}
	if a.linger < 0 {
		a.linger = 0
	}
	return a
}

// RecordSize is the encoded size of r as the record at offsetDelta of a batch
// whose base timestamp is baseTS (Kafka's DefaultRecord.sizeInBytes).
func RecordSize(r *Record, offsetDelta int32, baseTS int64) int {
	body := 1 + record.VarintLen(r.Timestamp-baseTS) + record.VarintLen(int64(offsetDelta)) +
		record.BytesLen(r.Key) + record.BytesLen(r.Value) + record.VarintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		body += record.VarintLen(int64(len(h.Key))) + len(h.Key) + record.BytesLen(h.Value)
	}
	return record.VarintLen(int64(body)) + body
}

// SingleBatchSize is the size of a batch holding only r: what Kafka checks
// against max.message.bytes before accepting a record.
func SingleBatchSize(r *Record) int { return record.HeaderSize + RecordSize(r, 0, r.Timestamp) }

// Fits reports whether r would go into tp's open batch; false means appending
// it opens a new batch (the sticky partitioner's cue to move on).
func (a *Accumulator) Fits(tp TP, r *Record) bool {
	q := a.queues[tp]
	if len(q) == 0 {
		return false
	}
	b := q[len(q)-1]
	return !b.full && b.Bytes+RecordSize(r, int32(len(b.Records)), b.baseTS) <= b.limit
}

// Append adds r to tp's open batch, or to a new one when it does not fit.
// maxBytes is the topic's max.message.bytes (0: no limit beyond batch size).
// It reports whether a new batch was opened.
func (a *Accumulator) Append(tp TP, r Record, now time.Time, maxBytes int) (opened bool) {
	a.records++
	q := a.queues[tp]
	if len(q) > 0 {
		b := q[len(q)-1]
		if !b.full {
			if size := RecordSize(&r, int32(len(b.Records)), b.baseTS); b.Bytes+size <= b.limit {
				b.Records = append(b.Records, r)
				b.Bytes += size
				return false
			}
			b.full = true
		}
	}
	limit := a.batchSize
	if maxBytes > 0 && maxBytes < limit {
		limit = maxBytes
	}
	b := &Batch{TP: tp, Created: now, limit: limit, baseTS: r.Timestamp}
	b.Bytes = record.HeaderSize + RecordSize(&r, 0, r.Timestamp)
	// Room for as many records as the partition's last batch held, but no
	// more than records of r's size could fill the limit.
	room := min(max(a.popped[tp], 1), max(limit/(b.Bytes-record.HeaderSize), 1))
	b.Records = append(make([]Record, 0, room), r)
	if b.Bytes >= limit {
		b.full = true // a record as large as the limit travels alone
	}
	a.queues[tp] = append(q, b)
	return true
}

// ready reports whether the head batch of q may be sent.
func (a *Accumulator) ready(q []*Batch, now time.Time, flush bool) bool {
	if len(q) == 0 {
		return false
	}
	h := q[0]
	return flush || len(q) > 1 || h.full || !now.Before(h.Created.Add(a.linger))
}

// Ready lists, in a stable order, the partitions whose first batch may be
// sent now: full, lingered long enough, or flushing — or, when eager is not
// nil, any partition with a batch for which eager answers true (a partition
// with nothing in flight, whose batch would gain nothing by waiting).
func (a *Accumulator) Ready(now time.Time, flush bool, eager func(TP) bool) []TP {
	var out []TP
	for tp, q := range a.queues {
		if a.ready(q, now, flush) || len(q) > 0 && eager != nil && eager(tp) {
			out = append(out, tp)
		}
	}
	slices.SortFunc(out, func(x, y TP) int {
		return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	})
	return out
}

// ReadyNow reports whether tp's first batch may be sent now by the rules
// of Ready without eager: full, lingered long enough, or flushing. A sender
// that took tp's first batch asks it to learn whether the next one may
// follow in the same round.
func (a *Accumulator) ReadyNow(tp TP, now time.Time, flush bool) bool {
	return a.ready(a.queues[tp], now, flush)
}

// Pop removes and returns tp's first batch, or nil.
func (a *Accumulator) Pop(tp TP) *Batch {
	q := a.queues[tp]
	if len(q) == 0 {
		return nil
	}
	b := q[0]
	if len(q) == 1 {
		delete(a.queues, tp)
	} else {
		q[0] = nil
		a.queues[tp] = q[1:]
	}
	a.records -= len(b.Records)
	a.popped[tp] = len(b.Records)
	return b
}

// NextReady is the earliest time a batch that is not ready now becomes ready
// by lingering; ok is false when no batch is waiting on linger.
func (a *Accumulator) NextReady(now time.Time) (at time.Time, ok bool) {
	for _, q := range a.queues {
		if len(q) == 0 || a.ready(q, now, false) {
			continue
		}
		t := q[0].Created.Add(a.linger)
		if !ok || t.Before(at) {
			at, ok = t, true
		}
	}
	return at, ok
}

// Expire removes every batch created before cutoff and returns them, so the
// producer can fail records that waited past their delivery timeout.
func (a *Accumulator) Expire(cutoff time.Time) []*Batch {
	var out []*Batch
	for tp, q := range a.queues {
		i := 0
		for i < len(q) && q[i].Created.Before(cutoff) {
			a.records -= len(q[i].Records)
			out = append(out, q[i])
			i++
		}
		switch {
		case i == len(q):
			delete(a.queues, tp)
		case i > 0:
			a.queues[tp] = q[i:]
		}
	}
	return out
}

// Records is the number of records waiting.
func (a *Accumulator) Records() int { return a.records }

// Oldest is the creation time of the oldest waiting batch.
func (a *Accumulator) Oldest() (t time.Time, ok bool) {
	for _, q := range a.queues {
		if len(q) > 0 && (!ok || q[0].Created.Before(t)) {
			t, ok = q[0].Created, true
		}
	}
	return t, ok
}
