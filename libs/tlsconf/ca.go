package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority kept as ca.crt and ca.key in a directory.
type CA struct {
	Dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// CertFile is the CA certificate's path, the file every process trusts.
func (ca *CA) CertFile() string { return filepath.Join(ca.Dir, "ca.crt") }

// OpenCA loads the CA in dir, or creates one (an ECDSA P-256 key, valid
// for ten years, named name) when dir holds none.
func OpenCA(dir, name string) (*CA, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca := &CA{Dir: dir}
	certPath, keyPath := ca.CertFile(), filepath.Join(dir, "ca.key")
	if pair, err := tls.LoadX509KeyPair(certPath, keyPath); err == nil {
		cert, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			return nil, err
		}
		key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("%s: not an ECDSA key", keyPath)
		}
		ca.cert, ca.key = cert, key
		return ca, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("loading the CA in %s: %w", dir, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"Skein"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	if ca.cert, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	ca.key = key
	if err := writePair(certPath, keyPath, der, key); err != nil {
		return nil, err
	}
	return ca, nil
}

// Leaf describes a certificate to issue.
type Leaf struct {
	// Name is the common name: the service's identity ("storage-2",
	// "gateway", "client").
	Name string
	// Role and ID give the URI SAN spiffe://skein/<role>/<id> (omitted when
	// Role is empty).
	Role string
	ID   string
	// Hosts: DNS names and IP addresses the certificate serves.
	Hosts []string
	// ValidFor: from now (zero: one year; negative: already expired, for tests).
	ValidFor time.Duration
}

// Issue writes <name>.crt and <name>.key into the CA's directory, signed by
// the CA, for both server and client use, and answers the files to load.
func (ca *CA) Issue(l Leaf) (Files, error) {
	if l.Name == "" {
		return Files{}, errors.New("a certificate needs a name")
	}
	if l.ValidFor == 0 {
		l.ValidFor = 365 * 24 * time.Hour
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Files{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: l.Name, Organization: []string{"Skein"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(l.ValidFor),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range l.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if l.Role != "" {
		tmpl.URIs = []*url.URL{{Scheme: "spiffe", Host: "skein", Path: "/" + l.Role + "/" + l.ID}}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Files{}, err
	}
	f := Files{Cert: filepath.Join(ca.Dir, l.Name+".crt"), Key: filepath.Join(ca.Dir, l.Name+".key"), CA: ca.CertFile()}
	return f, writePair(f.Cert, f.Key, der, key)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

// writePair writes a certificate (0644) and its key (0600), each through a
// temporary file and a rename, so a process reloading them never reads
// half a file.
func writePair(certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeAtomic(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return err
	}
	return writeAtomic(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func writeAtomic(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
