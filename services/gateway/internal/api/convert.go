package api

import (
	"context"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/propagation"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
	"skein/libs/errs"
	"skein/libs/record"
	"skein/libs/telemetry"
)

// textOrBytes picks the one form a produce request may use for a field.
func textOrBytes(field string, text *string, raw []byte, rawSet bool) ([]byte, error) {
	switch {
	case text != nil && rawSet:
		return nil, errs.Errorf(errs.InvalidRequest, "%s and %s_bytes are both set; use one", field, field)
	case text != nil:
		return []byte(*text), nil
	case rawSet:
		if raw == nil {
			raw = []byte{}
		}
		return raw, nil
	}
	return nil, nil
}

// toClientRecord converts one produce record, adding the producing span's
// traceparent header so the record joins the producer's trace.
func toClientRecord(tp string, topic string, i int, pr *skeinv1.ProduceRecord, now int64) (client.Record, error) {
	key, err := textOrBytes("key", pr.Key, pr.KeyBytes, pr.KeyBytes != nil)
	if err != nil {
		return client.Record{}, errs.Errorf(errs.InvalidRequest, "record %d: %s", i, errs.Message(err))
	}
	value, err := textOrBytes("value", pr.Value, pr.ValueBytes, pr.ValueBytes != nil)
	if err != nil {
		return client.Record{}, errs.Errorf(errs.InvalidRequest, "record %d: %s", i, errs.Message(err))
	}
	r := client.Record{Topic: topic, Key: key, Value: value, Partition: pr.Partition, Timestamp: now}
	if pr.TimestampMs != nil {
		if *pr.TimestampMs < 0 {
			return client.Record{}, errs.Errorf(errs.InvalidTimestamp, "record %d: timestamp_ms %d is negative", i, *pr.TimestampMs)
		}
		r.Timestamp, r.TimestampSet = *pr.TimestampMs, true
	}
	hasTrace := false
	for j, h := range pr.GetHeaders() {
		v, err := textOrBytes("value", h.Value, h.ValueBytes, h.ValueBytes != nil)
		if err != nil {
			return client.Record{}, errs.Errorf(errs.InvalidRequest, "record %d header %d: %s", i, j, errs.Message(err))
		}
		hasTrace = hasTrace || h.GetKey() == client.TraceparentHeader
		r.Headers = append(r.Headers, record.Header{Key: h.GetKey(), Value: v})
	}
	if !hasTrace && tp != "" {
		r.Headers = append(r.Headers, record.Header{Key: client.TraceparentHeader, Value: []byte(tp)})
	}
	return r, nil
}

// traceparent answers the W3C traceparent of ctx's span when it is sampled
// (see telemetry.Sampled), else "".
func traceparent(ctx context.Context) string {
	if !telemetry.Sampled(ctx) {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c.Get(client.TraceparentHeader)
}

// encode fills a text or a bytes field per the encoding.
func encode(b []byte, enc skeinv1.Encoding) (text *string, raw []byte) {
	if b == nil {
		return nil, nil
	}
	if enc == skeinv1.Encoding_TEXT && utf8.Valid(b) {
		s := string(b)
		return &s, nil
	}
	return nil, b
}

// timestampType is what a record's timestamp is.
func timestampType(logAppendTime bool) skeinv1.TimestampType {
	if logAppendTime {
		return skeinv1.TimestampType_LOG_APPEND_TIME
	}
	return skeinv1.TimestampType_CREATE_TIME
}

func toConsumed(r client.ConsumedRecord, enc skeinv1.Encoding) *skeinv1.ConsumedRecord {
	out := &skeinv1.ConsumedRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, TimestampMs: r.Timestamp, LeaderEpoch: r.LeaderEpoch,
		TimestampType: timestampType(r.LogAppendTime)}
	out.Key, out.KeyBytes = encode(r.Key, enc)
	out.Value, out.ValueBytes = encode(r.Value, enc)
	for _, h := range r.Headers {
		hv := &skeinv1.Header{Key: h.Key}
		hv.Value, hv.ValueBytes = encode(h.Value, enc)
		out.Headers = append(out.Headers, hv)
	}
	return out
}

func toResult(r client.Result) *skeinv1.ProduceResult {
	out := new(skeinv1.ProduceResult)
	setResult(out, r)
	return out
}

// newResults returns n results that share one allocation, for a response
// whose every record gets an answer: one object a request instead of one a
// record.
func newResults(n int) []*skeinv1.ProduceResult {
	backing := make([]skeinv1.ProduceResult, n)
	out := make([]*skeinv1.ProduceResult, n)
	for i := range backing {
		out[i] = &backing[i]
	}
	return out
}

// setResult fills out, a zero result, with r.
func setResult(out *skeinv1.ProduceResult, r client.Result) {
	out.Partition, out.Offset, out.TimestampMs = r.Partition, r.Offset, r.Timestamp
	if r.Err != nil {
		out.ErrorCode = skeinv1.ErrorCode(errs.CodeOf(r.Err))
		out.Message = errs.Message(r.Err)
		out.Offset, out.TimestampMs = -1, -1 // as Kafka's: 0 is a time a record may have
		out.Outcome = skeinv1.ProduceOutcome_NOT_WRITTEN
		if r.MaybeWritten {
			out.Outcome = skeinv1.ProduceOutcome_UNKNOWN
		}
	}
}

func nowMs() int64 { return time.Now().UnixMilli() }
