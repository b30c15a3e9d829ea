package server

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	controllerv1 "skein/gen/skein/controller/v1"
	groupv1 "skein/gen/skein/group/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/acl"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/libs/peerauth"
	"skein/libs/rpcerr"
)

// testAuthorizer decides with grants and the super user User:admin.
func testAuthorizer(t *testing.T, grants ...acl.Binding) *peerauth.Authorizer {
	t.Helper()
	img := metadata.New("c")
	var recs []*controllerv1.MetadataRecord
	for _, b := range grants {
		recs = append(recs, metadata.AclRecord(b))
	}
	if err := img.Apply(&controllerv1.MetadataDelta{Version: 1, Records: recs}); err != nil {
		t.Fatal(err)
	}
	return peerauth.NewAuthorizer(func() *metadata.Image { return img }, map[string]bool{"User:admin": true}, slog.New(slog.DiscardHandler))
}

func allow(principal string, typ acl.ResourceType, name string, op acl.Operation) acl.Binding {
	return acl.Binding{Principal: principal, Resource: typ, Name: name, Pattern: acl.Literal, Operation: op, Permission: acl.Allow}
}

var (
	gatewayPeer  = peerauth.Peer{Role: peerauth.RoleGateway, ID: "1", Principal: "User:gateway-1"}
	txncoordPeer = peerauth.Peer{Role: peerauth.RoleTxnCoord, ID: "1", Principal: "User:txncoord-1"}
)

// viaGateway is a call the gateway makes for a client.
func viaGateway(principal string) context.Context {
	return peerauth.WithCaller(context.Background(), peerauth.CallerOf(gatewayPeer, principal))
}

// withCert is a call of a client with its own certificate.
func withCert(name string) context.Context {
	p := peerauth.Peer{Role: "client", ID: name, Principal: "User:" + name}
	return peerauth.WithCaller(context.Background(), peerauth.CallerOf(p, ""))
}

// TestAuthorization: every handler refuses a caller without the ACL it
// needs, with the code the gateway and the client surface, and serves one
// with it; Skein's own services and plaintext callers are never refused.
func TestAuthorization(t *testing.T) {
	az := testAuthorizer(t,
		allow("User:reader", acl.Group, "app", acl.Read), allow("User:reader", acl.Topic, "orders", acl.Read),
		allow("User:reader", acl.Topic, "orders.dlq", acl.Write), allow("User:reader", acl.Topic, "orders.dlq", acl.Create),
		allow("User:writer", acl.Group, "app", acl.Read), allow("User:writer", acl.Topic, "orders.dlq", acl.Write),
		allow("User:grouponly", acl.Group, "app", acl.Read),
		allow("User:describer", acl.Group, "app", acl.Describe),
		allow("User:alterer", acl.Group, "app", acl.Alter),
		allow("User:wild", acl.Group, "app", acl.Alter), allow("User:wild", acl.Topic, "*", acl.Write),
		acl.Binding{Principal: "User:wild", Resource: acl.Topic, Name: "payments", Pattern: acl.Literal, Operation: acl.Write, Permission: acl.Deny},
		allow("User:txn", acl.TransactionalID, "tx", acl.Write),
		allow("User:txnfull", acl.TransactionalID, "tx", acl.Write), allow("User:txnfull", acl.Group, "app", acl.Read),
	)
	s := newServer(t, az)
	const groupDenied, topicDenied, txnDenied = skeinv1.ErrorCode_GROUP_AUTHORIZATION_FAILED, skeinv1.ErrorCode_TOPIC_AUTHORIZATION_FAILED,
		skeinv1.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED
	bob, reader := viaGateway("User:bob"), viaGateway("User:reader")
	join := &groupv1.ConsumerGroupHeartbeatRequest{GroupId: "app", SubscribedTopics: []string{"orders"}}

	// Joining reads the group and each subscribed topic.
	for name, tc := range map[string]struct {
		ctx  context.Context
		want skeinv1.ErrorCode
	}{
		"no ACL":                       {bob, groupDenied},
		"no ACL, own certificate":      {withCert("bob"), groupDenied},
		"the group but not the topics": {viaGateway("User:grouponly"), topicDenied},
		"describe is not read":         {viaGateway("User:describer"), groupDenied},
	} {
		hb, err := s.ConsumerGroupHeartbeat(tc.ctx, join)
		if err != nil || hb.GetErrorCode() != tc.want || hb.GetErrorMessage() == "" || hb.GetMemberId() != "" {
			t.Errorf("join, %s: %v %v, want %s", name, hb, err, tc.want)
		}
	}
	hb, err := s.ConsumerGroupHeartbeat(reader, join)
	if err != nil || hb.GetErrorCode() != skeinv1.ErrorCode_NONE || hb.GetMemberEpoch() != 1 {
		t.Fatalf("join with the ACLs: %v %v", hb, err)
	}
	// A heartbeat without topics needs the group only.
	hb, err = s.ConsumerGroupHeartbeat(viaGateway("User:grouponly"), &groupv1.ConsumerGroupHeartbeatRequest{GroupId: "app", MemberId: "m-1", MemberEpoch: 1})
	if err != nil || hb.GetErrorCode() != skeinv1.ErrorCode_NONE {
		t.Fatalf("heartbeat with the group's ACL: %v %v", hb, err)
	}

	// Committing and fetching offsets read the group.
	commit := &groupv1.OffsetCommitRequest{GroupId: "app", MemberId: "m-1", MemberEpoch: 1,
		Offsets: []*groupv1.PartitionOffset{{Topic: "orders", Partition: 0, Offset: 3}, {Topic: "orders", Partition: 1, Offset: 4}}}
	cr, err := s.OffsetCommit(bob, commit)
	if err != nil || len(cr.GetPartitions()) != 2 {
		t.Fatalf("refused commit: %v %v", cr, err)
	}
	for _, p := range cr.GetPartitions() {
		if p.GetErrorCode() != groupDenied || p.GetErrorMessage() == "" {
			t.Errorf("refused commit: %v", p)
		}
	}
	if _, err := s.OffsetCommit(bob, &groupv1.OffsetCommitRequest{GroupId: "app"}); status.Code(err) != codes.PermissionDenied ||
		errs.Of(rpcerr.FromStatus(err)) != errs.GroupAuthorizationFailed {
		t.Errorf("refused commit of nothing: %v", err)
	}
	if cr, err := s.OffsetCommit(reader, commit); err != nil || cr.GetPartitions()[0].GetErrorCode() != skeinv1.ErrorCode_NONE ||
		cr.GetPartitions()[1].GetErrorCode() != skeinv1.ErrorCode_NONE {
		t.Fatalf("commit with the ACL: %v %v", cr, err)
	}
	fetch := &groupv1.OffsetFetchRequest{GroupId: "app", Partitions: []*groupv1.TopicPartitions{{Topic: "orders", Partitions: []int32{0}}}}
	if fr, err := s.OffsetFetch(bob, fetch); err != nil || fr.GetErrorCode() != groupDenied || len(fr.GetOffsets()) != 0 {
		t.Errorf("refused fetch: %v %v", fr, err)
	}
	// Reading offsets needs describe, as Kafka's OffsetFetch: lag
	// monitors describe groups they are not members of.
	if fr, err := s.OffsetFetch(viaGateway("User:describer"), fetch); err != nil || fr.GetErrorCode() != skeinv1.ErrorCode_NONE || fr.GetOffsets()[0].GetOffset() != 3 {
		t.Errorf("fetch with describe only: %v %v", fr, err)
	}
	if fr, err := s.OffsetFetch(reader, fetch); err != nil || fr.GetErrorCode() != skeinv1.ErrorCode_NONE || fr.GetOffsets()[0].GetOffset() != 3 {
		t.Errorf("fetch with the ACL: %v %v", fr, err)
	}

	// Nack reads the group (this one, past the check, is the
	// coordinator's to refuse: no such partition).
	nack := &groupv1.NackRequest{GroupId: "app", MemberId: "m-1", MemberEpoch: 1, Topic: "orders", Partition: 9, Offset: 3, Reason: "bad"}
	if nr, err := s.Nack(bob, nack); err != nil || nr.GetErrorCode() != groupDenied || nr.GetErrorMessage() == "" {
		t.Errorf("refused nack: %v %v", nr, err)
	}
	if nr, err := s.Nack(reader, nack); err != nil || nr.GetErrorCode() != skeinv1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION {
		t.Errorf("nack with the ACL: %v %v", nr, err)
	}
	// The coordinator writes dead letters as itself: a member may nack
	// only into a dead-letter topic it may write.
	if nr, err := s.Nack(viaGateway("User:grouponly"), nack); err != nil || nr.GetErrorCode() != topicDenied || !strings.Contains(nr.GetErrorMessage(), "orders.dlq") {
		t.Errorf("nack without write on the dead-letter topic: %v %v", nr, err)
	}
	// The coordinator creates a dead-letter topic that does not exist yet:
	// write on it is not enough then, as Kafka's auto-creation.
	if nr, err := s.Nack(viaGateway("User:writer"), nack); err != nil || nr.GetErrorCode() != topicDenied || !strings.Contains(nr.GetErrorMessage(), "create") {
		t.Errorf("nack into a dead-letter topic still to be created, without create on it: %v %v", nr, err)
	}

	// Describing needs describe (read implies it); altering alter;
	// deleting delete.
	describe := &groupv1.DescribeGroupsRequest{GroupIds: []string{"app", "other"}}
	if dr, err := s.DescribeGroups(bob, describe); err != nil || len(dr.GetGroups()) != 2 || dr.GetGroups()[0].GetErrorCode() != groupDenied ||
		dr.GetGroups()[1].GetErrorCode() != groupDenied || len(dr.GetGroups()[0].GetMembers()) != 0 {
		t.Errorf("refused describe: %v %v", dr, err)
	}
	for _, who := range []string{"User:describer", "User:reader"} {
		dr, err := s.DescribeGroups(viaGateway(who), describe)
		if err != nil || dr.GetGroups()[0].GetErrorCode() != skeinv1.ErrorCode_NONE || len(dr.GetGroups()[0].GetMembers()) != 1 ||
			dr.GetGroups()[1].GetErrorCode() != groupDenied {
			t.Errorf("describe as %s: %v %v", who, dr, err)
		}
		gc, err := s.DescribeGroupConfig(viaGateway(who), &groupv1.DescribeGroupConfigRequest{GroupId: "app"})
		if err != nil || gc.GetErrorCode() != skeinv1.ErrorCode_NONE {
			t.Errorf("describe config as %s: %v %v", who, gc, err)
		}
	}
	if gc, err := s.DescribeGroupConfig(bob, &groupv1.DescribeGroupConfigRequest{GroupId: "app"}); err != nil || gc.GetErrorCode() != groupDenied ||
		gc.GetErrorMessage() == "" || len(gc.GetConfigs()) != 0 {
		t.Errorf("refused describe config: %v %v", gc, err)
	}
	alter := &groupv1.AlterGroupConfigRequest{GroupId: "app", Configs: map[string]string{"max.delivery.attempts": "3"}}
	if ac, err := s.AlterGroupConfig(viaGateway("User:describer"), alter); err != nil || ac.GetErrorCode() != groupDenied || ac.GetErrorMessage() == "" {
		t.Errorf("refused alter config: %v %v", ac, err)
	}
	if ac, err := s.AlterGroupConfig(viaGateway("User:admin"), alter); err != nil || ac.GetErrorCode() != skeinv1.ErrorCode_NONE {
		t.Errorf("alter config as a super user: %v %v", ac, err)
	}
	// Naming a dead-letter topic needs write on it: the coordinator would
	// write there as itself.
	redirect := &groupv1.AlterGroupConfigRequest{GroupId: "app", Configs: map[string]string{"dlq.topic": "payments"}}
	if ac, err := s.AlterGroupConfig(viaGateway("User:alterer"), redirect); err != nil || ac.GetErrorCode() != topicDenied || !strings.Contains(ac.GetErrorMessage(), "payments") {
		t.Errorf("dlq.topic without write on it: %v %v", ac, err)
	}
	// The topic checked is the one kept: spaces around a denied name do not
	// slip it past its DENY (the value is kept trimmed).
	for _, name := range []string{"payments", " payments", "payments\t"} {
		r := &groupv1.AlterGroupConfigRequest{GroupId: "app", Configs: map[string]string{"dlq.topic": name}}
		if ac, err := s.AlterGroupConfig(viaGateway("User:wild"), r); err != nil || ac.GetErrorCode() != topicDenied {
			t.Errorf("dlq.topic %q under a DENY on payments: %v %v", name, ac, err)
		}
	}
	wild := &groupv1.AlterGroupConfigRequest{GroupId: "app", Configs: map[string]string{"dlq.topic": " audit "}}
	if ac, err := s.AlterGroupConfig(viaGateway("User:wild"), wild); err != nil || ac.GetErrorCode() != skeinv1.ErrorCode_NONE || ac.GetConfigs()["dlq.topic"] != "audit" {
		t.Errorf("dlq.topic audit under write on every topic: %v %v", ac, err)
	}
	if ac, err := s.AlterGroupConfig(viaGateway("User:alterer"), alter); err != nil || ac.GetErrorCode() != skeinv1.ErrorCode_NONE {
		t.Errorf("alter config with the group's alter ACL: %v %v", ac, err)
	}
	del := &groupv1.DeleteGroupsRequest{GroupIds: []string{"app"}}
	if dr, err := s.DeleteGroups(reader, del); err != nil || dr.GetGroups()[0].GetErrorCode() != groupDenied || dr.GetGroups()[0].GetErrorMessage() == "" {
		t.Errorf("refused delete: %v %v", dr, err)
	}
	if dr, err := s.DeleteGroups(viaGateway("User:admin"), del); err != nil || dr.GetGroups()[0].GetErrorCode() != skeinv1.ErrorCode_NON_EMPTY_GROUP {
		t.Errorf("delete as a super user (decided, then refused by the group): %v %v", dr, err)
	}

	// A listing leaves out what the caller may not describe.
	for ctx, want := range map[context.Context][]string{
		bob: nil, reader: {"app"}, viaGateway("User:describer"): {"app"}, viaGateway("User:txn"): nil,
	} {
		lr, err := s.ListGroups(ctx, &groupv1.ListGroupsRequest{})
		var got []string
		for _, g := range lr.GetGroups() {
			got = append(got, g.GetGroupId())
		}
		if err != nil || !slices.Equal(got, want) {
			p, _ := peerauth.CallerFrom(ctx)
			t.Errorf("list as %s: %v %v, want %v", p.Principal, got, err, want)
		}
	}

	// Transactional offsets write the transactional id and read the group.
	txnCommit := func(ctx context.Context, offsets ...*groupv1.PartitionOffset) (*groupv1.TxnOffsetCommitResponse, error) {
		return s.TxnOffsetCommit(ctx, &groupv1.TxnOffsetCommitRequest{TransactionalId: "tx", GroupId: "app", ProducerId: 7, ProducerEpoch: 3, Offsets: offsets})
	}
	for name, tc := range map[string]struct {
		ctx  context.Context
		want skeinv1.ErrorCode
	}{
		"no ACL":                {bob, txnDenied},
		"the group only":        {reader, txnDenied},
		"the transactional id":  {viaGateway("User:txn"), groupDenied},
		"both":                  {viaGateway("User:txnfull"), skeinv1.ErrorCode_NONE},
		"own certificate, none": {withCert("txnless"), txnDenied},
	} {
		resp, err := txnCommit(tc.ctx, &groupv1.PartitionOffset{Topic: "orders", Partition: 0, Offset: 10}, &groupv1.PartitionOffset{Topic: "orders", Partition: 1, Offset: 11})
		if err != nil || len(resp.GetPartitions()) != 2 {
			t.Fatalf("txn commit, %s: %v %v", name, resp, err)
		}
		for _, p := range resp.GetPartitions() {
			if p.GetErrorCode() != tc.want || (tc.want != skeinv1.ErrorCode_NONE && p.GetErrorMessage() == "") {
				t.Errorf("txn commit, %s: %v, want %s", name, p, tc.want)
			}
		}
	}
	if _, err := txnCommit(bob); errs.Of(rpcerr.FromStatus(err)) != errs.TransactionalIDAuthorizationFailed {
		t.Errorf("refused txn commit of nothing: %v", err)
	}

	// Skein's own services (the gateway for itself, a transaction
	// coordinator) and plaintext callers are not subject to ACLs.
	for name, ctx := range map[string]context.Context{
		"the gateway for itself":    peerauth.WithCaller(context.Background(), peerauth.CallerOf(gatewayPeer, "")),
		"a transaction coordinator": peerauth.WithCaller(context.Background(), peerauth.CallerOf(txncoordPeer, "")),
		"plaintext":                 context.Background(),
	} {
		if fr, err := s.OffsetFetch(ctx, fetch); err != nil || fr.GetErrorCode() != skeinv1.ErrorCode_NONE {
			t.Errorf("%s: fetch %v %v", name, fr, err)
		}
		if dr, err := s.DescribeGroups(ctx, describe); err != nil || dr.GetGroups()[0].GetErrorCode() != skeinv1.ErrorCode_NONE ||
			dr.GetGroups()[1].GetErrorCode() != skeinv1.ErrorCode_GROUP_ID_NOT_FOUND {
			t.Errorf("%s: describe %v %v", name, dr, err)
		}
		if lr, err := s.ListGroups(ctx, &groupv1.ListGroupsRequest{}); err != nil || len(lr.GetGroups()) != 1 {
			t.Errorf("%s: list %v %v", name, lr, err)
		}
		if hb, err := s.ConsumerGroupHeartbeat(ctx, &groupv1.ConsumerGroupHeartbeatRequest{GroupId: "app", MemberId: "m-1", MemberEpoch: 1}); err != nil ||
			hb.GetErrorCode() != skeinv1.ErrorCode_NONE {
			t.Errorf("%s: heartbeat %v %v", name, hb, err)
		}
		if dr, err := s.DeleteGroups(ctx, del); err != nil || dr.GetGroups()[0].GetErrorCode() != skeinv1.ErrorCode_NON_EMPTY_GROUP {
			t.Errorf("%s: delete %v %v", name, dr, err)
		}
	}
}

// TestRules: only a transaction coordinator's certificate completes a
// transaction's offsets; every other method is open to every peer (its
// handler decides); the rules name real methods.
func TestRules(t *testing.T) {
	rules := Rules()
	methods := peerauth.MethodsOf(groupv1.GroupCoordinatorService_ServiceDesc)
	for m := range rules {
		if !slices.Contains(methods, m) {
			t.Errorf("rule for %s, not a method of the service", m)
		}
	}
	complete := groupv1.GroupCoordinatorService_CompleteTxnOffsets_FullMethodName
	peers := map[string]peerauth.Peer{
		"gateway":    gatewayPeer,
		"client":     {Role: "client", ID: "alice", Principal: "User:alice"},
		"no role":    {Principal: "User:alice"},
		"storage":    {Role: peerauth.RoleStorage, ID: "1", Principal: "User:storage-1"},
		"groupcoord": {Role: peerauth.RoleGroupCoord, ID: "2", Principal: "User:groupcoord-2"},
		"controller": {Role: peerauth.RoleController, ID: "1", Principal: "User:controller-1"},
	}
	for name, p := range peers {
		if err := rules.Check(complete, p); errs.Of(err) != errs.ClusterAuthorizationFailed {
			t.Errorf("CompleteTxnOffsets from %s: %v, want CLUSTER_AUTHORIZATION_FAILED", name, err)
		}
		for _, m := range methods {
			if m != complete {
				if err := rules.Check(m, p); err != nil {
					t.Errorf("%s from %s: %v", m, name, err)
				}
			}
		}
	}
	if err := rules.Check(complete, txncoordPeer); err != nil {
		t.Errorf("CompleteTxnOffsets from a transaction coordinator: %v", err)
	}
}
