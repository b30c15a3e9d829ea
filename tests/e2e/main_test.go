//go:build integration

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The one cluster of a run, started by the first test that needs it.
var shared struct {
	once    sync.Once
	dir     string
	dev     *Dev
	err     error
	started time.Duration
}

// devCluster answers the running cluster, starting it on first use.
func devCluster(t *testing.T) *Dev {
	t.Helper()
	shared.once.Do(func() {
		bin, err := BinDir()
		if err != nil {
			shared.err = err
			return
		}
		if shared.dir, err = os.MkdirTemp("", "skein-e2e-"); err != nil {
			shared.err = err
			return
		}
		start := time.Now()
		shared.dev, shared.err = StartDev(bin, shared.dir, 90*time.Second)
		shared.started = time.Since(start)
	})
	if shared.err != nil {
		t.Fatalf("starting skein dev: %v", shared.err)
	}
	t.Logf("skein dev (started in %v): REST %s, gRPC %s, data %s", shared.started.Round(time.Millisecond), shared.dev.BaseURL, shared.dev.GRPCAddr, shared.dev.Dir)
	return shared.dev
}

func TestMain(m *testing.M) {
	start := time.Now()
	code := m.Run()
	if d := shared.dev; d != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "---- skein dev output ----\n%s\n%s", d.Output(), d.LogTails(30))
		}
		stopStart := time.Now()
		if err := d.Stop(60 * time.Second); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: stopping skein dev: %v\n%s", err, d.LogTails(30))
			code = 1
		}
		fmt.Fprintf(os.Stderr, "e2e: cluster started in %v, stopped in %v; whole run %v\n",
			shared.started.Round(time.Millisecond), time.Since(stopStart).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	}
	if shared.dir != "" {
		if code == 0 {
			os.RemoveAll(shared.dir)
		} else {
			fmt.Fprintf(os.Stderr, "e2e: the cluster's data and logs are kept in %s\n", shared.dir)
		}
	}
	os.Exit(code)
}

// testCtx bounds a test's calls.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func restClient(d *Dev) *REST {
	return &REST{Base: d.BaseURL, HC: &http.Client{Timeout: 60 * time.Second}}
}

func grpcConn(t *testing.T, d *Dev) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(d.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// mustDo sends a REST request and fails the test unless the status is want.
func mustDo(ctx context.Context, t *testing.T, c *REST, want int, method, path string, body any) *Response {
	t.Helper()
	resp, err := c.Do(ctx, method, path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if resp.Status != want {
		t.Fatalf("%s %s: %s, want %d", method, path, resp, want)
	}
	return resp
}

// createTopic creates a topic over REST and answers its description.
func createTopic(ctx context.Context, t *testing.T, c *REST, name string, partitions, rf int32, configs map[string]string) TopicDescription {
	t.Helper()
	body := map[string]any{"name": name, "partitions": partitions, "replication_factor": rf}
	if configs != nil {
		body["configs"] = configs
	}
	var td TopicDescription
	if err := mustDo(ctx, t, c, http.StatusOK, "POST", "/v1/topics", body).Decode(&td); err != nil {
		t.Fatal(err)
	}
	if td.Name != name || len(td.Partitions) != int(partitions) {
		t.Fatalf("created %q with %d partitions, want %q with %d", td.Name, len(td.Partitions), name, partitions)
	}
	return td
}

func ptr[T any](v T) *T { return &v }
