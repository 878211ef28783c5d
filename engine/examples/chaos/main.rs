//! The chaos soak: 10k actors in a three-level tree (10 tops x 10 mids x
//! 100 leaves) under 4 producer threads, with random handler errors
//! (each naming the directive its supervisor picks: Resume, Restart, Stop,
//! Escalate, under one-for-one and all-for-one supervisors), panics, Kill,
//! stop, PoisonPill, watch and unwatch, timers and stashes, for N seconds.
//! At the end it checks that every message id was handled, dead-lettered,
//! dropped with the failure it caused, or cancelled with its timer, exactly
//! once; that `pre_start` and `post_stop` pair up at every level and on
//! every instance; that the termination is clean with no cell left; and
//! that RSS did not grow from the 2nd minute (a third of a run shorter than
//! 3 minutes) to the end (beyond `soak::rss_allowed`: a tolerance, and room
//! for the cells a restart storm holds above the base). See `soak.rs` and
//! docs/decisions/0016-chaos-and-sanitizers.md.
//!
//! ```sh
//! cargo run --release -p proscenium --example chaos -- --seconds 60 [--seed N]
//! ```
//!
//! Exit code 0 when every invariant holds, 1 otherwise (each violation is
//! printed), 2 for bad arguments.

mod soak;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn usage() -> ! {
    eprintln!(
        "usage: chaos [--seconds N] [--seed N] [--sample-every SECS] [--workers N] [--fail-per-10k N] [--quiet]"
    );
    std::process::exit(2)
}

fn main() {
    let mut seconds = 60u64;
    let mut seed: Option<u64> = None;
    let mut sample_every: Option<u64> = None;
    let mut workers: Option<usize> = None;
    let mut fail_per_10k: Option<u64> = None;
    let mut verbose = true;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or_else(|| usage())
        };
        match arg.as_str() {
            "--seconds" => seconds = value(),
            "--seed" => seed = Some(value()),
            "--sample-every" => sample_every = Some(value()),
            "--workers" => workers = Some(value() as usize),
            "--fail-per-10k" => fail_per_10k = Some(value()),
            "--quiet" => verbose = false,
            _ => usage(),
        }
    }
    if seconds == 0 {
        usage();
    }
    let seed = seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let mut cfg = soak::Config::standard(seed, soak::Length::Time(Duration::from_secs(seconds)));
    // Ten samples or more, at most one a second by default.
    cfg.sample_every = Duration::from_secs(sample_every.unwrap_or((seconds / 12).max(1)));
    if let Some(w) = workers {
        cfg.workers = w;
    }
    if let Some(f) = fail_per_10k {
        cfg.fail_per_10k = f;
    }
    cfg.verbose = verbose;
    println!(
        "chaos soak: seed {seed} (rerun with --seed {seed}), {seconds}s, RSS sampled every {}s",
        cfg.sample_every.as_secs()
    );
    soak::quiet_chaos_panics();
    let report = soak::run(cfg);
    println!("{report}");
    let violations = report.violations();
    if violations.is_empty() {
        println!("chaos soak: every invariant held");
    } else {
        println!("chaos soak: {} violation(s):", violations.len());
        for v in &violations {
            println!("  - {v}");
        }
        std::process::exit(1);
    }
}
