package server

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	controllerv1 "skein/gen/skein/controller/v1"
	controllerv1grpc "skein/gen/skein/controller/v1/controllerv1grpc"
	"skein/libs/acl"
	"skein/libs/errs"
	md "skein/libs/metadata"
	"skein/libs/peerauth"
	"skein/libs/rpcerr"
)

// rowOf is the errs row of a call's gRPC error (None for nil).
func rowOf(err error) *errs.Error { return errs.Of(rpcerr.FromStatus(err)) }

// rowOfCode is the errs row of a per-item error code.
func rowOfCode(code int32) *errs.Error { return errs.ForCode(errs.Code(code)) }

// auditLog is a logger whose lines a test reads.
func auditLog() (*slog.Logger, *lockedBuffer) {
	var b lockedBuffer
	return slog.New(slog.NewTextHandler(&b, nil)), &b
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The rules name real methods, and only the brokers' ones.
func TestRulesNameBrokerMethods(t *testing.T) {
	all := peerauth.MethodsOf(controllerv1grpc.ControllerService_ServiceDesc)
	var ruled []string
	for m, roles := range Rules() {
		if !slices.Contains(all, m) {
			t.Errorf("rule for %s, which ControllerService does not have", m)
		}
		if !slices.Equal(roles, []string{peerauth.RoleStorage, peerauth.RoleController}) {
			t.Errorf("%s is for %v", m, roles)
		}
		ruled = append(ruled, m[strings.LastIndex(m, "/")+1:])
	}
	slices.Sort(ruled)
	if want := []string{"AlterPartition", "BrokerHeartbeat", "ControlledShutdown", "RegisterBroker"}; !slices.Equal(ruled, want) {
		t.Errorf("ruled methods %v, want %v", ruled, want)
	}
}

// A broker's calls are taken from a storage node's certificate only: the
// gateway's and a client's are refused CLUSTER_AUTHORIZATION_FAILED, with
// an audit line. The metadata reads and producer ids stay open to a client.
func TestGuardRefusesBrokerCallsFromOtherRoles(t *testing.T) {
	log, audit := auditLog()
	c := newSecuredCluster(t, 1, &secured{log: log})
	ctl := c.leader()
	storage := c.clientAs(ctl, "storage-1")

	reg, err := storage.RegisterBroker(ctxT(t), &controllerv1.RegisterBrokerRequest{BrokerId: 1, GrpcAddr: "127.0.0.1:20001", IncarnationId: "inc-1"})
	if err != nil {
		t.Fatalf("a storage node could not register: %v", err)
	}
	epoch := reg.GetBrokerEpoch()
	if _, err := storage.BrokerHeartbeat(ctxT(t), &controllerv1.BrokerHeartbeatRequest{BrokerId: 1, BrokerEpoch: epoch}); err != nil {
		t.Fatalf("a storage node's heartbeat: %v", err)
	}
	if _, err := storage.AlterPartition(ctxT(t), &controllerv1.AlterPartitionRequest{BrokerId: 1, BrokerEpoch: epoch}); rowOf(err) == errs.ClusterAuthorizationFailed {
		t.Fatalf("a storage node's AlterPartition refused: %v", err)
	}

	for _, cert := range []string{"gateway-1", "alice"} {
		cl := c.clientAs(ctl, cert)
		for name, call := range map[string]func() error{
			"RegisterBroker": func() error {
				_, err := cl.RegisterBroker(ctxT(t), &controllerv1.RegisterBrokerRequest{BrokerId: 2, GrpcAddr: "127.0.0.1:20002", IncarnationId: "inc-2"})
				return err
			},
			"BrokerHeartbeat": func() error {
				_, err := cl.BrokerHeartbeat(ctxT(t), &controllerv1.BrokerHeartbeatRequest{BrokerId: 1, BrokerEpoch: epoch})
				return err
			},
			"AlterPartition": func() error {
				_, err := cl.AlterPartition(ctxT(t), &controllerv1.AlterPartitionRequest{BrokerId: 1, BrokerEpoch: epoch})
				return err
			},
			"ControlledShutdown": func() error {
				_, err := cl.ControlledShutdown(ctxT(t), &controllerv1.ControlledShutdownRequest{BrokerId: 1, BrokerEpoch: epoch})
				return err
			},
		} {
			if err := call(); rowOf(err) != errs.ClusterAuthorizationFailed {
				t.Errorf("%s from %s: %v, want CLUSTER_AUTHORIZATION_FAILED", name, cert, err)
			}
			if !strings.Contains(audit.String(), "ControllerService/"+name) || !strings.Contains(audit.String(), "principal=User:"+cert) {
				t.Errorf("no audit line for %s from %s:\n%s", name, cert, audit.String())
			}
		}
	}
	// The refused calls changed nothing: broker 1 is still the only one,
	// not shutting down.
	d, err := c.clientAs(ctl, "alice").DescribeCluster(ctxT(t), &controllerv1.DescribeClusterRequest{})
	if err != nil {
		t.Fatalf("DescribeCluster from a client: %v", err)
	}
	if len(d.GetBrokers()) != 1 || d.GetBrokers()[0].GetId() != 1 {
		t.Errorf("brokers after the refused calls: %v", d.GetBrokers())
	}

	alice := c.clientAs(ctl, "alice")
	if _, err := alice.AllocateProducerIds(ctxT(t), &controllerv1.AllocateProducerIdsRequest{NodeId: -1, Count: 10}); err != nil {
		t.Errorf("AllocateProducerIds from a client: %v", err)
	}
	if _, err := alice.FindCoordinator(ctxT(t), &controllerv1.FindCoordinatorRequest{Kind: controllerv1.CoordinatorKind_COORDINATOR_KIND_GROUP, Key: "g"}); rowOf(err) == errs.ClusterAuthorizationFailed {
		t.Errorf("FindCoordinator from a client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := alice.WatchMetadata(ctx, &controllerv1.WatchMetadataRequest{NodeId: -1})
	if err == nil {
		_, err = stream.Recv()
	}
	if err != nil {
		t.Errorf("WatchMetadata from a client: %v", err)
	}
}

// A binding no call could match is refused at the request, alone among
// the request's bindings; the others are added.
func TestCreateAclsRefusesBindingsThatMatchNothing(t *testing.T) {
	c := newSecuredCluster(t, 1, &secured{authorizer: true, super: map[string]bool{"User:admin": true}})
	ctl := c.leader()
	root := admin{t: t, cl: c.clientAs(ctl, "admin")}
	good := binding("User:bob", acl.Topic, "orders", acl.Literal, acl.Read)
	lower := binding("user:bob", acl.Topic, "orders", acl.Literal, acl.Read)
	groupWrite := binding("User:bob", acl.Group, "g", acl.Literal, acl.Write)
	good2 := binding("User:bob", acl.Group, "g", acl.Literal, acl.Read)
	expect(t, "a mixed request", root.grant(good, lower, groupWrite, good2), rows(ok, errs.InvalidRequest, errs.InvalidRequest, ok))
	if got := ctl.node.Image().Acls(); len(got) != 2 {
		t.Errorf("bindings held: %v, want the two good ones", got)
	}
}

// admin is a secured cluster's client certificates as the calls name them.
type admin struct {
	t  *testing.T
	cl controllerv1grpc.ControllerServiceClient
	// principal, when set, is the client the call names (the gateway's).
	principal string
}

func (a admin) ctx() context.Context {
	ctx := ctxT(a.t)
	if a.principal != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, peerauth.PrincipalMD, a.principal)
	}
	return ctx
}

// create answers each topic's error row, in the request's order.
func (a admin) create(names ...string) []*errs.Error {
	a.t.Helper()
	req := &controllerv1.CreateTopicsRequest{}
	for _, n := range names {
		req.Topics = append(req.Topics, &controllerv1.CreatableTopic{Name: n, Partitions: 1, ReplicationFactor: 1})
	}
	resp, err := a.cl.CreateTopics(a.ctx(), req)
	if err != nil {
		a.t.Fatalf("CreateTopics %v: %v", names, err)
	}
	return topicRows(a.t, names, resp.GetTopics())
}

func (a admin) delete(names ...string) []*errs.Error {
	a.t.Helper()
	resp, err := a.cl.DeleteTopics(a.ctx(), &controllerv1.DeleteTopicsRequest{Names: names})
	if err != nil {
		a.t.Fatalf("DeleteTopics %v: %v", names, err)
	}
	return topicRows(a.t, names, resp.GetTopics())
}

func (a admin) grow(name string, count int32) *errs.Error {
	a.t.Helper()
	resp, err := a.cl.CreatePartitions(a.ctx(), &controllerv1.CreatePartitionsRequest{Topics: []*controllerv1.PartitionCount{{Name: name, Count: count}}})
	if err != nil {
		a.t.Fatalf("CreatePartitions %s: %v", name, err)
	}
	return topicRows(a.t, []string{name}, resp.GetTopics())[0]
}

func (a admin) alter(name string) *errs.Error {
	a.t.Helper()
	resp, err := a.cl.AlterConfigs(a.ctx(), &controllerv1.AlterConfigsRequest{Topic: name, Configs: map[string]string{"retention.ms": "60000"}})
	if err != nil {
		a.t.Fatalf("AlterConfigs %s: %v", name, err)
	}
	return topicRows(a.t, []string{name}, []*controllerv1.TopicResult{resp.GetResult()})[0]
}

func (a admin) elect() *errs.Error {
	_, err := a.cl.ElectLeaders(a.ctx(), &controllerv1.ElectLeadersRequest{Type: controllerv1.ElectionType_ELECTION_TYPE_PREFERRED})
	return rowOf(err)
}

func (a admin) pids() *errs.Error {
	_, err := a.cl.AllocateProducerIds(a.ctx(), &controllerv1.AllocateProducerIdsRequest{NodeId: -1, Count: 10})
	return rowOf(err)
}

func (a admin) grant(bs ...acl.Binding) []*errs.Error {
	a.t.Helper()
	req := &controllerv1.CreateAclsRequest{}
	for _, b := range bs {
		req.Acls = append(req.Acls, md.AclOf(b))
	}
	resp, err := a.cl.CreateAcls(a.ctx(), req)
	if err != nil {
		a.t.Fatalf("CreateAcls: %v", err)
	}
	if len(resp.GetResults()) != len(bs) {
		a.t.Fatalf("CreateAcls answered %d results for %d bindings", len(resp.GetResults()), len(bs))
	}
	var out []*errs.Error
	for _, r := range resp.GetResults() {
		out = append(out, rowOfCode(r.GetErrorCode()))
	}
	return out
}

func (a admin) revoke(f acl.Filter) *errs.Error {
	a.t.Helper()
	resp, err := a.cl.DeleteAcls(a.ctx(), &controllerv1.DeleteAclsRequest{Filters: []*controllerv1.AclFilter{md.AclFilterOf(f)}})
	if err != nil {
		a.t.Fatalf("DeleteAcls: %v", err)
	}
	if len(resp.GetResults()) != 1 {
		a.t.Fatalf("DeleteAcls answered %d results for 1 filter", len(resp.GetResults()))
	}
	return rowOfCode(resp.GetResults()[0].GetErrorCode())
}

func topicRows(t *testing.T, names []string, results []*controllerv1.TopicResult) []*errs.Error {
	t.Helper()
	if len(results) != len(names) {
		t.Fatalf("%d results for topics %v", len(results), names)
	}
	var out []*errs.Error
	for i, r := range results {
		if r.GetName() != names[i] {
			t.Fatalf("result %d names %q, want %q (results out of order?)", i, r.GetName(), names[i])
		}
		out = append(out, rowOfCode(r.GetErrorCode()))
	}
	return out
}

func rows(rs ...*errs.Error) []*errs.Error { return rs }

func expect(t *testing.T, what string, got, want []*errs.Error) {
	t.Helper()
	if !slices.Equal(got, want) {
		var g, w []string
		for _, r := range got {
			g = append(g, r.Name)
		}
		for _, r := range want {
			w = append(w, r.Name)
		}
		t.Errorf("%s: %v, want %v", what, g, w)
	}
}

var (
	ok          = errs.None
	topicAuth   = errs.TopicAuthorizationFailed
	clusterAuth = errs.ClusterAuthorizationFailed
)

func binding(principal string, typ acl.ResourceType, name string, pattern acl.PatternType, op acl.Operation) acl.Binding {
	return acl.Binding{Principal: principal, Resource: typ, Name: name, Pattern: pattern, Operation: op, Permission: acl.Allow}
}

// With an authorizer, a client's admin changes need its ACLs — its own
// certificate's principal, or the one the gateway names — and each refusal
// comes back where the call reports errors. A super user may do anything;
// Skein's services are not subject to ACLs.
func TestAdminChangesNeedACLs(t *testing.T) {
	log, audit := auditLog()
	c := newSecuredCluster(t, 1, &secured{authorizer: true, super: map[string]bool{"User:admin": true}, log: log})
	ctl := c.leader()
	storage := c.clientAs(ctl, "storage-1")
	b := c.startBroker(storage, 1, 100*time.Millisecond)
	defer b.kill()
	watch(t, storage).waitFor(t, "broker 1 live", 5*time.Second, func(img *md.Image) bool { return img.IsLive(1) })

	alice := admin{t: t, cl: c.clientAs(ctl, "alice")}
	root := admin{t: t, cl: c.clientAs(ctl, "admin")}
	gateway := c.clientAs(ctl, "gateway-1")
	bob := admin{t: t, cl: gateway, principal: "User:bob"}
	carol := admin{t: t, cl: gateway, principal: "User:carol"}
	gatewayItself := admin{t: t, cl: gateway}
	storageAdmin := admin{t: t, cl: storage}

	// No ACL: everything refused, in each call's shape.
	expect(t, "alice creates", alice.create("a-1"), rows(topicAuth))
	if !strings.Contains(audit.String(), "principal=User:alice operation=/skein.controller.v1.ControllerService/CreateTopics resource=topic:a-1") {
		t.Errorf("no audit line for alice's create:\n%s", audit.String())
	}
	expect(t, "alice grows", rows(alice.grow("a-1", 2)), rows(topicAuth))
	expect(t, "alice alters", rows(alice.alter("a-1")), rows(topicAuth))
	expect(t, "alice deletes", alice.delete("a-1"), rows(topicAuth))
	expect(t, "alice elects", rows(alice.elect()), rows(clusterAuth))
	expect(t, "alice grants herself", alice.grant(binding("User:alice", acl.Cluster, "", acl.Literal, acl.All), binding("User:alice", acl.Topic, "*", acl.Literal, acl.All)), rows(clusterAuth, clusterAuth))
	expect(t, "alice revokes", rows(alice.revoke(acl.Filter{})), rows(clusterAuth))
	expect(t, "bob, through the gateway, creates", bob.create("b-1"), rows(topicAuth))
	expect(t, "alice takes producer ids", rows(alice.pids()), rows(clusterAuth))
	if img := ctl.node.Image(); len(img.Topics()) != 0 || len(img.Acls()) != 0 {
		t.Fatalf("refused calls changed the metadata: topics %v, ACLs %v", img.Topics(), img.Acls())
	}

	// The super user grants: alice may create a-* and alter a-1; bob may
	// create anything (cluster CREATE).
	expect(t, "admin grants", root.grant(
		binding("User:alice", acl.Topic, "a-", acl.Prefixed, acl.Create),
		binding("User:alice", acl.Topic, "a-1", acl.Literal, acl.Alter),
		binding("User:bob", acl.Cluster, "", acl.Literal, acl.Create),
	), rows(ok, ok, ok))

	// A mixed request: the refused topic is answered in its place, the
	// others are created.
	expect(t, "alice creates", alice.create("a-1", "b-2", "a-2"), rows(ok, topicAuth, ok))
	expect(t, "alice grows a-1", rows(alice.grow("a-1", 2)), rows(ok))
	expect(t, "alice grows a-2", rows(alice.grow("a-2", 2)), rows(topicAuth))
	expect(t, "alice alters a-1", rows(alice.alter("a-1")), rows(ok))
	expect(t, "alice deletes", alice.delete("a-1", "a-2"), rows(topicAuth, topicAuth))
	expect(t, "alice elects", rows(alice.elect()), rows(clusterAuth))
	// Producer ids need write on some topic: create and alter are not.
	expect(t, "alice takes producer ids", rows(alice.pids()), rows(clusterAuth))

	expect(t, "bob creates", bob.create("b-1", "z-1"), rows(ok, ok))
	expect(t, "bob deletes", bob.delete("b-1"), rows(topicAuth))
	expect(t, "carol, through the gateway, creates", carol.create("c-1"), rows(topicAuth))

	// Services are never refused: the gateway for itself, a storage node.
	expect(t, "the gateway deletes", gatewayItself.delete("b-1"), rows(ok))
	expect(t, "a storage node grows", rows(storageAdmin.grow("z-1", 2)), rows(ok))
	expect(t, "the gateway elects", rows(gatewayItself.elect()), rows(ok))
	expect(t, "the gateway grants", gatewayItself.grant(binding("User:carol", acl.Topic, "c-", acl.Prefixed, acl.All)), rows(ok))
	expect(t, "carol creates", carol.create("c-1"), rows(ok))
	expect(t, "carol takes producer ids", rows(carol.pids()), rows(ok))
	expect(t, "a storage node takes producer ids", rows(storageAdmin.pids()), rows(ok))
	expect(t, "the gateway takes producer ids", rows(gatewayItself.pids()), rows(ok))

	// The super user does the rest.
	expect(t, "admin deletes", root.delete("a-1", "a-2", "z-1", "c-1"), rows(ok, ok, ok, ok))
	expect(t, "admin elects", rows(root.elect()), rows(ok))
	expect(t, "admin revokes", rows(root.revoke(acl.Filter{Principal: "User:alice"})), rows(ok))
	expect(t, "alice creates after the revocation", alice.create("a-3"), rows(topicAuth))
}

// A follower relays an admin change to the leader naming the client it
// acts for, and the leader decides it for that client; a principal named
// that way by anyone but a controller is ignored. A broker's registration
// relayed by a follower is taken.
func TestForwardedCallsKeepTheirPrincipal(t *testing.T) {
	c := newSecuredCluster(t, 3, &secured{authorizer: true, super: map[string]bool{"User:admin": true}})
	leader, follower := c.leader(), c.follower()

	// A storage node registering through a follower.
	b := c.startBroker(c.clientAs(follower, "storage-1"), 1, 100*time.Millisecond)
	defer b.kill()
	watch(t, c.clientAs(leader, "storage-1")).waitFor(t, "broker 1 live", 5*time.Second, func(img *md.Image) bool { return img.IsLive(1) })

	alice := admin{t: t, cl: c.clientAs(follower, "alice")}
	bob := admin{t: t, cl: c.clientAs(follower, "gateway-1"), principal: "User:bob"}
	root := admin{t: t, cl: c.clientAs(follower, "admin")}
	expect(t, "alice creates through a follower", alice.create("a-1"), rows(topicAuth))
	expect(t, "alice grants through a follower", alice.grant(binding("User:alice", acl.Topic, "*", acl.Literal, acl.All)), rows(clusterAuth))
	expect(t, "alice elects through a follower", rows(alice.elect()), rows(clusterAuth))
	expect(t, "bob creates through the gateway and a follower", bob.create("b-1"), rows(topicAuth))

	expect(t, "admin grants through a follower", root.grant(binding("User:alice", acl.Topic, "a-", acl.Prefixed, acl.Create)), rows(ok))
	expect(t, "alice creates through a follower", alice.create("a-1", "b-1"), rows(ok, topicAuth))
	expect(t, "the gateway for itself, through a follower", admin{t: t, cl: c.clientAs(follower, "gateway-1")}.delete("a-1"), rows(ok))

	// Naming a forwarded principal is a controller's privilege: a client
	// posing as a follower to the leader is still itself, and the
	// gateway's stays its client's.
	forge := func(cert, named string) context.Context {
		ctx := metadata.AppendToOutgoingContext(ctxT(t), forwardedKey, "2", forwardedPrincipalKey, "User:admin")
		if named != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, peerauth.PrincipalMD, named)
		}
		return ctx
	}
	for _, tc := range []struct{ cert, named string }{{"alice", ""}, {"gateway-1", "User:bob"}} {
		resp, err := c.clientAs(leader, tc.cert).DeleteTopics(forge(tc.cert, tc.named), &controllerv1.DeleteTopicsRequest{Names: []string{"a-1"}})
		if err != nil {
			t.Fatal(err)
		}
		expect(t, tc.cert+" forging a forwarded principal", topicRows(t, []string{"a-1"}, resp.GetTopics()), rows(topicAuth))
	}
}

// A caller's identity on a forwarded call: the follower's named client,
// believed from a controller's certificate only.
func TestCallerOfForwardedCalls(t *testing.T) {
	ctrl := peerauth.Peer{Role: peerauth.RoleController, ID: "2", Principal: "User:controller-2"}
	gw := peerauth.Peer{Role: peerauth.RoleGateway, ID: "1", Principal: "User:gateway-1"}
	in := func(p peerauth.Peer, kv ...string) context.Context {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(kv...))
		return peerauth.WithCaller(ctx, peerauth.CallerOf(p, ""))
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want peerauth.Caller
	}{
		{"a follower for a client", in(ctrl, forwardedKey, "2", forwardedPrincipalKey, "User:alice"), peerauth.Caller{Peer: ctrl, Principal: "User:alice"}},
		{"a follower for a client beyond ASCII", in(ctrl, forwardedKey, "2", forwardedPrincipalKey, "(in -bin)", forwardedPrincipalKey, "(in -bin)", forwardedPrincipalKey+"-bin", "User:josé"), peerauth.Caller{Peer: ctrl, Principal: "User:josé"}},
		{"a follower naming two clients", in(ctrl, forwardedKey, "2", forwardedPrincipalKey, "User:alice", forwardedPrincipalKey, "User:admin"), peerauth.Caller{Peer: ctrl, Principal: "(malformed forwarded principal)"}},
		{"a follower for a principal-less client", in(ctrl, forwardedKey, "2", forwardedPrincipalKey, ""), peerauth.Caller{Peer: ctrl, Principal: ""}},
		{"a follower for a service", in(ctrl, forwardedKey, "2"), peerauth.Caller{Peer: ctrl, Principal: "User:controller-2", Service: true}},
		{"a controller not forwarding", in(ctrl, forwardedPrincipalKey, "User:alice"), peerauth.Caller{Peer: ctrl, Principal: "User:controller-2", Service: true}},
		{"the gateway posing as a follower", in(gw, forwardedKey, "2", forwardedPrincipalKey, "User:admin"), peerauth.Caller{Peer: gw, Principal: "User:gateway-1", Service: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, known := caller(tc.ctx)
			if !known || got != tc.want {
				t.Errorf("caller = %+v (known %v), want %+v", got, known, tc.want)
			}
		})
	}
	if _, known := caller(metadata.NewIncomingContext(context.Background(), metadata.Pairs(forwardedKey, "2", forwardedPrincipalKey, "User:alice"))); known {
		t.Error("a plaintext call has a known caller")
	}
}

// merged puts refusals in their items' places, and will not make up a
// result the state machine did not answer.
func TestMerged(t *testing.T) {
	no := errs.Errorf(errs.TopicAuthorizationFailed, "no")
	refusal := func(i int, err error) string { return fmt.Sprintf("refused %d", i) }
	got, err := merged([]error{nil, no, nil, no}, []string{"a", "c"}, refusal)
	if err != nil || !slices.Equal(got, []string{"a", "refused 1", "c", "refused 3"}) {
		t.Errorf("merged = %v, %v", got, err)
	}
	if _, err := merged([]error{nil, no, nil}, []string{"a"}, refusal); errs.Of(err) != errs.UnknownServerError {
		t.Errorf("a missing result: %v", err)
	}
}

// Under an authorizer a client's metadata watch shows the topics it may
// describe, as Kafka's Metadata, and the ACL bindings only with describe
// on the cluster, as Kafka's DescribeAcls, in images marked filtered; it
// follows those permissions as they are granted and revoked. A Skein
// service's watch shows everything.
func TestClientWatchShowsOnlyWhatItMayDescribe(t *testing.T) {
	c := newSecuredCluster(t, 1, &secured{authorizer: true, super: map[string]bool{"User:admin": true}})
	ctl := c.leader()
	storage := c.clientAs(ctl, "storage-1")
	b := c.startBroker(storage, 1, 100*time.Millisecond)
	defer b.kill()
	service := watch(t, storage)
	service.waitFor(t, "broker 1 live", 5*time.Second, func(img *md.Image) bool { return img.IsLive(1) })
	root := admin{t: t, cl: c.clientAs(ctl, "admin")}
	expect(t, "admin creates", root.create("a-1", "secret"), rows(ok, ok))
	expect(t, "admin grants", root.grant(binding("User:bob", acl.Topic, "a-", acl.Prefixed, acl.Read)), rows(ok))

	seen := func(img *md.Image) string {
		var names []string
		for _, tp := range img.Topics() {
			names = append(names, tp.GetName())
		}
		slices.Sort(names)
		return fmt.Sprintf("topics=%v partitions=%d acls=%d filtered=%v", names, len(img.Partitions("a-1"))+len(img.Partitions("secret")), len(img.Acls()), img.Filtered())
	}
	alice := watch(t, c.clientAs(ctl, "alice"))
	alice.waitFor(t, "alice, with no ACLs, sees no topic and no binding", 5*time.Second, func(img *md.Image) bool {
		return seen(img) == "topics=[] partitions=0 acls=0 filtered=true"
	})
	service.waitFor(t, "a service sees everything", 5*time.Second, func(img *md.Image) bool {
		return seen(img) == "topics=[a-1 secret] partitions=2 acls=1 filtered=false"
	})

	expect(t, "admin grants", root.grant(binding("User:alice", acl.Topic, "a-", acl.Prefixed, acl.Write)), rows(ok))
	alice.waitFor(t, "alice sees the topic she may write", 5*time.Second, func(img *md.Image) bool {
		return seen(img) == "topics=[a-1] partitions=1 acls=0 filtered=true"
	})
	expect(t, "admin creates", root.create("a-2", "secret-2"), rows(ok, ok))
	alice.waitFor(t, "alice sees the new topic of her prefix only", 5*time.Second, func(img *md.Image) bool {
		return seen(img) == "topics=[a-1 a-2] partitions=1 acls=0 filtered=true" && len(img.Partitions("a-2")) == 1
	})
	expect(t, "admin deletes", root.delete("a-2", "secret-2"), rows(ok, ok))
	alice.waitFor(t, "alice sees the deletion", 5*time.Second, func(img *md.Image) bool {
		return seen(img) == "topics=[a-1] partitions=1 acls=0 filtered=true"
	})
	expect(t, "admin grants", root.grant(binding("User:alice", acl.Cluster, "", acl.Literal, acl.Describe)), rows(ok))
	alice.waitFor(t, "alice sees every binding with cluster describe", 5*time.Second, func(img *md.Image) bool {
		return seen(img) == "topics=[a-1] partitions=1 acls=3 filtered=true"
	})
	expect(t, "admin grants", root.grant(acl.Binding{Principal: "User:alice", Resource: acl.Topic, Name: "a-1", Pattern: acl.Literal, Operation: acl.Describe, Permission: acl.Deny}), rows(ok))
	alice.waitFor(t, "a deny hides the topic again", 5*time.Second, func(img *md.Image) bool {
		return seen(img) == "topics=[] partitions=0 acls=4 filtered=true"
	})
	expect(t, "admin revokes", rows(root.revoke(acl.Filter{Principal: "User:alice"})), rows(ok))
	alice.waitFor(t, "alice sees nothing once it is all revoked", 5*time.Second, func(img *md.Image) bool {
		return seen(img) == "topics=[] partitions=0 acls=0 filtered=true"
	})
	alice.mu.Lock()
	defer alice.mu.Unlock()
	if alice.err != nil {
		t.Fatalf("alice's watch: %v", alice.err)
	}
}
