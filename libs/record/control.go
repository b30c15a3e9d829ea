package record

// Control batches carry one control record that marks the end of a
// transaction (Kafka's EndTransactionMarker):
//
//	| part  | field            | type  | notes                      |
//	|-------|------------------|-------|----------------------------|
//	| key   | version          | int16 | 0                          |
//	| key   | type             | int16 | 0 = abort, 1 = commit      |
//	| value | version          | int16 | 0                          |
//	| value | coordinatorEpoch | int32 | the txn coordinator's epoch |

import (
	"encoding/binary"

	"skein/libs/errs"
)

// ControlType is the type field of a control record's key.
type ControlType int16

const (
	ControlAbort  ControlType = 0
	ControlCommit ControlType = 1
)

func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "abort"
	case ControlCommit:
		return "commit"
	}
	return "unknown"
}

// Marker is a decoded transaction marker.
type Marker struct {
	Type             ControlType
	CoordinatorEpoch int32
}

// BuildMarker appends a control batch holding one transaction marker for the
// producer to dst. The base offset is left for the log to assign.
func BuildMarker(dst []byte, producerID int64, producerEpoch int16, m Marker, timestamp int64) (Batch, []byte, error) {
	var key [4]byte
	binary.BigEndian.PutUint16(key[0:], 0)
	binary.BigEndian.PutUint16(key[2:], uint16(m.Type))
	var value [6]byte
	binary.BigEndian.PutUint16(value[0:], 0)
	binary.BigEndian.PutUint32(value[2:], uint32(m.CoordinatorEpoch))
	b := NewBuilder(BatchOptions{
		Transactional: true,
		Control:       true,
		ProducerID:    producerID,
		ProducerEpoch: producerEpoch,
		BaseSequence:  NoSequence,
	})
	b.Append(timestamp, key[:], value[:])
	return b.Build(dst)
}

// ParseControlKey reads the type of a control record from its key. Unknown
// versions are accepted as Kafka does: readers must skip controls they do not
// understand, so only the type is checked when it is known.
func ParseControlKey(key []byte) (ControlType, error) {
	if len(key) < 4 {
		return 0, errs.Errorf(errs.InvalidRecord, "control record key of %d bytes, need 4", len(key))
	}
	return ControlType(binary.BigEndian.Uint16(key[2:])), nil
}

// ParseMarker decodes a transaction marker from a control record.
func ParseMarker(r *Record) (Marker, error) {
	t, err := ParseControlKey(r.Key)
	if err != nil {
		return Marker{}, err
	}
	if t != ControlAbort && t != ControlCommit {
		return Marker{}, errs.Errorf(errs.InvalidRecord, "control type %d is not a transaction marker", t)
	}
	if len(r.Value) < 6 {
		return Marker{}, errs.Errorf(errs.InvalidRecord, "transaction marker value of %d bytes, need 6", len(r.Value))
	}
	if v := int16(binary.BigEndian.Uint16(r.Value)); v < 0 {
		return Marker{}, errs.Errorf(errs.InvalidRecord, "transaction marker version %d", v)
	}
	return Marker{Type: t, CoordinatorEpoch: int32(binary.BigEndian.Uint32(r.Value[2:]))}, nil
}
