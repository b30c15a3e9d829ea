package history

import (
	"skein/libs/errs"
	"skein/libs/rpcerr"

	skeinv1 "skein/gen/skein/v1"
)

// Outcome is what a writer knows of one send. The zero value is Unknown, so
// a send recorded without an outcome demands nothing of the log.
type Outcome int

const (
	// Unknown: no definite answer (timeout, broken connection, the leader
	// appended without reaching min.insync.replicas). The record may be in
	// the log, at most once; it is never required to be.
	Unknown Outcome = iota
	// Written: acknowledged at a partition and offset.
	Written
	// NotWritten: definitely not in the log (refused before the append).
	NotWritten
)

func (o Outcome) String() string {
	switch o {
	case Written:
		return "WRITTEN"
	case NotWritten:
		return "NOT_WRITTEN"
	case Unknown:
		return "UNKNOWN"
	}
	return "Outcome(?)"
}

// definite holds the error codes that prove a record was not appended: the
// leader refuses these before it writes anything. Everything else that is
// not NONE — timeouts, connection errors, NOT_ENOUGH_REPLICAS_AFTER_APPEND,
// leader changes, server errors — leaves the outcome unknown.
var definite = map[string]bool{
	"NOT_ENOUGH_REPLICAS":          true, // checked before the append
	"INVALID_REQUIRED_ACKS":        true,
	"INVALID_RECORD":               true,
	"INVALID_TIMESTAMP":            true,
	"INVALID_REQUEST":              true,
	"INVALID_TOPIC_EXCEPTION":      true,
	"MESSAGE_TOO_LARGE":            true,
	"RECORD_LIST_TOO_LARGE":        true,
	"CORRUPT_MESSAGE":              true,
	"UNSUPPORTED_COMPRESSION_TYPE": true,
	"POLICY_VIOLATION":             true,
	"OUT_OF_ORDER_SEQUENCE_NUMBER": true,
	"UNKNOWN_PRODUCER_ID":          true,
	"INVALID_PRODUCER_EPOCH":       true,
	"PRODUCER_FENCED":              true,
	"INVALID_TXN_STATE":            true,
	"INVALID_PRODUCER_ID_MAPPING":  true,
	"THROTTLING_QUOTA_EXCEEDED":    true, // a gateway or storage budget refused it before sending or appending
}

// ErrorOutcome classifies one produce attempt's error code by its Kafka
// name: "" and NONE are Written, the codes a leader answers before it
// appends (NOT_ENOUGH_REPLICAS, validation errors) are NotWritten, and every
// other code is Unknown. It judges a single attempt; a client that retried
// must report Unknown if any earlier attempt's outcome was unknown (the
// gateway's outcome field does exactly that).
func ErrorOutcome(code string) Outcome {
	switch {
	case code == "" || code == "NONE":
		return Written
	case definite[code]:
		return NotWritten
	}
	return Unknown
}

// ErrOutcome classifies a Go error of one produce attempt: nil is Written;
// a libs/errs row or a gRPC status carrying one is classified by its name
// (ErrorOutcome); anything else — context deadlines, connection errors,
// statuses without a Skein code — is Unknown.
func ErrOutcome(err error) Outcome {
	if err == nil {
		return Written
	}
	row := errs.Of(err)
	if row == errs.UnknownServerError {
		row = errs.Of(rpcerr.FromStatus(err))
	}
	return ErrorOutcome(row.Name)
}

// OutcomeOf reads the gateway's REST answer for one record: its outcome
// ("WRITTEN", "NOT_WRITTEN", "UNKNOWN"; often absent when WRITTEN) and its
// error_code. An error code of NONE (or none at all) is Written; with an
// error, the outcome field decides, and a server too old to send one is
// judged by the code (ErrorOutcome).
func OutcomeOf(outcome, errorCode string) Outcome {
	if errorCode == "" || errorCode == "NONE" {
		return Written
	}
	switch outcome {
	case "NOT_WRITTEN":
		return NotWritten
	case "UNKNOWN":
		return Unknown
	}
	return ErrorOutcome(errorCode)
}

// ResultOutcome is OutcomeOf for the gateway's gRPC ProduceResult.
func ResultOutcome(r *skeinv1.ProduceResult) Outcome {
	if r.GetErrorCode() == skeinv1.ErrorCode_NONE {
		return Written
	}
	switch r.GetOutcome() {
	case skeinv1.ProduceOutcome_NOT_WRITTEN:
		return NotWritten
	case skeinv1.ProduceOutcome_UNKNOWN:
		return Unknown
	}
	return ErrorOutcome(r.GetErrorCode().String())
}
