//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/rpcerr"
)

// badInput is one malformed request and the answer docs/API.md documents for it.
type badInput struct {
	name         string
	method, path string
	body         any
	status       int
	errorCode    string
}

// TestBadInputREST sends every kind of bad input docs/API.md names to the live
// cluster and checks the documented status and error document for each,
// that nothing of it was written or created, and that the cluster still
// serves afterwards.
func TestBadInputREST(t *testing.T) {
	d := devCluster(t)
	ctx := testCtx(t, 60*time.Second)
	c := restClient(d)
	const topic = "e2e-errors" // 3 partitions, 2 records on partition 0
	createTopic(ctx, t, c, topic, 3, 3, map[string]string{"min.insync.replicas": "2"})
	var pr ProduceResponse
	if err := mustDo(ctx, t, c, http.StatusOK, "POST", "/v1/topics/"+topic+"/partitions/0/records",
		`{"records": [{"value": "one"}, {"value": "two"}]}`).Decode(&pr); err != nil {
		t.Fatal(err)
	}
	if len(pr.Results) != 2 || pr.Results[1].Offset != 1 || pr.Results[1].ErrorCode != "NONE" {
		t.Fatalf("setup produce: %+v", pr)
	}

	long := strings.Repeat("a", 250)
	big := `{"records": [{"key": "k", "value": "` + strings.Repeat("x", 2<<20) + `"}]}` // 2 MiB > max.message.bytes (1 MiB)
	recs := `"records": [{"value": "v"}]`
	topics := "/v1/topics"
	produce := "/v1/topics/" + topic + "/records"
	fetch := "/v1/topics/" + topic + "/partitions/"
	cases := []badInput{
		// Topic names: 1-249 of [a-zA-Z0-9._-], not "." or "..", no "__" prefix.
		{"empty topic name", "POST", topics, `{"name": "", "partitions": 1}`, 400, "INVALID_TOPIC_EXCEPTION"},
		{"topic name ..", "POST", topics, `{"name": ".."}`, 400, "INVALID_TOPIC_EXCEPTION"},
		{"topic name .", "POST", topics, `{"name": "."}`, 400, "INVALID_TOPIC_EXCEPTION"},
		{"topic name bad/name", "POST", topics, `{"name": "bad/name"}`, 400, "INVALID_TOPIC_EXCEPTION"},
		{"topic name with a space", "POST", topics, `{"name": "bad name"}`, 400, "INVALID_TOPIC_EXCEPTION"},
		{"topic name of 250 characters", "POST", topics, `{"name": "` + long + `"}`, 400, "INVALID_TOPIC_EXCEPTION"},
		{"internal topic name", "POST", topics, `{"name": "__e2e"}`, 400, "INVALID_TOPIC_EXCEPTION"},
		{"250-character name in the path", "GET", topics + "/" + long, nil, 400, "INVALID_TOPIC_EXCEPTION"},
		{"bad name in the produce path", "POST", "/v1/topics/bad%20name/records", `{` + recs + `}`, 400, "INVALID_TOPIC_EXCEPTION"},
		{"produce to the group coordinators' topic", "POST", topics + "/__consumer_offsets/records", `{"records": [{"key": "x", "value": "y"}]}`, 400, "INVALID_TOPIC_EXCEPTION"},
		{"produce to the transaction coordinators' topic", "POST", topics + "/__transaction_state/partitions/0/records", `{"records": [{"key": "x", "value": "y"}]}`, 400, "INVALID_TOPIC_EXCEPTION"},
		// Unknown topic, everywhere a topic is named.
		{"describe unknown topic", "GET", topics + "/e2e-no-such-topic", nil, 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"delete unknown topic", "DELETE", topics + "/e2e-no-such-topic", nil, 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"produce to unknown topic", "POST", topics + "/e2e-no-such-topic/records", `{` + recs + `}`, 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"fetch from unknown topic", "GET", topics + "/e2e-no-such-topic/partitions/0/records?offset=0", nil, 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		// Topic creation.
		{"replication factor above live brokers", "POST", topics, `{"name": "e2e-rf4", "partitions": 1, "replication_factor": 4}`, 400, "INVALID_REPLICATION_FACTOR"},
		{"zero partitions", "POST", topics, `{"name": "e2e-p0", "partitions": 0}`, 400, "INVALID_PARTITIONS"},
		{"unknown topic config", "POST", topics, `{"name": "e2e-cfg", "configs": {"retention.forever": "1"}}`, 400, "INVALID_CONFIG"},
		{"topic already exists", "POST", topics, `{"name": "` + topic + `", "partitions": 3}`, 409, "TOPIC_ALREADY_EXISTS"},
		// Produce.
		{"acks=5", "POST", produce, `{"acks": 5, ` + recs + `}`, 400, "INVALID_REQUIRED_ACKS"},
		{"acks=-2", "POST", produce, `{"acks": -2, ` + recs + `}`, 400, "INVALID_REQUIRED_ACKS"},
		{"route partition out of range", "POST", fetch + "3/records", `{` + recs + `}`, 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"record partition out of range", "POST", produce, `{"records": [{"value": "v", "partition": 3}]}`, 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"negative record partition", "POST", produce, `{"records": [{"value": "v", "partition": -1}]}`, 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"2 MiB record", "POST", produce, big, 400, "MESSAGE_TOO_LARGE"},
		{"no records", "POST", produce, `{"records": []}`, 400, "INVALID_REQUEST"},
		{"key and key_bytes", "POST", produce, `{"records": [{"key": "k", "key_bytes": "aw==", "value": "v"}]}`, 400, "INVALID_REQUEST"},
		{"negative timestamp", "POST", produce, `{"records": [{"value": "v", "timestamp_ms": -1}]}`, 400, "INVALID_TIMESTAMP"},
		// Fetch.
		{"fetch partition out of range", "GET", fetch + "3/records?offset=0", nil, 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"offset above the log end", "GET", fetch + "0/records?offset=3", nil, 400, "OFFSET_OUT_OF_RANGE"},
		{"offset far above the log end", "GET", fetch + "0/records?offset=1000000", nil, 400, "OFFSET_OUT_OF_RANGE"},
		{"negative offset", "GET", fetch + "0/records?offset=-1", nil, 400, "OFFSET_OUT_OF_RANGE"},
		{"zero max_records", "GET", fetch + "0/records?offset=0&max_records=0", nil, 400, "INVALID_REQUEST"},
		{"negative max_wait_ms", "GET", fetch + "0/records?offset=0&max_wait_ms=-1", nil, 400, "INVALID_REQUEST"},
		{"negative min_bytes", "GET", fetch + "0/records?offset=0&max_wait_ms=100&min_bytes=-1", nil, 400, "INVALID_REQUEST"},
		// Malformed requests: JSON, field types, query and path values.
		{"malformed JSON (create)", "POST", topics, `{"name": "e2e-x",`, 400, "INVALID_REQUEST"},
		{"malformed JSON (produce)", "POST", produce, `{"records": [{"value": "v"}`, 400, "INVALID_REQUEST"},
		{"not JSON", "POST", produce, `acks=1&value=v`, 400, "INVALID_REQUEST"},
		{"partitions: \"six\"", "POST", topics, `{"name": "e2e-x", "partitions": "six"}`, 400, "INVALID_REQUEST"},
		{"name: 5", "POST", topics, `{"name": 5}`, 400, "INVALID_REQUEST"},
		{"acks: \"all\"", "POST", produce, `{"acks": "all", ` + recs + `}`, 400, "INVALID_REQUEST"},
		{"records: a string", "POST", produce, `{"records": "v"}`, 400, "INVALID_REQUEST"},
		{"value_bytes not base64", "POST", produce, `{"records": [{"value_bytes": "***"}]}`, 400, "INVALID_REQUEST"},
		{"unknown field", "POST", produce, `{"recordz": [{"value": "v"}]}`, 400, "INVALID_REQUEST"},
		{"non-numeric partition", "GET", fetch + "zero/records?offset=0", nil, 400, "INVALID_REQUEST"},
		{"non-numeric offset", "GET", fetch + "0/records?offset=first", nil, 400, "INVALID_REQUEST"},
		{"unknown encoding", "GET", fetch + "0/records?offset=0&encoding=HEX", nil, 400, "INVALID_REQUEST"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.Do(ctx, tc.method, tc.path, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			checkErrorDocument(t, resp, tc.status, tc.errorCode)
		})
	}

	// None of it left a trace: no topic from a refused create, no record
	// from a refused produce.
	var list struct {
		Topics []struct {
			Name string `json:"name"`
		} `json:"topics"`
	}
	if err := mustDo(ctx, t, c, http.StatusOK, "GET", "/v1/topics", nil).Decode(&list); err != nil {
		t.Fatal(err)
	}
	for _, tp := range list.Topics {
		if strings.HasPrefix(tp.Name, "e2e-rf4") || tp.Name == "e2e-p0" || tp.Name == "e2e-cfg" || tp.Name == "e2e-x" ||
			tp.Name == ".." || tp.Name == "bad/name" || tp.Name == long || tp.Name == "__e2e" {
			t.Errorf("refused topic %q exists", tp.Name)
		}
	}
	var desc TopicDescription
	if err := mustDo(ctx, t, c, http.StatusOK, "GET", "/v1/topics/"+topic, nil).Decode(&desc); err != nil {
		t.Fatal(err)
	}
	for _, p := range desc.Partitions {
		want := int64(0)
		if p.Partition == 0 {
			want = 2
		}
		if int64(p.HighWatermark) != want {
			t.Errorf("partition %d: high watermark %d after the refused produces, want %d", p.Partition, p.HighWatermark, want)
		}
	}

	// And the cluster still serves: ready, every broker alive, a produce
	// and a fetch of it.
	mustDo(ctx, t, c, http.StatusOK, "GET", "/readyz", nil)
	type member struct {
		Kind  string `json:"kind"`
		State string `json:"state"`
	}
	alive := func(ms []member, kind string) (n int) {
		for _, m := range ms {
			if m.State == "ALIVE" && m.Kind == kind {
				n++
			}
		}
		return n
	}
	// Every broker, skein dev's three controllers and its two coordinators
	// of each kind (the coordinators may still be registering when the
	// bad input is done).
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var cl struct {
			Brokers      []member `json:"brokers"`
			Controllers  []member `json:"controllers"`
			Coordinators []member `json:"coordinators"`
		}
		if err := mustDo(ctx, t, c, http.StatusOK, "GET", "/v1/cluster", nil).Decode(&cl); err != nil {
			t.Fatal(err)
		}
		g, x := alive(cl.Coordinators, "GROUP"), alive(cl.Coordinators, "TRANSACTION")
		if alive(cl.Brokers, "") == 3 && alive(cl.Controllers, "") == 3 && g == 2 && x == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("after the bad input: brokers %+v, controllers %+v, coordinators %+v; want every one ALIVE, 3, 3 and 2 of each kind",
				cl.Brokers, cl.Controllers, cl.Coordinators)
			break
		}
	}
	checkStillServes(ctx, t, c, topic)

	// The longest name a topic may have works like any other: its
	// partitions' directories fit on the storage nodes' disks.
	longest := strings.Repeat("e", 249)
	createTopic(ctx, t, c, longest, 1, 3, nil)
	checkStillServes(ctx, t, c, longest)
}

// checkStillServes produces a record and fetches it back.
func checkStillServes(ctx context.Context, t *testing.T, c *REST, topic string) {
	t.Helper()
	var pr ProduceResponse
	if err := mustDo(ctx, t, c, http.StatusOK, "POST", "/v1/topics/"+topic+"/records", `{"records": [{"key": "after", "value": "still serving"}]}`).Decode(&pr); err != nil {
		t.Fatal(err)
	}
	if len(pr.Results) != 1 || pr.Results[0].ErrorCode != "NONE" {
		t.Fatalf("produce after the bad input: %+v", pr)
	}
	r := pr.Results[0]
	var fr FetchResponse
	if err := mustDo(ctx, t, c, http.StatusOK, "GET", fmt.Sprintf("/v1/topics/%s/partitions/%d/records?offset=%d", topic, r.Partition, r.Offset), nil).Decode(&fr); err != nil {
		t.Fatal(err)
	}
	if len(fr.Records) != 1 || fr.Records[0].Value == nil || *fr.Records[0].Value != "still serving" {
		t.Fatalf("fetch after the bad input: %+v", fr)
	}
}

// checkErrorDocument checks the error answer of docs/API.md: the status, a JSON body
// with exactly "code" (the gRPC code of the error), "error_code" and a
// non-empty "message".
func checkErrorDocument(t *testing.T, resp *Response, wantStatus int, wantCode string) {
	t.Helper()
	if resp.Status != wantStatus {
		t.Errorf("status %d, want %d: %s", resp.Status, wantStatus, resp)
	}
	if !strings.HasPrefix(resp.ContentType, "application/json") {
		t.Errorf("Content-Type %q, want application/json", resp.ContentType)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(resp.Body, &fields); err != nil {
		t.Fatalf("the body is not a JSON object: %v: %s", err, resp)
	}
	var body ErrorBody
	if err := resp.Decode(&body); err != nil {
		t.Fatal(err)
	}
	if body.Code == nil || body.ErrorCode == nil || body.Message == nil || len(fields) != 3 {
		t.Fatalf("want exactly code, error_code and message: %s", resp)
	}
	if *body.ErrorCode != wantCode {
		t.Errorf("error_code %s, want %s: %s", *body.ErrorCode, wantCode, resp)
	}
	if *body.Message == "" {
		t.Errorf("empty message: %s", resp)
	}
	if row := errs.ForName(wantCode); row != nil && *body.Code != int(row.GRPC) {
		t.Errorf("code %d, want %d (%s)", *body.Code, row.GRPC, row.GRPC)
	}
}

// TestBadInputGRPC: the same refusals through gRPC carry the gRPC code of
// the error and its Kafka name in an ErrorInfo detail; a ProduceStream
// answers a bad request on the stream and goes on.
func TestBadInputGRPC(t *testing.T) {
	d := devCluster(t)
	ctx := testCtx(t, 60*time.Second)
	cc := grpcConn(t, d)
	admin, producer, consumer := skeinv1.NewAdminServiceClient(cc), skeinv1.NewProducerServiceClient(cc), skeinv1.NewConsumerServiceClient(cc)
	const topic = "e2e-errors-grpc"
	if _, err := admin.CreateTopic(ctx, &skeinv1.CreateTopicRequest{Name: topic, Partitions: ptr(int32(2)), ReplicationFactor: ptr(int32(3))}); err != nil {
		t.Fatal(err)
	}
	rec := []*skeinv1.ProduceRecord{{Value: ptr("v")}}
	cases := []struct {
		name string
		call func() error
		code codes.Code
		want string
	}{
		{"topic name ..", func() error {
			_, err := admin.CreateTopic(ctx, &skeinv1.CreateTopicRequest{Name: ".."})
			return err
		}, codes.InvalidArgument, "INVALID_TOPIC_EXCEPTION"},
		{"replication factor above live brokers", func() error {
			_, err := admin.CreateTopic(ctx, &skeinv1.CreateTopicRequest{Name: "e2e-grpc-rf4", ReplicationFactor: ptr(int32(4))})
			return err
		}, codes.InvalidArgument, "INVALID_REPLICATION_FACTOR"},
		{"topic already exists", func() error {
			_, err := admin.CreateTopic(ctx, &skeinv1.CreateTopicRequest{Name: topic})
			return err
		}, codes.AlreadyExists, "TOPIC_ALREADY_EXISTS"},
		{"produce to unknown topic", func() error {
			_, err := producer.Produce(ctx, &skeinv1.ProduceRequest{Topic: "e2e-no-such-topic", Records: rec})
			return err
		}, codes.NotFound, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"acks=5", func() error {
			_, err := producer.Produce(ctx, &skeinv1.ProduceRequest{Topic: topic, Acks: ptr(int32(5)), Records: rec})
			return err
		}, codes.InvalidArgument, "INVALID_REQUIRED_ACKS"},
		{"partition out of range", func() error {
			_, err := producer.Produce(ctx, &skeinv1.ProduceRequest{Topic: topic, Partition: ptr(int32(2)), Records: rec})
			return err
		}, codes.NotFound, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"2 MiB record", func() error {
			_, err := producer.Produce(ctx, &skeinv1.ProduceRequest{Topic: topic, Records: []*skeinv1.ProduceRecord{{ValueBytes: make([]byte, 2<<20)}}})
			return err
		}, codes.InvalidArgument, "MESSAGE_TOO_LARGE"},
		{"fetch partition out of range", func() error {
			_, err := consumer.Fetch(ctx, &skeinv1.FetchRequest{Topic: topic, Partition: 2, Offset: ptr(int64(0))})
			return err
		}, codes.NotFound, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"offset out of range", func() error {
			_, err := consumer.Fetch(ctx, &skeinv1.FetchRequest{Topic: topic, Partition: 0, Offset: ptr(int64(1000))})
			return err
		}, codes.OutOfRange, "OFFSET_OUT_OF_RANGE"},
		{"negative min_bytes", func() error {
			_, err := consumer.Fetch(ctx, &skeinv1.FetchRequest{Topic: topic, Partition: 0, Offset: ptr(int64(0)), MaxWaitMs: ptr(int32(100)), MinBytes: ptr(int32(-1))})
			return err
		}, codes.InvalidArgument, "INVALID_REQUEST"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			st, ok := status.FromError(err)
			if err == nil || !ok {
				t.Fatalf("answered %v, want a %s status", err, tc.code)
			}
			if st.Code() != tc.code {
				t.Errorf("code %s, want %s (%v)", st.Code(), tc.code, err)
			}
			var reason string
			for _, det := range st.Details() {
				if info, ok := det.(*errdetails.ErrorInfo); ok && info.GetDomain() == rpcerr.Domain {
					reason = info.GetReason()
				}
			}
			if reason != tc.want {
				t.Errorf("ErrorInfo reason %q, want %s (%v)", reason, tc.want, err)
			}
		})
	}

	// A bad request on a ProduceStream is answered on the stream, record by
	// record, and the session goes on.
	stream, err := producer.ProduceStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&skeinv1.ProduceStreamRequest{CorrelationId: 1, Topic: topic, Acks: ptr(int32(5)), Records: rec}); err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&skeinv1.ProduceStreamRequest{CorrelationId: 2, Topic: topic, Records: rec}); err != nil {
		t.Fatal(err)
	}
	answers := map[uint64]*skeinv1.ProduceResult{}
	for range 2 {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("ProduceStream: %v", err)
		}
		if len(resp.GetResults()) != 1 {
			t.Fatalf("correlation id %d: %d results", resp.GetCorrelationId(), len(resp.GetResults()))
		}
		answers[resp.GetCorrelationId()] = resp.GetResults()[0]
	}
	if r := answers[1]; r.GetErrorCode() != skeinv1.ErrorCode_INVALID_REQUIRED_ACKS || r.GetOffset() != -1 || r.GetMessage() == "" {
		t.Errorf("the acks=5 request was answered %v", r)
	}
	if r := answers[2]; r.GetErrorCode() != skeinv1.ErrorCode_NONE || r.GetOffset() < 0 {
		t.Errorf("the good request after it was answered %v", r)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err == nil {
		t.Error("ProduceStream goes on after CloseSend")
	}
	fr, err := consumer.Fetch(ctx, &skeinv1.FetchRequest{Topic: topic, Partition: answers[2].GetPartition(), Offset: ptr(answers[2].GetOffset())})
	if err != nil || len(fr.GetRecords()) != 1 || fr.GetRecords()[0].GetValue() != "v" {
		t.Fatalf("fetch after the bad input: %v %v", fr, err)
	}
}
