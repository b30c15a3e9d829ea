package peerauth

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"skein/libs/errs"
	"skein/libs/rpcerr"
)

// Rules bind gRPC methods (full names, "/skein.storage.v1.StorageService/
// Replicate") to the roles that may call them. A method not named is open
// to every verified peer; its handler authorizes the caller's requests.
type Rules map[string][]string

// Check answers nil when peer may call method, else the refusal.
func (r Rules) Check(method string, p Peer) error {
	roles, ok := r[method]
	if !ok {
		return nil
	}
	for _, role := range roles {
		if p.Role == role {
			return nil
		}
	}
	return errs.Errorf(errs.ClusterAuthorizationFailed, "%s is for %s certificates only; the caller is %s",
		method, strings.Join(roles, " or "), p)
}

type callerKey struct{}

// WithCaller stores c in ctx, as the guard does for each call.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom answers who the call of ctx acts for; ok is false on a
// plaintext server (nobody has an identity).
func CallerFrom(ctx context.Context) (c Caller, ok bool) {
	c, ok = ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// peerOf answers the verified certificate's holder of a call, ok false when
// the connection is not TLS or carried no certificate.
func peerOf(ctx context.Context) (Peer, bool) {
	pr, ok := peer.FromContext(ctx)
	if !ok {
		return Peer{}, false
	}
	info, ok := pr.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return Peer{}, false
	}
	return FromCertificate(info.State.VerifiedChains[0][0]), true
}

// namedPrincipal answers the principal a call names in its metadata
// (PrincipalIn); more than one is an error (never read as none, which would
// make the gateway a service calling for itself).
func namedPrincipal(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	p, _, err := PrincipalIn(md, PrincipalMD)
	if err != nil {
		return "", errs.Errorf(errs.ClusterAuthorizationFailed, "%v", err)
	}
	return p, nil
}

// Guard is the gate of a service's gRPC server: it names each call's
// caller (CallerFrom) and refuses, per its rules, peers of the wrong role.
type Guard struct {
	rules Rules
	log   *slog.Logger
}

// NewGuard answers a guard enforcing rules; log receives a line per
// refused call.
func NewGuard(rules Rules, log *slog.Logger) *Guard {
	return &Guard{rules: rules, log: log}
}

// ServerOptions answers the interceptors to start the server with.
func (g *Guard) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(g.unary), grpc.ChainStreamInterceptor(g.stream)}
}

// admit names the caller of a call in its context, or refuses it.
func (g *Guard) admit(ctx context.Context, method string) (context.Context, error) {
	p, ok := peerOf(ctx)
	if !ok {
		return ctx, nil // plaintext: nobody has an identity
	}
	named, err := namedPrincipal(ctx)
	if err == nil {
		err = g.rules.Check(method, p)
	}
	if err != nil {
		Refused(ctx, g.log, p.Principal, method, "cluster", "", err)
		return ctx, rpcerr.ToGRPC(err)
	}
	return WithCaller(ctx, CallerOf(p, named)), nil
}

func (g *Guard) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ctx, err := g.admit(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (g *Guard) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx, err := g.admit(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return h(srv, &callerStream{ServerStream: ss, ctx: ctx})
}

type callerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *callerStream) Context() context.Context { return s.ctx }

// Refused logs a refused call as an audit line: principal, operation,
// resource, the ACL operation it needed (aclOp; "" for a call no ACL could
// allow, one refused by its caller's role), error code and (from ctx)
// trace id; the span records the principal.
func Refused(ctx context.Context, log *slog.Logger, principal, operation, resource, aclOp string, err error) {
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("skein.principal", principal))
	attrs := []any{"principal", principal, "operation", operation, "resource", resource}
	if aclOp != "" {
		attrs = append(attrs, "acl_operation", aclOp)
	}
	log.WarnContext(ctx, "call denied", append(attrs, "error_code", errs.Of(err).Name, "reason", errs.Message(err))...)
}

// MethodsOf answers the full names of a service's methods, to write Rules
// with and to test that they name real methods.
func MethodsOf(sd grpc.ServiceDesc) []string {
	var out []string
	for _, m := range sd.Methods {
		out = append(out, "/"+sd.ServiceName+"/"+m.MethodName)
	}
	for _, s := range sd.Streams {
		out = append(out, "/"+sd.ServiceName+"/"+s.StreamName)
	}
	sort.Strings(out)
	return out
}

// Method answers the full name of a method of sd, panicking when sd has
// none of that name (rules are written at start-up; a typo must not leave
// a method open).
func Method(sd grpc.ServiceDesc, name string) string {
	full := "/" + sd.ServiceName + "/" + name
	for _, m := range MethodsOf(sd) {
		if m == full {
			return full
		}
	}
	panic(fmt.Sprintf("peerauth: %s has no method %s", sd.ServiceName, name))
}
