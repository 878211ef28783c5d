#!/usr/bin/env bash
# Before/after of the mailbox benchmark (benches/benches/mailbox.rs), two
# binaries alternating round by round in one session:
#
#   perf/mailbox-ab.sh BEFORE_BIN AFTER_BIN [ROUNDS] [FILTER]
#
# Make each binary at its commit with
#   cargo bench -p proscenium-benches --bench mailbox --no-run
# and copy the printed executable (target/release/deps/mailbox-<hash>) away
# before building the other. ROUNDS defaults to 5, FILTER (a criterion
# regex) to 'mailbox/'. Each run uses criterion's settings from the bench
# (sample size 20, 3 s measurement). Prints, per benchmark, the median over
# the rounds of criterion's point estimate for each binary, and their ratio.
# Raw lines in perf/out/mailbox-ab.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
BEFORE="$1"; AFTER="$2"; ROUNDS="${3:-5}"; FILTER="${4:-mailbox/}"
mkdir -p perf/out
RAW=perf/out/mailbox-ab.txt
: >"$RAW"
for r in $(seq 1 "$ROUNDS"); do
  for which in before after; do
    bin=$BEFORE; [ "$which" = after ] && bin=$AFTER
    "$bin" --bench --noplot "$FILTER" 2>&1 |
      awk -v w="$which" -v r="$r" '/^mailbox\//{n=$1} /^ +time:/ && !/%/{print r, w, n, $4, $5}' >>"$RAW"
  done
done
python3 - "$RAW" <<'PY'
import collections, statistics, sys
scale = {"ps": 1e-3, "ns": 1.0, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9}
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, w, name, x, unit = line.split()
    v[(name, w)].append(float(x) * scale[unit])
def show(ns):
    for u, f in (("ms", 1e6), ("µs", 1e3), ("ns", 1.0)):
        if ns >= f:
            return f"{ns / f:.3g} {u}"
    return f"{ns:.3g} ns"
for name in sorted({n for n, _ in v}):
    b, a = v.get((name, "before"), []), v.get((name, "after"), [])
    if b and a:
        mb, ma = statistics.median(b), statistics.median(a)
        print(f"{name:48} before {show(mb):>10}  after {show(ma):>10}  after/before {ma / mb:.2f}  (n={len(b)},{len(a)})")
PY
