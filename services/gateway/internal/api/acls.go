package api

import (
	"context"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/acl"
	"skein/libs/errs"
	"skein/libs/metadata"
)

// bindingOf reads a binding as an operator writes it: names parsed by
// libs/acl (an unknown one is INVALID_REQUEST with libs/acl's message),
// pattern literal and permission allow when left empty, then validated.
func bindingOf(b *skeinv1.AclBinding) (acl.Binding, error) {
	out := acl.Binding{Principal: b.GetPrincipal(), Name: b.GetResourceName(), Pattern: acl.Literal, Permission: acl.Allow}
	var err error
	if out.Resource, err = acl.ParseResourceType(b.GetResourceType()); err != nil {
		return out, err
	}
	if out.Operation, err = acl.ParseOperation(b.GetOperation()); err != nil {
		return out, err
	}
	if b.GetPatternType() != "" {
		if out.Pattern, err = acl.ParsePatternType(b.GetPatternType()); err != nil {
			return out, err
		}
	}
	if b.GetPermission() != "" {
		if out.Permission, err = acl.ParsePermission(b.GetPermission()); err != nil {
			return out, err
		}
	}
	return out.ValidateNew()
}

// aclFilter is the fields of a describe or delete filter.
type aclFilter interface {
	GetPrincipal() string
	GetResourceType() string
	GetResourceName() string
	GetPatternType() string
	GetOperation() string
	GetPermission() string
}

// filterOf reads a filter: each empty field matches anything; a named one
// must be one libs/acl knows.
func filterOf(r aclFilter) (acl.Filter, error) {
	f := acl.Filter{Principal: r.GetPrincipal(), Name: r.GetResourceName()}
	var err error
	if s := r.GetResourceType(); s != "" {
		if f.Resource, err = acl.ParseResourceType(s); err != nil {
			return f, err
		}
	}
	if s := r.GetPatternType(); s != "" {
		if f.Pattern, err = acl.ParsePatternType(s); err != nil {
			return f, err
		}
	}
	if s := r.GetOperation(); s != "" {
		if f.Operation, err = acl.ParseOperation(s); err != nil {
			return f, err
		}
	}
	if s := r.GetPermission(); s != "" {
		if f.Permission, err = acl.ParsePermission(s); err != nil {
			return f, err
		}
	}
	return f, nil
}

func bindingPB(b acl.Binding) *skeinv1.AclBinding {
	return &skeinv1.AclBinding{
		Principal: b.Principal, ResourceType: b.Resource.String(), ResourceName: b.Name,
		PatternType: b.Pattern.String(), Operation: b.Operation.String(), Permission: b.Permission.String(),
	}
}

func bindingsPB(bs []acl.Binding) []*skeinv1.AclBinding {
	out := make([]*skeinv1.AclBinding, 0, len(bs))
	for _, b := range bs {
		out = append(out, bindingPB(b))
	}
	return out
}

// CreateAcls checks every binding, adds them, and answers them as stored
// once this gateway's metadata holds them all.
func (s *Admin) CreateAcls(ctx context.Context, req *skeinv1.CreateAclsRequest) (*skeinv1.CreateAclsResponse, error) {
	if len(req.GetAcls()) == 0 {
		return nil, errs.Errorf(errs.InvalidRequest, "no ACL bindings to create")
	}
	bs := make([]acl.Binding, 0, len(req.GetAcls()))
	for _, pb := range req.GetAcls() {
		b, err := bindingOf(pb)
		if err != nil {
			return nil, err
		}
		bs = append(bs, b)
	}
	results, err := s.c.CreateAcls(ctx, bs)
	if err != nil {
		return nil, err
	}
	for _, err := range results {
		if err != nil {
			return nil, err
		}
	}
	if _, err := s.await(ctx, func(m *metadata.Image) bool {
		for _, b := range bs {
			if !m.HasAcl(b) {
				return false
			}
		}
		return true
	}); err != nil {
		return nil, err
	}
	return &skeinv1.CreateAclsResponse{Acls: bindingsPB(bs)}, nil
}

// DescribeAcls answers the bindings the filter selects from this gateway's
// metadata.
func (s *Admin) DescribeAcls(ctx context.Context, req *skeinv1.DescribeAclsRequest) (*skeinv1.DescribeAclsResponse, error) {
	f, err := filterOf(req)
	if err != nil {
		return nil, err
	}
	if err := waitReady(ctx, s.c); err != nil {
		return nil, err
	}
	return &skeinv1.DescribeAclsResponse{Acls: bindingsPB(s.c.DescribeAcls(f))}, nil
}

// DeleteAcls removes the bindings the filter selects and answers them once
// this gateway's metadata no longer holds them.
func (s *Admin) DeleteAcls(ctx context.Context, req *skeinv1.DeleteAclsRequest) (*skeinv1.DeleteAclsResponse, error) {
	f, err := filterOf(req)
	if err != nil {
		return nil, err
	}
	if f == (acl.Filter{}) {
		return nil, errs.Errorf(errs.InvalidRequest, "an empty filter would delete every ACL binding: set at least one of principal, resource_type, resource_name, pattern_type, operation, permission")
	}
	deleted, err := s.c.DeleteAcls(ctx, f)
	if err != nil {
		return nil, err
	}
	if _, err := s.await(ctx, func(m *metadata.Image) bool {
		for _, b := range deleted {
			if m.HasAcl(b) {
				return false
			}
		}
		return true
	}); err != nil {
		return nil, err
	}
	return &skeinv1.DeleteAclsResponse{Deleted: bindingsPB(deleted)}, nil
}
