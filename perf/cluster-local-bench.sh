#!/usr/bin/env bash
# Cluster sharding's local routing path (BENCHMARKS.md, "Cluster sharding",
# "The local path"): tells and asks to an entity that the sending node
# runs, through its region, against a plain local ActorRef in the same
# process, with cluster/examples/cluster_bench_node.rs as a one-node
# cluster on a fresh JetStream server each round. With BASE set, the same
# binary built from that commit runs in every round too, alternating with
# this tree's (the order swapped each round), so that the two are compared
# on the same machine at the same time.
#
#   BASE=985d5fb ROUNDS=5 nice -n 10 perf/cluster-local-bench.sh
#   BASE_BIN=/path/to/cluster_bench_node ROUNDS=5 perf/cluster-local-bench.sh
#
# A round per binary: `warm entity-local N M WINDOW`, then `warm actor N M
# WINDOW` (the node's `warm` command: after a warm-up, N tells with the
# count asked every WINDOW, the time running until all are handled, then M
# sequential asks). Raw output in perf/out/cluster-local-bench/
# (gitignored). Needs nats-server 2.11 or later.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-5}
N=${N:-300000}
M=${M:-20000}
WINDOW=${WINDOW:-10000}
BASE=${BASE:-}
OUT=perf/out/cluster-local-bench
mkdir -p "$OUT"

NATS=${NATS_SERVER:-$(command -v nats-server || true)}
if [ -z "$NATS" ] || [ ! -x "$NATS" ]; then
    echo "nats-server 2.11 or later is needed (NATS_SERVER=/path/to/it)" >&2
    exit 1
fi

echo "== building (release)"
cargo build --release -q -p proscenium-cluster --example cluster_bench_node
declare -A bin=([new]="${CARGO_TARGET_DIR:-target}/release/examples/cluster_bench_node")
if [ -n "${BASE_BIN:-}" ]; then
    # A baseline built already (BASE names its commit in the results).
    bin[base]=$BASE_BIN
    BASE=${BASE:-given}
elif [ -n "$BASE" ]; then
    echo "== building the baseline $BASE (release, its own target dir)"
    rm -rf "$OUT/base-src"
    mkdir -p "$OUT/base-src"
    git archive "$BASE" | tar -x -C "$OUT/base-src"
    CARGO_TARGET_DIR="$PWD/$OUT/base-target" cargo build --release -q \
        --manifest-path "$OUT/base-src/Cargo.toml" -p proscenium-cluster \
        --example cluster_bench_node
    bin[base]=$OUT/base-target/release/examples/cluster_bench_node
fi

nats_pid=
stop_nats() {
    if [ -n "$nats_pid" ]; then
        kill "$nats_pid" 2>/dev/null || true
        wait "$nats_pid" 2>/dev/null || true
        nats_pid=
    fi
}
trap stop_nats EXIT

# run LABEL ROUND: one node on a fresh server, both targets; the answers
# appended to $OUT/results.txt as `LABEL ROUND <warm line>`.
run() {
    local label=$1 round=$2 port=$((4300 + RANDOM % 1000))
    local store
    store=$(mktemp -d)
    "$NATS" -js -sd "$store" -a 127.0.0.1 -p "$port" >"$OUT/nats.log" 2>&1 &
    nats_pid=$!
    for _ in $(seq 100); do
        (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
        sleep 0.05
    done
    printf 'warm entity-local %s %s %s\nwarm actor %s %s %s\nexit\n' \
        "$N" "$M" "$WINDOW" "$N" "$M" "$WINDOW" |
        "${bin[$label]}" node "nats://127.0.0.1:$port" a >"$OUT/$label-$round.out" \
            2>"$OUT/$label-$round.err"
    grep '^warm' "$OUT/$label-$round.out" | sed "s/^/$label $round /" >>"$OUT/results.txt"
    if grep -q '^error' "$OUT/$label-$round.out"; then
        grep '^error' "$OUT/$label-$round.out" >&2
        exit 1
    fi
    stop_nats
    rm -rf "$store"
}

: >"$OUT/results.txt"
labels=(new)
[ -n "$BASE" ] && labels=(base new)
for round in $(seq "$ROUNDS"); do
    if [ $((round % 2)) -eq 0 ]; then
        order=("${labels[@]}")
    else
        order=()
        for ((i = ${#labels[@]} - 1; i >= 0; i--)); do order+=("${labels[i]}"); done
    fi
    for label in "${order[@]}"; do
        echo "== round $round: $label"
        run "$label" "$round"
    done
done

echo "== results (per round; medians below)"
cat "$OUT/results.txt"
field() { tr ' ' '\n' | sed -n "s/^$1=//p"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for label in "${labels[@]}"; do
    for target in entity-local actor; do
        lines=$(grep "^$label .* target=$target " "$OUT/results.txt")
        printf '%-5s %-13s tells/s %10s  ask p50 %7s us  p99 %7s us\n' "$label" "$target" \
            "$(echo "$lines" | field tell_msgs_per_s | median)" \
            "$(echo "$lines" | field ask_p50_us | median)" \
            "$(echo "$lines" | field ask_p99_us | median)"
    done
done
# Per round: the entity's tells over the actor's (the same process, the
# same minute), then their median.
for label in "${labels[@]}"; do
    ratios=$(for round in $(seq "$ROUNDS"); do
        e=$(grep "^$label $round .* target=entity-local " "$OUT/results.txt" | field tell_msgs_per_s)
        a=$(grep "^$label $round .* target=actor " "$OUT/results.txt" | field tell_msgs_per_s)
        awk -v e="$e" -v a="$a" 'BEGIN { printf "%.3f\n", e / a }'
    done)
    echo "$label: entity / actor tells per round: $(echo "$ratios" | tr '\n' ' ')median $(echo "$ratios" | median)"
done
if [ -n "$BASE" ]; then
    ratios=$(for round in $(seq "$ROUNDS"); do
        b=$(grep "^base $round .* target=entity-local " "$OUT/results.txt" | field tell_msgs_per_s)
        n=$(grep "^new $round .* target=entity-local " "$OUT/results.txt" | field tell_msgs_per_s)
        awk -v b="$b" -v n="$n" 'BEGIN { printf "%.3f\n", n / b }'
    done)
    echo "entity-local tells, new / base per round: $(echo "$ratios" | tr '\n' ' ')median $(echo "$ratios" | median)"
fi
