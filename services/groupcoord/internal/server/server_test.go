package server

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	groupv1 "skein/gen/skein/group/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/peerauth"
	"skein/libs/rpcerr"
	"skein/services/groupcoord/internal/coordinator"
)

// appendLog accepts every write and reads them back.
type appendLog struct {
	mu   sync.Mutex
	recs map[int32][]coordinator.Entry
}

func (l *appendLog) Produce(_ context.Context, p int32, _ coordinator.Identity, recs []coordinator.KV) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range recs {
		l.recs[p] = append(l.recs[p], coordinator.Entry{Offset: int64(len(l.recs[p])), KV: r})
	}
	return int64(len(l.recs[p]) - 1), nil
}

func (l *appendLog) Fetch(_ context.Context, p int32, off int64) ([]coordinator.Entry, int64, int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	end := int64(len(l.recs[p]))
	if off >= end {
		return nil, end, end, nil
	}
	return append([]coordinator.Entry(nil), l.recs[p][off:]...), end, end, nil
}

func (l *appendLog) HighWatermarks(context.Context, string, []int32) (map[int32]int64, error) {
	return nil, nil
}

// newServer answers a server over a coordinator that owns the one
// __consumer_offsets partition, loaded; az decides its callers (nil: off).
func newServer(t *testing.T, az *peerauth.Authorizer) *Server {
	return newServerWith(t, az, map[string]int32{"orders": 2})
}

// newServerWith is newServer with the topics' partition counts.
func newServerWith(t *testing.T, az *peerauth.Authorizer, topics map[string]int32) *Server {
	c := coordinator.New(coordinator.Config{NodeID: 1, NewMemberID: func() string { return "m-1" }},
		&appendLog{recs: map[int32][]coordinator.Entry{}}, nil)
	t.Cleanup(c.Close)
	c.OnMetadata(coordinator.View{Partitions: 1, Owned: map[int32]coordinator.Ownership{0: {Epoch: 1, ProducerID: 7}},
		Topics: topics})
	s := New(c, az)
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, _ := s.OffsetFetch(context.Background(), &groupv1.OffsetFetchRequest{GroupId: "app"})
		if resp.GetErrorCode() == skeinv1.ErrorCode_NONE {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("not loaded: %v", resp.GetErrorCode())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestServer(t *testing.T) {
	s := newServer(t, nil)
	ctx := context.Background()
	hb, err := s.ConsumerGroupHeartbeat(ctx, &groupv1.ConsumerGroupHeartbeatRequest{GroupId: "app", SubscribedTopics: []string{"orders"}})
	if err != nil || hb.GetErrorCode() != skeinv1.ErrorCode_NONE || hb.GetMemberId() != "m-1" || hb.GetMemberEpoch() != 1 ||
		len(hb.GetAssignment()) != 1 || len(hb.GetAssignment()[0].GetPartitions()) != 2 || hb.GetHeartbeatIntervalMs() != 5000 {
		t.Fatalf("join: %v %v", hb, err)
	}
	// Errors travel in error_code.
	for name, req := range map[string]*groupv1.ConsumerGroupHeartbeatRequest{
		"UNKNOWN_MEMBER_ID":       {GroupId: "app", MemberId: "x", MemberEpoch: 1},
		"FENCED_MEMBER_EPOCH":     {GroupId: "app", MemberId: "m-1", MemberEpoch: 9},
		"INVALID_SESSION_TIMEOUT": {GroupId: "app", MemberId: "m-1", MemberEpoch: 1, SessionTimeoutMs: 1},
		"INVALID_GROUP_ID":        {SubscribedTopics: []string{"orders"}},
	} {
		resp, err := s.ConsumerGroupHeartbeat(ctx, req)
		if err != nil || resp.GetErrorCode().String() != name || resp.GetErrorMessage() == "" {
			t.Errorf("%s: %v %v", name, resp, err)
		}
	}
	cr, err := s.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: "app", MemberId: "m-1", MemberEpoch: 1, Offsets: []*groupv1.PartitionOffset{
		{Topic: "orders", Partition: 1, Offset: 5, Metadata: "meta"}, {Topic: "orders", Partition: 7, Offset: 1}}})
	if err != nil || cr.GetPartitions()[0].GetErrorCode() != skeinv1.ErrorCode_NONE ||
		cr.GetPartitions()[1].GetErrorCode() != skeinv1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION {
		t.Fatalf("commit: %v %v", cr, err)
	}
	fr, err := s.OffsetFetch(ctx, &groupv1.OffsetFetchRequest{GroupId: "app", Partitions: []*groupv1.TopicPartitions{{Topic: "orders", Partitions: []int32{0, 1}}}})
	if err != nil || len(fr.GetOffsets()) != 2 || fr.GetOffsets()[0].GetOffset() != -1 || fr.GetOffsets()[1].GetOffset() != 5 || fr.GetOffsets()[1].GetMetadata() != "meta" {
		t.Fatalf("fetch: %v %v", fr, err)
	}
	dr, _ := s.DescribeGroups(ctx, &groupv1.DescribeGroupsRequest{GroupIds: []string{"app", "nope"}})
	if g := dr.GetGroups(); len(g) != 2 || g[0].GetState() != "Stable" || len(g[0].GetMembers()) != 1 ||
		g[1].GetErrorCode() != skeinv1.ErrorCode_GROUP_ID_NOT_FOUND {
		t.Fatalf("describe: %v", dr)
	}
	lr, _ := s.ListGroups(ctx, &groupv1.ListGroupsRequest{})
	if len(lr.GetGroups()) != 1 || lr.GetGroups()[0].GetMembers() != 1 {
		t.Fatalf("list: %v", lr)
	}
	del, _ := s.DeleteGroups(ctx, &groupv1.DeleteGroupsRequest{GroupIds: []string{"app"}})
	if del.GetGroups()[0].GetErrorCode() != skeinv1.ErrorCode_NON_EMPTY_GROUP {
		t.Fatalf("delete: %v", del)
	}
}

// TestTxnOffsets: the transactional offset RPCs and their codes.
func TestTxnOffsets(t *testing.T) {
	s := newServer(t, nil)
	ctx := context.Background()
	tc, err := s.TxnOffsetCommit(ctx, &groupv1.TxnOffsetCommitRequest{TransactionalId: "tx", GroupId: "app", ProducerId: 7, ProducerEpoch: 3,
		Offsets: []*groupv1.PartitionOffset{{Topic: "orders", Partition: 0, Offset: 10, Metadata: "m"}, {Topic: "orders", Partition: 1, Offset: -1},
			{Topic: "nope", Partition: 0, Offset: 1}}})
	if err != nil || len(tc.GetPartitions()) != 3 || tc.GetPartitions()[0].GetErrorCode() != skeinv1.ErrorCode_NONE ||
		tc.GetPartitions()[0].GetTopic() != "orders" ||
		tc.GetPartitions()[1].GetErrorCode() != skeinv1.ErrorCode_INVALID_REQUEST ||
		tc.GetPartitions()[2].GetErrorCode() != skeinv1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION {
		t.Fatalf("txn offset commit: %v %v", tc, err)
	}
	fetch := func(stable bool) *groupv1.CommittedOffset {
		t.Helper()
		fr, err := s.OffsetFetch(ctx, &groupv1.OffsetFetchRequest{GroupId: "app", RequireStable: stable,
			Partitions: []*groupv1.TopicPartitions{{Topic: "orders", Partitions: []int32{0}}}})
		if err != nil || fr.GetErrorCode() != skeinv1.ErrorCode_NONE || len(fr.GetOffsets()) != 1 {
			t.Fatalf("fetch: %v %v", fr, err)
		}
		return fr.GetOffsets()[0]
	}
	if o := fetch(false); o.GetOffset() != -1 || o.GetErrorCode() != skeinv1.ErrorCode_NONE {
		t.Fatalf("a pending offset is visible: %v", o)
	}
	if o := fetch(true); o.GetErrorCode() != skeinv1.ErrorCode_UNSTABLE_OFFSET_COMMIT {
		t.Fatalf("require_stable: %v", o)
	}
	// Whole-request refusals go to every partition.
	for name, req := range map[string]*groupv1.TxnOffsetCommitRequest{
		"PRODUCER_FENCED":        {TransactionalId: "tx", GroupId: "app", ProducerId: 7, ProducerEpoch: 2},
		"INVALID_GROUP_ID":       {TransactionalId: "tx", ProducerId: 7, ProducerEpoch: 3},
		"INVALID_REQUEST":        {GroupId: "app", ProducerId: 7, ProducerEpoch: 3},
		"INVALID_PRODUCER_EPOCH": {TransactionalId: "tx", GroupId: "app", ProducerId: 7, ProducerEpoch: 32767},
	} {
		req.Offsets = []*groupv1.PartitionOffset{{Topic: "orders", Partition: 0, Offset: 1}, {Topic: "orders", Partition: 1, Offset: 1}}
		resp, err := s.TxnOffsetCommit(ctx, req)
		if err != nil || len(resp.GetPartitions()) != 2 {
			t.Fatalf("%s: %v %v", name, resp, err)
		}
		for _, p := range resp.GetPartitions() {
			if p.GetErrorCode().String() != name || p.GetErrorMessage() == "" {
				t.Errorf("%s: %v", name, p)
			}
		}
	}
	// The member fields: both, checked as the member's commit; one alone
	// is malformed.
	one := int32(1)
	for _, tc := range []struct {
		id    string
		epoch *int32
		want  skeinv1.ErrorCode
	}{
		{"ghost", &one, skeinv1.ErrorCode_UNKNOWN_MEMBER_ID},
		{"ghost", nil, skeinv1.ErrorCode_INVALID_REQUEST},
		{"", &one, skeinv1.ErrorCode_INVALID_REQUEST},
	} {
		resp, err := s.TxnOffsetCommit(ctx, &groupv1.TxnOffsetCommitRequest{TransactionalId: "tx", GroupId: "app", ProducerId: 7, ProducerEpoch: 3,
			MemberId: tc.id, MemberEpoch: tc.epoch, Offsets: []*groupv1.PartitionOffset{{Topic: "orders", Partition: 1, Offset: 1}}})
		if err != nil || len(resp.GetPartitions()) != 1 || resp.GetPartitions()[0].GetErrorCode() != tc.want {
			t.Errorf("member %q epoch %v: %v %v, want %s", tc.id, tc.epoch, resp, err, tc.want)
		}
	}
	// No offsets: no partition to carry the code.
	if _, err := s.TxnOffsetCommit(ctx, &groupv1.TxnOffsetCommitRequest{TransactionalId: "tx", GroupId: "app", ProducerId: 7, ProducerEpoch: 3}); status.Code(err) != codes.InvalidArgument ||
		errs.Of(rpcerr.FromStatus(err)) != errs.InvalidRequest {
		t.Fatalf("no offsets: %v", err)
	}
	// Completion: refusals are statuses carrying the row.
	for name, tc := range map[string]struct {
		req  *groupv1.CompleteTxnOffsetsRequest
		want *errs.Error
	}{
		"empty group id": {&groupv1.CompleteTxnOffsetsRequest{ProducerId: 7, ProducerEpoch: 4}, errs.InvalidGroupID},
		"bad epoch":      {&groupv1.CompleteTxnOffsetsRequest{GroupId: "app", ProducerId: 7, ProducerEpoch: -1}, errs.InvalidRequest},
		"bad producer":   {&groupv1.CompleteTxnOffsetsRequest{GroupId: "app", ProducerId: -1, ProducerEpoch: 4}, errs.InvalidRequest},
	} {
		if _, err := s.CompleteTxnOffsets(ctx, tc.req); errs.Of(rpcerr.FromStatus(err)) != tc.want {
			t.Errorf("complete, %s: %v, want %s", name, err, tc.want.Name)
		}
	}
	if o := fetch(true); o.GetErrorCode() != skeinv1.ErrorCode_UNSTABLE_OFFSET_COMMIT {
		t.Fatalf("a refused completion applied: %v", o)
	}
	for range 2 { // the second is a retry: OK, nothing to do
		if _, err := s.CompleteTxnOffsets(ctx, &groupv1.CompleteTxnOffsetsRequest{GroupId: "app", ProducerId: 7, ProducerEpoch: 4, Committed: true}); err != nil {
			t.Fatalf("complete: %v", err)
		}
	}
	if o := fetch(true); o.GetErrorCode() != skeinv1.ErrorCode_NONE || o.GetOffset() != 10 || o.GetMetadata() != "m" {
		t.Fatalf("after the commit: %v", o)
	}
	if _, err := s.CompleteTxnOffsets(ctx, &groupv1.CompleteTxnOffsetsRequest{GroupId: "unknown", ProducerId: 7, ProducerEpoch: 4}); err != nil {
		t.Fatalf("complete of an unknown group: %v", err)
	}
}

// TestDescribeRevoking: a member's description tells the partitions being
// revoked from it apart from those assigned to it, also once its target
// gives one back; owning what it is assigned confirms the revocation.
func TestDescribeRevoking(t *testing.T) {
	s := newServer(t, nil)
	ctx := context.Background()
	hb := func(req *groupv1.ConsumerGroupHeartbeatRequest) *groupv1.ConsumerGroupHeartbeatResponse {
		t.Helper()
		req.GroupId = "app"
		resp, err := s.ConsumerGroupHeartbeat(ctx, req)
		if err != nil || resp.GetErrorCode() != skeinv1.ErrorCode_NONE {
			t.Fatalf("heartbeat %v: %v %v", req, resp, err)
		}
		return resp
	}
	describe := func() (*groupv1.GroupDescription, *groupv1.MemberDescription) {
		t.Helper()
		dr, err := s.DescribeGroups(ctx, &groupv1.DescribeGroupsRequest{GroupIds: []string{"app"}})
		if err != nil || len(dr.GetGroups()) != 1 {
			t.Fatalf("describe: %v %v", dr, err)
		}
		for _, m := range dr.GetGroups()[0].GetMembers() {
			if m.GetMemberId() == "a" {
				return dr.GetGroups()[0], m
			}
		}
		t.Fatalf("describe: no member a in %v", dr)
		return nil, nil
	}
	both := []*groupv1.TopicPartitions{{Topic: "orders", Partitions: []int32{0, 1}}}
	a := hb(&groupv1.ConsumerGroupHeartbeatRequest{MemberId: "a", SubscribedTopics: []string{"orders"}})
	hb(&groupv1.ConsumerGroupHeartbeatRequest{MemberId: "b", SubscribedTopics: []string{"orders"}})
	// a is told to give one partition up.
	kept := hb(&groupv1.ConsumerGroupHeartbeatRequest{MemberId: "a", MemberEpoch: a.GetMemberEpoch(), OwnedPartitions: both}).GetAssignment()
	if len(kept) != 1 || len(kept[0].GetPartitions()) != 1 {
		t.Fatalf("a keeps %v, want one partition", kept)
	}
	revoked := 1 - kept[0].GetPartitions()[0]
	// b leaves before a calls again: the revoked partition is a's target again.
	hb(&groupv1.ConsumerGroupHeartbeatRequest{MemberId: "b", MemberEpoch: -1})
	_, m := describe()
	if got := fmt.Sprint(m.GetRevoking()); got != fmt.Sprint([]*groupv1.TopicPartitions{{Topic: "orders", Partitions: []int32{revoked}}}) {
		t.Fatalf("a revoking %s, want orders:%d", got, revoked)
	}
	if fmt.Sprint(m.GetAssignment()) != fmt.Sprint(both) || fmt.Sprint(m.GetTargetAssignment()) != fmt.Sprint(both) {
		t.Fatalf("a holds %v, targets %v; want both partitions", m.GetAssignment(), m.GetTargetAssignment())
	}
	// Owning its assignment less what is being revoked lets a finish.
	resp := hb(&groupv1.ConsumerGroupHeartbeatRequest{MemberId: "a", MemberEpoch: a.GetMemberEpoch(), OwnedPartitions: kept})
	if fmt.Sprint(resp.GetAssignment()) != fmt.Sprint(both) {
		t.Fatalf("a is assigned %v, want both partitions", resp.GetAssignment())
	}
	if g, m := describe(); g.GetState() != "Stable" || len(m.GetRevoking()) != 0 {
		t.Fatalf("group %s, a revoking %v; want Stable, nothing", g.GetState(), m.GetRevoking())
	}
}
