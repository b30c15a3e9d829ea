// Package k6 runs the k6 scripts of loadtest/k6 without k6: under the goja
// JavaScript engine, with small shims of the k6 modules they import — k6
// (check, group, sleep, fail), k6/metrics (Counter, Gauge, Rate, Trend),
// k6/http (get, post, put, del, request) and k6/net/grpc (Client with load,
// connect, invoke and close; Stream with on, write and end), whose calls
// resolve their methods through the server's gRPC reflection.
//
// A Run is what `k6 run` does, bounded: the script's init code once per
// virtual user (each VU its own runtime, as in k6), setup() once, a fixed
// number of iterations of the default function per VU, then teardown(). The
// VU count is the script's own options (scenarios' vus or preAllocatedVUs);
// the duration and arrival rate are not emulated. The result counts every
// check by name (passes and fails), every custom metric and every exception
// an iteration threw, so a test can assert that all checks pass and that the
// records the metrics count are in the log.
//
// goja has no ES modules, so each file is turned into a CommonJS function
// with esbuild before it runs (what k6 itself did before its engine had
// modules); the scripts stay plain k6.
//
// The test against a live cluster (build tag integration; `make
// test-integration`) runs every script in loadtest/k6 against `bin/skein
// dev`; the shims themselves are tested against in-process servers.
package k6
