package acl

import (
	"errors"
	"strings"
	"testing"

	"skein/libs/errs"
)

func allow(p string, rt ResourceType, name string, pt PatternType, op Operation) Binding {
	return Binding{Principal: p, Resource: rt, Name: name, Pattern: pt, Operation: op, Permission: Allow}
}

func deny(p string, rt ResourceType, name string, pt PatternType, op Operation) Binding {
	b := allow(p, rt, name, pt, op)
	b.Permission = Deny
	return b
}

func TestAuthorize(t *testing.T) {
	supers := map[string]bool{"User:admin": true}
	for _, tc := range []struct {
		name     string
		bindings []Binding
		req      Request
		want     bool
	}{
		{"nothing: denied", nil, Request{"User:alice", Topic, "orders", Read}, false},
		{"super user, no bindings", nil, Request{"User:admin", Cluster, "", Create}, true},
		{"super user beats a deny", []Binding{deny("User:admin", Topic, "*", Literal, All)}, Request{"User:admin", Topic, "orders", Write}, true},
		{"literal allow", []Binding{allow("User:alice", Topic, "orders", Literal, Read)}, Request{"User:alice", Topic, "orders", Read}, true},
		{"literal is not a prefix", []Binding{allow("User:alice", Topic, "orders", Literal, Read)}, Request{"User:alice", Topic, "orders-eu", Read}, false},
		{"other operation", []Binding{allow("User:alice", Topic, "orders", Literal, Read)}, Request{"User:alice", Topic, "orders", Write}, false},
		{"other principal", []Binding{allow("User:alice", Topic, "orders", Literal, Read)}, Request{"User:bob", Topic, "orders", Read}, false},
		{"other resource type, same name", []Binding{allow("User:alice", Group, "orders", Literal, Read)}, Request{"User:alice", Topic, "orders", Read}, false},
		{"prefixed allow", []Binding{allow("User:alice", Topic, "orders-", Prefixed, Write)}, Request{"User:alice", Topic, "orders-eu", Write}, true},
		{"prefixed, name shorter than prefix", []Binding{allow("User:alice", Topic, "orders-", Prefixed, Write)}, Request{"User:alice", Topic, "orders", Write}, false},
		{"wildcard name", []Binding{allow("User:alice", Topic, "*", Literal, Read)}, Request{"User:alice", Topic, "anything", Read}, true},
		{"prefixed * is no wildcard", []Binding{allow("User:alice", Topic, "*", Prefixed, Read)}, Request{"User:alice", Topic, "anything", Read}, false},
		{"wildcard principal", []Binding{allow("User:*", Topic, "public", Literal, Read)}, Request{"User:bob", Topic, "public", Read}, true},
		{"all allows every operation", []Binding{allow("User:alice", Group, "billing", Literal, All)}, Request{"User:alice", Group, "billing", Delete}, true},
		{"read implies describe", []Binding{allow("User:alice", Topic, "orders", Literal, Read)}, Request{"User:alice", Topic, "orders", Describe}, true},
		{"write implies describe", []Binding{allow("User:alice", Topic, "orders", Literal, Write)}, Request{"User:alice", Topic, "orders", Describe}, true},
		{"alter implies describe", []Binding{allow("User:alice", Topic, "orders", Literal, Alter)}, Request{"User:alice", Topic, "orders", Describe}, true},
		{"create does not imply describe", []Binding{allow("User:alice", Topic, "orders", Literal, Create)}, Request{"User:alice", Topic, "orders", Describe}, false},
		{"describe does not imply read", []Binding{allow("User:alice", Topic, "orders", Literal, Describe)}, Request{"User:alice", Topic, "orders", Read}, false},
		{"deny wins over allow", []Binding{allow("User:alice", Topic, "*", Literal, All), deny("User:alice", Topic, "secret", Literal, Read)}, Request{"User:alice", Topic, "secret", Read}, false},
		{"deny wins whatever the order", []Binding{deny("User:alice", Topic, "secret", Literal, Read), allow("User:alice", Topic, "secret", Literal, Read)}, Request{"User:alice", Topic, "secret", Read}, false},
		{"deny of another operation", []Binding{allow("User:alice", Topic, "*", Literal, All), deny("User:alice", Topic, "secret", Literal, Write)}, Request{"User:alice", Topic, "secret", Read}, true},
		{"deny read does not deny describe", []Binding{allow("User:alice", Topic, "*", Literal, All), deny("User:alice", Topic, "secret", Literal, Read)}, Request{"User:alice", Topic, "secret", Describe}, true},
		{"deny all denies describe", []Binding{allow("User:alice", Topic, "*", Literal, All), deny("User:alice", Topic, "secret", Literal, All)}, Request{"User:alice", Topic, "secret", Describe}, false},
		{"prefixed deny for everyone", []Binding{allow("User:alice", Topic, "*", Literal, All), deny("User:*", Topic, "internal-", Prefixed, All)}, Request{"User:alice", Topic, "internal-x", Write}, false},
		{"cluster create", []Binding{allow("User:ops", Cluster, ClusterName, Literal, Create)}, Request{"User:ops", Cluster, "", Create}, true},
		{"cluster alter is not create", []Binding{allow("User:ops", Cluster, ClusterName, Literal, Alter)}, Request{"User:ops", Cluster, "", Create}, false},
		{"transactional id", []Binding{allow("User:alice", TransactionalID, "billing-", Prefixed, Write)}, Request{"User:alice", TransactionalID, "billing-tx", Write}, true},
		{"anonymous matches User:*", []Binding{allow("User:*", Group, "*", Literal, Read)}, Request{"User:ANONYMOUS", Group, "g", Read}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Authorize(tc.bindings, supers, tc.req); got.Allowed != tc.want {
				t.Fatalf("Authorize(%v) = %+v, want allowed=%v", tc.req, got, tc.want)
			}
		})
	}
}

// Write on some topic, as an idempotent producer's InitProducerId asks.
func TestAuthorizeAny(t *testing.T) {
	supers := map[string]bool{"User:admin": true}
	for _, tc := range []struct {
		name      string
		bindings  []Binding
		principal string
		want      bool
	}{
		{"nothing", nil, "User:alice", false},
		{"a super user", nil, "User:admin", true},
		{"a literal topic", []Binding{allow("User:alice", Topic, "orders", Literal, Write)}, "User:alice", true},
		{"a prefix", []Binding{allow("User:alice", Topic, "orders-", Prefixed, Write)}, "User:alice", true},
		{"every topic", []Binding{allow("User:*", Topic, "*", Literal, All)}, "User:alice", true},
		{"read is not write", []Binding{allow("User:alice", Topic, "orders", Literal, Read)}, "User:alice", false},
		{"another principal's", []Binding{allow("User:bob", Topic, "orders", Literal, Write)}, "User:alice", false},
		{"a group is not a topic", []Binding{allow("User:alice", Group, "orders", Literal, Write)}, "User:alice", false},
		{"its name denied", []Binding{allow("User:alice", Topic, "orders", Literal, Write), deny("User:alice", Topic, "orders", Literal, Write)}, "User:alice", false},
		{"its name denied every operation", []Binding{allow("User:alice", Topic, "orders", Literal, Write), deny("User:*", Topic, "orders", Literal, All)}, "User:alice", false},
		{"another operation denied", []Binding{allow("User:alice", Topic, "orders", Literal, Write), deny("User:alice", Topic, "orders", Literal, Read)}, "User:alice", true},
		{"every name denied", []Binding{allow("User:alice", Topic, "orders-", Prefixed, Write), deny("User:alice", Topic, "*", Literal, Write)}, "User:alice", false},
		{"a prefix covering the name denied", []Binding{allow("User:alice", Topic, "orders", Literal, Write), deny("User:alice", Topic, "ord", Prefixed, Write)}, "User:alice", false},
		{"a prefix covering the prefix denied", []Binding{allow("User:alice", Topic, "orders-", Prefixed, Write), deny("User:alice", Topic, "orders", Prefixed, Write)}, "User:alice", false},
		{"a longer prefix denied leaves names", []Binding{allow("User:alice", Topic, "orders-", Prefixed, Write), deny("User:alice", Topic, "orders-eu", Prefixed, Write)}, "User:alice", true},
		{"a literal denied leaves the prefix", []Binding{allow("User:alice", Topic, "orders-", Prefixed, Write), deny("User:alice", Topic, "orders-", Literal, Write)}, "User:alice", true},
		{"every topic but one", []Binding{allow("User:alice", Topic, "*", Literal, Write), deny("User:alice", Topic, "secret", Literal, Write)}, "User:alice", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := AuthorizeAny(tc.bindings, supers, tc.principal, Topic, Write); got != tc.want {
				t.Fatalf("AuthorizeAny = %v, want %v", got, tc.want)
			}
		})
	}
	if err := RefusalAny("User:alice", Topic, Write); !errors.Is(err, errs.ClusterAuthorizationFailed) || !strings.Contains(err.Error(), "User:alice may not write any topic") {
		t.Fatalf("RefusalAny: %v", err)
	}
}

func TestValidate(t *testing.T) {
	good := allow("User:alice", Topic, "orders", Literal, Read)
	for _, tc := range []struct {
		name   string
		mod    func(*Binding)
		errHas string
	}{
		{"good", func(*Binding) {}, ""},
		{"no principal type", func(b *Binding) { b.Principal = "alice" }, "want Type:name"},
		{"empty principal name", func(b *Binding) { b.Principal = "User:" }, "want Type:name"},
		{"no name", func(b *Binding) { b.Name = "" }, "no resource name"},
		{"prefixed star", func(b *Binding) { b.Name, b.Pattern = "*", Prefixed }, "not a wildcard"},
		{"unknown resource", func(b *Binding) { b.Resource = 9 }, "unknown resource type"},
		{"unknown operation", func(b *Binding) { b.Operation = 0 }, "unknown operation"},
		{"unknown pattern", func(b *Binding) { b.Pattern = 0 }, "unknown pattern"},
		{"unknown permission", func(b *Binding) { b.Permission = 0 }, "unknown permission"},
		{"cluster, empty name", func(b *Binding) { b.Resource, b.Name, b.Operation = Cluster, "", Create }, ""},
		{"cluster, other name", func(b *Binding) { b.Resource, b.Name, b.Operation = Cluster, "prod", Create }, "literal name"},
		{"cluster, prefixed", func(b *Binding) { b.Resource, b.Pattern, b.Operation = Cluster, Prefixed, Create }, "literal name"},
		{"cluster read", func(b *Binding) { b.Resource, b.Name = Cluster, ClusterName }, "does not apply to the cluster"},
		{"cluster all", func(b *Binding) { b.Resource, b.Name, b.Operation = Cluster, ClusterName, All }, ""},
		{"group read", func(b *Binding) { b.Resource = Group }, ""},
		{"group alter", func(b *Binding) { b.Resource, b.Operation = Group, Alter }, ""},
		{"group delete", func(b *Binding) { b.Resource, b.Operation = Group, Delete }, ""},
		{"group write", func(b *Binding) { b.Resource, b.Operation = Group, Write }, "does not apply to a group (all, read, delete, alter, describe)"},
		{"group create", func(b *Binding) { b.Resource, b.Operation = Group, Create }, "does not apply to a group"},
		{"transactional id write", func(b *Binding) { b.Resource, b.Operation = TransactionalID, Write }, ""},
		{"transactional id describe", func(b *Binding) { b.Resource, b.Operation = TransactionalID, Describe }, ""},
		{"transactional id read", func(b *Binding) { b.Resource = TransactionalID }, "does not apply to a transactional id (all, write, describe)"},
		{"transactional id alter", func(b *Binding) { b.Resource, b.Operation = TransactionalID, Alter }, "does not apply to a transactional id"},
		{"topic create", func(b *Binding) { b.Operation = Create }, ""},
		{"everyone", func(b *Binding) { b.Principal = WildcardPrincipal }, ""},
		{"a name with a colon", func(b *Binding) { b.Principal = "User:bob:x" }, ""},
		{"a name with a space inside", func(b *Binding) { b.Principal = "User:Ada Lovelace" }, ""},
		{"lower-case type", func(b *Binding) { b.Principal = "user:alice" }, "the principal type is User"},
		{"another type", func(b *Binding) { b.Principal = "Group:admins" }, "the principal type is User"},
		{"a space before the type", func(b *Binding) { b.Principal = " User:alice" }, "the principal type is User"},
		{"a space after the colon", func(b *Binding) { b.Principal = "User: alice" }, "begins or ends with a space"},
		{"a space at the end", func(b *Binding) { b.Principal = "User:alice " }, "begins or ends with a space"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := good
			tc.mod(&b)
			got, err := b.ValidateNew()
			if tc.errHas == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got.Resource == Cluster && got.Name != ClusterName {
					t.Fatalf("cluster binding stored as %q", got.Name)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.errHas) || !errors.Is(err, errs.InvalidRequest) {
				t.Fatalf("got %v, want INVALID_REQUEST with %q", err, tc.errHas)
			}
		})
	}
}

// Bindings stored before ValidateNew's rules (a cluster's Raft log and
// snapshots may hold them) still pass Validate, which replay and restore
// apply: they match nothing, and an operator removes them.
func TestValidateKeepsWhatAClusterMayHoldFromBefore(t *testing.T) {
	for _, b := range []Binding{
		{Principal: "user:alice", Resource: Topic, Name: "orders", Pattern: Literal, Operation: Read, Permission: Deny},
		{Principal: "User: alice", Resource: Topic, Name: "orders", Pattern: Literal, Operation: Read, Permission: Allow},
		{Principal: "User:alice", Resource: Group, Name: "g", Pattern: Literal, Operation: Write, Permission: Deny},
		{Principal: "User:alice", Resource: TransactionalID, Name: "t", Pattern: Literal, Operation: Read, Permission: Allow},
	} {
		if _, err := b.Validate(); err != nil {
			t.Errorf("Validate(%s): %v, want it kept", b, err)
		}
		if _, err := b.ValidateNew(); err == nil {
			t.Errorf("ValidateNew(%s) accepted it", b)
		}
	}
}

func TestParse(t *testing.T) {
	if rt, err := ParseResourceType("Transactional-ID"); err != nil || rt != TransactionalID {
		t.Errorf("transactional-id: %v %v", rt, err)
	}
	if op, err := ParseOperation("DESCRIBE"); err != nil || op != Describe {
		t.Errorf("DESCRIBE: %v %v", op, err)
	}
	if pt, err := ParsePatternType("prefixed"); err != nil || pt != Prefixed {
		t.Errorf("prefixed: %v %v", pt, err)
	}
	if p, err := ParsePermission("deny"); err != nil || p != Deny {
		t.Errorf("deny: %v %v", p, err)
	}
	for _, tc := range []struct {
		err    error
		errHas string
	}{
		{second(ParseResourceType("queue")), `unknown resource type "queue": want one of topic, group, cluster, transactional_id`},
		{second(ParseOperation("idempotent_write")), `unknown operation "idempotent_write": want one of all, read, write, create, delete, alter, describe`},
		{second(ParsePatternType("match")), `unknown pattern type "match": want one of literal, prefixed`},
		{second(ParsePermission("maybe")), `unknown permission "maybe": want one of allow, deny`},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.errHas) || !errors.Is(tc.err, errs.InvalidRequest) {
			t.Errorf("got %v, want INVALID_REQUEST with %q", tc.err, tc.errHas)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestFilter(t *testing.T) {
	bs := []Binding{
		allow("User:alice", Topic, "orders", Literal, Read),
		allow("User:alice", Group, "billing", Literal, Read),
		deny("User:bob", Topic, "orders", Literal, Write),
	}
	count := func(f Filter) int {
		n := 0
		for _, b := range bs {
			if f.Matches(b) {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		f    Filter
		want int
	}{
		{Filter{}, 3},
		{Filter{Principal: "User:alice"}, 2},
		{Filter{Resource: Topic}, 2},
		{Filter{Resource: Topic, Name: "orders", Permission: Deny}, 1},
		{Filter{Operation: Read, Resource: Group}, 1},
		{Filter{Pattern: Prefixed}, 0},
	} {
		if got := count(tc.f); got != tc.want {
			t.Errorf("%+v selects %d, want %d", tc.f, got, tc.want)
		}
	}
}

func TestRefusal(t *testing.T) {
	for _, tc := range []struct {
		r    Request
		row  *errs.Error
		text string
	}{
		{Request{"User:alice", Topic, "orders", Write}, errs.TopicAuthorizationFailed, `User:alice may not write topic "orders"`},
		{Request{"User:alice", Group, "billing", Read}, errs.GroupAuthorizationFailed, `User:alice may not read group "billing"`},
		{Request{"User:alice", Cluster, "", Create}, errs.ClusterAuthorizationFailed, "User:alice may not create the cluster"},
		{Request{"User:alice", TransactionalID, "tx", Write}, errs.TransactionalIDAuthorizationFailed, `User:alice may not write transactional_id "tx"`},
	} {
		err := Refusal(tc.r)
		if !errors.Is(err, tc.row) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("Refusal(%v) = %v, want %s with %q", tc.r, err, tc.row.Name, tc.text)
		}
	}
}

func TestParseSuperUsers(t *testing.T) {
	got, err := ParseSuperUsers("User:client; User:ops,User:admin ")
	if err != nil || len(got) != 3 || !got["User:client"] || !got["User:ops"] || !got["User:admin"] {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"client", "user:alice", "Group:ops", "User:*", "User:a;:b"} {
		if got, err := ParseSuperUsers(bad); err == nil {
			t.Errorf("%q accepted as super users %v", bad, got)
		}
	}
}

// An unknown value names its number (and does not recurse through String).
func TestUnknownValueNames(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{ResourceType(9).String(), "unknown(9)"},
		{Operation(99).String(), "unknown(99)"},
		{PatternType(0).String(), "unknown(0)"},
		{Permission(-1).String(), "unknown(-1)"},
		{Binding{Principal: "User:x", Resource: Topic, Name: "t", Pattern: Literal, Operation: 99, Permission: Allow}.String(), `User:x allow topic:t(literal) unknown(99)`},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
