package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func issue(t *testing.T, ca *CA, l Leaf) *Source {
	t.Helper()
	f, err := ca.Issue(l)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// handshake runs a TLS handshake between a client dialling serverName and
// a server, over a pipe; it answers the client's and the server's errors.
func handshake(client, server *tls.Config, serverName string) (error, error) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := client.Clone()
	c.ServerName = serverName
	cc, sc := tls.Client(a, c), tls.Server(b, server)
	done := make(chan error, 1)
	go func() { done <- sc.Handshake(); _ = sc.Close() }()
	cerr := cc.Handshake()
	if cerr == nil {
		// TLS 1.3: the server's verdict on the client certificate arrives
		// with the first read.
		_ = cc.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, rerr := cc.Read(make([]byte, 1))
		if rerr != nil && !strings.Contains(rerr.Error(), "EOF") && !strings.Contains(rerr.Error(), "closed") {
			cerr = rerr
		}
	}
	_ = cc.Close()
	return cerr, <-done
}

func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := OpenCA(dir, "test CA")
	if err != nil {
		t.Fatal(err)
	}
	srv := issue(t, ca, Leaf{Name: "storage-1", Role: "storage", ID: "1", Hosts: []string{"127.0.0.1", "storage-1"}})
	cli := issue(t, ca, Leaf{Name: "gateway", Role: "gateway", ID: "1"})
	other, err := OpenCA(filepath.Join(dir, "other"), "another CA")
	if err != nil {
		t.Fatal(err)
	}
	stranger := issue(t, other, Leaf{Name: "intruder", Hosts: []string{"127.0.0.1"}})

	if srv.Identity() != "storage-1" || cli.Identity() != "gateway" {
		t.Errorf("identities %q %q", srv.Identity(), cli.Identity())
	}
	cases := []struct {
		name       string
		client     *tls.Config
		server     *tls.Config
		serverName string
		ok         bool
	}{
		{"both sides signed by the CA, by IP", cli.ClientConfig(), srv.ServerConfig(false), "127.0.0.1", true},
		{"by DNS name", cli.ClientConfig(), srv.ServerConfig(false), "storage-1", true},
		{"a name the server's certificate does not hold", cli.ClientConfig(), srv.ServerConfig(false), "storage-2", false},
		{"a client without a certificate", &tls.Config{InsecureSkipVerify: true}, srv.ServerConfig(false), "127.0.0.1", false},
		{"no certificate, where one is optional", &tls.Config{InsecureSkipVerify: true}, srv.ServerConfig(true), "127.0.0.1", true},
		{"a client certificate from another CA", stranger.ClientConfig(), srv.ServerConfig(true), "127.0.0.1", false},
		{"a server certificate from another CA", cli.ClientConfig(), stranger.ServerConfig(true), "127.0.0.1", false},
	}
	for _, tc := range cases {
		cerr, serr := handshake(tc.client, tc.server, tc.serverName)
		if ok := cerr == nil && serr == nil; ok != tc.ok {
			t.Errorf("%s: client %v, server %v; want ok=%v", tc.name, cerr, serr, tc.ok)
		}
	}
}

// The CA is created once and found again; a reissued certificate is
// picked up by Reload (and Changed notices it), and the configurations
// handed out before serve it without being rebuilt.
func TestReopenAndReload(t *testing.T) {
	dir := t.TempDir()
	ca, err := OpenCA(dir, "test CA")
	if err != nil {
		t.Fatal(err)
	}
	again, err := OpenCA(dir, "ignored")
	if err != nil {
		t.Fatal(err)
	}
	if !again.cert.Equal(ca.cert) {
		t.Fatal("OpenCA made a new CA where one existed")
	}
	srv := issue(t, ca, Leaf{Name: "node", Hosts: []string{"127.0.0.1"}})
	cli := issue(t, ca, Leaf{Name: "client"})
	scfg, ccfg := srv.ServerConfig(false), cli.ClientConfig()
	before := srv.NotAfter()

	time.Sleep(10 * time.Millisecond) // a later modification time
	if _, err := ca.Issue(Leaf{Name: "node", Hosts: []string{"127.0.0.1"}, ValidFor: 48 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if !srv.Changed() {
		t.Error("Changed does not see the reissued files")
	}
	if err := srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if srv.Changed() {
		t.Error("Changed after Reload")
	}
	if after := srv.NotAfter(); !after.Before(before) {
		t.Errorf("NotAfter %v after reload, want the new (earlier) expiry, before %v", after, before)
	}
	if cerr, serr := handshake(ccfg, scfg, "127.0.0.1"); cerr != nil || serr != nil {
		t.Errorf("handshake after reload: %v / %v", cerr, serr)
	}
}

func TestBadFiles(t *testing.T) {
	dir := t.TempDir()
	ca, err := OpenCA(dir, "test CA")
	if err != nil {
		t.Fatal(err)
	}
	good, err := ca.Issue(Leaf{Name: "node"})
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := ca.Issue(Leaf{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	expired, err := ca.Issue(Leaf{Name: "old", ValidFor: -time.Hour + time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		f    Files
		want string
	}{
		{"no key named", Files{Cert: good.Cert, CA: good.CA}, "missing: key"},
		{"nothing named", Files{}, "missing: certificate, key, CA"},
		{"a key of another certificate", Files{Cert: good.Cert, Key: otherKey.Key, CA: good.CA}, "private key does not match"},
		{"a CA file without PEM", Files{Cert: good.Cert, Key: good.Key, CA: garbage}, "holds no PEM certificate"},
		{"a certificate that is not PEM", Files{Cert: garbage, Key: good.Key, CA: good.CA}, "garbage.pem"},
		{"a missing file", Files{Cert: good.Cert, Key: good.Key, CA: filepath.Join(dir, "absent.crt")}, "absent.crt"},
		{"an expired certificate", expired, "expired"},
	}
	for _, tc := range cases {
		_, err := Load(tc.f)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	if _, err := ca.Issue(Leaf{}); err == nil {
		t.Error("a certificate without a name was issued")
	}
}

func TestClientConfigFiles(t *testing.T) {
	dir := t.TempDir()
	ca, err := OpenCA(dir, "test CA")
	if err != nil {
		t.Fatal(err)
	}
	srv := issue(t, ca, Leaf{Name: "gateway", Hosts: []string{"127.0.0.1"}})
	cf, err := ca.Issue(Leaf{Name: "client"})
	if err != nil {
		t.Fatal(err)
	}
	anon, err := ClientConfigFiles(ca.CertFile(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if cerr, serr := handshake(anon, srv.ServerConfig(true), "127.0.0.1"); cerr != nil || serr != nil {
		t.Errorf("CA only, optional client certificate: %v / %v", cerr, serr)
	}
	if cerr, serr := handshake(anon, srv.ServerConfig(false), "127.0.0.1"); cerr == nil && serr == nil {
		t.Error("CA only was served where a client certificate is required")
	}
	withCert, err := ClientConfigFiles(ca.CertFile(), cf.Cert, cf.Key)
	if err != nil {
		t.Fatal(err)
	}
	if cerr, serr := handshake(withCert, srv.ServerConfig(false), "127.0.0.1"); cerr != nil || serr != nil {
		t.Errorf("with a client certificate: %v / %v", cerr, serr)
	}
	// A certificate of another CA is presented all the same, and refused
	// for what it is, even where a certificate is optional.
	other, err := OpenCA(filepath.Join(dir, "other"), "another CA")
	if err != nil {
		t.Fatal(err)
	}
	of, err := other.Issue(Leaf{Name: "stranger"})
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := ClientConfigFiles(ca.CertFile(), of.Cert, of.Key)
	if err != nil {
		t.Fatal(err)
	}
	if _, serr := handshake(stranger, srv.ServerConfig(true), "127.0.0.1"); serr == nil || !strings.Contains(serr.Error(), "unknown authority") {
		t.Errorf("a certificate of another CA, optional client certificate: the server said %v, want the certificate refused", serr)
	}
	if _, err := ClientConfigFiles(ca.CertFile(), cf.Cert, ""); err == nil {
		t.Error("a certificate without its key was accepted")
	}
	if _, err := ClientConfigFiles(filepath.Join(dir, "absent"), "", ""); err == nil {
		t.Error("a missing CA file was accepted")
	}
}

// A client certificate no server would take is refused when loaded, with
// the reason: over TLS 1.3 the client of a refused handshake is often told
// only that the connection broke.
func TestClientConfigFilesRefusesUnusableCertificates(t *testing.T) {
	dir := t.TempDir()
	ca, err := OpenCA(dir, "test CA")
	if err != nil {
		t.Fatal(err)
	}
	expired, err := ca.Issue(Leaf{Name: "expired", ValidFor: -time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ClientConfigFiles(ca.CertFile(), expired.Cert, expired.Key); err == nil || !strings.Contains(err.Error(), "expired.crt expired at") {
		t.Errorf("an expired certificate: %v", err)
	}
	// Signed by the CA, as Issue would, but valid only from tomorrow, or
	// only for servers.
	own := func(name string, tmpl *x509.Certificate) Files {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.SerialNumber, tmpl.Subject = serial(), pkix.Name{CommonName: name}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
		if err != nil {
			t.Fatal(err)
		}
		f := Files{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key")}
		if err := writePair(f.Cert, f.Key, der, key); err != nil {
			t.Fatal(err)
		}
		return f
	}
	now := time.Now()
	early := own("early", &x509.Certificate{NotBefore: now.Add(24 * time.Hour), NotAfter: now.Add(48 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if _, err := ClientConfigFiles(ca.CertFile(), early.Cert, early.Key); err == nil || !strings.Contains(err.Error(), "early.crt is not valid before") {
		t.Errorf("a certificate not valid yet: %v", err)
	}
	server := own("server-only", &x509.Certificate{NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if _, err := ClientConfigFiles(ca.CertFile(), server.Cert, server.Key); err == nil || !strings.Contains(err.Error(), "server-only.crt is not for client authentication") {
		t.Errorf("a server-only certificate: %v", err)
	}
	// No extended key usage at all is any usage.
	plain := own("plain", &x509.Certificate{NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)})
	if _, err := ClientConfigFiles(ca.CertFile(), plain.Cert, plain.Key); err != nil {
		t.Errorf("a certificate without extended key usage: %v", err)
	}
}
