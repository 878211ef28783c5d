#!/usr/bin/env bash
# Per-core scaling (issue 27, docs/decisions/0024-per-core-scaling.md):
#
# 1. pairs: independent ping-pong pairs of actors (benches/benches/pairs.rs)
#    at 1, 2, 4, ... workers up to the cores present, each run under taskset
#    to as many cores, proscenium beside actix (one arbiter per core; set
#    PEERS to add ractor and kameo), each sample a process of its own;
#    prints the median messages/s, the speed-up over one worker and
#    proscenium's ratio to actix.
# 2. http: plaintext `GET /hello`, keep-alive, the server on the first half
#    of the cores with as many workers, wrk on the other half (-t = half),
#    at 32 and 256 connections: proscenium-http (the `server` example),
#    hyper on tokio and actix-web (perf/http-peers/); requests/s, p50, p99.
#
#   perf/scaling.sh                 # both, building what is needed
#   ONLY=pairs perf/scaling.sh      # or ONLY=http
#   BIN=dir perf/scaling.sh         # prebuilt binaries (see below), no cargo
#
# BIN holds `pairs` (the bench binary), `server`, `hyper_hello`,
# `actix_hello`, and optionally `pairs.<label>` / `server.<label>` for more
# builds to alternate with (A/B: every label runs at every step, in turn).
# The machine this measures must be quiet; figures are wall-clock. Raw
# output goes to $OUT_DIR (default perf/out/).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT_DIR=${OUT_DIR:-perf/out}
PEERS=${PEERS:-actix}
ROUNDS=${ROUNDS:-5000}
NPAIRS=${NPAIRS:-1000}
REPS=${REPS:-3}
DURATION=${DURATION:-8}
CONNS=${CONNS:-"32 256"}
WRK=${WRK:-wrk}
ONLY=${ONLY:-all}
mkdir -p "$OUT_DIR"
cores=$(nproc)

if [ -z "${BIN:-}" ]; then
    BIN=perf/out/scaling-bin
    mkdir -p "$BIN"
    echo "== building (release)"
    if [ "$ONLY" != http ]; then
        exe=$(cargo bench -p proscenium-benches --bench pairs --no-run --message-format=json 2>/dev/null |
            sed -n 's/.*"executable":"\([^"]*pairs-[^"]*\)".*/\1/p' | tail -n 1)
        cp "$exe" "$BIN/pairs"
    fi
    if [ "$ONLY" != pairs ]; then
        cargo build --release -q -p proscenium-http --example server
        cargo build --release -q --manifest-path perf/http-peers/Cargo.toml
        cp target/release/examples/server "$BIN/server"
        cp perf/http-peers/target/release/hyper_hello perf/http-peers/target/release/actix_hello "$BIN/"
    fi
fi

echo "== machine: nproc $cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
if command -v lscpu >/dev/null; then
    lscpu | grep -E '^(Thread|Core|Socket|NUMA node\(s\)|L3)' || true
fi

# Worker counts: 1, 2, 4, ... up to the cores, and the cores themselves.
steps() {
    local w=1
    while [ "$w" -lt "$1" ]; do
        echo "$w"
        w=$((w * 2))
    done
    echo "$1"
}

# The builds to alternate: "label path" lines, the plain one labelled "new".
builds() {
    local base=$1
    echo "new $BIN/$base"
    for f in "$BIN/$base".*; do
        [ -e "$f" ] && echo "${f##*.} $f"
    done
    return 0
}

if [ "$ONLY" != http ]; then
    table="$OUT_DIR/scaling.pairs.txt"
    : >"$table"
    echo "== pairs: $NPAIRS pairs x $ROUNDS round trips, median of $REPS processes (M msgs/s)"
    # Every sample in a process of its own (a fresh heap: in one process a
    # contender measured after another ran on the other's leftovers), the
    # contenders and builds alternating within each repetition.
    for w in $(steps "$cores"); do
        for rep in $(seq "$REPS"); do
            while read -r label exe; do
                peers=proscenium
                [ "$label" = new ] && peers="proscenium,$PEERS"
                for who in ${peers//,/ }; do
                    raw="$OUT_DIR/scaling.pairs.$label.$who.$w.$rep.txt"
                    PAIRS_WORKERS=$w PAIRS_N=$NPAIRS PAIRS_ROUNDS=$ROUNDS PAIRS_REPS=1 \
                        PAIRS_PEERS=$who taskset -c "0-$((w - 1))" "$exe" >"$raw"
                    rate=$(sed -n 's/^pairs .* median_mmsgs=\([0-9.]*\).*/\1/p' "$raw")
                    [ "$who" = proscenium ] && who="proscenium-$label"
                    [ -n "$rate" ] && echo "$w $who $rate" >>"$table"
                done
            done < <(builds pairs)
        done
    done
    awk '
        { n = ++count[$2, $1]; v[$2, $1, n] = $3
          if (!($2 in seen)) { seen[$2] = 1; order[k++] = $2 } ws[$1] = 1 }
        function median(c, w,    n, i, j, t, a) {
            n = count[c, w]; for (i = 1; i <= n; i++) a[i] = v[c, w, i]
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
            return a[int((n + 1) / 2)]
        }
        END {
            m = 0; for (w in ws) list[m++] = w + 0
            for (i = 0; i < m; i++) for (j = i + 1; j < m; j++) if (list[j] < list[i]) { t = list[i]; list[i] = list[j]; list[j] = t }
            for (i = 0; i < k; i++) for (q = 0; q < m; q++) if ((order[i], list[q]) in count) med[order[i], list[q]] = median(order[i], list[q])
            printf "%-8s", "workers"
            for (i = 0; i < k; i++) printf " %16s %7s", order[i], "x1"
            printf " %s\n", "proscenium-new/actix"
            for (q = 0; q < m; q++) {
                w = list[q]; printf "%-8s", w
                for (i = 0; i < k; i++) {
                    c = order[i]
                    if ((c, w) in med) printf " %16.2f %6.2fx", med[c, w], med[c, w] / med[c, 1]
                    else printf " %16s %7s", "-", "-"
                }
                if ((("actix", w) in med) && (("proscenium-new", w) in med)) printf " %.2fx", med["proscenium-new", w] / med["actix", w]
                printf "\n"
            }
        }' "$table" | tee "$OUT_DIR/scaling.pairs.summary.txt"
fi

if [ "$ONLY" != pairs ]; then
    command -v "$WRK" >/dev/null || { echo "wrk is needed for the HTTP part (apt-get install wrk)" >&2; exit 1; }
    half=$((cores / 2))
    [ "$half" -ge 1 ] || half=1
    server_cpus="0-$((half - 1))"
    if [ "$cores" -ge 2 ]; then load_cpus="$half-$((cores - 1))"; else load_cpus=0; fi
    pid=
    cleanup() {
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
        pid=
    }
    trap cleanup EXIT
    wait_up() {
        for _ in $(seq 300); do
            if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
            sleep 0.1
        done
        echo "the server on port $1 never listened" >&2
        exit 1
    }
    port=18100
    table="$OUT_DIR/scaling.http.txt"
    : >"$table"
    echo "== http: server on cpus $server_cpus ($half workers), wrk -t$half on cpus $load_cpus, ${DURATION}s"
    for c in $CONNS; do
        servers=()
        while read -r label exe; do
            servers+=("proscenium-$label|$exe --port PORT --workers $half --pin")
        done < <(builds server)
        servers+=("hyper|$BIN/hyper_hello PORT $half" "actix-web|$BIN/actix_hello PORT $half")
        for entry in "${servers[@]}"; do
            name=${entry%%|*}
            cmd=${entry#*|}
            port=$((port + 1))
            cmd=${cmd//PORT/$port}
            # shellcheck disable=SC2086
            taskset -c "$server_cpus" $cmd >"$OUT_DIR/scaling.http.$name.$c.server.txt" 2>&1 &
            pid=$!
            wait_up "$port"
            # A short warm-up, then the measured run.
            taskset -c "$load_cpus" "$WRK" -t"$half" -c"$c" -d1s "http://127.0.0.1:$port/hello" >/dev/null
            taskset -c "$load_cpus" "$WRK" -t"$half" -c"$c" -d"${DURATION}s" --latency \
                "http://127.0.0.1:$port/hello" >"$OUT_DIR/scaling.http.$name.$c.wrk.txt"
            cleanup
            f="$OUT_DIR/scaling.http.$name.$c.wrk.txt"
            rps=$(awk '/^Requests\/sec:/ {print $2}' "$f")
            p50=$(awk '$1 == "50%" {print $2}' "$f")
            p99=$(awk '$1 == "99%" {print $2}' "$f")
            errs=$(awk '/Non-2xx|Socket errors/' "$f" | tr '\n' ' ')
            printf '%-6s %-22s %14s %10s %10s %s\n' "$c" "$name" "$rps" "$p50" "$p99" "$errs" >>"$table"
        done
    done
    printf '%-6s %-22s %14s %10s %10s\n' conns server requests/s p50 p99 | tee "$OUT_DIR/scaling.http.summary.txt"
    tee -a "$OUT_DIR/scaling.http.summary.txt" <"$table"
fi
