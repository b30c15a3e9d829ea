package fsm

import (
	"google.golang.org/protobuf/proto"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/acl"
	"skein/libs/errs"
	"skein/libs/metadata"
)

func aclResult(err error) *controllerv1.AclResult {
	return &controllerv1.AclResult{ErrorCode: code(err), ErrorMessage: errs.Message(err)}
}

// createAcls adds each valid binding; a binding already held is answered
// as added and changes nothing. Each binding succeeds or fails on its own.
func (t *tx) createAcls(r *controllerv1.CreateAclsRequest) (proto.Message, error) {
	resp := &controllerv1.CreateAclsResponse{}
	for _, rec := range r.GetAcls() {
		b, err := metadata.Binding(rec).Validate()
		if err == nil && !t.img.HasAcl(b) {
			err = t.put(metadata.AclRecord(b))
		}
		resp.Results = append(resp.Results, aclResult(err))
	}
	return resp, nil
}

// deleteAcls removes the bindings each filter selects, filter by filter: a
// binding an earlier filter removed is not answered again.
func (t *tx) deleteAcls(r *controllerv1.DeleteAclsRequest) (proto.Message, error) {
	resp := &controllerv1.DeleteAclsResponse{}
	for _, fr := range r.GetFilters() {
		f := metadata.AclFilter(fr)
		res := &controllerv1.AclFilterResult{}
		if err := validateFilter(f); err != nil {
			res.ErrorCode, res.ErrorMessage = code(err), errs.Message(err)
			resp.Results = append(resp.Results, res)
			continue
		}
		for _, b := range t.img.MatchingAcls(f) {
			if err := t.put(metadata.RemovedAclRecord(b)); err != nil {
				return resp, err
			}
			res.Deleted = append(res.Deleted, metadata.AclOf(b))
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

// validateFilter refuses a filter naming a value libs/acl does not know
// (zero, "any", is fine).
func validateFilter(f acl.Filter) error {
	switch {
	case f.Resource != 0 && (f.Resource < acl.Topic || f.Resource > acl.TransactionalID):
		return errs.Errorf(errs.InvalidRequest, "ACL filter: unknown resource type %d", f.Resource)
	case f.Pattern != 0 && (f.Pattern < acl.Literal || f.Pattern > acl.Prefixed):
		return errs.Errorf(errs.InvalidRequest, "ACL filter: unknown pattern type %d", f.Pattern)
	case f.Operation != 0 && (f.Operation < acl.All || f.Operation > acl.Describe):
		return errs.Errorf(errs.InvalidRequest, "ACL filter: unknown operation %d", f.Operation)
	case f.Permission != 0 && (f.Permission < acl.Allow || f.Permission > acl.Deny):
		return errs.Errorf(errs.InvalidRequest, "ACL filter: unknown permission %d", f.Permission)
	}
	return nil
}
