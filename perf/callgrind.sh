#!/usr/bin/env bash
# Instructions per message for a fixed workload, counted by
# `valgrind --tool=callgrind`: a number that, unlike wall-clock time, is
# stable run to run on a noisy or shared machine.
#
#   perf/callgrind.sh [N1] [N2] [workers]
#
# Runs scheduler/examples/ping_pong.rs (two actor-like runnables exchanging
# N messages) twice, with N1 and N2 messages (defaults 100000 and 200000) on
# `workers` workers (default 1: one worker is deterministic; with more the
# count depends on how often workers park), and prints
#
#   instructions per message = (Ir(N2) - Ir(N1)) / (N2 - N1)
#
# The difference cancels start-up and shutdown (thread spawn, pinning,
# quiesce). Raw callgrind outputs are kept in perf/out/ (gitignored); read
# them with `callgrind_annotate perf/out/callgrind.ping_pong.<N>.out` (or
# kcachegrind) to see which functions the instructions go to.
set -euo pipefail

cd "$(dirname "$0")/.."
# OUT_DIR and EXE (a prebuilt ping_pong, no build): as perf/callgrind-engine.sh.
OUT="${OUT_DIR:-perf/out}"
mkdir -p "$OUT"
N1="${1:-100000}"
N2="${2:-200000}"
W="${3:-1}"
TARGET="${CARGO_TARGET_DIR:-target}"

command -v valgrind >/dev/null || { echo "valgrind not found" >&2; exit 1; }
if [ -z "${EXE:-}" ]; then
    CARGO_TARGET_DIR="$TARGET" cargo build --release -p proscenium-scheduler --example ping_pong >&2
    EXE="$TARGET/release/examples/ping_pong"
fi

total_ir() {
    local n="$1" out="$OUT/callgrind.ping_pong.$1.out"
    valgrind --tool=callgrind --callgrind-out-file="$out" "$EXE" "$n" "$W" >&2 2>"$OUT/callgrind.ping_pong.$n.log"
    # The "summary:" (or "totals:") line holds the total Ir.
    grep -E '^(summary|totals):' "$out" | head -1 | awk '{print $2}'
}

IR1=$(total_ir "$N1")
IR2=$(total_ir "$N2")
echo "Ir($N1) = $IR1"
echo "Ir($N2) = $IR2"
awk -v a="$IR1" -v b="$IR2" -v n1="$N1" -v n2="$N2" -v w="$W" \
    'BEGIN { printf "instructions per message (ping_pong, %d worker(s)): %.1f\n", w, (b - a) / (n2 - n1) }'
