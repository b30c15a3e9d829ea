package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// The REST documents of docs/API.md, decoded the way a client that reads the
// document (not the protos) would: snake_case names, 64-bit integers as
// numbers or strings, binary fields as base64.

// Int64 accepts a JSON number or a JSON string holding one, as docs/API.md
// allows for 64-bit integers.
type Int64 int64

func (v *Int64) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		b = []byte(s)
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("not a 64-bit integer: %s", b)
	}
	*v = Int64(n)
	return nil
}

// Header is a record header: text in value or binary in value_bytes.
type Header struct {
	Key        string  `json:"key"`
	Value      *string `json:"value,omitempty"`
	ValueBytes []byte  `json:"value_bytes,omitempty"`
}

// ProduceRecord is one record of a produce request.
type ProduceRecord struct {
	Key         *string  `json:"key,omitempty"`
	KeyBytes    []byte   `json:"key_bytes,omitempty"`
	Value       *string  `json:"value,omitempty"`
	ValueBytes  []byte   `json:"value_bytes,omitempty"`
	Headers     []Header `json:"headers,omitempty"`
	Partition   *int32   `json:"partition,omitempty"`
	TimestampMs *int64   `json:"timestamp_ms,omitempty"`
}

// ProduceRequest is the body of POST /v1/topics/{topic}/records.
type ProduceRequest struct {
	Acks    *int32          `json:"acks,omitempty"`
	Records []ProduceRecord `json:"records"`
}

// ProduceResult is one record's answer.
type ProduceResult struct {
	Partition   int32  `json:"partition"`
	Offset      Int64  `json:"offset"`
	TimestampMs Int64  `json:"timestamp_ms"`
	ErrorCode   string `json:"error_code"`
	Message     string `json:"message"`
}

// ProduceResponse answers a produce.
type ProduceResponse struct {
	Results []ProduceResult `json:"results"`
}

// ConsumedRecord is one fetched record.
type ConsumedRecord struct {
	Topic       string   `json:"topic"`
	Partition   int32    `json:"partition"`
	Offset      Int64    `json:"offset"`
	TimestampMs Int64    `json:"timestamp_ms"`
	Key         *string  `json:"key"`
	KeyBytes    []byte   `json:"key_bytes"`
	Value       *string  `json:"value"`
	ValueBytes  []byte   `json:"value_bytes"`
	Headers     []Header `json:"headers"`
	// TimestampType is CREATE_TIME or LOG_APPEND_TIME.
	TimestampType string `json:"timestamp_type"`
}

// FetchResponse answers GET .../partitions/{p}/records.
type FetchResponse struct {
	Records          []ConsumedRecord `json:"records"`
	NextOffset       Int64            `json:"next_offset"`
	HighWatermark    Int64            `json:"high_watermark"`
	LastStableOffset Int64            `json:"last_stable_offset"`
	LogStartOffset   Int64            `json:"log_start_offset"`
}

// PartitionInfo is one partition of a topic description.
type PartitionInfo struct {
	Partition      int32   `json:"partition"`
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	Replicas       []int32 `json:"replicas"`
	ISR            []int32 `json:"isr"`
	LogStartOffset Int64   `json:"log_start_offset"`
	HighWatermark  Int64   `json:"high_watermark"`
}

// TopicDescription answers GET /v1/topics/{topic} and POST /v1/topics.
type TopicDescription struct {
	Name       string            `json:"name"`
	Configs    map[string]string `json:"configs"`
	Partitions []PartitionInfo   `json:"partitions"`
}

// ErrorBody is the REST error document of docs/API.md. The pointers tell a missing field
// from a zero one.
type ErrorBody struct {
	Code      *int    `json:"code"`
	ErrorCode *string `json:"error_code"`
	Message   *string `json:"message"`
}

// REST is a small client of the gateway's REST API.
type REST struct {
	Base string
	HC   *http.Client
}

// Response is one answer: status, content type and body.
type Response struct {
	Status      int
	ContentType string
	Body        []byte
}

func (r *Response) String() string {
	body := r.Body
	if len(body) > 400 {
		body = append(body[:400:400], "…"...)
	}
	return fmt.Sprintf("%d %s", r.Status, body)
}

// Decode unmarshals the body into v.
func (r *Response) Decode(v any) error {
	if err := json.Unmarshal(r.Body, v); err != nil {
		return fmt.Errorf("decoding %s: %w", r, err)
	}
	return nil
}

// Do sends a request. body is sent as is when it is a string or []byte, as
// JSON otherwise; nil sends none.
func (c *REST) Do(ctx context.Context, method, path string, body any) (*Response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
	if err != nil {
		return nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HC
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &Response{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: raw}, nil
}

// APIError is a REST answer that was not 2xx, with the error body's fields.
type APIError struct {
	Status    int
	ErrorCode string `json:"error_code"`
	Message   string `json:"message"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.ErrorCode, e.Message)
}

// Call sends a request (body as in Do) and decodes a 2xx answer into out
// (unless out is nil); any other answer is an *APIError.
func (c *REST) Call(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.Do(ctx, method, path, body)
	if err != nil {
		return err
	}
	if resp.Status/100 != 2 {
		e := &APIError{Status: resp.Status}
		if json.Unmarshal(resp.Body, e) != nil || e.ErrorCode == "" {
			e.Message = string(bytes.TrimSpace(resp.Body))
		}
		return e
	}
	if out != nil {
		return resp.Decode(out)
	}
	return nil
}
