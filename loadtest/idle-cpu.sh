#!/usr/bin/env bash
# An idle `skein dev` cluster's CPU, per process: the cluster is started,
# five topics (3 partitions, RF=3) are created and warmed up with 1,000
# records each, and after a short pause every process's CPU time (utime +
# stime from /proc) is read before and after IDLE_SECS of no load, with
# the whole machine's busy time over the same window.
#
#   make build && CGO_ENABLED=0 go build -o bin/ ./loadtest/cmd/skein-bench
#   loadtest/idle-cpu.sh            # 20 s
#   IDLE_SECS=60 loadtest/idle-cpu.sh
#
# Knobs (environment): IDLE_SECS (20), SETTLE_SECS (3: the pause after the
# warm-up), SKEIN_BIN (bin: the directory of the binaries, so that two
# builds can be compared one after the other on the same machine),
# GRPC_PORT / REST_PORT (19090 / 18080, the gateway). Every other process
# picks free loopback ports. Each wake of a sleeping process costs about
# 100 µs of CPU here, so run it on an otherwise idle machine (the load
# average is printed) and compare builds in alternation.
set -euo pipefail
cd "$(dirname "$0")/.."
. loadtest/dev-cluster.sh
BIN=${SKEIN_BIN:-bin}
SECS=${IDLE_SECS:-20}
GRPC_PORT=${GRPC_PORT:-19090}
REST_PORT=${REST_PORT:-18080}
for b in skein skein-bench; do
  [[ -x $BIN/$b ]] || { echo "$BIN/$b is missing: make build, and go build -o $BIN/ ./loadtest/cmd/skein-bench" >&2; exit 2; }
done
start_dev
for t in a b c d e; do
  "$BIN/skein-bench" produce --gateway "127.0.0.1:$GRPC_PORT" --progress 0 --json --topic "idle-$t" \
    --partitions 3 --replication-factor 3 --config min.insync.replicas=2 --record-size 1024 --acks -1 \
    --transport grpc-stream --batch 10 --in-flight 16 --num-records 1000 >/dev/null
done
sleep "${SETTLE_SECS:-3}"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
HZ=$(getconf CLK_TCK)
mapfile -t PROCS < <(jq -r '.processes[] | "\(.role)-\(.id) \(.pid)"' "$WORK/data/cluster.json")
declare -A T0
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
for p in "${PROCS[@]}"; do read -r name pid <<<"$p"; T0[$name]=$(ticks "$pid"); done
read -r UP0 IDLE0 </proc/uptime
sleep "$SECS"
read -r UP1 IDLE1 </proc/uptime
all=0 core=0
for p in "${PROCS[@]}"; do
  read -r name pid <<<"$p"
  d=$(($(ticks "$pid") - T0[$name]))
  all=$((all + d))
  case $name in controller-* | storage-* | gateway-*) core=$((core + d)) ;; esac
  awk -v n="$name" -v d="$d" -v s="$SECS" -v hz="$HZ" 'BEGIN { printf "%-14s %5.2f%% of a core\n", n, d / hz / s * 100 }'
done
awk -v d="$all" -v s="$SECS" -v hz="$HZ" 'BEGIN { printf "every process  %5.2f%% of a core\n", d / hz / s * 100 }'
awk -v d="$core" -v s="$SECS" -v hz="$HZ" 'BEGIN { printf "controllers, storage nodes, gateway %5.2f%% of a core\n", d / hz / s * 100 }'
# The processes' own CPU leaves out what their wakes cost the kernel
# outside them (timer interrupts, a halted CPU's wake, the scheduler).
# The machine's busy time, from the idle time /proc/uptime keeps for all
# CPUs together, has it, and everything else running too.
awk -v u0="$UP0" -v u1="$UP1" -v i0="$IDLE0" -v i1="$IDLE1" -v n="$(nproc)" \
  'BEGIN { printf "the whole machine, kernel included %5.2f%% of a core\n", (n * (u1 - u0) - (i1 - i0)) / (u1 - u0) * 100 }'
