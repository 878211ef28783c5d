#!/usr/bin/env bash
# Profiles a benchmark (or any program) with `perf record` on a software
# clock event and turns the samples into a flamegraph with inferno.
#
#   perf/flamegraph.sh --bench <bench-target> [criterion filter] [seconds]
#       builds `cargo bench -p proscenium-benches --bench <bench-target>`,
#       runs the matching benchmarks for [seconds] (default 5) each with
#       criterion's --profile-time (no analysis, just the workload) and
#       profiles that.
#   perf/flamegraph.sh <program> [args...]
#       profiles any program, e.g. target/release/examples/ping_pong 10000000 2
#
# Output in perf/out/ (gitignored): <name>.perf.data (raw samples),
# <name>.folded (collapsed stacks) and <name>.svg (the flamegraph; open it
# in a browser, click to zoom).
#
# The event is `cpu-clock` (a software timer), because this machine (a VM)
# exposes no hardware counters; `-e cycles` would fail here. Call stacks are
# unwound from DWARF (the release and bench profiles keep `debug = 1`).
# Needs `perf` (linux-tools) and, if missing, installs inferno with
# `cargo install inferno` (which provides inferno-collapse-perf and
# inferno-flamegraph). perf may need `sysctl kernel.perf_event_paranoid=1`
# (or root) to sample user space.
set -euo pipefail

cd "$(dirname "$0")/.."
OUT=perf/out
mkdir -p "$OUT"
FREQ="${PERF_FREQ:-997}"

if ! command -v perf >/dev/null; then
    echo "perf not found: install linux-tools (perf) first" >&2
    exit 1
fi
if ! command -v inferno-flamegraph >/dev/null || ! command -v inferno-collapse-perf >/dev/null; then
    echo "inferno not found: installing it with 'cargo install inferno'" >&2
    cargo install inferno
fi

if [[ "${1:-}" == "--bench" ]]; then
    bench="${2:?usage: perf/flamegraph.sh --bench <bench-target> [filter] [seconds]}"
    filter="${3:-}"
    seconds="${4:-5}"
    exe=$(CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}" cargo bench -p proscenium-benches \
            --bench "$bench" --no-run --message-format=json 2>/dev/null |
          sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
    [[ -x "$exe" ]] || { echo "could not build bench $bench" >&2; exit 1; }
    name="${bench}${filter:+-$(printf %s "$filter" | tr -c 'A-Za-z0-9_' '_')}"
    cmd=("$exe" --bench --profile-time "$seconds" ${filter:+"$filter"})
else
    [[ $# -ge 1 ]] || { sed -n '2,20p' "$0"; exit 1; }
    name="$(basename "$1")"
    cmd=("$@")
fi

echo "profiling: ${cmd[*]}" >&2
perf record -e cpu-clock -F "$FREQ" --call-graph dwarf,16384 \
    -o "$OUT/$name.perf.data" -- "${cmd[@]}"
perf script -i "$OUT/$name.perf.data" 2>/dev/null | inferno-collapse-perf > "$OUT/$name.folded"
inferno-flamegraph --title "$name (cpu-clock)" < "$OUT/$name.folded" > "$OUT/$name.svg"
echo "flamegraph: $OUT/$name.svg  (raw: $OUT/$name.perf.data, $OUT/$name.folded)" >&2
