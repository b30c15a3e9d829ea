package errs

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"unicode/utf8"
)

// Code is a Kafka-compatible error code. The numbers are the wire values of the
// ErrorCode enum in proto/skein/v1/errors.proto.
type Code int16

// Error is one row of the table. Rows are compared by identity: errors.Is(err,
// errs.NotLeaderOrFollower) is true for any error that wraps that row.
type Error struct {
	Code      Code
	Name      string // Kafka's name, e.g. "NOT_LEADER_OR_FOLLOWER"
	Retriable bool   // a client may retry after refreshing metadata / backing off
	GRPC      GRPCCode
	HTTP      int
	Desc      string
}

func (e *Error) Error() string { return e.Name + ": " + e.Desc }

// The table. Numbers are Kafka's; the gRPC and HTTP statuses follow the
// gateway's error rules (docs/API.md): 400 bad input, 401 not authenticated,
// 403 not authorized, 404 unknown thing, 409 conflict or stale epoch, 503
// when the cluster cannot serve it now.
var (
	UnknownServerError                 = def(-1, "UNKNOWN_SERVER_ERROR", false, GRPCInternal, "the server hit an unexpected error")
	None                               = def(0, "NONE", false, GRPCOK, "no error")
	OffsetOutOfRange                   = def(1, "OFFSET_OUT_OF_RANGE", false, GRPCOutOfRange, "the requested offset is outside the range the partition holds")
	CorruptMessage                     = def(2, "CORRUPT_MESSAGE", true, GRPCInvalidArgument, "the record batch failed its CRC or length check")
	UnknownTopicOrPartition            = def(3, "UNKNOWN_TOPIC_OR_PARTITION", true, GRPCNotFound, "this topic or partition does not exist")
	InvalidFetchSize                   = def(4, "INVALID_FETCH_SIZE", false, GRPCInvalidArgument, "the fetch size is invalid")
	LeaderNotAvailable                 = def(5, "LEADER_NOT_AVAILABLE", true, GRPCUnavailable, "the partition has no leader right now")
	NotLeaderOrFollower                = def(6, "NOT_LEADER_OR_FOLLOWER", true, GRPCFailedPrecondition, "this node is not the leader or a follower of the partition")
	RequestTimedOut                    = def(7, "REQUEST_TIMED_OUT", true, GRPCDeadlineExceeded, "the request timed out")
	BrokerNotAvailable                 = def(8, "BROKER_NOT_AVAILABLE", true, GRPCUnavailable, "the broker is not available")
	ReplicaNotAvailable                = def(9, "REPLICA_NOT_AVAILABLE", true, GRPCUnavailable, "the replica is not available")
	MessageTooLarge                    = def(10, "MESSAGE_TOO_LARGE", false, GRPCInvalidArgument, "the record batch is larger than the topic's max.message.bytes")
	OffsetMetadataTooLarge             = def(12, "OFFSET_METADATA_TOO_LARGE", false, GRPCInvalidArgument, "the committed offset's metadata is too large")
	NetworkException                   = def(13, "NETWORK_EXCEPTION", true, GRPCUnavailable, "the server disconnected before answering")
	CoordinatorLoadInProgress          = def(14, "COORDINATOR_LOAD_IN_PROGRESS", true, GRPCUnavailable, "the coordinator is loading its state")
	CoordinatorNotAvailable            = def(15, "COORDINATOR_NOT_AVAILABLE", true, GRPCUnavailable, "the coordinator is not available")
	NotCoordinator                     = def(16, "NOT_COORDINATOR", true, GRPCFailedPrecondition, "this is not the coordinator for the key")
	InvalidTopic                       = def(17, "INVALID_TOPIC_EXCEPTION", false, GRPCInvalidArgument, "the topic name is invalid")
	RecordListTooLarge                 = def(18, "RECORD_LIST_TOO_LARGE", false, GRPCInvalidArgument, "the request holds more bytes than allowed")
	NotEnoughReplicas                  = def(19, "NOT_ENOUGH_REPLICAS", true, GRPCUnavailable, "fewer in-sync replicas than min.insync.replicas")
	NotEnoughReplicasAfterAppend       = def(20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", true, GRPCUnavailable, "the batch was written but the in-sync replicas fell below min.insync.replicas")
	InvalidRequiredAcks                = def(21, "INVALID_REQUIRED_ACKS", false, GRPCInvalidArgument, "acks must be 0, 1 or -1")
	IllegalGeneration                  = def(22, "ILLEGAL_GENERATION", false, GRPCFailedPrecondition, "the generation is not the group's current one")
	InvalidGroupID                     = def(24, "INVALID_GROUP_ID", false, GRPCInvalidArgument, "the group id is invalid")
	UnknownMemberID                    = def(25, "UNKNOWN_MEMBER_ID", false, GRPCNotFound, "the member is not in the group")
	InvalidSessionTimeout              = def(26, "INVALID_SESSION_TIMEOUT", false, GRPCInvalidArgument, "the session timeout is outside the allowed range")
	RebalanceInProgress                = def(27, "REBALANCE_IN_PROGRESS", false, GRPCAborted, "the group is rebalancing")
	TopicAuthorizationFailed           = def(29, "TOPIC_AUTHORIZATION_FAILED", false, GRPCPermissionDenied, "the principal may not do this to the topic")
	GroupAuthorizationFailed           = def(30, "GROUP_AUTHORIZATION_FAILED", false, GRPCPermissionDenied, "the principal may not do this to the group")
	ClusterAuthorizationFailed         = def(31, "CLUSTER_AUTHORIZATION_FAILED", false, GRPCPermissionDenied, "the principal may not do this to the cluster")
	InvalidTimestamp                   = def(32, "INVALID_TIMESTAMP", false, GRPCInvalidArgument, "the timestamp is invalid")
	TopicAlreadyExists                 = def(36, "TOPIC_ALREADY_EXISTS", false, GRPCAlreadyExists, "the topic already exists")
	InvalidPartitions                  = def(37, "INVALID_PARTITIONS", false, GRPCInvalidArgument, "the number of partitions is invalid")
	InvalidReplicationFactor           = def(38, "INVALID_REPLICATION_FACTOR", false, GRPCInvalidArgument, "the replication factor is invalid or above the live brokers")
	InvalidReplicaAssignment           = def(39, "INVALID_REPLICA_ASSIGNMENT", false, GRPCInvalidArgument, "the replica assignment is invalid")
	InvalidConfig                      = def(40, "INVALID_CONFIG", false, GRPCInvalidArgument, "the configuration is invalid")
	NotController                      = def(41, "NOT_CONTROLLER", true, GRPCUnavailable, "this is not the active controller")
	InvalidRequest                     = def(42, "INVALID_REQUEST", false, GRPCInvalidArgument, "the request is malformed")
	PolicyViolation                    = def(44, "POLICY_VIOLATION", false, GRPCInvalidArgument, "the request breaks a policy")
	OutOfOrderSequenceNumber           = def(45, "OUT_OF_ORDER_SEQUENCE_NUMBER", false, GRPCFailedPrecondition, "the producer's sequence number is not the next expected one")
	DuplicateSequenceNumber            = def(46, "DUPLICATE_SEQUENCE_NUMBER", false, GRPCAlreadyExists, "the batch was already written")
	InvalidProducerEpoch               = def(47, "INVALID_PRODUCER_EPOCH", false, GRPCFailedPrecondition, "the producer epoch is older than the current one")
	InvalidTxnState                    = def(48, "INVALID_TXN_STATE", false, GRPCFailedPrecondition, "the transaction is in the wrong state for this operation")
	InvalidProducerIDMapping           = def(49, "INVALID_PRODUCER_ID_MAPPING", false, GRPCFailedPrecondition, "the producer id does not match the transactional id")
	InvalidTransactionTimeout          = def(50, "INVALID_TRANSACTION_TIMEOUT", false, GRPCInvalidArgument, "the transaction timeout is outside the allowed range")
	ConcurrentTransactions             = def(51, "CONCURRENT_TRANSACTIONS", true, GRPCAborted, "another transaction of this producer is still completing")
	TransactionCoordinatorFenced       = def(52, "TRANSACTION_COORDINATOR_FENCED", false, GRPCAborted, "a newer transaction coordinator owns this transactional id")
	TransactionalIDAuthorizationFailed = def(53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", false, GRPCPermissionDenied, "the principal may not use this transactional id")
	KafkaStorageError                  = def(56, "KAFKA_STORAGE_ERROR", true, GRPCUnavailable, "the replica's disk failed")
	SaslAuthenticationFailed           = def(58, "SASL_AUTHENTICATION_FAILED", false, GRPCUnauthenticated, "the caller did not authenticate: no credentials, or credentials that do not verify")
	UnknownProducerID                  = def(59, "UNKNOWN_PRODUCER_ID", false, GRPCFailedPrecondition, "the producer id is not known to this partition")
	NonEmptyGroup                      = def(68, "NON_EMPTY_GROUP", false, GRPCFailedPrecondition, "the group still has members")
	GroupIDNotFound                    = def(69, "GROUP_ID_NOT_FOUND", false, GRPCNotFound, "the group does not exist")
	FencedLeaderEpoch                  = def(74, "FENCED_LEADER_EPOCH", true, GRPCAborted, "the leader epoch in the request is older than the replica's")
	UnknownLeaderEpoch                 = def(75, "UNKNOWN_LEADER_EPOCH", true, GRPCUnavailable, "the leader epoch in the request is newer than the replica's")
	UnsupportedCompressionType         = def(76, "UNSUPPORTED_COMPRESSION_TYPE", false, GRPCInvalidArgument, "the compression codec is not supported")
	StaleBrokerEpoch                   = def(77, "STALE_BROKER_EPOCH", false, GRPCAborted, "the broker epoch is not the broker's current one")
	OffsetNotAvailable                 = def(78, "OFFSET_NOT_AVAILABLE", true, GRPCUnavailable, "the leader's high watermark has not caught up yet")
	PreferredLeaderNotAvailable        = def(80, "PREFERRED_LEADER_NOT_AVAILABLE", true, GRPCUnavailable, "the preferred leader is not available")
	GroupMaxSizeReached                = def(81, "GROUP_MAX_SIZE_REACHED", false, GRPCResourceExhausted, "the group is full")
	FencedInstanceID                   = def(82, "FENCED_INSTANCE_ID", false, GRPCAborted, "another member joined with the same instance id")
	EligibleLeadersNotAvailable        = def(83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", true, GRPCUnavailable, "no eligible leader is available")
	ElectionNotNeeded                  = def(84, "ELECTION_NOT_NEEDED", false, GRPCFailedPrecondition, "the leader is already the preferred one")
	GroupSubscribedToTopic             = def(86, "GROUP_SUBSCRIBED_TO_TOPIC", false, GRPCFailedPrecondition, "the group has members subscribed to the topic: its offsets stay")
	InvalidRecord                      = def(87, "INVALID_RECORD", false, GRPCInvalidArgument, "a record in the batch is invalid")
	UnstableOffsetCommit               = def(88, "UNSTABLE_OFFSET_COMMIT", true, GRPCUnavailable, "an offset commit of this group is pending in a transaction")
	ThrottlingQuotaExceeded            = def(89, "THROTTLING_QUOTA_EXCEEDED", true, GRPCResourceExhausted, "a budget of the server is used up for now; retry after a back-off")
	ProducerFenced                     = def(90, "PRODUCER_FENCED", false, GRPCAborted, "a newer producer with the same transactional id is active")
	InvalidUpdateVersion               = def(95, "INVALID_UPDATE_VERSION", false, GRPCAborted, "the partition epoch in the request is not the current one")
	UnknownTopicID                     = def(100, "UNKNOWN_TOPIC_ID", true, GRPCNotFound, "this topic id does not exist")
	DuplicateBrokerRegistration        = def(101, "DUPLICATE_BROKER_REGISTRATION", false, GRPCAlreadyExists, "another live broker holds this id")
	BrokerIDNotRegistered              = def(102, "BROKER_ID_NOT_REGISTERED", false, GRPCNotFound, "the broker id is not registered")
	InconsistentClusterID              = def(104, "INCONSISTENT_CLUSTER_ID", false, GRPCFailedPrecondition, "the node's data belongs to another cluster")
	TransactionalIDNotFound            = def(105, "TRANSACTIONAL_ID_NOT_FOUND", false, GRPCNotFound, "the transactional id does not exist")
	FencedMemberEpoch                  = def(110, "FENCED_MEMBER_EPOCH", false, GRPCAborted, "the member epoch is fenced; rejoin with epoch 0")
	UnreleasedInstanceID               = def(111, "UNRELEASED_INSTANCE_ID", false, GRPCAborted, "the instance id is still held by a member")
	UnsupportedAssignor                = def(112, "UNSUPPORTED_ASSIGNOR", false, GRPCInvalidArgument, "the server assignor is not supported")
	StaleMemberEpoch                   = def(113, "STALE_MEMBER_EPOCH", false, GRPCAborted, "the member epoch is older than the member's current one")
	TransactionAbortable               = def(118, "TRANSACTION_ABORTABLE", false, GRPCAborted, "the transaction must be aborted")
)

var byCode = map[Code]*Error{}

func def(code Code, name string, retriable bool, g GRPCCode, desc string) *Error {
	e := &Error{Code: code, Name: name, Retriable: retriable, GRPC: g, HTTP: httpFor(g), Desc: desc}
	if _, dup := byCode[code]; dup {
		panic(fmt.Sprintf("errs: code %d defined twice", code)) // init-time programming error
	}
	byCode[code] = e
	return e
}

// httpFor follows the gateway's error rules (docs/API.md): 400 bad input,
// 401 not authenticated, 403 not authorized, 404 unknown, 409 conflict or
// stale epoch, 503 when the cluster cannot serve it now.
func httpFor(c GRPCCode) int {
	switch c {
	case GRPCOK:
		return http.StatusOK
	case GRPCInvalidArgument, GRPCOutOfRange:
		return http.StatusBadRequest
	case GRPCNotFound:
		return http.StatusNotFound
	case GRPCAlreadyExists, GRPCAborted, GRPCFailedPrecondition:
		return http.StatusConflict
	case GRPCUnavailable:
		return http.StatusServiceUnavailable
	case GRPCDeadlineExceeded:
		return http.StatusGatewayTimeout
	case GRPCResourceExhausted:
		return http.StatusTooManyRequests
	case GRPCUnauthenticated:
		return http.StatusUnauthorized
	case GRPCPermissionDenied:
		return http.StatusForbidden
	default:
		return http.StatusInternalServerError
	}
}

// ForCode returns the table's row for a code, or UnknownServerError for a code
// the table does not hold (a newer peer's code, say).
func ForCode(c Code) *Error {
	if e, ok := byCode[c]; ok {
		return e
	}
	return UnknownServerError
}

// ForName returns the row with Kafka's name, or nil.
func ForName(name string) *Error {
	for _, e := range byCode {
		if e.Name == name {
			return e
		}
	}
	return nil
}

// All returns every row, ordered by code.
func All() []*Error {
	out := make([]*Error, 0, len(byCode))
	for _, e := range byCode {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Code < out[j].Code })
	return out
}

// detail is a row plus the specific message of one occurrence.
type detail struct {
	row *Error
	msg string
}

func (d *detail) Error() string { return d.row.Name + ": " + d.msg }
func (d *detail) Unwrap() error { return d.row }

// Errorf returns an error of the row's kind with a message saying what
// happened this time, e.g. Errorf(OffsetOutOfRange, "offset %d not in [%d, %d]", ...).
func Errorf(row *Error, format string, args ...any) error {
	return &detail{row: row, msg: fmt.Sprintf(format, args...)}
}

// Of returns the row an error belongs to: None for nil, the wrapped row when
// there is one, UnknownServerError otherwise.
func Of(err error) *Error {
	if err == nil {
		return None
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return UnknownServerError
}

// CodeOf is Of(err).Code.
func CodeOf(err error) Code { return Of(err).Code }

// IsRetriable reports whether a client may retry the failed operation.
func IsRetriable(err error) bool { return err != nil && Of(err).Retriable }

// Message is the human part of err: the occurrence's message when it was made
// by Errorf, the row's description for a bare row, err.Error() otherwise.
func Message(err error) string {
	if err == nil {
		return ""
	}
	var d *detail
	if errors.As(err, &d) {
		return d.msg
	}
	var e *Error
	if errors.As(err, &e) && errors.Is(e, err) {
		return e.Desc
	}
	return err.Error()
}

// maxQuoted bounds how much of a refused value an error message repeats.
const maxQuoted = 64

// Quote quotes a refused value for an error message: whole when short,
// else its first 64 bytes (whole characters) and its length, so that a
// refused 100 KB value is not sent back whole.
func Quote(v string) string {
	if len(v) <= maxQuoted {
		return strconv.Quote(v)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(v[:cut]), len(v))
}
