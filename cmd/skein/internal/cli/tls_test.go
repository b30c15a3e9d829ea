package cli

import (
	"crypto/tls"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"skein/libs/errs"
	"skein/libs/rpcerr"
	"skein/libs/tlsconf"
)

// gatewayCertificate makes a CA in dir and a gateway's certificate of it
// for 127.0.0.1.
func gatewayCertificate(t *testing.T, dir string) (*tlsconf.CA, *tlsconf.Source) {
	t.Helper()
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
	return ca, src
}

// A plaintext CLI against a gateway that takes TLS is told to pass
// --tls-ca: gRPC itself says only that the server preface did not come.
func TestPlaintextToATLSGatewaySaysSo(t *testing.T) {
	_, src := gatewayCertificate(t, t.TempDir())
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

// A client certificate the gateway's CA did not issue is refused during or
// right after the handshake, which gRPC reports as an alert, a reset, a
// broken pipe or a missing preface; every run says which certificate to
// fix, and none says to pass the --tls-ca it was given.
func TestUntrustedClientCertificateSaysSo(t *testing.T) {
	dir := t.TempDir()
	ca, src := gatewayCertificate(t, dir)
	other, err := tlsconf.OpenCA(filepath.Join(dir, "other"), "another CA")
	if err != nil {
		t.Fatal(err)
	}
	evil, err := other.Issue(tlsconf.Leaf{Name: "client"})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(src.ServerConfig(false))))
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	for i := range 6 {
		cmd := []string{"topic", "list"}
		if i%2 == 1 {
			cmd = []string{"consume", "orders", "--from", "earliest", "--max", "1"} // a stream
		}
		code, out, errOut := run(t, "", append(cmd, "--gateway", lis.Addr().String(), "--tls-ca", ca.CertFile(), "--tls-cert", evil.Cert, "--tls-key", evil.Key)...)
		if code != 1 || out != "" || !strings.Contains(errOut, "--tls-cert must be one the cluster's CA issued") || strings.Contains(errOut, "pass --tls-ca") {
			t.Fatalf("%q with an untrusted client certificate: %d %q %q", cmd, code, out, errOut)
		}
	}
}

// Only a connection the gateway never answered on is blamed on the
// certificate, and the hint keeps the failure's own code and details.
func TestCertRefusalExplainsOnlyAnUnansweredConnection(t *testing.T) {
	pipe := status.Error(codes.Unavailable, "connection error: desc = \"transport: write: broken pipe\"")
	if err := (&certRefusal{}).explain(pipe); !strings.Contains(err.Error(), certRefusedHint) {
		t.Errorf("a fresh connection's broken pipe: %v, want the hint", err)
	}
	answered := &certRefusal{}
	_ = answered.explain(nil)
	if err := answered.explain(pipe); strings.Contains(err.Error(), certRefusedHint) {
		t.Errorf("after an answer: %v, want no hint", err)
	}
	relayed := rpcerr.ToGRPC(errs.Errorf(errs.NetworkException, "read tcp 127.0.0.1:1: connection reset by peer"))
	err := (&certRefusal{}).explain(relayed)
	if strings.Contains(err.Error(), certRefusedHint) || errs.Of(rpcerr.FromStatus(err)) != errs.NetworkException {
		t.Errorf("a refusal the gateway relays: %v, want it as it was", err)
	}
}
