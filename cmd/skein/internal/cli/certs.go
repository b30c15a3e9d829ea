package cli

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"skein/libs/cliflag"
	"skein/libs/peerauth"
	"skein/libs/tlsconf"
)

// certsCmd issues certificates from a CA kept in a directory (created on
// first use), for clusters run outside skein dev: one per --name, for the
// --hosts its peers dial, and a gossip key when asked.
func certsCmd(_ context.Context, args []string, io IO) error {
	f := newFlags("certs", io, false)
	dir := f.String("dir", "", "directory of the CA (ca.crt, ca.key; created when missing) and of the certificates issued")
	names := f.String("name", "", "comma-separated names to issue a certificate to: a service's <role>-<id> (controller-1, storage-2, groupcoord-1, txncoord-1; a bare gateway is gateway-1) or a client's name (alice: principal User:alice)")
	hosts := f.String("hosts", "127.0.0.1,localhost", "comma-separated DNS names and IP addresses the certificates serve (what peers dial)")
	gossipKey := f.Bool("gossip-key", false, "also write gossip.key (a random 32-byte key, base64) when the directory has none")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("certs takes no arguments, got %q", pos)
	}
	if *dir == "" {
		return usagef("certs needs --dir")
	}
	list := cliflag.SplitList(*names)
	if len(list) == 0 && !*gossipKey {
		return usagef("certs needs --name (or --gossip-key)")
	}
	if len(list) > 0 && len(list) != len(strings.Split(*names, ",")) {
		return usagef("--name %q names an empty certificate", *names)
	}
	hostList := cliflag.SplitList(*hosts)
	if len(list) > 0 && len(hostList) == 0 {
		return usagef("--hosts names no host: a certificate would serve none")
	}
	for _, h := range hostList {
		if net.ParseIP(h) == nil && !dnsName(h) {
			return usagef("--hosts: %q is neither an IP address nor a DNS name", h)
		}
	}
	ca, err := tlsconf.OpenCA(*dir, "Skein CA")
	if err != nil {
		return err
	}
	for _, n := range list {
		if strings.ContainsAny(n, `/\`) || n == "ca" {
			return usagef("--name %q: a certificate name is a plain file name, not ca", n)
		}
		role, id := peerauth.RoleOf(n)
		files, err := ca.Issue(tlsconf.Leaf{Name: n, Role: role, ID: id, Hosts: hostList})
		if err != nil {
			return err
		}
		fmt.Fprintf(io.Out, "%s: %s %s (CA %s)\n", n, files.Cert, files.Key, files.CA)
	}
	if *gossipKey {
		path := filepath.Join(*dir, "gossip.key")
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			key := make([]byte, 32)
			if _, err := rand.Read(key); err != nil {
				return err
			}
			if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		fmt.Fprintf(io.Out, "gossip key: %s\n", path)
	}
	return nil
}

// dnsName reports whether h is a DNS name a certificate may serve: dot-
// separated labels of letters, digits and inner hyphens, 1 to 63 each, 253
// in all; a leading "*" label for a wildcard.
func dnsName(h string) bool {
	if len(h) == 0 || len(h) > 253 {
		return false
	}
	for i, label := range strings.Split(h, ".") {
		if label == "*" && i == 0 {
			continue
		}
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
