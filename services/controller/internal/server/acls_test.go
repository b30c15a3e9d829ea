package server

import (
	"testing"
	"time"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/acl"
	"skein/libs/errs"
	"skein/libs/metadata"
)

// ACL bindings written through a follower commit through the Raft log and
// reach every controller's watchers; deletes by filter answer what they
// removed.
func TestAcls(t *testing.T) {
	c := newCluster(t, 3, false, time.Minute)
	fc := c.client(c.follower())
	w := watch(t, c.client(c.leader()))
	read := acl.Binding{Principal: "User:bob", Resource: acl.Topic, Name: "orders", Pattern: acl.Literal, Operation: acl.Read, Permission: acl.Allow}
	bad := read
	bad.Operation = 42

	resp, err := fc.CreateAcls(ctxT(t), &controllerv1.CreateAclsRequest{Acls: []*controllerv1.AclRecord{metadata.AclOf(read), metadata.AclOf(bad)}})
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.GetResults(); len(r) != 2 || r[0].GetErrorCode() != 0 || errs.ForCode(errs.Code(r[1].GetErrorCode())) != errs.InvalidRequest {
		t.Fatalf("create results: %v", r)
	}
	w.waitFor(t, "the binding in the watched image", 10*time.Second, func(img *metadata.Image) bool { return img.HasAcl(read) })

	del, err := fc.DeleteAcls(ctxT(t), &controllerv1.DeleteAclsRequest{Filters: []*controllerv1.AclFilter{metadata.AclFilterOf(acl.Filter{Principal: "User:bob"})}})
	if err != nil {
		t.Fatal(err)
	}
	if r := del.GetResults(); len(r) != 1 || len(r[0].GetDeleted()) != 1 || metadata.Binding(r[0].GetDeleted()[0]) != read {
		t.Fatalf("delete results: %v", r)
	}
	w.waitFor(t, "no binding in the watched image", 10*time.Second, func(img *metadata.Image) bool { return len(img.Acls()) == 0 })
}
