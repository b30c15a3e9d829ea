package devcluster

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"skein/libs/tlsconf"
)

// Security is what a secure cluster's processes and clients use, all in
// <data-dir>/tls: the CA every process trusts, a certificate per process
// (named after it, for 127.0.0.1 and localhost), a client certificate for
// the CLI and tests, the gossip key, and the gateway's token file with a
// dev token (principal DevPrincipal).
type Security struct {
	CA         string `json:"ca"`
	ClientCert string `json:"client_cert"`
	ClientKey  string `json:"client_key"`
	GossipKey  string `json:"gossip_key_file"`
	TokenFile  string `json:"token_file"`
	DevToken   string `json:"dev_token"`

	dir    string
	client *tlsconf.Source
}

// files answers the certificate files of the process named name.
func (s *Security) files(name string) tlsconf.Files {
	return tlsconf.Files{Cert: filepath.Join(s.dir, name+".crt"), Key: filepath.Join(s.dir, name+".key"), CA: s.CA}
}

// checkSecurity refuses to start a cluster without security on a data
// directory that a secure run left its CA in: its ACLs, tokens and data
// would be open to any caller over plaintext. Security is dropped only by
// removing <data-dir>/tls on purpose.
func checkSecurity(dataDir string, secure bool) error {
	if secure {
		return nil
	}
	dir := filepath.Join(dataDir, "tls")
	_, err := os.Stat(filepath.Join(dir, "ca.crt"))
	switch {
	case err == nil:
		return fmt.Errorf("devcluster: %s holds a secure cluster (its CA is in %s): start it with --secure; to run it without TLS and ACLs, remove %s first", dataDir, dir, dir)
	case errors.Is(err, os.ErrNotExist):
		return nil
	default:
		return err
	}
}

// secure creates (or, where they exist, keeps) the CA and the gossip key in
// dir, and issues every process and the client a fresh certificate.
func secure(dir string, procs []*Process) (*Security, error) {
	ca, err := tlsconf.OpenCA(dir, "Skein dev CA")
	if err != nil {
		return nil, err
	}
	s := &Security{CA: ca.CertFile(), GossipKey: filepath.Join(dir, "gossip.key"), TokenFile: filepath.Join(dir, "tokens"), dir: dir}
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
	if s.DevToken, err = devToken(s.TokenFile); err != nil {
		return nil, err
	}
	return s, nil
}

// DevPrincipal is the principal of a secure dev cluster's dev token: it
// may do what ACLs allow it (nothing until a super user adds some).
const DevPrincipal = "User:dev"

// ClientPrincipal is the principal of a secure dev cluster's client
// certificate, the gateway's super user.
const ClientPrincipal = "User:client"

// devToken answers the dev token of the gateway's token file, writing the
// file with a fresh token when there is none (an existing file is kept, with
// whatever tokens it holds).
func devToken(file string) (string, error) {
	data, err := os.ReadFile(file)
	if err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[1] == DevPrincipal {
				return f[0], nil
			}
		}
		return "", fmt.Errorf("devcluster: %s has no token for %s", file, DevPrincipal)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	tok := "skein-dev-" + base64.RawURLEncoding.EncodeToString(b)
	body := "# bearer tokens of the gateway: \"token principal\" a line (skein-gateway --auth-token-file)\n" + tok + " " + DevPrincipal + "\n"
	return tok, os.WriteFile(file, []byte(body), 0o600)
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
