#!/usr/bin/env bash
# Skein beside NATS JetStream on this machine, one after the other: a
# 3-server JetStream cluster (file storage, R3) and a `skein dev` cluster
# (3 controllers, 3 storage nodes, the group coordinators and the gateway;
# topics RF=3, acks=all, min.insync.replicas=2, 3 partitions), 1 KiB values
# everywhere. For each workload it prints both systems' figures, Skein ÷
# JetStream, latency percentiles where the tool gives them, and the CPU
# seconds per million records of every server process and of the load
# generator (utime+stime from /proc before and after the workload). A
# markdown table at the end; the same as JSON in $BENCH_COMPARE_JSON.
#
#   make bench-compare                   # builds everything first
#   BENCH_MSGS=50000 loadtest/bench-compare.sh
#
# Knobs (environment): BENCH_MSGS (200000 records per produce and consume
# workload), BENCH_FSYNC_MSGS (BENCH_MSGS; the fsync-per-ack workloads),
# BENCH_IDLE_SECS (10), BENCH_DRAIN (1; 0 skips the drain before each
# system, see drain below), BENCH_COMPARE_JSON (.data/bench-compare/<UTC time>.json;
# the markdown table goes beside it as .md), BENCH_KEEP=1 keeps the temporary
# directory (data and logs; it is always kept after a failure), NATS_PORT
# (14222: client ports NATS_PORT..+2, routes +2000, monitoring +4000),
# GRPC_PORT / REST_PORT (19090 / 18080, the Skein gateway), NATS_GOMAXPROCS
# (GOMAXPROCS of each nats-server: by default the cores divided among the
# three servers, at least 1, as `skein dev` divides them among its storage
# nodes and gateway; 0 for Go's default, all cores), LOADGEN_GOMAXPROCS
# (GOMAXPROCS of both load generators, `nats bench` and `skein-bench`:
# NATS_GOMAXPROCS by default; 0 for Go's default), BENCH_STEADY_SYSMON (1:
# every process of both systems, load generators included, runs with
# GODEBUG=schedtrace=2147483647, as `skein dev` starts its own by default,
# which keeps the Go runtime's monitor thread on its own tick; 0: Go's
# default for all of them, `skein dev --steady-sysmon=false`). Everything listens
# on 127.0.0.1 only. Needs bin/ built (make build, bin/skein-bench,
# bin/nats-server, bin/nats: `make bench-compare` does it), jq and curl.
# BENCH_ROUNDS (1) repeats the whole comparison and prints each row's
# ratios and their median at the end (see below). BENCH_RATE_SECS (6): how
# long each fixed-rate (latency) workload runs, so that its p99 is a
# steady state's and not decided by one stall in a second's run.
# BENCH_SETTLE (1): before every measured row, `sync` lets the disk catch
# up with the rows before it (see settle below); 0 runs the rows back to
# back. BENCH_STALLS (1): `skein-bench stalls` runs beside the fixed-rate rows, at
# a real-time priority where chrt may give one (root, or CAP_SYS_NICE), and
# says how late a process that only sleeps woke meanwhile and how busy the
# CPUs were: a machine that stopped (the host took its CPUs, the kernel
# held them) wakes a real-time sleeper late, a machine that is only busy
# does not. Its CPU (about 500 wakes a second) is in no row's figures.
# 0 leaves it out. BENCH_TAIL (tail): how the consumer of the tailed
# rows reads: `tail`, the gateway's server-streaming Tail (a stream per
# partition, fed by one stream from the leader), or `grpc`, a loop of
# unary Fetch calls, as the rows were measured before 2026-12-04.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

MSGS=${BENCH_MSGS:-200000}
FSYNC_MSGS=${BENCH_FSYNC_MSGS:-$MSGS}
IDLE_SECS=${BENCH_IDLE_SECS:-10}
RATE_SECS=${BENCH_RATE_SECS:-6}
[[ $RATE_SECS =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_RATE_SECS=$RATE_SECS: want a whole number of seconds, 1 or more" >&2; exit 1; }
SETTLE=${BENCH_SETTLE:-1}
[[ $SETTLE =~ ^[01]$ ]] || { echo "BENCH_SETTLE=$SETTLE: want 1 or 0" >&2; exit 1; }
STALLS=${BENCH_STALLS:-1}
[[ $STALLS =~ ^[01]$ ]] || { echo "BENCH_STALLS=$STALLS: want 1 or 0" >&2; exit 1; }
TAIL_TRANSPORT=${BENCH_TAIL:-tail}
[[ $TAIL_TRANSPORT =~ ^(tail|grpc)$ ]] || { echo "BENCH_TAIL=$TAIL_TRANSPORT: want tail or grpc" >&2; exit 1; }
TAIL_LABEL="gRPC Tail streams"
[[ $TAIL_TRANSPORT == tail ]] || TAIL_LABEL="gRPC Fetch calls"
NATS_PORT=${NATS_PORT:-14222}
GRPC_PORT=${GRPC_PORT:-19090}
REST_PORT=${REST_PORT:-18080}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT_JSON=${BENCH_COMPARE_JSON:-.data/bench-compare/$STAMP.json}
OUT_MD=${OUT_JSON%.json}.md
WARM=1000 # records produced into every stream/topic before it is measured

# BENCH_ROUNDS=N runs the whole comparison N times, one after the other, and
# then prints every row's Skein ÷ JetStream of each round with their median
# (for the latency rows, Skein's p99 in ms): on a shared or virtual machine
# runs minutes apart differ by more than most changes do.
ROUNDS=${BENCH_ROUNDS:-1}
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_ROUNDS=$ROUNDS: want a whole number, 1 or more" >&2; exit 1; }
if ((ROUNDS > 1)); then
  mkdir -p "$(dirname "$OUT_JSON")"
  RUNS=()
  for ((r = 1; r <= ROUNDS; r++)); do
    echo "########## round $r of $ROUNDS"
    RUNS+=("${OUT_JSON%.json}-round$r.json")
    BENCH_ROUNDS=1 BENCH_COMPARE_JSON="${RUNS[-1]}" "$ROOT/loadtest/bench-compare.sh"
  done
  jq -rs '
    def median: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor]
                       else (.[length / 2 - 1] + .[length / 2]) / 2 * 100 | round / 100 end;
    . as $runs |
    "| workload | Skein ÷ JetStream, each round | median |", "|---|---|---:|",
    ($runs[0].rows | to_entries[] | .key as $i | .value.label as $name |
      [$runs[] | .rows[$i]] as $rows | select($rows[0].skein or $rows[0].jetstream) |
      (if $rows[0].ratio != null then [$rows[].ratio] else [$rows[] | .skein.p99_ms] end) as $v |
      if ($rows[0].workload | startswith("machine-")) then
        "| \($name) (p99 ms late; CPUs busy) | \([$rows[] | "\(.skein.p99_ms) (\(.skein.busy_percent // "?")%)"] | join("; ")) | \([$v[] | select(. != null)] | median // "") |"
      else
        "| \($name)\(if $rows[0].ratio == null then " (Skein p99 ms)" else "" end) | \($v | map(tostring) | join("; ")) | \([$v[] | select(. != null)] | median // "") |"
      end)
  ' "${RUNS[@]}" | tee "$OUT_MD"
  echo
  echo "rounds: ${RUNS[*]}; table: $OUT_MD"
  exit 0
fi
HZ=$(getconf CLK_TCK)
NATS_GOMAXPROCS=${NATS_GOMAXPROCS:-$(( $(nproc) / 3 > 1 ? $(nproc) / 3 : 1 ))}
[[ $NATS_GOMAXPROCS =~ ^[0-9]+$ ]] || { echo "NATS_GOMAXPROCS=$NATS_GOMAXPROCS: want a number (0: Go's default)" >&2; exit 1; }
LOADGEN_GOMAXPROCS=${LOADGEN_GOMAXPROCS:-$NATS_GOMAXPROCS}
[[ $LOADGEN_GOMAXPROCS =~ ^[0-9]+$ ]] || { echo "LOADGEN_GOMAXPROCS=$LOADGEN_GOMAXPROCS: want a number (0: Go's default)" >&2; exit 1; }
# Both load generators run with the same GOMAXPROCS (env execs the tool, so
# its CPU is still the script's child's).
LG=()
[[ $LOADGEN_GOMAXPROCS == 0 ]] || LG=(env GOMAXPROCS="$LOADGEN_GOMAXPROCS")
# The same Go runtime setting for every process of both systems: exported,
# so that nats-server, both load generators and skein dev's processes
# inherit it (skein dev keeps a GODEBUG that sets schedtrace).
STEADY_SYSMON=${BENCH_STEADY_SYSMON:-1}
SKEIN_DEV_ARGS=()
case $STEADY_SYSMON in
  1) [[ ,${GODEBUG:-}, == *,schedtrace=* ]] || export GODEBUG="${GODEBUG:+$GODEBUG,}schedtrace=2147483647" ;;
  0) SKEIN_DEV_ARGS=(--steady-sysmon=false) ;;
  *) echo "BENCH_STEADY_SYSMON=$STEADY_SYSMON: want 1 or 0" >&2; exit 1 ;;
esac

for b in nats-server nats skein skein-controller skein-storage skein-gateway skein-bench; do
  [[ -x bin/$b ]] || { echo "bin/$b is missing: run make bench-compare" >&2; exit 1; }
done
for c in jq curl; do command -v "$c" >/dev/null || { echo "$c is needed" >&2; exit 1; }; done
for p in "$NATS_PORT" $((NATS_PORT + 1)) $((NATS_PORT + 2)) $((NATS_PORT + 2000)) $((NATS_PORT + 2001)) \
  $((NATS_PORT + 2002)) $((NATS_PORT + 4000)) $((NATS_PORT + 4001)) $((NATS_PORT + 4002)) "$GRPC_PORT" "$REST_PORT"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    echo "127.0.0.1:$p is taken; set NATS_PORT, GRPC_PORT or REST_PORT" >&2
    exit 1
  fi
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/skein-bench-compare.XXXXXX")
RESULTS=$WORK/results.jsonl
: >"$RESULTS"
mkdir -p "$(dirname "$OUT_JSON")"

# ---- processes, and stopping them whatever happens ----
NATS_PIDS=()
DEV_PID=
stop_nats() {
  local p
  for p in "${NATS_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${NATS_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  NATS_PIDS=()
}
stop_skein() {
  if [[ -n $DEV_PID ]]; then
    kill -TERM "$DEV_PID" 2>/dev/null || true
    wait "$DEV_PID" 2>/dev/null || true
    DEV_PID=
  fi
}
DRAIN_FILES=() # tmpfs files of drain, below
cleanup() {
  local rc=$?
  stop_nats
  stop_skein
  ((${#DRAIN_FILES[@]} == 0)) || rm -f "${DRAIN_FILES[@]}"
  if [[ $rc -ne 0 || ${BENCH_KEEP:-0} == 1 ]]; then
    echo "data and logs kept in $WORK" >&2
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- CPU accounting from /proc (no forks between samples: a forked
# command's CPU would land in this shell's children's time) ----
# PROC_NAMES[i] runs as PROC_PIDS[i]: the servers of the cluster under test.
PROC_NAMES=()
PROC_PIDS=()
# ticks_of PID VAR: utime+stime of PID in clock ticks.
ticks_of() {
  local line f
  read -r line <"/proc/$1/stat" || { printf -v "$2" 0; return; }
  read -r -a f <<<"${line##*) }"
  printf -v "$2" '%s' $((f[11] + f[12]))
}
# children_ticks VAR: cutime+cstime of this shell: every child it has waited for.
children_ticks() {
  local line f
  read -r line <"/proc/$BASHPID/stat"
  read -r -a f <<<"${line##*) }"
  printf -v "$1" '%s' $((f[13] + f[14]))
}
declare -a T0 T1
snapshot() { # snapshot ARRAY: every server's ticks now
  local -n arr=$1
  local i t
  arr=()
  for i in "${!PROC_PIDS[@]}"; do
    ticks_of "${PROC_PIDS[$i]}" t
    arr[i]=$t
  done
}

# drain LABEL: before a system's first cluster starts. On a virtual
# machine whose host takes back memory the guest leaves free (free page
# reporting), the page cache grows into memory the host must hand out
# again, which costs the kernel several times the CPU of memory freed not
# long ago: on the 2-core test machine 1.6-2.3 ms of kernel CPU a MiB
# written, against 0.2-0.5 ms for memory a build or an earlier run freed
# minutes before (a GiB or more). Each system writes about 3 KiB a record
# (three replicas), so whichever ran first on just-freed memory would be
# favoured. drain takes that memory out of play first: it fills tmpfs
# files (kept until the end) 256 MiB at a time until a MiB has cost 1 ms
# or more in three chunks in a row, at most half of the available memory
# (and what tmpfs has room for), and prints what a MiB costs after it.
# Three, not one: after a run that freed GiBs, the kernel hands out cheap
# and dear pages mixed, and a single dear chunk stopped the drain with
# GiBs of cheap memory left for the system after it (JetStream ran at
# 16-23 s/M of server CPU after such a stop, 26-42 after a longer drain).
# The cap must pass whatever was freed last: a build frees GiBs, and so
# does the run before (its drain files and both clusters' logs), which a
# cap of 4 GiB did not pass. On a machine without the effect every MiB is
# cheap: the drain stops at its cap and says so.
PAGE_MS=()
drain() {
  local label=$1 n=0 dear=0 cap shm s ms=0 f TIMEFORMAT=%S
  if [[ ${BENCH_DRAIN:-1} == 0 || ! -d /dev/shm || ! -w /dev/shm ]]; then
    PAGE_MS+=("$label" null)
    return
  fi
  cap=$(awk '/^MemAvailable:/ { print int($2 / 1024 / 2) }' /proc/meminfo)
  shm=$(df -Pm /dev/shm | awk 'NR == 2 { print $4 - 512 }')
  ((shm >= cap)) || cap=$shm
  while (((n + 1) * 256 <= cap)); do
    f=/dev/shm/skein-bench-compare-$$-$label-$n
    DRAIN_FILES+=("$f")
    s=$({ time dd if=/dev/zero of="$f" bs=1M count=256 status=none; } 2>&1)
    n=$((n + 1))
    ms=$(awk -v s="$s" 'BEGIN { printf "%.2f", s * 1000 / 256 }')
    if awk -v m="$ms" 'BEGIN { exit !(m >= 1.0) }'; then
      dear=$((dear + 1))
      ((dear >= 3)) && break
    else
      dear=0
    fi
  done
  if ((n == 0)); then
    PAGE_MS+=("$label" null) # under 1 GiB available: nothing to spare
    return
  fi
  PAGE_MS+=("$label" "$ms")
  echo
  echo "--- memory taken out of play before $label: $((n * 256)) MiB (tmpfs); a MiB of new memory now costs $ms ms of kernel CPU"
  if awk -v m="$ms" 'BEGIN { exit !(m < 1.0) }'; then
    echo "    (still under 1 ms at the cap: either this machine has no such effect, or more freed memory is left, which favours $label)"
  fi
}

LOAD_WARNED=0
loadavg() {
  local l
  read -r l _ </proc/loadavg
  LOAD=$l
  if awk -v l="$l" 'BEGIN { exit !(l > 1.0) }'; then
    echo "    load average $l before this run (above 1.0: the machine is busy; the figures are not an idle machine's)"
    LOAD_WARNED=1
  else
    echo "    load average $l before this run"
  fi
}

# record SYSTEM WORKLOAD RECORDS WALL_S LOADGEN_TICKS METRICS_JSON: one result line,
# with CPU per million records for every server and the load generator.
record() {
  local system=$1 workload=$2 records=$3 wall=$4 gen=$5 metrics=$6 i cpu='{}'
  for i in "${!PROC_NAMES[@]}"; do
    cpu=$(jq -c --arg k "${PROC_NAMES[$i]}" --argjson v $((T1[i] - T0[i])) '. + {($k): $v}' <<<"$cpu")
  done
  jq -c -n --arg system "$system" --arg workload "$workload" --argjson records "$records" \
    --argjson wall "$wall" --argjson gen "$gen" --argjson ticks "$cpu" --argjson hz "$HZ" \
    --argjson m "$metrics" --argjson load "$LOAD" --argjson settle_mib "$SETTLE_MIB" --argjson settle_s "$SETTLE_S" '
    def perM: if $records > 0 then (. / $hz / $records * 1e6 * 100 | round / 100) else null end;
    {system: $system, workload: $workload, records: $records, wall_s: $wall, load_before: $load,
     settled_mib: $settle_mib, settle_s: $settle_s} + $m + {
      cpu_s: (($ticks | map_values(. / $hz)) + {"load-generator": ($gen / $hz)}),
      cpu_s_per_million: (($ticks | map_values(perM)) + {"load-generator": ($gen | perM)}),
      server_cpu_s_per_million: ([$ticks[]] | add | perM),
      server_cpu_cores: ([$ticks[]] | add / $hz / $wall * 1000 | round / 1000)
    }' | tee -a "$RESULTS" | jq -r '"    \(.records) records, \(.per_s // 0 | round)/s\(if (.errors // 0) > 0 then ", \(.errors) ERRORS (\(.first_error // ""))" else "" end)\(if .p50_ms then ", latency ms p50 \(.p50_ms) p99 \(.p99_ms)" else "" end); CPU s per million records: \(.cpu_s_per_million | to_entries | map("\(.key) \(.value)") | join(", "))"'
}

# settle: before every measured row, the disk catches up with what the
# rows before wrote (three replicas of every record on one disk): what is
# still dirty or in write-back when a row starts would be written back
# during it, slowing its fsyncs and stalling its processes behind the
# disk, so a row's figures would depend on the rows before it. `sync`
# writes everything dirty out and waits for it; how much there was and
# how long it took are printed. BENCH_SETTLE=0 skips it (the rows then run
# back to back, as before 2026-12-06 19:10 UTC).
# A row that needs its settle before something it starts beside the
# measured command (the stalls sampler, a tailing consumer) calls settle
# itself and sets SETTLED=1, which the row's measure takes instead of
# settling again inside their window.
SETTLE_MIB=null
SETTLE_S=null
SETTLED=0
settle() {
  SETTLE_MIB=null SETTLE_S=null
  [[ $SETTLE == 1 ]] || return 0
  local s0 s1
  SETTLE_MIB=$(awk '/^(Dirty|Writeback):/ { kb += $2 } END { print int(kb / 1024) }' /proc/meminfo)
  s0=$EPOCHREALTIME
  sync
  s1=$EPOCHREALTIME
  SETTLE_S=$(awk -v a="$s0" -v b="$s1" 'BEGIN { printf "%.2f", b - a }')
  echo "    disk settled: $SETTLE_MIB MiB dirty or in write-back, written out in $SETTLE_S s"
}

# measure SYSTEM WORKLOAD RECORDS PARSER OUT CMD...: runs CMD in the
# foreground with its stdout in OUT, every server's CPU sampled around it;
# PARSER OUT prints the metrics JSON ({per_s, p50_ms, p99_ms, records?}).
measure() {
  local system=$1 workload=$2 records=$3 parser=$4 out=$5 g0 g1 s0 s1 m
  shift 5
  echo
  echo "=== $system $workload: ${*#"$ROOT"/}"
  if [[ $SETTLED == 1 ]]; then
    SETTLED=0
    if [[ $SETTLE == 1 ]]; then
      echo "    (the disk settled before what runs beside this row was started)"
    fi
  else
    settle
  fi
  loadavg
  snapshot T0
  children_ticks g0
  s0=$EPOCHREALTIME
  "$@" >"$out" 2>"$out.err" || { echo "failed: $*" >&2; cat "$out.err" >&2; exit 1; }
  s1=$EPOCHREALTIME
  children_ticks g1
  snapshot T1
  m=$("$parser" "$out")
  if [[ $records == from-output ]]; then records=$(jq '.records' <<<"$m"); fi
  record "$system" "$workload" "$records" "$(awk -v a="$s0" -v b="$s1" 'BEGIN { printf "%.3f", b - a }')" $((g1 - g0)) "$m"
}

# idle SYSTEM: no load for IDLE_SECS; CPU as a share of one core.
idle() {
  echo
  echo "=== $1 idle for ${IDLE_SECS}s"
  settle
  loadavg
  snapshot T0
  sleep "$IDLE_SECS"
  snapshot T1
  local i cpu='{}'
  for i in "${!PROC_NAMES[@]}"; do
    cpu=$(jq -c --arg k "${PROC_NAMES[$i]}" --argjson v $((T1[i] - T0[i])) '. + {($k): $v}' <<<"$cpu")
  done
  jq -c -n --arg system "$1" --argjson ticks "$cpu" --argjson hz "$HZ" --argjson s "$IDLE_SECS" --argjson load "$LOAD" \
    --argjson settle_mib "$SETTLE_MIB" --argjson settle_s "$SETTLE_S" '
    {system: $system, workload: "idle", wall_s: $s, load_before: $load, settled_mib: $settle_mib, settle_s: $settle_s,
     cpu_s: ($ticks | map_values(. / $hz)),
     core_percent: ($ticks | map_values(. / $hz / $s * 1000 | round / 10)),
     server_core_percent: ([$ticks[]] | add / $hz / $s * 1000 | round / 10),
     goal_core_percent: ([$ticks | to_entries[] | select(.key | test("^(controller|storage|gateway|nats-server)-")) | .value]
       | add // 0 | . / $hz / $s * 1000 | round / 10)}' |
    tee -a "$RESULTS" | jq -r '"    \(.server_core_percent)% of one core in all (\(.goal_core_percent)% without coordinators): \(.core_percent | to_entries | map("\(.key) \(.value)%") | join(", "))"'
}

# stalls_start NAME / stalls_stop NAME WORKLOAD: `skein-bench stalls` beside
# a workload (see BENCH_STALLS above); its figures go into the results as
# the row WORKLOAD.
STALLS_PID=
STALLS_CHRT=()
STALLS_PRIORITY="a real-time priority (chrt -f 1)"
if [[ $STALLS == 1 ]]; then
  if command -v chrt >/dev/null && chrt -f 1 true 2>/dev/null; then
    STALLS_CHRT=(chrt -f 1)
  else
    STALLS_PRIORITY="the default priority (chrt -f is not allowed here): a busy machine wakes it late too"
  fi
fi
stalls_start() {
  [[ $STALLS == 1 ]] || return 0
  "${STALLS_CHRT[@]}" bin/skein-bench stalls --json >"$WORK/$1.json" 2>"$WORK/$1.err" &
  STALLS_PID=$!
}
stalls_stop() {
  [[ $STALLS == 1 ]] || return 0
  kill -TERM "$STALLS_PID" 2>/dev/null || true
  wait "$STALLS_PID" || { echo "skein-bench stalls failed:" >&2; cat "$WORK/$1.err" >&2; exit 1; }
  jq -c --arg w "$2" --arg prio "$STALLS_PRIORITY" '{system: "skein", workload: $w, priority: $prio, wakes: .late_ms.count,
      p50_ms: (.late_ms.p50 * 100 | round / 100), p99_ms: (.late_ms.p99 * 100 | round / 100),
      max_ms: (.late_ms.max * 100 | round / 100), over_5ms,
      busy_percent: (if .machine_cpu then (.machine_cpu.busy_percent * 10 | round / 10) else null end),
      steal_percent: (if .machine_cpu then (.machine_cpu.steal_percent * 10 | round / 10) else null end)}' "$WORK/$1.json" |
    tee -a "$RESULTS" |
    jq -r '"    the machine meanwhile: a sleeper at \(.priority) woke late by p50 \(.p50_ms) ms, p99 \(.p99_ms), max \(.max_ms) (\(.over_5ms) of \(.wakes) wakes 5 ms or more late); CPUs \(.busy_percent // "?")% busy, \(.steal_percent // "?")% stolen by the host"'
}

# ---- parsers: one JSON object of metrics from a tool's output ----
# nats bench --csv: the MsgsPerSec column; latencies (pub only) are per batch
# of async publishes, from the first publish to the last acknowledgement.
parse_nats() {
  awk -F, 'NR == 2 { printf "{\"per_s\": %s, \"mib_per_s\": %.2f", $5, $6 / 1048576;
                     if (NF >= 14) printf ", \"p50_ms\": %.2f, \"p99_ms\": %.2f, \"max_ms\": %.2f", $11 / 1000, $13 / 1000, $10 / 1000;
                     print "}" }' "$1.csv"
}
parse_skein() {
  jq -c '{records, per_s: (.records_per_s | round), mib_per_s: (.mib_per_s * 100 | round / 100),
          p50_ms: (.latency_ms.p50 * 100 | round / 100), p99_ms: (.latency_ms.p99 * 100 | round / 100),
          max_ms: (.latency_ms.max * 100 | round / 100), errors, first_error,
          load_generator_self_cpu_s: (.load_generator_cpu.total_s * 100 | round / 100)}' "$1"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), Linux $(uname -r)"
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (work tree modified)')"
VERSIONS="nats-server $(bin/nats-server --version | awk '{print $2}'), natscli $(bin/nats --version)"
echo "$VERSIONS"
echo "records per workload: $MSGS ($FSYNC_MSGS with an fsync per ack; the fixed-rate ones run for $RATE_SECS s), 1 KiB each; temporary directory $WORK"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load average at start: $LOAD_START"

# ================= NATS JetStream =================
# start_nats DIR SYNC: three servers, one cluster; SYNC is the jetstream
# sync_interval ("" for the default: fsync every 2 minutes, as shipped).
start_nats() {
  local dir=$1 sync=$2 i
  mkdir -p "$dir"
  PROC_NAMES=()
  PROC_PIDS=()
  for i in 1 2 3; do
    cat >"$dir/n$i.conf" <<EOF
server_name: "n$i"
listen: "127.0.0.1:$((NATS_PORT + i - 1))"
http: "127.0.0.1:$((NATS_PORT + 4000 + i - 1))"
jetstream {
  store_dir: "$dir/data/n$i"
  max_memory_store: 1G
  max_file_store: 8G
  ${sync:+sync_interval: $sync}
}
cluster {
  name: "skein-bench-compare"
  listen: "127.0.0.1:$((NATS_PORT + 2000 + i - 1))"
  routes: [
    "nats-route://127.0.0.1:$((NATS_PORT + 2000))"
    "nats-route://127.0.0.1:$((NATS_PORT + 2001))"
    "nats-route://127.0.0.1:$((NATS_PORT + 2002))"
  ]
}
EOF
    if [[ $NATS_GOMAXPROCS == 0 ]]; then
      bin/nats-server -c "$dir/n$i.conf" >"$dir/n$i.log" 2>&1 &
    else
      GOMAXPROCS=$NATS_GOMAXPROCS bin/nats-server -c "$dir/n$i.conf" >"$dir/n$i.log" 2>&1 &
    fi
    NATS_PIDS+=($!)
    PROC_NAMES+=("nats-server-$i")
    PROC_PIDS+=($!)
  done
  local ok=0
  for _ in $(seq 120); do
    ok=1
    for i in 0 1 2; do
      curl -sf "http://127.0.0.1:$((NATS_PORT + 4000 + i))/healthz" >/dev/null 2>&1 || ok=0
    done
    [[ $ok == 1 ]] && bin/nats -s "$NATS_URL" account info >/dev/null 2>&1 && break
    ok=0
    sleep 0.5
  done
  [[ $ok == 1 ]] || { echo "the JetStream cluster did not become ready; logs in $dir" >&2; exit 1; }
}
NATS_URL="nats://127.0.0.1:$NATS_PORT"
NB=("${LG[@]}" bin/nats -s "$NATS_URL" bench js)
NSTREAM=(--size 1KiB --no-progress --stream benchstream)
# nats_warm creates the stream and warms it up. A cluster that has just
# elected its meta leader may refuse the first creation: it is tried three
# times, and its output is shown when it still fails.
nats_warm() {
  local i
  for i in 1 2 3; do
    "${NB[@]}" pub async bench.data "${NSTREAM[@]}" --create --replicas 3 --storage file --msgs "$WARM" >"$WORK/nats-warm.out" 2>&1 && return 0
    sleep 2
  done
  echo "creating and warming up the JetStream stream failed:" >&2
  cat "$WORK/nats-warm.out" >&2
  exit 1
}

echo
echo "##### NATS JetStream: 3 servers, file storage, R3 (GOMAXPROCS $([[ $NATS_GOMAXPROCS == 0 ]] && echo "Go's default" || echo "$NATS_GOMAXPROCS") each; load generators: $([[ $LOADGEN_GOMAXPROCS == 0 ]] && echo "Go's default" || echo "$LOADGEN_GOMAXPROCS"))"
echo "GODEBUG of every process of both systems: ${GODEBUG:-none}"
drain jetstream
start_nats "$WORK/nats" ""
# The stream, created and warmed up before anything is measured.
nats_warm
sleep 2
idle jetstream
measure jetstream produce-async "$MSGS" parse_nats "$WORK/js-pub" \
  "${NB[@]}" pub async bench.data "${NSTREAM[@]}" --msgs "$MSGS" --csv "$WORK/js-pub.csv"
measure jetstream consume "$MSGS" parse_nats "$WORK/js-ordered" \
  "${NB[@]}" ordered "${NSTREAM[@]}" --msgs "$MSGS" --csv "$WORK/js-ordered.csv"
stop_nats

echo
echo "##### NATS JetStream again, sync_interval: always (an fsync before every ack)"
start_nats "$WORK/nats-fsync" always
nats_warm
measure jetstream produce-fsync "$FSYNC_MSGS" parse_nats "$WORK/js-pub-fsync" \
  "${NB[@]}" pub async bench.data "${NSTREAM[@]}" --msgs "$FSYNC_MSGS" --csv "$WORK/js-pub-fsync.csv"
stop_nats

# ================= Skein =================
echo
echo "##### Skein: bin/skein dev (3 controllers, 3 storage nodes, group coordinators, gateway)"
drain skein
DATA=$WORK/skein
bin/skein dev "${SKEIN_DEV_ARGS[@]}" --data-dir "$DATA" --gateway-grpc-addr "127.0.0.1:$GRPC_PORT" \
  --gateway-http-addr "127.0.0.1:$REST_PORT" >"$WORK/skein-dev.log" 2>&1 &
DEV_PID=$!
for _ in $(seq 120); do
  curl -sf "http://127.0.0.1:$REST_PORT/readyz" >/dev/null 2>&1 && [[ -s $DATA/cluster.json ]] && break
  sleep 0.5
done
curl -sf "http://127.0.0.1:$REST_PORT/readyz" >/dev/null || { echo "the Skein cluster did not become ready; see $WORK/skein-dev.log" >&2; exit 1; }
SKEIN_START_LINE=$(grep -m1 '^starting a cluster' "$WORK/skein-dev.log" || true)
echo "$SKEIN_START_LINE"
PROC_NAMES=()
PROC_PIDS=()
while read -r name pid; do
  PROC_NAMES+=("$name")
  PROC_PIDS+=("$pid")
done < <(jq -r '.processes[] | "\(.role)-\(.id) \(.pid)"' "$DATA/cluster.json")
echo "processes: ${PROC_NAMES[*]}"

G=("${LG[@]}" bin/skein-bench produce --gateway "127.0.0.1:$GRPC_PORT" --rest "http://127.0.0.1:$REST_PORT" --progress 0 --json
  --partitions 3 --replication-factor 3 --config min.insync.replicas=2 --record-size 1024 --acks -1)
C=("${LG[@]}" bin/skein-bench consume --gateway "127.0.0.1:$GRPC_PORT" --rest "http://127.0.0.1:$REST_PORT" --progress 0 --json)
STREAM=(--transport grpc-stream --batch 10 --in-flight 16 --concurrency 1)
STREAM4=(--transport grpc-stream --batch 10 --in-flight 16 --concurrency 4)
# As many records unacknowledged as JetStream's async publish has at most
# (a batch of 500): 10 records × 50 requests in flight.
STREAM500=(--transport grpc-stream --batch 10 --in-flight 50 --concurrency 1)
DIRECT=(--transport direct --cluster-json "$DATA/cluster.json" --batch 10 --in-flight 16 --concurrency 1)
DIRECT500=(--transport direct --cluster-json "$DATA/cluster.json" --batch 10 --in-flight 50 --concurrency 1)
# Keyless: the requests name no partition and the producer places the
# records (the gateway's, or libs/client's), sticking to one partition per
# batch as Kafka's producer does for records without a key. JetStream's
# stream is one log; the rows above spread every request over three.
# libs/client batches as the gateway does (256 KiB, a partition with
# nothing in flight sends at once), in every row at its defaults.
STREAMK=("${STREAM[@]}" --keyless)
DIRECTK=("${DIRECT[@]}" --keyless)
# Every topic created, in sync and warmed up before anything is measured.
warm() { "${G[@]}" --topic "$1" "${@:2}" --num-records "$WARM" >/dev/null 2>>"$WORK/warmup.err"; }
warm bench-async "${STREAM[@]}"
warm bench-async4 "${STREAM4[@]}"
warm bench-async500 "${STREAM500[@]}"
warm bench-direct "${DIRECT[@]}"
warm bench-direct500 "${DIRECT500[@]}"
warm bench-asynck "${STREAMK[@]}"
warm bench-directk "${DIRECTK[@]}"
warm bench-fsync "${STREAM[@]}" --config flush.messages=1
warm bench-fsync4 "${STREAM4[@]}" --config flush.messages=1
warm bench-fsync500 "${STREAM500[@]}" --config flush.messages=1
warm bench-fsynck "${STREAMK[@]}" --config flush.messages=1
warm bench-half "${STREAM[@]}"
warm bench-tail "${STREAM[@]}"
sleep 2 # let the warm-up's last replication rounds and leader moves settle
idle skein
measure skein produce-async from-output parse_skein "$WORK/sk-async.json" \
  "${G[@]}" "${STREAM[@]}" --topic bench-async --num-records "$MSGS"
measure skein produce-async-4-streams from-output parse_skein "$WORK/sk-async4.json" \
  "${G[@]}" "${STREAM4[@]}" --topic bench-async4 --num-records "$MSGS"
measure skein produce-async-500 from-output parse_skein "$WORK/sk-async500.json" \
  "${G[@]}" "${STREAM500[@]}" --topic bench-async500 --num-records "$MSGS"
measure skein produce-direct from-output parse_skein "$WORK/sk-direct.json" \
  "${G[@]}" "${DIRECT[@]}" --topic bench-direct --num-records "$MSGS"
measure skein produce-direct-500 from-output parse_skein "$WORK/sk-direct500.json" \
  "${G[@]}" "${DIRECT500[@]}" --topic bench-direct500 --num-records "$MSGS"
measure skein produce-async-keyless from-output parse_skein "$WORK/sk-asynck.json" \
  "${G[@]}" "${STREAMK[@]}" --topic bench-asynck --num-records "$MSGS"
measure skein produce-direct-keyless from-output parse_skein "$WORK/sk-directk.json" \
  "${G[@]}" "${DIRECTK[@]}" --topic bench-directk --num-records "$MSGS"
measure skein produce-fsync from-output parse_skein "$WORK/sk-fsync.json" \
  "${G[@]}" "${STREAM[@]}" --config flush.messages=1 --topic bench-fsync --num-records "$FSYNC_MSGS"
measure skein produce-fsync-4-streams from-output parse_skein "$WORK/sk-fsync4.json" \
  "${G[@]}" "${STREAM4[@]}" --config flush.messages=1 --topic bench-fsync4 --num-records "$FSYNC_MSGS"
measure skein produce-fsync-500 from-output parse_skein "$WORK/sk-fsync500.json" \
  "${G[@]}" "${STREAM500[@]}" --config flush.messages=1 --topic bench-fsync500 --num-records "$FSYNC_MSGS"
measure skein produce-fsync-keyless from-output parse_skein "$WORK/sk-fsynck.json" \
  "${G[@]}" "${STREAMK[@]}" --config flush.messages=1 --topic bench-fsynck --num-records "$FSYNC_MSGS"
measure skein consume from-output parse_skein "$WORK/sk-consume-grpc.json" \
  "${C[@]}" --transport grpc --topic bench-async --num-records "$MSGS"
measure skein consume-rest from-output parse_skein "$WORK/sk-consume-rest.json" \
  "${C[@]}" --transport rest --topic bench-async --num-records "$MSGS"
# The same catch-up over the gateway's Tail, a stream per partition that
# the gateway feeds from one Follow stream from the leader: a streaming
# reader, as JetStream's ordered consumer is a pushed one.
measure skein consume-tail from-output parse_skein "$WORK/sk-consume-tail.json" \
  "${C[@]}" --transport tail --topic bench-async --num-records "$MSGS"
HALF=$(jq -r 'select(.system == "skein" and .workload == "produce-async") | .per_s / 2 | floor' "$RESULTS")
HALF_MSGS=$((HALF * RATE_SECS))
echo
echo "--- before the next row, its stalls sampler first:"
settle
SETTLED=1
stalls_start sk-half-stalls
measure skein produce-half-rate from-output parse_skein "$WORK/sk-half.json" \
  "${G[@]}" "${STREAM[@]}" --topic bench-half --throughput "$HALF" --num-records "$HALF_MSGS"
stalls_stop sk-half-stalls machine-half-rate
# The same rate with a consumer tailing the topic (from its end, over the
# gateway's Tail streams, or unary Fetch calls: BENCH_TAIL), which is how
# the latency goals are set: produce latency as above, and end to end,
# from a record's send to its arrival at the consumer. The consumer is
# started first and is not counted in the load generator's CPU.
echo
echo "--- before the next row, its tailing consumer and stalls sampler first:"
settle
SETTLED=1
"${C[@]}" --transport "$TAIL_TRANSPORT" --topic bench-tail --from latest --num-records "$HALF_MSGS" --idle-timeout 30s \
  >"$WORK/sk-tail-consume.json" 2>"$WORK/sk-tail-consume.err" &
TAIL_PID=$!
sleep 1
stalls_start sk-tail-stalls
measure skein produce-half-rate-tailed from-output parse_skein "$WORK/sk-tail.json" \
  "${G[@]}" "${STREAM[@]}" --topic bench-tail --throughput "$HALF" --num-records "$HALF_MSGS"
stalls_stop sk-tail-stalls machine-tailed
wait "$TAIL_PID" || { echo "the tailing consumer failed:" >&2; cat "$WORK/sk-tail-consume.err" >&2; exit 1; }
jq -c --argjson load "$LOAD" '{system: "skein", workload: "end-to-end-tailed", records, load_before: $load,
  p50_ms: (.end_to_end_ms.p50 * 100 | round / 100),
  p99_ms: (.end_to_end_ms.p99 * 100 | round / 100), max_ms: (.end_to_end_ms.max * 100 | round / 100)}' \
  "$WORK/sk-tail-consume.json" | tee -a "$RESULTS" |
  jq -r '"    end to end (the tailing consumer, \(.records) records): latency ms p50 \(.p50_ms) p99 \(.p99_ms)"'
stop_skein

# ================= the table =================
# Rows: workload, its label, the JetStream workload it is compared with.
ROWS='[
  ["produce-async", "produce, async / pipelined: JetStream `js pub async` (batches of 500); Skein gateway gRPC ProduceStream, 10 records × 16 in flight", "produce-async"],
  ["produce-async-4-streams", "same, Skein with 4 streams", "produce-async"],
  ["produce-async-500", "same, Skein with as many records in flight as JetStream'"'"'s batch: 10 records × 50", "produce-async"],
  ["produce-direct", "same, Skein straight to the storage nodes (libs/client, 10 records × 16 in flight)", "produce-async"],
  ["produce-direct-500", "same, libs/client with 10 records × 50 in flight", "produce-async"],
  ["produce-async-keyless", "same, one gateway stream (10 records × 16), keyless: the gateway places the records, one partition per batch", "produce-async"],
  ["produce-direct-keyless", "same, libs/client (10 records × 16), keyless", "produce-async"],
  ["produce-fsync", "produce, fsync before every ack: JetStream `sync_interval: always`; Skein `flush.messages=1`, gRPC stream", "produce-fsync"],
  ["produce-fsync-4-streams", "same, Skein with 4 streams", "produce-fsync"],
  ["produce-fsync-500", "same, Skein with 10 records × 50 in flight", "produce-fsync"],
  ["produce-fsync-keyless", "same, one gateway stream (10 records × 16), keyless", "produce-fsync"],
  ["consume", "consume, catch-up: JetStream ordered consumer; Skein gateway gRPC Fetch (3 partitions, 2000 per fetch)", "consume"],
  ["consume-rest", "same, Skein REST", "consume"],
  ["consume-tail", "same, Skein gateway gRPC Tail (a stream per partition)", "consume"],
  ["produce-half-rate", "produce at a fixed rate, half of Skein'"'"'s async peak (Skein gRPC stream)", null],
  ["machine-half-rate", "same time, the machine: how late a real-time sleeper woke (`skein-bench stalls`), how busy the CPUs were", null],
  ["produce-half-rate-tailed", "same rate, a consumer tailing the topic ('"$TAIL_LABEL"' from its end): produce latency", null],
  ["end-to-end-tailed", "same run, end to end: from a record'"'"'s send to its arrival at the tailing consumer", null],
  ["machine-tailed", "same run, the machine: how late a real-time sleeper woke, how busy the CPUs were", null],
  ["idle", "idle cluster, CPU for '"$IDLE_SECS"' s", "idle"]
]'
jq -s --argjson rows "$ROWS" --arg msgs "$MSGS" --arg fsync_msgs "$FSYNC_MSGS" --arg load_start "$LOAD_START" \
  --arg load_end "$(cut -d' ' -f1-3 /proc/loadavg)" --arg versions "$VERSIONS" --arg commit "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg nproc "$(nproc)" \
  --arg nats_gomaxprocs "$NATS_GOMAXPROCS" --arg loadgen_gomaxprocs "$LOADGEN_GOMAXPROCS" --arg skein_start "$SKEIN_START_LINE" \
  --arg godebug "${GODEBUG:-}" \
  --argjson page_js "${PAGE_MS[1]}" --argjson page_skein "${PAGE_MS[3]}" '
  . as $all |
  def find($sys; $w): first($all[] | select(.system == $sys and .workload == $w)) // null;
  {date: $date, commit: $commit, nproc: ($nproc | tonumber), versions: $versions,
   nats_gomaxprocs: ($nats_gomaxprocs | tonumber), loadgen_gomaxprocs: ($loadgen_gomaxprocs | tonumber), godebug: $godebug, skein_dev_start: $skein_start,
   load_average_start: $load_start, load_average_end: $load_end,
   new_memory_ms_per_mib: {jetstream: $page_js, skein: $page_skein},
   records_per_workload: ($msgs | tonumber), records_per_fsync_workload: ($fsync_msgs | tonumber),
   rows: [$rows[] | . as [$w, $lbl, $ref] |
     ({workload: $w, label: $lbl, jetstream: (if $ref then find("jetstream"; $ref) else null end),
       skein: find("skein"; $w), jetstream_is_row: ($ref == $w)}) |
     .ratio = (if .workload == "idle" then
                 (if .jetstream and .skein and .jetstream.server_core_percent > 0 then (.skein.server_core_percent / .jetstream.server_core_percent * 100 | round / 100) else null end)
               elif .jetstream and .skein then (.skein.per_s / .jetstream.per_s * 100 | round / 100) else null end)]}
' "$RESULTS" >"$OUT_JSON"

jq -r '
  def n: tostring | explode | reverse | [_nwise(3)] | map(reverse | implode) | reverse | join(",");
  def lat: if . and .p50_ms then "\(.p50_ms) / \(.p99_ms)" else "" end;
  def cpu: if . == null or .server_cpu_s_per_million == null then "" else "\(.server_cpu_s_per_million)" end;
  def gen: if . == null or .cpu_s_per_million == null then "" else "\(.cpu_s_per_million["load-generator"])" end;
  def procs: if . == null then "" else (.cpu_s_per_million // .core_percent // {} | to_entries | map("\(.key) \(.value)") | join(", ")) end;
  "| workload | JetStream | Skein | Skein ÷ JetStream | JetStream p50 / p99 ms | Skein p50 / p99 ms | JetStream server CPU s/M | Skein server CPU s/M | JetStream load gen. CPU s/M | Skein load gen. CPU s/M | load avg before (JetStream / Skein) |",
  "|---|---:|---:|---:|---|---|---:|---:|---:|---:|---|",
  (.rows[] |
    if (.workload | startswith("machine-")) then
      (if .skein then "| \(.label) | | CPUs \(.skein.busy_percent // "?")% busy, \(.skein.steal_percent // "?")% stolen | | | late \(.skein | lat) | | | | | |" else empty end)
    elif .workload == "idle" then
      "| \(.label) | \(.jetstream.server_core_percent // "")% of a core | \(.skein.server_core_percent // "")% of a core\(if .skein.goal_core_percent then " (controllers, storage nodes, gateway: \(.skein.goal_core_percent)%)" else "" end) | \(.ratio // "") | | | | | | | \(.jetstream.load_before // "") / \(.skein.load_before // "") |"
    else
      "| \(.label) | \(if .jetstream then (if .jetstream_is_row then "" else "(" end) + (.jetstream.per_s | round | n) + " msg/s" + (if .jetstream_is_row then "" else ")" end) else "" end) | \(if .skein.per_s then (.skein.per_s | n) + " rec/s" else "" end) | \(.ratio // "") | \(if .jetstream_is_row then (.jetstream | lat) else "" end) | \(.skein | lat) | \(if .jetstream_is_row then (.jetstream | cpu) else "" end) | \(.skein | cpu) | \(if .jetstream_is_row then (.jetstream | gen) else "" end) | \(.skein | gen) | \(if .jetstream_is_row then "\(.jetstream.load_before) / " else "" end)\(.skein.load_before // "") |"
    end),
  "",
  "CPU per process (seconds per million records; idle: % of one core):",
  "",
  "| workload | system | per process |",
  "|---|---|---|",
  (.rows[] | . as $r |
    (if .jetstream_is_row and .jetstream then "| \($r.workload) | JetStream | \(.jetstream | procs) |" else empty end),
    (if .skein and (.skein.cpu_s_per_million // .skein.core_percent) then "| \($r.workload) | Skein | \(.skein | procs) |" else empty end))
' "$OUT_JSON" | tee "$OUT_MD"

echo
echo "JetStream latencies are per batch of 500 async publishes (first publish to last ack); Skein's per record,"
echo "from send (or, at a fixed rate, from when it was due) to ack; consume latency is the fetch round trip."
echo "load average: $LOAD_START at start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
if [[ ${PAGE_MS[1]} != null && ${PAGE_MS[3]} != null ]]; then
  echo "a MiB of new memory, before each system's first cluster (after the drain): ${PAGE_MS[1]} ms of kernel CPU (JetStream), ${PAGE_MS[3]} ms (Skein)"
fi
echo "JSON: $OUT_JSON; table: $OUT_MD"
if [[ $LOAD_WARNED == 1 ]]; then
  echo "warning: the load average was above 1.0 before some runs: other work shared the machine, so these figures understate both systems and their ratio is noisy" >&2
fi
