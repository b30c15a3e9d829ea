package history

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"skein/libs/errs"
	"skein/libs/rpcerr"

	skeinv1 "skein/gen/skein/v1"
)

func TestErrorOutcome(t *testing.T) {
	for code, want := range map[string]Outcome{
		"":                                 Written,
		"NONE":                             Written,
		"NOT_ENOUGH_REPLICAS":              NotWritten,
		"INVALID_RECORD":                   NotWritten,
		"MESSAGE_TOO_LARGE":                NotWritten,
		"INVALID_REQUIRED_ACKS":            NotWritten,
		"CORRUPT_MESSAGE":                  NotWritten,
		"UNKNOWN_PRODUCER_ID":              NotWritten,
		"NOT_ENOUGH_REPLICAS_AFTER_APPEND": Unknown,
		"REQUEST_TIMED_OUT":                Unknown,
		"NETWORK_EXCEPTION":                Unknown,
		"NOT_LEADER_OR_FOLLOWER":           Unknown,
		"UNKNOWN_SERVER_ERROR":             Unknown,
		"KAFKA_STORAGE_ERROR":              Unknown,
		"SOMETHING_NEW":                    Unknown,
	} {
		if got := ErrorOutcome(code); got != want {
			t.Errorf("%q: %s, want %s", code, got, want)
		}
	}
}

// Every code the checker calls definite is a real Kafka name.
func TestDefiniteCodesExist(t *testing.T) {
	for code := range definite {
		if errs.ForName(code) == nil {
			t.Errorf("%s is not in libs/errs", code)
		}
	}
}

func TestErrOutcome(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Outcome
	}{
		{nil, Written},
		{errs.Errorf(errs.NotEnoughReplicas, "isr 1 < 2"), NotWritten},
		{fmt.Errorf("produce: %w", errs.InvalidRecord), NotWritten},
		{rpcerr.ToGRPC(errs.Errorf(errs.NotEnoughReplicas, "isr 1 < 2")), NotWritten},
		{rpcerr.ToGRPC(errs.NotEnoughReplicasAfterAppend), Unknown},
		{errs.Errorf(errs.NotEnoughReplicasAfterAppend, "appended"), Unknown},
		{errs.RequestTimedOut, Unknown},
		{context.DeadlineExceeded, Unknown},
		{errors.New("dial tcp: connection refused"), Unknown},
		{status.Error(codes.Unavailable, "connection reset"), Unknown},
		{status.Error(codes.InvalidArgument, "no Skein code: not judged definite"), NotWritten},
	} {
		if got := ErrOutcome(tc.err); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.err, got, tc.want)
		}
	}
}

func TestOutcomeOfREST(t *testing.T) {
	for _, tc := range []struct {
		outcome, code string
		want          Outcome
	}{
		{"", "NONE", Written},
		{"", "", Written},
		{"WRITTEN", "NONE", Written},
		{"NOT_WRITTEN", "NOT_ENOUGH_REPLICAS", NotWritten},
		{"UNKNOWN", "NOT_ENOUGH_REPLICAS", Unknown}, // a retry after an unknown attempt
		{"UNKNOWN", "REQUEST_TIMED_OUT", Unknown},
		{"NOT_WRITTEN", "REQUEST_TIMED_OUT", NotWritten}, // the gateway knows best
		{"", "NOT_ENOUGH_REPLICAS", NotWritten},          // an older gateway: judged by the code
		{"", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", Unknown},
	} {
		if got := OutcomeOf(tc.outcome, tc.code); got != tc.want {
			t.Errorf("%q %q: %s, want %s", tc.outcome, tc.code, got, tc.want)
		}
	}
}

func TestResultOutcome(t *testing.T) {
	for _, tc := range []struct {
		res  *skeinv1.ProduceResult
		want Outcome
	}{
		{&skeinv1.ProduceResult{Offset: 7}, Written},
		{&skeinv1.ProduceResult{ErrorCode: skeinv1.ErrorCode_NOT_ENOUGH_REPLICAS, Outcome: skeinv1.ProduceOutcome_NOT_WRITTEN}, NotWritten},
		{&skeinv1.ProduceResult{ErrorCode: skeinv1.ErrorCode_NOT_ENOUGH_REPLICAS, Outcome: skeinv1.ProduceOutcome_UNKNOWN}, Unknown},
		{&skeinv1.ProduceResult{ErrorCode: skeinv1.ErrorCode_REQUEST_TIMED_OUT, Outcome: skeinv1.ProduceOutcome_UNKNOWN}, Unknown},
		{&skeinv1.ProduceResult{ErrorCode: skeinv1.ErrorCode_NOT_ENOUGH_REPLICAS}, NotWritten},
		{&skeinv1.ProduceResult{ErrorCode: skeinv1.ErrorCode_NOT_ENOUGH_REPLICAS_AFTER_APPEND}, Unknown},
	} {
		if got := ResultOutcome(tc.res); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.res, got, tc.want)
		}
	}
}

func TestOutcomeZeroValueIsUnknown(t *testing.T) {
	var s Send
	if s.Outcome != Unknown || Unknown.String() != "UNKNOWN" || Written.String() != "WRITTEN" || NotWritten.String() != "NOT_WRITTEN" {
		t.Errorf("%s", s.Outcome)
	}
}
