#!/usr/bin/env bash
# The run behind docs/BENCHMARKS.md: a fresh `skein dev` cluster (3
# controllers, 3 storage nodes, the gateway; separate processes on loopback),
# the machine's raw limits, then produce, consume and latency-at-half-peak
# runs of skein-bench, one after another. Every result is kept as JSON in
# $OUT and the table at the end is what BENCHMARKS.md quotes.
#
#   make build && go build -o bin/ ./loadtest/cmd/skein-bench
#   loadtest/benchmarks.sh [OUT]        # OUT defaults to .data/bench/<UTC time>
#
# Knobs (environment): DURATION (20s per produce run), PARTITIONS (3),
# GRPC_PORT / REST_PORT (19090 / 18080: away from a `make run` cluster's
# 9090 / 8080), DISK_SIZE (1GiB), TCP_SIZE (4GiB). Needs jq. Talks to
# 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-20s}
PARTITIONS=${PARTITIONS:-3}
GRPC_PORT=${GRPC_PORT:-19090}
REST_PORT=${REST_PORT:-18080}
DISK_SIZE=${DISK_SIZE:-1GiB}
TCP_SIZE=${TCP_SIZE:-4GiB}
OUT=${1:-.data/bench/$(date -u +%Y%m%dT%H%M%SZ)}
BENCH=bin/skein-bench
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
DATA="$OUT/cluster"

for b in skein skein-controller skein-storage skein-gateway skein-bench; do
  [[ -x bin/$b ]] || { echo "bin/$b missing: make build && go build -o bin/ ./loadtest/cmd/skein-bench" >&2; exit 1; }
done
command -v jq >/dev/null || { echo "jq is needed (apt-get install jq)" >&2; exit 1; }

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (work tree modified)')"
  echo "nproc: $(nproc)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "memory: $(free -h | awk '/^Mem:/ {print $2}')"
  echo "kernel: $(uname -r)"
  echo "go: $(go version | cut -d' ' -f3)"
  echo "filesystem: $(df -hT "$OUT" | awk 'NR==2 {print $1, $2}')"
  echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/machine.txt"

step() { echo; echo "=== $1"; }
run() { # run NAME ARGS...: skein-bench ARGS --json, summary JSON to NAME.json
  local name=$1; shift
  step "$name: skein-bench $*"
  "$BENCH" "$@" --json >"$OUT/$name.json"
}

# ---- the machine's raw limits, in the same run ----
run disk-1MiB-fsync disk --dir "$OUT" --size "$DISK_SIZE" --block 64KiB --fsync-every 1MiB
run disk-1KiB-fsync disk --dir "$OUT" --size 8MiB --block 1KiB --fsync-every 1KiB
step "tcp: skein-bench tcp --size $TCP_SIZE"
"$BENCH" tcp --size "$TCP_SIZE" --round-trips 20000 --rtt-size 1024 --json | jq -s '.' >"$OUT/tcp.json"

# ---- the cluster ----
step "skein dev --data-dir $DATA"
bin/skein dev --data-dir "$DATA" --gateway-grpc-addr "127.0.0.1:$GRPC_PORT" --gateway-http-addr "127.0.0.1:$REST_PORT" >"$OUT/skein-dev.log" 2>&1 &
DEV=$!
trap 'kill -TERM $DEV 2>/dev/null; wait $DEV 2>/dev/null || true' EXIT
for _ in $(seq 120); do
  curl -sf "http://127.0.0.1:$REST_PORT/readyz" >/dev/null 2>&1 && break
  sleep 1
done
curl -sf "http://127.0.0.1:$REST_PORT/readyz" >/dev/null || { echo "the cluster did not become ready; see $OUT/skein-dev.log" >&2; exit 1; }

G=(--gateway "127.0.0.1:$GRPC_PORT" --rest "http://127.0.0.1:$REST_PORT" --progress 0)
T=(--partitions "$PARTITIONS" --replication-factor 3 --config min.insync.replicas=2 --record-size 1024 --acks -1 --warmup 2s)
STREAM=(--transport grpc-stream --batch 10 --in-flight 16 --concurrency 1)
RESTB1=(--transport rest --batch 1 --concurrency 32)
RESTB50=(--transport rest --batch 50 --concurrency 4)

# Warm-up: first connections, producer ids, page cache; not reported.
"$BENCH" produce "${G[@]}" "${T[@]}" "${STREAM[@]}" --topic warmup --duration 5s --json >/dev/null

# ---- produce, RF=3, acks=all, 1 KiB ----
run produce-stream      produce "${G[@]}" "${T[@]}" "${STREAM[@]}" --topic bench-stream --duration "$DURATION"
run produce-rest-b1     produce "${G[@]}" "${T[@]}" "${RESTB1[@]}"  --topic bench-rest --duration "$DURATION"
run produce-rest-b50    produce "${G[@]}" "${T[@]}" "${RESTB50[@]}" --topic bench-rest --duration "$DURATION"
run produce-stream-fsync produce "${G[@]}" "${T[@]}" "${STREAM[@]}" --config flush.messages=1 --topic bench-stream-fsync --duration "$DURATION"
run produce-rest-b50-fsync produce "${G[@]}" "${T[@]}" "${RESTB50[@]}" --config flush.messages=1 --topic bench-rest-fsync --duration "$DURATION"

# ---- consume what the stream run wrote, from the earliest offset ----
run consume-grpc consume "${G[@]}" --transport grpc --topic bench-stream --idle-timeout 3s --max-records 2000
run consume-rest consume "${G[@]}" --transport rest --topic bench-stream --idle-timeout 3s --max-records 2000

# ---- latency at half the peak rate, with a consumer tailing for end-to-end ----
half() { jq -r '(.records_per_s / 2 | floor)' "$OUT/$1.json"; }
HALF_STREAM=$(half produce-stream)
HALF_REST=$(half produce-rest-b1)
# The topic exists (and is in sync) before the tailing consumer starts, so
# that it reads only what is produced while it tails.
"$BENCH" produce "${G[@]}" "${T[@]}" "${STREAM[@]}" --topic bench-half --num-records 10 --warmup 0s --json >/dev/null
"$BENCH" consume "${G[@]}" --transport grpc --topic bench-half --from latest --duration 28s --idle-timeout 30s --max-wait 100ms --json >"$OUT/consume-e2e-half.json" 2>/dev/null &
CONS=$!
sleep 2
run half-stream produce "${G[@]}" "${T[@]}" "${STREAM[@]}" --topic bench-half --throughput "$HALF_STREAM" --duration "$DURATION"
wait $CONS || true
run half-rest produce "${G[@]}" "${T[@]}" "${RESTB1[@]}" --topic bench-half-rest --throughput "$HALF_REST" --duration "$DURATION"

echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"

# ---- the table ----
disk=$(jq '.mib_per_s' "$OUT/disk-1MiB-fsync.json")
fsyncs=$(jq '.ops_per_s' "$OUT/disk-1KiB-fsync.json")
tcp=$(jq '.[0].mib_per_s' "$OUT/tcp.json")
rtt=$(jq '.[1].latency_ms.p50' "$OUT/tcp.json")
{
  echo
  echo "| run | records/s | MiB/s | % of disk (fsync/1 MiB) | % of loopback TCP | latency p50 / p99 / max ms | errors |"
  echo "|---|---:|---:|---:|---:|---|---:|"
  for f in produce-stream produce-rest-b1 produce-rest-b50 produce-stream-fsync produce-rest-b50-fsync consume-grpc consume-rest half-stream half-rest consume-e2e-half; do
    jq -r --argjson disk "$disk" --argjson tcp "$tcp" --arg name "$f" \
      'def r2: . * 100 | round / 100;
       "| \($name) | \(.records_per_s|round) | \(.mib_per_s|r2) | \(.mib_per_s/$disk*1000|round/10)% | \(.mib_per_s/$tcp*1000|round/10)% | \(.latency_ms.p50|r2) / \(.latency_ms.p99|r2) / \(.latency_ms.max|r2)\(if $name == "consume-e2e-half" then " (end to end \(.end_to_end_ms.p50|r2) / \(.end_to_end_ms.p99|r2) / \(.end_to_end_ms.max|r2))" else "" end) | \(.errors) |"' "$OUT/$f.json"
  done
  echo
  printf 'raw: disk %.1f MiB/s (64 KiB writes, fsync every 1 MiB); %.0f fsyncs/s (1 KiB writes, fsync each);\n' "$disk" "$fsyncs"
  printf '     loopback TCP %.0f MiB/s (one stream), round trip p50 %.3f ms (1 KiB ping-pong)\n' "$tcp" "$rtt"
  echo "half-peak targets: grpc-stream $HALF_STREAM records/s, REST $HALF_REST records/s"
} | tee "$OUT/table.md"
