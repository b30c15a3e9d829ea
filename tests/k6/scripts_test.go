//go:build integration

package k6

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	skeinv1 "skein/gen/skein/v1"
	"skein/tests/e2e"
)

// run is one script run and what it must show.
type run struct {
	name       string
	script     string
	env        map[string]string
	iterations int
	checks     map[string]int64 // check name -> passes wanted (every check must never fail)
	records    float64          // records the script's produced/consumed counter must count
	stopWhen   func(*Result) bool
}

// TestScripts runs every script of loadtest/k6 against a `skein dev`
// cluster, in the order a user would: the three producers (REST, gRPC
// unary, gRPC stream) fill one topic, then the consumer reads every record
// back. Every check of every run must pass, every record must be
// acknowledged, and the consumer must count exactly the records the
// producers counted, all carrying the send stamp, matching the partitions'
// high watermarks.
func TestScripts(t *testing.T) {
	bin, err := e2e.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	root, err := e2e.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	d, err := e2e.StartDev(bin, t.TempDir(), 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("skein dev ready in %v: REST %s, gRPC %s", time.Since(start).Round(time.Millisecond), d.BaseURL, d.GRPCAddr)
	defer func() {
		if t.Failed() {
			t.Logf("process logs:\n%s", d.LogTails(15))
		}
		if err := d.Stop(30 * time.Second); err != nil {
			t.Error(err)
		}
	}()

	const (
		partitions = 3
		vus        = 3
		batch      = 5
		recordSize = 100
	)
	topic := fmt.Sprintf("k6-%d", time.Now().UnixNano())
	env := func(extra ...string) map[string]string {
		m := map[string]string{
			"SKEIN_REST": d.BaseURL, "SKEIN_GATEWAY": d.GRPCAddr, "TOPIC": topic,
			"PARTITIONS": fmt.Sprint(partitions), "VUS": fmt.Sprint(vus),
			"BATCH": fmt.Sprint(batch), "RECORD_SIZE": fmt.Sprint(recordSize),
		}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	const streamRequests = 20
	produced := float64(0)
	runs := []run{
		{name: "produce_rest", script: "produce_rest.js", env: env(), iterations: 10,
			checks:  map[string]int64{"status 200": vus * 10, "every record acknowledged": vus * 10},
			records: vus * 10 * batch},
		{name: "produce_grpc unary", script: "produce_grpc.js", env: env(), iterations: 10,
			checks:  map[string]int64{"status OK": vus * 10, "every record acknowledged": vus * 10},
			records: vus * 10 * batch},
		{name: "produce_grpc stream", script: "produce_grpc.js", iterations: 2,
			env:     env("MODE", "stream", "STREAM_REQUESTS", fmt.Sprint(streamRequests)),
			records: vus * 2 * streamRequests * batch},
	}
	for _, r := range runs {
		produced += r.records
	}
	runs = append(runs, run{name: "consume_rest", script: "consume_rest.js", iterations: 50,
		env:     env("MAX_WAIT_MS", "200"),
		records: produced,
		// Each VU reads one partition; all stop once every record is read.
		stopWhen: func(r *Result) bool { return r.Metric("skein_records_consumed").Sum >= produced },
	})

	for _, r := range runs {
		ok := t.Run(r.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			begin := time.Now()
			res, err := Run(ctx, Options{
				Script: filepath.Join(root, "loadtest", "k6", r.script), Env: r.env,
				Iterations: r.iterations, StopWhen: r.stopWhen, Logf: t.Logf,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d VUs, %d iterations in %v; checks %v", res.VUs, res.Iterations(), time.Since(begin).Round(time.Millisecond), res.Checks())
			if res.VUs != vus {
				t.Errorf("%d VUs from the script's options, want %d", res.VUs, vus)
			}
			for _, e := range res.Errors() {
				t.Errorf("script error: %s", e)
			}
			for name, c := range res.Checks() {
				if c.Fails > 0 {
					t.Errorf("check %q failed %d times (passed %d)", name, c.Fails, c.Passes)
				}
			}
			for name, n := range r.checks {
				if c := res.Checks()[name]; c.Passes != n {
					t.Errorf("check %q passed %d times, want %d", name, c.Passes, n)
				}
			}
			verb := "produced"
			if r.script == "consume_rest.js" {
				verb = "consumed"
				// Every value carries the send stamp the producers wrote.
				if e2e := res.Metric("skein_end_to_end_latency"); float64(e2e.Count) != r.records {
					t.Errorf("end-to-end latency of %d records, want %v", e2e.Count, r.records)
				}
			} else {
				if f := res.Metric("skein_records_failed").Sum; f != 0 {
					t.Errorf("%v records failed", f)
				}
				if n := res.Metric("skein_produce_latency").Count; n == 0 {
					t.Error("no produce latency recorded")
				}
			}
			if got := res.Metric("skein_records_" + verb).Sum; got != r.records {
				t.Errorf("%v records %s, want %v", got, verb, r.records)
			}
			if got := res.Metric("skein_bytes_" + verb).Sum; got != r.records*recordSize {
				t.Errorf("%v bytes %s, want %v", got, verb, r.records*recordSize)
			}
		})
		if !ok {
			return
		}
	}

	// The log holds exactly what the scripts counted.
	conn, err := grpc.NewClient(d.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	desc, err := skeinv1.NewAdminServiceClient(conn).DescribeTopic(ctx, &skeinv1.DescribeTopicRequest{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	var hw int64
	for _, p := range desc.GetTopic().GetPartitions() {
		hw += p.GetHighWatermark()
	}
	if len(desc.GetTopic().GetPartitions()) != partitions || float64(hw) != produced {
		t.Errorf("topic %s: %d partitions, high watermarks sum to %d; want %d and %v", topic, len(desc.GetTopic().GetPartitions()), hw, partitions, produced)
	}
	t.Logf("%v records through the k6 scripts in %v", produced, time.Since(start).Round(time.Millisecond))
}
