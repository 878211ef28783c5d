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
#   REMOTE=1 BASE=985d5fb ROUNDS=3 perf/cluster-local-bench.sh
#   BASE_BIN=/path/to/cluster_bench_node ROUNDS=5 perf/cluster-local-bench.sh
#
# A round per binary: `warm entity-local N M WINDOW`, then `warm actor N M
# WINDOW` (the node's `warm` command: after a warm-up, N tells with the
# count asked every WINDOW, the time running until all are handled, then M
# sequential asks). With REMOTE=1, a second node b runs too, and a also
# measures `entity-remote` (an entity b runs: a's region forwards to b's)
# against `peer:b` (b's plain sink through a RemoteRef). Raw output in perf/out/cluster-local-bench/
# (gitignored). Needs nats-server 2.11 or later.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-5}
N=${N:-300000}
M=${M:-20000}
WINDOW=${WINDOW:-10000}
BASE=${BASE:-}
REMOTE=${REMOTE:-}
targets=(entity-local actor)
[ -n "$REMOTE" ] && targets+=(entity-remote peer:b)
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
b_pid=
stop_nats() {
    if [ -n "$b_pid" ]; then
        kill "$b_pid" 2>/dev/null || true
        wait "$b_pid" 2>/dev/null || true
        b_pid=
    fi
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
    if [ -n "$REMOTE" ]; then
        # b: its stdin held open (fd 9) until a is done.
        rm -f "$OUT/b.in"
        mkfifo "$OUT/b.in"
        "${bin[$label]}" node "nats://127.0.0.1:$port" b <"$OUT/b.in" \
            >"$OUT/$label-$round-b.out" 2>&1 &
        b_pid=$!
        exec 9>"$OUT/b.in"
        for _ in $(seq 600); do
            grep -q '^ready' "$OUT/$label-$round-b.out" 2>/dev/null && break
            sleep 0.05
        done
    fi
    for t in "${targets[@]}"; do
        printf 'warm %s %s %s %s\n' "$t" "$N" "$M" "$WINDOW"
    done | { cat; echo exit; } |
        "${bin[$label]}" node "nats://127.0.0.1:$port" a >"$OUT/$label-$round.out" \
            2>"$OUT/$label-$round.err"
    if [ -n "$REMOTE" ]; then
        echo exit >&9
        exec 9>&-
        wait "$b_pid" 2>/dev/null || true
        b_pid=
    fi
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
    for target in "${targets[@]}"; do
        lines=$(grep "^$label .* target=$target " "$OUT/results.txt")
        printf '%-5s %-13s tells/s %10s  ask p50 %7s us  p99 %7s us\n' "$label" "$target" \
            "$(echo "$lines" | field tell_msgs_per_s | median)" \
            "$(echo "$lines" | field ask_p50_us | median)" \
            "$(echo "$lines" | field ask_p99_us | median)"
    done
done
# Per round: the entity's tells over its baseline's (the same process, the
# same minute), then their median; and the new over the base.
ratio() { # LABEL_A TARGET_A LABEL_B TARGET_B: per round A / B, then the median
    local r
    r=$(for round in $(seq "$ROUNDS"); do
        x=$(grep "^$1 $round .* target=$2 " "$OUT/results.txt" | field tell_msgs_per_s)
        y=$(grep "^$3 $round .* target=$4 " "$OUT/results.txt" | field tell_msgs_per_s)
        awk -v x="$x" -v y="$y" 'BEGIN { printf "%.3f\n", x / y }'
    done)
    echo "$(echo "$r" | tr '\n' ' ')median $(echo "$r" | median)"
}
for label in "${labels[@]}"; do
    echo "$label: entity-local / actor tells per round: $(ratio "$label" entity-local "$label" actor)"
    if [ -n "$REMOTE" ]; then
        echo "$label: entity-remote / peer:b tells per round: $(ratio "$label" entity-remote "$label" peer:b)"
    fi
done
if [ -n "$BASE" ]; then
    for t in "${targets[@]}"; do
        echo "$t tells, new / base per round: $(ratio new "$t" base "$t")"
    done
fi
