package peerauth

import (
	"bytes"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	grpcmd "google.golang.org/grpc/metadata"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/acl"
	"skein/libs/errs"
	"skein/libs/metadata"
)

func cert(cn string, uris ...string) *x509.Certificate {
	c := &x509.Certificate{Subject: pkix.Name{CommonName: cn}}
	for _, u := range uris {
		parsed, err := url.Parse(u)
		if err != nil {
			panic(err)
		}
		c.URIs = append(c.URIs, parsed)
	}
	return c
}

func TestFromCertificate(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    *x509.Certificate
		want Peer
	}{
		{"storage", cert("storage-2", "spiffe://skein/storage/2"), Peer{Role: "storage", ID: "2", Principal: "User:storage-2"}},
		{"client", cert("alice", "spiffe://skein/client/alice"), Peer{Role: "client", ID: "alice", Principal: "User:alice"}},
		{"no SAN", cert("bob"), Peer{Principal: "User:bob"}},
		{"another trust domain", cert("x", "spiffe://other/storage/1"), Peer{Principal: "User:x"}},
		{"not spiffe", cert("x", "https://skein/storage/1"), Peer{Principal: "User:x"}},
		{"no id", cert("x", "spiffe://skein/storage/"), Peer{Principal: "User:x"}},
		{"too deep", cert("x", "spiffe://skein/storage/1/2"), Peer{Principal: "User:x"}},
		{"first good SAN", cert("x", "spiffe://skein/bad", "spiffe://skein/gateway/1"), Peer{Role: "gateway", ID: "1", Principal: "User:x"}},
		{"no common name", cert("", "spiffe://skein/storage/1"), Peer{Role: "storage", ID: "1"}},
		{"nil", nil, Peer{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FromCertificate(tc.c); got != tc.want {
				t.Errorf("FromCertificate = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCallerOf(t *testing.T) {
	gw := Peer{Role: RoleGateway, ID: "1", Principal: "User:gateway-1"}
	st := Peer{Role: RoleStorage, ID: "1", Principal: "User:storage-1"}
	alice := Peer{Role: "client", ID: "alice", Principal: "User:alice"}
	for _, tc := range []struct {
		name  string
		peer  Peer
		named string
		want  Caller
	}{
		{"the gateway for a client", gw, "User:bob", Caller{Peer: gw, Principal: "User:bob"}},
		{"the gateway for itself", gw, "", Caller{Peer: gw, Principal: "User:gateway-1", Service: true}},
		{"a service", st, "", Caller{Peer: st, Principal: "User:storage-1", Service: true}},
		{"a service naming someone is itself", st, "User:bob", Caller{Peer: st, Principal: "User:storage-1", Service: true}},
		{"a client", alice, "", Caller{Peer: alice, Principal: "User:alice"}},
		{"a client naming someone else is itself", alice, "User:admin", Caller{Peer: alice, Principal: "User:alice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CallerOf(tc.peer, tc.named); got != tc.want {
				t.Errorf("CallerOf = %+v, want %+v", got, tc.want)
			}
		})
	}
	// For: a stream's request names its own client, from the gateway only.
	if got := CallerOf(gw, "").For("User:carol"); got.Principal != "User:carol" || got.Service {
		t.Errorf("gateway stream For(carol) = %+v", got)
	}
	if got := CallerOf(gw, "User:bob").For(""); got.Principal != "User:bob" {
		t.Errorf("For(\"\") changed the caller: %+v", got)
	}
	if got := CallerOf(alice, "").For("User:admin"); got.Principal != "User:alice" {
		t.Errorf("a client's request named another principal and was believed: %+v", got)
	}
}

func TestRules(t *testing.T) {
	rules := Rules{"/s/Replicate": {RoleStorage}, "/s/Markers": {RoleTxnCoord, RoleController}}
	for _, tc := range []struct {
		method string
		peer   Peer
		ok     bool
	}{
		{"/s/Replicate", Peer{Role: RoleStorage, ID: "2"}, true},
		{"/s/Replicate", Peer{Role: RoleGateway, ID: "1"}, false},
		{"/s/Replicate", Peer{Role: "client", ID: "x"}, false},
		{"/s/Replicate", Peer{Principal: "User:x"}, false},
		{"/s/Markers", Peer{Role: RoleController, ID: "1"}, true},
		{"/s/Markers", Peer{Role: RoleStorage, ID: "1"}, false},
		{"/s/Produce", Peer{Principal: "User:x"}, true},
	} {
		err := rules.Check(tc.method, tc.peer)
		if (err == nil) != tc.ok {
			t.Errorf("Check(%s, %v) = %v, want ok=%v", tc.method, tc.peer, err, tc.ok)
		}
		if err != nil && errs.Of(err) != errs.ClusterAuthorizationFailed {
			t.Errorf("refusal %v is %s, want CLUSTER_AUTHORIZATION_FAILED", err, errs.Of(err).Name)
		}
	}
}

func TestAuthorizer(t *testing.T) {
	img := metadata.New("c")
	grant := acl.Binding{Principal: "User:alice", Resource: acl.Topic, Name: "orders", Pattern: acl.Literal, Operation: acl.Write, Permission: acl.Allow}
	if err := img.Apply(&controllerv1.MetadataDelta{Version: 1, Records: []*controllerv1.MetadataRecord{metadata.AclRecord(grant)}}); err != nil {
		t.Fatal(err)
	}
	a := NewAuthorizer(func() *metadata.Image { return img }, map[string]bool{"User:admin": true}, discard())
	alice := CallerOf(Peer{Role: "client", ID: "a", Principal: "User:alice"}, "")
	bob := CallerOf(Peer{Role: RoleGateway, ID: "1", Principal: "User:gateway-1"}, "User:bob")
	admin := CallerOf(Peer{Role: RoleGateway, ID: "1", Principal: "User:gateway-1"}, "User:admin")
	svc := CallerOf(Peer{Role: RoleGroupCoord, ID: "1", Principal: "User:groupcoord-1"}, "")
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		c      Caller
		known  bool
		topic  string
		op     acl.Operation
		wantOK bool
	}{
		{"granted", alice, true, "orders", acl.Write, true},
		{"describe implied by write", alice, true, "orders", acl.Describe, true},
		{"another topic", alice, true, "payments", acl.Write, false},
		{"another operation", alice, true, "orders", acl.Read, false},
		{"the gateway's client without ACL", bob, true, "orders", acl.Write, false},
		{"super user through the gateway", admin, true, "payments", acl.Delete, true},
		{"a service", svc, true, "payments", acl.Write, true},
		{"plaintext: nobody known", Caller{}, false, "payments", acl.Write, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := a.AuthorizeCaller(ctx, tc.c, tc.known, "/test/Produce", acl.Topic, tc.topic, tc.op)
			if (err == nil) != tc.wantOK {
				t.Fatalf("AuthorizeCaller = %v, want ok=%v", err, tc.wantOK)
			}
			if err != nil && errs.Of(err) != errs.TopicAuthorizationFailed {
				t.Errorf("refusal is %s, want TOPIC_AUTHORIZATION_FAILED", errs.Of(err).Name)
			}
		})
	}
	var off *Authorizer
	if err := off.AuthorizeCaller(ctx, bob, true, "/test/Produce", acl.Topic, "x", acl.Write); err != nil {
		t.Errorf("a nil authorizer refused: %v", err)
	}
	// Through the context, as handlers call it.
	if err := a.Authorize(WithCaller(ctx, bob), "/test/Fetch", acl.Topic, "orders", acl.Read); errs.Of(err) != errs.TopicAuthorizationFailed {
		t.Errorf("Authorize(bob) = %v", err)
	}
}

// A request's topics, one per partition, are decided once each: the
// refusals line up with the topics, and each refused topic logs one audit
// line however many partitions name it.
func TestTopicRefusals(t *testing.T) {
	img := metadata.New("c")
	grant := acl.Binding{Principal: "User:alice", Resource: acl.Topic, Name: "orders", Pattern: acl.Literal, Operation: acl.Write, Permission: acl.Allow}
	if err := img.Apply(&controllerv1.MetadataDelta{Version: 1, Records: []*controllerv1.MetadataRecord{metadata.AclRecord(grant)}}); err != nil {
		t.Fatal(err)
	}
	var audit bytes.Buffer
	a := NewAuthorizer(func() *metadata.Image { return img }, nil, slog.New(slog.NewJSONHandler(&audit, nil)))
	alice := CallerOf(Peer{Role: "client", ID: "a", Principal: "User:alice"}, "")
	ctx := context.Background()
	topics := []string{"orders", "payments", "orders", "payments", "payments"}
	got := a.TopicRefusals(ctx, alice, true, "/test/Produce", topics, acl.Write)
	if len(got) != len(topics) {
		t.Fatalf("%d refusals for %d topics", len(got), len(topics))
	}
	for i, err := range got {
		want := topics[i] == "payments"
		if (err != nil) != want || err != nil && errs.Of(err) != errs.TopicAuthorizationFailed {
			t.Errorf("topic %d (%s): %v, want refused=%v with TOPIC_AUTHORIZATION_FAILED", i, topics[i], err, want)
		}
	}
	if n := strings.Count(audit.String(), "\n"); n != 1 {
		t.Errorf("%d audit lines, want 1 (payments, decided once):\n%s", n, audit.String())
	}
	if got := a.TopicRefusals(ctx, alice, true, "/test/Produce", []string{"orders", "orders"}, acl.Write); got != nil {
		t.Errorf("every topic allowed: %v, want nil", got)
	}
	svc := CallerOf(Peer{Role: RoleStorage, ID: "2", Principal: "User:storage-2"}, "")
	var off *Authorizer
	for name, refused := range map[string][]error{
		"a service":            a.TopicRefusals(ctx, svc, true, "/test/Produce", topics, acl.Write),
		"plaintext":            a.TopicRefusals(ctx, Caller{}, false, "/test/Produce", topics, acl.Write),
		"authorization is off": off.TopicRefusals(ctx, alice, true, "/test/Produce", topics, acl.Write),
	} {
		if refused != nil {
			t.Errorf("%s: %v, want nil", name, refused)
		}
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestRoleOf(t *testing.T) {
	for _, tc := range []struct{ name, role, id string }{
		{"storage-2", "storage", "2"},
		{"controller-1", "controller", "1"},
		{"gateway", "gateway", "1"},
		{"gateway-2", "gateway", "2"},
		{"alice", "client", "alice"},
		{"client", "client", "client"},
		{"storage-", "client", "storage-"},
		{"web-frontend", "client", "web-frontend"},
		{"gateway-admin", "client", "gateway-admin"},
		{"storage-team", "client", "storage-team"},
	} {
		if role, id := RoleOf(tc.name); role != tc.role || id != tc.id {
			t.Errorf("RoleOf(%q) = %s, %s; want %s, %s", tc.name, role, id, tc.role, tc.id)
		}
	}
}

// A principal rides gRPC metadata and comes back whole: printable ASCII as
// it is (as before the -bin key), anything else in the -bin key, with
// markers a reader of the plain key alone refuses as two principals.
func TestPrincipalInMetadata(t *testing.T) {
	for _, p := range []string{"User:alice", "User:a b~", "User:50%", "User:%61dmin", "User:josé", "User:a\nb", ""} {
		md := grpcmd.MD{}
		SetPrincipal(md, PrincipalMD, "User:old") // replaced, not added to
		SetPrincipal(md, PrincipalMD, p)
		if got, named, err := PrincipalIn(md, PrincipalMD); err != nil || !named || got != p {
			t.Errorf("%q: read back %q, %v, %v", p, got, named, err)
		}
		plain := md.Get(PrincipalMD)
		if printableASCII(p) {
			if len(plain) != 1 || plain[0] != p || len(md.Get(PrincipalMD+"-bin")) != 0 {
				t.Errorf("%q: metadata %v, want it plain", p, md)
			}
		} else if len(plain) != 2 {
			t.Errorf("%q: the plain key holds %v, want two markers (an older reader refuses two)", p, plain)
		}
	}
	if _, named, err := PrincipalIn(grpcmd.MD{}, PrincipalMD); named || err != nil {
		t.Errorf("no principal: %v %v", named, err)
	}
	for name, md := range map[string]grpcmd.MD{
		"two plain":            grpcmd.Pairs(PrincipalMD, "User:a", PrincipalMD, "User:b"),
		"two -bin":             grpcmd.Pairs(PrincipalMD+"-bin", "User:a", PrincipalMD+"-bin", "User:b", PrincipalMD, binMarker, PrincipalMD, binMarker),
		"-bin without markers": grpcmd.Pairs(PrincipalMD+"-bin", "User:josé"),
		"-bin beside a plain":  grpcmd.Pairs(PrincipalMD+"-bin", "User:josé", PrincipalMD, "User:bob"),
	} {
		if got, _, err := PrincipalIn(md, PrincipalMD); err == nil {
			t.Errorf("%s: read %q, want an error", name, got)
		}
	}
}
