#!/usr/bin/env bash
# Issue 34's benchmark against tokio peers (BENCHMARKS.md, "axum and
# WebSockets against tokio peers"):
#
#  * an axum Router (`GET /hello` -> "hello, world") served by
#    proscenium-http (`http/examples/axum_hello.rs`, `Http::bind_service` on
#    2 workers) against the same Router on `axum::serve` over a 2-worker
#    tokio runtime (`perf/http-peers/src/bin/axum_hello.rs`): HTTP/1.1 with
#    `wrk -t2 -c64 --latency`, HTTP/2 (h2c, prior knowledge) with `h2load
#    -c 64 -m 10 -t 2` (its p99 from h2load's per-request log);
#  * a WebSocket echo, proscenium-http (`http/examples/ws_echo.rs`, 2
#    workers) against tokio-tungstenite on a 2-worker tokio runtime
#    (`perf/http-peers/src/bin/tungstenite_echo.rs`), driven by the same
#    client (`perf/http-peers/src/bin/ws_load.rs`: 64 connections, one
#    32-byte text message in flight on each, 2 threads); and, to show what
#    the buffers' sizes account for, tokio-tungstenite with proscenium-http's
#    WebSocket settings (a 16 KiB read buffer instead of its default
#    128 KiB, which tungstenite zeroes before each read; no write buffer).
#
# Each round runs every test on both servers, which go first in turn (odd
# rounds proscenium-http first, even rounds the peer). The load generator
# runs on the same cores as the server under test, as perf/http-bench.sh's.
#
#   perf/axum-ws-bench.sh                      # 5 rounds of 10 s
#   ROUNDS=3 DURATION=5 perf/axum-ws-bench.sh
#
# Beside the rates, the server's CPU time (user + system, from
# /proc/PID/stat, from just before the load starts to just after it ends)
# per request or message: the load and the server share the cores with
# whatever else runs, so this is steadier than the rate.
#
# Raw output goes to perf/out/ (gitignored): axum-ws-bench.<round>.<test>.<server>.txt,
# the figures in axum-ws-bench.results.tsv, the machine in
# axum-ws-bench.machine.txt; it prints the per-round figures and the
# medians. Needs wrk, h2load (nghttp2-client), curl and python3.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-64}
OUT=perf/out
mkdir -p "$OUT"
TARGET=${CARGO_TARGET_DIR:-target}
PEERS_TARGET=perf/http-peers/target

for tool in wrk h2load curl python3; do
    command -v "$tool" >/dev/null || { echo "$tool is needed" >&2; exit 1; }
done

echo "== building (release)"
cargo build --release -q -p proscenium-http --features tower,websocket \
    --example axum_hello --example ws_echo
cargo build --release -q --manifest-path perf/http-peers/Cargo.toml --target-dir "$PEERS_TARGET"
EX=$TARGET/release/examples
PEERS=$PEERS_TARGET/release

machine() {
    echo "date: $(date -u +%FT%TZ)"
    echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!perf/out' || echo ' (with changes)')"
    echo "nproc: $(nproc)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "rustc: $(rustc --version)"
    echo "wrk: $(wrk -v 2>&1 | head -1)"
    echo "h2load: $(h2load --version 2>&1 | head -1)"
}
machine | tee "$OUT/axum-ws-bench.machine.txt"
echo "load before: $(cat /proc/loadavg)" | tee -a "$OUT/axum-ws-bench.machine.txt"

pid=
cleanup() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    pid=
}
trap cleanup EXIT

# Waits until the server on port $1 accepts a connection (at most 30 s).
wait_up() {
    for _ in $(seq 300); do
        python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $1), 1)" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "the server on port $1 never answered" >&2
    exit 1
}

# A wrk latency ("566.00us", "4.44ms", "1.02s") in ms.
to_ms() {
    awk -v v="$1" 'BEGIN {
        if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
        else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
        else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.3f", v * 1000 }
        else print v }'
}

RESULTS=$OUT/axum-ws-bench.results.tsv
printf 'round\ttest\tserver\trate\tp50_ms\tp99_ms\tfailed\tcpu_us\n' >"$RESULTS"
TICK=$(getconf CLK_TCK)

# The CPU time of process $1 (user + system), in clock ticks.
ticks() {
    awk '{print $14 + $15}' "/proc/$1/stat"
}

# run ROUND TEST SERVER PORT COMMAND...: starts the server, runs TEST's load
# against it, stops it, appends a line to the results.
run() {
    local round=$1 test=$2 server=$3 port=$4
    shift 4
    local raw=$OUT/axum-ws-bench.$round.$test.$server.txt
    "$@" >"$OUT/axum-ws-bench.$round.$test.$server.server.txt" 2>&1 &
    pid=$!
    wait_up "$port"
    local rate p50 p99 failed count before after
    before=$(ticks "$pid")
    case $test in
    http1)
        wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency "http://127.0.0.1:$port/hello" >"$raw"
        after=$(ticks "$pid")
        count=$(awk '/ requests in / {print $1}' "$raw")
        rate=$(awk '/^Requests\/sec:/ {print $2}' "$raw")
        p50=$(to_ms "$(awk '$1 == "50%" {print $2}' "$raw")")
        p99=$(to_ms "$(awk '$1 == "99%" {print $2}' "$raw")")
        # Non-2xx or socket errors, as wrk reports them.
        failed=$(awk '/Non-2xx/ {n += $NF} /Socket errors/ {gsub(",", ""); n += $4 + $6 + $8 + $10} END {print n + 0}' "$raw")
        ;;
    h2)
        local log=$OUT/axum-ws-bench.h2load.log
        h2load -c "$CONNECTIONS" -m 10 -t 2 -D "$DURATION" --log-file="$log" \
            "http://127.0.0.1:$port/hello" >"$raw"
        after=$(ticks "$pid")
        count=$(awk '/^requests:/ {print $8}' "$raw")
        rate=$(awk '/^finished in/ {print $4}' "$raw")
        failed=$(awk '/^requests:/ {print $10 + $12 + $14}' "$raw")
        # The per-request log: start (µs since the epoch), status, µs to
        # the end of the response.
        read -r p50 p99 < <(python3 - "$log" <<'PY'
import sys
d = sorted(int(line.split('\t')[2]) for line in open(sys.argv[1]) if line.count('\t') == 2)
q = lambda f: d[min(len(d) - 1, int(f * len(d)))] / 1000
print(f"{q(0.5):.3f} {q(0.99):.3f}")
PY
)
        echo "from the log ($(wc -l <"$log") requests): p50 ${p50} ms, p99 ${p99} ms" >>"$raw"
        rm -f "$log"
        ;;
    ws)
        "$PEERS/ws_load" "ws://127.0.0.1:$port/ws" "$CONNECTIONS" "$DURATION" 2 32 1 >"$raw"
        after=$(ticks "$pid")
        count=$(awk '{for (i = 1; i < NF; i++) if ($i == "total") print $(i + 1)}' "$raw")
        rate=$(awk '{for (i = 1; i < NF; i++) if ($i == "messages/s") print $(i + 1)}' "$raw")
        p50=$(awk '{for (i = 1; i < NF; i++) if ($i == "p50_us") printf "%.3f", $(i + 1) / 1000}' "$raw")
        p99=$(awk '{for (i = 1; i < NF; i++) if ($i == "p99_us") printf "%.3f", $(i + 1) / 1000}' "$raw")
        failed=$(awk '{for (i = 1; i < NF; i++) if ($i == "errors") print $(i + 1)}' "$raw")
        ;;
    esac
    cleanup
    local cpu
    cpu=$(awk -v t=$((after - before)) -v hz="$TICK" -v n="$count" 'BEGIN {printf "%.2f", t / hz * 1e6 / n}')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$test" "$server" "$rate" "$p50" "$p99" "$failed" "$cpu" >>"$RESULTS"
    printf '  round %s %-5s %-10s %10.0f /s  p50 %7s ms  p99 %7s ms  failed %s  server CPU %6s µs each  (load %s)\n' \
        "$round" "$test" "$server" "$rate" "$p50" "$p99" "$failed" "$cpu" "$(cut -d' ' -f1 /proc/loadavg)"
}

one() {
    local round=$1 test=$2 server=$3
    case $test/$server in
    http1/proscenium | h2/proscenium) run "$round" "$test" proscenium 18180 "$EX/axum_hello" --port 18180 --workers 2 ;;
    http1/tokio | h2/tokio) run "$round" "$test" tokio 18181 "$PEERS/axum_hello" 18181 2 ;;
    ws/proscenium) run "$round" ws proscenium 18182 "$EX/ws_echo" --port 18182 --workers 2 ;;
    ws/tokio) run "$round" ws tokio 18183 "$PEERS/tungstenite_echo" 18183 2 ;;
    ws/tokio16k) run "$round" ws tokio16k 18184 "$PEERS/tungstenite_echo" 18184 2 16384 ;;
    esac
}

echo "== $ROUNDS rounds, ${DURATION} s a run, $CONNECTIONS connections"
for round in $(seq "$ROUNDS"); do
    if [ $((round % 2)) -eq 1 ]; then order="proscenium tokio"; else order="tokio proscenium"; fi
    for test in http1 h2 ws; do
        servers=$order
        if [ "$test" = ws ]; then
            if [ $((round % 2)) -eq 1 ]; then servers="$order tokio16k"; else servers="tokio16k $order"; fi
        fi
        for server in $servers; do
            one "$round" "$test" "$server"
        done
    done
done
echo "load after: $(cat /proc/loadavg)" | tee -a "$OUT/axum-ws-bench.machine.txt"

python3 - "$RESULTS" <<'PY' | tee "$OUT/axum-ws-bench.table.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter='\t'))
names = {'http1': 'HTTP/1.1 wrk (req/s)', 'h2': 'h2c h2load (req/s)', 'ws': 'WebSocket echo (msg/s)'}
peer = {'http1': 'axum::serve', 'h2': 'axum::serve', 'ws': 'tokio-tungstenite'}
print()
print(f"{'test':<24} {'server':<21} {'per round':<44} {'median':>9} {'p50 ms':>8} {'p99 ms':>8} {'failed':>6} {'CPU µs':>7}")
medians = {}
for test in ('http1', 'h2', 'ws'):
    for server in ('proscenium', 'tokio', 'tokio16k'):
        r = [x for x in rows if x['test'] == test and x['server'] == server]
        if not r:
            continue
        rates = [float(x['rate']) for x in r]
        m = statistics.median(rates)
        p50 = statistics.median(float(x['p50_ms']) for x in r)
        p99 = statistics.median(float(x['p99_ms']) for x in r)
        failed = sum(int(x['failed'] or 0) for x in r)
        cpu = statistics.median(float(x['cpu_us']) for x in r)
        medians[test, server] = (m, p99, cpu)
        label = {'proscenium': 'proscenium-http', 'tokio': peer[test], 'tokio16k': 'tokio-tungstenite 16K'}[server]
        per = ' '.join(f"{v:.0f}" for v in rates)
        print(f"{names[test]:<24} {label:<21} {per:<44} {m:>9.0f} {p50:>8.3f} {p99:>8.3f} {failed:>6} {cpu:>7.2f}")
print()
for test in ('http1', 'h2', 'ws'):
    if (test, 'proscenium') in medians and (test, 'tokio') in medians:
        (a, ap, ac), (b, bp, bc) = medians[test, 'proscenium'], medians[test, 'tokio']
        print(f"{names[test]:<24} proscenium-http / {peer[test]}: rate {a / b:.2f}, p99 {ap / bp:.2f}, server CPU each {ac / bc:.2f}")
    if (test, 'proscenium') in medians and (test, 'tokio16k') in medians:
        (a, ap, ac), (b, bp, bc) = medians[test, 'proscenium'], medians[test, 'tokio16k']
        print(f"{names[test]:<24} proscenium-http / tokio-tungstenite 16K: rate {a / b:.2f}, p99 {ap / bp:.2f}, server CPU each {ac / bc:.2f}")
PY
