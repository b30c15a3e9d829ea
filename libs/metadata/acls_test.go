package metadata

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/acl"
)

func TestAcls(t *testing.T) {
	read := acl.Binding{Principal: "User:bob", Resource: acl.Topic, Name: "orders", Pattern: acl.Literal, Operation: acl.Read, Permission: acl.Allow}
	write := acl.Binding{Principal: "User:alice", Resource: acl.Topic, Name: "ord", Pattern: acl.Prefixed, Operation: acl.Write, Permission: acl.Allow}
	cluster := acl.Binding{Principal: "User:alice", Resource: acl.Cluster, Name: acl.ClusterName, Pattern: acl.Literal, Operation: acl.Create, Permission: acl.Allow}

	im := New("c")
	if err := im.Apply(&controllerv1.MetadataDelta{Version: 1, Records: []*controllerv1.MetadataRecord{AclRecord(read), AclRecord(write), AclRecord(cluster), AclRecord(read)}}); err != nil {
		t.Fatal(err)
	}
	if got, want := im.Acls(), []acl.Binding{write, cluster, read}; !slices.Equal(got, want) {
		t.Fatalf("Acls() = %v, want %v", got, want)
	}
	if got := im.MatchingAcls(acl.Filter{Principal: "User:alice"}); !slices.Equal(got, []acl.Binding{write, cluster}) {
		t.Errorf("MatchingAcls(alice) = %v", got)
	}

	// The image round-trips through its protobuf form, bindings included.
	back, err := FromProto(im.ToProto())
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(back.ToProto(), im.ToProto()) || !back.HasAcl(cluster) {
		t.Errorf("round trip lost bindings: %v", back.Acls())
	}
	clone := im.Clone()

	for _, tc := range []struct {
		name string
		recs []*controllerv1.MetadataRecord
	}{
		{"removing a binding not held", []*controllerv1.MetadataRecord{RemovedAclRecord(acl.Binding{Principal: "User:x", Resource: acl.Topic, Name: "t", Pattern: acl.Literal, Operation: acl.Read, Permission: acl.Allow})}},
		{"removing one twice", []*controllerv1.MetadataRecord{RemovedAclRecord(read), RemovedAclRecord(read)}},
		{"an unknown operation", []*controllerv1.MetadataRecord{AclRecord(acl.Binding{Principal: "User:x", Resource: acl.Topic, Name: "t", Pattern: acl.Literal, Operation: 99, Permission: acl.Allow})}},
		{"a cluster binding not as stored", []*controllerv1.MetadataRecord{AclRecord(acl.Binding{Principal: "User:x", Resource: acl.Cluster, Name: "*", Pattern: acl.Literal, Operation: acl.Alter, Permission: acl.Allow})}},
		{"no principal", []*controllerv1.MetadataRecord{AclRecord(acl.Binding{Resource: acl.Topic, Name: "t", Pattern: acl.Literal, Operation: acl.Read, Permission: acl.Allow})}},
	} {
		if err := im.Apply(&controllerv1.MetadataDelta{Version: 2, Records: tc.recs}); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	if !proto.Equal(im.ToProto(), clone.ToProto()) {
		t.Error("a refused delta changed the image")
	}

	if err := im.Apply(&controllerv1.MetadataDelta{Version: 3, Records: []*controllerv1.MetadataRecord{RemovedAclRecord(read), AclRecord(read), RemovedAclRecord(write)}}); err != nil {
		t.Fatal(err)
	}
	if got := im.Acls(); !slices.Equal(got, []acl.Binding{cluster, read}) {
		t.Errorf("after removals Acls() = %v", got)
	}
	if got := clone.Acls(); len(got) != 3 {
		t.Errorf("the clone changed with the image: %v", got)
	}
}
