//! A cluster node for the process tests (tests/processes.rs), with a
//! witness on its standard output: every activation, stop and delivery of
//! an entity is printed with its fencing token and the time on the
//! machine's monotonic clock (`CLOCK_MONOTONIC`, the same for every
//! process on the machine), so that a test reading every node's output
//! can check that no entity ever acted on two nodes at once, that tokens
//! only rise, and what each entity received, from whom, in which order.
//!
//! Usage: `witness_node <nats-url> <node> [--lease-ms N]`, then commands
//! on standard input, one per line:
//!
//! * `touch <n> <k>`: a plain tell of number `k` to entities `acct-0` to
//!   `acct-<n-1>` (prints `touched`);
//! * `rsend <n> <per>`: reliable tells of 1 to `per` to each of them,
//!   round-robin (prints `rsent ms=<elapsed>` once all are confirmed);
//! * `psend <n> <per>`: the same as plain tells (prints `psent`);
//! * `stell <k>`: a plain tell of number `k` to the cluster singleton
//!   `ledger` (an entity of the same kind, its id `ledger`; prints
//!   `stold`);
//! * `inc`: this node's incarnation and whether it is fenced;
//! * `exit`: leaves in order (as SIGTERM does).
//!
//! Output: `ready <node>`; `start <id> <token> <ns>`; `stop <id> <token>
//! <ns>`; `got <id> <from> <n> <token> <ns>`; `terminated clean=<bool>`.
//!
//! ```sh
//! nats-server -js -sd /tmp/js -p 4222 &
//! cargo run -p proscenium-cluster --example witness_node -- nats://127.0.0.1:4222 a
//! ```

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use proscenium::prelude::*;
use proscenium_cluster::{Cluster, ClusterSettings, EntityInfo, Region, Singleton};
use proscenium_remote::{Remote, RemoteSettings};
use serde::{Deserialize, Serialize};

/// A numbered message from a node.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Rec {
    from: String,
    n: u64,
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
}

impl Actor for Acct {
    type Msg = Rec;
    fn pre_start(&mut self, _: &mut Context<Self>) -> Outcome {
        say(&format!("start {} {} {}", self.id, self.token, now_ns()));
        Ok(())
    }
    fn post_stop(&mut self, _: &mut Context<Self>) {
        say(&format!("stop {} {} {}", self.id, self.token, now_ns()));
    }
    fn receive(&mut self, _: &mut Context<Self>, msg: Rec) -> Outcome {
        say(&format!(
            "got {} {} {} {} {}",
            self.id,
            msg.from,
            msg.n,
            self.token,
            now_ns()
        ));
        Ok(())
    }
}

fn count(s: &str) -> Result<u64, String> {
    s.parse().map_err(|e| format!("`{s}`: {e}"))
}

fn run(
    node: &str,
    cluster: &Cluster,
    region: &Region<Rec>,
    ledger: &Singleton<Rec>,
    words: &[&str],
) -> Result<String, String> {
    match words {
        ["stell", k] => {
            ledger.proxy().tell(Rec {
                from: node.to_owned(),
                n: count(k)?,
            });
            Ok("stold".into())
        }
        ["touch", n, k] => {
            let k = count(k)?;
            for i in 0..count(n)? {
                region.entity_ref(format!("acct-{i}")).tell(Rec {
                    from: node.to_owned(),
                    n: k,
                });
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
                    let msg = Rec {
                        from: node.to_owned(),
                        n: k,
                    };
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
                    region.entity_ref(format!("acct-{i}")).tell(Rec {
                        from: node.to_owned(),
                        n: k,
                    });
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

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (url, node, lease) = match args.as_slice() {
        [url, node] => (url.clone(), node.clone(), 6000),
        [url, node, flag, ms] if flag == "--lease-ms" => (url.clone(), node.clone(), ms.parse()?),
        _ => return Err("usage: witness_node <nats-url> <node> [--lease-ms N]".into()),
    };
    let lease = Duration::from_millis(lease);
    let settings = ClusterSettings::default()
        .lease(lease, lease / 8, lease / 4)
        .reliable_resend_after(Duration::from_millis(500));
    let system = ActorSystem::builder().name(node.as_str()).build()?;
    let remote = Remote::connect(&system, RemoteSettings::new(url, "witness", node.as_str()))?;
    remote.add_to_coordinated_shutdown()?;
    let cluster = Cluster::join(&remote, settings)?;
    cluster.add_to_coordinated_shutdown()?;
    let region = cluster.start_region("acct", |e: &EntityInfo| {
        let (id, token) = (e.id.clone(), e.fencing_token);
        Props::new(move || Acct {
            id: id.clone(),
            token,
        })
    })?;
    let ledger = cluster.start_singleton("ledger", |e: &EntityInfo| {
        let (id, token) = (e.id.clone(), e.fencing_token);
        Props::new(move || Acct {
            id: id.clone(),
            token,
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
