#!/usr/bin/env bash
# The Python client test (make test-python): installs Debian's protoc, gRPC
# Python plugin and runtimes if missing (install.sh), generates a client from
# proto/skein/v1 into a temporary directory, starts `bin/skein dev` on free
# loopback ports with a temporary data directory, runs smoke_test.py against
# its gateway with /usr/bin/python3 (Debian's modules are invisible to other
# interpreters), and stops the cluster however the test ends.
#
# SKEIN_GATEWAY=host:port runs the test against that gateway instead of
# starting a cluster. SKEIN_BIN_DIR overrides bin/. SKEIN_SECURE=1 starts
# `skein dev --secure` and has the client talk TLS with the cluster's CA and
# client certificate.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=/usr/bin/python3
start=$(date +%s.%N)

"$here/install.sh"

work=$(mktemp -d -t skein-python-XXXXXX)
dev_pid=
cleanup() {
  local rc=$?
  if [ -n "$dev_pid" ] && kill -0 "$dev_pid" 2>/dev/null; then
    kill -TERM "$dev_pid" 2>/dev/null || true
    for _ in $(seq 1 200); do kill -0 "$dev_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$dev_pid" 2>/dev/null || true
    wait "$dev_pid" 2>/dev/null || true
  fi
  if [ "$rc" -ne 0 ] && [ -d "$work/data/logs" ]; then
    for f in "$work"/data/logs/*.log; do echo "---- $(basename "$f") ----"; tail -n 10 "$f"; done >&2
    echo "---- skein dev ----" >&2; cat "$work/dev.out" >&2 || true
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The client, generated as a user would (docs/API.md), plus the two
# google.rpc messages that read a status's ErrorInfo.
mkdir -p "$work/gen"
protoc -I "$root/proto" --python_out="$work/gen" \
  --grpc_out="$work/gen" --plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin \
  "$root"/proto/skein/v1/*.proto
protoc -I "$here/proto" --python_out="$work/gen" "$here/proto/google/rpc/status.proto"

gateway=${SKEIN_GATEWAY:-}
if [ -z "$gateway" ]; then
  bin=${SKEIN_BIN_DIR:-$root/bin}
  if [ ! -x "$bin/skein" ]; then
    echo "run.sh: $bin/skein not built (make build)" >&2
    exit 1
  fi
  # Empty gateway addresses make skein dev pick free ports; it prints them.
  secure=()
  if [ "${SKEIN_SECURE:-}" = 1 ]; then
    secure=(--secure)
    export SKEIN_TLS_CA="$work/data/tls/ca.crt" SKEIN_TLS_CERT="$work/data/tls/client.crt" SKEIN_TLS_KEY="$work/data/tls/client.key"
  fi
  "$bin/skein" dev --data-dir "$work/data" --bin-dir "$bin" "${secure[@]}" \
    --gateway-http-addr '' --gateway-grpc-addr '' >"$work/dev.out" 2>&1 &
  dev_pid=$!
  for _ in $(seq 1 900); do
    grep -q '^Skein is running' "$work/dev.out" && break
    kill -0 "$dev_pid" 2>/dev/null || { echo "run.sh: skein dev exited before the cluster was ready" >&2; exit 1; }
    sleep 0.1
  done
  gateway=$(sed -n 's/^  gRPC: *\([^ ]*\).*/\1/p' "$work/dev.out")
  if [ -z "$gateway" ]; then
    echo "run.sh: skein dev not ready after 90 s" >&2
    exit 1
  fi
fi

echo "python client against $gateway ($("$py" -c 'import grpc, google.protobuf as p; print("grpcio", grpc.__version__, "protobuf", p.__version__)'))"
PYTHONPATH="$work/gen" PYTHONDONTWRITEBYTECODE=1 "$py" "$here/smoke_test.py" "$gateway"
echo "python client test: $(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f s", e-s}')"
