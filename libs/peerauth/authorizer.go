package peerauth

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"sync/atomic"

	"skein/libs/acl"
	"skein/libs/metadata"
)

// Bindings reads the ACL bindings of the metadata image a process follows,
// sorted once per image (images are immutable: a change is a new image).
type Bindings struct {
	image func() *metadata.Image
	cache atomic.Pointer[bindingsOf]
}

type bindingsOf struct {
	img *metadata.Image
	bs  []acl.Binding
}

// NewBindings answers the bindings of image's current answer.
func NewBindings(image func() *metadata.Image) *Bindings { return &Bindings{image: image} }

// Get answers the current bindings.
func (b *Bindings) Get() []acl.Binding {
	img := b.image()
	if c := b.cache.Load(); c != nil && c.img == img {
		return c.bs
	}
	c := &bindingsOf{img: img, bs: img.Acls()}
	b.cache.Store(c)
	return c.bs
}

// Authorizer decides the requests of a service's callers. A nil Authorizer
// allows everything (authorization off).
type Authorizer struct {
	bindings *Bindings
	super    map[string]bool
	log      *slog.Logger
}

// NewAuthorizer decides with the ACLs of image and super users super.
func NewAuthorizer(image func() *metadata.Image, super map[string]bool, log *slog.Logger) *Authorizer {
	return &Authorizer{bindings: NewBindings(image), super: super, log: log}
}

// Allowed reports whether c may do op on a resource: always for a Skein
// service and on a plaintext server's callers (no caller is known).
func (a *Authorizer) Allowed(c Caller, known bool, typ acl.ResourceType, name string, op acl.Operation) bool {
	if a == nil || !known || c.Service {
		return true
	}
	return acl.Authorize(a.bindings.Get(), a.super, acl.Request{Principal: c.Principal, Resource: typ, Name: name, Operation: op}).Allowed
}

// Authorize answers nil when the caller of ctx may do op on the resource,
// else the refusal (TOPIC_, GROUP_, CLUSTER_ or
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED), logged as an audit line naming
// method.
func (a *Authorizer) Authorize(ctx context.Context, method string, typ acl.ResourceType, name string, op acl.Operation) error {
	c, known := CallerFrom(ctx)
	return a.AuthorizeCaller(ctx, c, known, method, typ, name, op)
}

// AuthorizeCaller is Authorize for a caller named apart from ctx (one
// request of a pipelined stream).
func (a *Authorizer) AuthorizeCaller(ctx context.Context, c Caller, known bool, method string, typ acl.ResourceType, name string, op acl.Operation) error {
	if a.Allowed(c, known, typ, name, op) {
		return nil
	}
	r := acl.Request{Principal: c.Principal, Resource: typ, Name: name, Operation: op}
	err := acl.Refusal(r)
	resource := typ.String() + ":" + name
	if typ == acl.Cluster {
		resource = "cluster"
	}
	Refused(ctx, a.log, c.Principal, method, resource, op.String(), err)
	return err
}

// AuthorizeAny answers nil when the caller of ctx may do op on at least
// one resource of type typ (acl.AuthorizeAny: an idempotent producer's id
// needs write on some topic), else CLUSTER_AUTHORIZATION_FAILED, logged as
// an audit line naming method. Skein's services and a plaintext server's
// callers are always allowed, as for Authorize.
func (a *Authorizer) AuthorizeAny(ctx context.Context, method string, typ acl.ResourceType, op acl.Operation) error {
	c, known := CallerFrom(ctx)
	return a.AuthorizeAnyCaller(ctx, c, known, method, typ, op)
}

// AuthorizeAnyCaller is AuthorizeAny for a caller named apart from ctx.
func (a *Authorizer) AuthorizeAnyCaller(ctx context.Context, c Caller, known bool, method string, typ acl.ResourceType, op acl.Operation) error {
	if a == nil || !known || c.Service || acl.AuthorizeAny(a.bindings.Get(), a.super, c.Principal, typ, op) {
		return nil
	}
	err := acl.RefusalAny(c.Principal, typ, op)
	Refused(ctx, a.log, c.Principal, method, typ.String()+":(any)", op.String(), err)
	return err
}

// TopicRefusals decides op on each topic of a request for caller c: nil
// when every one is allowed, else one entry per topic, the refusal of a
// refused one and nil for an allowed one. A topic named several times (one
// per partition) is decided once: one decision, one audit line.
func (a *Authorizer) TopicRefusals(ctx context.Context, c Caller, known bool, method string, topics []string, op acl.Operation) []error {
	if a == nil || !known || c.Service {
		return nil
	}
	var out []error
	decided := map[string]error{}
	for i, t := range topics {
		err, ok := decided[t]
		if !ok {
			err = a.AuthorizeCaller(ctx, c, known, method, acl.Topic, t, op)
			decided[t] = err
		}
		if err != nil {
			if out == nil {
				out = make([]error, len(topics))
			}
			out[i] = err
		}
	}
	return out
}

// Flags are a service's authorization flags.
type Flags struct {
	On         *bool
	SuperUsers *string
}

// AddFlags registers --authorizer and --super-users on fs; what names the
// calls the service decides (for the flag's help).
func AddFlags(fs *flag.FlagSet, what string) *Flags {
	return &Flags{
		On: fs.Bool("authorizer", false, "authorize "+what+" with the cluster's ACL bindings (skein acl); needs TLS. "+
			"Calls of the cluster's own services are not subject to ACLs; the gateway's carry its client's principal"),
		SuperUsers: fs.String("super-users", "", "principals allowed everything under --authorizer, separated by commas or semicolons (e.g. \"User:admin;User:ops\")"),
	}
}

// Authorizer answers the authorizer the flags ask for: nil when off. With
// tls false (a plaintext process) --authorizer is an error: nobody's
// identity could be known.
func (f *Flags) Authorizer(image func() *metadata.Image, tls bool, log *slog.Logger) (*Authorizer, error) {
	super, err := acl.ParseSuperUsers(*f.SuperUsers)
	if err != nil {
		return nil, fmt.Errorf("--super-users: %w", err)
	}
	if !*f.On {
		if len(super) > 0 {
			return nil, errors.New("--super-users needs --authorizer")
		}
		return nil, nil
	}
	if !tls {
		return nil, errors.New("--authorizer needs TLS (--tls-cert, --tls-key, --tls-ca): callers are known by their certificates")
	}
	return NewAuthorizer(image, super, log), nil
}
