//! A cluster node for the process tests (tests/processes.rs), with a
//! witness on its standard output: every activation, stop and delivery of
//! an entity is printed with its fencing token and the time on the
//! machine's monotonic clock (`CLOCK_MONOTONIC`, the same for every
//! process on the machine), so that a test reading every node's output
//! can check that no entity ever acted on two nodes at once, that tokens
//! only rise, and what each entity received, from whom, in which order.
//!
//! Usage: `witness_node <nats-url> <node> [options]`, then commands on
//! standard input, one per line. Options (the cluster's settings):
//!
//! * `--lease-ms N`: the lease's timeout (renewed every eighth of it,
//!   fenced a quarter of it early; default 6000);
//! * `--shards N`: shards of the entity type (default 1000);
//! * `--rebalance-ms N`: a rebalance every N ms once the membership has
//!   been stable for 2N (default: the crate's, 10 s and 20 s);
//! * `--limit N`: the most shards in hand-off at once (the least-shard
//!   strategy's absolute limit, its relative limit off);
//! * `--remember`: remember-entities on;
//! * `--idle-ms N`: passivate an entity idle for N ms;
//! * `--max-active N`: passivate past N active entities;
//! * `--tick-ms N`: every entity ticks every N ms, as an entity that
//!   writes to a store on its own (each tick printed).
//!
//! Commands:
//!
//! * `touch <n> <k>`: a plain tell of number `k` to entities `acct-0` to
//!   `acct-<n-1>` (prints `touched`);
//! * `rsend <n> <per>`: reliable tells of 1 to `per` to each of them,
//!   round-robin (prints `rsent ms=<elapsed>` once all are confirmed);
//! * `psend <n> <per>`: the same as plain tells (prints `psent`);
//! * `tell <id> <k>`: a plain tell of number `k` to entity `<id>` (prints
//!   `told`);
//! * `rtell <id> <k>`: a reliable tell of number `k` to entity `<id>`
//!   (prints `told`; `unconfirmed` says how many of this node's reliable
//!   messages are not confirmed yet);
//! * `unconfirmed`: prints `unconfirmed <count>`;
//! * `busy <id> <ms>`: entity `<id>` busy for `<ms>` (prints `told`);
//! * `stell <k>`: a plain tell of number `k` to the cluster singleton
//!   `ledger` (an entity of the same kind, its id `ledger`; prints
//!   `stold`);
//! * `inc`: this node's incarnation and whether it is fenced;
//! * `exit`: leaves in order (as SIGTERM does).
//!
//! Output: `ready <node>`; `start <id> <token> <ns>`; `stop <id> <token>
//! <ns>`; `got <id> <from> <n> <token> <ns>`; `tick <id> <token> <ns>`;
//! `terminated clean=<bool>`.
//!
//! ```sh
//! nats-server -js -sd /tmp/js -p 4222 &
//! cargo run -p proscenium-cluster --example witness_node -- nats://127.0.0.1:4222 a
//! ```

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use proscenium::prelude::*;
use proscenium_cluster::{
    Cluster, ClusterSettings, EntityInfo, LeastShardStrategy, Region, RegionOptions, Singleton,
};
use proscenium_remote::{Remote, RemoteSettings};
use serde::{Deserialize, Serialize};

/// What an entity is sent.
#[derive(Debug, Clone, Serialize, Deserialize)]
enum Msg {
    /// A numbered message from a node.
    Rec { from: String, n: u64 },
    /// Busy for this many milliseconds (a long piece of work).
    Busy(u64),
    /// The entity's own timer (`--tick-ms`).
    Tick,
}

fn rec(from: &str, n: u64) -> Msg {
    Msg::Rec {
        from: from.to_owned(),
        n,
    }
}

/// Nanoseconds on the machine's monotonic clock.
fn now_ns() -> u128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer to
    // a local.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    u128::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u128::try_from(ts.tv_nsec).unwrap_or(0)
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

struct Acct {
    id: String,
    token: u64,
    tick: Option<Duration>,
}

impl Actor for Acct {
    type Msg = Msg;
    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        say(&format!("start {} {} {}", self.id, self.token, now_ns()));
        if let Some(every) = self.tick {
            ctx.start_timer_with_fixed_delay("tick", Msg::Tick, every);
        }
        Ok(())
    }
    fn post_stop(&mut self, _: &mut Context<Self>) {
        say(&format!("stop {} {} {}", self.id, self.token, now_ns()));
    }
    fn receive(&mut self, _: &mut Context<Self>, msg: Msg) -> Outcome {
        match msg {
            Msg::Rec { from, n } => {
                say(&format!(
                    "got {} {from} {n} {} {}",
                    self.id,
                    self.token,
                    now_ns()
                ));
            }
            Msg::Busy(ms) => std::thread::sleep(Duration::from_millis(ms)),
            Msg::Tick => say(&format!("tick {} {} {}", self.id, self.token, now_ns())),
        }
        Ok(())
    }
}

fn count(s: &str) -> Result<u64, String> {
    s.parse().map_err(|e| format!("`{s}`: {e}"))
}

fn run(
    node: &str,
    cluster: &Cluster,
    region: &Region<Msg>,
    ledger: &Singleton<Msg>,
    words: &[&str],
) -> Result<String, String> {
    match words {
        ["stell", k] => {
            ledger.proxy().tell(rec(node, count(k)?));
            Ok("stold".into())
        }
        ["tell", id, k] => {
            region.entity_ref(*id).tell(rec(node, count(k)?));
            Ok("told".into())
        }
        ["rtell", id, k] => {
            region
                .reliable_entity_ref(*id)
                .tell(rec(node, count(k)?))
                .map_err(|e| e.to_string())?;
            Ok("told".into())
        }
        ["unconfirmed"] => Ok(format!("unconfirmed {}", region.unconfirmed())),
        ["busy", id, ms] => {
            region.entity_ref(*id).tell(Msg::Busy(count(ms)?));
            Ok("told".into())
        }
        ["touch", n, k] => {
            let k = count(k)?;
            for i in 0..count(n)? {
                region.entity_ref(format!("acct-{i}")).tell(rec(node, k));
            }
            Ok("touched".into())
        }
        ["rsend", n, per] => {
            let start = Instant::now();
            let refs: Vec<_> = (0..count(n)?)
                .map(|i| region.reliable_entity_ref(format!("acct-{i}")))
                .collect();
            for k in 1..=count(per)? {
                for r in &refs {
                    let msg = rec(node, k);
                    while r.tell(msg.clone()).is_err() {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            }
            while region.unconfirmed() > 0 {
                if start.elapsed() > Duration::from_secs(120) {
                    return Err(format!(
                        "rsend: {} unconfirmed after 120 s",
                        region.unconfirmed()
                    ));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(format!("rsent ms={}", start.elapsed().as_millis()))
        }
        ["psend", n, per] => {
            let n = count(n)?;
            for k in 1..=count(per)? {
                for i in 0..n {
                    region.entity_ref(format!("acct-{i}")).tell(rec(node, k));
                }
            }
            Ok("psent".into())
        }
        ["inc"] => Ok(format!(
            "inc {} fenced={}",
            cluster.incarnation(),
            cluster.is_fenced()
        )),
        _ => Err(format!("unknown command: {}", words.join(" "))),
    }
}

/// The node's options (see the module's documentation).
struct Options {
    settings: ClusterSettings,
    strategy: LeastShardStrategy,
    tick: Option<Duration>,
}

fn options(flags: &[String]) -> Result<Options, Box<dyn std::error::Error>> {
    let ms = |v: Option<&String>| -> Result<Duration, Box<dyn std::error::Error>> {
        Ok(Duration::from_millis(
            v.ok_or("a value is missing")?.parse()?,
        ))
    };
    let mut lease = Duration::from_secs(6);
    let (mut shards, mut rebalance, mut limit, mut remember) = (None, None, None, false);
    let (mut idle, mut max_active, mut tick) = (None, None, None);
    let mut it = flags.iter();
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--lease-ms" => lease = ms(it.next())?,
            "--shards" => shards = Some(it.next().ok_or("--shards N")?.parse()?),
            "--rebalance-ms" => rebalance = Some(ms(it.next())?),
            "--limit" => limit = Some(it.next().ok_or("--limit N")?.parse()?),
            "--remember" => remember = true,
            "--idle-ms" => idle = Some(ms(it.next())?),
            "--max-active" => max_active = Some(it.next().ok_or("--max-active N")?.parse()?),
            "--tick-ms" => tick = Some(ms(it.next())?),
            other => return Err(format!("unknown option {other}").into()),
        }
    }
    let mut settings = ClusterSettings::default()
        .lease(lease, lease / 8, lease / 4)
        .reliable_resend_after(Duration::from_millis(500))
        .remember_entities(remember)
        .passivation(idle, max_active);
    if let Some(n) = shards {
        settings = settings.shards(n);
    }
    if let Some(every) = rebalance {
        settings = settings.rebalance(every, every * 2, 1);
    }
    let strategy = match limit {
        Some(absolute_limit) => LeastShardStrategy {
            absolute_limit,
            relative_limit: 1.0,
        },
        None => LeastShardStrategy::default(),
    };
    Ok(Options {
        settings,
        strategy,
        tick,
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, node, flags @ ..] = args.as_slice() else {
        return Err("usage: witness_node <nats-url> <node> [options]".into());
    };
    let (url, node) = (url.clone(), node.clone());
    let Options {
        settings,
        strategy,
        tick,
    } = options(flags)?;
    let system = ActorSystem::builder().name(node.as_str()).build()?;
    let remote = Remote::connect(&system, RemoteSettings::new(url, "witness", node.as_str()))?;
    remote.add_to_coordinated_shutdown()?;
    let cluster = Cluster::join(&remote, settings)?;
    cluster.add_to_coordinated_shutdown()?;
    let acct = move |e: &EntityInfo| {
        let (id, token) = (e.id.clone(), e.fencing_token);
        Props::new(move || Acct {
            id: id.clone(),
            token,
            tick,
        })
    };
    let region =
        cluster.start_region_with_options("acct", RegionOptions::new().strategy(strategy), acct)?;
    let ledger = cluster.start_singleton("ledger", |e: &EntityInfo| {
        let (id, token) = (e.id.clone(), e.fencing_token);
        Props::new(move || Acct {
            id: id.clone(),
            token,
            tick: None,
        })
    })?;
    say(&format!("ready {node}"));
    let terminated = system.when_terminated();
    {
        let (system, cluster) = (system.clone(), cluster.clone());
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines().map_while(Result::ok) {
                let words: Vec<&str> = line.split_whitespace().collect();
                if words == ["exit"] {
                    drop(system.terminate());
                    break;
                }
                match run(&node, &cluster, &region, &ledger, &words) {
                    Ok(out) => say(&out),
                    Err(e) => say(&format!("error {e}")),
                }
            }
        });
    }
    let report = terminated.wait();
    drop((cluster, remote));
    say(&format!("terminated clean={}", report.clean()));
    Ok(())
}
