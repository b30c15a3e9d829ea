package devcluster

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strconv"

	"skein/libs/tlsconf"
)

// Security is what a secure cluster's processes and clients use, all in
// <data-dir>/tls: the CA every process trusts, a certificate per process
// (named after it, for 127.0.0.1 and localhost), a client certificate for
// the CLI and tests, and the gossip key.
type Security struct {
	CA         string `json:"ca"`
	ClientCert string `json:"client_cert"`
	ClientKey  string `json:"client_key"`
	GossipKey  string `json:"gossip_key_file"`

	dir    string
	client *tlsconf.Source
}

// files answers the certificate files of the process named name.
func (s *Security) files(name string) tlsconf.Files {
	return tlsconf.Files{Cert: filepath.Join(s.dir, name+".crt"), Key: filepath.Join(s.dir, name+".key"), CA: s.CA}
}

// secure creates (or, where they exist, keeps) the CA and the gossip key in
// dir, and issues every process and the client a fresh certificate.
func secure(dir string, procs []*Process) (*Security, error) {
	ca, err := tlsconf.OpenCA(dir, "Skein dev CA")
	if err != nil {
		return nil, err
	}
	s := &Security{CA: ca.CertFile(), GossipKey: filepath.Join(dir, "gossip.key"), dir: dir}
	hosts := []string{"127.0.0.1", "localhost"}
	for _, p := range procs {
		if _, err := ca.Issue(tlsconf.Leaf{Name: p.name(), Role: p.Role, ID: strconv.Itoa(p.ID), Hosts: hosts}); err != nil {
			return nil, err
		}
	}
	cf, err := ca.Issue(tlsconf.Leaf{Name: "client", Role: "client", ID: "dev"})
	if err != nil {
		return nil, err
	}
	s.ClientCert, s.ClientKey = cf.Cert, cf.Key
	if s.client, err = tlsconf.Load(cf); err != nil {
		return nil, err
	}
	if _, err := os.Stat(s.GossipKey); errors.Is(err, os.ErrNotExist) {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		if err := os.WriteFile(s.GossipKey, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	return s, nil
}

// scheme is how the cluster's HTTP endpoints are reached.
func (c *Cluster) scheme() string {
	if c.sec != nil {
		return "https://"
	}
	return "http://"
}

// Security answers a secure cluster's CA, client certificate and gossip
// key; nil for a plaintext cluster.
func (c *Cluster) Security() *Security { return c.sec }
