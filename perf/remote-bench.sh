#!/usr/bin/env bash
# The remote benchmark of issue 18 (BENCHMARKS.md): two OS processes on
# loopback, a receiver exposing a counting actor and a sender that
#   1. tells N messages and asks for the count (throughput until the
#      receiver's actor has handled all N), after a warm-up; once as one
#      burst and once waiting for the count every WINDOW tells (flow control
#      by hand: delivery is at most once, and a burst can outrun the
#      receiving NATS client, which drops what it cannot buffer; the
#      "lost" column counts them);
#   2. runs M sequential asks (round trip p50/p99/p99.9), after a warm-up;
# with proscenium-remote over a nats-server (remote/examples/bench_node.rs)
# and with ractor_cluster's direct node-to-node TCP (perf/remote-peers/).
# The message is the same 40-byte struct { id: u64, payload: [u8; 32] }.
#
#   perf/remote-bench.sh                   # N=200000 tells, M=20000 asks, WINDOW=10000
#   N=1000000 M=50000 perf/remote-bench.sh
#
# Run it on a quiet machine: the figures are wall-clock. Raw output goes to
# perf/out/ (gitignored). Needs nats-server (apt-get install nats-server).
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-200000}
M=${M:-20000}
WINDOW=${WINDOW:-10000}
OUT=perf/out
mkdir -p "$OUT"

NATS=${NATS_SERVER:-$(command -v nats-server || true)}
[ -z "$NATS" ] && [ -x /usr/sbin/nats-server ] && NATS=/usr/sbin/nats-server
if [ -z "$NATS" ] || [ ! -x "$NATS" ]; then
    echo "nats-server is needed (apt-get install nats-server, or NATS_SERVER=/path/to/it)" >&2
    exit 1
fi

echo "== building (release)"
cargo build --release -q -p proscenium-remote --example bench_node
cargo build --release -q --manifest-path perf/remote-peers/Cargo.toml

recv_pid=
nats_pid=
# stop PID: SIGTERM (the receivers leave in order), then wait for it.
stop() {
    if [ -n "$1" ] && kill -0 "$1" 2>/dev/null; then
        kill -TERM "$1" 2>/dev/null || true
        wait "$1" 2>/dev/null || true
    fi
}
trap 'stop "$recv_pid"; stop "$nats_pid"' EXIT

# wait_for FILE TEXT: waits until FILE contains TEXT (at most 30 s).
wait_for() {
    for _ in $(seq 300); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "'$2' never showed up in $1:" >&2
    cat "$1" >&2
    exit 1
}

# A loopback port nobody listens on.
free_port() {
    local p
    while :; do
        p=$((20000 + RANDOM % 40000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return
        fi
    done
}

# run NAME RECEIVER-COMMAND -- SENDER-COMMAND: starts the receiver, waits
# for its "ready", runs the sender, stops the receiver, keeps the RESULT.
run() {
    local name=$1
    shift
    local recv=() send=()
    while [ "$1" != -- ]; do recv+=("$1"); shift; done
    shift
    send=("$@")
    "${recv[@]}" >"$OUT/remote-bench.$name.receiver.txt" 2>&1 &
    recv_pid=$!
    wait_for "$OUT/remote-bench.$name.receiver.txt" ready
    "${send[@]}" 2>&1 | tee "$OUT/remote-bench.$name.sender.txt"
    stop "$recv_pid"
    recv_pid=
    local r
    r=$(grep '^RESULT' "$OUT/remote-bench.$name.sender.txt") || {
        echo "$name: no result" >&2
        exit 1
    }
    # RESULT tell_msgs_per_s=.. ask_p50_us=.. ask_p99_us=.. ask_p999_us=.. lost=..
    echo "$r" | awk -v n="$name" '{
        for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        printf "%-28s %12s %10s %10s %10s %6s\n", n, v["tell_msgs_per_s"], v["ask_p50_us"],
            v["ask_p99_us"], v["ask_p999_us"], v["lost"]
    }' >>"$OUT/remote-bench.table.txt"
}

: >"$OUT/remote-bench.table.txt"

echo "== nats-server on loopback"
"$NATS" -a 127.0.0.1 -p -1 >"$OUT/remote-bench.nats.txt" 2>&1 &
nats_pid=$!
wait_for "$OUT/remote-bench.nats.txt" "Listening for client connections"
nats_port=$(sed -n 's/.*Listening for client connections on 127\.0\.0\.1:\([0-9]*\).*/\1/p' \
    "$OUT/remote-bench.nats.txt" | head -1)
url="nats://127.0.0.1:$nats_port"
echo "$NATS ($("$NATS" --version)) on $url"

bench=target/release/examples/bench_node
echo "== proscenium-remote over NATS: N=$N tells (a burst), M=$M asks"
run proscenium-remote "$bench" receiver "$url" -- "$bench" sender "$url" "$N" "$M"
echo "== proscenium-remote over NATS: N=$N tells (window $WINDOW), M=$M asks"
run "proscenium-remote-w$WINDOW" "$bench" receiver "$url" -- "$bench" sender "$url" "$N" "$M" "$WINDOW"
stop "$nats_pid"
nats_pid=

peer=perf/remote-peers/target/release/ractor_bench
echo "== ractor_cluster (direct TCP): N=$N tells (a burst), M=$M asks"
port=$(free_port)
run ractor_cluster "$peer" receiver "$port" -- "$peer" sender "$port" "$N" "$M"
echo "== ractor_cluster (direct TCP): N=$N tells (window $WINDOW), M=$M asks"
port=$(free_port)
run "ractor_cluster-w$WINDOW" "$peer" receiver "$port" -- "$peer" sender "$port" "$N" "$M" "$WINDOW"

echo
printf '%-28s %12s %10s %10s %10s %6s\n' "" "tell msgs/s" "ask p50" "p99" "p99.9" lost
printf '%-28s %12s %10s %10s %10s %6s\n' "" "" "µs" "µs" "µs" ""
cat "$OUT/remote-bench.table.txt"
