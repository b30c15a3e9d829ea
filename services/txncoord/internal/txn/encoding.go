package txn

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"skein/libs/errs"
)

// keyVersion starts every key (Kafka's transaction log key version);
// valueVersion every value this package writes.
const (
	keyVersion   int16 = 0
	valueVersion int16 = 1
)

// noTime is a time field's value for the zero time (none).
const noTime int64 = -1

// validate checks that r is a state this package could have written.
func validate(r Record) error {
	bad := func(format string, args ...any) error {
		return errs.Errorf(errs.CorruptMessage, "transactional id %q: %s", r.TransactionalID, fmt.Sprintf(format, args...))
	}
	if err := validString("transactional id", r.TransactionalID); err != nil {
		return errs.Errorf(errs.CorruptMessage, "%v", err)
	}
	if !slices.Contains(states, r.State) {
		return bad("unknown state %q", r.State)
	}
	if r.State == Dead {
		return nil // a tombstone: only the key is written
	}
	if r.ProducerID < 0 || r.ProducerEpoch < 0 {
		return bad("producer id %d epoch %d", r.ProducerID, r.ProducerEpoch)
	}
	if (r.State == Empty || r.State == Ongoing) && r.ProducerEpoch > MaxHandedEpoch {
		return bad("epoch %d in %s", r.ProducerEpoch, r.State)
	}
	if (r.PrevProducerID == NoProducerID) != (r.PrevProducerEpoch == NoEpoch) || r.PrevProducerID < NoProducerID || r.PrevProducerEpoch < NoEpoch {
		return bad("previous producer id %d epoch %d", r.PrevProducerID, r.PrevProducerEpoch)
	}
	if r.NextProducerID != NoProducerID && (!r.State.preparing() || r.NextProducerID < 0 || r.NextProducerID == r.ProducerID) {
		return bad("next producer id %d in %s (producer id %d)", r.NextProducerID, r.State, r.ProducerID)
	}
	if r.Timeout < time.Millisecond || r.Timeout%time.Millisecond != 0 || r.Timeout > math.MaxInt32*time.Millisecond {
		return bad("timeout %v", r.Timeout)
	}
	for _, t := range []time.Time{r.StartTime, r.UpdateTime} {
		if !t.IsZero() && !t.Equal(ms(t)) {
			return bad("time %v is not in whole milliseconds", t)
		}
	}
	for i, p := range r.Partitions {
		if err := validString("topic name", p.Topic); err != nil || p.Partition < 0 {
			return bad("partition %q:%d", p.Topic, p.Partition)
		}
		if i > 0 && r.Partitions[i-1].compare(p) >= 0 {
			return bad("partitions not sorted or repeated at %s:%d", p.Topic, p.Partition)
		}
	}
	for i, g := range r.Groups {
		if err := validString("group id", g); err != nil {
			return bad("%v", err)
		}
		if i > 0 && r.Groups[i-1] >= g {
			return bad("groups not sorted or repeated at %q", g)
		}
	}
	if r.Partitions != nil && len(r.Partitions) == 0 || r.Groups != nil && len(r.Groups) == 0 {
		return bad("an empty list that is not nil")
	}
	empty := len(r.Partitions) == 0 && len(r.Groups) == 0
	switch r.State {
	case Empty:
		if !empty || !r.StartTime.IsZero() {
			return bad("EMPTY with partitions, groups or a start time")
		}
	case CompleteCommit, CompleteAbort:
		if !empty {
			return bad("%s with partitions or groups", r.State)
		}
	case Ongoing:
		if empty || r.StartTime.IsZero() || r.hasPrev() {
			return bad("ONGOING needs partitions or groups and a start time, and no previous producer")
		}
	case PrepareCommit, PrepareAbort, PrepareEpochFence:
		if r.StartTime.IsZero() {
			return bad("%s without a start time", r.State)
		}
	}
	return nil
}

// Encode answers the key and value of r's __transaction_state record; the
// value is nil (a tombstone) for DEAD. It refuses (CORRUPT_MESSAGE) a
// record this package would never write.
//
//	key    int16 version (0) | transactional_id STRING
//	value  int16 version (1) | producer_id int64 | producer_epoch int16 |
//	       prev_producer_id int64 | prev_producer_epoch int16 |
//	       next_producer_id int64 | timeout_ms int32 | state int8 |
//	       start_time_ms int64 | update_time_ms int64 |
//	       topics int32 × (topic STRING | partitions int32 × int32) |
//	       groups int32 × STRING
//
// Integers are big-endian; a STRING is an int16 byte length and the bytes;
// a time is milliseconds since the Unix epoch, -1 for none; states are
// numbered as in Kafka (EMPTY 0, ONGOING 1, PREPARE_COMMIT 2,
// PREPARE_ABORT 3, COMPLETE_COMMIT 4, COMPLETE_ABORT 5, DEAD 6,
// PREPARE_EPOCH_FENCE 7). Partitions are grouped by topic in order.
func Encode(r Record) (key, value []byte, err error) {
	if err := validate(r); err != nil {
		return nil, nil, err
	}
	key = EncodeKey(r.TransactionalID)
	if r.State == Dead {
		return key, nil, nil
	}
	b := make([]byte, 0, 64+len(r.Partitions)*8+len(r.Groups)*16)
	b = binary.BigEndian.AppendUint16(b, uint16(valueVersion))
	b = binary.BigEndian.AppendUint64(b, uint64(r.ProducerID))
	b = binary.BigEndian.AppendUint16(b, uint16(r.ProducerEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(r.PrevProducerID))
	b = binary.BigEndian.AppendUint16(b, uint16(r.PrevProducerEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(r.NextProducerID))
	b = binary.BigEndian.AppendUint32(b, uint32(r.Timeout/time.Millisecond))
	b = append(b, byte(slices.Index(states, r.State)))
	b = binary.BigEndian.AppendUint64(b, uint64(encodeTime(r.StartTime)))
	b = binary.BigEndian.AppendUint64(b, uint64(encodeTime(r.UpdateTime)))
	byTopic := map[string][]int32{}
	for _, p := range r.Partitions {
		byTopic[p.Topic] = append(byTopic[p.Topic], p.Partition)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(byTopic)))
	for _, topic := range slices.Sorted(maps.Keys(byTopic)) {
		b = appendString(b, topic)
		b = binary.BigEndian.AppendUint32(b, uint32(len(byTopic[topic])))
		for _, p := range byTopic[topic] {
			b = binary.BigEndian.AppendUint32(b, uint32(p))
		}
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Groups)))
	for _, g := range r.Groups {
		b = appendString(b, g)
	}
	return key, b, nil
}

// EncodeKey answers the record key of a transactional id.
func EncodeKey(transactionalID string) []byte {
	b := binary.BigEndian.AppendUint16(make([]byte, 0, 4+len(transactionalID)), uint16(keyVersion))
	return appendString(b, transactionalID)
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func encodeTime(t time.Time) int64 {
	if t.IsZero() {
		return noTime
	}
	return t.UnixMilli()
}

func decodeTime(v int64) time.Time {
	if v == noTime {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// reader reads big-endian fields; the first short read sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = fmt.Errorf("%d bytes wanted, %d left", n, len(r.b))
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u8() uint8 {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if b := r.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

func (r *reader) str() string {
	n := int16(r.u16())
	if r.err == nil && n < 0 {
		r.err = fmt.Errorf("string length %d", n)
	}
	return string(r.take(int(n)))
}

// count reads an int32 count of items each at least min bytes long, and
// refuses one the bytes left cannot hold (so no huge allocation).
func (r *reader) count(min int) int {
	n := int32(r.u32())
	if r.err == nil && (n < 0 || int(n) > len(r.b)/min) {
		r.err = fmt.Errorf("count %d with %d bytes left", n, len(r.b))
		return 0
	}
	return int(n)
}

// DecodeKey answers the transactional id of a record key.
func DecodeKey(key []byte) (string, error) {
	r := &reader{b: key}
	v := int16(r.u16())
	if r.err == nil && v != keyVersion {
		return "", errs.Errorf(errs.CorruptMessage, "key version %d", v)
	}
	id := r.str()
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%d bytes after the key", len(r.b))
	}
	if r.err != nil {
		return "", errs.Errorf(errs.CorruptMessage, "transaction log key: %v", r.err)
	}
	if err := validString("transactional id", id); err != nil {
		return "", errs.Errorf(errs.CorruptMessage, "transaction log key: %v", err)
	}
	return id, nil
}

// Decode answers the state a record holds. A nil value (a tombstone)
// answers a DEAD record with only the transactional id set. Bytes that do
// not parse, an unknown version and a state this package would never write
// are CORRUPT_MESSAGE, never a panic.
func Decode(key, value []byte) (Record, error) {
	id, err := DecodeKey(key)
	if err != nil {
		return Record{}, err
	}
	if value == nil {
		return Record{TransactionalID: id, ProducerID: NoProducerID, ProducerEpoch: NoEpoch, PrevProducerID: NoProducerID,
			PrevProducerEpoch: NoEpoch, NextProducerID: NoProducerID, State: Dead}, nil
	}
	r := &reader{b: value}
	if v := int16(r.u16()); r.err == nil && v != valueVersion {
		return Record{}, errs.Errorf(errs.CorruptMessage, "transactional id %q: value version %d", id, v)
	}
	rec := Record{TransactionalID: id}
	rec.ProducerID = int64(r.u64())
	rec.ProducerEpoch = int16(r.u16())
	rec.PrevProducerID = int64(r.u64())
	rec.PrevProducerEpoch = int16(r.u16())
	rec.NextProducerID = int64(r.u64())
	rec.Timeout = time.Duration(int32(r.u32())) * time.Millisecond
	if s := int(r.u8()); s < len(states) {
		rec.State = states[s]
	} else {
		rec.State = State(fmt.Sprintf("state %d", s))
	}
	rec.StartTime = decodeTime(int64(r.u64()))
	rec.UpdateTime = decodeTime(int64(r.u64()))
	for range r.count(6) {
		topic := r.str()
		n := r.count(4)
		if r.err == nil && n == 0 {
			r.err = fmt.Errorf("topic %q with no partitions", topic)
		}
		for range n {
			rec.Partitions = append(rec.Partitions, TopicPartition{Topic: topic, Partition: int32(r.u32())})
		}
	}
	for range r.count(2) {
		rec.Groups = append(rec.Groups, r.str())
	}
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%d bytes after the value", len(r.b))
	}
	if r.err != nil {
		return Record{}, errs.Errorf(errs.CorruptMessage, "transactional id %q: value: %v", id, r.err)
	}
	if rec.State == Dead {
		return Record{}, errs.Errorf(errs.CorruptMessage, "transactional id %q: a DEAD value (DEAD is a tombstone)", id)
	}
	if err := validate(rec); err != nil {
		return Record{}, err
	}
	return rec, nil
}

// Replay rebuilds the transactional ids of __transaction_state partitions
// from their records, read from the start in log order: the latest record
// of an id is its state, a tombstone deletes it.
type Replay struct {
	cfg  Config
	recs map[string]Record
}

// NewReplay answers an empty Replay.
func NewReplay(cfg Config) *Replay { return &Replay{cfg: cfg, recs: map[string]Record{}} }

// Apply takes the next record of the log. A record that does not decode is
// skipped (the id keeps its previous state) and its error answered, for
// the shell to report.
func (p *Replay) Apply(key, value []byte) error {
	rec, err := Decode(key, value)
	if err != nil {
		return err
	}
	if rec.State == Dead {
		delete(p.recs, rec.TransactionalID)
		return nil
	}
	p.recs[rec.TransactionalID] = rec
	return nil
}

// Txns answers a Txn per live transactional id, by id. Call Resume on each.
func (p *Replay) Txns() []*Txn {
	out := make([]*Txn, 0, len(p.recs))
	for _, id := range slices.Sorted(maps.Keys(p.recs)) {
		t, err := Load(p.cfg, p.recs[id])
		if err != nil {
			continue // cannot happen: Decode validated it
		}
		out = append(out, t)
	}
	return out
}
