package cli

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"skein/libs/membership"
	"skein/libs/peerauth"
	"skein/libs/tlsconf"
)

// skein certs issues loadable certificates from one CA, kept across runs,
// and a gossip key once; bad input is a usage error.
func TestCerts(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := run(t, "", "certs", "--dir", dir, "--name", "storage-1,client", "--hosts", "storage-1,127.0.0.1", "--gossip-key")
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	ca1, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := tlsconf.Load(tlsconf.Files{Cert: filepath.Join(dir, "storage-1.crt"), Key: filepath.Join(dir, "storage-1.key"), CA: filepath.Join(dir, "ca.crt")})
	if err != nil {
		t.Fatal(err)
	}
	if src.Identity() != "storage-1" {
		t.Errorf("identity %q", src.Identity())
	}
	if _, err := membership.ReadKeyFile(filepath.Join(dir, "gossip.key")); err != nil {
		t.Error(err)
	}
	key1, _ := os.ReadFile(filepath.Join(dir, "gossip.key"))
	if code, out, errOut := run(t, "", "certs", "--dir", dir, "--name", "gateway", "--gossip-key"); code != 0 {
		t.Fatalf("second run: exit %d: %s %s", code, out, errOut)
	}
	ca2, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	key2, _ := os.ReadFile(filepath.Join(dir, "gossip.key"))
	if string(ca1) != string(ca2) || string(key1) != string(key2) {
		t.Error("a second run replaced the CA or the gossip key")
	}
	// A service's name gives its role, any other name a client's.
	if code, out, errOut := run(t, "", "certs", "--dir", dir, "--name", "alice"); code != 0 {
		t.Fatalf("alice: exit %d: %s %s", code, out, errOut)
	}
	for name, want := range map[string]peerauth.Peer{
		"storage-1": {Role: "storage", ID: "1", Principal: "User:storage-1"},
		"gateway":   {Role: "gateway", ID: "1", Principal: "User:gateway"},
		"alice":     {Role: "client", ID: "alice", Principal: "User:alice"},
	} {
		raw, err := os.ReadFile(filepath.Join(dir, name+".crt"))
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(raw)
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if got := peerauth.FromCertificate(c); got != want {
			t.Errorf("%s's certificate names %+v, want %+v", name, got, want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"certs", "--name", "x"}, "needs --dir"},
		{[]string{"certs", "--dir", dir}, "needs --name"},
		{[]string{"certs", "--dir", dir, "--name", "ca"}, "not ca"},
		{[]string{"certs", "--dir", dir, "--name", "../evil"}, "plain file name"},
		{[]string{"certs", "--dir", dir, "--name", "bob", "--hosts", "not a host!"}, `"not a host!" is neither`},
		{[]string{"certs", "--dir", dir, "--name", "bob", "--hosts", "-bad.example"}, "neither an IP address nor a DNS name"},
		{[]string{"certs", "--dir", dir, "--name", "bob", "--hosts", ""}, "names no host"},
		{[]string{"certs", "--dir", dir, "--name", "a,,b"}, "an empty certificate"},
	} {
		code, _, errOut := run(t, "", tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}
