package gateway

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"skein/libs/client"
	"skein/libs/errs"
	"skein/libs/peerauth"
	"skein/libs/rpcerr"
	"skein/services/gateway/internal/authn"
)

// principalMD is the metadata key that carries a REST caller's principal,
// which the HTTP side verified, over the in-memory hop to the gRPC server.
// Only calls arriving on that in-memory listener are believed; the HTTP
// side drops any incoming header that grpc-gateway would turn into it.
const principalMD = "skein-principal"

// forgeableHeaders are the incoming HTTP headers grpc-gateway would forward
// as principalMD or its -bin twin (see peerauth.SetPrincipal; the
// Grpc-Metadata- prefix), removed before routing.
var forgeableHeaders = []string{"Grpc-Metadata-" + principalMD, principalMD, "Grpc-Metadata-" + principalMD + "-bin", principalMD + "-bin"}

// publicPrefix is the public API's gRPC method prefix: health and
// reflection stay open to everyone.
const publicPrefix = "/skein.v1."

// auth authenticates the gateway's callers.
type auth struct {
	verifier *authn.Verifier // nil: no token sources
	required bool
	log      *slog.Logger
	authz    *authorizer // nil: every authenticated call is allowed
}

type principalKey struct{}

// withPrincipal stores the caller's principal in ctx.
func withPrincipal(ctx context.Context, p authn.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// principalFrom answers the caller's principal, "" when there is none.
func principalFrom(ctx context.Context) authn.Principal {
	p, _ := ctx.Value(principalKey{}).(authn.Principal)
	return p
}

// display is how a principal appears in logs.
func display(p authn.Principal) string {
	if p == "" {
		return authn.Anonymous
	}
	return string(p)
}

// grpcPrincipal authenticates a gRPC call: from the REST side's metadata on
// the in-memory listener, else from the peer's verified certificate and the
// authorization metadata.
func (a *auth) grpcPrincipal(ctx context.Context) (authn.Principal, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if fromLoopback(ctx) {
		p, _, err := peerauth.PrincipalIn(md, principalMD)
		if err != nil {
			return "", errs.Errorf(errs.SaslAuthenticationFailed, "the in-memory hop: %v", err)
		}
		return authn.Principal(p), nil
	}
	c, err := grpcCredentials(ctx)
	if err != nil {
		return "", err
	}
	return a.verifier.Authenticate(c)
}

// grpcCredentials are what a gRPC call presents: the peer's verified
// certificate and the one authorization metadata value.
func grpcCredentials(ctx context.Context) (authn.Credentials, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	var c authn.Credentials
	var err error
	if c.Authorization, err = oneAuthorization(md.Get("authorization")); err != nil {
		return c, err
	}
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			c.Cert = verifiedLeaf(ti.State.VerifiedChains)
		}
	}
	return c, nil
}

// oneAuthorization answers the one Authorization value a call carries
// ("" for none). Several are refused: which one a server reads differs
// from server to server, so a token that does not verify could ride
// beside one that does.
func oneAuthorization(values []string) (string, error) {
	switch len(values) {
	case 0:
		return "", nil
	case 1:
		return values[0], nil
	}
	return "", errs.Errorf(errs.SaslAuthenticationFailed, "the call carries %d Authorization headers: send one", len(values))
}

func verifiedLeaf(chains [][]*x509.Certificate) *x509.Certificate {
	if len(chains) > 0 && len(chains[0]) > 0 {
		return chains[0][0]
	}
	return nil
}

// check answers the context a call runs in, or its refusal.
func (a *auth) check(ctx context.Context, method string) (context.Context, error) {
	p, err := a.grpcPrincipal(ctx)
	if err == nil && p == "" && a.required {
		err = errs.Errorf(errs.SaslAuthenticationFailed, "authentication required: present a client certificate or an Authorization: Bearer token")
	}
	if err != nil {
		a.refused(ctx, p, method, err)
		return ctx, rpcerr.ToGRPC(err)
	}
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("skein.principal", display(p)))
	// Every call the gateway makes for the caller names it, so storage
	// nodes and coordinators authorize it as the caller's.
	return client.OnBehalfOf(withPrincipal(ctx, p), display(p)), nil
}

// refused logs a call refused for its credentials.
func (a *auth) refused(ctx context.Context, p authn.Principal, op string, err error) {
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("skein.principal", display(p)))
	a.log.WarnContext(ctx, "call refused", "principal", display(p), "operation", op, "error_code", errs.Of(err).Name, "reason", err.Error())
}

// audit logs an admin call: who, what, on which resource, and the outcome.
func (a *auth) audit(ctx context.Context, method string, req any, err error) {
	a.log.InfoContext(ctx, "audit", "principal", display(principalFrom(ctx)), "operation", method,
		"resource", resourceOf(req), "error_code", errs.Of(rpcerr.FromStatus(err)).Name)
}

// resourceOf names what a request acts on, for the audit log.
func resourceOf(req any) string {
	switch r := req.(type) {
	case interface{ GetTopic() string }:
		if r.GetTopic() != "" {
			return "topic:" + r.GetTopic()
		}
	case interface{ GetName() string }:
		if r.GetName() != "" {
			return "topic:" + r.GetName()
		}
	}
	return "cluster"
}

func isAdmin(method string) bool { return strings.HasPrefix(method, "/skein.v1.AdminService/") }

// interceptors authenticate every call of the public API, authorize it
// (each received message of a stream) when the authorizer is on, and audit
// admin calls.
func (a *auth) interceptors() (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !strings.HasPrefix(info.FullMethod, publicPrefix) {
			return h(ctx, req)
		}
		ctx, err := a.check(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		if err := a.authorize(ctx, info.FullMethod, req); err != nil {
			return nil, err
		}
		resp, err := h(ctx, req)
		if isAdmin(info.FullMethod) {
			a.audit(ctx, info.FullMethod, req, rpcerr.ToGRPC(err))
		}
		if err == nil && a.authz != nil {
			a.authz.filter(display(principalFrom(ctx)), resp)
		}
		return resp, err
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if !strings.HasPrefix(info.FullMethod, publicPrefix) {
			return h(srv, ss)
		}
		ctx, err := a.check(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		var s grpc.ServerStream = &principalStream{ServerStream: ss, ctx: ctx, a: a, method: info.FullMethod, p: principalFrom(ctx)}
		if a.authz != nil {
			s = &authorizedStream{ServerStream: s, a: a, method: info.FullMethod}
		}
		return h(srv, s)
	}
	return unary, stream
}

// principalStream runs a public stream as its principal, and ends it once
// the credentials it opened with no longer verify as that principal (a
// token taken out of the token file, a JWT or client certificate past its
// expiry): they are checked again with the messages the stream receives
// and sends, at most once a second, as the ACLs are with each message.
type principalStream struct {
	grpc.ServerStream
	ctx     context.Context
	a       *auth
	method  string
	p       authn.Principal
	checked atomic.Int64 // when the credentials were last checked, in Unix ns
}

func (s *principalStream) Context() context.Context { return s.ctx }

func (s *principalStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.stillValid()
}

func (s *principalStream) SendMsg(m any) error {
	if err := s.stillValid(); err != nil {
		return err
	}
	return s.ServerStream.SendMsg(m)
}

func (s *principalStream) stillValid() error {
	now := time.Now().UnixNano()
	if last := s.checked.Load(); last == 0 {
		s.checked.Store(now) // the interceptor has just checked them
		return nil
	} else if now-last < int64(time.Second) {
		return nil
	}
	s.checked.Store(now)
	outer := s.ServerStream.Context()
	if fromLoopback(outer) {
		return nil // the REST side authenticated the call
	}
	c, err := grpcCredentials(outer)
	if err == nil {
		err = s.a.stillValid(c, s.p)
	}
	if err != nil {
		s.a.refused(s.ctx, s.p, s.method, err)
		return rpcerr.ToGRPC(err)
	}
	return nil
}

// openHTTP are the HTTP paths served without credentials: probes, metrics,
// the API description and the console's static page.
func openHTTP(r *http.Request) bool {
	switch r.URL.Path {
	case "/healthz", "/readyz", "/metrics", "/openapi.json", "/console":
		return true
	}
	return strings.HasPrefix(r.URL.Path, "/console/")
}

// wrapHTTP authenticates REST callers: it drops headers that could pose as
// the verified principal, verifies the client certificate and bearer token,
// refuses with 401 when that fails (or finds nothing and a principal is
// required), and hands the principal on in the request's context.
func (a *auth) wrapHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, h := range forgeableHeaders {
			r.Header.Del(h)
		}
		var p authn.Principal
		c, err := a.credentials(r)
		if err == nil {
			p, err = a.verifier.Authenticate(c)
		}
		if err == nil && p == "" && a.required && !openHTTP(r) {
			err = errs.Errorf(errs.SaslAuthenticationFailed, "authentication required: present a client certificate or an Authorization: Bearer token")
		}
		if err != nil && !openHTTP(r) {
			a.refused(r.Context(), p, r.Method+" "+r.URL.Path, err)
			w.Header().Set("WWW-Authenticate", `Bearer realm="skein"`)
			msg := err.Error()
			var row *errs.Error
			if errors.As(err, &row) {
				msg = strings.TrimPrefix(msg, row.Name+": ")
			}
			writeError(w, http.StatusUnauthorized, errorBody{Code: int32(codes.Unauthenticated), ErrorCode: errs.SaslAuthenticationFailed.Name, Message: msg})
			return
		}
		next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), p)))
	})
}

// credentials are what an HTTP request presents: its verified client
// certificate and its one Authorization header (more than one is an error).
func (a *auth) credentials(r *http.Request) (authn.Credentials, error) {
	var c authn.Credentials
	if r.TLS != nil {
		c.Cert = verifiedLeaf(r.TLS.VerifiedChains)
	}
	var err error
	c.Authorization, err = oneAuthorization(r.Header.Values("Authorization"))
	return c, err
}

// stillValid answers nil while credentials that verified as p at the start
// of a long call (an event stream) still do: the certificate has not
// expired, and a token still verifies (a JWT within its exp, a static
// token still in the token file) as p.
func (a *auth) stillValid(c authn.Credentials, p authn.Principal) error {
	if c.Cert != nil && time.Now().After(c.Cert.NotAfter) {
		return errs.Errorf(errs.SaslAuthenticationFailed, "the client certificate expired at %s", c.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	q, err := a.verifier.Authenticate(c)
	if err != nil {
		return err
	}
	if q != p {
		return errs.Errorf(errs.SaslAuthenticationFailed, "the credentials now name %s, not %s", display(q), display(p))
	}
	return nil
}

// principalMetadata is grpc-gateway's annotator: the verified principal
// rides the in-memory hop as principalMD.
func principalMetadata(ctx context.Context, r *http.Request) metadata.MD {
	if p := principalFrom(r.Context()); p != "" {
		md := metadata.MD{}
		peerauth.SetPrincipal(md, principalMD, string(p))
		return md
	}
	return nil
}
