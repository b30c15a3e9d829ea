package client

import (
	"context"

	"google.golang.org/grpc/metadata"

	"skein/libs/peerauth"
)

type principalKey struct{}

// OnBehalfOf answers ctx for calls made for a client the caller acts for
// (the gateway for its clients): every call made with it names principal
// (call metadata, and the request itself on the pipelined produce stream),
// and the service decides with that client's ACLs. A service believes the
// name only from a gateway's certificate; from anyone else it decides as
// the certificate's own principal.
func OnBehalfOf(ctx context.Context, principal string) context.Context {
	if principal == "" {
		return ctx
	}
	// Set, not appended: a call acts for one client, and a service refuses
	// a call naming two.
	md, _ := metadata.FromOutgoingContext(ctx)
	md = md.Copy()
	peerauth.SetPrincipal(md, peerauth.PrincipalMD, principal)
	return metadata.NewOutgoingContext(context.WithValue(ctx, principalKey{}, principal), md)
}

// PrincipalOf answers the principal OnBehalfOf put in ctx, "" for none.
func PrincipalOf(ctx context.Context) string {
	p, _ := ctx.Value(principalKey{}).(string)
	return p
}
