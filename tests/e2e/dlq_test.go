//go:build integration

package e2e

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	controllerv1 "skein/gen/skein/controller/v1"
	controllerv1grpc "skein/gen/skein/controller/v1/controllerv1grpc"
	skeinv1 "skein/gen/skein/v1"
)

// ownDev starts a skein dev cluster of the test's own (its group
// coordinators are killed here, so the shared one is left alone), stopped
// when the test ends.
func ownDev(t *testing.T) *Dev {
	t.Helper()
	bin, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "skein-e2e-dlq-")
	if err != nil {
		t.Fatal(err)
	}
	d, err := StartDev(bin, dir, 90*time.Second)
	if err != nil {
		t.Fatalf("starting skein dev: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("skein dev output:\n%s\n%s", d.Output(), d.LogTails(40))
		}
		if err := d.Stop(60 * time.Second); err != nil {
			t.Errorf("stopping skein dev: %v", err)
		}
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("the cluster's data and logs are kept in %s", dir)
		}
	})
	return d
}

// groupOwner answers the group coordinator process that owns a group, as
// the controllers' FindCoordinator says.
func groupOwner(t *testing.T, d *Dev, group string) Process {
	t.Helper()
	procs, err := d.Processes()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, p := range procs {
			if p.Role != "controller" {
				continue
			}
			cc, err := grpc.NewClient(p.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			resp, err := controllerv1grpc.NewControllerServiceClient(cc).FindCoordinator(ctx,
				&controllerv1.FindCoordinatorRequest{Kind: controllerv1.CoordinatorKind_COORDINATOR_KIND_GROUP, Key: group})
			cancel()
			cc.Close()
			if err != nil {
				continue
			}
			for _, q := range procs {
				if q.Role == "groupcoord" && int32(q.ID) == resp.GetNodeId() {
					return q
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no controller named the coordinator of %q", group)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type restMember struct {
	ID    string `json:"member_id"`
	Epoch int32  `json:"member_epoch"`
}

type restPosition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    Int64  `json:"offset"`
}

type groupRecord struct {
	ConsumedRecord
	DeliveryAttempt int32 `json:"delivery_attempt"`
}

type groupFetch struct {
	Records     []groupRecord  `json:"records"`
	Positions   []restPosition `json:"positions"`
	MemberEpoch int32          `json:"member_epoch"`
}

type nackAnswer struct {
	FailedDeliveries int32  `json:"failed_deliveries"`
	DeadLettered     bool   `json:"dead_lettered"`
	DLQTopic         string `json:"dlq_topic"`
	DLQPartition     int32  `json:"dlq_partition"`
	DLQOffset        Int64  `json:"dlq_offset"`
	NextOffset       Int64  `json:"next_offset"`
}

// retriable: the group's coordinator is moving; the call did nothing.
func retriable(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode {
	case "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS":
		return true
	}
	return false
}

// callRetrying is c.Call, again while the coordinator moves.
func callRetrying(ctx context.Context, t *testing.T, c *REST, method, path string, body, out any) error {
	t.Helper()
	for {
		err := c.Call(ctx, method, path, body, out)
		if !retriable(err) || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func header(hs []Header, key string) string {
	v := ""
	for _, h := range hs {
		if h.Key == key && h.Value != nil {
			v = *h.Value
		}
	}
	return v
}

func apiCode(err error) string {
	var ae *APIError
	if errors.As(err, &ae) {
		return fmt.Sprintf("%d %s", ae.Status, ae.ErrorCode)
	}
	return fmt.Sprint(err)
}

// TestDeadLetterAfterFiveNacks: a REST member nacks the first record of a
// partition five times; it is delivered again each time with the next
// delivery_attempt, the group coordinator is SIGKILLed between the third
// and the fourth nack and the count survives, the fifth nack writes it to
// payments.dlq exactly once (key, value and headers kept, the dlq.* headers
// added, the record's timestamp among them) and the member then reads the next record. Then bad
// nacks, each refused with its code and changing nothing; group configs;
// the same over a gRPC Consume stream; and a dead-letter topic the
// coordinator creates, like its source.
func TestDeadLetterAfterFiveNacks(t *testing.T) {
	d := ownDev(t)
	c := restClient(d)
	ctx := testCtx(t, 5*time.Minute)
	const topic, group = "payments", "billing-dlq"
	// The records carry old times (the epoch, 2023): the topics that hold
	// them keep their records for ever, or a retention pass (the default
	// retention.ms is 7 days) could empty them before they are read back.
	// Their dead-letter copies are timestamped when dead-lettered, and a
	// replay gives a record its own time back (dlq.source.timestamp).
	forever := map[string]string{"min.insync.replicas": "2", "retention.ms": "-1"}
	createTopic(ctx, t, c, topic, 1, 3, forever)
	createTopic(ctx, t, c, topic+".dlq", 1, 3, forever)
	createTopic(ctx, t, c, "payments-dead", 1, 3, forever)
	createTopic(ctx, t, c, "ledger", 1, 3, nil) // a topic the group does not read
	var recs []ProduceRecord
	for i := range 3 {
		recs = append(recs, ProduceRecord{Key: ptr(fmt.Sprint("k", i)), Value: ptr(fmt.Sprint("v", i)),
			Headers: []Header{{Key: "origin", Value: ptr(fmt.Sprint("test-", i))}}, Partition: ptr(int32(0)), TimestampMs: ptr(int64(1_700_000_000_000 + i))})
	}
	recs[0].TimestampMs = ptr(int64(0)) // the epoch, a time like any other, kept in the copy's dlq.source.timestamp
	var pr ProduceResponse
	if err := c.Call(ctx, "POST", "/v1/topics/"+topic+"/records", ProduceRequest{Records: recs}, &pr); err != nil {
		t.Fatal(err)
	}
	var m restMember
	if err := callRetrying(ctx, t, c, "POST", "/v1/groups/"+group+"/members",
		map[string]any{"topics": []string{topic}, "auto_offset_reset": "earliest", "session_timeout_ms": 60000}, &m); err != nil {
		t.Fatal(err)
	}
	base := "/v1/groups/" + group + "/members/" + m.ID
	var positions []restPosition
	// fetch reads one record (within 30 s), keeping the positions.
	fetch := func() groupRecord {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var f groupFetch
			body := map[string]any{"member_epoch": m.Epoch, "max_records": 1, "max_wait_ms": 1000}
			if positions != nil {
				body["positions"] = positions
			}
			err := callRetrying(ctx, t, c, "POST", base+"/records", body, &f)
			if err != nil {
				t.Fatalf("fetch: %v", err)
			}
			m.Epoch, positions = f.MemberEpoch, f.Positions
			if len(f.Records) > 0 {
				return f.Records[0]
			}
			if time.Now().After(deadline) {
				t.Fatalf("no record within 30 s")
			}
		}
	}
	nack := func(offset int64, reason string) (nackAnswer, error) {
		var a nackAnswer
		err := callRetrying(ctx, t, c, "POST", base+"/nack",
			map[string]any{"member_epoch": m.Epoch, "topic": topic, "partition": 0, "offset": offset, "reason": reason}, &a)
		return a, err
	}

	for attempt := int32(1); attempt <= 5; attempt++ {
		if attempt == 4 {
			owner := groupOwner(t, d, group)
			if err := syscall.Kill(owner.PID, syscall.SIGKILL); err != nil {
				t.Fatalf("SIGKILL %s-%d: %v", owner.Role, owner.ID, err)
			}
			t.Logf("SIGKILLed the group's coordinator, %s-%d (pid %d), after 3 nacks", owner.Role, owner.ID, owner.PID)
		}
		start := time.Now()
		r := fetch()
		if r.Offset != 0 || r.Value == nil || *r.Value != "v0" || r.DeliveryAttempt != attempt {
			t.Fatalf("delivery %d: offset %d value %v delivery_attempt %d", attempt, r.Offset, r.Value, r.DeliveryAttempt)
		}
		if attempt == 4 {
			t.Logf("the first fetch after the kill answered in %v", time.Since(start).Round(time.Millisecond))
		}
		a, err := nack(0, fmt.Sprint("cannot parse, attempt ", attempt))
		if err != nil {
			t.Fatalf("nack %d: %v", attempt, err)
		}
		if a.FailedDeliveries != attempt || a.DeadLettered != (attempt == 5) {
			t.Fatalf("nack %d answered %+v", attempt, a)
		}
		want := int64(0)
		if attempt == 5 {
			want = 1
			if a.DLQTopic != topic+".dlq" || a.DLQPartition != 0 || a.DLQOffset != 0 {
				t.Fatalf("the dead-letter nack answered %+v", a)
			}
		}
		if int64(a.NextOffset) != want {
			t.Fatalf("nack %d: next_offset %d, want %d", attempt, a.NextOffset, want)
		}
		positions = []restPosition{{Topic: topic, Partition: 0, Offset: a.NextOffset}}
	}
	// The member goes on with the next record, a first delivery.
	if r := fetch(); r.Offset != 1 || *r.Value != "v1" || r.DeliveryAttempt != 1 {
		t.Fatalf("after the dead-letter: offset %d value %v attempt %d", r.Offset, r.Value, r.DeliveryAttempt)
	}
	positions = []restPosition{{Topic: topic, Partition: 0, Offset: 1}}

	// The dead-letter topic holds the record once.
	checkDLQ := func() {
		t.Helper()
		var f FetchResponse
		if err := c.Call(ctx, "GET", "/v1/topics/"+topic+".dlq/partitions/0/records?offset=0&max_wait_ms=200", nil, &f); err != nil {
			t.Fatal(err)
		}
		if len(f.Records) != 1 {
			t.Fatalf("%s.dlq holds %d records, want 1", topic, len(f.Records))
		}
		r := f.Records[0]
		if *r.Key != "k0" || *r.Value != "v0" || header(r.Headers, "origin") != "test-0" {
			t.Fatalf("the dead-letter record: %+v", r)
		}
		// Timestamped when it was dead-lettered, so that the dead-letter
		// topic's retention counts from then; the record's own time (the
		// epoch) is in dlq.source.timestamp.
		if age := time.Since(time.UnixMilli(int64(r.TimestampMs))); age < -time.Minute || age > 10*time.Minute {
			t.Fatalf("the dead-letter record's timestamp %d is not the time it was dead-lettered", r.TimestampMs)
		}
		for k, want := range map[string]string{"dlq.source.topic": topic, "dlq.source.partition": "0", "dlq.source.offset": "0",
			"dlq.reason": "cannot parse, attempt 5", "dlq.attempts": "5", "dlq.group": group, "dlq.source.timestamp": "0"} {
			if got := header(r.Headers, k); got != want {
				t.Errorf("header %s = %q, want %q", k, got, want)
			}
		}
	}
	checkDLQ()
	committed := func() int64 {
		t.Helper()
		var o struct {
			Offsets []struct {
				Topic     string `json:"topic"`
				Partition int32  `json:"partition"`
				Offset    Int64  `json:"offset"`
			} `json:"offsets"`
		}
		if err := callRetrying(ctx, t, c, "GET", "/v1/groups/"+group+"/offsets", nil, &o); err != nil {
			t.Fatal(err)
		}
		for _, x := range o.Offsets {
			if x.Topic == topic && x.Partition == 0 {
				return int64(x.Offset)
			}
		}
		return -1
	}
	if got := committed(); got != 1 {
		t.Fatalf("committed %d after the dead-letter, want 1", got)
	}

	// Bad nacks: each refused with its code, nothing changes.
	bad := []struct {
		name string
		path string
		body map[string]any
		want string
	}{
		{"a partition not assigned to the member", base + "/nack", map[string]any{"member_epoch": m.Epoch, "topic": "ledger", "partition": 0, "offset": 0}, "409 STALE_MEMBER_EPOCH"},
		{"an offset past the high watermark", base + "/nack", map[string]any{"member_epoch": m.Epoch, "topic": topic, "partition": 0, "offset": 99}, "400 OFFSET_OUT_OF_RANGE"},
		{"an offset the group moved past", base + "/nack", map[string]any{"member_epoch": m.Epoch, "topic": topic, "partition": 0, "offset": 0}, "400 OFFSET_OUT_OF_RANGE"},
		{"a stale member epoch", base + "/nack", map[string]any{"member_epoch": m.Epoch + 7, "topic": topic, "partition": 0, "offset": 1}, "409 STALE_MEMBER_EPOCH"},
		{"an unknown member", "/v1/groups/" + group + "/members/nobody-earliest/nack", map[string]any{"member_epoch": m.Epoch, "topic": topic, "partition": 0, "offset": 1}, "404 UNKNOWN_MEMBER_ID"},
		{"an unknown group", "/v1/groups/no-such-group/members/" + m.ID + "/nack", map[string]any{"member_epoch": 1, "topic": topic, "partition": 0, "offset": 1}, "404 UNKNOWN_MEMBER_ID"},
		{"an unknown topic", base + "/nack", map[string]any{"member_epoch": m.Epoch, "topic": "nope", "partition": 0, "offset": 1}, "404 UNKNOWN_TOPIC_OR_PARTITION"},
		{"no offset", base + "/nack", map[string]any{"member_epoch": m.Epoch, "topic": topic, "partition": 0}, "400 INVALID_REQUEST"},
		{"no partition", base + "/nack", map[string]any{"member_epoch": m.Epoch, "topic": topic, "offset": 1}, "400 INVALID_REQUEST"},
		{"no topic", base + "/nack", map[string]any{"member_epoch": m.Epoch, "partition": 0, "offset": 1}, "400 INVALID_REQUEST"},
		{"no member epoch", base + "/nack", map[string]any{"topic": topic, "partition": 0, "offset": 1}, "400 INVALID_REQUEST"},
		{"an unknown field", base + "/nack", map[string]any{"member_epoch": m.Epoch, "topic": topic, "partition": 0, "offset": 1, "attempts": 3}, "400 INVALID_REQUEST"},
	}
	for _, b := range bad {
		_, err := nackBody(ctx, c, b.path, b.body)
		if got := apiCode(err); got != b.want {
			t.Errorf("%s: %s, want %s", b.name, got, b.want)
		}
	}
	if got := committed(); got != 1 {
		t.Fatalf("committed %d after the refused nacks, want 1", got)
	}
	if r := fetch(); r.Offset != 1 || r.DeliveryAttempt != 1 {
		t.Fatalf("after the refused nacks: offset %d attempt %d, want offset 1 attempt 1", r.Offset, r.DeliveryAttempt)
	}
	checkDLQ()

	// Group configs: a bad value is refused, a good one applies at once.
	if err := c.Call(ctx, "PUT", "/v1/groups/"+group+"/config", map[string]any{"configs": map[string]string{"max.delivery.attempts": "0"}}, nil); apiCode(err) != "400 INVALID_CONFIG" {
		t.Fatalf("max.delivery.attempts 0: %v", err)
	}
	var cfg struct {
		Configs map[string]string `json:"configs"`
	}
	if err := callRetrying(ctx, t, c, "PUT", "/v1/groups/"+group+"/config",
		map[string]any{"configs": map[string]string{"max.delivery.attempts": "2", "dlq.topic": "payments-dead"}}, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Configs["max.delivery.attempts"] != "2" || cfg.Configs["dlq.topic"] != "payments-dead" {
		t.Fatalf("configs %v", cfg.Configs)
	}
	for attempt := int32(1); attempt <= 2; attempt++ {
		a, err := nack(1, "still broken")
		if err != nil || a.FailedDeliveries != attempt || a.DeadLettered != (attempt == 2) {
			t.Fatalf("nack %d of offset 1: %+v %v", attempt, a, err)
		}
		if attempt == 2 && a.DLQTopic != "payments-dead" {
			t.Fatalf("dead-lettered to %q", a.DLQTopic)
		}
		positions = []restPosition{{Topic: topic, Partition: 0, Offset: a.NextOffset}}
	}
	if r := fetch(); r.Offset != 2 || *r.Value != "v2" {
		t.Fatalf("after the second dead-letter: offset %d", r.Offset)
	}
	if err := c.Call(ctx, "DELETE", base, nil, nil); err != nil {
		t.Fatal(err)
	}

	// The command line: what the group dead-lettered (now in payments-dead,
	// its dlq.topic), then replayed to the source topic.
	bin, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	skein := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, filepath.Join(bin, "skein"), append(args, "--gateway", d.GRPCAddr)...).CombinedOutput()
		if err != nil {
			t.Fatalf("skein %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := skein("group", "dlq", group, "--topic", topic)
	if !strings.Contains(out, "payments-dead:0@0") || !strings.Contains(out, "payments:0@1") || !strings.Contains(out, "still broken") ||
		!strings.Contains(out, "1 record(s)") {
		t.Fatalf("skein group dlq:\n%s", out)
	}
	out = skein("group", "dlq-replay", group, "--topic", topic)
	if !strings.Contains(out, "payments:0@3") || !strings.Contains(out, "replayed 1 record(s)") {
		t.Fatalf("skein group dlq-replay:\n%s", out)
	}
	var back FetchResponse
	if err := c.Call(ctx, "GET", "/v1/topics/"+topic+"/partitions/0/records?offset=3", nil, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Records) != 1 || *back.Records[0].Key != "k1" || *back.Records[0].Value != "v1" || header(back.Records[0].Headers, "origin") != "test-1" ||
		header(back.Records[0].Headers, "dlq.reason") != "" || back.Records[0].TimestampMs != 1_700_000_000_001 {
		t.Fatalf("the replayed record: %+v", back.Records)
	}

	// The same over a Consume stream: nack, redelivered, dead-lettered, next.
	gs := skeinv1.NewGroupServiceClient(grpcConn(t, d))
	if _, err := gs.SetGroupConfig(ctx, &skeinv1.SetGroupConfigRequest{Group: "stream-dlq", Configs: map[string]string{"max.delivery.attempts": "2"}}); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := gs.Consume(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Subscribe{Subscribe: &skeinv1.JoinGroupRequest{
		Group: "stream-dlq", Topics: []string{topic}, AutoOffsetReset: "earliest"}}}); err != nil {
		t.Fatal(err)
	}
	// next answers the next record of offset 0 or later, skipping others.
	next := func() *skeinv1.ConsumedRecord {
		t.Helper()
		for {
			msg, err := st.Recv()
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			if n := msg.GetNacked(); n != nil {
				t.Fatalf("an unexpected nack answer %v", n)
			}
			if recs := msg.GetRecords().GetRecords(); len(recs) > 0 {
				return recs[0]
			}
		}
	}
	sendNack := func(offset int64) *skeinv1.NackRecordResponse {
		t.Helper()
		if err := st.Send(&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Nack{Nack: &skeinv1.NackRecordRequest{
			Topic: topic, Partition: ptr(int32(0)), Offset: ptr(offset), Reason: "stream says no"}}}); err != nil {
			t.Fatal(err)
		}
		for {
			msg, err := st.Recv()
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			if n := msg.GetNacked(); n != nil {
				return n
			}
		}
	}
	if r := next(); r.GetOffset() != 0 || r.GetDeliveryAttempt() != 1 {
		t.Fatalf("stream: first delivery offset %d attempt %d", r.GetOffset(), r.GetDeliveryAttempt())
	}
	if n := sendNack(0); n.GetErrorCode() != skeinv1.ErrorCode_NONE || n.GetFailedDeliveries() != 1 || n.GetDeadLettered() {
		t.Fatalf("stream nack 1: %v", n)
	}
	if r := next(); r.GetOffset() != 0 || r.GetDeliveryAttempt() != 2 {
		t.Fatalf("stream: redelivery offset %d attempt %d", r.GetOffset(), r.GetDeliveryAttempt())
	}
	if n := sendNack(0); n.GetErrorCode() != skeinv1.ErrorCode_NONE || !n.GetDeadLettered() || n.GetDlqTopic() != topic+".dlq" || n.GetDlqOffset() != 1 {
		t.Fatalf("stream nack 2: %v", n)
	}
	if r := next(); r.GetOffset() != 1 || r.GetDeliveryAttempt() != 1 {
		t.Fatalf("stream: after the dead-letter offset %d attempt %d", r.GetOffset(), r.GetDeliveryAttempt())
	}
	if n := sendNack(99); n.GetErrorCode() != skeinv1.ErrorCode_OFFSET_OUT_OF_RANGE {
		t.Fatalf("stream nack past the high watermark: %v", n)
	}
	cancel()

	// The counters of the coordinator that owns both groups now, the one
	// left: it did every nack after the kill (the nacks before it may have
	// been its too, while the coordinators were still sharing the
	// partitions out at the start: at least, then).
	owner := groupOwner(t, d, group)
	resp, err := c.HC.Get("http://" + owner.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		series string
		min    float64
		exact  bool
	}{
		{`skein_groupcoord_nacks_total{group="billing-dlq",topic="payments"}`, 4, false},
		{`skein_groupcoord_redeliveries_total{group="billing-dlq",topic="payments"}`, 2, false},
		{`skein_groupcoord_dead_lettered_total{group="billing-dlq",topic="payments"}`, 2, true},
		{`skein_groupcoord_nacks_total{group="stream-dlq",topic="payments"}`, 2, true},
		{`skein_groupcoord_redeliveries_total{group="stream-dlq",topic="payments"}`, 1, true},
		{`skein_groupcoord_dead_lettered_total{group="stream-dlq",topic="payments"}`, 1, true},
	} {
		got := -1.0
		for _, line := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(line, m.series+" "); ok {
				got, _ = strconv.ParseFloat(v, 64)
			}
		}
		if got < m.min || m.exact && got != m.min {
			t.Errorf("%s-%d: %s is %v, want %v (at least: %v)", owner.Role, owner.ID, m.series, got, m.min, !m.exact)
		}
	}

	// A source topic of the longest name: its default dead-letter topic
	// keeps its first 236 characters, a hash of the whole and ".dlq" (249
	// in all), so it can be created, like the source; the command line
	// finds it. Its record takes the gateway's clock, and so does its copy.
	long := "long-" + strings.Repeat("x", 244)
	h := fnv.New32a()
	h.Write([]byte(long))
	longDLQ := fmt.Sprintf("%s-%08x.dlq", long[:236], h.Sum32())
	createTopic(ctx, t, c, long, 1, 3, nil)
	if err := c.Call(ctx, "POST", "/v1/topics/"+long+"/records", ProduceRequest{Records: []ProduceRecord{{Key: ptr("lk"), Value: ptr("lv")}}}, &pr); err != nil {
		t.Fatal(err)
	}
	if _, err := gs.SetGroupConfig(ctx, &skeinv1.SetGroupConfigRequest{Group: "long-dlq", Configs: map[string]string{"max.delivery.attempts": "1"}}); err != nil {
		t.Fatal(err)
	}
	lctx, lcancel := context.WithCancel(ctx)
	defer lcancel()
	ls, err := gs.Consume(lctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Send(&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Subscribe{Subscribe: &skeinv1.JoinGroupRequest{
		Group: "long-dlq", Topics: []string{long}, AutoOffsetReset: "earliest"}}}); err != nil {
		t.Fatal(err)
	}
	for got := false; !got; {
		msg, err := ls.Recv()
		if err != nil {
			t.Fatalf("stream of the long topic: %v", err)
		}
		got = len(msg.GetRecords().GetRecords()) > 0
	}
	if err := ls.Send(&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Nack{Nack: &skeinv1.NackRecordRequest{
		Topic: long, Partition: ptr(int32(0)), Offset: ptr(int64(0)), Reason: "too long to handle"}}}); err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := ls.Recv()
		if err != nil {
			t.Fatalf("stream of the long topic: %v", err)
		}
		if n := msg.GetNacked(); n != nil {
			if n.GetErrorCode() != skeinv1.ErrorCode_NONE || !n.GetDeadLettered() || n.GetDlqTopic() != longDLQ {
				t.Fatalf("the nack of the long topic's record: %v, want it dead-lettered to %s", n, longDLQ)
			}
			break
		}
	}
	lcancel()
	var td TopicDescription
	if err := c.Call(ctx, "GET", "/v1/topics/"+longDLQ, nil, &td); err != nil {
		t.Fatal(err)
	}
	if len(td.Partitions) != 1 || len(td.Partitions[0].Replicas) != 3 {
		t.Fatalf("%s: %+v, want it created like the source", longDLQ, td)
	}
	if out := skein("group", "dlq", "long-dlq", "--topic", long); !strings.Contains(out, longDLQ+":0@0") || !strings.Contains(out, "too long to handle") {
		t.Fatalf("skein group dlq of the long topic:\n%s", out)
	}
}

// nackBody posts a nack body as is and answers the error.
func nackBody(ctx context.Context, c *REST, path string, body map[string]any) (*Response, error) {
	resp, err := c.Do(ctx, "POST", path, body)
	if err != nil {
		return nil, err
	}
	if resp.Status != http.StatusOK {
		e := &APIError{Status: resp.Status}
		_ = resp.Decode(e)
		return resp, e
	}
	return resp, nil
}

// Only a committed record is dead-lettered: the nack that would
// dead-letter a record of a transaction still open is refused
// OFFSET_NOT_AVAILABLE (retriable), a record of an aborted transaction and
// a transaction marker OFFSET_OUT_OF_RANGE, and nothing reaches the
// dead-letter topic, where every reader would see it as committed.
func TestNackOnlyCommittedRecords(t *testing.T) {
	d := devCluster(t)
	c := restClient(d)
	ctx := testCtx(t, 2*time.Minute)
	const topic, group, txid = "e2e-nack-txn", "e2e-nack-txn-group", "e2e-nack-txn-producer"
	createTopic(ctx, t, c, topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
	if err := c.Call(ctx, "POST", "/v1/topics/"+topic+"/records", ProduceRequest{Records: []ProduceRecord{{Value: ptr("committed")}}}, &ProduceResponse{}); err != nil {
		t.Fatal(err)
	}
	var id producerIdentity
	if err := c.Call(ctx, "POST", "/v1/producers", map[string]any{"transactional_id": txid}, &id); err != nil {
		t.Fatal(err)
	}
	var pr ProduceResponse
	if err := c.Call(ctx, "POST", "/v1/topics/"+topic+"/partitions/0/records", map[string]any{
		"transactional_id": txid, "producer_id": id.ProducerID, "producer_epoch": id.ProducerEpoch, "base_sequence": 0,
		"records": []map[string]any{{"value": "in-flight"}}}, &pr); err != nil || !written(pr) || pr.Results[0].Offset != 1 {
		t.Fatalf("transactional produce: %+v %v, want offset 1", pr, err)
	}
	if err := callRetrying(ctx, t, c, "PUT", "/v1/groups/"+group+"/config", map[string]any{"configs": map[string]string{"max.delivery.attempts": "1"}}, nil); err != nil {
		t.Fatal(err)
	}
	var m restMember
	if err := callRetrying(ctx, t, c, "POST", "/v1/groups/"+group+"/members", map[string]any{"topics": []string{topic}, "auto_offset_reset": "earliest"}, &m); err != nil {
		t.Fatal(err)
	}
	base := "/v1/groups/" + group + "/members/" + m.ID
	var f groupFetch
	if err := callRetrying(ctx, t, c, "POST", base+"/records", map[string]any{"member_epoch": m.Epoch, "isolation_level": "READ_COMMITTED", "max_wait_ms": 1000}, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Records) != 1 || f.Records[0].Value == nil || *f.Records[0].Value != "committed" {
		t.Fatalf("a read_committed member read %+v, want only the committed record", f.Records)
	}
	m.Epoch = f.MemberEpoch
	nack := func(offset int64) error {
		return callRetrying(ctx, t, c, "POST", base+"/nack", map[string]any{"member_epoch": m.Epoch, "topic": topic, "partition": 0, "offset": offset}, &nackAnswer{})
	}
	if err := nack(1); apiCode(err) != "503 OFFSET_NOT_AVAILABLE" {
		t.Fatalf("the nack that would dead-letter a record of an open transaction: %v, want 503 OFFSET_NOT_AVAILABLE", err)
	}
	if err := c.Call(ctx, "POST", "/v1/transactions/"+txid+":abort", id, &producerIdentity{}); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{1, 2} { // the aborted record, the abort marker
		if err := nack(off); apiCode(err) != "400 OFFSET_OUT_OF_RANGE" {
			t.Errorf("nack of offset %d after the abort: %v, want 400 OFFSET_OUT_OF_RANGE", off, err)
		}
	}
	var topics struct {
		Topics []struct {
			Name string `json:"name"`
		} `json:"topics"`
	}
	if err := c.Call(ctx, "GET", "/v1/topics", nil, &topics); err != nil {
		t.Fatal(err)
	}
	for _, tp := range topics.Topics {
		if tp.Name == topic+".dlq" {
			if got, _ := committedValues(ctx, t, c, topic+".dlq", 0, false); len(got) != 0 {
				t.Fatalf("the dead-letter topic holds %v", got)
			}
		}
	}
	// The committed record is nacked as ever.
	var a nackAnswer
	if err := callRetrying(ctx, t, c, "POST", base+"/nack", map[string]any{"member_epoch": m.Epoch, "topic": topic, "partition": 0, "offset": 0}, &a); err != nil || !a.DeadLettered {
		t.Fatalf("nack of the committed record: %+v %v, want it dead-lettered", a, err)
	}
}
