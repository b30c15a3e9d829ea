//go:build integration

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"

	"skein/libs/tlsconf"
)

// secureFiles is the tls section of a secure cluster's cluster.json.
type secureFiles struct {
	CA         string `json:"ca"`
	ClientCert string `json:"client_cert"`
	ClientKey  string `json:"client_key"`
	GossipKey  string `json:"gossip_key_file"`
	DevToken   string `json:"dev_token"`
}

// `skein dev --secure`: every hop is mutual TLS. A client with the CA (and
// the client certificate) creates a topic, produces and reads back over
// HTTPS and gRPC; a plaintext client, a client of another CA and a client
// without a certificate at an internal port are refused at the handshake;
// a storage node with a certificate of another CA never joins the cluster,
// nor one without the gossip key. The gateway authenticates and authorizes
// every call (checkAuth): the dev token's User:dev is refused until the
// client certificate's super user grants it ACLs. So do the storage nodes,
// coordinators and controllers for a client certificate calling them
// directly (checkEnforcement).
func TestSecureCluster(t *testing.T) {
	bin, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	d, err := StartDevWith(bin, dir, 90*time.Second, "--secure")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Stop(30 * time.Second); err != nil {
			t.Error(err)
		}
	})
	var cj struct {
		TLS *secureFiles `json:"tls"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &cj); err != nil || cj.TLS == nil {
		t.Fatalf("cluster.json has no tls section: %v %s", err, raw)
	}
	sec := cj.TLS
	good, err := tlsconf.ClientConfigFiles(sec.CA, sec.ClientCert, sec.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: good}}

	// A user with the CA: create, produce, read back over HTTPS.
	call := func(method, path string, body any) (int, map[string]any) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, d.BaseURL+path, rd)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	if code, out := call("POST", "/v1/topics", map[string]any{"name": "secure", "partitions": 1, "replication_factor": 3, "configs": map[string]string{"min.insync.replicas": "2"}}); code != 200 {
		t.Fatalf("create topic over HTTPS: %d %v", code, out)
	}
	if code, out := call("POST", "/v1/topics/secure/partitions/0/records", map[string]any{"records": []map[string]any{{"value": "over TLS"}}}); code != 200 {
		t.Fatalf("produce over HTTPS: %d %v", code, out)
	}
	code, out := call("GET", "/v1/topics/secure/partitions/0/records?offset=0", nil)
	if code != 200 || !strings.Contains(fmt.Sprint(out), "over TLS") {
		t.Fatalf("fetch over HTTPS: %d %v", code, out)
	}

	grpcCheck := func(addr string, creds credentials.TransportCredentials) error {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		// Any answer, even UNIMPLEMENTED, means the handshake passed.
		_, err = grpc_health_v1.NewHealthClient(cc).Check(ctx, &grpc_health_v1.HealthCheckRequest{})
		if err != nil && strings.Contains(err.Error(), "Unimplemented") {
			return nil
		}
		return err
	}
	if err := grpcCheck(d.GRPCAddr, credentials.NewTLS(good)); err != nil {
		t.Errorf("gRPC with the CA and the client certificate: %v", err)
	}
	caOnly, err := tlsconf.ClientConfigFiles(sec.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := grpcCheck(d.GRPCAddr, credentials.NewTLS(caOnly)); err != nil {
		t.Errorf("gRPC to the gateway with the CA alone (a client certificate is optional there): %v", err)
	}
	checkAuth(t, d, sec, caOnly, good)
	checkEnforcement(t, bin, d, sec)

	// Strangers.
	otherCA, err := tlsconf.OpenCA(filepath.Join(t.TempDir(), "other"), "another CA")
	if err != nil {
		t.Fatal(err)
	}
	strangerFiles, err := otherCA.Issue(tlsconf.Leaf{Name: "storage-4", Role: "storage", ID: "4", Hosts: []string{"127.0.0.1", "localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := tlsconf.ClientConfigFiles(strangerFiles.CA, strangerFiles.Cert, strangerFiles.Key)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + d.HTTPAddr + "/v1/cluster"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Error("plaintext HTTP to the gateway was answered 200")
		}
	}
	if err := grpcCheck(d.GRPCAddr, insecure.NewCredentials()); err == nil {
		t.Error("plaintext gRPC to the gateway was served")
	}
	if _, err := (&http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: stranger}}).Get(d.BaseURL + "/v1/cluster"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client trusting another CA: %v, want a certificate error", err)
	}
	// The command line with a certificate of another CA: the certificate
	// is presented and refused at the handshake (what the client reads
	// then is the TLS alert, or, when the gateway has closed first, a
	// broken pipe), never taken for a call without one.
	cmd := exec.Command(filepath.Join(bin, "skein"), "topic", "list", "--gateway", d.GRPCAddr, "--tls-ca", sec.CA, "--tls-cert", strangerFiles.Cert, "--tls-key", strangerFiles.Key)
	if out, err := cmd.CombinedOutput(); err == nil || strings.Contains(string(out), "present a client certificate") || !strings.Contains(string(out), "NETWORK_EXCEPTION") {
		t.Errorf("skein topic list with a certificate of another CA: %v\n%s", err, out)
	}
	procs, err := d.Processes()
	if err != nil {
		t.Fatal(err)
	}
	var storageAddr, controllers string
	var ctrls []string
	for _, p := range procs {
		switch p.Role {
		case "storage":
			storageAddr = p.GRPCAddr
		case "controller":
			ctrls = append(ctrls, p.GRPCAddr)
		}
	}
	controllers = strings.Join(ctrls, ",")
	if err := grpcCheck(storageAddr, insecure.NewCredentials()); err == nil {
		t.Error("plaintext gRPC to a storage node was served")
	}
	if err := grpcCheck(storageAddr, credentials.NewTLS(caOnly)); err == nil {
		t.Error("a storage node served a client without a certificate")
	}
	if err := grpcCheck(storageAddr, credentials.NewTLS(good)); err != nil {
		t.Errorf("a storage node refused the cluster's client certificate: %v", err)
	}

	// A storage node whose certificate another CA signed, with the right
	// gossip key: its registration is refused at the handshake.
	intruderLog := startIntruder(t, bin, controllers, strangerFiles, sec.GossipKey)
	time.Sleep(6 * time.Second)
	if code, out := call("GET", "/v1/cluster", nil); code != 200 || strings.Contains(fmt.Sprint(out["brokers"]), "id:4") {
		t.Errorf("the cluster after a storage node of another CA tried to join: %d %v", code, out["brokers"])
	}
	if b, _ := os.ReadFile(intruderLog); !bytes.Contains(b, []byte("certificate")) {
		t.Errorf("the intruder's log does not show a refused handshake:\n%s", tailLines(b, 10))
	}
}

// startIntruder runs a storage node 4 with files, against controllers; the
// test stops it. It answers its log's path.
func startIntruder(t *testing.T, bin, controllers string, files tlsconf.Files, gossipKey string) string {
	t.Helper()
	dir := t.TempDir()
	var addrs [3]string
	for i := range addrs {
		a, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = a
	}
	logPath := filepath.Join(dir, "intruder.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(bin, "skein-storage"), "--node-id", "4", "--grpc-addr", addrs[0], "--http-addr", addrs[1],
		"--gossip-addr", addrs[2], "--controllers", controllers, "--data-dir", filepath.Join(dir, "data"),
		"--tls-cert", files.Cert, "--tls-key", files.Key, "--tls-ca", files.CA, "--gossip-key-file", gossipKey)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return logPath
}

func tailLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
