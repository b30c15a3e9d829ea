package cli

import (
	"crypto/tls"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"skein/libs/tlsconf"
)

// A plaintext CLI against a gateway that takes TLS is told to pass
// --tls-ca: gRPC itself says only that the server preface did not come.
func TestPlaintextToATLSGatewaySaysSo(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlsconf.OpenCA(filepath.Join(dir, "ca"), "test CA")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ca.Issue(tlsconf.Leaf{Name: "gateway", Hosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	src, err := tlsconf.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl := tls.NewListener(lis, src.ServerConfig(true))
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	defer tl.Close()
	code, out, errOut := run(t, "", "topic", "list", "--gateway", lis.Addr().String())
	if code != 1 || out != "" || !strings.Contains(errOut, "if it takes TLS, pass --tls-ca") {
		t.Fatalf("plaintext to TLS: %d %q %q", code, out, errOut)
	}
}
