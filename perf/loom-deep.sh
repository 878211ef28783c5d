#!/usr/bin/env bash
# A deeper run of the scheduler's loom models than CI's (issue 16,
# docs/decisions/0014-loom-scheduler.md): LOOM_MAX_PREEMPTIONS=3 instead of
# 2. Not part of .ci/run (it takes much longer); run it after changing
# task_state.rs, timer_entry.rs, timer_intake.rs, quiesce.rs, idle.rs,
# park.rs, lifo.rs, worker.rs, scheduler.rs, block_on.rs, scheduled_io.rs
# or monitor_sleep.rs.
#
#   perf/loom-deep.sh            # the scheduler's models
#   perf/loom-deep.sh --test task   # one file
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$#" -eq 0 ]; then
    set -- --test block_on --test task --test timer --test timer_intake --test quiesce \
        --test lifo --test worker --test scheduler_idle --test scheduled_io \
        --test monitor_sleep --test scheduler_close
fi
RUSTFLAGS="--cfg loom -C debug_assertions" LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}" \
    CARGO_TARGET_DIR=target/loom cargo test -p proscenium-loom-tests --release "$@"
