package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client/clienttest"
	"skein/libs/errs"
	"skein/libs/record"
	"skein/libs/rpcerr"
)

// groupEnv is a fake cluster with a group coordinator and two gateways in
// front of it.
type groupEnv struct {
	*env
	other *env // a second gateway on the same cluster
	coord *clienttest.GroupCoordinator
}

func startGroups(t *testing.T) *groupEnv {
	t.Helper()
	e := start(t)
	coord, _ := e.cluster.StartGroupCoordinator(t, 1)
	g2, err := New(Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Controllers: []string{e.cluster.ControllerAddr}, ShutdownGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g2.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	other := &env{t: t, cluster: e.cluster, gw: g2, base: "http://" + g2.HTTPAddr()}
	e.waitReady()
	other.waitReady()
	return &groupEnv{env: e, other: other, coord: coord}
}

// produce writes n records to each partition of a topic.
func (e *env) produce(topic string, partitions, n int) {
	e.t.Helper()
	var recs []string
	for p := range partitions {
		for i := range n {
			recs = append(recs, fmt.Sprintf(`{"value": "%d-%d", "partition": %d}`, p, i, p))
		}
	}
	e.mustDo("POST", "/v1/topics/"+topic+"/records", `{"records": [`+strings.Join(recs, ",")+`]}`)
}

type member struct {
	id        string
	epoch     int
	positions []any // as the last answer gave them
}

func (m *member) path(group string) string { return "/v1/groups/" + group + "/members/" + m.id }

func asInt(v any) int {
	switch x := v.(type) {
	case float64:
		return int(x)
	case string:
		n, _ := strconv.Atoi(x)
		return n
	}
	return -1
}

// partitionsOf flattens an assignment answer.
func partitionsOf(assignment any) []int {
	var out []int
	for _, a := range assignment.([]any) {
		for _, p := range a.(map[string]any)["partitions"].([]any) {
			out = append(out, asInt(p))
		}
	}
	slices.Sort(out)
	return out
}

// fetch is one member fetch that echoes the last positions; it answers the
// records read as partition -> offsets, and the assignment.
func (e *env) fetch(group string, m *member, seen map[int][]int) []int {
	e.t.Helper()
	body := map[string]any{"member_epoch": m.epoch, "max_records": 7}
	if m.positions != nil {
		body["positions"] = m.positions
	}
	raw, _ := json.Marshal(body)
	out := e.mustDo("POST", m.path(group)+"/records", string(raw))
	m.epoch = asInt(out["member_epoch"])
	m.positions = out["positions"].([]any)
	for _, r := range out["records"].([]any) {
		rec := r.(map[string]any)
		p := asInt(rec["partition"])
		seen[p] = append(seen[p], asInt(rec["offset"]))
	}
	return partitionsOf(out["assignment"])
}

func (e *env) join(group, body string) *member {
	e.t.Helper()
	out := e.mustDo("POST", "/v1/groups/"+group+"/members", body)
	id, _ := out["member_id"].(string)
	if id == "" || asInt(out["member_epoch"]) <= 0 || asInt(out["heartbeat_interval_ms"]) <= 0 {
		e.t.Fatalf("join answered %v", out)
	}
	return &member{id: id, epoch: asInt(out["member_epoch"])}
}

// Two members over REST, each call going to one of two gateways in turn:
// the second member's arrival moves three partitions, which the first
// commits as it gives them up, and every record is read exactly once.
func TestGroupOverRESTAnyGatewayExactlyOnce(t *testing.T) {
	e := startGroups(t)
	e.mustDo("POST", "/v1/topics", `{"name": "t", "partitions": 6, "replication_factor": 1}`)
	e.produce("t", 6, 10)
	gws := []*env{e.env, e.other}
	call := 0
	next := func() *env { call++; return gws[call%2] }

	seen := map[int][]int{}
	a := next().join("g", `{"topics": ["t"], "auto_offset_reset": "earliest"}`)
	if got := next().fetch("g", a, seen); len(got) != 6 {
		t.Fatalf("alone, a holds %v", got)
	}
	b := next().join("g", `{"topics": ["t"], "auto_offset_reset": "earliest", "assignor": "uniform"}`)
	var pa, pb []int
	deadline := time.Now().Add(10 * time.Second)
	for len(pa) != 3 || len(pb) != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("no 3/3 split: a %v, b %v", pa, pb)
		}
		pa = next().fetch("g", a, seen)
		pb = next().fetch("g", b, seen)
	}
	for _, p := range pa {
		if slices.Contains(pb, p) {
			t.Fatalf("partition %d owned by both: a %v, b %v", p, pa, pb)
		}
	}
	for total := 0; total < 60 && time.Now().Before(deadline); {
		next().fetch("g", a, seen)
		next().fetch("g", b, seen)
		total = 0
		for _, offs := range seen {
			total += len(offs)
		}
	}
	for p := range 6 {
		if want := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(seen[p], want) {
			t.Errorf("partition %d read %v, want each of 0..9 once", p, seen[p])
		}
	}

	// Commit what was read, then describe: lag 0 everywhere.
	for _, m := range []*member{a, b} {
		var offs []string
		for _, pos := range m.positions {
			p := pos.(map[string]any)
			offs = append(offs, fmt.Sprintf(`{"topic": "t", "partition": %d, "offset": %d, "metadata": "m"}`, asInt(p["partition"]), asInt(p["offset"])))
		}
		res := next().mustDo("POST", "/v1/groups/g/offsets", fmt.Sprintf(`{"member_id": %q, "member_epoch": %d, "offsets": [%s]}`, m.id, m.epoch, strings.Join(offs, ",")))
		if len(res["results"].([]any)) != 3 {
			t.Errorf("commit answered %v", res)
		}
	}
	e.produce("t", 6, 1)
	d := next().mustDo("GET", "/v1/groups/g", "")
	if d["state"] != "STABLE" || len(d["members"].([]any)) != 2 || asInt(d["total_lag"]) != 6 || len(d["offsets"].([]any)) != 6 {
		t.Errorf("describe %v", d)
	}
	offs := next().mustDo("GET", "/v1/groups/g/offsets", "")
	for _, o := range offs["offsets"].([]any) {
		m := o.(map[string]any)
		if asInt(m["offset"]) != 10 || asInt(m["high_watermark"]) != 11 || asInt(m["lag"]) != 1 || m["metadata"] != "m" {
			t.Errorf("committed offset %v", m)
		}
	}
	list := next().mustDo("GET", "/v1/groups", "")
	if gs := list["groups"].([]any); len(gs) != 1 || gs[0].(map[string]any)["group"] != "g" || asInt(gs[0].(map[string]any)["members"]) != 2 {
		t.Errorf("list %v", list)
	}

	// b leaves: a takes everything back through heartbeats alone.
	next().mustDo("DELETE", b.path("g"), "")
	for len(pa) != 6 && time.Now().Before(deadline) {
		out := next().mustDo("POST", a.path("g")+"/heartbeat", fmt.Sprintf(`{"member_epoch": %d}`, a.epoch))
		a.epoch, pa = asInt(out["member_epoch"]), partitionsOf(out["assignment"])
	}
	if len(pa) != 6 {
		t.Errorf("after b left a holds %v", pa)
	}
	next().mustDo("DELETE", a.path("g"), "")
	next().mustDo("DELETE", "/v1/groups/g", "")
	if code, body := next().do("GET", "/v1/groups/g", ""); code != 404 || body["error_code"] != "GROUP_ID_NOT_FOUND" || body["message"] != `group "g": the group does not exist` {
		t.Errorf("describe after delete: %d %v", code, body)
	}
}

// Every refusal has its status and code, and changes nothing.
func TestGroupRefusals(t *testing.T) {
	e := startGroups(t)
	e.mustDo("POST", "/v1/topics", `{"name": "t", "partitions": 2, "replication_factor": 1}`)
	a := e.join("g", `{"topics": ["t"], "auto_offset_reset": "earliest"}`)
	e.fetch("g", a, map[int][]int{})
	b := e.join("g", `{"topics": ["t"]}`)
	// Settle to one partition each.
	for range 20 {
		pa := e.fetch("g", a, map[int][]int{})
		pb := e.fetch("g", b, map[int][]int{})
		if len(pa) == 1 && len(pb) == 1 {
			break
		}
	}
	owned := map[string]int{}
	for id, ps := range e.coord.Members("g") {
		if len(ps) != 1 {
			t.Fatalf("members %v", e.coord.Members("g"))
		}
		owned[id] = int(ps[0])
	}
	mine, theirs := owned[a.id], owned[b.id]
	e.mustDo("POST", "/v1/groups/g/offsets", fmt.Sprintf(`{"member_id": %q, "member_epoch": %d, "offsets": [{"topic": "t", "partition": %d, "offset": 0}]}`, a.id, a.epoch, mine))
	commits := e.coord.Commits()
	members := e.coord.Members("g")

	commit := func(member string, epoch int, offsets string) string {
		return fmt.Sprintf(`{"member_id": %q, "member_epoch": %d, "offsets": [%s]}`, member, epoch, offsets)
	}
	off := func(p int, meta string) string {
		return fmt.Sprintf(`{"topic": "t", "partition": %d, "offset": 5, "metadata": %q}`, p, meta)
	}
	big := strings.Repeat("x", 4097)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"join with no topics", "POST", "/v1/groups/g/members", `{"topics": []}`, 400, "INVALID_REQUEST"},
		{"join with an unknown assignor", "POST", "/v1/groups/g/members", `{"topics": ["t"], "assignor": "roundrobin"}`, 400, "UNSUPPORTED_ASSIGNOR"},
		{"join with a zero session timeout", "POST", "/v1/groups/g/members", `{"topics": ["t"], "session_timeout_ms": 0}`, 400, "INVALID_SESSION_TIMEOUT"},
		{"join with a negative session timeout", "POST", "/v1/groups/g/members", `{"topics": ["t"], "session_timeout_ms": -5}`, 400, "INVALID_SESSION_TIMEOUT"},
		{"join with a session timeout below the coordinator's bound", "POST", "/v1/groups/g/members", `{"topics": ["t"], "session_timeout_ms": 10}`, 400, "INVALID_SESSION_TIMEOUT"},
		{"join with a bad auto_offset_reset", "POST", "/v1/groups/g/members", `{"topics": ["t"], "auto_offset_reset": "middle"}`, 400, "INVALID_REQUEST"},
		{"join an unknown topic", "POST", "/v1/groups/g/members", `{"topics": ["nope"]}`, 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"join a bad topic name", "POST", "/v1/groups/g/members", `{"topics": ["a b"]}`, 400, "INVALID_TOPIC_EXCEPTION"},
		{"heartbeat in an unknown group", "POST", "/v1/groups/nope/members/" + a.id + "/heartbeat", `{"member_epoch": 1}`, 404, "UNKNOWN_MEMBER_ID"},
		{"heartbeat of an unknown member", "POST", "/v1/groups/g/members/nobody/heartbeat", `{"member_epoch": 1}`, 404, "UNKNOWN_MEMBER_ID"},
		{"heartbeat at a stale epoch", "POST", a.path("g") + "/heartbeat", fmt.Sprintf(`{"member_epoch": %d}`, a.epoch+7), 409, "FENCED_MEMBER_EPOCH"},
		{"heartbeat at epoch 0", "POST", a.path("g") + "/heartbeat", `{"member_epoch": 0}`, 400, "INVALID_REQUEST"},
		{"fetch of an unknown member", "POST", "/v1/groups/g/members/nobody/records", `{"member_epoch": 1}`, 404, "UNKNOWN_MEMBER_ID"},
		{"fetch at a stale epoch", "POST", a.path("g") + "/records", fmt.Sprintf(`{"member_epoch": %d}`, a.epoch+7), 409, "FENCED_MEMBER_EPOCH"},
		{"fetch with max_records 0", "POST", a.path("g") + "/records", fmt.Sprintf(`{"member_epoch": %d, "max_records": 0}`, a.epoch), 400, "INVALID_REQUEST"},
		{"fetch at a negative position", "POST", a.path("g") + "/records", fmt.Sprintf(`{"member_epoch": %d, "positions": [{"topic": "t", "partition": %d, "offset": -2}]}`, a.epoch, mine), 400, "OFFSET_OUT_OF_RANGE"},
		{"commit of an unknown member", "POST", "/v1/groups/g/offsets", commit("nobody", 1, off(mine, "")), 404, "UNKNOWN_MEMBER_ID"},
		{"commit in an unknown group", "POST", "/v1/groups/nope/offsets", commit(a.id, a.epoch, off(mine, "")), 404, "UNKNOWN_MEMBER_ID"},
		{"commit at a stale epoch", "POST", "/v1/groups/g/offsets", commit(a.id, a.epoch+7, off(mine, "")), 409, "STALE_MEMBER_EPOCH"},
		{"commit of another member's partition", "POST", "/v1/groups/g/offsets", commit(a.id, a.epoch, off(mine, "")+","+off(theirs, "")), 409, "STALE_MEMBER_EPOCH"},
		{"commit with metadata over 4096 bytes", "POST", "/v1/groups/g/offsets", commit(a.id, a.epoch, off(mine, big)), 400, "OFFSET_METADATA_TOO_LARGE"},
		{"commit of nothing", "POST", "/v1/groups/g/offsets", commit(a.id, a.epoch, ""), 400, "INVALID_REQUEST"},
		{"commit of a negative offset", "POST", "/v1/groups/g/offsets", commit(a.id, a.epoch, `{"topic": "t", "partition": 0, "offset": -3}`), 400, "INVALID_REQUEST"},
		{"commit of a partition out of range", "POST", "/v1/groups/g/offsets", commit(a.id, a.epoch, off(9, "")), 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"reset of a group with members", "POST", "/v1/groups/g/offsets", commit("", -1, off(mine, "")), 409, "NON_EMPTY_GROUP"},
		{"describe an unknown group", "GET", "/v1/groups/nope", "", 404, "GROUP_ID_NOT_FOUND"},
		{"offsets of an unknown group", "GET", "/v1/groups/nope/offsets", "", 404, "GROUP_ID_NOT_FOUND"},
		{"delete a group with members", "DELETE", "/v1/groups/g", "", 409, "NON_EMPTY_GROUP"},
		{"leave of an unknown member", "DELETE", "/v1/groups/g/members/nobody", "", 404, "UNKNOWN_MEMBER_ID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.do(tc.method, tc.path, tc.body)
			if code != tc.status || body["error_code"] != tc.code {
				t.Fatalf("%d %v, want %d %s", code, body, tc.status, tc.code)
			}
			if msg, _ := body["message"].(string); msg == "" {
				t.Errorf("no message in %v", body)
			}
			if got := e.coord.Members("g"); !equalMembers(got, members) {
				t.Errorf("members changed: %v, were %v", got, members)
			}
			if e.coord.Commits() != commits {
				t.Errorf("a commit reached the coordinator")
			}
			if off := e.coord.Committed("g", "t", int32(mine)); off != 0 {
				t.Errorf("committed offset moved to %d", off)
			}
		})
	}

	// The same over gRPC: the code and the Kafka name in ErrorInfo.
	cl := skeinv1.NewGroupServiceClient(dialGRPC(t, e.other.gw.GRPCAddr()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	grpcWant := func(name string, err error, want string) {
		t.Helper()
		st := status.Convert(err)
		var reason string
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok {
				reason = info.Reason
			}
		}
		if reason != want {
			t.Errorf("%s over gRPC: %v (%s), want %s", name, st.Code(), reason, want)
		}
	}
	_, err := cl.JoinGroup(ctx, &skeinv1.JoinGroupRequest{Group: "g"})
	grpcWant("join with no topics", err, "INVALID_REQUEST")
	_, err = cl.JoinGroup(ctx, &skeinv1.JoinGroupRequest{Group: "g", Topics: []string{"t"}, Assignor: "sticky"})
	grpcWant("unknown assignor", err, "UNSUPPORTED_ASSIGNOR")
	_, err = cl.JoinGroup(ctx, &skeinv1.JoinGroupRequest{Group: "", Topics: []string{"t"}})
	grpcWant("empty group id", err, "INVALID_GROUP_ID")
	_, err = cl.Heartbeat(ctx, &skeinv1.HeartbeatRequest{Group: "g", MemberId: "nobody", MemberEpoch: 1})
	grpcWant("unknown member", err, "UNKNOWN_MEMBER_ID")
	_, err = cl.CommitOffsets(ctx, &skeinv1.CommitOffsetsRequest{Group: "g", MemberId: a.id, MemberEpoch: int32(a.epoch),
		Offsets: []*skeinv1.TopicPartitionOffset{{Topic: "t", Partition: int32(theirs), Offset: 1}}})
	grpcWant("unowned partition", err, "STALE_MEMBER_EPOCH")
	_, err = cl.CommitOffsets(ctx, &skeinv1.CommitOffsetsRequest{Group: "g", MemberId: a.id, MemberEpoch: int32(a.epoch),
		Offsets: []*skeinv1.TopicPartitionOffset{{Topic: "t", Partition: int32(mine), Offset: 1, Metadata: big}}})
	grpcWant("metadata too large", err, "OFFSET_METADATA_TOO_LARGE")
	if e.coord.Commits() != commits || e.coord.Committed("g", "t", int32(mine)) != 0 {
		t.Errorf("a refused gRPC commit changed offsets")
	}
}

func equalMembers(a, b map[string][]int32) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// An empty group's offsets can be reset (a commit with no member id and
// epoch -1), and the next member starts there.
func TestGroupResetOffsetsOfAnEmptyGroup(t *testing.T) {
	e := startGroups(t)
	e.mustDo("POST", "/v1/topics", `{"name": "t", "replication_factor": 1}`)
	e.produce("t", 1, 5)
	e.mustDo("POST", "/v1/groups/g/offsets", `{"member_id": "", "member_epoch": -1, "offsets": [{"topic": "t", "partition": 0, "offset": 3}]}`)
	m := e.join("g", `{"topics": ["t"], "auto_offset_reset": "earliest"}`)
	seen := map[int][]int{}
	e.fetch("g", m, seen)
	if !slices.Equal(seen[0], []int{3, 4}) {
		t.Errorf("after the reset to 3 the member read %v", seen[0])
	}
}

// DELETE /v1/groups/{group}/offsets deletes a group's offsets of a topic
// no member reads, per partition as Kafka's OffsetDelete: the offsets of a
// topic a member subscribes to stay (GROUP_SUBSCRIBED_TO_TOPIC), and once
// they are gone a new member starts at its auto_offset_reset.
func TestGroupDeleteOffsets(t *testing.T) {
	e := startGroups(t)
	e.mustDo("POST", "/v1/topics", `{"name": "t", "partitions": 2, "replication_factor": 1}`)
	e.mustDo("POST", "/v1/topics", `{"name": "u", "partitions": 2, "replication_factor": 1}`)
	e.produce("t", 2, 5)
	e.mustDo("POST", "/v1/groups/g/offsets", `{"member_epoch": -1, "offsets": [{"topic": "t", "partition": 0, "offset": 3}, {"topic": "t", "partition": 1, "offset": 4},
		{"topic": "u", "partition": 0, "offset": 1}, {"topic": "u", "partition": 1, "offset": 2}]}`)
	a := e.join("g", `{"topics": ["t"]}`)
	results := func(out map[string]any) string {
		t.Helper()
		var got []string
		for _, r := range out["results"].([]any) {
			m := r.(map[string]any)
			if m["error_code"] != "NONE" && m["message"] == "" {
				t.Errorf("a refused partition without a message: %v", m)
			}
			got = append(got, fmt.Sprintf("%s:%d=%s", m["topic"], asInt(m["partition"]), m["error_code"]))
		}
		return strings.Join(got, " ")
	}
	committed := func() string {
		var got []string
		for _, tp := range []struct {
			topic string
			p     int32
		}{{"t", 0}, {"t", 1}, {"u", 0}, {"u", 1}} {
			got = append(got, fmt.Sprintf("%s:%d=%d", tp.topic, tp.p, e.coord.Committed("g", tp.topic, tp.p)))
		}
		return strings.Join(got, " ")
	}

	// The member reads t: every partition of it stays.
	out := e.mustDo("DELETE", "/v1/groups/g/offsets?topic=t", "")
	if got, want := results(out), "t:0=GROUP_SUBSCRIBED_TO_TOPIC t:1=GROUP_SUBSCRIBED_TO_TOPIC"; got != want {
		t.Fatalf("delete of the subscribed topic: %s, want %s", got, want)
	}
	// u is not read: the partitions named go, in partition order; one the
	// topic does not have is answered as Kafka does, the rest decided.
	out = e.mustDo("DELETE", "/v1/groups/g/offsets?topic=u&partition=5&partition=1", "")
	if got, want := results(out), "u:1=NONE u:5=UNKNOWN_TOPIC_OR_PARTITION"; got != want {
		t.Fatalf("delete of u:5 and u:1: %s, want %s", got, want)
	}
	if got, want := committed(), "t:0=3 t:1=4 u:0=1 u:1=-1"; got != want {
		t.Fatalf("committed after deleting u:1: %s, want %s", got, want)
	}

	// Refused as a whole, nothing deleted.
	for _, tc := range []struct {
		name, path string
		status     int
		code       string
	}{
		{"no topic", "/v1/groups/g/offsets", 400, "INVALID_REQUEST"},
		{"an empty topic", "/v1/groups/g/offsets?topic=", 400, "INVALID_REQUEST"},
		{"a bad topic name", "/v1/groups/g/offsets?topic=a%20b", 400, "INVALID_TOPIC_EXCEPTION"},
		{"an unknown topic", "/v1/groups/g/offsets?topic=nope", 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"a negative partition", "/v1/groups/g/offsets?topic=u&partition=-1", 400, "INVALID_REQUEST"},
		{"a partition twice", "/v1/groups/g/offsets?topic=u&partition=0&partition=0", 400, "INVALID_REQUEST"},
		{"a partition that is no number", "/v1/groups/g/offsets?topic=u&partition=zero", 400, "INVALID_REQUEST"},
		{"a misspelt parameter", "/v1/groups/g/offsets?topic=u&partitions=0", 400, "INVALID_REQUEST"},
		{"an unknown group", "/v1/groups/nope/offsets?topic=u", 404, "GROUP_ID_NOT_FOUND"},
		{"an unknown group, no partition left", "/v1/groups/nope/offsets?topic=u&partition=7", 404, "GROUP_ID_NOT_FOUND"},
		{"a group id too long", "/v1/groups/" + strings.Repeat("g", 256) + "/offsets?topic=u", 400, "INVALID_GROUP_ID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.do("DELETE", tc.path, "")
			if code != tc.status || body["error_code"] != tc.code {
				t.Fatalf("%d %v, want %d %s", code, body, tc.status, tc.code)
			}
			if msg, _ := body["message"].(string); msg == "" {
				t.Errorf("no message in %v", body)
			}
			if got, want := committed(), "t:0=3 t:1=4 u:0=1 u:1=-1"; got != want {
				t.Errorf("committed after a refusal: %s, want %s", got, want)
			}
		})
	}
	// The same over gRPC: the Kafka name in ErrorInfo.
	cl := skeinv1.NewGroupServiceClient(dialGRPC(t, e.other.gw.GRPCAddr()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		req  *skeinv1.DeleteOffsetsRequest
		want *errs.Error
	}{
		{&skeinv1.DeleteOffsetsRequest{Group: "g"}, errs.InvalidRequest},
		{&skeinv1.DeleteOffsetsRequest{Topic: "u"}, errs.InvalidGroupID},
		{&skeinv1.DeleteOffsetsRequest{Group: "nope", Topic: "u"}, errs.GroupIDNotFound},
		{&skeinv1.DeleteOffsetsRequest{Group: "g", Topic: "u", Partition: []int32{-2}}, errs.InvalidRequest},
	} {
		if _, err := cl.DeleteOffsets(ctx, tc.req); errs.Of(rpcerr.FromStatus(err)) != tc.want {
			t.Errorf("%v over gRPC: %v, want %s", tc.req, err, tc.want.Name)
		}
	}

	// Once the member left, t's offsets go too, and the description no
	// longer lists them.
	e.mustDo("DELETE", a.path("g"), "")
	out = e.mustDo("DELETE", "/v1/groups/g/offsets?topic=t", "")
	if got, want := results(out), "t:0=NONE t:1=NONE"; got != want {
		t.Fatalf("delete of t in the empty group: %s, want %s", got, want)
	}
	if got, want := committed(), "t:0=-1 t:1=-1 u:0=1 u:1=-1"; got != want {
		t.Fatalf("committed after deleting t: %s, want %s", got, want)
	}
	d := e.mustDo("GET", "/v1/groups/g", "")
	for _, o := range d["offsets"].([]any) {
		if o.(map[string]any)["topic"] == "t" {
			t.Errorf("the description still lists %v", o)
		}
	}
	// A new member starts at its auto_offset_reset: earliest, from 0.
	b := e.join("g", `{"topics": ["t"], "auto_offset_reset": "earliest"}`)
	seen := map[int][]int{}
	for deadline := time.Now().Add(10 * time.Second); len(seen[0]) < 5 || len(seen[1]) < 5; {
		if time.Now().After(deadline) {
			t.Fatalf("the new member read %v", seen)
		}
		e.fetch("g", b, seen)
	}
	if seen[0][0] != 0 || seen[1][0] != 0 {
		t.Errorf("the new member started at %d and %d, want 0 (earliest)", seen[0][0], seen[1][0])
	}
}

// subscribe opens a Consume stream on e's gateway and subscribes it to
// topic as a member of group, reading from the earliest offset.
func subscribe(t *testing.T, ctx context.Context, e *groupEnv, group, topic string) skeinv1.GroupService_ConsumeClient {
	t.Helper()
	return subscribeFrom(t, ctx, e, group, topic, "earliest")
}

// subscribeFrom is subscribe with the member's auto_offset_reset.
func subscribeFrom(t *testing.T, ctx context.Context, e *groupEnv, group, topic, reset string) skeinv1.GroupService_ConsumeClient {
	t.Helper()
	stream, err := skeinv1.NewGroupServiceClient(dialGRPC(t, e.gw.GRPCAddr())).Consume(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Subscribe{Subscribe: &skeinv1.JoinGroupRequest{
		Group: group, Topics: []string{topic}, AutoOffsetReset: reset}}}); err != nil {
		t.Fatal(err)
	}
	return stream
}

// readSome receives on stream until an answer carries records.
func readSome(t *testing.T, stream skeinv1.GroupService_ConsumeClient) {
	t.Helper()
	for read := false; !read; {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		read = len(resp.GetRecords().GetRecords()) > 0
	}
}

// A Consume stream subscribed with an isolation level that is neither
// READ_UNCOMMITTED nor READ_COMMITTED is refused, and the gateway serves on.
func TestGroupConsumeStreamRefusesAnUnknownIsolationLevel(t *testing.T) {
	e := startGroups(t)
	e.mustDo("POST", "/v1/topics", `{"name": "t", "partitions": 1, "replication_factor": 1}`)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	stream, err := skeinv1.NewGroupServiceClient(dialGRPC(t, e.gw.GRPCAddr())).Consume(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Subscribe{Subscribe: &skeinv1.JoinGroupRequest{
		Group: "s", Topics: []string{"t"}, IsolationLevel: skeinv1.IsolationLevel(7)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); errs.Of(rpcerr.FromStatus(err)) != errs.InvalidRequest || !strings.Contains(err.Error(), "isolation_level 7") {
		t.Fatalf("a subscribe with isolation level 7: %v, want INVALID_REQUEST", err)
	}
	if got := e.coord.Members("s"); len(got) != 0 {
		t.Errorf("the refused subscribe joined: %v", got)
	}
	stream = subscribe(t, ctx, e, "s", "t")
	if resp, err := stream.Recv(); err != nil || resp.GetJoined() == nil {
		t.Fatalf("a subscribe after the refusal: %v %v", resp, err)
	}
}

// waitLeft waits until group has no member left at the coordinator.
func waitLeft(t *testing.T, e *groupEnv, group string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(e.coord.Members(group)) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the member did not leave: %v", e.coord.Members(group))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// When a Consume stream ends, its member leaves without committing what
// was streamed: the client commits what it processed, and a record sent to
// it but never processed is read again by the partition's next owner.
func TestGroupConsumeStreamEndCommitsOnlyWhatTheClientDid(t *testing.T) {
	e := startGroups(t)
	e.mustDo("POST", "/v1/topics", `{"name": "t", "partitions": 1, "replication_factor": 1}`)
	e.produce("t", 1, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	sctx, end := context.WithCancel(ctx)
	stream := subscribe(t, sctx, e, "s", "t")
	streamed := 0
	for streamed < 10 {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		streamed += len(resp.GetRecords().GetRecords())
	}
	// The client processed three of them, and commits that.
	if err := stream.Send(&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Commit{Commit: &skeinv1.CommitOffsetsRequest{
		Group: "s", Offsets: []*skeinv1.TopicPartitionOffset{{Topic: "t", Partition: 0, Offset: 3}}}}}); err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if c := resp.GetCommitted(); c != nil {
			if len(c.GetResults()) != 1 || c.GetResults()[0].GetErrorCode() != skeinv1.ErrorCode_NONE {
				t.Fatalf("commit of 3: %v", c)
			}
			break
		}
	}
	end() // the client stops, as a consumer that was interrupted does
	waitLeft(t, e, "s")
	if got := e.coord.Committed("s", "t", 0); got != 3 {
		t.Fatalf("committed %d after the stream ended, want the client's 3 (10 were streamed)", got)
	}
}

// A client that commits and half-closes its stream at once (as grpcurl
// does) has that commit run before the member leaves.
func TestGroupConsumeStreamRunsTheLastCommitBeforeLeaving(t *testing.T) {
	e := startGroups(t)
	e.mustDo("POST", "/v1/topics", `{"name": "t", "partitions": 1, "replication_factor": 1}`)
	e.produce("t", 1, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for round := int64(1); round <= 6; round++ {
		stream := subscribe(t, ctx, e, "s", "t")
		readSome(t, stream)
		if err := stream.Send(&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Commit{Commit: &skeinv1.CommitOffsetsRequest{
			Group: "s", Offsets: []*skeinv1.TopicPartitionOffset{{Topic: "t", Partition: 0, Offset: round}}}}}); err != nil {
			t.Fatal(err)
		}
		if err := stream.CloseSend(); err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := stream.Recv(); err != nil {
				break // the stream ended
			}
		}
		waitLeft(t, e, "s")
		if got := e.coord.Committed("s", "t", 0); got != round {
			t.Fatalf("round %d: committed %d, want the client's last commit, %d", round, got, round)
		}
	}
}

// A commit on a Consume stream is answered at once, not after the
// gateway's wait for records on an idle topic (half a second) has passed.
func TestGroupConsumeStreamAnswersCommitsAtOnce(t *testing.T) {
	e := startGroups(t)
	e.coord.SetHeartbeatInterval(time.Minute) // no heartbeat cuts the gateway's wait short
	e.mustDo("POST", "/v1/topics", `{"name": "t", "partitions": 1, "replication_factor": 1}`)
	e.produce("t", 1, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	stream := subscribe(t, ctx, e, "s", "t")
	readSome(t, stream)
	// The topic is idle now: each commit arrives while the gateway waits.
	var took []time.Duration
	for range 5 {
		time.Sleep(50 * time.Millisecond)
		start := time.Now()
		if err := stream.Send(&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Commit{Commit: &skeinv1.CommitOffsetsRequest{
			Group: "s", Offsets: []*skeinv1.TopicPartitionOffset{{Topic: "t", Partition: 0, Offset: 1}}}}}); err != nil {
			t.Fatal(err)
		}
		for {
			resp, err := stream.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetCommitted() != nil {
				break
			}
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	t.Logf("commits answered after %v", took)
	// Waiting out the rest of the gateway's wait, each took 450 ms here.
	if took[2] > 100*time.Millisecond {
		t.Errorf("commits answered after %v: the median is over 100 ms", took)
	}
}

// Consume over gRPC: subscribe, get records and the assignment, commit on
// the stream; the consumed records join their producer's trace.
func TestGroupConsumeStream(t *testing.T) {
	e := startGroups(t)
	e.mustDo("POST", "/v1/topics", `{"name": "t", "partitions": 2, "replication_factor": 1}`)
	spans.Reset()
	e.produce("t", 2, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	stream := subscribe(t, ctx, e, "s", "t")
	resp, err := stream.Recv()
	if err != nil || resp.GetJoined() == nil || resp.GetJoined().GetMemberId() == "" {
		t.Fatalf("first answer %v %v", resp, err)
	}
	got := map[int32]int64{}
	for n := 0; n < 6; {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resp.GetRecords().GetRecords() {
			got[r.GetPartition()] = r.GetOffset() + 1
			n++
		}
	}
	if got[0] != 3 || got[1] != 3 {
		t.Fatalf("read up to %v", got)
	}
	var offs []*skeinv1.TopicPartitionOffset
	for p, o := range got {
		offs = append(offs, &skeinv1.TopicPartitionOffset{Topic: "t", Partition: p, Offset: o})
	}
	offs = append(offs, &skeinv1.TopicPartitionOffset{Topic: "t", Partition: 0, Offset: 1, Metadata: strings.Repeat("x", 5000)})
	if err := stream.Send(&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Commit{Commit: &skeinv1.CommitOffsetsRequest{Group: "s", Offsets: offs}}}); err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		c := resp.GetCommitted()
		if c == nil {
			continue
		}
		if len(c.GetResults()) != 3 {
			t.Fatalf("commit results %v", c)
		}
		codes := map[skeinv1.ErrorCode]int{}
		for _, r := range c.GetResults() {
			codes[r.GetErrorCode()]++
		}
		if codes[skeinv1.ErrorCode_NONE] != 2 || codes[skeinv1.ErrorCode_OFFSET_METADATA_TOO_LARGE] != 1 {
			t.Errorf("commit results %v", c)
		}
		break
	}
	if e.coord.Committed("s", "t", 0) != 3 || e.coord.Committed("s", "t", 1) != 3 {
		t.Errorf("committed %d %d", e.coord.Committed("s", "t", 0), e.coord.Committed("s", "t", 1))
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := stream.Recv(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(e.coord.Members("s")) != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if ms := e.coord.Members("s"); len(ms) != 0 {
		t.Errorf("the member did not leave when the stream ended: %v", ms)
	}

	// Each consumed record's produce trace holds a consume span.
	produceTraces := map[string]bool{}
	consumeTraces := map[string]bool{}
	for _, s := range spans.GetSpans() {
		switch s.Name {
		case "skein.v1.ProducerService/Produce":
			produceTraces[s.SpanContext.TraceID().String()] = true
		case "skein.consume":
			consumeTraces[s.SpanContext.TraceID().String()] = true
			if len(s.Links) != 1 {
				t.Errorf("consume span links %v", s.Links)
			}
		}
	}
	if len(produceTraces) == 0 {
		t.Fatal("no produce span")
	}
	for tr := range produceTraces {
		if !consumeTraces[tr] {
			t.Errorf("produce trace %s has no consume span", tr)
		}
	}
}

// A commit or nack on a Consume stream is for the stream's own group: one
// that names no group commits there, one that names another is refused in
// its result and commits nothing, and the stream goes on.
func TestGroupConsumeStreamCommitsForItsOwnGroup(t *testing.T) {
	e := startGroups(t)
	e.mustDo("POST", "/v1/topics", `{"name": "t", "partitions": 1, "replication_factor": 1}`)
	e.produce("t", 1, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	stream := subscribe(t, ctx, e, "s", "t")
	readSome(t, stream)
	send := func(m *skeinv1.ConsumeRequest) *skeinv1.ConsumeResponse {
		t.Helper()
		if err := stream.Send(m); err != nil {
			t.Fatal(err)
		}
		for {
			resp, err := stream.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetCommitted() != nil || resp.GetNacked() != nil {
				return resp
			}
		}
	}
	commit := func(group string, offset int64) *skeinv1.CommitOffsetsResponse {
		return send(&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Commit{Commit: &skeinv1.CommitOffsetsRequest{
			Group: group, Offsets: []*skeinv1.TopicPartitionOffset{{Topic: "t", Partition: 0, Offset: offset}}}}}).GetCommitted()
	}
	if r := commit("", 1).GetResults(); len(r) != 1 || r[0].GetErrorCode() != skeinv1.ErrorCode_NONE {
		t.Fatalf("a commit naming no group: %v", r)
	}
	if got := e.coord.Committed("s", "t", 0); got != 1 {
		t.Fatalf("committed %d in the stream's group, want 1", got)
	}
	if r := commit("other", 2).GetResults(); len(r) != 1 || r[0].GetErrorCode() != skeinv1.ErrorCode_INVALID_REQUEST {
		t.Fatalf("a commit naming another group: %v, want INVALID_REQUEST", r)
	}
	if got, other := e.coord.Committed("s", "t", 0), e.coord.Committed("other", "t", 0); got != 1 || other != -1 {
		t.Fatalf("after the refused commit: %d in the stream's group, %d in the other, want 1 and none", got, other)
	}
	zero, off := int32(0), int64(0)
	nack := send(&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Nack{Nack: &skeinv1.NackRecordRequest{
		Group: "other", Topic: "t", Partition: &zero, Offset: &off}}}).GetNacked()
	if nack.GetErrorCode() != skeinv1.ErrorCode_INVALID_REQUEST {
		t.Fatalf("a nack naming another group: %v, want INVALID_REQUEST", nack)
	}
}

// A member whose partitions start at their reset offset is sent where it
// stands, with no records, so that it can commit it (as a Kafka consumer
// commits its positions): a group reading from latest would otherwise skip
// what is written between two of its runs. Said once, not on every wait.
func TestGroupConsumeStreamSendsPositionsThatMoveWithoutRecords(t *testing.T) {
	e := startGroups(t)
	e.mustDo("POST", "/v1/topics", `{"name": "t", "partitions": 1, "replication_factor": 1}`)
	e.produce("t", 1, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	stream := subscribeFrom(t, ctx, e, "late", "t", "latest")
	recv := make(chan *skeinv1.ConsumeResponse, 16)
	go func() {
		for {
			resp, err := stream.Recv()
			if err != nil {
				close(recv)
				return
			}
			recv <- resp
		}
	}()
	var told []*skeinv1.FetchGroupRecordsResponse
	deadline := time.After(3 * time.Second) // several of the gateway's waits
	for done := false; !done; {
		select {
		case resp, ok := <-recv:
			if !ok {
				t.Fatal("the stream ended")
			}
			if r := resp.GetRecords(); r != nil {
				told = append(told, r)
			}
		case <-deadline:
			done = true
		}
	}
	if len(told) != 1 || len(told[0].GetRecords()) != 0 || len(told[0].GetPositions()) != 1 || told[0].GetPositions()[0].GetOffset() != 3 {
		t.Fatalf("sent %v, want one message without records, at position 3", told)
	}
}

// A REST commit names each partition and its offset: JSON can leave the
// offset out, which protobuf would read as 0 and so rewind the group to
// the partition's start.
func TestRESTCommitNeedsEveryOffset(t *testing.T) {
	e := startGroups(t)
	e.mustDo("POST", "/v1/topics", `{"name": "ct", "partitions": 1, "replication_factor": 1}`)
	e.produce("ct", 1, 3)
	e.mustDo("POST", "/v1/groups/cg/offsets", `{"member_epoch": -1, "offsets": [{"topic": "ct", "partition": 0, "offset": 2}]}`)
	code, out := e.do("POST", "/v1/groups/cg/offsets", `{"member_epoch": -1, "offsets": [{"topic": "ct", "partition": 0}]}`)
	if code != 400 || out["error_code"] != "INVALID_REQUEST" || out["message"] != "offsets[0]: offset is missing: a commit names each partition and the offset to commit" {
		t.Fatalf("a commit without its offset: %d %v", code, out)
	}
	offs := e.mustDo("GET", "/v1/groups/cg/offsets", "")["offsets"].([]any)
	if len(offs) != 1 || offs[0].(map[string]any)["offset"] != "2" {
		t.Fatalf("offsets after the refused commit: %v, want offset 2 kept", offs)
	}
	// An offset of 0 that is written is a commit like any other.
	e.mustDo("POST", "/v1/groups/cg/offsets", `{"member_epoch": -1, "offsets": [{"topic": "ct", "partition": 0, "offset": 0}]}`)
	offs = e.mustDo("GET", "/v1/groups/cg/offsets", "")["offsets"].([]any)
	if len(offs) != 1 || offs[0].(map[string]any)["offset"] != "0" {
		t.Fatalf("offsets after committing 0: %v", offs)
	}
}

// A member's fetch names each position's offset: one left out would read
// as 0 and send the member back to the partition's start.
func TestRESTMemberPositionsNeedEveryOffset(t *testing.T) {
	e := startGroups(t)
	e.mustDo("POST", "/v1/topics", `{"name": "pt", "partitions": 1, "replication_factor": 1}`)
	e.produce("pt", 1, 3)
	m := e.join("pg", `{"topics": ["pt"], "auto_offset_reset": "earliest"}`)
	path := "/v1/groups/pg/members/" + m.id + "/records"
	for _, body := range []string{
		fmt.Sprintf(`{"member_epoch": %d, "positions": [{"topic": "pt", "partition": 0}]}`, m.epoch),
		fmt.Sprintf(`{"member_epoch": %d, "positions": [{"topic": "pt", "partition": 0, "offset": null}]}`, m.epoch),
	} {
		code, out := e.do("POST", path, body)
		if code != 400 || out["error_code"] != "INVALID_REQUEST" || !strings.HasPrefix(fmt.Sprint(out["message"]), "positions[0]: offset is missing") {
			t.Errorf("%s: %d %v, want 400 INVALID_REQUEST naming positions[0]", body, code, out)
		}
	}
	out := e.mustDo("POST", path, fmt.Sprintf(`{"member_epoch": %d, "positions": [{"topic": "pt", "partition": 0, "offset": 2}]}`, m.epoch))
	if recs := out["records"].([]any); len(recs) != 1 || recs[0].(map[string]any)["offset"] != "2" {
		t.Errorf("from position 2: %v, want the record at 2 alone", recs)
	}
}

// A second Consume stream that joins as the same member (a client that
// reconnected before the gateway saw its first stream end) takes the
// member over: the first stream ends FENCED_MEMBER_EPOCH without leaving
// the group, and the member reads on in the second, alone.
func TestGroupConsumeStreamTakesOverItsMember(t *testing.T) {
	e := startGroups(t)
	e.mustDo("POST", "/v1/topics", `{"name": "t", "partitions": 1, "replication_factor": 1}`)
	e.produce("t", 1, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	join := func() skeinv1.GroupService_ConsumeClient {
		stream, err := skeinv1.NewGroupServiceClient(dialGRPC(t, e.gw.GRPCAddr())).Consume(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Subscribe{Subscribe: &skeinv1.JoinGroupRequest{
			Group: "s", Topics: []string{"t"}, AutoOffsetReset: "earliest", MemberId: "m-same"}}}); err != nil {
			t.Fatal(err)
		}
		return stream
	}
	first := join()
	readSome(t, first)
	second := join()
	readSome(t, second)
	// The first ends, fenced.
	for {
		_, err := first.Recv()
		if err == nil {
			continue
		}
		if st := status.Convert(err); !strings.Contains(st.Message(), "another Consume stream joined") || !strings.Contains(fmt.Sprint(st.Details()), "FENCED_MEMBER_EPOCH") {
			t.Fatalf("the first stream ended with %v, want FENCED_MEMBER_EPOCH naming the takeover", err)
		}
		break
	}
	// The member is still in the group, once, and reads on in the second;
	// the first stream's read from the leader has ended.
	time.Sleep(300 * time.Millisecond)
	if m := e.coord.Members("s"); len(m) != 1 {
		t.Fatalf("members after the takeover: %v, want the one member", m)
	}
	e.produce("t", 1, 1)
	readSome(t, second)
	leader := e.cluster.Leader("t", 0)
	for deadline := time.Now().Add(5 * time.Second); leader.FollowOpen() != 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d reads open at the leader after the takeover, want the second stream's one", leader.FollowOpen())
		}
	}
}

// A batch damaged on its leader: a member's fetch answers the records
// before it, then CORRUPT_MESSAGE naming it, rather than empty answers
// for ever (as Kafka's poll throws CorruptRecordException).
func TestGroupFetchReportsACorruptBatch(t *testing.T) {
	e := startGroups(t)
	e.mustDo("POST", "/v1/topics", `{"name": "c", "partitions": 2, "replication_factor": 1}`)
	build := func(base int64, values ...string) record.Batch {
		opts := record.DefaultBatchOptions()
		opts.BaseOffset = record.Offset(base)
		b := record.NewBuilder(opts)
		for _, v := range values {
			b.Append(1, nil, []byte(v))
		}
		out, _, err := b.Build(nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	bad := build(2, "c", "d")
	bad[len(bad)-2] ^= 0xff
	e.cluster.Leader("c", 0).SetBatches("c", 0, build(0, "a", "b"), bad)
	e.cluster.Leader("c", 1).SetBatches("c", 1, build(0, "x")) // a healthy partition beside it
	m := e.join("g", `{"topics": ["c"], "auto_offset_reset": "earliest"}`)
	var got []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		body := fmt.Sprintf(`{"member_epoch": %d, "max_wait_ms": 100}`, m.epoch)
		if m.positions != nil {
			b, _ := json.Marshal(map[string]any{"member_epoch": m.epoch, "max_wait_ms": 100, "positions": m.positions})
			body = string(b)
		}
		code, out := e.do("POST", m.path("g")+"/records", body)
		if code != http.StatusOK {
			if out["error_code"] != "CORRUPT_MESSAGE" || !strings.Contains(fmt.Sprint(out["message"]), "offset 2") {
				t.Fatalf("fetch: %d %v, want CORRUPT_MESSAGE naming offset 2", code, out)
			}
			break
		}
		for _, r := range out["records"].([]any) {
			got = append(got, fmt.Sprint(r.(map[string]any)["value"]))
		}
		m.epoch, m.positions = asInt(out["member_epoch"]), out["positions"].([]any)
		if time.Now().After(deadline) {
			t.Fatalf("fetches answered %v and never CORRUPT_MESSAGE", got)
		}
	}
	// The other partition's x may come in the same answers, or not (the
	// damaged batch fails the member's fetch as a whole).
	got = slices.DeleteFunc(got, func(v string) bool { return v == "x" })
	if strings.Join(got, ",") != "a,b" {
		t.Errorf("read %v before the damaged batch, want a,b", got)
	}
}
