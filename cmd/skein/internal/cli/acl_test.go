package cli

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/rpcerr"
)

// aclGateway answers the ACL calls and records what it was asked.
type aclGateway struct {
	skeinv1.UnimplementedAdminServiceServer
	creates  []*skeinv1.CreateAclsRequest
	describe []*skeinv1.DescribeAclsRequest
	deletes  []*skeinv1.DeleteAclsRequest
}

func (g *aclGateway) CreateAcls(_ context.Context, req *skeinv1.CreateAclsRequest) (*skeinv1.CreateAclsResponse, error) {
	g.creates = append(g.creates, req)
	for _, a := range req.GetAcls() {
		if a.GetOperation() == "fly" {
			return nil, rpcerr.ToGRPC(errs.Errorf(errs.InvalidRequest, "unknown operation %q: want one of all, read, ...", a.GetOperation()))
		}
	}
	return &skeinv1.CreateAclsResponse{Acls: req.GetAcls()}, nil
}

func (g *aclGateway) DescribeAcls(_ context.Context, req *skeinv1.DescribeAclsRequest) (*skeinv1.DescribeAclsResponse, error) {
	g.describe = append(g.describe, req)
	return &skeinv1.DescribeAclsResponse{Acls: []*skeinv1.AclBinding{{Principal: "User:bob", ResourceType: "topic", ResourceName: "orders", PatternType: "literal", Operation: "read", Permission: "allow"}}}, nil
}

func (g *aclGateway) DeleteAcls(_ context.Context, req *skeinv1.DeleteAclsRequest) (*skeinv1.DeleteAclsResponse, error) {
	g.deletes = append(g.deletes, req)
	return &skeinv1.DeleteAclsResponse{Deleted: []*skeinv1.AclBinding{{Principal: "User:bob"}}}, nil
}

func TestAcl(t *testing.T) {
	g := &aclGateway{}
	t.Setenv("SKEIN_GATEWAY", serveAdmin(t, g))

	if code, out, errOut := run(t, "", "acl", "add", "--principal", "User:bob", "--topic", "orders", "--operation", "read,describe"); code != 0 || !strings.Contains(out, "added 2 ACL binding(s)") {
		t.Fatalf("add: %d %q %q", code, out, errOut)
	}
	want := &skeinv1.CreateAclsRequest{Acls: []*skeinv1.AclBinding{
		{Principal: "User:bob", ResourceType: "topic", ResourceName: "orders", Operation: "read"},
		{Principal: "User:bob", ResourceType: "topic", ResourceName: "orders", Operation: "describe"}}}
	if !proto.Equal(g.creates[0], want) {
		t.Errorf("add sent %v, want %v", g.creates[0], want)
	}
	if code, _, _ := run(t, "", "acl", "add", "--principal", "User:ops", "--cluster", "--operation", "alter", "--permission", "deny"); code != 0 {
		t.Fatal("add cluster")
	}
	if c := g.creates[1].GetAcls()[0]; c.GetResourceType() != "cluster" || c.GetPermission() != "deny" {
		t.Errorf("add cluster sent %v", c)
	}
	// A misspelt name is the command line's mistake (exit 2), said before
	// anything is sent.
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"add", "--principal", "User:bob", "--topic", "t", "--operation", "fly"}, `unknown operation "fly"`},
		{[]string{"add", "--principal", "User:bob", "--topic", "t", "--operation", "read,,write"}, `unknown operation ""`},
		{[]string{"add", "--principal", "User:bob", "--topic", "t", "--operation", "read", "--pattern", "weird"}, `unknown pattern type "weird"`},
		{[]string{"add", "--principal", "User:bob", "--topic", "t", "--operation", "read", "--permission", "maybe"}, `unknown permission "maybe"`},
		{[]string{"list", "--operation", "fly"}, `unknown operation "fly"`},
		{[]string{"remove"}, "needs a filter"},
		{[]string{"remove", "--pattern", "any"}, "needs a filter"},
	} {
		if code, _, errOut := run(t, "", append([]string{"acl"}, tc.args...)...); code != 2 || !strings.Contains(errOut, tc.says) {
			t.Errorf("%q: %d %q, want 2 and %q", tc.args, code, errOut, tc.says)
		}
	}
	if len(g.creates) != 2 || len(g.describe) != 0 || len(g.deletes) != 0 {
		t.Errorf("refused commands sent %d adds, %d lists, %d removes", len(g.creates)-2, len(g.describe), len(g.deletes))
	}
	if code, out, _ := run(t, "", "acl", "list", "--group", "billing-", "--pattern", "prefixed"); code != 0 || !strings.Contains(out, "User:bob") || !strings.Contains(out, "PRINCIPAL") {
		t.Errorf("list: %d %q", code, out)
	}
	if d := g.describe[0]; d.GetResourceType() != "group" || d.GetResourceName() != "billing-" || d.GetPatternType() != "prefixed" || d.GetPrincipal() != "" {
		t.Errorf("list sent %v", d)
	}
	if code, out, _ := run(t, "", "acl", "remove", "--principal", "User:bob"); code != 0 || !strings.Contains(out, "removed 1 ACL binding(s)") {
		t.Errorf("remove: %d %q", code, out)
	}
	if d := g.deletes[0]; d.GetPrincipal() != "User:bob" || d.GetResourceType() != "" || d.GetPatternType() != "" {
		t.Errorf("remove sent %v", d)
	}
	// A named resource is its literal pattern, as kafka-acls --remove
	// takes it; --pattern any asks for both.
	for _, tc := range []struct {
		args    []string
		pattern string
	}{
		{[]string{"--topic", "orders"}, "literal"},
		{[]string{"--topic", "orders", "--pattern", "prefixed"}, "prefixed"},
		{[]string{"--topic", "orders", "--pattern", "any"}, ""},
	} {
		n := len(g.deletes)
		if code, out, errOut := run(t, "", append([]string{"acl", "remove", "--principal", "User:bob"}, tc.args...)...); code != 0 || len(g.deletes) != n+1 {
			t.Fatalf("remove %q: %d %q %q", tc.args, code, out, errOut)
		}
		if d := g.deletes[n]; d.GetResourceName() != "orders" || d.GetPatternType() != tc.pattern {
			t.Errorf("remove %q sent %v, want pattern %q", tc.args, d, tc.pattern)
		}
	}
	if code, _, errOut := run(t, "", "acl", "add", "--principal", "User:bob", "--topic", "t", "--operation", "read", "--pattern", "any"); code != 2 || !strings.Contains(errOut, "unknown pattern type") {
		t.Errorf("add --pattern any: %d %q, want a usage error", code, errOut)
	}
	for _, args := range [][]string{
		{"acl"},
		{"acl", "grant"},
		{"acl", "add", "--topic", "t", "--operation", "read"},
		{"acl", "add", "--principal", "User:bob", "--operation", "read"},
		{"acl", "add", "--principal", "User:bob", "--topic", "t", "--group", "g", "--operation", "read"},
		{"acl", "list", "extra"},
	} {
		if code, _, _ := run(t, "", args...); code != 2 {
			t.Errorf("%q: exit %d, want 2 (usage)", args, code)
		}
	}
}

// serveAdmin serves an AdminService on a loopback port and answers its address.
func serveAdmin(t *testing.T, s skeinv1.AdminServiceServer) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	skeinv1.RegisterAdminServiceServer(srv, s)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}
