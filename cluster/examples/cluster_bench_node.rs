//! The sharding benchmark's node (perf/cluster-bench.sh, BENCHMARKS.md,
//! "Cluster sharding"): one node of the cluster `bench` per OS process,
//! driven by commands on stdin, and a watcher of the bucket.
//!
//! ```sh
//! nats-server -js -sd /tmp/js -p 4222 &       # 2.11 or later
//! cargo build --release -p proscenium-cluster --example cluster_bench_node
//! B=target/release/examples/cluster_bench_node
//! $B node nats://127.0.0.1:4222 a &           # then type commands into each
//! $B node nats://127.0.0.1:4222 b
//! $B watch nats://127.0.0.1:4222              # one line per write to the bucket
//! ```
//!
//! A node runs the region `bench` (entities are counting sinks) and a plain
//! sink of the same type exposed as `bench-sink-<node>` (the baseline: a
//! `RemoteRef` between the same two processes). Options after the node's
//! name: `--lease-ms N` (default 6000: the default lease, 6 s, renewed every
//! second, a 1 s margin; otherwise renewed every N/6 with an N/6 margin),
//! `--rebalance-ms N` (default 1000; the membership must be stable for 1 s),
//! `--shards N` (default 1000). Passivation is off.
//!
//! Commands, one per line; each answers one line starting with its name
//! (`error ...` if it failed), `key=value` fields after it:
//!
//! * `warm <target> <n> <m> <window>`: after a warm-up of 10,000 tells,
//!   `n` tells of the 40-byte message to one sink, the count asked after
//!   every `window` and at the end (the time runs until the sink has handled
//!   them all); then, after 2,000 warm-up asks, `m` sequential asks.
//!   `target`: `entity-local` (an entity this node runs), `entity-remote`
//!   (one another node runs: this node's region forwards to its region),
//!   `peer:<node>` (that node's plain sink, a `RemoteRef`), `actor` (a plain
//!   local sink, an `ActorRef`);
//! * `cold <k> <burst>`: sequential asks to `k` entities, each of a shard
//!   not yet allocated (its first message allocates it), split by where the
//!   shard went, then the same asks again (warm); then a burst: a tell to
//!   each of `burst` entities of other fresh shards and an ask to each
//!   (pipelined) until all have answered, then the same burst again, warm;
//! * `spread <prefix> <n> <batch>`: asks `<prefix>-0` .. `<prefix>-<n-1>`
//!   where they run (pipelined, `batch` at a time): starts them; how many
//!   each node runs;
//! * `probe <prefix> <n> <victim> <interval-ms>`: finds an entity among
//!   `<prefix>-*` that node `victim` runs, says `armed`, then asks it every
//!   interval until an answer comes from another node: `probed`, with that
//!   answer's time (microseconds since the epoch, the script's clock);
//! * `rss`: this process's resident memory and the entities it runs;
//! * `plain <n>`: the baseline of `rss`: `n` plain sinks spawned here
//!   (resident memory before and after), then stopped;
//! * `exit`: leaves in order (as SIGTERM does).
//!
//! `watch <url>` follows the bucket `bench-shards` (JetStream key-value)
//! from its own connection and prints `W <epoch-µs> <put|del|purge> <key>`
//! for each write, until killed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use proscenium::prelude::*;
use proscenium_cluster::{shard_of, Cluster, ClusterSettings, EntityInfo, EntityRef, Region};
use proscenium_remote::{Remote, RemoteAskError, RemoteRef, RemoteReply, RemoteSettings};
use serde::{Deserialize, Serialize};

const CLUSTER: &str = "bench";
const TIMEOUT: Duration = Duration::from_secs(30);
const COUNT_TIMEOUT: Duration = Duration::from_secs(10);
const WARM_TELLS: u64 = 10_000;
const WARM_ASKS: u64 = 2_000;

/// The benchmark's message: the remote benchmark's 40 bytes.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Payload {
    id: u64,
    payload: [u8; 32],
}

/// A sink's protocol.
#[derive(Debug, Serialize, Deserialize)]
enum Msg {
    /// Counted.
    Tell(Payload),
    /// Answered with the payload's id.
    Ask(Payload, RemoteReply<u64>),
    /// Answered with the number of `Tell`s handled so far.
    Count(RemoteReply<u64>),
    /// Answered with the name of the node that runs it.
    Where(RemoteReply<String>),
}

/// Entities running in this process (started and not yet stopped).
static ENTITIES: AtomicI64 = AtomicI64::new(0);

struct Sink {
    told: u64,
    node: std::sync::Arc<str>,
    entity: bool,
}

impl Actor for Sink {
    type Msg = Msg;
    fn pre_start(&mut self, _: &mut Context<Self>) -> Outcome {
        if self.entity {
            ENTITIES.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
    fn receive(&mut self, _: &mut Context<Self>, msg: Msg) -> Outcome {
        match msg {
            Msg::Tell(p) => {
                std::hint::black_box(p);
                self.told += 1;
            }
            Msg::Ask(p, reply) => reply.send(p.id),
            Msg::Count(reply) => reply.send(self.told),
            Msg::Where(reply) => reply.send(self.node.to_string()),
        }
        Ok(())
    }
    fn post_stop(&mut self, _: &mut Context<Self>) {
        if self.entity {
            ENTITIES.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

fn payload(id: u64) -> Payload {
    let mut payload = [0u8; 32];
    payload[..8].copy_from_slice(&id.to_le_bytes());
    Payload { id, payload }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn epoch_us() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}

/// This process's resident memory (VmRSS), in KiB.
fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// The `p` quantile of sorted nanoseconds, in microseconds.
fn quantile_us(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Why an ask failed: the timeout (a lost message, at most once) or else.
enum Failed {
    Timeout,
    Other(String),
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failed::Timeout => f.write_str("timed out"),
            Failed::Other(e) => f.write_str(e),
        }
    }
}

/// What a workload sends to: an entity, a remote sink, a local sink.
enum Target {
    Entity(EntityRef<Msg>),
    Peer(RemoteRef<Msg>),
    Actor(ActorRef<Msg>),
}

impl Target {
    fn tell(&self, msg: Msg) -> Result<(), String> {
        match self {
            Target::Entity(e) => e.tell(msg),
            Target::Peer(r) => r.tell(msg).map_err(|e| e.to_string())?,
            Target::Actor(a) => a.tell(msg),
        }
        Ok(())
    }

    fn ask<R>(
        &self,
        make: impl FnOnce(RemoteReply<R>) -> Msg,
        timeout: Duration,
    ) -> Result<R, Failed>
    where
        R: Serialize + serde::de::DeserializeOwned + Send + 'static,
    {
        let local = |r: Result<R, proscenium::AskError>| {
            r.map_err(|e| match e {
                proscenium::AskError::Timeout(_) => Failed::Timeout,
                e => Failed::Other(e.to_string()),
            })
        };
        match self {
            Target::Entity(e) => local(e.ask(make, timeout).wait()),
            Target::Peer(r) => r.ask(make, timeout).wait().map_err(|e| match e {
                RemoteAskError::Timeout(_) => Failed::Timeout,
                e => Failed::Other(e.to_string()),
            }),
            // A `RemoteReply` is built from a local ask's reply too.
            Target::Actor(a) => local(a.ask(make, timeout).wait()),
        }
    }

    /// The sink's count; asked again if the ask is lost (then the run's
    /// rate is not valid: it includes the timeout).
    fn count(&self) -> Result<(u64, bool), String> {
        let mut valid = true;
        for _ in 0..5 {
            match self.ask(Msg::Count, COUNT_TIMEOUT) {
                Ok(n) => return Ok((n, valid)),
                Err(Failed::Timeout) => valid = false,
                Err(e) => return Err(format!("count: {e}")),
            }
        }
        Err("count: no answer in five tries".into())
    }
}

struct Node {
    name: String,
    system: ActorSystem,
    remote: Remote,
    region: Region<Msg>,
    shards: u32,
    /// Warm targets found so far, by name.
    targets: HashMap<String, std::sync::Arc<Target>>,
    /// Shards this node has sent to (not fresh any more).
    used: HashSet<u32>,
    next_fresh: u64,
}

impl Node {
    fn entity(&mut self, id: String) -> EntityRef<Msg> {
        self.used.insert(shard_of(&id, self.shards));
        self.region.entity_ref(id)
    }

    /// An entity that runs on this node (`local`) or on another.
    fn find_entity(&mut self, local: bool) -> Result<EntityRef<Msg>, String> {
        for i in 0..10_000 {
            let e = self.entity(format!("w-{i}"));
            let at = e
                .ask(Msg::Where, TIMEOUT)
                .wait()
                .map_err(|e| format!("where: {e}"))?;
            if (at == self.name) == local {
                return Ok(e);
            }
        }
        Err("no such entity among w-0..w-9999".into())
    }

    fn target(&mut self, name: &str) -> Result<std::sync::Arc<Target>, String> {
        if let Some(t) = self.targets.get(name) {
            return Ok(std::sync::Arc::clone(t));
        }
        let t = match name {
            "entity-local" => Target::Entity(self.find_entity(true)?),
            "entity-remote" => Target::Entity(self.find_entity(false)?),
            "actor" => {
                let node = std::sync::Arc::from(self.name.as_str());
                Target::Actor(
                    self.system
                        .spawn(
                            Props::new(move || Sink {
                                told: 0,
                                node: std::sync::Arc::clone(&node),
                                entity: false,
                            }),
                            "local-sink",
                        )
                        .map_err(|e| e.to_string())?,
                )
            }
            _ => match name.strip_prefix("peer:") {
                Some(peer) => Target::Peer(
                    self.remote
                        .actor_ref(&format!("bench-sink-{peer}"))
                        .map_err(|e| e.to_string())?,
                ),
                None => return Err(format!("unknown target `{name}`")),
            },
        };
        let t = std::sync::Arc::new(t);
        self.targets
            .insert(name.to_owned(), std::sync::Arc::clone(&t));
        Ok(t)
    }

    /// An id whose shard this node has not sent to yet (in a fresh
    /// cluster: a shard not yet allocated).
    fn fresh(&mut self) -> Result<EntityRef<Msg>, String> {
        loop {
            if self.used.len() >= self.shards as usize {
                return Err("no fresh shard left".into());
            }
            let id = format!("c-{}", self.next_fresh);
            self.next_fresh += 1;
            if !self.used.contains(&shard_of(&id, self.shards)) {
                return Ok(self.entity(id));
            }
        }
    }

    fn warm(&mut self, target: &str, n: u64, m: u64, window: u64) -> Result<String, String> {
        let sink = self.target(target)?;
        let (mut told, _) = sink.count()?;
        let mut round = |k: u64| -> Result<(Duration, u64, bool), String> {
            let start = Instant::now();
            let mut valid = true;
            for id in 0..k {
                sink.tell(Msg::Tell(payload(id)))?;
                if window > 0 && (id + 1) % window == 0 && id + 1 < k {
                    valid &= sink.count()?.1;
                }
            }
            let (now, last) = sink.count()?;
            let elapsed = start.elapsed();
            let handled = now - told;
            told = now;
            Ok((elapsed, handled, valid && last))
        };
        round(WARM_TELLS)?;
        let (elapsed, handled, valid) = round(n)?;
        let rate = if valid {
            format!("{:.0}", handled as f64 / elapsed.as_secs_f64())
        } else {
            "invalid".to_owned()
        };
        let mut rtt = Vec::with_capacity(m as usize);
        for id in 0..WARM_ASKS + m {
            let start = Instant::now();
            let got = sink
                .ask(|r| Msg::Ask(payload(id), r), TIMEOUT)
                .map_err(|e| format!("ask {id}: {e}"))?;
            let t = start.elapsed();
            if got != id {
                return Err(format!("ask {id} answered {got}"));
            }
            if id >= WARM_ASKS {
                rtt.push(nanos(t));
            }
        }
        rtt.sort_unstable();
        Ok(format!(
            "warm target={target} tell_msgs_per_s={rate} lost={} ask_p50_us={:.1} ask_p99_us={:.1}",
            n - handled,
            quantile_us(&rtt, 0.5),
            quantile_us(&rtt, 0.99)
        ))
    }

    fn cold(&mut self, k: usize, burst: usize) -> Result<String, String> {
        // Sequential first asks, each to a fresh shard.
        let fresh: Vec<EntityRef<Msg>> = (0..k).map(|_| self.fresh()).collect::<Result<_, _>>()?;
        let mut times: BTreeMap<(bool, bool), Vec<u64>> = BTreeMap::new();
        for warm in [false, true] {
            for e in &fresh {
                let start = Instant::now();
                let at = e
                    .ask(Msg::Where, TIMEOUT)
                    .wait()
                    .map_err(|err| format!("cold ask to {}: {err}", e.id()))?;
                let t = nanos(start.elapsed());
                times.entry((warm, at == self.name)).or_default().push(t);
            }
        }
        let mut line = String::from("cold");
        for ((warm, local), t) in &mut times {
            t.sort_unstable();
            let key = format!(
                "{}_{}",
                if *warm { "warm" } else { "cold" },
                if *local { "local" } else { "remote" }
            );
            line += &format!(
                " {key}_n={} {key}_p50_us={:.1} {key}_p99_us={:.1}",
                t.len(),
                quantile_us(t, 0.5),
                quantile_us(t, 0.99)
            );
        }
        // A burst: one tell to each of `burst` entities of fresh shards,
        // then an ask to each (behind its tell), all in flight at once.
        let fresh: Vec<EntityRef<Msg>> =
            (0..burst).map(|_| self.fresh()).collect::<Result<_, _>>()?;
        for warm in ["cold", "warm"] {
            let start = Instant::now();
            for (i, e) in fresh.iter().enumerate() {
                e.tell(Msg::Tell(payload(i as u64)));
            }
            let asks: Vec<_> = fresh.iter().map(|e| e.ask(Msg::Count, TIMEOUT)).collect();
            for a in asks {
                a.wait().map_err(|e| format!("burst: {e}"))?;
            }
            let t = start.elapsed();
            line += &format!(
                " burst_{warm}_ms={:.1} burst_{warm}_first_msgs_per_s={:.0}",
                t.as_secs_f64() * 1000.0,
                burst as f64 / t.as_secs_f64()
            );
        }
        Ok(line)
    }

    fn spread(&mut self, prefix: &str, n: usize, batch: usize) -> Result<String, String> {
        let start = Instant::now();
        let mut by = BTreeMap::<String, usize>::new();
        let mut failed = 0;
        let ids: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
        for chunk in ids.chunks(batch.max(1)) {
            let asks: Vec<_> = chunk
                .iter()
                .map(|id| self.entity(id.clone()).ask(Msg::Where, TIMEOUT))
                .collect();
            for a in asks {
                match a.wait() {
                    Ok(node) => *by.entry(node).or_default() += 1,
                    Err(_) => failed += 1,
                }
            }
        }
        let list: Vec<String> = by.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        Ok(format!(
            "spread n={n} failed={failed} by={} ms={:.1}",
            list.join(","),
            start.elapsed().as_secs_f64() * 1000.0
        ))
    }

    fn probe(
        &mut self,
        prefix: &str,
        n: usize,
        victim: &str,
        interval: Duration,
    ) -> Result<String, String> {
        let mut found = None;
        for i in 0..n {
            let e = self.entity(format!("{prefix}-{i}"));
            if e.ask(Msg::Where, TIMEOUT).wait().ok().as_deref() == Some(victim) {
                found = Some(e);
                break;
            }
        }
        let e = found.ok_or_else(|| format!("no entity of {prefix}-* runs on {victim}"))?;
        say(&format!("armed id={} at={}", e.id(), epoch_us()));
        let start = Instant::now();
        let mut pending = Vec::new();
        let mut sent = 0u64;
        loop {
            pending.push(e.ask(Msg::Where, Duration::from_secs(60)));
            sent += 1;
            std::thread::sleep(interval);
            let now = epoch_us();
            let mut answered = None;
            pending.retain_mut(|a| match a.try_take() {
                None => true,
                Some(Ok(node)) => {
                    if node != victim {
                        answered = Some(node);
                    }
                    false
                }
                Some(Err(_)) => false,
            });
            if let Some(node) = answered {
                return Ok(format!(
                    "probed id={} answered_at={now} from={node} asks={sent} armed_ms={:.0}",
                    e.id(),
                    start.elapsed().as_secs_f64() * 1000.0
                ));
            }
            if start.elapsed() > Duration::from_secs(120) {
                return Err(format!("probe: {} never answered elsewhere", e.id()));
            }
        }
    }

    fn plain(&mut self, n: usize) -> Result<String, String> {
        let before = rss_kb();
        let node: std::sync::Arc<str> = self.name.as_str().into();
        let mut sinks = Vec::with_capacity(n);
        for _ in 0..n {
            let node = std::sync::Arc::clone(&node);
            sinks.push(
                self.system
                    .spawn_anonymous(Props::new(move || Sink {
                        told: 0,
                        node: std::sync::Arc::clone(&node),
                        entity: false,
                    }))
                    .map_err(|e| e.to_string())?,
            );
        }
        // Every one started and handling messages.
        for chunk in sinks.chunks(5000) {
            let asks: Vec<_> = chunk.iter().map(|s| s.ask(Msg::Count, TIMEOUT)).collect();
            for a in asks {
                a.wait().map_err(|e| e.to_string())?;
            }
        }
        let after = rss_kb();
        for s in &sinks {
            s.stop();
        }
        Ok(format!(
            "plain n={n} rss_before_kb={before} rss_after_kb={after} bytes_per_actor={:.0}",
            (after.saturating_sub(before) * 1024) as f64 / n as f64
        ))
    }

    fn run(&mut self, words: &[&str]) -> Result<String, String> {
        let num = |s: &str| s.parse::<u64>().map_err(|e| format!("`{s}`: {e}"));
        match words {
            ["warm", target, n, m, window] => self.warm(target, num(n)?, num(m)?, num(window)?),
            ["cold", k, burst] => self.cold(num(k)? as usize, num(burst)? as usize),
            ["spread", prefix, n, batch] => {
                self.spread(prefix, num(n)? as usize, num(batch)? as usize)
            }
            ["probe", prefix, n, victim, ms] => self.probe(
                prefix,
                num(n)? as usize,
                victim,
                Duration::from_millis(num(ms)?),
            ),
            ["rss"] => Ok(format!(
                "rss kb={} entities={}",
                rss_kb(),
                ENTITIES.load(Ordering::Relaxed)
            )),
            ["plain", n] => self.plain(num(n)? as usize),
            _ => Err(format!("unknown command: {}", words.join(" "))),
        }
    }
}

const USAGE: &str =
    "usage: cluster_bench_node node <nats-url> <node> [--lease-ms N] [--rebalance-ms N] \
                     [--shards N] | watch <nats-url>";

fn node(url: &str, name: &str, options: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let (mut lease_ms, mut rebalance_ms, mut shards) = (6000u64, 1000u64, 1000u32);
    for pair in options.chunks(2) {
        match pair {
            [k, v] if k == "--lease-ms" => lease_ms = v.parse()?,
            [k, v] if k == "--rebalance-ms" => rebalance_ms = v.parse()?,
            [k, v] if k == "--shards" => shards = v.parse()?,
            _ => return Err(USAGE.into()),
        }
    }
    let mut settings = ClusterSettings::default()
        .shards(shards)
        .passivation(None, None)
        .rebalance(
            Duration::from_millis(rebalance_ms),
            Duration::from_secs(1),
            1,
        );
    if lease_ms != 6000 {
        let lease = Duration::from_millis(lease_ms);
        settings = settings.lease(lease, lease / 6, lease / 6);
    }
    let system = ActorSystem::builder().name(name).build()?;
    let remote = Remote::connect(&system, RemoteSettings::new(url, CLUSTER, name))?;
    remote.add_to_coordinated_shutdown()?;
    let cluster = Cluster::join(&remote, settings)?;
    cluster.add_to_coordinated_shutdown()?;
    let node: std::sync::Arc<str> = name.into();
    let n = std::sync::Arc::clone(&node);
    let sink = system.spawn(
        Props::new(move || Sink {
            told: 0,
            node: std::sync::Arc::clone(&n),
            entity: false,
        }),
        "sink",
    )?;
    remote.expose(&sink, &format!("bench-sink-{name}"))?;
    let n = std::sync::Arc::clone(&node);
    let region = cluster.start_region("bench", move |_: &EntityInfo| {
        let node = std::sync::Arc::clone(&n);
        Props::new(move || Sink {
            told: 0,
            node: std::sync::Arc::clone(&node),
            entity: true,
        })
    })?;
    say(&format!(
        "ready node={name} rss_kb={} at={}",
        rss_kb(),
        epoch_us()
    ));
    let terminated = system.when_terminated();
    let mut driver = Node {
        name: name.to_owned(),
        system: system.clone(),
        remote: remote.clone(),
        region,
        shards,
        targets: HashMap::new(),
        used: HashSet::new(),
        next_fresh: 0,
    };
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            let words: Vec<&str> = line.split_whitespace().collect();
            if words == ["exit"] {
                drop(driver.system.terminate());
                break;
            }
            match driver.run(&words) {
                Ok(out) => say(&out),
                Err(e) => say(&format!("error {e}")),
            }
        }
    });
    let report = terminated.wait();
    drop((cluster, remote));
    say(&format!(
        "terminated clean={} at={}",
        report.clean(),
        epoch_us()
    ));
    Ok(())
}

/// Follows the bucket from a connection of its own: one line per write.
fn watch(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    use futures_util::StreamExt;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let client = async_nats::connect(url).await?;
        let js = async_nats::jetstream::new(client);
        let kv = js.get_key_value(format!("{CLUSTER}-shards")).await?;
        let mut entries = kv.watch_all().await?;
        say(&format!("watching at={}", epoch_us()));
        while let Some(entry) = entries.next().await {
            let entry = entry?;
            let op = match entry.operation {
                async_nats::jetstream::kv::Operation::Put => "put",
                async_nats::jetstream::kv::Operation::Delete => "del",
                async_nats::jetstream::kv::Operation::Purge => "purge",
            };
            say(&format!("W {} {op} {}", epoch_us(), entry.key));
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [role, url, name, options @ ..] if role == "node" => node(url, name, options),
        [role, url] if role == "watch" => watch(url),
        _ => Err(USAGE.into()),
    }
}
