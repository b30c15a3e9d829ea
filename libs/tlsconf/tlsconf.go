// Package tlsconf is TLS for every Skein process: a local certificate
// authority and the certificates it issues (what `skein dev --secure`
// creates), and a Source that serves a process's certificate and trusted
// CAs to its servers and clients, loading the files again on SIGHUP or when
// they change, so certificates are rotated without a restart.
//
// Every internal hop is mutual TLS: servers require a client certificate
// signed by the CA, clients check the server's against the same CA and the
// name they dialled. A certificate names the service it was issued to in
// its common name and as a URI SAN spiffe://skein/<role>/<id> (Identity).
package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Files names a process's PEM files: its certificate chain, its private key
// and the CA certificates it trusts.
type Files struct {
	Cert, Key, CA string
}

// Enabled reports whether any file is named; Check tells whether all are.
func (f Files) Enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

// Check answers an error unless all three files are named.
func (f Files) Check() error {
	var missing []string
	for _, x := range []struct{ name, v string }{{"certificate", f.Cert}, {"key", f.Key}, {"CA", f.CA}} {
		if x.v == "" {
			missing = append(missing, x.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("TLS needs a certificate, its key and the CA together; missing: %s", strings.Join(missing, ", "))
	}
	return nil
}

// Source holds a process's current certificate and trusted CAs.
type Source struct {
	files Files

	mu      sync.RWMutex
	cert    *tls.Certificate
	leaf    *x509.Certificate
	pool    *x509.CertPool
	modTime [3]time.Time
}

// Load reads the files; an error says which file and why (unreadable, not
// PEM, a key that does not match the certificate, an expired certificate).
func Load(f Files) (*Source, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	s := &Source{files: f}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload reads the files again. On an error the previous certificate and
// CAs stay in use.
func (s *Source) Reload() error {
	cert, err := tls.LoadX509KeyPair(s.files.Cert, s.files.Key)
	if err != nil {
		return fmt.Errorf("loading %s and %s: %w", s.files.Cert, s.files.Key, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return fmt.Errorf("%s: %w", s.files.Cert, err)
	}
	if now := time.Now(); now.After(leaf.NotAfter) {
		return fmt.Errorf("%s expired at %s", s.files.Cert, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	raw, err := os.ReadFile(s.files.CA)
	if err != nil {
		return fmt.Errorf("reading the CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(raw) {
		return fmt.Errorf("%s holds no PEM certificate", s.files.CA)
	}
	mt := s.modTimes()
	s.mu.Lock()
	s.cert, s.leaf, s.pool, s.modTime = &cert, leaf, pool, mt
	s.mu.Unlock()
	return nil
}

func (s *Source) modTimes() [3]time.Time {
	var out [3]time.Time
	for i, p := range []string{s.files.Cert, s.files.Key, s.files.CA} {
		if fi, err := os.Stat(p); err == nil {
			out[i] = fi.ModTime()
		}
	}
	return out
}

// Changed reports whether a file's modification time moved since the last
// load.
func (s *Source) Changed() bool {
	mt := s.modTimes()
	s.mu.RLock()
	defer s.mu.RUnlock()
	return mt != s.modTime
}

// Identity is the service named in the current certificate (its common
// name, such as "storage-2").
func (s *Source) Identity() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.leaf.Subject.CommonName
}

// NotAfter is when the current certificate expires.
func (s *Source) NotAfter() time.Time {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.leaf.NotAfter
}

func (s *Source) current() (*tls.Certificate, *x509.CertPool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cert, s.pool
}

// ServerConfig is the TLS configuration of a server: the current
// certificate, and client certificates verified against the current CAs —
// required unless optionalClientCert (the gateway's public listeners, where
// clients may authenticate otherwise).
func (s *Source) ServerConfig(optionalClientCert bool) *tls.Config {
	auth := tls.RequireAndVerifyClientCert
	if optionalClientCert {
		auth = tls.VerifyClientCertIfGiven
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := s.current()
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{*cert},
				ClientCAs:    pool,
				ClientAuth:   auth,
				NextProtos:   []string{"h2", "http/1.1"},
			}, nil
		},
	}
}

// ClientConfig is the TLS configuration of a client: it presents the
// current certificate and checks the server's chain against the current CAs
// and the name it dialled (a DNS name or an IP address in the certificate).
func (s *Source) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _ := s.current()
			return cert, nil
		},
		// The chain is verified below against the CAs as they are now, so
		// a rotated CA file takes effect without a new tls.Config.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return s.verifyServer(cs)
		},
	}
}

func (s *Source) verifyServer(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the server sent no certificate")
	}
	_, pool := s.current()
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots: pool, Intermediates: inter, DNSName: cs.ServerName,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err
}

// Watch reloads the files on SIGHUP and whenever one of them changes
// (checked every interval), until ctx ends. A reload that fails keeps the
// previous certificate; onReload hears every attempt (err nil on success).
func (s *Source) Watch(ctx context.Context, interval time.Duration, onReload func(err error)) {
	WatchFiles(ctx, interval, s.Changed, s.Reload, onReload)
}

// WatchFiles is the reload loop of anything kept in files (certificates,
// token files): reload on SIGHUP, and whenever changed answers true (asked
// every interval), until ctx ends; onReload, when set, hears every attempt.
func WatchFiles(ctx context.Context, interval time.Duration, changed func() bool, reload func() error, onReload func(err error)) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		case <-t.C:
			if !changed() {
				continue
			}
		}
		err := reload()
		if onReload != nil {
			onReload(err)
		}
	}
}

// AddFlags registers --tls-cert, --tls-key and --tls-ca on fs (each with
// its SKEIN_TLS_* environment twin through cliflag) and answers where they
// land. All three or none: none is plaintext.
func AddFlags(fs *flag.FlagSet) *Files {
	f := &Files{}
	fs.StringVar(&f.Cert, "tls-cert", "", "PEM certificate (chain) of this process; with --tls-key and --tls-ca every gRPC connection and server of the process uses mutual TLS")
	fs.StringVar(&f.Key, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&f.CA, "tls-ca", "", "PEM certificates of the CAs this process trusts, for its peers' certificates")
	return f
}

// ClientConfigFiles builds the TLS configuration of a client that is not a
// cluster process (the CLI, a test): it trusts the CAs in caFile and, when
// certFile and keyFile are given, presents that certificate.
func ClientConfigFiles(caFile, certFile, keyFile string) (*tls.Config, error) {
	raw, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading the CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(raw) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	switch {
	case certFile != "" && keyFile != "":
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("loading %s and %s: %w", certFile, keyFile, err)
		}
		if err := usableClientCert(certFile, cert.Leaf, time.Now()); err != nil {
			return nil, err
		}
		// Presented whatever issuers the server says it takes: Go's
		// client otherwise sends no certificate when its issuer is not
		// among them, and a server that takes a certificate optionally
		// (the gateway) answers that none was given rather than that this
		// one is not of its CA.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	case certFile != "" || keyFile != "":
		return nil, errors.New("a client certificate needs its key, and a key its certificate")
	}
	return cfg, nil
}

// usableClientCert refuses a client certificate no server would take at
// now: outside its validity, or not for client authentication. The server
// sees why and refuses the handshake, but the client is often told only
// that the connection broke; checked here, the caller learns the reason.
func usableClientCert(file string, leaf *x509.Certificate, now time.Time) error {
	if leaf == nil {
		return nil
	}
	switch {
	case now.Before(leaf.NotBefore):
		return fmt.Errorf("the client certificate %s is not valid before %s", file, leaf.NotBefore.UTC().Format(time.RFC3339))
	case now.After(leaf.NotAfter):
		return fmt.Errorf("the client certificate %s expired at %s", file, leaf.NotAfter.UTC().Format(time.RFC3339))
	case len(leaf.ExtKeyUsage) > 0 && !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) && !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageAny):
		return fmt.Errorf("the client certificate %s is not for client authentication (its extended key usage has no clientAuth)", file)
	}
	return nil
}
