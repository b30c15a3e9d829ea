package checkpoint

import (
	"encoding/binary"
	"errors"
	"strings"

	"skein/libs/errs"
	"skein/libs/record"
)

// Partition names one partition replica on this node.
type Partition struct {
	Topic     string
	Partition int32
}

// Offsets are what a storage node checkpoints per partition replica.
type Offsets struct {
	HighWatermark  record.Offset
	RecoveryPoint  record.Offset // log.State.RecoveryPoint
	LogStartOffset record.Offset // log.State.LogStartOffset
}

// Store is the node-local checkpoint store. Keep it small: the storage node
// is its only user.
type Store interface {
	// SaveOffsets writes the offsets of every partition in the map, in one
	// atomic, durable write; partitions not in the map keep theirs.
	SaveOffsets(offsets map[Partition]Offsets) error
	// LoadOffsets returns every partition's last saved offsets.
	LoadOffsets() (map[Partition]Offsets, error)
	// DeletePartitions forgets partitions' offsets (their replicas were
	// deleted from this node), in one durable write (the files store; the
	// badger one, kept for converting, in writes of a thousand).
	DeletePartitions(ps ...Partition) error

	// Put stores a value under a key, durably.
	Put(key string, value []byte) error
	// Get returns the value of a key and whether it exists.
	Get(key string) ([]byte, bool, error)
	// Delete removes a key; deleting a missing key is not an error.
	Delete(key string) error
	// Keys lists the keys with the prefix, in ascending order.
	Keys(prefix string) ([]string, error)

	Close() error
}

// On-disk encoding (shared by every implementation that persists bytes):
//
//	| kind    | key                                              | value                                   |
//	|---------|--------------------------------------------------|-----------------------------------------|
//	| offsets | 'o' 0x00 topic 0x00 partition (int32 big endian) | version 1 (1 byte), HW, recovery point, |
//	|         |                                                  | log start offset (int64 big endian)     |
//	| generic | 'k' 0x00 key                                     | the bytes as given                      |
const (
	offsetsPrefix = "o\x00"
	genericPrefix = "k\x00"
	offsetsV1     = 1
	offsetsLen    = 1 + 3*8
)

func offsetsKey(p Partition) ([]byte, error) {
	if p.Topic == "" || strings.IndexByte(p.Topic, 0) >= 0 {
		return nil, errs.Errorf(errs.InvalidTopic, "topic name %q cannot be checkpointed", p.Topic)
	}
	k := make([]byte, 0, len(offsetsPrefix)+len(p.Topic)+5)
	k = append(k, offsetsPrefix...)
	k = append(k, p.Topic...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint32(k, uint32(p.Partition)), nil
}

func parseOffsetsKey(k []byte) (Partition, error) {
	rest, ok := strings.CutPrefix(string(k), offsetsPrefix)
	if !ok || len(rest) < 6 || rest[len(rest)-5] != 0 {
		return Partition{}, errCorrupt
	}
	return Partition{
		Topic:     rest[:len(rest)-5],
		Partition: int32(binary.BigEndian.Uint32([]byte(rest[len(rest)-4:]))),
	}, nil
}

func encodeOffsets(o Offsets) []byte {
	v := make([]byte, 1, offsetsLen)
	v[0] = offsetsV1
	v = binary.BigEndian.AppendUint64(v, uint64(o.HighWatermark))
	v = binary.BigEndian.AppendUint64(v, uint64(o.RecoveryPoint))
	return binary.BigEndian.AppendUint64(v, uint64(o.LogStartOffset))
}

var errCorrupt = errors.New("checkpoint: corrupt entry")

func decodeOffsets(v []byte) (Offsets, error) {
	if len(v) != offsetsLen || v[0] != offsetsV1 {
		return Offsets{}, errCorrupt
	}
	return Offsets{
		HighWatermark:  record.Offset(binary.BigEndian.Uint64(v[1:])),
		RecoveryPoint:  record.Offset(binary.BigEndian.Uint64(v[9:])),
		LogStartOffset: record.Offset(binary.BigEndian.Uint64(v[17:])),
	}, nil
}

func genericKey(key string) ([]byte, error) {
	if key == "" {
		return nil, errs.Errorf(errs.InvalidRequest, "empty checkpoint key")
	}
	return append([]byte(genericPrefix), key...), nil
}
