package k6

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
)

// writeScripts writes name -> source into a fresh directory and answers it.
func writeScripts(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func runScript(t *testing.T, o Options) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	o.Logf = t.Logf
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("run %s: %v", o.Script, err)
	}
	return res
}

// TestHTTPChecksMetrics runs a script with a relative import, setup data,
// http.post with headers, json() selectors, a check that fails on purpose
// and custom metrics, and checks what the runner counted.
func TestHTTPChecksMetrics(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ N int }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"n": in.N, "token": r.Header.Get("X-Token"),
			"results": []map[string]any{{"vu": r.URL.Query().Get("vu")}}})
	}))
	defer srv.Close()
	dir := writeScripts(t, map[string]string{
		"lib.js": `export const BASE = __ENV.BASE;
export function double(x) { return x * 2; }
`,
		"main.js": `import http from 'k6/http';
import { check, group } from 'k6';
import { Counter, Trend } from 'k6/metrics';
import { BASE, double } from './lib.js';

export const options = { scenarios: { s: { executor: 'constant-vus', vus: 3, duration: '10s' } } };
const hits = new Counter('hits');
const latency = new Trend('latency', true);

export function setup() { return { token: 'abc' }; }

export default function (data) {
  group('echo', () => {
    const res = http.post(` + "`${BASE}/echo?vu=${__VU}`" + `, JSON.stringify({ n: double(__ITER) }),
      { headers: { 'Content-Type': 'application/json', 'X-Token': data.token } });
    check(res, {
      'status 200': (r) => r.status === 200,
      'n doubled': (r) => r.json('n') === __ITER * 2,
      'token from setup': (r) => r.json().token === 'abc',
      'selector into an array': (r) => r.json('results.0.vu') === String(__VU),
    });
    hits.add(1);
    latency.add(res.timings.duration);
  });
  check(__ITER, { 'fails on iteration 1': (i) => i !== 1 });
}
`,
	})
	res := runScript(t, Options{Script: filepath.Join(dir, "main.js"), Env: map[string]string{"BASE": srv.URL}, Iterations: 2})
	if res.VUs != 3 || res.Iterations() != 6 {
		t.Fatalf("VUs %d, iterations %d; want 3 and 6", res.VUs, res.Iterations())
	}
	if errs := res.Errors(); len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	checks := res.Checks()
	for _, name := range []string{"status 200", "n doubled", "token from setup", "selector into an array"} {
		if c := checks[name]; c != (CheckCount{Passes: 6}) {
			t.Errorf("check %q: %+v, want 6 passes", name, c)
		}
	}
	if c := checks["fails on iteration 1"]; c != (CheckCount{Passes: 3, Fails: 3}) {
		t.Errorf("failing check: %+v, want 3 passes and 3 fails", c)
	}
	if m := res.Metric("hits"); m.Kind != "counter" || m.Sum != 6 {
		t.Errorf("hits: %+v", m)
	}
	if m := res.Metric("latency"); m.Kind != "trend" || m.Count != 6 || m.Min <= 0 {
		t.Errorf("latency: %+v", m)
	}
}

// TestErrors: an exception in an iteration is counted and the run goes on;
// an HTTP request in the init context fails the load, as in k6.
func TestErrors(t *testing.T) {
	dir := writeScripts(t, map[string]string{
		"throws.js": `export default function () { if (__ITER === 0) { throw new Error('boom'); } }`,
		"init.js": `import http from 'k6/http';
http.get('http://127.0.0.1:1/');
export default function () {}`,
		"undeclared.js": `export default function () { undeclared = 1; }`,
	})
	res := runScript(t, Options{Script: filepath.Join(dir, "throws.js"), Iterations: 3})
	if errs := res.Errors(); len(errs) != 1 || !strings.Contains(errs[0], "boom") || res.Iterations() != 3 {
		t.Errorf("errors %v after %d iterations; want one boom of 3", errs, res.Iterations())
	}
	// Modules are strict code.
	res = runScript(t, Options{Script: filepath.Join(dir, "undeclared.js")})
	if errs := res.Errors(); len(errs) != 1 || !strings.Contains(errs[0], "undeclared") {
		t.Errorf("errors %v; want a ReferenceError", errs)
	}
	_, err := Run(context.Background(), Options{Script: filepath.Join(dir, "init.js")})
	if err == nil || !strings.Contains(err.Error(), "init context") {
		t.Errorf("init-context request: %v", err)
	}
}

// TestGRPC drives an in-process server (health and reflection) through the
// grpc shim: unary calls found by reflection, a status code, a
// bidirectional stream whose answers arrive on the event loop, and a method
// outside the files the script loaded.
func TestGRPC(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("up", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s, hs)
	reflection.Register(s)
	go func() { _ = s.Serve(lis) }()
	defer s.Stop()

	dir := writeScripts(t, map[string]string{
		"main.js": `import grpc from 'k6/net/grpc';
import { check } from 'k6';

const client = new grpc.Client();

export default function () {
  client.connect(__ENV.ADDR, { plaintext: true, timeout: '5s' });
  const up = client.invoke('grpc.health.v1.Health/Check', { service: 'up' });
  check(up, { 'serving': (r) => r.status === grpc.StatusOK && r.message.status === 'SERVING' });
  const nf = client.invoke('grpc.health.v1.Health/Check', { service: 'nope' });
  check(nf, { 'not found': (r) => r.status === grpc.StatusNotFound && r.message === null && r.error.code === 5 });
  const names = [];
  const s = new grpc.Stream(client, 'grpc.reflection.v1.ServerReflection/ServerReflectionInfo');
  s.on('data', (m) => { for (const x of m.listServicesResponse.service) { names.push(x.name); } });
  s.on('end', () => { check(names, { 'stream answers before its end': (n) => n.includes('grpc.health.v1.Health') }); });
  s.write({ listServices: '*' });
  s.end();
  check(names, { 'stream answers after the iteration code': (n) => n.length === 0 });
}
`,
		"unloaded.js": `import grpc from 'k6/net/grpc';
const client = new grpc.Client();
client.load(['.'], 'other.proto');
export default function () {
  client.connect(__ENV.ADDR, { plaintext: true });
}
`,
		"other.proto": `syntax = "proto3";`,
	})
	res := runScript(t, Options{Script: filepath.Join(dir, "main.js"), Env: map[string]string{"ADDR": lis.Addr().String()}, Iterations: 2})
	if errs := res.Errors(); len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	checks := res.Checks()
	for _, name := range []string{"serving", "not found", "stream answers before its end", "stream answers after the iteration code"} {
		if c := checks[name]; c != (CheckCount{Passes: 2}) {
			t.Errorf("check %q: %+v, want 2 passes", name, c)
		}
	}
	res = runScript(t, Options{Script: filepath.Join(dir, "unloaded.js"), Env: map[string]string{"ADDR": lis.Addr().String()}})
	if errs := res.Errors(); len(errs) != 1 || !strings.Contains(errs[0], "does not serve") {
		t.Errorf("errors %v; want the loaded file not served", errs)
	}
}
