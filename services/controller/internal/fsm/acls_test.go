package fsm

import (
	"slices"
	"testing"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/acl"
	"skein/libs/errs"
	"skein/libs/metadata"
)

func createAcls(bs ...acl.Binding) *controllerv1.Command {
	r := &controllerv1.CreateAclsRequest{}
	for _, b := range bs {
		r.Acls = append(r.Acls, metadata.AclOf(b))
	}
	return &controllerv1.Command{Command: &controllerv1.Command_CreateAcls{CreateAcls: r}}
}

func deleteAcls(fs ...acl.Filter) *controllerv1.Command {
	r := &controllerv1.DeleteAclsRequest{}
	for _, f := range fs {
		r.Filters = append(r.Filters, metadata.AclFilterOf(f))
	}
	return &controllerv1.Command{Command: &controllerv1.Command_DeleteAcls{DeleteAcls: r}}
}

func TestAcls(t *testing.T) {
	bobRead := acl.Binding{Principal: "User:bob", Resource: acl.Topic, Name: "orders", Pattern: acl.Literal, Operation: acl.Read, Permission: acl.Allow}
	bobGroup := acl.Binding{Principal: "User:bob", Resource: acl.Group, Name: "g", Pattern: acl.Prefixed, Operation: acl.Read, Permission: acl.Allow}
	aliceWrite := acl.Binding{Principal: "User:alice", Resource: acl.Topic, Name: "orders", Pattern: acl.Literal, Operation: acl.Write, Permission: acl.Allow}
	anyDeny := acl.Binding{Principal: "User:*", Resource: acl.Topic, Name: "*", Pattern: acl.Literal, Operation: acl.Delete, Permission: acl.Deny}
	// Written with the name *, stored with the cluster's name.
	clusterIn := acl.Binding{Principal: "User:ops", Resource: acl.Cluster, Name: "*", Pattern: acl.Literal, Operation: acl.Alter, Permission: acl.Allow}
	clusterStored := clusterIn
	clusterStored.Name = acl.ClusterName
	all := []acl.Binding{bobRead, bobGroup, aliceWrite, anyDeny, clusterIn}
	allStored := []acl.Binding{anyDeny, aliceWrite, bobRead, bobGroup, clusterStored} // by principal: "User:*" sorts first

	badOp := bobRead
	badOp.Operation = 42
	badRes := bobRead
	badRes.Resource = 0
	noPrincipal := bobRead
	noPrincipal.Principal = "bob"
	// A binding a cluster may hold from before the controller refused such
	// ones at the request (its Raft log or snapshot): applying the logged
	// command stores it as it always did.
	legacy := bobGroup
	legacy.Principal, legacy.Operation, legacy.Permission = "user:bob", acl.Write, acl.Deny

	for _, tc := range []struct {
		name string
		// before is created first (and must succeed).
		before []acl.Binding
		cmd    *controllerv1.Command
		// per binding (create) or filter (delete): the error row, nil for none
		wantErrs []*errs.Error
		// per filter: how many bindings it removed
		wantDeleted []int
		wantAfter   []acl.Binding
		wantRecords int
	}{
		{name: "create", cmd: createAcls(all...), wantErrs: []*errs.Error{nil, nil, nil, nil, nil}, wantAfter: allStored, wantRecords: 5},
		{name: "create again changes nothing", before: all, cmd: createAcls(bobRead, clusterIn), wantErrs: []*errs.Error{nil, nil}, wantAfter: allStored},
		{name: "twice in one request is added once", cmd: createAcls(bobRead, bobRead), wantErrs: []*errs.Error{nil, nil}, wantAfter: []acl.Binding{bobRead}, wantRecords: 1},
		{name: "invalid bindings fail alone", cmd: createAcls(badOp, bobRead, badRes, noPrincipal),
			wantErrs: []*errs.Error{errs.InvalidRequest, nil, errs.InvalidRequest, errs.InvalidRequest}, wantAfter: []acl.Binding{bobRead}, wantRecords: 1},
		{name: "a logged command of a binding from before applies as it did", cmd: createAcls(legacy),
			wantErrs: []*errs.Error{nil}, wantAfter: []acl.Binding{legacy}, wantRecords: 1},
		{name: "delete by principal", before: all, cmd: deleteAcls(acl.Filter{Principal: "User:bob"}),
			wantErrs: []*errs.Error{nil}, wantDeleted: []int{2}, wantAfter: []acl.Binding{anyDeny, aliceWrite, clusterStored}, wantRecords: 2},
		{name: "delete exactly one", before: all, cmd: deleteAcls(acl.Filter{Principal: "User:bob", Resource: acl.Topic, Name: "orders", Pattern: acl.Literal, Operation: acl.Read, Permission: acl.Allow}),
			wantErrs: []*errs.Error{nil}, wantDeleted: []int{1}, wantAfter: []acl.Binding{anyDeny, aliceWrite, bobGroup, clusterStored}, wantRecords: 1},
		{name: "the filter's names are exact, not patterns", before: all, cmd: deleteAcls(acl.Filter{Name: "ord"}, acl.Filter{Principal: "User:carol"}),
			wantErrs: []*errs.Error{nil, nil}, wantDeleted: []int{0, 0}, wantAfter: allStored},
		{name: "a later filter does not answer what an earlier one removed", before: all, cmd: deleteAcls(acl.Filter{Resource: acl.Topic}, acl.Filter{Name: "orders"}, acl.Filter{Permission: acl.Deny}),
			wantErrs: []*errs.Error{nil, nil, nil}, wantDeleted: []int{3, 0, 0}, wantAfter: []acl.Binding{bobGroup, clusterStored}, wantRecords: 3},
		{name: "the empty filter removes everything", before: all, cmd: deleteAcls(acl.Filter{}),
			wantErrs: []*errs.Error{nil}, wantDeleted: []int{5}, wantRecords: 5},
		{name: "a filter with unknown values fails alone", before: all, cmd: deleteAcls(acl.Filter{Operation: 9}, acl.Filter{Resource: 7}, acl.Filter{Pattern: 3}, acl.Filter{Permission: -1}, acl.Filter{Resource: acl.Cluster}),
			wantErrs: []*errs.Error{errs.InvalidRequest, errs.InvalidRequest, errs.InvalidRequest, errs.InvalidRequest, nil}, wantDeleted: []int{0, 0, 0, 0, 1},
			wantAfter: []acl.Binding{anyDeny, aliceWrite, bobRead, bobGroup}, wantRecords: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New()
			if len(tc.before) > 0 {
				if _, err := m.Apply(1, createAcls(tc.before...)); err != nil {
					t.Fatal(err)
				}
			}
			res, err := m.Apply(2, tc.cmd)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Records) != tc.wantRecords {
				t.Errorf("%d records, want %d: %v", len(res.Records), tc.wantRecords, res.Records)
			}
			var gotErrs []*errs.Error
			switch r := res.Reply.(type) {
			case *controllerv1.CreateAclsResponse:
				for _, x := range r.GetResults() {
					gotErrs = append(gotErrs, rowOf(x.GetErrorCode()))
					if x.GetErrorCode() != 0 && x.GetErrorMessage() == "" {
						t.Error("a refusal without a message")
					}
				}
			case *controllerv1.DeleteAclsResponse:
				var deleted []int
				for _, x := range r.GetResults() {
					gotErrs = append(gotErrs, rowOf(x.GetErrorCode()))
					deleted = append(deleted, len(x.GetDeleted()))
				}
				if !slices.Equal(deleted, tc.wantDeleted) {
					t.Errorf("deleted per filter %v, want %v", deleted, tc.wantDeleted)
				}
			default:
				t.Fatalf("reply %T", res.Reply)
			}
			if !slices.Equal(gotErrs, tc.wantErrs) {
				t.Errorf("errors %v, want %v", gotErrs, tc.wantErrs)
			}
			if got := m.Image().Acls(); !slices.Equal(got, tc.wantAfter) && !(len(got) == 0 && len(tc.wantAfter) == 0) {
				t.Errorf("after: %v\nwant %v", got, tc.wantAfter)
			}
			// A follower replaying the records reaches the same image.
			replay, err := Restore(&controllerv1.MetadataImage{})
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.before) > 0 {
				replay.Apply(1, createAcls(tc.before...))
			}
			if err := replay.Image().Apply(&controllerv1.MetadataDelta{Version: 2, Records: res.Records}); err != nil {
				t.Fatal(err)
			}
			if got := replay.Image().Acls(); !slices.Equal(got, m.Image().Acls()) {
				t.Errorf("replayed records give %v, the machine holds %v", got, m.Image().Acls())
			}
		})
	}
}

func rowOf(code int32) *errs.Error {
	if code == 0 {
		return nil
	}
	return errs.ForCode(errs.Code(code))
}
