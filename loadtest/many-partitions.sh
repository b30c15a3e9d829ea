#!/usr/bin/env bash
# A `skein dev` cluster (three storage nodes) holding thousands of
# partitions: what a metadata change costs the nodes, and whether it moves
# leaderships it should not. Three steps on one fresh cluster:
#
#   1. 2,000 partitions in one topic, then 1,000 one-partition topics made
#      four at a time: how long the creates take, and the storage nodes'
#      CPU over the 30 s after them (nothing produced).
#   2. four topics of 500 partitions, one of them deleted: the leaders of
#      the others before and 15 s after the delete, and how many
#      leaderships the controllers moved.
#   3. one topic of BIG_PARTITIONS (10,000, the most a create takes): its
#      leaders 60 s after the create, a produce to another topic, and the
#      time its deletion takes to leave no directory behind.
#
#   make build
#   loadtest/many-partitions.sh
#   SKEIN_BIN=/tmp/old/bin loadtest/many-partitions.sh   # another build
#
# Knobs (environment): SKEIN_BIN (bin), BIG_PARTITIONS (10000), GRPC_PORT /
# REST_PORT (19090 / 18080, the gateway). It takes about five minutes and
# two cores; run it on an otherwise idle machine (the load average is
# printed before each step).
set -euo pipefail
cd "$(dirname "$0")/.."
. loadtest/dev-cluster.sh
BIN=${SKEIN_BIN:-bin}
BIG=${BIG_PARTITIONS:-10000}
GRPC_PORT=${GRPC_PORT:-19090}
REST_PORT=${REST_PORT:-18080}
[[ -x $BIN/skein ]] || { echo "$BIN/skein is missing: make build" >&2; exit 2; }
G=http://127.0.0.1:$REST_PORT
start_dev

create() { # name partitions
  curl -s -o /dev/null -w "%{http_code}" -X POST "$G/v1/topics" -d "{\"name\":\"$1\",\"partitions\":$2,\"replication_factor\":3}"
}
# leaders TOPIC...: each topic's leaders by broker, the partitions whose ISR
# lacks a replica, and those led by their preferred (first) replica.
leaders() {
  for t in "$@"; do curl -s "$G/v1/topics/$t"; echo; done | jq -s -r '
    [.[].partitions[]] as $p
    | "leaders \([$p[].leader] | group_by(.) | map("\(.[0]): \(length)") | join(", ")); " +
      "under-replicated \([$p[] | select((.isr | length) < (.replicas | length))] | length); " +
      "on their preferred replica \([$p[] | select(.leader == .replicas[0])] | length) of \($p | length)"'
}
moves() { cat "$WORK"/data/logs/controller-*.log | grep -c 'move leadership' || true; }
notAnswering() { cat "$WORK"/data/logs/storage-*.log | grep -c 'leaders not answering' || true; }
HZ=$(getconf CLK_TCK)
storageTicks() {
  jq -r '.processes[] | select(.role == "storage") | .pid' "$WORK/data/cluster.json" |
    while read -r pid; do awk '{print $14 + $15}' "/proc/$pid/stat"; done | paste -sd+ | bc
}
load() { echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"; }

echo "== 1. 2,000 partitions, then 1,000 one-partition topics ($(load))"
echo "create base (2,000 partitions): $(create base 2000)"
sleep 15
start=$(date +%s.%N)
seq 1000 | xargs -P4 -I{} curl -s -o /dev/null -w "%{http_code}\n" -X POST "$G/v1/topics" \
  -d '{"name":"one-{}","partitions":1,"replication_factor":3}' | sort | uniq -c | sed 's/^/answers: /'
echo "1,000 creates took $(echo "$(date +%s.%N) - $start" | bc | cut -c1-5) s"
sleep 5
t0=$(storageTicks)
sleep 30
echo "the storage nodes' CPU over the next 30 s: $(echo "($(storageTicks) - $t0) / $HZ / 30 * 100" | bc -l | cut -c1-5)% of a core, the three together"

echo "== 2. four topics of 500 partitions, one deleted ($(load))"
for t in ta tb tc td; do echo "create $t: $(create $t 500)"; done
sleep 20
echo "before: $(leaders ta tb tc)"
m0=$(moves) w0=$(notAnswering)
echo "delete td: $(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$G/v1/topics/td")"
sleep 15
echo "15 s after: $(leaders ta tb tc)"
echo "leaderships moved: $(($(moves) - m0)); storage nodes reporting leaders not answering: $(($(notAnswering) - w0))"

echo "== 3. one topic of $BIG partitions ($(load))"
m0=$(moves) w0=$(notAnswering)
echo "create big: $(create big "$BIG")"
sleep 60
echo "60 s after: $(leaders big)"
echo "and the others: $(leaders ta tb tc)"
echo "a produce to another topic: $(curl -s -m 20 -o /dev/null -w '%{http_code} in %{time_total} s' -X POST "$G/v1/topics/ta/records" \
  -d '{"records":[{"value":"aGVsbG8="}]}')"
echo "leaderships moved: $(($(moves) - m0)); storage nodes reporting leaders not answering: $(($(notAnswering) - w0))"
start=$(date +%s.%N)
echo "delete big: $(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$G/v1/topics/big")"
for _ in $(seq 120); do
  # (find complains of directories removed while it walks)
  left=$({ find "$WORK/data" -maxdepth 4 -type d -name 'big-*' 2>/dev/null || true; } | wc -l)
  [[ $left == 0 ]] && break
  sleep 1
done
echo "its directories left after $(echo "$(date +%s.%N) - $start" | bc | cut -c1-5) s: $left"
echo "the others after: $(leaders ta tb tc)"
