//! A proscenium-remote node in its own process, for the multi-process
//! tests (remote/tests/processes.rs) and as a small example.
//!
//! ```sh
//! nats-server -p 4222 &
//! cargo run -p proscenium-remote --example node -- nats://127.0.0.1:4222 demo a
//! ```
//!
//! It exposes a counter as `counter-<node>`, joins the coordinated
//! shutdown (SIGTERM or Ctrl-C leaves the cluster in order), prints
//! `ready`, then reads commands on stdin, one a line:
//!
//! * `talk <peer> [patience-ms]`: waits until `counter-<peer>` answers
//!   (asking again while no node serves it, for up to `patience-ms`,
//!   10 000 by default), tells it `Add(1)` 100 times, asks for its count
//!   and prints `got <n>`, or `error talk <peer>: <what happened>`;
//! * `exit`: runs the coordinated shutdown.
//!
//! Messages: `Add(u64)`, `Get(reply)`, and `Slow(ms, reply)`, which prints
//! `slow-started` and answers after `ms` milliseconds from another thread.
//! Arguments: `<nats-url> <cluster> <node> [heartbeat-ms failure-detector-ms]`,
//! or `--config <node.toml>`: the settings from a `[remote]` table, with
//! credentials, TLS and the cluster key (README, "More than one machine";
//! with the server of `examples/nats-server.conf`):
//!
//! ```sh
//! cargo run -p proscenium-remote --example node -- --config a.toml
//! ```

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use proscenium::prelude::*;
use proscenium_remote::{Remote, RemoteAskError, RemoteReply, RemoteSettings};
use serde::{Deserialize, Serialize};

/// The counter's protocol.
#[derive(Debug, Serialize, Deserialize)]
enum Cmd {
    Add(u64),
    Get(RemoteReply<u64>),
    Slow(u64, RemoteReply<u64>),
}

struct Counter(u64);

impl Actor for Counter {
    type Msg = Cmd;
    fn receive(&mut self, _: &mut Context<Self>, msg: Cmd) -> Outcome {
        match msg {
            Cmd::Add(n) => self.0 += n,
            Cmd::Get(reply) => reply.send(self.0),
            Cmd::Slow(ms, reply) => {
                say("slow-started");
                let n = self.0;
                // Slow work off the actor's worker; the reply travels with it.
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(ms));
                    reply.send(n);
                });
            }
        }
        Ok(())
    }
}

const USAGE: &str =
    "usage: node <nats-url> <cluster> <node> [heartbeat-ms fd-ms] | node --config <node.toml>";

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The remote's phase lines ("remote: ...") on stderr.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::INFO)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let settings = match args.as_slice() {
        [flag, path] if flag == "--config" => RemoteSettings::from_toml_file(path)?,
        [url, cluster, node, rest @ ..] => {
            let settings = RemoteSettings::new(url.as_str(), cluster.as_str(), node.as_str());
            match rest {
                [] => settings,
                [hb, fd] => settings.failure_detector(
                    Duration::from_millis(hb.parse()?),
                    Duration::from_millis(fd.parse()?),
                ),
                _ => return Err(USAGE.into()),
            }
        }
        _ => return Err(USAGE.into()),
    };
    let node = settings.node.clone();
    let system = ActorSystem::builder().name(node.as_str()).build()?;
    let remote = Remote::connect(&system, settings)?;
    remote.add_to_coordinated_shutdown()?;
    let counter = system.spawn(Props::new(|| Counter(0)), "counter")?;
    remote.expose(&counter, &format!("counter-{node}"))?;
    say("ready");

    let terminated = system.when_terminated();
    let commands = {
        let remote = remote.clone();
        let system = system.clone();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines().map_while(Result::ok) {
                let words: Vec<&str> = line.split_whitespace().collect();
                match words.as_slice() {
                    ["talk", peer, patience @ ..] if patience.len() <= 1 => {
                        let patience = match patience.first().map(|p| p.parse::<u64>()) {
                            None => Ok(Duration::from_secs(10)),
                            Some(Ok(ms)) => Ok(Duration::from_millis(ms)),
                            Some(Err(e)) => Err(format!("patience `{}`: {e}", patience[0])),
                        };
                        match patience.and_then(|p| talk(&remote, peer, p)) {
                            Ok(n) => say(&format!("got {n}")),
                            Err(e) => say(&format!("error talk {peer}: {e}")),
                        }
                    }
                    ["exit"] => {
                        drop(system.terminate());
                        break;
                    }
                    _ => say(&format!("unknown command: {line}")),
                }
            }
        })
    };
    drop(commands);
    let report = terminated.wait();
    drop(remote);
    say(&format!("terminated clean={}", report.clean()));
    Ok(())
}

fn talk(remote: &Remote, peer: &str, patience: Duration) -> Result<u64, String> {
    let name = format!("counter-{peer}");
    let counter = remote
        .actor_ref::<Cmd>(&name)
        .map_err(|e| format!("`{name}`: {e}"))?;
    let ask = |what: &str| {
        let n = counter.ask(Cmd::Get, Duration::from_secs(10)).wait();
        n.map_err(|e| format!("{what} to `{name}` failed: {e}"))
    };
    // Wait until the peer's name is visible from here: across a NATS
    // cluster the subscription reaches the other servers shortly after the
    // expose, and until then an ask finds no responders, at once. Nothing
    // announces that moment, so ask again after a short pause.
    let started = Instant::now();
    let mut asks = 0;
    loop {
        asks += 1;
        match counter.ask(Cmd::Get, Duration::from_secs(10)).wait() {
            Ok(_) => break,
            Err(RemoteAskError::NoResponders(_)) if started.elapsed() < patience => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(RemoteAskError::NoResponders(_)) => {
                return Err(format!(
                    "no node serves `{name}`: {asks} asks over {:?} found no responders (is \
                     node {peer} running, in cluster {}, on this NATS server or one routed to it?)",
                    started.elapsed(),
                    remote.settings().cluster,
                ));
            }
            Err(e) => return Err(format!("the first ask to `{name}` failed: {e}")),
        }
    }
    for i in 0..100 {
        counter
            .tell(Cmd::Add(1))
            .map_err(|e| format!("tell {i} of 100 to `{name}` failed: {e}"))?;
    }
    ask("the count ask")
}
