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

// EncodePrincipal is how a principal rides in PrincipalMD. gRPC metadata
// carries printable ASCII only, so every other byte of the principal's
// UTF-8, and '%' itself, is written %XX; a principal of printable ASCII
// without '%' rides as it is. A service that does not decode the value
// reads another principal, which no ACL names: it refuses, never allows.
func EncodePrincipal(p string) string {
	clean := true
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c > 0x7e || c == '%' {
			clean = false
			break
		}
	}
	if clean {
		return p
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c > 0x7e || c == '%' {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// DecodePrincipal reads a principal EncodePrincipal wrote; an escape that
// is not %XX is an error.
func DecodePrincipal(v string) (string, error) {
	if !strings.Contains(v, "%") {
		return v, nil
	}
	b := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		if v[i] != '%' {
			b = append(b, v[i])
			continue
		}
		if i+2 >= len(v) {
			return "", fmt.Errorf("principal %q: an escape is cut short", v)
		}
		hi, lo := unhex(v[i+1]), unhex(v[i+2])
		if hi < 0 || lo < 0 {
			return "", fmt.Errorf("principal %q: %q is not an escape", v, v[i:i+3])
		}
		b = append(b, byte(hi<<4|lo))
		i += 2
	}
	return string(b), nil
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	}
	return -1
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
