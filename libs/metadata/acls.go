package metadata

import (
	"cmp"
	"maps"
	"slices"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/acl"
)

// Binding reads an ACL record as libs/acl's binding.
func Binding(r *controllerv1.AclRecord) acl.Binding {
	return acl.Binding{
		Principal:  r.GetPrincipal(),
		Resource:   acl.ResourceType(r.GetResourceType()),
		Name:       r.GetResourceName(),
		Pattern:    acl.PatternType(r.GetPatternType()),
		Operation:  acl.Operation(r.GetOperation()),
		Permission: acl.Permission(r.GetPermission()),
	}
}

// AclOf is the record of a binding.
func AclOf(b acl.Binding) *controllerv1.AclRecord {
	return &controllerv1.AclRecord{
		Principal:    b.Principal,
		ResourceType: int32(b.Resource),
		ResourceName: b.Name,
		PatternType:  int32(b.Pattern),
		Operation:    int32(b.Operation),
		Permission:   int32(b.Permission),
	}
}

// AclFilter reads a filter record as libs/acl's filter.
func AclFilter(f *controllerv1.AclFilter) acl.Filter {
	return acl.Filter{
		Principal:  f.GetPrincipal(),
		Resource:   acl.ResourceType(f.GetResourceType()),
		Name:       f.GetResourceName(),
		Pattern:    acl.PatternType(f.GetPatternType()),
		Operation:  acl.Operation(f.GetOperation()),
		Permission: acl.Permission(f.GetPermission()),
	}
}

// AclFilterOf is the record of a filter.
func AclFilterOf(f acl.Filter) *controllerv1.AclFilter {
	return &controllerv1.AclFilter{
		Principal:    f.Principal,
		ResourceType: int32(f.Resource),
		ResourceName: f.Name,
		PatternType:  int32(f.Pattern),
		Operation:    int32(f.Operation),
		Permission:   int32(f.Permission),
	}
}

// AclRecord wraps the addition of an ACL binding.
func AclRecord(b acl.Binding) *controllerv1.MetadataRecord {
	return &controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_Acl{Acl: AclOf(b)}}
}

// RemovedAclRecord wraps the removal of an ACL binding.
func RemovedAclRecord(b acl.Binding) *controllerv1.MetadataRecord {
	return &controllerv1.MetadataRecord{Record: &controllerv1.MetadataRecord_RemovedAcl{RemovedAcl: AclOf(b)}}
}

// HasAcl reports whether the image holds exactly this binding.
func (im *Image) HasAcl(b acl.Binding) bool {
	_, ok := im.acls[b]
	return ok
}

// Acls returns every ACL binding in a fixed order (principal, resource
// type, name, pattern, operation, permission): the slice is the caller's.
func (im *Image) Acls() []acl.Binding {
	out := slices.Collect(maps.Keys(im.acls))
	slices.SortFunc(out, compareBindings)
	return out
}

// MatchingAcls returns the bindings f selects, in the order of Acls.
func (im *Image) MatchingAcls(f acl.Filter) []acl.Binding {
	return slices.DeleteFunc(im.Acls(), func(b acl.Binding) bool { return !f.Matches(b) })
}

func compareBindings(a, b acl.Binding) int {
	return cmp.Or(
		cmp.Compare(a.Principal, b.Principal),
		cmp.Compare(a.Resource, b.Resource),
		cmp.Compare(a.Name, b.Name),
		cmp.Compare(a.Pattern, b.Pattern),
		cmp.Compare(a.Operation, b.Operation),
		cmp.Compare(a.Permission, b.Permission),
	)
}
