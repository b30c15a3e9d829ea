package metadata

import (
	"math"
	"unicode/utf16"

	controllerv1 "skein/gen/skein/controller/v1"
)

// The internal topics and the coordinators that own their partitions.
const (
	// ConsumerOffsetsTopic holds committed offsets and group state; the group
	// coordinator owning partition p owns every group id hashing to p.
	ConsumerOffsetsTopic = "__consumer_offsets"
	// TransactionStateTopic holds transaction state; the transaction
	// coordinator owning partition p owns every transactional id hashing to p.
	TransactionStateTopic = "__transaction_state"
)

// InternalTopic names the internal topic of a coordinator kind.
func InternalTopic(kind controllerv1.CoordinatorKind) (string, bool) {
	switch kind {
	case controllerv1.CoordinatorKind_COORDINATOR_KIND_GROUP:
		return ConsumerOffsetsTopic, true
	case controllerv1.CoordinatorKind_COORDINATOR_KIND_TRANSACTION:
		return TransactionStateTopic, true
	}
	return "", false
}

// IsInternalTopic reports whether name is one of the internal topics.
func IsInternalTopic(name string) bool {
	return name == ConsumerOffsetsTopic || name == TransactionStateTopic
}

// JavaStringHashCode is Java's String.hashCode: s as UTF-16 code units,
// h = 31*h + c with int32 overflow. Kafka hashes group and transactional ids
// with it, and so do we, so an id maps to the partition a Kafka operator expects.
func JavaStringHashCode(s string) int32 {
	var h int32
	for _, c := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(c)
	}
	return h
}

// CoordinatorPartition is Kafka's partitionFor:
// Utils.abs(key.hashCode) % partitions, where Utils.abs(MinInt32) is 0.
// It answers -1 when partitions < 1.
func CoordinatorPartition(key string, partitions int32) int32 {
	if partitions < 1 {
		return -1
	}
	h := JavaStringHashCode(key)
	switch {
	case h == math.MinInt32:
		h = 0
	case h < 0:
		h = -h
	}
	return h % partitions
}
