package peerauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"testing"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"skein/libs/errs"
	"skein/libs/rpcerr"
)

// tlsCall is the context of a call over mutual TLS from c's holder, with md
// as its metadata.
func tlsCall(c *x509.Certificate, md metadata.MD) context.Context {
	ctx := peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{
		State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{c}}}}})
	return metadata.NewIncomingContext(ctx, md)
}

func TestGuardAdmit(t *testing.T) {
	g := NewGuard(Rules{"/s/Replicate": {RoleStorage}}, discard())
	gw := cert("gateway-1", "spiffe://skein/gateway/1")
	alice := cert("alice", "spiffe://skein/client/alice")

	ctx, err := g.admit(tlsCall(gw, metadata.Pairs(PrincipalMD, "User:bob")), "/s/Produce")
	if c, ok := CallerFrom(ctx); err != nil || !ok || c.Principal != "User:bob" || c.Service {
		t.Errorf("the gateway naming bob: %+v %v %v", c, ok, err)
	}
	ctx, err = g.admit(tlsCall(gw, nil), "/s/Produce")
	if c, _ := CallerFrom(ctx); err != nil || !c.Service {
		t.Errorf("the gateway for itself: %+v %v", c, err)
	}
	// Two names are refused, never read as none (which would make the
	// gateway a service calling for itself).
	_, err = g.admit(tlsCall(gw, metadata.Pairs(PrincipalMD, "User:bob", PrincipalMD, "User:carol")), "/s/Produce")
	if errs.Of(rpcerr.FromStatus(err)) != errs.ClusterAuthorizationFailed {
		t.Errorf("two named principals: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	// A principal beyond printable ASCII rides in the -bin key, and is
	// read back whole; a percent sign means nothing.
	jose := metadata.MD{}
	SetPrincipal(jose, PrincipalMD, "User:josé")
	ctx, err = g.admit(tlsCall(gw, jose), "/s/Produce")
	if c, _ := CallerFrom(ctx); err != nil || c.Principal != "User:josé" {
		t.Errorf("the gateway naming josé: %+v %v", c, err)
	}
	ctx, err = g.admit(tlsCall(gw, metadata.Pairs(PrincipalMD, "User:%61dmin")), "/s/Produce")
	if c, _ := CallerFrom(ctx); err != nil || c.Principal != "User:%61dmin" {
		t.Errorf("the gateway naming %%61dmin: %+v %v", c, err)
	}
	// A -bin principal beside a plain one (not the markers) is refused.
	_, err = g.admit(tlsCall(gw, metadata.Pairs(PrincipalMD, "User:bob", PrincipalMD+"-bin", "User:josé")), "/s/Produce")
	if errs.Of(rpcerr.FromStatus(err)) != errs.ClusterAuthorizationFailed {
		t.Errorf("a -bin principal beside a plain one: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	_, err = g.admit(tlsCall(alice, nil), "/s/Replicate")
	if errs.Of(rpcerr.FromStatus(err)) != errs.ClusterAuthorizationFailed {
		t.Errorf("a client replicating: %v", err)
	}
	ctx, err = g.admit(metadata.NewIncomingContext(context.Background(), metadata.Pairs(PrincipalMD, "User:bob")), "/s/Replicate")
	if _, ok := CallerFrom(ctx); err != nil || ok {
		t.Errorf("plaintext: caller known %v, %v", ok, err)
	}
}
