// Package acl is Kafka-style authorization as a pure core: ACL bindings
// (principal, resource type, name and pattern, operation, allow or deny),
// their parsing and validation, filters that select bindings, and the
// decision for one call. It holds no state and depends on no gRPC package
// (`make pure`): the controller keeps the bindings in its Raft state and
// the gateway asks Authorize with the bindings of its metadata image.
//
// The rules are Kafka's: a binding matches a principal when it names it or
// names User:*; a literal name matches that name, the literal name * every
// name, and a prefixed name every name that starts with it; operation All
// matches every operation, and an allowed Read, Write, Delete or Alter also
// allows Describe. A matching deny wins over any allow; with no matching
// allow the call is denied. Super users are allowed everything.
package acl

import (
	"fmt"
	"slices"
	"strings"

	"skein/libs/errs"
)

// ResourceType is what a binding protects.
type ResourceType int8

// The resource types.
const (
	Topic ResourceType = iota + 1
	Group
	Cluster
	TransactionalID
)

// Operation is what a principal does to a resource.
type Operation int8

// The operations. All matches every one of them.
const (
	All Operation = iota + 1
	Read
	Write
	Create
	Delete
	Alter
	Describe
)

// PatternType says how a binding's name matches resource names.
type PatternType int8

// The pattern types.
const (
	Literal PatternType = iota + 1
	Prefixed
)

// Permission is allow or deny.
type Permission int8

// The permissions.
const (
	Allow Permission = iota + 1
	Deny
)

// ClusterName is the name of the one cluster resource.
const ClusterName = "skein-cluster"

// Wildcard is the literal name that matches every name, and, as User:*, the
// principal that matches every principal.
const (
	Wildcard          = "*"
	WildcardPrincipal = "User:*"
)

var (
	resourceNames   = map[ResourceType]string{Topic: "topic", Group: "group", Cluster: "cluster", TransactionalID: "transactional_id"}
	operationNames  = map[Operation]string{All: "all", Read: "read", Write: "write", Create: "create", Delete: "delete", Alter: "alter", Describe: "describe"}
	patternNames    = map[PatternType]string{Literal: "literal", Prefixed: "prefixed"}
	permissionNames = map[Permission]string{Allow: "allow", Deny: "deny"}
)

func (r ResourceType) String() string { return nameOr(resourceNames, r) }
func (o Operation) String() string    { return nameOr(operationNames, o) }
func (p PatternType) String() string  { return nameOr(patternNames, p) }
func (p Permission) String() string   { return nameOr(permissionNames, p) }

func nameOr[K comparable](m map[K]string, k K) string {
	if n, ok := m[k]; ok {
		return n
	}
	return fmt.Sprintf("unknown(%d)", any(k)) // %d, not %v: %v would call String again
}

// parse finds name (case-insensitive, "-" read as "_") in m, or answers
// INVALID_REQUEST listing what is accepted.
func parse[K comparable](m map[K]string, what, name string, order []K) (K, error) {
	n := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(name)), "-", "_")
	for k, v := range m {
		if v == n {
			return k, nil
		}
	}
	valid := make([]string, len(order))
	for i, k := range order {
		valid[i] = m[k]
	}
	var zero K
	return zero, errs.Errorf(errs.InvalidRequest, "unknown %s %q: want one of %s", what, name, strings.Join(valid, ", "))
}

// ParseResourceType reads topic, group, cluster or transactional_id.
func ParseResourceType(s string) (ResourceType, error) {
	return parse(resourceNames, "resource type", s, []ResourceType{Topic, Group, Cluster, TransactionalID})
}

// ParseOperation reads all, read, write, create, delete, alter or describe.
func ParseOperation(s string) (Operation, error) {
	return parse(operationNames, "operation", s, []Operation{All, Read, Write, Create, Delete, Alter, Describe})
}

// ParsePatternType reads literal or prefixed.
func ParsePatternType(s string) (PatternType, error) {
	return parse(patternNames, "pattern type", s, []PatternType{Literal, Prefixed})
}

// ParsePermission reads allow or deny.
func ParsePermission(s string) (Permission, error) {
	return parse(permissionNames, "permission", s, []Permission{Allow, Deny})
}

// Binding is one ACL.
type Binding struct {
	Principal  string // "User:alice", or User:* for everyone
	Resource   ResourceType
	Name       string // the resource name or prefix; * (literal) for all; ClusterName for the cluster
	Pattern    PatternType
	Operation  Operation
	Permission Permission
}

func (b Binding) String() string {
	return fmt.Sprintf("%s %s %s:%s(%s) %s", b.Principal, b.Permission, b.Resource, b.Name, b.Pattern, b.Operation)
}

// Validate checks a binding's shape; it answers the binding as stored (a
// cluster binding's name is ClusterName). It is what every stored binding
// passes, so replaying or restoring the bindings a cluster holds checks no
// more than this: a new rule goes in ValidateNew.
func (b Binding) Validate() (Binding, error) {
	bad := func(format string, args ...any) (Binding, error) {
		return b, errs.Errorf(errs.InvalidRequest, "ACL binding: "+format, args...)
	}
	typ, name, ok := strings.Cut(b.Principal, ":")
	if !ok || typ == "" || name == "" {
		return bad("principal %q: want Type:name, e.g. User:alice (User:* for everyone)", b.Principal)
	}
	if _, ok := resourceNames[b.Resource]; !ok {
		return bad("unknown resource type %d", b.Resource)
	}
	if _, ok := operationNames[b.Operation]; !ok {
		return bad("unknown operation %d", b.Operation)
	}
	if _, ok := patternNames[b.Pattern]; !ok {
		return bad("unknown pattern type %d", b.Pattern)
	}
	if _, ok := permissionNames[b.Permission]; !ok {
		return bad("unknown permission %d", b.Permission)
	}
	if b.Resource == Cluster {
		if b.Pattern != Literal || (b.Name != "" && b.Name != ClusterName && b.Name != Wildcard) {
			return bad("the cluster resource is the literal name %q", ClusterName)
		}
		b.Name = ClusterName
	}
	if b.Name == "" {
		return bad("no resource name (use * with the literal pattern for every %s)", b.Resource)
	}
	if b.Pattern == Prefixed && b.Name == Wildcard {
		return bad("the prefix * is not a wildcard: use * with the literal pattern")
	}
	if b.Resource == Cluster && b.Operation != All && b.Operation != Create && b.Operation != Alter && b.Operation != Describe {
		return bad("operation %s does not apply to the cluster (all, create, alter or describe)", b.Operation)
	}
	return b, nil
}

// ValidateNew checks a binding an operator adds: Validate, and, as Kafka's
// kafka-acls does, that some call could ever match it. Every principal a
// caller is known as is a User (its certificate's common name, its
// token's subject), and each resource type's calls check only some
// operations; a binding of another type, of a name no caller can have, or
// of an operation never checked would match nothing, and a deny that
// matches nothing is worse than a refusal.
func (b Binding) ValidateNew() (Binding, error) {
	b, err := b.Validate()
	if err != nil {
		return b, err
	}
	bad := func(format string, args ...any) (Binding, error) {
		return b, errs.Errorf(errs.InvalidRequest, "ACL binding: "+format, args...)
	}
	typ, name, _ := strings.Cut(b.Principal, ":")
	if typ != PrincipalType {
		return bad("principal %q: the principal type is %s (%s:alice; %s:* for everyone)", b.Principal, PrincipalType, PrincipalType, PrincipalType)
	}
	if strings.TrimSpace(name) != name {
		return bad("principal %q: the name begins or ends with a space", b.Principal)
	}
	if ops := resourceOperations[b.Resource]; !slices.Contains(ops, b.Operation) {
		names := make([]string, len(ops))
		for i, o := range ops {
			names[i] = o.String()
		}
		return bad("operation %s does not apply to %s (%s)", b.Operation, resourceNoun[b.Resource], strings.Join(names, ", "))
	}
	return b, nil
}

// PrincipalType is the type of every principal: User:<name>.
const PrincipalType = "User"

// resourceOperations is what each resource type's calls check (All
// included, which matches each of them), as Kafka's kafka-acls refuses an
// operation its resource type has no use for.
var resourceOperations = map[ResourceType][]Operation{
	Topic:           {All, Read, Write, Create, Delete, Alter, Describe},
	Group:           {All, Read, Delete, Alter, Describe},
	Cluster:         {All, Create, Alter, Describe},
	TransactionalID: {All, Write, Describe},
}

var resourceNoun = map[ResourceType]string{Topic: "a topic", Group: "a group", Cluster: "the cluster", TransactionalID: "a transactional id"}

// Filter selects bindings: each zero field matches anything.
type Filter struct {
	Principal  string
	Resource   ResourceType
	Name       string
	Pattern    PatternType
	Operation  Operation
	Permission Permission
}

// Matches reports whether b is one the filter selects (fields compared
// exactly, not by the matching rules of Authorize).
func (f Filter) Matches(b Binding) bool {
	return (f.Principal == "" || f.Principal == b.Principal) &&
		(f.Resource == 0 || f.Resource == b.Resource) &&
		(f.Name == "" || f.Name == b.Name) &&
		(f.Pattern == 0 || f.Pattern == b.Pattern) &&
		(f.Operation == 0 || f.Operation == b.Operation) &&
		(f.Permission == 0 || f.Permission == b.Permission)
}

// Request is one authorization question.
type Request struct {
	Principal string
	Resource  ResourceType
	Name      string // ignored for Cluster
	Operation Operation
}

// Decision is Authorize's answer: Allowed, and the binding that decided
// (the zero Binding for a super user or when nothing matched).
type Decision struct {
	Allowed bool
	By      Binding
	Super   bool
}

// implies reports whether an allow of granted also allows op.
func implies(granted, op Operation) bool {
	if granted == All || granted == op {
		return true
	}
	return op == Describe && (granted == Read || granted == Write || granted == Delete || granted == Alter)
}

func (b Binding) matchesResource(r Request) bool {
	if b.Resource != r.Resource {
		return false
	}
	if r.Resource == Cluster {
		return true
	}
	switch b.Pattern {
	case Literal:
		return b.Name == Wildcard || b.Name == r.Name
	case Prefixed:
		return strings.HasPrefix(r.Name, b.Name)
	}
	return false
}

func (b Binding) matchesPrincipal(p string) bool {
	return b.Principal == p || b.Principal == WildcardPrincipal
}

// Authorize decides r against bindings: super users are allowed; a
// matching deny denies; a matching allow allows; nothing matching denies.
func Authorize(bindings []Binding, superUsers map[string]bool, r Request) Decision {
	if superUsers[r.Principal] {
		return Decision{Allowed: true, Super: true}
	}
	var allow *Binding
	for i := range bindings {
		b := &bindings[i]
		if !b.matchesPrincipal(r.Principal) || !b.matchesResource(r) {
			continue
		}
		switch b.Permission {
		case Deny:
			if b.Operation == All || b.Operation == r.Operation {
				return Decision{Allowed: false, By: *b}
			}
		case Allow:
			if allow == nil && implies(b.Operation, r.Operation) {
				allow = b
			}
		}
	}
	if allow != nil {
		return Decision{Allowed: true, By: *allow}
	}
	return Decision{}
}

// AuthorizeAny reports whether principal may do op on at least one
// resource of type typ, as Kafka's authorizeByResourceType (which an
// idempotent producer's InitProducerId asks, with write on topics): super
// users may; otherwise some allow binding must grant op on a name, literal
// or prefix, that no deny binding of op covers. A deny of the literal *
// covers every name, a denied prefix every name and prefix that starts
// with it, a denied literal name only itself.
func AuthorizeAny(bindings []Binding, superUsers map[string]bool, principal string, typ ResourceType, op Operation) bool {
	if superUsers[principal] {
		return true
	}
	deniedNames := map[string]bool{}
	var deniedPrefixes []string
	for _, b := range bindings {
		if b.Resource != typ || b.Permission != Deny || !b.matchesPrincipal(principal) || (b.Operation != All && b.Operation != op) {
			continue
		}
		switch {
		case b.Pattern == Literal && b.Name == Wildcard:
			return false
		case b.Pattern == Literal:
			deniedNames[b.Name] = true
		case b.Pattern == Prefixed:
			deniedPrefixes = append(deniedPrefixes, b.Name)
		}
	}
	for _, b := range bindings {
		if b.Resource != typ || b.Permission != Allow || !b.matchesPrincipal(principal) || !implies(b.Operation, op) {
			continue
		}
		if slices.ContainsFunc(deniedPrefixes, func(p string) bool { return strings.HasPrefix(b.Name, p) }) {
			continue
		}
		if b.Pattern == Literal && b.Name != Wildcard && deniedNames[b.Name] {
			continue
		}
		return true
	}
	return false
}

// RefusalAny answers the error of a principal AuthorizeAny refused, as
// Kafka answers an idempotent producer that may write no topic:
// CLUSTER_AUTHORIZATION_FAILED.
func RefusalAny(principal string, typ ResourceType, op Operation) error {
	return errs.Errorf(errs.ClusterAuthorizationFailed, "%s may not %s any %s", principal, op, typ)
}

// Refusal answers the error of a denied request: the row of its resource
// type (TOPIC_, GROUP_, CLUSTER_ or TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
// with a message naming the principal, the operation and the resource.
func Refusal(r Request) error {
	row := map[ResourceType]*errs.Error{
		Topic: errs.TopicAuthorizationFailed, Group: errs.GroupAuthorizationFailed,
		Cluster: errs.ClusterAuthorizationFailed, TransactionalID: errs.TransactionalIDAuthorizationFailed,
	}[r.Resource]
	if row == nil {
		row = errs.ClusterAuthorizationFailed
	}
	if r.Resource == Cluster {
		return errs.Errorf(row, "%s may not %s the cluster", r.Principal, r.Operation)
	}
	return errs.Errorf(row, "%s may not %s %s %q", r.Principal, r.Operation, r.Resource, r.Name)
}

// ParseSuperUsers reads a --super-users value: principals separated by
// commas or semicolons (Kafka's super.users uses semicolons).
func ParseSuperUsers(s string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, p := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' }) {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		typ, name, ok := strings.Cut(p, ":")
		switch {
		case !ok || typ == "" || name == "":
			return nil, fmt.Errorf("super user %q: want Type:name, e.g. User:admin", p)
		case typ != PrincipalType:
			// Every caller's principal is a User: another type (or
			// "user") would name nobody, silently.
			return nil, fmt.Errorf("super user %q: the principal type is %s (%s:admin); no caller is of type %s", p, PrincipalType, PrincipalType, typ)
		case name == Wildcard:
			return nil, fmt.Errorf("super user %q: a super user names one user, not every user", p)
		}
		out[p] = true
	}
	return out, nil
}
