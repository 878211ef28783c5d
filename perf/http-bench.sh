#!/usr/bin/env bash
# The HTTP benchmark of issue 15 (BENCHMARKS.md): plaintext hello, keep-alive,
# 64 connections, 2 wrk threads, against proscenium-http (the `server`
# example), hyper 1.x on tokio and actix-web (perf/http-peers/, 2 workers
# each); then the time from `terminate` to `when_terminated` with 1,000 idle
# keep-alive connections (the `terminate_idle` example).
#
#   perf/http-bench.sh              # 10 s per server
#   DURATION=30 perf/http-bench.sh  # longer runs
#
# Run it on a quiet machine: the figures are wall-clock. Raw wrk output goes
# to perf/out/ (gitignored). Needs wrk and curl.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10}
IDLE=${IDLE:-1000}
OUT=perf/out
mkdir -p "$OUT"

for tool in wrk curl; do
    command -v "$tool" >/dev/null || { echo "$tool is needed (apt-get install $tool)" >&2; exit 1; }
done

echo "== building (release)"
cargo build --release -q -p proscenium-http --example server --example terminate_idle
cargo build --release -q --manifest-path perf/http-peers/Cargo.toml
# Where cargo put them: CARGO_TARGET_DIR, when set, holds both builds.
bins=${CARGO_TARGET_DIR:-target}/release
peer_bins=${CARGO_TARGET_DIR:-perf/http-peers/target}/release

pid=
cleanup() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
}
trap cleanup EXIT

# Waits until http://127.0.0.1:$1/hello answers (at most 30 s).
wait_up() {
    for _ in $(seq 300); do
        curl -fs "http://127.0.0.1:$1/hello" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "the server on port $1 never answered" >&2
    exit 1
}

# bench NAME PORT COMMAND...: starts the server, runs wrk, stops it.
bench() {
    local name=$1 port=$2
    shift 2
    "$@" >"$OUT/http-bench.$name.server.txt" 2>&1 &
    pid=$!
    wait_up "$port"
    wrk -t2 -c64 -d"${DURATION}s" --latency "http://127.0.0.1:$port/hello" \
        >"$OUT/http-bench.$name.wrk.txt"
    cleanup
    pid=
    local rps p50 p99
    rps=$(awk '/^Requests\/sec:/ {print $2}' "$OUT/http-bench.$name.wrk.txt")
    p50=$(awk '$1 == "50%" {print $2}' "$OUT/http-bench.$name.wrk.txt")
    p99=$(awk '$1 == "99%" {print $2}' "$OUT/http-bench.$name.wrk.txt")
    printf '%-16s %14s %10s %10s\n' "$name" "$rps" "$p50" "$p99" >>"$OUT/http-bench.table.txt"
}

: >"$OUT/http-bench.table.txt"
echo "== wrk -t2 -c64 -d${DURATION}s --latency http://127.0.0.1:PORT/hello"
bench proscenium-http 18080 "$bins/examples/server" --port 18080
bench hyper 18081 "$peer_bins/hyper_hello" 18081
bench actix-web 18082 "$peer_bins/actix_hello" 18082
printf '%-16s %14s %10s %10s\n' server requests/s p50 p99
cat "$OUT/http-bench.table.txt"

echo
echo "== terminate -> when_terminated, $IDLE idle keep-alive connections"
"$bins/examples/terminate_idle" "$IDLE"
