#!/usr/bin/env bash
# CPU profiles of the gateway and every storage node while one produce
# workload runs against a fresh `skein dev` cluster: the profiles, each
# process's share of a core over the same window, and the top functions of
# each profile, in one directory. The workload is `skein-bench produce`
# through one gateway stream (10 records × 16 in flight, 3 partitions,
# RF=3, acks=all, min.insync.replicas=2, 1 KiB values), as the one-stream
# row of `make bench-compare`.
#
#   make build && CGO_ENABLED=0 go build -o bin/ ./loadtest/cmd/skein-bench
#   loadtest/profile.sh                                  # full rate, round-robin
#   PROFILE_ARGS=--keyless loadtest/profile.sh           # the producer places records
#   PROFILE_ARGS='--throughput 30000' loadtest/profile.sh
#   PROFILE_STRACE=1 loadtest/profile.sh                 # system calls too (slows the run)
#   PROFILE_TAIL=1 PROFILE_ARGS='--throughput 20000' loadtest/profile.sh
#                                                        # with a consumer tailing
#
# Knobs (environment): PROFILE_RECORDS (600000: enough to outlast the
# window at full rate), PROFILE_WARM (20000, produced first into the same
# topic), PROFILE_SECS (5, the window), PROFILE_DELAY (1: seconds between the
# run's start and the window's), PROFILE_ARGS (more skein-bench produce
# flags), PROFILE_STRACE=1 (`strace -c -f` of the gateway and storage-1 over
# the window: its figures are counts, its timings are strace's own),
# PROFILE_TAIL=1 (a `skein-bench consume` tails the topic from its end
# through the run, as bench-compare's tailed row; its own CPU is not in the
# figures, the gateway's and storage nodes' work for it is),
# PROFILE_TAIL_TRANSPORT (tail: the gateway's Tail streams; grpc: unary
# Fetch calls; group: `skein consume --group`, one member of a consumer
# group on the gateway's Consume stream),
# PROFILE_OUT (.data/profile/<UTC time>), SKEIN_BIN (bin), GRPC_PORT /
# REST_PORT / DEBUG_PORT (19090 / 18080 / 16060: the gateway's API and
# /debug/pprof addresses). Every other process picks free loopback ports;
# everything listens on 127.0.0.1 only. Run it on an otherwise idle machine
# (the load average is printed): a profile taken beside a build is of the
# build's CPU as much as Skein's.
set -euo pipefail
cd "$(dirname "$0")/.."
. loadtest/dev-cluster.sh
BIN=${SKEIN_BIN:-bin}
RECORDS=${PROFILE_RECORDS:-600000}
WARM=${PROFILE_WARM:-20000}
SECS=${PROFILE_SECS:-5}
DELAY=${PROFILE_DELAY:-1}
GRPC_PORT=${GRPC_PORT:-19090}
REST_PORT=${REST_PORT:-18080}
DEBUG_PORT=${DEBUG_PORT:-16060}
OUT=${PROFILE_OUT:-.data/profile/$(date -u +%Y%m%dT%H%M%SZ)}
read -r -a EXTRA <<<"${PROFILE_ARGS:-}"

for n in RECORDS WARM SECS; do
  [[ ${!n} =~ ^[1-9][0-9]*$ ]] || { echo "PROFILE_$n=${!n}: want a whole number, 1 or more" >&2; exit 2; }
done
[[ ${PROFILE_TAIL:-0} =~ ^[01]$ ]] || { echo "PROFILE_TAIL=$PROFILE_TAIL: want 0 or 1" >&2; exit 2; }
TAIL_TRANSPORT=${PROFILE_TAIL_TRANSPORT:-tail}
[[ $TAIL_TRANSPORT =~ ^(tail|grpc|group)$ ]] || { echo "PROFILE_TAIL_TRANSPORT=$TAIL_TRANSPORT: want tail, grpc or group" >&2; exit 2; }
[[ $DELAY =~ ^[0-9]+$ ]] || { echo "PROFILE_DELAY=$DELAY: want a whole number of seconds" >&2; exit 2; }
for b in skein skein-bench skein-gateway skein-storage; do
  [[ -x $BIN/$b ]] || { echo "$BIN/$b is missing: make build, and go build -o $BIN/ ./loadtest/cmd/skein-bench" >&2; exit 2; }
done
for t in jq curl go; do
  command -v "$t" >/dev/null || { echo "$t is needed and not installed" >&2; exit 2; }
done
if [[ ${PROFILE_STRACE:-0} == 1 ]] && ! command -v strace >/dev/null; then
  echo "PROFILE_STRACE=1 needs strace (apt-get install strace)" >&2
  exit 2
fi
mkdir -p "$OUT"

start_dev SKEIN_DEBUG_ADDR="127.0.0.1:$DEBUG_PORT"

PRODUCE=("$BIN/skein-bench" produce --gateway "127.0.0.1:$GRPC_PORT" --progress 0 --topic profile
  --partitions 3 --replication-factor 3 --config min.insync.replicas=2 --record-size 1024 --acks -1
  --transport grpc-stream --batch 10 --in-flight 16 "${EXTRA[@]}")
"${PRODUCE[@]}" --num-records "$WARM" >/dev/null

# name pid debug-url, for the gateway and every storage node
TARGETS=("gateway $(jq -r '.processes[] | select(.role == "gateway") | .pid' "$WORK/data/cluster.json") http://127.0.0.1:$DEBUG_PORT")
while read -r id pid addr; do
  TARGETS+=("storage-$id $pid http://$addr")
done < <(jq -r '.processes[] | select(.role == "storage") | "\(.id) \(.pid) \(.http_addr)"' "$WORK/data/cluster.json")

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/summary.txt"
TAIL=
if [[ ${PROFILE_TAIL:-0} == 1 && $TAIL_TRANSPORT == group ]]; then
  "$BIN/skein" consume --gateway "127.0.0.1:$GRPC_PORT" --group profile-tail --from latest --max "$RECORDS" --idle 30s profile \
    >/dev/null 2>"$OUT/tail.txt" &
  TAIL=$!
  sleep 1
elif [[ ${PROFILE_TAIL:-0} == 1 ]]; then
  "$BIN/skein-bench" consume --gateway "127.0.0.1:$GRPC_PORT" --progress 0 --topic profile --transport "$TAIL_TRANSPORT" \
    --from latest --num-records "$RECORDS" --idle-timeout 30s >"$OUT/tail.txt" 2>&1 &
  TAIL=$!
  sleep 1
fi
"${PRODUCE[@]}" --num-records "$RECORDS" >"$OUT/run.txt" 2>&1 &
RUN=$!
sleep "$DELAY"
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
declare -A T0
CAPTURES=()
for t in "${TARGETS[@]}"; do
  read -r name pid url <<<"$t"
  T0[$name]=$(ticks "$pid")
  curl -sf -o "$OUT/$name.pprof" "$url/debug/pprof/profile?seconds=$SECS" &
  CAPTURES+=($!)
done
if [[ ${PROFILE_STRACE:-0} == 1 ]]; then
  for t in "${TARGETS[@]:0:2}"; do
    read -r name pid _ <<<"$t"
    timeout -s INT "$SECS" strace -c -f -p "$pid" -o "$OUT/$name.strace" 2>/dev/null &
    CAPTURES+=($!)
  done
fi
for p in "${CAPTURES[@]}"; do wait "$p" || true; done
HZ=$(getconf CLK_TCK)
{
  echo
  echo "CPU over the $SECS s window, share of one core:"
  for t in "${TARGETS[@]}"; do
    read -r name pid _ <<<"$t"
    awk -v n="$name" -v d="$(($(ticks "$pid") - T0[$name]))" -v s="$SECS" -v hz="$HZ" \
      'BEGIN { printf "  %-10s %6.1f%%\n", n, d / hz / s * 100 }'
  done
} | tee -a "$OUT/summary.txt"
EARLY=0
kill -0 "$RUN" 2>/dev/null || EARLY=1
wait "$RUN" || { echo "skein-bench failed:" >&2; cat "$OUT/run.txt" >&2; exit 1; }
if [[ -n $TAIL ]]; then
  wait "$TAIL" || { echo "the tailing consumer failed:" >&2; cat "$OUT/tail.txt" >&2; exit 1; }
fi
((EARLY == 0)) || echo "warning: the run ended before the window did; raise PROFILE_RECORDS" | tee -a "$OUT/summary.txt" >&2
{
  echo
  cat "$OUT/run.txt"
  [[ -z $TAIL ]] || cat "$OUT/tail.txt"
  for t in "${TARGETS[@]}"; do
    read -r name _ _ <<<"$t"
    [[ -s $OUT/$name.pprof ]] || { echo "no profile from $name"; continue; }
    bin=$BIN/skein-gateway
    [[ $name == storage-* ]] && bin=$BIN/skein-storage
    echo
    echo "== $name: go tool pprof -top $bin $OUT/$name.pprof"
    go tool pprof -top -nodecount=15 "$bin" "$OUT/$name.pprof" 2>/dev/null | sed -n '/^Duration/p;/flat%/,$p'
  done
  for f in "$OUT"/*.strace; do
    [[ -e $f ]] || continue
    echo
    echo "== system calls, $(basename "$f" .strace) (strace -c -f over the window)"
    cat "$f"
  done
} | tee -a "$OUT/summary.txt"
echo
echo "profiles and summary: $OUT"
