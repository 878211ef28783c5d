#!/usr/bin/env bash
# Issue 36's sharding benchmarks (BENCHMARKS.md, "Cluster sharding"):
# cluster/examples/cluster_bench_node.rs as OS processes on one JetStream server,
# ROUNDS rounds, each on a fresh server (so a fresh bucket), medians
# reported. A round:
#
#   1. nodes a and b, and a watcher of the bucket `bench-shards` (its own
#      NATS connection: one line per write); 5 s quiet: the steady writes
#      (lease renewals);
#   2. warm, from a: N tells (the count every WINDOW) and M sequential
#      asks to an entity on a, an entity on b, b's plain sink through a
#      RemoteRef (the peer baseline) and a plain local ActorRef; the order
#      of the four rotates from round to round;
#   3. cold, from a: COLD sequential first asks to entities of fresh shards
#      (each allocates its shard), then the same asks warm; a burst of one
#      tell and one ask to each of BURST entities of fresh shards, cold and
#      then warm;
#   4. hand-off: a starts HANDOFF entities h-* (about half on b), probes one
#      of b's every PROBE_MS; SIGTERM to b: from the signal to b's exit, and
#      to the first answer of that entity from a; then all h-* asked again;
#   5. rebalance: node c joins; the bucket's writes for REBALANCE_S seconds;
#   6. memory: c's VmRSS and entity count before and after a starts IDLE
#      entities idle-* (some land on c): bytes per entity on c; then c
#      spawns IDLE/2 plain actors (the same sink, no sharding) as the
#      baseline;
#   7. SIGKILL of c: from the kill to the first answer, from a, of one of
#      c's entities (a probes it every PROBE_MS).
#
#   nice -n 10 perf/cluster-bench.sh                    # ROUNDS=3
#   ROUNDS=5 LEASE_MS=2000 nice -n 10 perf/cluster-bench.sh
#
# Lease: LEASE_MS (default 6000: the default settings, 6 s lease renewed
# every 1 s, 1 s margin; otherwise renewed every LEASE_MS/6, margin
# LEASE_MS/6); rebalance every REBALANCE_MS (default 1000) once the
# membership has been stable 1 s; 1,000 shards; passivation off.
#
# Raw output in perf/out/cluster-bench/ (gitignored). Needs nats-server
# 2.11 or later (JetStream).
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
N=${N:-200000}
M=${M:-20000}
WINDOW=${WINDOW:-10000}
COLD=${COLD:-200}
BURST=${BURST:-300}
HANDOFF=${HANDOFF:-2000}
IDLE=${IDLE:-40000}
LEASE_MS=${LEASE_MS:-6000}
REBALANCE_MS=${REBALANCE_MS:-1000}
REBALANCE_S=${REBALANCE_S:-10}
PROBE_MS=${PROBE_MS:-2}
OUT=perf/out/cluster-bench
mkdir -p "$OUT"

NATS=${NATS_SERVER:-$(command -v nats-server || true)}
if [ -z "$NATS" ] || [ ! -x "$NATS" ]; then
    echo "nats-server 2.11 or later is needed (NATS_SERVER=/path/to/it)" >&2
    exit 1
fi

echo "== building (release)"
cargo build --release -q -p proscenium-cluster --example cluster_bench_node
bin=target/release/examples/cluster_bench_node

# Processes of this run, by role; stopped on exit.
declare -A pid=()
stop_all() {
    for r in "${!pid[@]}"; do
        kill -KILL "${pid[$r]}" 2>/dev/null || true
        wait "${pid[$r]}" 2>/dev/null || true
    done
    pid=()
}
trap 'stop_all' EXIT

now_us() { echo $(($(date +%s%N) / 1000)); }

# wait_line FILE FROM PREFIX [SECONDS]: the first line of FILE after line
# FROM that starts with PREFIX (an `error` line fails).
wait_line() {
    local file=$1 from=$2 prefix=$3 limit=${4:-300} line
    for _ in $(seq $((limit * 20))); do
        line=$(tail -n +"$((from + 1))" "$file" | grep -m1 -E "^($prefix|error)" || true)
        if [ -n "$line" ]; then
            case $line in
                error*) echo "$file: $line" >&2; exit 1 ;;
            esac
            echo "$line"
            return
        fi
        sleep 0.05
    done
    echo "no '$prefix' line in $file:" >&2
    tail -5 "$file" >&2
    exit 1
}

# start_node NAME: a node driven through the fifo $dir/NAME.in.
start_node() {
    local name=$1
    rm -f "$dir/$name.in"
    mkfifo "$dir/$name.in"
    "$bin" node "$url" "$name" --lease-ms "$LEASE_MS" --rebalance-ms "$REBALANCE_MS" \
        <"$dir/$name.in" >"$dir/$name.out" 2>"$dir/$name.err" &
    pid[$name]=$!
    # Held open for writing on fd 10+, so the node's stdin stays open.
    case $name in
        a) exec 11>"$dir/a.in" ;;
        b) exec 12>"$dir/b.in" ;;
        c) exec 13>"$dir/c.in" ;;
    esac
    wait_line "$dir/$name.out" 0 ready 60 >/dev/null
}

fd_of() { case $1 in a) echo 11 ;; b) echo 12 ;; c) echo 13 ;; esac; }

# cmd NAME PREFIX COMMAND...: sends COMMAND to node NAME, prints its answer.
cmd() {
    local name=$1 prefix=$2
    shift 2
    local from
    from=$(wc -l <"$dir/$name.out")
    echo "$*" >&"$(fd_of "$name")"
    wait_line "$dir/$name.out" "$from" "$prefix" 600
}

# field LINE KEY: the value of KEY=... in LINE.
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }

# writes FROM_US TO_US: the bucket's writes in [FROM, TO), by kind.
writes() {
    awk -v f="$1" -v t="$2" '$1 == "W" && $2 >= f && $2 < t {
        n++; k = substr($4, 1, index($4, ".") - 1); kind[k "." $3]++
    } END {
        printf "writes=%d", n
        for (x in kind) printf " %s=%d", x, kind[x]
        print ""
    }' "$dir/watch.out"
}

results=$OUT/results.txt
: >"$results"
echo "machine: nproc $(nproc), $(lscpu | sed -n 's/^Model name: *//p' | head -1)" | tee "$OUT/machine.txt"
echo "$("$NATS" --version); LEASE_MS=$LEASE_MS REBALANCE_MS=$REBALANCE_MS N=$N M=$M WINDOW=$WINDOW" \
    "COLD=$COLD BURST=$BURST HANDOFF=$HANDOFF IDLE=$IDLE PROBE_MS=$PROBE_MS" | tee -a "$OUT/machine.txt"
echo "start: $(date -u +%FT%TZ), load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"

targets=(peer:b entity-remote entity-local actor)
for round in $(seq "$ROUNDS"); do
    echo "== round $round ($(date -u +%T), load $(cut -d' ' -f1-3 /proc/loadavg))"
    dir=$OUT/round-$round
    rm -rf "$dir"
    mkdir -p "$dir"
    "$NATS" -js -a 127.0.0.1 -p -1 -sd "$dir/js" >"$dir/nats.txt" 2>&1 &
    pid[nats]=$!
    wait_line "$dir/nats.txt" 0 ".*Listening for client connections" 30 >/dev/null
    port=$(sed -n 's/.*Listening for client connections on 127\.0\.0\.1:\([0-9]*\).*/\1/p' \
        "$dir/nats.txt" | head -1)
    url="nats://127.0.0.1:$port"
    r() { echo "round=$round $*" | tee -a "$results"; }
    # rc LABEL NAME PREFIX COMMAND...: runs a command, records its answer
    # (after LABEL, if not empty).
    rc() {
        local label=${1:+$1 } l
        shift
        l=$(cmd "$@")
        r "$label$l"
    }

    # 1. a, b, the watcher; steady writes.
    start_node a
    "$bin" watch "$url" >"$dir/watch.out" 2>"$dir/watch.err" &
    pid[watch]=$!
    wait_line "$dir/watch.out" 0 watching 30 >/dev/null
    start_node b
    sleep 2
    t0=$(now_us)
    sleep 5
    r "steady $(writes "$t0" "$(now_us)") seconds=5"

    # 2. warm, the four targets in a rotated order.
    for i in 0 1 2 3; do
        t=${targets[$(((i + round) % 4))]}
        rc "" a warm warm "$t" "$N" "$M" "$WINDOW"
    done

    # 3. cold.
    rc "" a cold cold "$COLD" "$BURST"

    # 4. hand-off of b on SIGTERM.
    rc "" a spread spread h "$HANDOFF" 1000
    rc b-before-term b rss rss
    from=$(wc -l <"$dir/a.out")
    echo "probe h $HANDOFF b $PROBE_MS" >&11
    wait_line "$dir/a.out" "$from" armed 60 >/dev/null
    t_sig=$(now_us)
    kill -TERM "${pid[b]}"
    wait "${pid[b]}" || true
    t_exit=$(now_us)
    unset 'pid[b]'
    exec 12>&-
    probed=$(wait_line "$dir/a.out" "$from" probed 120)
    answered=$(field "$probed" answered_at)
    r "handoff signal_to_exit_ms=$(((t_exit - t_sig) / 1000)) signal_to_answer_ms=$(((answered - t_sig) / 1000)) $(writes "$t_sig" "$t_exit")"
    rc after-handoff a spread spread h "$HANDOFF" 1000

    # 5. rebalance: c joins.
    start_node c
    t_join=$(field "$(grep -m1 '^ready' "$dir/c.out")" at)
    sleep "$REBALANCE_S"
    r "rebalance $(writes "$t_join" $((t_join + REBALANCE_S * 1000000))) seconds=$REBALANCE_S"

    # 6. memory on c.
    before=$(cmd c rss rss)
    rc "" a spread spread idle "$IDLE" 5000
    sleep 1
    after=$(cmd c rss rss)
    kb=$(($(field "$after" kb) - $(field "$before" kb)))
    ents=$(($(field "$after" entities) - $(field "$before" entities)))
    r "memory node=c entities=$ents rss_delta_kb=$kb bytes_per_entity=$((kb * 1024 / (ents > 0 ? ents : 1)))"
    rc "" c plain plain $((IDLE / 2))

    # 7. SIGKILL of c.
    from=$(wc -l <"$dir/a.out")
    echo "probe idle $IDLE c $PROBE_MS" >&11
    wait_line "$dir/a.out" "$from" armed 60 >/dev/null
    t_kill=$(now_us)
    kill -KILL "${pid[c]}"
    wait "${pid[c]}" 2>/dev/null || true
    unset 'pid[c]'
    exec 13>&-
    probed=$(wait_line "$dir/a.out" "$from" probed 120)
    answered=$(field "$probed" answered_at)
    r "kill kill_to_answer_ms=$(((answered - t_kill) / 1000)) lease_ms=$LEASE_MS $(writes "$t_kill" "$answered")"

    echo exit >&11
    wait "${pid[a]}" || true
    unset 'pid[a]'
    exec 11>&-
    stop_all
    rm -rf "$dir/js"
done
echo "end: $(date -u +%FT%TZ), load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"

# median KIND KEY [MATCH]: the median of KEY over the rounds' KIND lines
# (that also contain MATCH).
median() {
    grep -E "^round=[0-9]+ $1 " "$results" | grep -e "${3:-}" | tr ' ' '\n' | sed -n "s/^$2=//p" |
        grep -v invalid | sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo
echo "medians of $ROUNDS rounds"
printf '%-16s %14s %12s %12s\n' "warm" "tell msgs/s" "ask p50 µs" "ask p99 µs"
for t in "${targets[@]}"; do
    printf '%-16s %14s %12s %12s\n' "$t" "$(median warm tell_msgs_per_s "target=$t ")" \
        "$(median warm ask_p50_us "target=$t ")" "$(median warm ask_p99_us "target=$t ")"
done
for k in cold_local cold_remote warm_local warm_remote; do
    printf '%-16s %14s %12s %12s   (n %s)\n' "ask $k" "" "$(median cold "${k}_p50_us")" \
        "$(median cold "${k}_p99_us")" "$(median cold "${k}_n")"
done
echo "burst of $BURST first messages: cold $(median cold burst_cold_ms) ms, warm $(median cold burst_warm_ms) ms"
echo "steady writes in 5 s: $(median steady writes)"
echo "hand-off: signal to exit $(median handoff signal_to_exit_ms) ms, to answer elsewhere" \
    "$(median handoff signal_to_answer_ms) ms, writes $(median handoff writes)," \
    "b ran $(median b-before-term entities) entities"
echo "rebalance: writes in $REBALANCE_S s: $(median rebalance writes)"
echo "memory: $(median memory bytes_per_entity) bytes per idle entity ($(median memory entities) entities);" \
    "plain actors $(median plain bytes_per_actor) bytes each"
echo "kill -9 to first answer: $(median kill kill_to_answer_ms) ms (lease $LEASE_MS ms)"
