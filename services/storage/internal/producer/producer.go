package producer

import (
	"encoding/json"
	"math"
	"sort"

	"skein/libs/errs"
)

// Window is how many recent batches per producer are remembered for
// deduplication (Kafka's max.in.flight.requests.per.connection bound).
const Window = 5

// NoProducer is the producer id of batches from non-idempotent producers.
const NoProducer int64 = -1

// Batch is what the state needs to know of a record batch.
type Batch struct {
	ProducerID    int64
	Epoch         int16
	FirstSeq      int32
	Records       int32 // number of records (lastOffsetDelta + 1)
	Transactional bool
	// LogAppendTime: the log stamped the batch with the time it appended it
	// (message.timestamp.type=LogAppendTime), the timestamp Append is given.
	LogAppendTime bool
}

// LastSeq is the sequence of the batch's last record; sequences wrap from
// MaxInt32 to 0 as in Kafka.
func (b Batch) LastSeq() int32 { return addSeq(b.FirstSeq, b.Records-1) }

func addSeq(s, n int32) int32 {
	if int64(s)+int64(n) > math.MaxInt32 {
		return int32(int64(s) + int64(n) - math.MaxInt32 - 1)
	}
	return s + n
}

// Appended is one remembered batch.
type Appended struct {
	FirstSeq    int32 `json:"first_seq"`
	LastSeq     int32 `json:"last_seq"`
	FirstOffset int64 `json:"first_offset"`
	LastOffset  int64 `json:"last_offset"`
	Timestamp   int64 `json:"timestamp"`
	// Kind is whether the batch was transactional (KindTransactional) or
	// not (KindPlain); KindUnknown in a snapshot written before it was
	// kept. A retry matches only a batch of its own kind.
	Kind int8 `json:"kind,omitempty"`
	// LogAppendTime: Timestamp is the time the log appended the batch, which
	// a retry of it is answered with.
	LogAppendTime bool `json:"log_append_time,omitempty"`
}

// The kinds of an Appended batch.
const (
	KindUnknown int8 = iota
	KindPlain
	KindTransactional
)

func kindOf(b Batch) int8 {
	if b.Transactional {
		return KindTransactional
	}
	return KindPlain
}

// Entry is one producer's state.
type Entry struct {
	Epoch int16 `json:"epoch"`
	// Batches holds at most Window batches of the current epoch, oldest first.
	Batches []Appended `json:"batches"`
	// TxnFirstOffset is the first offset of the open transaction, -1 if none.
	TxnFirstOffset   int64 `json:"txn_first_offset"`
	CoordinatorEpoch int32 `json:"coordinator_epoch"`
	LastTimestamp    int64 `json:"last_timestamp"`
	// EpochFromMarker: the transaction marker at MarkerOffset began
	// Epoch (every transaction's end bumps the epoch, and the producer's
	// sequences start again), so while no batch of the epoch is known the
	// next one starts at sequence 0.
	EpochFromMarker bool  `json:"epoch_from_marker,omitempty"`
	MarkerOffset    int64 `json:"marker_offset,omitempty"`

	// written: a batch or marker since the last Expire, which then sets
	// seen (its caller's clock, not a record's timestamp) and clears it.
	written bool
	seen    int64
}

// Verdict is Check's answer for a batch that may be appended or is a retry.
type Verdict struct {
	// Duplicate: the batch was appended before, at FirstOffset..LastOffset;
	// answer with those offsets and do not append.
	Duplicate   bool
	FirstOffset int64
	LastOffset  int64
	// LogAppendTime is the duplicate's append time when the log stamped it
	// with one, -1 otherwise.
	LogAppendTime int64
	// MaxTimestamp is the largest timestamp of the duplicate's first write.
	MaxTimestamp int64
}

// State is the producer state of one partition. Not safe for concurrent use:
// the partition's owner holds it.
type State struct {
	entries map[int64]*Entry
	// open holds the entries with an open transaction (TxnFirstOffset >=
	// 0), so that the last stable offset, asked for on every fetch and
	// high-watermark move, costs the open transactions rather than every
	// producer the partition has seen.
	open map[int64]*Entry
}

// New returns an empty state.
func New() *State { return &State{entries: map[int64]*Entry{}, open: map[int64]*Entry{}} }

// Get returns a copy of one producer's entry.
func (s *State) Get(pid int64) (Entry, bool) {
	e, ok := s.entries[pid]
	if !ok {
		return Entry{}, false
	}
	c := *e
	c.Batches = append([]Appended(nil), e.Batches...)
	return c, true
}

// Check decides what to do with a batch the leader is asked to append:
// a duplicate of one of the last Window batches (the same sequences, both
// transactional or both not) is answered with its original offsets; an
// older epoch is INVALID_PRODUCER_EPOCH; a sequence that is not the next
// expected one is OUT_OF_ORDER_SEQUENCE_NUMBER; a batch that is not
// transactional from a producer with a transaction open here is
// INVALID_TXN_STATE, as in Kafka (it would join no transaction, and at a
// higher epoch it would fence the transaction's own marker, leaving it
// open for good). Batches without a producer id always pass.
func (s *State) Check(b Batch) (Verdict, error) {
	v, err := s.check(b)
	if err != nil || v.Duplicate {
		return v, err
	}
	if e := s.entries[b.ProducerID]; e != nil && !b.Transactional && e.TxnFirstOffset >= 0 {
		return Verdict{}, errs.Errorf(errs.InvalidTxnState, "producer %d has a transaction open at offset %d: its batches must be transactional until the transaction ends", b.ProducerID, e.TxnFirstOffset)
	}
	return v, nil
}

func (s *State) check(b Batch) (Verdict, error) {
	if b.ProducerID == NoProducer {
		return Verdict{}, nil
	}
	if b.FirstSeq < 0 || b.Records <= 0 {
		return Verdict{}, errs.Errorf(errs.InvalidRecord, "producer %d: base sequence %d with %d records", b.ProducerID, b.FirstSeq, b.Records)
	}
	e, ok := s.entries[b.ProducerID]
	if !ok {
		// Unknown here (new, or its state expired or was cut away): it
		// starts at sequence 0, else UNKNOWN_PRODUCER_ID, as Kafka answered
		// before KIP-360. Kafka now takes any sequence, but then a
		// pipelined batch could overtake an earlier one refused before its
		// append (throttled, or too few replicas): the later one would
		// start the producer here and the earlier one, resent, could only
		// follow it. Refused, the client resends in order under a fresh
		// producer id.
		if b.FirstSeq != 0 {
			return Verdict{}, errs.Errorf(errs.UnknownProducerID, "producer %d is not known here (new, or forgotten after --producer-id-expiration): its first batch must start at sequence 0, got %d", b.ProducerID, b.FirstSeq)
		}
		return Verdict{}, nil
	}
	switch {
	case b.Epoch < e.Epoch:
		return Verdict{}, errs.Errorf(errs.InvalidProducerEpoch, "producer %d: epoch %d is older than the current %d", b.ProducerID, b.Epoch, e.Epoch)
	case b.Epoch > e.Epoch:
		if b.FirstSeq != 0 {
			return Verdict{}, errs.Errorf(errs.OutOfOrderSequenceNumber, "producer %d: new epoch %d must start at sequence 0, got %d", b.ProducerID, b.Epoch, b.FirstSeq)
		}
		return Verdict{}, nil
	}
	last := b.LastSeq()
	for _, a := range e.Batches {
		if a.FirstSeq == b.FirstSeq && a.LastSeq == last && (a.Kind == KindUnknown || a.Kind == kindOf(b)) {
			v := Verdict{Duplicate: true, FirstOffset: a.FirstOffset, LastOffset: a.LastOffset, LogAppendTime: -1, MaxTimestamp: a.Timestamp}
			if a.LogAppendTime {
				v.LogAppendTime = a.Timestamp
			}
			return v, nil
		}
	}
	if len(e.Batches) == 0 {
		if e.EpochFromMarker && b.FirstSeq != 0 {
			return Verdict{}, errs.Errorf(errs.OutOfOrderSequenceNumber, "producer %d: epoch %d began with a transaction marker; its first batch must start at sequence 0, got %d", b.ProducerID, b.Epoch, b.FirstSeq)
		}
		// Epoch known but no batch of it remembered (its batches were
		// truncated away): the producer's retries continue its sequence.
		return Verdict{}, nil
	}
	if want := addSeq(e.Batches[len(e.Batches)-1].LastSeq, 1); b.FirstSeq != want {
		return Verdict{}, errs.Errorf(errs.OutOfOrderSequenceNumber, "producer %d epoch %d: expected sequence %d, got %d", b.ProducerID, b.Epoch, want, b.FirstSeq)
	}
	return Verdict{}, nil
}

// Append records a batch that is now in the log at firstOffset..lastOffset.
func (s *State) Append(b Batch, firstOffset, lastOffset, timestamp int64) {
	if b.ProducerID == NoProducer {
		return
	}
	e := s.entry(b.ProducerID)
	if b.Epoch != e.Epoch {
		e.Epoch = b.Epoch
		e.Batches = e.Batches[:0]
		e.EpochFromMarker = false
	}
	e.Batches = append(e.Batches, Appended{FirstSeq: b.FirstSeq, LastSeq: b.LastSeq(), FirstOffset: firstOffset, LastOffset: lastOffset, Timestamp: timestamp, Kind: kindOf(b), LogAppendTime: b.LogAppendTime})
	if len(e.Batches) > Window {
		e.Batches = append(e.Batches[:0], e.Batches[len(e.Batches)-Window:]...)
	}
	e.LastTimestamp = timestamp
	e.written = true
	if b.Transactional && e.TxnFirstOffset < 0 {
		e.TxnFirstOffset = firstOffset
		s.open[b.ProducerID] = e
	}
}

// Marker records a transaction commit or abort marker written at offset.
// It ends the producer's open transaction and returns where it began (-1 if
// none was open), which an abort adds to the aborted-transaction index.
func (s *State) Marker(pid int64, epoch int16, coordinatorEpoch int32, offset, timestamp int64) (txnFirstOffset int64) {
	e := s.entry(pid)
	if epoch > e.Epoch {
		e.Epoch = epoch
		e.Batches = e.Batches[:0]
		e.EpochFromMarker, e.MarkerOffset = true, offset
	}
	first := e.TxnFirstOffset
	e.TxnFirstOffset = -1
	delete(s.open, pid)
	e.CoordinatorEpoch = coordinatorEpoch
	e.LastTimestamp = timestamp
	e.written = true
	return first
}

// Expire forgets the producers without an open transaction that wrote
// nothing (no batch, no marker) for maxAge before now, and answers how
// many: Kafka's producer.id.expiration.ms. Their batches are then no longer
// recognised, so a retry sent after that is written again, and a new
// sequence from them is accepted as from a new producer. Times are the
// caller's clock at each call (a record's timestamp is its client's): an
// entry counts as written at the first call after its last write, and
// after Restore at the first call.
func (s *State) Expire(now, maxAge int64) int {
	n := 0
	for pid, e := range s.entries {
		switch {
		case e.written || e.seen == 0:
			e.written, e.seen = false, now
		case e.TxnFirstOffset < 0 && now-e.seen >= maxAge:
			delete(s.entries, pid)
			n++
		}
	}
	return n
}

func (s *State) entry(pid int64) *Entry {
	e, ok := s.entries[pid]
	if !ok {
		e = &Entry{Epoch: -1, TxnFirstOffset: -1}
		s.entries[pid] = e
	}
	return e
}

// FirstUnstableOffset is the first offset of the oldest open transaction, or
// -1 when none is open: the last stable offset is min(this, HW).
func (s *State) FirstUnstableOffset() int64 {
	first := int64(-1)
	for _, e := range s.open {
		if e.TxnFirstOffset >= 0 && (first < 0 || e.TxnFirstOffset < first) {
			first = e.TxnFirstOffset
		}
	}
	return first
}

// TruncateTo forgets batches at or above offset (a follower that truncated
// its log; its caller replays the log instead when a marker is cut, but
// for offset 0, the whole log). A transaction that began at or after
// offset is no longer open. An epoch a marker below offset began, whose
// batches were all cut, is left as replaying the log would leave it: no
// batch known, the next starting at sequence 0; when its oldest batch
// known was not its first, what is below the cut is not known here, and
// the producer's next sequence is taken as it comes. Producers left with
// nothing to remember are removed.
func (s *State) TruncateTo(offset int64) {
	for pid, e := range s.entries {
		had, oldest := len(e.Batches), int32(-1)
		if had > 0 {
			oldest = e.Batches[0].FirstSeq
		}
		kept := e.Batches[:0]
		for _, a := range e.Batches {
			if a.LastOffset < offset {
				kept = append(kept, a)
			}
		}
		e.Batches = kept
		if e.EpochFromMarker && (e.MarkerOffset >= offset || had > 0 && len(kept) == 0 && oldest != 0) {
			e.EpochFromMarker = false
		}
		if e.TxnFirstOffset >= offset {
			e.TxnFirstOffset = -1
			delete(s.open, pid)
		}
		if len(e.Batches) == 0 && e.TxnFirstOffset < 0 && !e.EpochFromMarker {
			delete(s.entries, pid)
		}
	}
}

type snapshot struct {
	Version   int              `json:"version"`
	Producers map[int64]*Entry `json:"producers"`
}

// Snapshot encodes the state; Restore reads it back.
func (s *State) Snapshot() []byte {
	b, _ := json.Marshal(snapshot{Version: 1, Producers: s.entries}) // maps of plain structs always marshal
	return b
}

// Restore returns the state encoded by Snapshot.
func Restore(data []byte) (*State, error) {
	var snap snapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return nil, errs.Errorf(errs.KafkaStorageError, "producer snapshot: %v", err)
	}
	if snap.Version != 1 {
		return nil, errs.Errorf(errs.KafkaStorageError, "producer snapshot version %d unknown", snap.Version)
	}
	s := &State{entries: snap.Producers, open: map[int64]*Entry{}}
	if s.entries == nil {
		s.entries = map[int64]*Entry{}
	}
	for pid, e := range s.entries {
		if e == nil {
			return nil, errs.Errorf(errs.KafkaStorageError, "producer snapshot: producer %d has no state", pid)
		}
		if e.TxnFirstOffset >= 0 {
			s.open[pid] = e
		}
	}
	return s, nil
}

// IDs lists the known producer ids, sorted.
func (s *State) IDs() []int64 {
	out := make([]int64, 0, len(s.entries))
	for pid := range s.entries {
		out = append(out, pid)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Description is one producer's row in DescribeProducers, as Kafka's
// kafka-transactions.sh describe-producers shows it.
type Description struct {
	ProducerID int64
	Epoch      int16
	// LastSequence is the sequence of the producer's last batch of its
	// epoch, -1 when none is known (a new epoch a marker began).
	LastSequence int32
	// LastTimestamp is the timestamp of its last batch or marker.
	LastTimestamp    int64
	CoordinatorEpoch int32
	// TxnStartOffset is the first offset of its open transaction here, -1
	// when none is open: the oldest one is the last stable offset.
	TxnStartOffset int64
}

// Describe answers every known producer, by producer id.
func (s *State) Describe() []Description {
	out := make([]Description, 0, len(s.entries))
	for _, pid := range s.IDs() {
		e := s.entries[pid]
		last := int32(-1)
		if n := len(e.Batches); n > 0 {
			last = e.Batches[n-1].LastSeq
		}
		out = append(out, Description{ProducerID: pid, Epoch: e.Epoch, LastSequence: last, LastTimestamp: e.LastTimestamp,
			CoordinatorEpoch: e.CoordinatorEpoch, TxnStartOffset: e.TxnFirstOffset})
	}
	return out
}
