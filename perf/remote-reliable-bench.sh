#!/usr/bin/env bash
# Issue 25's A/B benchmark (BENCHMARKS.md, "Remote: reliable delivery and
# signatures"): remote/examples/bench_node.rs, two processes on one
# loopback nats-server, in configurations run alternately, ROUNDS times
# each, medians reported:
#
#   plain          at-most-once tells (flow control by hand: the count
#                  every WINDOW tells, as perf/remote-bench.sh), asks
#   reliable       the tells through a ReliableRef (send + confirmed; no
#                  window by hand), the same asks
#   plain+key      plain, every message signed (cluster key)
#   reliable+key   reliable, signed
#   base           plain, built from BASE (a commit before issue 25), if set;
#                  base-reliable, base-plain+key, base-reliable+key (with
#                  CONFIGS): the other configurations on BASE
#   jetstream      with JETSTREAM=1: the other candidate, NATS JetStream
#                  (perf/jetstream-peer: a file-backed stream, publish acks,
#                  a pull consumer's cumulative acks; "ask" is a publish and
#                  its acknowledgement)
#
# The server runs with JetStream enabled (-js) for every configuration.
#
#   perf/remote-reliable-bench.sh                  # N=200000 M=20000 ROUNDS=5
#   BASE=039bf2e JETSTREAM=1 perf/remote-reliable-bench.sh
#   BASE=039bf2e CONFIGS="plain base" ROUNDS=9 perf/remote-reliable-bench.sh
#
# Raw output in perf/out/ (gitignored). Needs nats-server.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-200000}
M=${M:-20000}
WINDOW=${WINDOW:-10000}
ROUNDS=${ROUNDS:-5}
BASE=${BASE:-}
JETSTREAM=${JETSTREAM:-}
KEY="benchmark cluster key, 32 bytes or more"
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
bench=target/release/examples/bench_node
base_bench=
if [ -n "$BASE" ]; then
    echo "== building the baseline $BASE (release, its own target dir)"
    rm -rf "$OUT/base-src"
    mkdir -p "$OUT/base-src"
    git archive "$BASE" | tar -x -C "$OUT/base-src"
    CARGO_TARGET_DIR="$PWD/$OUT/base-target" cargo build --release -q \
        --manifest-path "$OUT/base-src/Cargo.toml" -p proscenium-remote --example bench_node
    base_bench=$OUT/base-target/release/examples/bench_node
fi

js_bench=
if [ -n "$JETSTREAM" ]; then
    echo "== building the JetStream peer (release)"
    cargo build --release -q --manifest-path perf/jetstream-peer/Cargo.toml
    js_bench=perf/jetstream-peer/target/release/jetstream_bench
fi

recv_pid=
nats_pid=
stop() {
    if [ -n "$1" ] && kill -0 "$1" 2>/dev/null; then
        kill -TERM "$1" 2>/dev/null || true
        wait "$1" 2>/dev/null || true
    fi
}
trap 'stop "$recv_pid"; stop "$nats_pid"' EXIT

wait_for() {
    for _ in $(seq 300); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "'$2' never showed up in $1:" >&2
    cat "$1" >&2
    exit 1
}

rm -rf "$OUT/reliable-bench.js"
"$NATS" -a 127.0.0.1 -p -1 -js -sd "$OUT/reliable-bench.js" >"$OUT/reliable-bench.nats.txt" 2>&1 &
nats_pid=$!
wait_for "$OUT/reliable-bench.nats.txt" "Listening for client connections"
port=$(sed -n 's/.*Listening for client connections on 127\.0\.0\.1:\([0-9]*\).*/\1/p' \
    "$OUT/reliable-bench.nats.txt" | head -1)
url="nats://127.0.0.1:$port"
echo "$NATS ($("$NATS" --version)) on $url; N=$N M=$M WINDOW=$WINDOW ROUNDS=$ROUNDS"
echo "machine: nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"

: >"$OUT/reliable-bench.results.txt"

# one CONFIG BINARY: a receiver and a sender, one RESULT line recorded.
one() {
    local config=$1 bin=$2 env=() window=$WINDOW
    if [ "$config" = jetstream ]; then
        "$bin" "$url" "$N" "$M" >"$OUT/reliable-bench.$config.sender.txt" 2>&1
        echo "$config $(grep '^RESULT' "$OUT/reliable-bench.$config.sender.txt")" |
            tee -a "$OUT/reliable-bench.results.txt"
        return
    fi
    case $config in
        *key*) env+=("BENCH_CLUSTER_KEY=$KEY") ;;
    esac
    case $config in
        *reliable*) env+=("BENCH_RELIABLE=1"); window=0 ;;
    esac
    env "${env[@]}" "$bin" receiver "$url" >"$OUT/reliable-bench.$config.receiver.txt" 2>&1 &
    recv_pid=$!
    wait_for "$OUT/reliable-bench.$config.receiver.txt" ready
    env "${env[@]}" "$bin" sender "$url" "$N" "$M" "$window" >"$OUT/reliable-bench.$config.sender.txt" 2>&1
    stop "$recv_pid"
    recv_pid=
    local r
    r=$(grep '^RESULT' "$OUT/reliable-bench.$config.sender.txt") || {
        echo "$config: no result" >&2
        cat "$OUT/reliable-bench.$config.sender.txt" >&2
        exit 1
    }
    echo "$config $r" | tee -a "$OUT/reliable-bench.results.txt"
}

configs=(plain reliable plain+key reliable+key)
[ -n "$base_bench" ] && configs+=(base)
[ -n "$js_bench" ] && configs+=(jetstream)
# CONFIGS="plain base": only those (in that order).
if [ -n "${CONFIGS:-}" ]; then read -r -a configs <<<"$CONFIGS"; fi
for round in $(seq "$ROUNDS"); do
    echo "== round $round"
    for c in "${configs[@]}"; do
        case $c in
            base*) one "$c" "$base_bench" ;;
            jetstream) one jetstream "$js_bench" ;;
            *) one "$c" "$bench" ;;
        esac
    done
done

# median CONFIG KEY: the median of KEY's values over CONFIG's rounds.
median() {
    grep "^$1 RESULT" "$OUT/reliable-bench.results.txt" | tr ' ' '\n' | sed -n "s/^$2=//p" |
        sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo
printf '%-14s %14s %12s %12s   (medians of %s rounds)\n' "" "tell msgs/s" "ask p50 µs" "ask p99 µs" "$ROUNDS"
for c in "${configs[@]}"; do
    printf '%-14s %14.0f %12.1f %12.1f\n' "$c" "$(median "$c" tell_msgs_per_s)" \
        "$(median "$c" ask_p50_us)" "$(median "$c" ask_p99_us)"
done
