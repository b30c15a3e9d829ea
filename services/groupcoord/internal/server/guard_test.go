package server

import (
	"context"
	"log/slog"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	groupv1 "skein/gen/skein/group/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/peerauth"
	"skein/libs/rpcerr"
	"skein/libs/tlsconf"
)

// TestGuard serves the coordinator over mutual TLS behind its guard, as
// coordproc does: certificates of other roles may not complete a
// transaction's offsets, and the handlers decide with the principal the
// certificate (or the gateway, for its client) names.
func TestGuard(t *testing.T) {
	ca, err := tlsconf.OpenCA(t.TempDir(), "test CA")
	if err != nil {
		t.Fatal(err)
	}
	issue := func(l tlsconf.Leaf) *tlsconf.Source {
		t.Helper()
		f, err := ca.Issue(l)
		if err != nil {
			t.Fatal(err)
		}
		src, err := tlsconf.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	cert := issue(tlsconf.Leaf{Name: "groupcoord-1", Role: peerauth.RoleGroupCoord, ID: "1", Hosts: []string{"127.0.0.1"}})
	srv := grpc.NewServer(append([]grpc.ServerOption{grpc.Creds(credentials.NewTLS(cert.ServerConfig(false)))},
		peerauth.NewGuard(Rules(), slog.New(slog.DiscardHandler)).ServerOptions()...)...)
	groupv1.RegisterGroupCoordinatorServiceServer(srv, newServer(t, testAuthorizer(t)))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	dial := func(l tlsconf.Leaf) groupv1.GroupCoordinatorServiceClient {
		t.Helper()
		cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(issue(l).ClientConfig())))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return groupv1.NewGroupCoordinatorServiceClient(cc)
	}
	gateway := dial(tlsconf.Leaf{Name: "gateway-1", Role: peerauth.RoleGateway, ID: "1"})
	alice := dial(tlsconf.Leaf{Name: "alice", Role: "client", ID: "alice"})
	txncoord := dial(tlsconf.Leaf{Name: "txncoord-1", Role: peerauth.RoleTxnCoord, ID: "1"})
	ctx := context.Background()
	named := func(principal string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, peerauth.PrincipalMD, principal)
	}

	complete := &groupv1.CompleteTxnOffsetsRequest{GroupId: "app", ProducerId: 7, ProducerEpoch: 4, Committed: true}
	for name, tc := range map[string]struct {
		cl  groupv1.GroupCoordinatorServiceClient
		ctx context.Context
	}{
		"the gateway":                  {gateway, ctx},
		"the gateway for a super user": {gateway, named("User:admin")},
		"a client":                     {alice, ctx},
		"a client naming a super user": {alice, named("User:admin")},
	} {
		_, err := tc.cl.CompleteTxnOffsets(tc.ctx, complete)
		if status.Code(err) != codes.PermissionDenied || errs.Of(rpcerr.FromStatus(err)) != errs.ClusterAuthorizationFailed {
			t.Errorf("CompleteTxnOffsets from %s: %v, want CLUSTER_AUTHORIZATION_FAILED", name, err)
		}
	}
	if _, err := txncoord.CompleteTxnOffsets(ctx, complete); err != nil {
		t.Errorf("CompleteTxnOffsets from a transaction coordinator: %v", err)
	}

	fetch := &groupv1.OffsetFetchRequest{GroupId: "app"}
	for name, tc := range map[string]struct {
		cl   groupv1.GroupCoordinatorServiceClient
		ctx  context.Context
		want skeinv1.ErrorCode
	}{
		"a client without ACLs":        {alice, ctx, skeinv1.ErrorCode_GROUP_AUTHORIZATION_FAILED},
		"a client naming a super user": {alice, named("User:admin"), skeinv1.ErrorCode_GROUP_AUTHORIZATION_FAILED},
		"the gateway for a client":     {gateway, named("User:bob"), skeinv1.ErrorCode_GROUP_AUTHORIZATION_FAILED},
		"the gateway for a super user": {gateway, named("User:admin"), skeinv1.ErrorCode_NONE},
		"the gateway for itself":       {gateway, ctx, skeinv1.ErrorCode_NONE},
		"a transaction coordinator":    {txncoord, ctx, skeinv1.ErrorCode_NONE},
	} {
		resp, err := tc.cl.OffsetFetch(tc.ctx, fetch)
		if err != nil || resp.GetErrorCode() != tc.want {
			t.Errorf("OffsetFetch from %s: %v %v, want %s", name, resp, err, tc.want)
		}
	}
}
