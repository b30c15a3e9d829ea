package peerauth

import (
	"net/http"

	"skein/libs/acl"
)

// OpsHandler guards a service's operations endpoints (/metrics,
// /debug/pprof): on a TLS listener every caller holds a certificate of the
// cluster's CA, but the CA issues certificates to clients too, and what
// these endpoints tell (every topic and group name in the metrics, the
// process's command line and memory in its profiles) is not for every
// client. So they answer the cluster's own services, and, when a is on,
// principals it allows DESCRIBE on the cluster (super users among them);
// anyone else gets 403 CLUSTER_AUTHORIZATION_FAILED. The paths in open
// (health checks) answer every verified peer. A plaintext listener, or a
// nil a (no ACLs at all), lets every caller through, as every other call
// of such a service is.
func (a *Authorizer) OpsHandler(h http.Handler, open ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a == nil || r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			h.ServeHTTP(w, r)
			return
		}
		for _, p := range open {
			if r.URL.Path == p {
				h.ServeHTTP(w, r)
				return
			}
		}
		p := FromCertificate(r.TLS.PeerCertificates[0])
		c := Caller{Peer: p, Principal: p.Principal, Service: serviceRoles[p.Role]}
		if a.Allowed(c, true, acl.Cluster, "", acl.Describe) {
			h.ServeHTTP(w, r)
			return
		}
		who := p.Principal
		if who == "" {
			who = "a certificate without a common name"
		}
		http.Error(w, "CLUSTER_AUTHORIZATION_FAILED: "+who+" may not read this service's metrics or profiles: they are for the cluster's services and principals with DESCRIBE on the cluster", http.StatusForbidden)
	})
}
