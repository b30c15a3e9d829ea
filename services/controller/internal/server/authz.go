package server

import (
	"context"
	"strconv"

	"google.golang.org/grpc/metadata"

	controllerv1 "skein/gen/skein/controller/v1"
	controllerv1grpc "skein/gen/skein/controller/v1/controllerv1grpc"
	"skein/libs/acl"
	"skein/libs/errs"
	"skein/libs/peerauth"
)

// Rules are the roles that may call the controller's internal methods: a
// broker's registration, heartbeats, controlled shutdown and ISR changes
// come from storage nodes — or from a follower controller relaying one to
// the leader. Every other method is open to every verified certificate:
// metadata reads (WatchMetadata, DescribeCluster, FindCoordinator) and
// producer-id blocks serve libs/client wherever it runs, clients included
// (under an authorizer a client's metadata shows the ACL bindings only
// with cluster describe, and producer ids need write on some topic); admin
// changes are for whoever the ACLs allow (SetAuthorizer).
func Rules() peerauth.Rules {
	sd := controllerv1grpc.ControllerService_ServiceDesc
	brokers := []string{peerauth.RoleStorage, peerauth.RoleController}
	return peerauth.Rules{
		peerauth.Method(sd, "RegisterBroker"):     brokers,
		peerauth.Method(sd, "BrokerHeartbeat"):    brokers,
		peerauth.Method(sd, "ControlledShutdown"): brokers,
		peerauth.Method(sd, "AlterPartition"):     brokers,
	}
}

// forwardedPrincipalKey names, on a call a follower forwarded, the
// principal of the client the call acts for. A follower sends it for a
// caller ACLs apply to (a client's certificate, or the gateway naming its
// client) and for no one else; the leader believes it from a controller's
// certificate only.
const forwardedPrincipalKey = "x-skein-forwarded-principal"

// SetAuthorizer makes the admin changes of callers ACLs apply to need
// their ACLs (nil: no ACLs, the default). Call it before serving.
func (s *Server) SetAuthorizer(a *peerauth.Authorizer) { s.auth = a }

// caller answers who a call acts for: its guard's caller, except on a call
// a follower controller forwarded, which acts for the client the follower
// named (forwardedPrincipalKey) — or, naming none, for a Skein service.
func caller(ctx context.Context) (peerauth.Caller, bool) {
	c, known := peerauth.CallerFrom(ctx)
	if !known || c.Peer.Role != peerauth.RoleController || !wasForwarded(ctx) {
		return c, known
	}
	m, _ := metadata.FromIncomingContext(ctx)
	p, named, err := peerauth.PrincipalIn(m, forwardedPrincipalKey)
	if err != nil {
		// Malformed: a principal no ACL names, and never the follower's own
		// standing as a service.
		return peerauth.Caller{Peer: c.Peer, Principal: "(malformed forwarded principal)"}, true
	}
	if named {
		return peerauth.Caller{Peer: c.Peer, Principal: p}, true
	}
	return c, known
}

// forwardContext is the outgoing context of a call relayed to the leader:
// marked forwarded, and naming the client the call acts for, so the leader
// decides it as if the client had called it.
func (s *Server) forwardContext(ctx context.Context) context.Context {
	out := metadata.AppendToOutgoingContext(ctx, forwardedKey, strconv.Itoa(int(s.node.ID())))
	if c, known := caller(ctx); known && !c.Service {
		md, _ := metadata.FromOutgoingContext(out)
		md = md.Copy()
		peerauth.SetPrincipal(md, forwardedPrincipalKey, c.Principal)
		out = metadata.NewOutgoingContext(out, md)
	}
	return out
}

// authorize answers nil when the call's caller may do op on the resource,
// else the refusal (logged as an audit line).
func (s *Server) authorize(ctx context.Context, method string, typ acl.ResourceType, name string, op acl.Operation) error {
	c, known := caller(ctx)
	return s.auth.AuthorizeCaller(ctx, c, known, method, typ, name, op)
}

// topicRefusals decides op on each topic of names: nil when every one is
// allowed, else the refusal of each (nil for the allowed ones). orCluster,
// when set, is a cluster operation that allows every topic at once
// (CREATE, for topic creation, as in Kafka).
func (s *Server) topicRefusals(ctx context.Context, method string, names []string, op, orCluster acl.Operation) []error {
	c, known := caller(ctx)
	if !known || c.Service || s.auth == nil {
		return nil
	}
	if orCluster != 0 && s.auth.Allowed(c, known, acl.Cluster, acl.ClusterName, orCluster) {
		return nil
	}
	return s.auth.TopicRefusals(ctx, c, known, method, names, op)
}

// allowedOnly answers the items not refused.
func allowedOnly[T any](items []T, refused []error) []T {
	var out []T
	for i, it := range items {
		if refused[i] == nil {
			out = append(out, it)
		}
	}
	return out
}

// merged answers one result per item of the request, in its order: the
// refusal of a refused item, else the next of results (the answers to the
// allowed items, in order).
func merged[R any](refused []error, results []R, refusal func(i int, err error) R) ([]R, error) {
	out := make([]R, 0, len(refused))
	next := 0
	for i, err := range refused {
		if err != nil {
			out = append(out, refusal(i, err))
			continue
		}
		if next == len(results) {
			return nil, errs.Errorf(errs.UnknownServerError, "the controller answered %d results for %d allowed items", len(results), next+1)
		}
		out = append(out, results[next])
		next++
	}
	return out, nil
}

func isAcl(r *controllerv1.MetadataRecord) bool { return r.GetAcl() != nil || r.GetRemovedAcl() != nil }
