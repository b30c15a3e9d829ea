package errs

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

func TestKafkaNumbers(t *testing.T) {
	// The numbers the protocol promises; a change here breaks every client.
	for _, tc := range []struct {
		row  *Error
		code Code
		name string
	}{
		{OffsetOutOfRange, 1, "OFFSET_OUT_OF_RANGE"},
		{CorruptMessage, 2, "CORRUPT_MESSAGE"},
		{UnknownTopicOrPartition, 3, "UNKNOWN_TOPIC_OR_PARTITION"},
		{LeaderNotAvailable, 5, "LEADER_NOT_AVAILABLE"},
		{NotLeaderOrFollower, 6, "NOT_LEADER_OR_FOLLOWER"},
		{RequestTimedOut, 7, "REQUEST_TIMED_OUT"},
		{MessageTooLarge, 10, "MESSAGE_TOO_LARGE"},
		{InvalidTopic, 17, "INVALID_TOPIC_EXCEPTION"},
		{NotEnoughReplicas, 19, "NOT_ENOUGH_REPLICAS"},
		{NotEnoughReplicasAfterAppend, 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND"},
		{InvalidRequiredAcks, 21, "INVALID_REQUIRED_ACKS"},
		{UnknownMemberID, 25, "UNKNOWN_MEMBER_ID"},
		{InvalidReplicationFactor, 38, "INVALID_REPLICATION_FACTOR"},
		{OutOfOrderSequenceNumber, 45, "OUT_OF_ORDER_SEQUENCE_NUMBER"},
		{InvalidProducerEpoch, 47, "INVALID_PRODUCER_EPOCH"},
		{FencedLeaderEpoch, 74, "FENCED_LEADER_EPOCH"},
		{InvalidRecord, 87, "INVALID_RECORD"},
		{ProducerFenced, 90, "PRODUCER_FENCED"},
		{InvalidUpdateVersion, 95, "INVALID_UPDATE_VERSION"},
		{StaleMemberEpoch, 113, "STALE_MEMBER_EPOCH"},
		{ThrottlingQuotaExceeded, 89, "THROTTLING_QUOTA_EXCEEDED"},
	} {
		if tc.row.Code != tc.code || tc.row.Name != tc.name {
			t.Errorf("%s = %d, want %s = %d", tc.row.Name, tc.row.Code, tc.name, tc.code)
		}
		if ForCode(tc.code) != tc.row {
			t.Errorf("ForCode(%d) = %s", tc.code, ForCode(tc.code).Name)
		}
		if ForName(tc.name) != tc.row {
			t.Errorf("ForName(%s) mismatch", tc.name)
		}
	}
}

func TestHTTPStatuses(t *testing.T) {
	for _, tc := range []struct {
		row  *Error
		http int
	}{
		{InvalidTopic, http.StatusBadRequest},
		{InvalidRequiredAcks, http.StatusBadRequest},
		{MessageTooLarge, http.StatusBadRequest},
		{OffsetOutOfRange, http.StatusBadRequest},
		{UnknownTopicOrPartition, http.StatusNotFound},
		{UnknownMemberID, http.StatusNotFound},
		{GroupIDNotFound, http.StatusNotFound},
		{TransactionalIDNotFound, http.StatusNotFound},
		{TopicAlreadyExists, http.StatusConflict},
		{FencedLeaderEpoch, http.StatusConflict},
		{StaleMemberEpoch, http.StatusConflict},
		{ProducerFenced, http.StatusConflict},
		{NotEnoughReplicas, http.StatusServiceUnavailable},
		{LeaderNotAvailable, http.StatusServiceUnavailable},
		{ThrottlingQuotaExceeded, http.StatusTooManyRequests},
		{SaslAuthenticationFailed, http.StatusUnauthorized},
		{TopicAuthorizationFailed, http.StatusForbidden},
		{GroupAuthorizationFailed, http.StatusForbidden},
		{ClusterAuthorizationFailed, http.StatusForbidden},
		{TransactionalIDAuthorizationFailed, http.StatusForbidden},
		{UnknownServerError, http.StatusInternalServerError},
	} {
		if tc.row.HTTP != tc.http {
			t.Errorf("%s: HTTP %d, want %d", tc.row.Name, tc.row.HTTP, tc.http)
		}
	}
}

func TestTableIsComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range All() {
		if e.Name == "" || e.Desc == "" {
			t.Errorf("code %d has no name or description", e.Code)
		}
		if seen[e.Name] {
			t.Errorf("name %s used twice", e.Name)
		}
		seen[e.Name] = true
		if e.Code != 0 && e.GRPC == GRPCOK {
			t.Errorf("%s maps to gRPC OK", e.Name)
		}
	}
	if ForCode(9999) != UnknownServerError {
		t.Error("an unknown code must read as UNKNOWN_SERVER_ERROR")
	}
}

func TestOfAndRetriable(t *testing.T) {
	wrapped := fmt.Errorf("produce to t-0: %w", Errorf(NotLeaderOrFollower, "leader is broker %d", 2))
	for _, tc := range []struct {
		err       error
		code      Code
		retriable bool
		msg       string
	}{
		{nil, 0, false, ""},
		{NotEnoughReplicas, 19, true, NotEnoughReplicas.Desc},
		{wrapped, 6, true, "leader is broker 2"},
		{Errorf(InvalidRequiredAcks, "acks=5"), 21, false, "acks=5"},
		{errors.New("disk on fire"), -1, false, "disk on fire"},
	} {
		if got := CodeOf(tc.err); got != tc.code {
			t.Errorf("CodeOf(%v) = %d, want %d", tc.err, got, tc.code)
		}
		if got := IsRetriable(tc.err); got != tc.retriable {
			t.Errorf("IsRetriable(%v) = %v", tc.err, got)
		}
		if got := Message(tc.err); got != tc.msg {
			t.Errorf("Message(%v) = %q, want %q", tc.err, got, tc.msg)
		}
	}
	if !errors.Is(wrapped, NotLeaderOrFollower) || errors.Is(wrapped, FencedLeaderEpoch) {
		t.Error("errors.Is must match the row and only the row")
	}
}

// A refused value is repeated in a message whole when short, and cut (at a
// character's start) with its length when long.
func TestQuote(t *testing.T) {
	if got := Quote("ten"); got != `"ten"` {
		t.Errorf("a short value: %s", got)
	}
	long := strings.Repeat("9", 63) + "é" + strings.Repeat("x", 100_000)
	if got, want := Quote(long), strconv.Quote(strings.Repeat("9", 63))+"… (100065 bytes)"; got != want {
		t.Errorf("a long value: %s, want %s", got, want)
	}
	if got := Quote(strings.Repeat("a", 64)); got != strconv.Quote(strings.Repeat("a", 64)) {
		t.Errorf("64 bytes: %s", got)
	}
}
