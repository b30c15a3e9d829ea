# Sourced by the load scripts that run their workload against a fresh
# `skein dev` cluster of their own (idle-cpu.sh, profile.sh).
#
# start_dev [NAME=VALUE...]: starts `$BIN/skein dev` in a new temporary
# directory, $WORK (data in $WORK/data, its cluster.json included; log in
# $WORK/dev.log), with the gateway on 127.0.0.1:$GRPC_PORT (gRPC) and
# 127.0.0.1:$REST_PORT (REST); the arguments are extra environment for it
# (SKEIN_DEBUG_ADDR=..., for instance). It returns once the gateway is ready
# and cluster.json is written, and exits the script with the log's tail if
# that takes over a minute. On exit the cluster is stopped and $WORK
# removed. Sets WORK and DEV (the pid of skein dev).
start_dev() {
  WORK=$(mktemp -d)
  env "$@" "$BIN/skein" dev --data-dir "$WORK/data" --gateway-grpc-addr "127.0.0.1:$GRPC_PORT" \
    --gateway-http-addr "127.0.0.1:$REST_PORT" >"$WORK/dev.log" 2>&1 &
  DEV=$!
  trap 'kill $DEV 2>/dev/null; wait $DEV 2>/dev/null; rm -rf "$WORK"' EXIT
  for _ in $(seq 120); do
    curl -sf "http://127.0.0.1:$REST_PORT/readyz" >/dev/null 2>&1 && [[ -s $WORK/data/cluster.json ]] && return 0
    sleep 0.5
  done
  echo "the cluster did not become ready:" >&2
  tail -20 "$WORK/dev.log" >&2
  exit 1
}
