#!/usr/bin/env bash
# Instructions per HTTP/1.1 request on the hand-written layer (`Http::bind`),
# counted by `valgrind --tool=callgrind`: the method of BENCHMARKS.md's
# "HTTP: work per request", kept as a script.
#
#   perf/callgrind-http.sh [N1] [N2]
#
# Runs http/examples/server.rs with one worker under callgrind twice; each
# time a Python client sends N sequential `GET /hello` requests on one
# keep-alive connection (N1, then N2; defaults 2000 and 4000), then the
# server is sent SIGTERM and ends in order. Prints
#
#   instructions per request = (Ir(N2) - Ir(N1)) / (N2 - N1)
#
# and the part of it spent in the connection's task (its future's polls,
# inclusive). The difference cancels start-up, the connection's accept and
# the shutdown. The second figure is exact to a few instructions run to
# run; the first moves by several hundred between runs, with how often the
# one worker finds the next request already in when it looks for work
# before it parks (a matter of timing: the client is a Python process
# beside it). Compare the second before and after a change to the request
# path, the first only over several runs. Raw outputs are kept
# in perf/out/ (gitignored): `callgrind_annotate
# perf/out/callgrind.http_hello.4000.out | head -40`. FEATURES (e.g.
# `FEATURES=websocket`) builds the example with those features of
# proscenium-http too: the request path must not move with them.
set -euo pipefail

cd "$(dirname "$0")/.."
OUT=perf/out
mkdir -p "$OUT"
N1="${1:-2000}"
N2="${2:-4000}"
TARGET="${CARGO_TARGET_DIR:-target}"

command -v valgrind >/dev/null || { echo "valgrind not found" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 not found" >&2; exit 1; }
CARGO_TARGET_DIR="$TARGET" cargo build --release -p proscenium-http --example server \
    ${FEATURES:+--features "$FEATURES"} >&2
EXE="$TARGET/release/examples/server"

# N sequential GETs on one connection; each response read whole (its
# Content-Length) before the next request is sent. Started before the
# server and waiting for its address (in the server's output, polled every
# millisecond): the server waits as little as possible for the client (an
# idle worker's wake-ups would count).
client() {
    python3 - "$1" "$2" <<'EOF'
import socket, sys, time
stdout, n = sys.argv[1], int(sys.argv[2])
addr = None
for _ in range(60000):
    with open(stdout) as f:
        for line in f:
            if line.startswith("listening on "):
                addr = line[len("listening on "):].strip()
    if addr:
        break
    time.sleep(0.001)
assert addr, "the server did not start"
host, port = addr.rsplit(":", 1)
s = socket.create_connection((host, int(port)))
buf = b""
for _ in range(n):
    s.sendall(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
    while b"\r\n\r\n" not in buf:
        buf += s.recv(65536)
    head, buf = buf.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200"), head
    length = next(int(l.split(b":")[1]) for l in head.split(b"\r\n")
                  if l.lower().startswith(b"content-length:"))
    while len(buf) < length:
        buf += s.recv(65536)
    buf = buf[length:]
s.close()
EOF
}

total_ir() {
    local n="$1" out="$OUT/callgrind.http_hello.$1.out" stdout="$OUT/callgrind.http_hello.$1.stdout"
    : >"$stdout"
    client "$stdout" "$n" &
    local client_pid=$!
    valgrind --tool=callgrind --callgrind-out-file="$out" "$EXE" --workers 1 --port 0 \
        >"$stdout" 2>"$OUT/callgrind.http_hello.$n.log" &
    local pid=$!
    wait "$client_pid"
    kill -TERM "$pid"
    wait "$pid"
    # The "summary:" (or "totals:") line holds the total Ir.
    grep -E '^(summary|totals):' "$out" | head -1 | awk '{print $2}'
}

# The connection task's own instructions, inclusive (everything under
# the polls of its future: parsing, the handler, writing, allocation), not
# the worker's loop around it. (`connection::Connection<S>::run` before
# the crate's layout of 2026-11-28; `protocol/http1.rs` since.)
connection_ir() {
    callgrind_annotate --inclusive=yes "$OUT/callgrind.http_hello.$1.out" 2>/dev/null |
        awk '!found && /http1.rs:proscenium_http::protocol::http1::Connection<S,U>::run::\{\{closure\}\} \[/ {
            gsub(",", "", $1); print $1; found = 1 }'
}

IR1=$(total_ir "$N1")
IR2=$(total_ir "$N2")
C1=$(connection_ir "$N1")
C2=$(connection_ir "$N2")
echo "Ir($N1) = $IR1, of which the connection's $C1"
echo "Ir($N2) = $IR2, of which the connection's $C2"
awk -v a="$IR1" -v b="$IR2" -v n1="$N1" -v n2="$N2" \
    'BEGIN { printf "instructions per request (GET /hello, HTTP/1.1, 1 worker): %.1f\n", (b - a) / (n2 - n1) }'
awk -v a="$C1" -v b="$C2" -v n1="$N1" -v n2="$N2" \
    'BEGIN { printf "  of which in the connection task: %.1f\n", (b - a) / (n2 - n1) }'
