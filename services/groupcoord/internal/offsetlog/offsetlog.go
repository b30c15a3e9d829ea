package offsetlog

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"time"

	"skein/libs/errs"
	"skein/services/groupcoord/internal/assign"
	"skein/services/groupcoord/internal/delivery"
	"skein/services/groupcoord/internal/group"
)

// Record types, the int16 at the start of a key.
const (
	typeOffsetV0 int16 = 0
	typeOffset   int16 = 1
	typeGroup    int16 = 2
	typeOwner    int16 = 3
	typePending  int16 = 4
	typeDelivery int16 = 5
	typeConfig   int16 = 6
)

// valueVersion is the version written at the start of every value.
const valueVersion int16 = 1

// MaxMetadata is the most bytes of metadata an offset commit may carry
// (Kafka's offset.metadata.max.bytes).
const MaxMetadata = 4096

// Kind is the kind of a record.
type Kind int8

// The kinds of records.
const (
	KindOffset Kind = iota + 1
	KindGroup
	KindOwner
	KindPending
	KindDelivery
	KindConfig
)

// Key is a decoded record key. Offset and delivery keys have Group, Topic
// and Partition; pending keys those and ProducerID; group and config keys
// Group; owner keys Partition (of __consumer_offsets).
type Key struct {
	Kind       Kind
	Group      string
	ProducerID int64
	Topic      string
	Partition  int32
}

// Owner is the value of an owner key: the coordinator that took the
// partition over at this epoch wrote it as its first record, to fence
// writes of older epochs.
type Owner struct {
	Coordinator int32
	Epoch       int32
	Time        time.Time // millisecond precision
}

// OwnerKey encodes the owner key of a __consumer_offsets partition.
func OwnerKey(partition int32) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(typeOwner))
	return binary.BigEndian.AppendUint32(b, uint32(partition))
}

// EncodeOwner encodes an owner value.
func EncodeOwner(o Owner) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(valueVersion))
	b = binary.BigEndian.AppendUint32(b, uint32(o.Coordinator))
	b = binary.BigEndian.AppendUint32(b, uint32(o.Epoch))
	return binary.BigEndian.AppendUint64(b, uint64(o.Time.UnixMilli()))
}

// DecodeOwner decodes an owner value.
func DecodeOwner(b []byte) (Owner, error) {
	r := reader{b: b}
	if v := r.int16(); r.err == nil && v != valueVersion {
		return Owner{}, corrupt("owner value of unknown version %d", v)
	}
	o := Owner{Coordinator: r.int32(), Epoch: r.int32()}
	o.Time = time.UnixMilli(r.int64())
	return o, r.done()
}

// Encode encodes k (the inverse of DecodeKey).
func (k Key) Encode() []byte {
	switch k.Kind {
	case KindOffset:
		return OffsetKey(k.Group, k.Topic, k.Partition)
	case KindOwner:
		return OwnerKey(k.Partition)
	case KindPending:
		return PendingKey(k.Group, k.ProducerID, k.Topic, k.Partition)
	case KindDelivery:
		return DeliveryKey(k.Group, k.Topic, k.Partition)
	case KindConfig:
		return ConfigKey(k.Group)
	}
	return GroupKey(k.Group)
}

// Offset is a committed offset: the value of an offset key.
type Offset = group.Offset

// Pending is an offset a transaction committed, not the group's yet: the
// value of a pending key.
type Pending = group.PendingOffset

// GroupKey encodes the group metadata key of a group.
func GroupKey(groupID string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(typeGroup))
	return appendString(b, groupID)
}

// OffsetKey encodes the offset key of (group, topic, partition).
func OffsetKey(groupID, topic string, partition int32) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(typeOffset))
	b = appendString(b, groupID)
	b = appendString(b, topic)
	return binary.BigEndian.AppendUint32(b, uint32(partition))
}

// PendingKey encodes the key of a transaction's pending offset of
// (group, producer id, topic, partition).
func PendingKey(groupID string, producerID int64, topic string, partition int32) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(typePending))
	b = appendString(b, groupID)
	b = binary.BigEndian.AppendUint64(b, uint64(producerID))
	b = appendString(b, topic)
	return binary.BigEndian.AppendUint32(b, uint32(partition))
}

// DeliveryKey encodes the delivery key of (group, topic, partition): the
// failed deliveries of its records.
func DeliveryKey(groupID, topic string, partition int32) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(typeDelivery))
	b = appendString(b, groupID)
	b = appendString(b, topic)
	return binary.BigEndian.AppendUint32(b, uint32(partition))
}

// ConfigKey encodes the config key of a group.
func ConfigKey(groupID string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(typeConfig))
	return appendString(b, groupID)
}

// DecodeKey decodes a record key.
func DecodeKey(b []byte) (Key, error) {
	r := reader{b: b}
	typ := r.int16()
	var k Key
	switch typ {
	case typeOffsetV0, typeOffset:
		k.Kind = KindOffset
		k.Group, k.Topic, k.Partition = r.string(), r.string(), r.int32()
		if r.err == nil && k.Topic == "" {
			return Key{}, corrupt("offset key with an empty topic")
		}
	case typeGroup:
		k.Kind = KindGroup
		k.Group = r.string()
	case typeOwner:
		k.Kind = KindOwner
		k.Partition = r.int32()
	case typePending:
		k.Kind = KindPending
		k.Group, k.ProducerID, k.Topic, k.Partition = r.string(), r.int64(), r.string(), r.int32()
		if r.err == nil && k.Topic == "" {
			return Key{}, corrupt("pending offset key with an empty topic")
		}
		if r.err == nil && k.ProducerID < 0 {
			return Key{}, corrupt("pending offset key with producer id %d", k.ProducerID)
		}
	case typeDelivery:
		k.Kind = KindDelivery
		k.Group, k.Topic, k.Partition = r.string(), r.string(), r.int32()
		if r.err == nil && k.Topic == "" {
			return Key{}, corrupt("delivery key with an empty topic")
		}
	case typeConfig:
		k.Kind = KindConfig
		k.Group = r.string()
	default:
		if r.err == nil {
			return Key{}, corrupt("key of unknown type %d", typ)
		}
	}
	if err := r.done(); err != nil {
		return Key{}, err
	}
	return k, nil
}

// EncodeOffset encodes an offset value.
func EncodeOffset(o Offset) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(valueVersion))
	b = binary.BigEndian.AppendUint64(b, uint64(o.Offset))
	b = binary.BigEndian.AppendUint32(b, uint32(o.LeaderEpoch))
	b = appendString(b, o.Metadata)
	return binary.BigEndian.AppendUint64(b, uint64(o.CommitTime.UnixMilli()))
}

// DecodeOffset decodes an offset value.
func DecodeOffset(b []byte) (Offset, error) {
	r := reader{b: b}
	if v := r.int16(); r.err == nil && v != valueVersion {
		return Offset{}, corrupt("offset value of unknown version %d", v)
	}
	o := Offset{Offset: r.int64(), LeaderEpoch: r.int32(), Metadata: r.string()}
	o.CommitTime = time.UnixMilli(r.int64())
	if err := r.done(); err != nil {
		return Offset{}, err
	}
	if o.Offset < 0 {
		return Offset{}, corrupt("negative committed offset %d", o.Offset)
	}
	return o, nil
}

// EncodePending encodes a pending offset value.
func EncodePending(p Pending) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(valueVersion))
	b = binary.BigEndian.AppendUint16(b, uint16(p.Epoch))
	b = binary.BigEndian.AppendUint64(b, uint64(p.Offset.Offset))
	b = binary.BigEndian.AppendUint32(b, uint32(p.LeaderEpoch))
	b = appendString(b, p.Metadata)
	return binary.BigEndian.AppendUint64(b, uint64(p.CommitTime.UnixMilli()))
}

// DecodePending decodes a pending offset value.
func DecodePending(b []byte) (Pending, error) {
	r := reader{b: b}
	if v := r.int16(); r.err == nil && v != valueVersion {
		return Pending{}, corrupt("pending offset value of unknown version %d", v)
	}
	p := Pending{Epoch: r.int16()}
	p.Offset.Offset, p.LeaderEpoch, p.Metadata = r.int64(), r.int32(), r.string()
	p.CommitTime = time.UnixMilli(r.int64())
	if err := r.done(); err != nil {
		return Pending{}, err
	}
	if p.Epoch < 0 {
		return Pending{}, corrupt("pending offset of negative producer epoch %d", p.Epoch)
	}
	if p.Offset.Offset < 0 {
		return Pending{}, corrupt("negative pending offset %d", p.Offset.Offset)
	}
	return p, nil
}

// EncodeDeliveries encodes a delivery value: the entries of one partition.
func EncodeDeliveries(p delivery.Partition) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(valueVersion))
	b = binary.BigEndian.AppendUint32(b, uint32(len(p)))
	for _, e := range p {
		b = binary.BigEndian.AppendUint64(b, uint64(e.Offset))
		b = binary.BigEndian.AppendUint32(b, uint32(e.Nacks))
		b = append(b, byte(e.State))
		b = binary.BigEndian.AppendUint64(b, uint64(e.DLQFrom))
		b = appendString(b, e.Reason)
	}
	return b
}

// DecodeDeliveries decodes a delivery value.
func DecodeDeliveries(b []byte) (delivery.Partition, error) {
	r := reader{b: b}
	if v := r.int16(); r.err == nil && v != valueVersion {
		return nil, corrupt("delivery value of unknown version %d", v)
	}
	n := r.int32()
	if r.err == nil && (n < 0 || int(n) > len(r.b)/23) {
		return nil, corrupt("delivery value of %d entries in %d bytes", n, len(r.b))
	}
	p := make(delivery.Partition, 0, max(n, 0))
	last := int64(-1)
	for i := int32(0); i < n && r.err == nil; i++ {
		e := delivery.Entry{Offset: r.int64(), Nacks: r.int32()}
		if st := r.take(1); st != nil {
			e.State = delivery.State(st[0])
		}
		e.DLQFrom, e.Reason = r.int64(), r.string()
		if r.err == nil {
			switch {
			case e.Offset <= last:
				return nil, corrupt("delivery entries out of order: %d after %d", e.Offset, last)
			case e.Nacks < 1:
				return nil, corrupt("delivery entry of offset %d with %d nacks", e.Offset, e.Nacks)
			case e.State != delivery.Nacked && e.State != delivery.DeadLettering:
				return nil, corrupt("delivery entry of offset %d in unknown state %d", e.Offset, e.State)
			}
		}
		last = e.Offset
		p = append(p, e)
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return p, nil
}

// EncodeConfig encodes a config value: a group's settings as a JSON object
// of strings (only the keys set).
func EncodeConfig(m map[string]string) []byte {
	body, err := json.Marshal(m)
	if err != nil {
		panic("offsetlog: " + err.Error()) // a map of strings always marshals
	}
	return append(binary.BigEndian.AppendUint16(nil, uint16(valueVersion)), body...)
}

// DecodeConfig decodes a config value.
func DecodeConfig(b []byte) (map[string]string, error) {
	r := reader{b: b}
	if v := r.int16(); r.err != nil {
		return nil, r.err
	} else if v != valueVersion {
		return nil, corrupt("config value of unknown version %d", v)
	}
	m := map[string]string{}
	if err := json.Unmarshal(r.b, &m); err != nil {
		return nil, corrupt("config value: %v", err)
	}
	return m, nil
}

// groupJSON is the group value's JSON: the group.Snapshot with stable field
// names and durations in milliseconds, independent of Go field names.
type groupJSON struct {
	Epoch           int32            `json:"epoch"`
	AssignmentEpoch int32            `json:"assignment_epoch"`
	Assignor        string           `json:"assignor"`
	Topics          map[string]int32 `json:"topics,omitempty"`
	Members         []memberJSON     `json:"members"`
}

type memberJSON struct {
	ID                 string             `json:"id"`
	InstanceID         string             `json:"instance_id,omitempty"`
	Rack               string             `json:"rack,omitempty"`
	Topics             []string           `json:"topics"`
	Assignor           string             `json:"assignor,omitempty"`
	SessionTimeoutMs   int64              `json:"session_timeout_ms"`
	RebalanceTimeoutMs int64              `json:"rebalance_timeout_ms"`
	Epoch              int32              `json:"epoch"`
	PreviousEpoch      int32              `json:"previous_epoch"`
	StaticLeft         bool               `json:"static_left,omitempty"`
	Assigned           map[string][]int32 `json:"assigned,omitempty"`
	Revoking           map[string][]int32 `json:"revoking,omitempty"`
	Target             map[string][]int32 `json:"target,omitempty"`
}

// EncodeGroup encodes a group metadata value.
func EncodeGroup(s group.Snapshot) []byte {
	g := groupJSON{Epoch: int32(s.Epoch), AssignmentEpoch: int32(s.AssignmentEpoch), Assignor: s.Assignor, Topics: s.Topics,
		Members: make([]memberJSON, 0, len(s.Members))}
	for _, m := range s.Members {
		g.Members = append(g.Members, memberJSON{ID: string(m.ID), InstanceID: m.InstanceID, Rack: m.Rack, Topics: m.Topics,
			Assignor: m.Assignor, SessionTimeoutMs: m.SessionTimeout.Milliseconds(), RebalanceTimeoutMs: m.RebalanceTimeout.Milliseconds(),
			Epoch: int32(m.Epoch), PreviousEpoch: int32(m.PreviousEpoch), StaticLeft: m.StaticLeft,
			Assigned: m.Assigned, Revoking: m.Revoking, Target: m.Target})
	}
	body, err := json.Marshal(g)
	if err != nil {
		// Plain structs of strings, ints and maps of them always marshal.
		panic("offsetlog: " + err.Error())
	}
	return append(binary.BigEndian.AppendUint16(nil, uint16(valueVersion)), body...)
}

// DecodeGroup decodes a group metadata value of group groupID. It checks
// the format only; group.Restore checks the group's invariants.
func DecodeGroup(groupID string, b []byte) (group.Snapshot, error) {
	r := reader{b: b}
	if v := r.int16(); r.err != nil {
		return group.Snapshot{}, r.err
	} else if v != valueVersion {
		return group.Snapshot{}, corrupt("group value of unknown version %d", v)
	}
	var g groupJSON
	if err := json.Unmarshal(r.b, &g); err != nil {
		return group.Snapshot{}, corrupt("group value of %q: %v", groupID, err)
	}
	if g.Topics == nil {
		g.Topics = map[string]int32{}
	}
	s := group.Snapshot{GroupID: groupID, Epoch: group.Epoch(g.Epoch), AssignmentEpoch: group.Epoch(g.AssignmentEpoch),
		Assignor: g.Assignor, Topics: g.Topics, Members: make([]group.MemberSnapshot, 0, len(g.Members))}
	for _, m := range g.Members {
		s.Members = append(s.Members, group.MemberSnapshot{ID: group.MemberID(m.ID), InstanceID: m.InstanceID, Rack: m.Rack,
			Topics: m.Topics, Assignor: m.Assignor, SessionTimeout: millis(m.SessionTimeoutMs), RebalanceTimeout: millis(m.RebalanceTimeoutMs),
			Epoch: group.Epoch(m.Epoch), PreviousEpoch: group.Epoch(m.PreviousEpoch), StaticLeft: m.StaticLeft,
			Assigned: assign.Of(m.Assigned), Revoking: assign.Of(m.Revoking), Target: assign.Of(m.Target)})
	}
	return s, nil
}

func millis(ms int64) time.Duration {
	if ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
		return 0 // group.Restore refuses a non-positive timeout
	}
	return time.Duration(ms) * time.Millisecond
}

func appendString(b []byte, s string) []byte {
	if len(s) > math.MaxInt16 {
		s = s[:math.MaxInt16] // callers bound ids and metadata far below this
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func corrupt(format string, args ...any) error {
	return errs.Errorf(errs.CorruptMessage, "__consumer_offsets record: "+format, args...)
}

// reader reads big-endian fields; the first short read sets err and every
// later read answers zero.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b) < n {
		r.err = corrupt("truncated: want %d bytes, have %d", n, len(r.b))
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) int16() int16 {
	if b := r.take(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *reader) int32() int32 {
	if b := r.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *reader) int64() int64 {
	if b := r.take(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (r *reader) string() string {
	n := r.int16()
	if r.err == nil && n < 0 {
		r.err = corrupt("negative string length %d", n)
	}
	return string(r.take(int(n)))
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) > 0 {
		r.err = corrupt("%d bytes after the last field", len(r.b))
	}
	return r.err
}
