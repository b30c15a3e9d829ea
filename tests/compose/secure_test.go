//go:build compose

package compose

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"

	"skein/libs/peerauth"
	"skein/libs/tlsconf"
)

// imageUID is the user the images run as (deploy/*.Dockerfile).
const imageUID = 65532

// The compose cluster secured (docker-compose.secure.yml over
// docker-compose.yml): certificates for every service and a gossip key
// from one CA, mounted read-only. Every container becomes healthy (their
// health checks speak HTTPS with the same files), the gateway serves
// HTTPS and TLS gRPC to a client with the CA, acks=all produces are read
// back, and a plaintext client is refused.
func TestComposeSecure(t *testing.T) {
	if only := os.Getenv("SKEIN_COMPOSE_PHASES"); only != "" && !strings.Contains(","+only+",", ",secure,") {
		t.Logf("--- secure: skipped (SKEIN_COMPOSE_PHASES=%s)", only)
		return
	}
	start := time.Now()
	dir := t.TempDir()
	ca, err := tlsconf.OpenCA(dir, "Skein compose CA")
	if err != nil {
		t.Fatal(err)
	}
	services := []string{"controller-1", "controller-2", "controller-3", "storage-1", "storage-2", "storage-3",
		"groupcoord-1", "groupcoord-2", "txncoord-1", "txncoord-2", "gateway"}
	hosts := append([]string{"127.0.0.1", "localhost"}, services...)
	for _, name := range append(services, "client") {
		role, id := peerauth.RoleOf(name)
		if _, err := ca.Issue(tlsconf.Leaf{Name: name, Role: role, ID: id, Hosts: hosts}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "gossip.key"), []byte("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The images run as uid 65532: the keys (0600) must be theirs.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.Chown(filepath.Join(dir, e.Name()), imageUID, imageUID); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tc, err := tlsconf.ClientConfigFiles(ca.CertFile(), filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"))
	if err != nil {
		t.Fatal(err)
	}

	c := newCluster(t)
	root := filepath.Dir(c.files[0])
	c.files = append(c.files, filepath.Join(root, "docker-compose.secure.yml"))
	c.env = append(c.env, "SKEIN_COMPOSE_TLS_DIR="+dir)
	plainREST := c.rest
	c.rest = strings.Replace(c.rest, "http://", "https://", 1)
	c.http = &http.Client{Timeout: 45 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	c.up()
	t.Logf("secured cluster up and serving over HTTPS in %v", time.Since(start).Round(time.Second))

	topic := "secure-orders"
	c.createTopic(topic, 3, 2)
	c.waitISR(topic, 3, 60*time.Second, nil)
	var acked []produced
	for i := range 20 {
		p, err := c.produce(topic, fmt.Sprintf("secret-%02d", i))
		if err != nil {
			c.fatalf("produce %d over HTTPS: %v", i, err)
		}
		acked = append(acked, p)
	}
	c.checkReadBack(topic, acked)

	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(plainREST + "/v1/cluster"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			c.errorf("plaintext HTTP to the secured gateway was answered 200")
		}
	}
	grpcPort := ""
	for _, kv := range c.env {
		if v, ok := strings.CutPrefix(kv, "SKEIN_GRPC_PORT="); ok {
			grpcPort = v
		}
	}
	check := func(creds credentials.TransportCredentials) error {
		cc, err := grpc.NewClient("127.0.0.1:"+grpcPort, grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = grpc_health_v1.NewHealthClient(cc).Check(ctx, &grpc_health_v1.HealthCheckRequest{})
		return err
	}
	if err := check(credentials.NewTLS(tc)); err != nil {
		c.errorf("TLS gRPC to the secured gateway: %v", err)
	}
	if err := check(insecure.NewCredentials()); err == nil {
		c.errorf("plaintext gRPC to the secured gateway was served")
	}
	t.Logf("secure compose test %v (before docker compose down -v)", time.Since(start).Round(time.Second))
}
