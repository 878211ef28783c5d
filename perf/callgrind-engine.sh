#!/usr/bin/env bash
# Instructions per operation of an engine example, counted by callgrind:
#
#   perf/callgrind-engine.sh [example] [N1] [N2]
#
# Runs `engine/examples/<example>.rs` (default actor_ping_pong: one round
# trip = two messages) with N1 and N2 as its only argument (defaults 100000
# and 200000) under `valgrind --tool=callgrind` and prints
# (Ir(N2) - Ir(N1)) / (N2 - N1): instructions per round trip for
# actor_ping_pong, per ask for actor_ask, and the same difference for the
# locked instructions executed in the example's binary (locked RMWs, xchg,
# fences: perf/callgrind_atomics.py), which Ir counts like any other
# instruction although each costs tens of cycles. The engine's examples run
# on one worker, unpinned. Raw outputs in perf/out/callgrind.<example>.<N>.out
# (OUT_DIR=dir: there instead). EXE=path runs that binary of the example
# instead of building it (another commit's build, copied away: A/B runs).
set -euo pipefail

cd "$(dirname "$0")/.."
OUT="${OUT_DIR:-perf/out}"
mkdir -p "$OUT"
EX="${1:-actor_ping_pong}"
N1="${2:-100000}"
N2="${3:-200000}"
TARGET="${CARGO_TARGET_DIR:-target}"

command -v valgrind >/dev/null || { echo "valgrind not found" >&2; exit 1; }
if [ -z "${EXE:-}" ]; then
    CARGO_TARGET_DIR="$TARGET" cargo build --release -p proscenium --example "$EX" >&2
    EXE="$TARGET/release/examples/$EX"
fi

total_ir() {
    local n="$1" out="$OUT/callgrind.$EX.$1.out"
    valgrind --tool=callgrind --dump-instr=yes --compress-pos=no --compress-strings=no \
        --demangle=no --callgrind-out-file="$out" "$EXE" "$n" >&2 2>"$OUT/callgrind.$EX.$n.log"
    python3 perf/callgrind_atomics.py "$EXE" "$out" >"$OUT/atomics.$EX.$n.txt"
    grep -E '^(summary|totals):' "$out" | head -1 | awk '{print $2}'
}

IR1=$(total_ir "$N1")
IR2=$(total_ir "$N2")
echo "Ir($N1) = $IR1"
echo "Ir($N2) = $IR2"
awk -v a="$IR1" -v b="$IR2" -v n1="$N1" -v n2="$N2" -v ex="$EX" \
    'BEGIN { printf "instructions per operation (%s, 1 worker): %.1f\n", ex, (b - a) / (n2 - n1) }'
awk -v n1="$N1" -v n2="$N2" '
    FNR == NR { a[$1 " " $2] = $3; next }
    { k = $1 " " $2; d = ($3 - a[k]) / (n2 - n1); t += d; if (d >= 0.005) printf "  %-14s %.2f per operation\n", k, d }
    END { printf "locked instructions per operation: %.2f\n", t }
' <(sed 's/^\([a-z]*\) \([0-9]*\)$/\1 - \2/' "$OUT/atomics.$EX.$N1.txt") \
  <(sed 's/^\([a-z]*\) \([0-9]*\)$/\1 - \2/' "$OUT/atomics.$EX.$N2.txt")
