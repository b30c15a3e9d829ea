// Package peerauth says who calls a Skein service and what it may do there.
//
// On a cluster with TLS every internal hop is mutual TLS, and a
// certificate names its holder twice: its common name (the principal
// User:<CN> that ACLs name) and a URI SAN spiffe://skein/<role>/<id> (the
// Skein service it was issued to). From that:
//
//   - Rules bind internal methods to the roles allowed to call them: only a
//     storage node may open a Replicate stream or register as a broker, only
//     a transaction coordinator writes transaction markers. A peer of
//     another role is refused with CLUSTER_AUTHORIZATION_FAILED.
//   - Caller is who a call acts for. A Skein service calling for itself
//     (a coordinator writing its internal topic, a follower fetching) is
//     trusted: ACLs bind clients, not the cluster. The gateway acts for its
//     clients and names each one's principal on the call (PrincipalMD, or a
//     request's principal field on pipelined streams), and the service
//     decides with that principal; a principal named by anyone else is
//     ignored. A client with a certificate of the cluster's CA calling a
//     service directly is its certificate's principal.
//   - Authorizer decides a caller's request with libs/acl against the ACL
//     bindings of the metadata the service follows.
//
// On a plaintext cluster nobody has an identity: no rule or ACL applies
// (and a service refuses to start with --authorizer but without TLS).
package peerauth

import (
	"crypto/x509"
	"fmt"
	"strings"

	"google.golang.org/grpc/metadata"
)

// The roles of Skein's own services, as their certificates name them.
const (
	RoleController = "controller"
	RoleStorage    = "storage"
	RoleGroupCoord = "groupcoord"
	RoleTxnCoord   = "txncoord"
	RoleGateway    = "gateway"
)

var serviceRoles = map[string]bool{
	RoleController: true, RoleStorage: true, RoleGroupCoord: true, RoleTxnCoord: true, RoleGateway: true,
}

// PrincipalMD is the call metadata key in which the gateway names the
// client it acts for.
const PrincipalMD = "skein-principal"

// SetPrincipal names principal in md under key (PrincipalMD, say),
// replacing what md named there. gRPC metadata carries printable ASCII
// only, so a principal of printable ASCII rides as it is, as it always
// has, and any other rides in key+"-bin" (raw bytes, which gRPC encodes),
// with key itself holding two markers: a process that reads only key
// (an older one) sees two principals and refuses the call, never reads it
// as no principal (a service calling for itself) or as another one.
func SetPrincipal(md metadata.MD, key, principal string) {
	md.Delete(key)
	md.Delete(key + "-bin")
	if printableASCII(principal) {
		md.Set(key, principal)
		return
	}
	md.Set(key+"-bin", principal)
	md.Set(key, binMarker, binMarker)
}

// binMarker fills key beside key+"-bin" (see SetPrincipal).
const binMarker = "(in -bin)"

// PrincipalIn reads what SetPrincipal wrote under key: the principal, and
// whether one was named. Anything else (two principals, a -bin value
// without its markers) is an error, never read as none.
func PrincipalIn(md metadata.MD, key string) (principal string, named bool, err error) {
	plain, bin := md.Get(key), md.Get(key+"-bin")
	switch {
	case len(bin) > 1:
		return "", false, fmt.Errorf("the call names %d principals in %s-bin; a call acts for one", len(bin), key)
	case len(bin) == 1:
		if len(plain) != 2 || plain[0] != binMarker || plain[1] != binMarker {
			return "", false, fmt.Errorf("the call names a principal in %s-bin and another in %s", key, key)
		}
		return bin[0], true, nil
	case len(plain) > 1:
		return "", false, fmt.Errorf("the call names %d principals in %s; a call acts for one", len(plain), key)
	case len(plain) == 1:
		return plain[0], true, nil
	}
	return "", false, nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// Peer is the holder of a verified certificate.
type Peer struct {
	// Role and ID are the certificate's spiffe://skein/<role>/<id>; both
	// empty when it names none (a certificate from another tool).
	Role, ID string
	// Principal is User:<common name>; "" without a common name.
	Principal string
}

// FromCertificate reads the peer a verified certificate names.
func FromCertificate(c *x509.Certificate) Peer {
	var p Peer
	if c == nil {
		return p
	}
	if c.Subject.CommonName != "" {
		p.Principal = "User:" + c.Subject.CommonName
	}
	for _, u := range c.URIs {
		if u.Scheme != "spiffe" || u.Host != "skein" {
			continue
		}
		role, id, ok := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
		if ok && role != "" && id != "" && !strings.Contains(id, "/") {
			p.Role, p.ID = role, id
			break
		}
	}
	return p
}

// RoleOf answers the role and id a certificate named name is issued for:
// a Skein service's "<role>-<number>" (storage-2), or a bare role
// (gateway: id 1); any other name (alice, gateway-admin) is a client's,
// its principal User:<name>.
func RoleOf(name string) (role, id string) {
	if r, i, ok := strings.Cut(name, "-"); ok && serviceRoles[r] && numeric(i) {
		return r, i
	}
	if serviceRoles[name] {
		return name, "1"
	}
	return "client", name
}

// Service reports whether the peer is one of Skein's own services.
func (p Peer) Service() bool { return serviceRoles[p.Role] }

// String is how a peer appears in messages and logs.
func (p Peer) String() string {
	name := p.Principal
	if name == "" {
		name = "a certificate without a common name"
	}
	if p.Role == "" {
		return name + " (no Skein role)"
	}
	return name + " (" + p.Role + " " + p.ID + ")"
}

// Caller is who a call acts for.
type Caller struct {
	Peer Peer
	// Principal is whose ACLs decide the call: the client the gateway
	// named, or the peer's own.
	Principal string
	// Service is true when a Skein service calls for itself: ACLs do not
	// apply.
	Service bool
}

// CallerOf answers who a call from peer acts for, given the principal the
// call names (its PrincipalMD, or a request's field): believed from the
// gateway only.
func CallerOf(peer Peer, named string) Caller {
	switch {
	case peer.Role == RoleGateway && named != "":
		return Caller{Peer: peer, Principal: named}
	case peer.Service():
		return Caller{Peer: peer, Principal: peer.Principal, Service: true}
	default:
		return Caller{Peer: peer, Principal: peer.Principal}
	}
}

// For answers the caller of one request of a call (a request of a
// pipelined stream naming the client it carries): the gateway's named
// principal replaces the call's; anyone else's is ignored.
func (c Caller) For(named string) Caller {
	if named == "" || c.Peer.Role != RoleGateway {
		return c
	}
	return CallerOf(c.Peer, named)
}

func numeric(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
