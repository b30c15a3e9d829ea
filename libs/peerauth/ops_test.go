package peerauth

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/acl"
	"skein/libs/metadata"
)

// The operations endpoints answer the cluster's services and principals
// with DESCRIBE on the cluster (super users among them), not every holder
// of a certificate of the CA; health checks answer every verified peer.
func TestOpsHandler(t *testing.T) {
	img := metadata.New("c")
	if err := img.Apply(&controllerv1.MetadataDelta{Version: 1, Records: []*controllerv1.MetadataRecord{
		metadata.AclRecord(acl.Binding{Principal: "User:prom", Resource: acl.Cluster, Name: acl.ClusterName, Pattern: acl.Literal, Operation: acl.Describe, Permission: acl.Allow}),
		metadata.AclRecord(acl.Binding{Principal: "User:writer", Resource: acl.Topic, Name: "t", Pattern: acl.Literal, Operation: acl.Write, Permission: acl.Allow}),
	}}); err != nil {
		t.Fatal(err)
	}
	a := NewAuthorizer(func() *metadata.Image { return img }, map[string]bool{"User:root": true}, nil)
	teapot := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h := a.OpsHandler(teapot, "/healthz", "/readyz")
	cert := func(cn, spiffe string) *x509.Certificate {
		c := &x509.Certificate{Subject: pkix.Name{CommonName: cn}}
		if spiffe != "" {
			u, _ := url.Parse(spiffe)
			c.URIs = []*url.URL{u}
		}
		return c
	}
	call := func(h http.Handler, path string, c *x509.Certificate) int {
		r := httptest.NewRequest("GET", path, nil)
		if c != nil {
			r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}}
		} else {
			r.TLS = nil
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for _, tc := range []struct {
		name string
		path string
		cert *x509.Certificate
		want int
	}{
		{"a storage node", "/metrics", cert("storage-2", "spiffe://skein/storage/2"), http.StatusTeapot},
		{"the gateway", "/debug/pprof/heap", cert("gateway", "spiffe://skein/gateway/1"), http.StatusTeapot},
		{"a super user", "/metrics", cert("root", ""), http.StatusTeapot},
		{"DESCRIBE on the cluster", "/metrics", cert("prom", ""), http.StatusTeapot},
		{"a client without it", "/metrics", cert("writer", ""), http.StatusForbidden},
		{"a client's profile", "/debug/pprof/cmdline", cert("mallory", ""), http.StatusForbidden},
		{"a role Skein has no service for", "/metrics", cert("x", "spiffe://skein/intruder/1"), http.StatusForbidden},
		{"a client's health check", "/healthz", cert("mallory", ""), http.StatusTeapot},
		{"a client's readiness check", "/readyz", cert("mallory", ""), http.StatusTeapot},
		{"plaintext", "/metrics", nil, http.StatusTeapot},
	} {
		if got := call(h, tc.path, tc.cert); got != tc.want {
			t.Errorf("%s: GET %s answered %d, want %d", tc.name, tc.path, got, tc.want)
		}
	}
	// Without an authorizer (no ACLs), every verified peer is let through.
	var off *Authorizer
	if got := call(off.OpsHandler(teapot), "/metrics", cert("mallory", "")); got != http.StatusTeapot {
		t.Errorf("no authorizer: %d", got)
	}
}
