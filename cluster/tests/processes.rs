//! Nodes as OS processes on a real JetStream server.
//!
//! The sharded counter example (`examples/counter.rs`): three nodes, 10,000
//! entities over 1,000 shards answered from any node; SIGKILL of a node: its entities answer
//! again on the others within the lease timeout plus 2 s (the gap's
//! percentiles printed); SIGTERM of a node: it hands its shards off and
//! leaves in order, and every entity answers.
//!
//! The witness node (`examples/witness_node.rs`), which prints every
//! activation, stop and delivery of an entity with its fencing token and
//! the machine's monotonic time: reliable messages across a SIGTERM
//! (issue 36, check 4), a node paused with SIGSTOP past its lease (check
//! 3), a fourth node joining (check 5: the rebalance read from the
//! bucket's history), a rolling restart, back to back and with rebalances
//! between the steps (check 6: each shard moves at most twice, and no
//! hand-off is marked while the membership is unsettled, read from the
//! bucket's history), passivation by idle
//! time and by a limit (check 7), the singleton killed and handed over
//! (check 8), the nats-server restarted briefly and down past the lease
//! (check 9), remember-entities after a SIGKILL (check 10), and a node
//! cut from NATS by a TCP proxy while its entities tick on (check 12); in
//! all, the witness (check 2): no entity ever acts in two activations at
//! once, and tokens only rise. (Check 11, permissions, is
//! tests/permissions.rs.)

mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use support::{eventually, require_jetstream, BucketWatch, Change, NatsServer, Proxy, What, GUARD};

/// An example binary, built by `cargo test` next to the test binaries.
fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let bin = dir.join("examples").join(name);
    assert!(
        bin.is_file(),
        "{} is missing: `cargo test -p proscenium-cluster` builds it (with a `--test` filter, \
         build it first: `cargo build -p proscenium-cluster --example {name}`)",
        bin.display()
    );
    bin
}

struct Node {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    /// Every line so far (the witness reads them all).
    seen: Vec<String>,
}

impl Node {
    fn start(url: &str, name: &str, lease_ms: u64) -> Node {
        Node::start_example("counter", url, name, lease_ms)
    }

    fn start_example(example: &str, url: &str, name: &str, lease_ms: u64) -> Node {
        Node::start_args(example, url, name, &["--lease-ms", &lease_ms.to_string()])
    }

    /// The example `example` as node `name` on `url`, with `options`.
    fn start_args(example: &str, url: &str, name: &str, options: &[&str]) -> Node {
        let mut child = Command::new(example_binary(example))
            .args([url, name])
            .args(options)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start a node");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let stdin = child.stdin.take().expect("stdin");
        let mut node = Node {
            child,
            stdin,
            lines,
            seen: Vec::new(),
        };
        node.expect("ready");
        node
    }

    /// The next line starting with `prefix` (an `error` line fails).
    fn expect(&mut self, prefix: &str) -> String {
        let deadline = Instant::now() + GUARD * 4;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.starts_with(prefix) => {
                    self.seen.push(l.clone());
                    return l;
                }
                Ok(l) if l.starts_with("error") => panic!("waiting for {prefix:?}: {l}"),
                Ok(l) => self.seen.push(l),
                Err(e) => panic!("no {prefix:?} line: {e:?}"),
            }
        }
    }

    fn run(&mut self, command: &str, answer: &str) -> String {
        writeln!(self.stdin, "{command}").expect("write");
        self.stdin.flush().expect("flush");
        self.expect(answer)
    }

    /// Every line printed so far (read without waiting), then all of them.
    fn drain(&mut self) -> &[String] {
        while let Ok(l) = self.lines.try_recv() {
            self.seen.push(l);
        }
        &self.seen
    }

    /// Waits until a line starting with `prefix` has been printed (at any
    /// time: lines read before are searched too), and returns it.
    fn saw(&mut self, prefix: &str) -> String {
        let mut found = None;
        eventually(&format!("a line {prefix:?}"), || {
            found = self.drain().iter().find(|l| l.starts_with(prefix)).cloned();
            found.is_some()
        });
        found.expect("found")
    }

    /// The entities of the type (not the singleton) running here by its
    /// output so far: started and not stopped since.
    fn live(&mut self) -> std::collections::HashSet<String> {
        let mut live = std::collections::HashSet::new();
        let of_type = |e: &Event| match e {
            Event::Start { id, .. } | Event::Stop { id } => id.starts_with("acct-"),
            _ => false,
        };
        for e in events(self.drain()).into_iter().filter(of_type) {
            match e {
                Event::Start { id, .. } => {
                    live.insert(id);
                }
                Event::Stop { id } => {
                    live.remove(&id);
                }
                _ => {}
            }
        }
        live
    }

    /// This node's incarnation, and whether it is fenced.
    fn incarnation(&mut self) -> (String, bool) {
        let line = self.run("inc", "inc");
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["inc", inc, fenced] => ((*inc).to_owned(), *fenced == "fenced=true"),
            _ => panic!("an inc line: {line:?}"),
        }
    }

    /// Every line until the process has ended (its output closed).
    fn drain_to_end(&mut self) -> &[String] {
        let deadline = Instant::now() + GUARD;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => self.seen.push(l),
                Err(mpsc::RecvTimeoutError::Disconnected) => return &self.seen,
                Err(e) => panic!("the node's output did not end: {e:?}"),
            }
        }
    }

    fn signal(&self, sig: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("pid");
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The tests of this file one at a time: each runs three or four nodes
/// with 2 s leases and measures gaps against them; run together on a
/// small machine they would measure each other.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `key=value` of a result line.
fn field(line: &str, key: &str) -> f64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line:?}"))
}

#[test]
fn three_processes_share_the_entities_and_survive_a_kill_and_a_leave() {
    require_jetstream!();
    let _one_at_a_time = serial();
    let server = NatsServer::start();
    let lease_ms = 2000;
    let mut a = Node::start(&server.url(), "a", lease_ms);
    let mut b = Node::start(&server.url(), "b", lease_ms);
    let c = Node::start(&server.url(), "c", lease_ms);
    // Issue 36, check 1: 10,000 entities over 1,000 shards.
    let n = 10_000;
    a.run(&format!("fill {n}"), "filled");
    let checked = b.run(&format!("check {n}"), "checked");
    assert_eq!(field(&checked, "ok"), f64::from(n), "{checked}");
    eprintln!("from b: {checked}");
    let owners = a.run(&format!("owners {n}"), "owners");
    eprintln!("{owners}");
    for node in ["a", "b", "c"] {
        assert!(owners.contains(&format!("{node}=")), "{owners}");
    }

    // SIGKILL: c's entities answer again on a or b.
    c.signal(libc::SIGKILL);
    // The gap: from the kill until an entity of each of c's shards
    // answers on a or b.
    let recovered = a.run("recover c 250", "recovered");
    eprintln!("after SIGKILL of c (lease {lease_ms} ms): {recovered}");
    assert!(field(&recovered, "shards") > 0.0, "{recovered}");
    assert!(
        field(&recovered, "last_ms") < f64::from(lease_ms as u32 + 2000),
        "{recovered}"
    );
    let checked = a.run(&format!("check {n}"), "checked");
    assert_eq!(field(&checked, "ok"), f64::from(n), "{checked}");
    let owners = a.run(&format!("owners {n}"), "owners");
    assert!(!owners.contains("c="), "{owners}");
    drop(c);

    // SIGTERM: b hands its shards off and leaves in order.
    let left = Instant::now();
    b.signal(libc::SIGTERM);
    assert_eq!(b.expect("terminated"), "terminated clean=true");
    eprintln!("SIGTERM of b: terminated after {:?}", left.elapsed());
    assert!(left.elapsed() < Duration::from_secs(10));
    let checked = a.run(&format!("check {n}"), "checked");
    assert_eq!(field(&checked, "ok"), f64::from(n), "{checked}");
    let owners = a.run(&format!("owners {n}"), "owners");
    assert_eq!(owners, format!("owners a={n}"));
    a.run("exit", "terminated");
}

/// Nanoseconds on the machine's monotonic clock: the witness node's.
fn mono_ns() -> u128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer to
    // a local.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0);
    u128::try_from(ts.tv_sec).expect("secs") * 1_000_000_000
        + u128::try_from(ts.tv_nsec).expect("nanos")
}

/// One line of the witness: an entity's activation, stop or delivery.
#[derive(Debug, Clone)]
enum Event {
    Start {
        id: String,
        token: u64,
        ns: u128,
    },
    Stop {
        id: String,
    },
    Got {
        id: String,
        from: String,
        n: u64,
        token: u64,
        ns: u128,
    },
    /// The entity's own timer: it acts (as one that writes to a store).
    Tick {
        id: String,
        token: u64,
        ns: u128,
    },
}

/// The witness events of a node's output, in its order.
fn events(lines: &[String]) -> Vec<Event> {
    lines
        .iter()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            Some(match w.as_slice() {
                ["start", id, token, ns] => Event::Start {
                    id: (*id).to_owned(),
                    token: token.parse().ok()?,
                    ns: ns.parse().ok()?,
                },
                ["stop", id, _token, _ns] => Event::Stop {
                    id: (*id).to_owned(),
                },
                ["got", id, from, n, token, ns] => Event::Got {
                    id: (*id).to_owned(),
                    from: (*from).to_owned(),
                    n: n.parse().ok()?,
                    token: token.parse().ok()?,
                    ns: ns.parse().ok()?,
                },
                ["tick", id, token, ns] => Event::Tick {
                    id: (*id).to_owned(),
                    token: token.parse().ok()?,
                    ns: ns.parse().ok()?,
                },
                _ => return None,
            })
        })
        .collect()
}

/// One activation of an entity, as the witness saw it: its node, token,
/// when it started, and when it last acted (its start or last delivery).
#[derive(Debug, Clone)]
struct Activation {
    node: String,
    token: u64,
    start: u128,
    last: u128,
}

/// The witness (issue 36, check 2), from every node's output: per entity,
/// its activations never act at the same time (each one's span, from its
/// start to its last delivery or tick, is disjoint from every other's), and an
/// activation that starts later never has a lower token.
fn witness(nodes: &[(&str, &[String])]) -> HashMap<String, Vec<Activation>> {
    let mut by_entity: HashMap<String, Vec<Activation>> = HashMap::new();
    for (node, lines) in nodes {
        let mut open: HashMap<String, usize> = HashMap::new();
        for e in events(lines) {
            match e {
                Event::Start { id, token, ns } => {
                    let acts = by_entity.entry(id.clone()).or_default();
                    acts.push(Activation {
                        node: (*node).to_owned(),
                        token,
                        start: ns,
                        last: ns,
                    });
                    open.insert(id, acts.len() - 1);
                }
                Event::Got { id, ns, .. } | Event::Tick { id, ns, .. } => {
                    let i = open[&id];
                    let a = &mut by_entity.get_mut(&id).expect("started")[i];
                    a.last = a.last.max(ns);
                }
                Event::Stop { id, .. } => {
                    open.remove(&id);
                }
            }
        }
    }
    for (id, acts) in &mut by_entity {
        acts.sort_by_key(|a| a.start);
        for w in acts.windows(2) {
            assert!(
                w[0].last < w[1].start,
                "{id} acted on {} (token {}) until {} ns, after it started on {} (token {}) at \
                 {} ns",
                w[0].node,
                w[0].token,
                w[0].last,
                w[1].node,
                w[1].token,
                w[1].start
            );
            assert!(
                w[0].token <= w[1].token,
                "{id}: token {} on {} after {} on {}",
                w[1].token,
                w[1].node,
                w[0].token,
                w[0].node
            );
        }
    }
    by_entity
}

/// What each entity got from `from`, in the order it got it: activations
/// by token (the witness checked they do not overlap), each in its node's
/// order.
fn received(nodes: &[(&str, &[String])], from: &str) -> HashMap<String, Vec<u64>> {
    let mut got: Vec<(String, u64, u128, u64)> = Vec::new();
    for (_, lines) in nodes {
        for e in events(lines) {
            if let Event::Got {
                id,
                from: f,
                n,
                token,
                ns,
            } = e
            {
                if f == from {
                    got.push((id, token, ns, n));
                }
            }
        }
    }
    got.sort_by_key(|(id, token, ns, _)| (id.clone(), *token, *ns));
    let mut out: HashMap<String, Vec<u64>> = HashMap::new();
    for (id, _, _, n) in got {
        out.entry(id).or_default().push(n);
    }
    out
}

/// Reliable delivery confirms a message once its entity has *handled* it
/// (a receipt behind it ran), as Akka's sharding consumer confirms after
/// processing: a SIGKILL of the owner while the messages wait in the
/// entity's mailbox loses none of them. Before (confirmed once in the
/// mailbox), the producer dropped them at the confirmation and they died
/// with the owner. Entity x of node c is kept busy; a sends it 1 to 10
/// reliably; two plain tells through the same path to another entity of c
/// show that c's region has handed x all ten and flushed a turn since
/// (what it confirms, it has sent); c is killed; x runs on a and gets all
/// ten.
#[test]
fn a_sigkill_of_the_owner_loses_no_reliable_message_its_entity_had_not_handled() {
    require_jetstream!();
    let _one_at_a_time = serial();
    let server = NatsServer::start();
    let start = |name| Node::start_example("witness_node", &server.url(), name, 2000);
    let (mut a, mut c) = (start("a"), start("c"));
    touch_all(&mut [&mut a, &mut c], 0, 20, 0);
    let on_c: Vec<String> = c.live().into_iter().collect();
    assert!(on_c.len() >= 2, "c runs two of the 20 at least: {on_c:?}");
    let (x, y) = (&on_c[0], &on_c[1]);
    a.run(&format!("busy {x} 20000"), "told");
    for k in 1..=10 {
        a.run(&format!("rtell {x} {k}"), "told");
    }
    for k in [1000, 1001] {
        a.run(&format!("tell {y} {k}"), "told");
        c.saw(&format!("got {y} a {k} "));
    }
    let unconfirmed = a.run("unconfirmed", "unconfirmed ");
    eprintln!("before the kill, a has {unconfirmed}");
    c.signal(libc::SIGKILL);
    let cl = c.drain_to_end().to_vec();
    eventually("x gets 1 to 10 on a", || {
        let al = a.drain().to_vec();
        let got = received(&[("a", &al[..])], "a");
        got.get(x).is_some_and(|v| (1..=10).all(|k| v.contains(&k)))
    });
    let al = a.drain().to_vec();
    let got = received(&[("a", &al[..]), ("c", &cl[..])], "a");
    let xs: Vec<u64> = got[x]
        .iter()
        .copied()
        .filter(|k| (1..=10).contains(k))
        .collect();
    assert_eq!(xs, (1..=10).collect::<Vec<_>>(), "once each, in order");
    a.run("exit", "terminated");
    let al = a.drain_to_end().to_vec();
    witness(&[("a", &al[..]), ("c", &cl[..])]);
}

/// Issue 36, check 4: a SIGTERM of a node during 50,000 reliable messages
/// to 1,000 entities (50 each, from node a): nothing lost, nothing twice,
/// each entity's in the order sent; the node's phases done within 10 s.
/// The same with plain tells and another node's SIGTERM: what the at most
/// once path lost is counted and printed. The witness is clean throughout.
#[test]
fn a_sigterm_during_reliable_messages_loses_nothing_and_delivers_nothing_twice() {
    require_jetstream!();
    let _one_at_a_time = serial();
    let server = NatsServer::start();
    let lease_ms = 2000;
    let start = |name| Node::start_example("witness_node", &server.url(), name, lease_ms);
    let (mut a, mut b, mut c, mut d) = (start("a"), start("b"), start("c"), start("d"));
    let (n, per): (u64, u64) = (1000, 50);
    // Every entity started, so that b and c run their share.
    a.run(&format!("touch {n} 0"), "touched");
    let started = |nodes: &mut [&mut Node]| {
        nodes
            .iter_mut()
            .map(|x| x.drain().iter().filter(|l| l.starts_with("start ")).count())
            .sum::<usize>()
    };
    let deadline = Instant::now() + GUARD;
    while (started(&mut [&mut a, &mut b, &mut c, &mut d]) as u64) < n {
        assert!(Instant::now() < deadline, "not every entity started");
        std::thread::sleep(Duration::from_millis(20));
    }

    // Reliable: b is sent SIGTERM as the burst begins.
    writeln!(a.stdin, "rsend {n} {per}").expect("write");
    a.stdin.flush().expect("flush");
    let term = Instant::now();
    b.signal(libc::SIGTERM);
    assert_eq!(b.expect("terminated"), "terminated clean=true");
    let phases = term.elapsed();
    let sent = a.expect("rsent");
    eprintln!(
        "reliable: {} messages, SIGTERM of b: {sent}, b's phases took {phases:?}",
        n * per
    );
    assert!(phases < Duration::from_secs(10), "{phases:?}");
    let (bl, cl, dl) = (
        b.drain_to_end().to_vec(),
        c.drain().to_vec(),
        d.drain().to_vec(),
    );
    let al = a.drain().to_vec();
    let all = [
        ("a", &al[..]),
        ("b", &bl[..]),
        ("c", &cl[..]),
        ("d", &dl[..]),
    ];
    let acts = witness(&all);
    let moved = acts
        .values()
        .filter(|v| v.iter().any(|x| x.node == "b") && v.len() > 1)
        .count();
    assert!(moved > 0, "some of b's entities moved");
    let got = received(&all, "a");
    let want: Vec<u64> = std::iter::once(0).chain(1..=per).collect();
    for i in 0..n {
        let id = format!("acct-{i}");
        assert_eq!(got.get(&id), Some(&want), "{id}: {:?}", acts.get(&id));
    }
    eprintln!(
        "reliable: each of {n} entities got 1..={per} once and in order; {moved} moved from b"
    );

    // Plain: c is sent SIGTERM as the burst begins; a last message to
    // each entity after the leave shows when the rest has landed.
    writeln!(a.stdin, "psend {n} {per}").expect("write");
    a.stdin.flush().expect("flush");
    c.signal(libc::SIGTERM);
    assert_eq!(c.expect("terminated"), "terminated clean=true");
    a.expect("psent");
    let last = per + 1;
    a.run(&format!("touch {n} {last}"), "touched");
    let landed = |nodes: &mut [&mut Node]| {
        let marker = format!(" a {last} ");
        nodes
            .iter_mut()
            .map(|x| {
                x.drain()
                    .iter()
                    .filter(|l| l.starts_with("got ") && l.contains(&marker))
                    .count()
            })
            .sum::<usize>()
    };
    let deadline = Instant::now() + GUARD;
    while (landed(&mut [&mut a, &mut d]) as u64) < n {
        assert!(
            Instant::now() < deadline,
            "the last messages did not all land"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (al, cl, dl) = (
        a.drain().to_vec(),
        c.drain_to_end().to_vec(),
        d.drain().to_vec(),
    );
    let all = [
        ("a", &al[..]),
        ("b", &bl[..]),
        ("c", &cl[..]),
        ("d", &dl[..]),
    ];
    witness(&all);
    let got = received(&all, "a");
    let mut delivered = 0;
    for v in got.values() {
        // After the reliable burst's 0..=per: the plain one's.
        let plain = &v[per as usize + 1..];
        let mut seen = std::collections::HashSet::new();
        assert!(
            plain.iter().all(|k| seen.insert(*k)),
            "plain refs deliver once: {plain:?}"
        );
        delivered += plain.iter().filter(|k| **k <= per).count();
    }
    eprintln!(
        "plain: {} messages, SIGTERM of c: {} lost (at most once)",
        n * per,
        n as usize * per as usize - delivered
    );
    a.run("exit", "terminated");
    d.run("exit", "terminated");
}

/// Issue 36, check 3: the owner of some shards paused (SIGSTOP) for twice
/// the lease timeout, then resumed: its entities run elsewhere meanwhile;
/// resumed, it delivers nothing to them (it fenced itself by its own
/// clock), the witness stays clean, and it comes back under a new
/// incarnation.
#[test]
fn a_node_paused_past_its_lease_delivers_nothing_after_it_and_rejoins_anew() {
    require_jetstream!();
    let _one_at_a_time = serial();
    let server = NatsServer::start();
    let lease_ms = 2000;
    let start = |name| Node::start_example("witness_node", &server.url(), name, lease_ms);
    let (mut a, mut b, mut c) = (start("a"), start("b"), start("c"));
    let n = 300;
    a.run(&format!("touch {n} 0"), "touched");
    let before = c.run("inc", "inc");
    let deadline = Instant::now() + GUARD;
    let on_c = loop {
        let k = c.drain().iter().filter(|l| l.starts_with("start ")).count();
        let all = k
            + a.drain().iter().filter(|l| l.starts_with("start ")).count()
            + b.drain().iter().filter(|l| l.starts_with("start ")).count();
        if all >= n {
            break k;
        }
        assert!(Instant::now() < deadline, "not every entity started");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(on_c > 0, "c runs some entities");

    c.signal(libc::SIGSTOP);
    let paused = Instant::now();
    // While c is paused: its entities are taken once its lease expires
    // (a's and b's clocks), and a message to each entity lands on a or b
    // (at most once: one sent to c before its lease expired is lost, and
    // sent again).
    touch_all(&mut [&mut a, &mut b], 0, n as u64, 1);
    let moved_after = paused.elapsed();
    // Paused for twice the lease timeout in all.
    let pause = Duration::from_millis(2 * lease_ms);
    if let Some(rest) = pause.checked_sub(paused.elapsed()) {
        std::thread::sleep(rest);
    }
    let resumed_ns = mono_ns();
    c.signal(libc::SIGCONT);
    let deadline = Instant::now() + GUARD;
    let after = loop {
        let inc = c.run("inc", "inc");
        if inc != before && inc.ends_with("fenced=false") {
            break inc;
        }
        assert!(Instant::now() < deadline, "c did not rejoin: {inc}");
        std::thread::sleep(Duration::from_millis(50));
    };
    eprintln!(
        "SIGSTOP of c for {pause:?}: its entities answered elsewhere {moved_after:?} after the \
         pause; resumed, it rejoined: {before} -> {after}"
    );
    // Everything from every node, then: c delivered nothing after it was
    // resumed under its old tokens, and the witness is clean.
    let cl = c.drain().to_vec();
    nothing_under_old_tokens_after(&cl, resumed_ns, "it resumed");
    let (al, bl) = (a.drain().to_vec(), b.drain().to_vec());
    witness(&[("a", &al[..]), ("b", &bl[..]), ("c", &cl[..])]);
    for x in [&mut a, &mut b, &mut c] {
        x.run("exit", "terminated");
    }
}

/// Issue 36, check 6: a rolling restart of all three nodes (each in turn
/// sent SIGTERM, then started again under its name, and every entity sent
/// a message before the next) moves each shard at most twice, and the
/// witness stays clean.
#[test]
fn a_rolling_restart_moves_each_shard_at_most_twice() {
    require_jetstream!();
    let _one_at_a_time = serial();
    let server = NatsServer::start();
    let lease_ms = 2000;
    let start = |name| Node::start_example("witness_node", &server.url(), name, lease_ms);
    let mut nodes = vec![("a", start("a")), ("b", start("b")), ("c", start("c"))];
    let n: u64 = 1000;
    // The output of every process, under a label of its own.
    let mut finished: Vec<(String, Vec<String>)> = Vec::new();
    let everyone = |nodes: &mut [(&str, Node)], from: usize, k: u64| {
        let mut refs: Vec<&mut Node> = nodes.iter_mut().map(|(_, x)| x).collect();
        touch_all(&mut refs, from, n, k);
    };
    everyone(&mut nodes, 0, 0);
    let restarted = Instant::now();
    for (round, i) in (0..nodes.len()).enumerate() {
        let name = nodes[i].0;
        nodes[i].1.signal(libc::SIGTERM);
        assert_eq!(nodes[i].1.expect("terminated"), "terminated clean=true");
        let lines = nodes[i].1.drain_to_end().to_vec();
        finished.push((format!("{name}#{round}"), lines));
        nodes[i].1 = start(name);
        // At most once: a message in flight to a node as it leaves is
        // lost; sent again until every entity has it.
        everyone(&mut nodes, i, round as u64 + 1);
    }
    let took = restarted.elapsed();
    for (name, x) in &mut nodes {
        x.run("exit", "terminated");
        finished.push(((*name).to_owned(), x.drain_to_end().to_vec()));
    }
    let labelled: Vec<(&str, &[String])> = finished
        .iter()
        .map(|(l, lines)| (l.as_str(), &lines[..]))
        .collect();
    let acts = witness(&labelled);
    // A shard's moves: its entities' activations after their first (every
    // entity was sent a message after each restart, so each move of its
    // shard started it again).
    let mut moves: HashMap<u32, usize> = HashMap::new();
    // The entities of the type (not the singleton `ledger`, which moves
    // with its node each time).
    for (id, a) in acts.iter().filter(|(id, _)| id.starts_with("acct-")) {
        let m = moves
            .entry(proscenium_cluster::shard_of(id, 1000))
            .or_default();
        if a.len() > 2 && *m < 2 {
            let path: Vec<&str> = a.iter().map(|x| x.node.as_str()).collect();
            eprintln!("{id} ran on {path:?}");
        }
        *m = (*m).max(a.len() - 1);
    }
    let mut histogram = std::collections::BTreeMap::<usize, usize>::new();
    for m in moves.values() {
        *histogram.entry(*m).or_default() += 1;
    }
    eprintln!("rolling restart of three nodes in {took:?}: shards by moves {histogram:?}");
    assert!(
        moves.values().all(|m| *m <= 2),
        "a shard moved more than twice: {histogram:?}"
    );
}

/// Issue 36, check 6, with rebalances between the steps: each of three
/// nodes in turn gets SIGTERM; while it is down every entity is sent a
/// message (its shards go to the other two), then it is started again
/// under its name, and the coordinator moves shards to it; the next step
/// waits until the bucket shows that rebalance settled (every shard
/// allocated, none in hand-off, no node above the least-shard strategy's
/// threshold). From the bucket's history, read by a watcher outside the
/// nodes: each shard moved at most twice, and no shard was marked for
/// hand-off within `rebalance-stable-for` of a change of the membership,
/// while a node was leaving, or while a lease went unrenewed past the
/// suspect threshold. The witness stays clean.
#[test]
fn a_rolling_restart_with_rebalances_between_steps_moves_each_shard_at_most_twice() {
    require_jetstream!();
    let _one_at_a_time = serial();
    let server = NatsServer::start();
    let (shards, rebalance_ms, lease_ms) = (60_usize, 300_u64, 2000_u64);
    let options = [
        "--lease-ms",
        &lease_ms.to_string(),
        "--shards",
        &shards.to_string(),
        "--rebalance-ms",
        &rebalance_ms.to_string(),
    ]
    .map(|o| o.to_owned());
    let options: Vec<&str> = options.iter().map(String::as_str).collect();
    let start = |name| Node::start_args("witness_node", &server.url(), name, &options);
    let mut nodes = vec![("a", start("a")), ("b", start("b")), ("c", start("c"))];
    // Before any shard is allocated (the bucket exists once a node runs).
    let watch = BucketWatch::start(&server.url(), "witness", "acct");
    let names = ["a", "b", "c"];
    // 600 ids cover the 60 shards (a stable hash: the same every run).
    let n: u64 = 600;
    let everyone = |nodes: &mut [(&str, Node)], from: usize, k: u64| {
        let mut refs: Vec<&mut Node> = nodes.iter_mut().map(|(_, x)| x).collect();
        touch_all(&mut refs, from, n, k);
    };
    // Settled: the least-shard strategy would pick nothing (no node above
    // both the share and the least loaded plus one), nothing in hand-off,
    // every shard allocated.
    let spread = || -> Vec<usize> { watch.with(|s| names.iter().map(|x| s.of(x)).collect()) };
    let settled = || {
        let counts = spread();
        let (share, least) = (shards.div_ceil(3), counts.iter().min().copied());
        watch.with(|s| s.owners.len() == shards && s.in_hand_off == 0)
            && counts
                .iter()
                .all(|c| least.is_some_and(|l| *c <= share || *c <= l + 1))
    };
    everyone(&mut nodes, 0, 0);
    eventually("the shards allocated, balanced", &settled);
    eprintln!("three nodes: shards {:?}", spread());
    let mut finished: Vec<(String, Vec<String>)> = Vec::new();
    // Moves are counted from here: the initial allocation may leave a node
    // one above the threshold, which a rebalance corrected before.
    let begun = watch.with(|s| s.history.len());
    let restarted = Instant::now();
    for i in 0..nodes.len() {
        let step = Instant::now();
        let name = nodes[i].0;
        nodes[i].1.signal(libc::SIGTERM);
        assert_eq!(nodes[i].1.expect("terminated"), "terminated clean=true");
        finished.push((format!("{name}#{i}"), nodes[i].1.drain_to_end().to_vec()));
        // Traffic while it is down: its shards go to the other two.
        let k = 2 * i as u64 + 1;
        everyone(&mut nodes, (i + 1) % 3, k);
        let down = spread();
        nodes[i].1 = start(name);
        let back = Instant::now();
        let rebalanced = eventually("the rebalance settled", &settled);
        everyone(&mut nodes, i, k + 1);
        eprintln!(
            "step {name}: shards {down:?} while it was down, {:?} {rebalanced:?} after it was \
             back; the step took {:?}",
            spread(),
            step.elapsed()
        );
        assert!(back.elapsed() < GUARD);
    }
    let took = restarted.elapsed();
    let (moves, history) = watch.with(|s| (s.moves(begun), s.history.clone()));
    let mut histogram = std::collections::BTreeMap::<usize, usize>::new();
    for m in moves.values() {
        *histogram.entry(*m).or_default() += 1;
    }
    eprintln!(
        "rolling restart of three nodes with rebalances between the steps in {took:?}: shards \
         by moves {histogram:?}"
    );
    for (shard, m) in &moves {
        if *m > 2 {
            eprintln!("shard {shard}: {:?}", owners_of(&history, *shard));
        }
    }
    assert_eq!(moves.len(), shards, "every shard was allocated before");
    assert!(
        moves.values().all(|m| *m <= 2),
        "a shard moved more than twice: {histogram:?}"
    );
    let renew = Duration::from_millis(lease_ms / 8);
    let marks = no_hand_off_while_unsettled(
        &history[begun..],
        Duration::from_millis(2 * rebalance_ms),
        renew * 2 + Duration::from_millis(100),
        renew,
    );
    eprintln!("{marks} hand-off marks, none while the membership was unsettled");
    assert!(marks > 0, "the coordinator rebalanced");
    finished.extend(finish(nodes));
    witness(&labelled(&finished));
}

/// Shard `shard`'s owners over `history`, in order (a node's incarnation
/// as its last four hex digits).
fn owners_of(history: &[Change], shard: u32) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in history {
        if let What::Shard {
            shard: s,
            node,
            inc,
            handoff,
        } = &c.what
        {
            if *s == shard {
                let hand = if *handoff { " handoff" } else { "" };
                out.push(format!("{node}/{:04x}{hand}", inc & 0xffff));
            }
        }
    }
    out
}

/// Issue 36, check 6's second half, read from the bucket's history as a
/// watcher saw it: no shard record was marked for hand-off within
/// `stable_for` (less `slack`) of a change of the membership (a lease
/// registered under a new incarnation, marked leaving, or deleted), while
/// a node's lease had been marked leaving for longer than `slack`, or
/// while a lease had gone unrenewed for longer than `suspect_after` (plus
/// `slack`). The slack is for the watcher's view and the coordinator's,
/// which see each change at about the same time. Returns how many marks
/// it checked.
fn no_hand_off_while_unsettled(
    history: &[Change],
    stable_for: Duration,
    suspect_after: Duration,
    slack: Duration,
) -> usize {
    // Per node: its incarnation, since when it is marked leaving, and when
    // its lease was last written.
    let mut leases: HashMap<&str, (u128, Option<Instant>, Instant)> = HashMap::new();
    let mut changed: Option<Instant> = None;
    let mut marks = 0;
    for c in history {
        match &c.what {
            What::Lease { node, inc, leaving } => {
                let before = leases.get(node.as_str()).copied();
                let since = match before {
                    Some((i, Some(t), _)) if i == *inc && *leaving => Some(t),
                    _ => leaving.then_some(c.at),
                };
                if before.is_none_or(|(i, l, _)| i != *inc || l.is_some() != *leaving) {
                    changed = Some(c.at);
                }
                leases.insert(node, (*inc, since, c.at));
            }
            What::LeaseGone { node } => {
                leases.remove(node.as_str());
                changed = Some(c.at);
            }
            What::Shard {
                shard,
                handoff: true,
                ..
            } => {
                marks += 1;
                if let Some(t) = changed {
                    let after = c.at.duration_since(t);
                    assert!(
                        after + slack >= stable_for,
                        "shard {shard} marked for hand-off {after:?} after the membership changed"
                    );
                }
                for (node, (_, leaving, renewed)) in &leases {
                    let leaving = leaving.map(|t| c.at.duration_since(t));
                    assert!(
                        leaving.is_none_or(|l| l <= slack),
                        "shard {shard} marked for hand-off while {node} was leaving ({leaving:?})"
                    );
                    let quiet = c.at.duration_since(*renewed);
                    assert!(
                        quiet <= suspect_after + slack,
                        "shard {shard} marked for hand-off while {node}'s lease had not been \
                         renewed for {quiet:?}"
                    );
                }
            }
            _ => {}
        }
    }
    marks
}

/// The first delivery to `id` after `since_ns` in any of `nodes`' output
/// (read so far): its node's index and time.
fn first_got_after(nodes: &mut [&mut Node], id: &str, since_ns: u128) -> Option<(usize, u128)> {
    let mut first: Option<(usize, u128)> = None;
    for (i, x) in nodes.iter_mut().enumerate() {
        for e in events(x.drain()) {
            if let Event::Got { id: got, ns, .. } = e {
                if got == id && ns > since_ns && first.is_none_or(|(_, f)| ns < f) {
                    first = Some((i, ns));
                }
            }
        }
    }
    first
}

/// Told to the singleton from `from` every 50 ms until it gets a message
/// after `since_ns` on one of `others`: that node's index and the gap.
fn singleton_back(from: usize, nodes: &mut [&mut Node], since_ns: u128) -> (usize, Duration) {
    let deadline = Instant::now() + GUARD;
    let mut k = 0;
    loop {
        k += 1;
        nodes[from].run(&format!("stell {k}"), "stold");
        if let Some((i, ns)) = first_got_after(nodes, "ledger", since_ns) {
            let gap = u64::try_from(ns - since_ns).expect("ns");
            return (i, Duration::from_nanos(gap));
        }
        assert!(Instant::now() < deadline, "the singleton did not come back");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Issue 36, check 8: the cluster singleton as OS processes. SIGKILL of
/// its node: it runs elsewhere within the lease timeout plus 2 s (the gap
/// from the kill to its first delivery printed); SIGTERM of its next node:
/// it is handed over (the gap printed); the witness never sees two.
#[test]
fn the_singleton_moves_on_a_kill_and_is_handed_over_on_a_sigterm() {
    require_jetstream!();
    let _one_at_a_time = serial();
    let server = NatsServer::start();
    let lease_ms = 2000;
    let start = |name| Node::start_example("witness_node", &server.url(), name, lease_ms);
    let mut nodes = [start("a"), start("b"), start("c")];
    let names = ["a", "b", "c"];
    // Started at once on one node, without a message.
    let deadline = Instant::now() + GUARD;
    let first = loop {
        if let Some(i) = nodes
            .iter_mut()
            .position(|x| x.drain().iter().any(|l| l.starts_with("start ledger ")))
        {
            break i;
        }
        assert!(Instant::now() < deadline, "the singleton did not start");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut finished: Vec<(String, Vec<String>)> = Vec::new();

    // SIGKILL of its node.
    let killed_ns = mono_ns();
    nodes[first].signal(libc::SIGKILL);
    finished.push((
        format!("{}-killed", names[first]),
        nodes[first].drain_to_end().to_vec(),
    ));
    let live: Vec<usize> = (0..3).filter(|i| *i != first).collect();
    let (second, after_kill) = {
        let [x, y] = [live[0], live[1]];
        let (p, q) = if x < y {
            let (l, r) = nodes.split_at_mut(y);
            (&mut l[x], &mut r[0])
        } else {
            unreachable!()
        };
        let (i, gap) = singleton_back(0, &mut [p, q], killed_ns);
        (live[i], gap)
    };
    eprintln!(
        "singleton: SIGKILL of {}: running on {} {after_kill:?} later (lease {lease_ms} ms)",
        names[first], names[second]
    );
    assert!(
        after_kill < Duration::from_millis(lease_ms + 2000),
        "{after_kill:?}"
    );

    // SIGTERM of its new node: handed over to the third.
    let third = live.iter().copied().find(|i| *i != second).expect("third");
    let termed_ns = mono_ns();
    nodes[second].signal(libc::SIGTERM);
    assert_eq!(nodes[second].expect("terminated"), "terminated clean=true");
    finished.push((
        names[second].to_owned(),
        nodes[second].drain_to_end().to_vec(),
    ));
    let (_, handed_over) = singleton_back(0, &mut [&mut nodes[third]], termed_ns);
    eprintln!(
        "singleton: SIGTERM of {}: running on {} {handed_over:?} later",
        names[second], names[third]
    );
    nodes[third].run("exit", "terminated");
    finished.push((
        names[third].to_owned(),
        nodes[third].drain_to_end().to_vec(),
    ));
    let labelled: Vec<(&str, &[String])> = finished
        .iter()
        .map(|(l, lines)| (l.as_str(), &lines[..]))
        .collect();
    let acts = witness(&labelled);
    assert_eq!(acts["ledger"].len(), 3, "{:?}", acts["ledger"]);
}

/// The ids of `acct-0` to `acct-<n-1>` that got number `k` from anyone,
/// in `nodes`' output so far.
fn got(nodes: &mut [&mut Node], k: u64) -> std::collections::HashSet<String> {
    let mut ids = std::collections::HashSet::new();
    for x in nodes.iter_mut() {
        for e in events(x.drain()) {
            if let Event::Got { id, n, .. } = e {
                if n == k && id.starts_with("acct-") {
                    ids.insert(id);
                }
            }
        }
    }
    ids
}

/// Told number `k` to `acct-0` to `acct-<n-1>` from `nodes[from]` until
/// every one of them got it (delivery is at most once: a message in
/// flight to a node that leaves or is cut may be lost, and is sent again
/// every second).
fn touch_all(nodes: &mut [&mut Node], from: usize, n: u64, k: u64) {
    let mut sent: Option<Instant> = None;
    let deadline = Instant::now() + GUARD;
    loop {
        if sent.is_none_or(|t| t.elapsed() > Duration::from_secs(1)) {
            nodes[from].run(&format!("touch {n} {k}"), "touched");
            sent = Some(Instant::now());
        }
        let have = got(nodes, k).len() as u64;
        if have >= n {
            return;
        }
        assert!(Instant::now() < deadline, "{have} of {n} got {k}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A node back after a pause or a partition acted under none of the
/// tokens it held before `since_ns` (its old activations fenced, not
/// resumed): no delivery or tick of one of them after that moment.
fn nothing_under_old_tokens_after(lines: &[String], since_ns: u128, what: &str) {
    let old: std::collections::HashSet<u64> = events(lines)
        .iter()
        .filter_map(|e| match e {
            Event::Start { token, ns, .. } if *ns < since_ns => Some(*token),
            _ => None,
        })
        .collect();
    for e in events(lines) {
        if let Event::Got { id, token, ns, .. } | Event::Tick { id, token, ns } = e {
            assert!(
                !(ns > since_ns && old.contains(&token)),
                "{id} acted under the old token {token} after {what}"
            );
        }
    }
}

/// Every node's output to its end (each asked to exit first), labelled.
fn finish(nodes: Vec<(&str, Node)>) -> Vec<(String, Vec<String>)> {
    nodes
        .into_iter()
        .map(|(name, mut x)| {
            x.run("exit", "terminated");
            (name.to_owned(), x.drain_to_end().to_vec())
        })
        .collect()
}

fn labelled(out: &[(String, Vec<String>)]) -> Vec<(&str, &[String])> {
    out.iter()
        .map(|(l, lines)| (l.as_str(), &lines[..]))
        .collect()
}

/// Issue 36, check 5, as OS processes: a fourth node joins three that hold
/// all 60 shards; the coordinator rebalances until every node's shards
/// are within 2 of the others', and never are more shards in hand-off at
/// once than the round's limit (4), both read from the bucket's history by
/// a watcher outside the nodes. Every entity answers afterwards, and the
/// witness is clean.
#[test]
fn a_fourth_process_joins_and_the_shards_rebalance_within_the_hand_off_limit() {
    require_jetstream!();
    let _one_at_a_time = serial();
    let server = NatsServer::start();
    let limit = 4;
    let options = [
        "--lease-ms",
        "2000",
        "--shards",
        "60",
        "--rebalance-ms",
        "300",
        "--limit",
        "4",
    ];
    let start = |name| Node::start_args("witness_node", &server.url(), name, &options);
    let mut nodes = vec![("a", start("a")), ("b", start("b")), ("c", start("c"))];
    // From the start of the bucket's history (which the nodes made).
    let watch = BucketWatch::start(&server.url(), "witness", "acct");
    // 600 ids cover the 60 shards (a stable hash: the same every run).
    let n = 600;
    nodes[0].1.run(&format!("touch {n} 0"), "touched");
    eventually("the 60 shards allocated", || {
        watch.with(|s| s.owners.len()) == 60
    });
    let spread =
        |names: &[&str]| -> Vec<usize> { watch.with(|s| names.iter().map(|x| s.of(x)).collect()) };
    eprintln!("three nodes: shards {:?}", spread(&["a", "b", "c"]));
    nodes.push(("d", start("d")));
    let joined = Instant::now();
    let names = ["a", "b", "c", "d"];
    let mut last = Vec::new();
    eventually("within 2 of each other, d included", || {
        last = spread(&names);
        let (lo, hi) = (last.iter().min(), last.iter().max());
        last.iter().sum::<usize>() == 60 && hi.zip(lo).is_some_and(|(h, l)| h - l <= 2)
    });
    let most = watch.with(|s| s.most_in_hand_off);
    eprintln!(
        "d joined: shards {last:?} (a, b, c, d) {:?} later; at most {most} in hand-off at once \
         (limit {limit})",
        joined.elapsed()
    );
    assert!(most <= limit, "{most} shards in hand-off at once");
    assert!(most > 0, "no shard was handed off");
    let mut refs: Vec<&mut Node> = nodes.iter_mut().map(|(_, x)| x).collect();
    touch_all(&mut refs, 3, n, 1);
    let out = finish(nodes);
    witness(&labelled(&out));
}

/// Issue 36, check 7, as OS processes. Passivation by idle time: an
/// entity sent nothing for 300 ms stops, and its next message starts it
/// again. By a limit of 3 active entities: starting one more passivates
/// the least recently used; a message sent to an entity while it
/// passivates (its PoisonPill queued behind 300 ms of work) waits for its
/// stop and reaches its next incarnation.
#[test]
fn processes_passivate_idle_entities_and_past_the_limit_and_keep_their_messages() {
    require_jetstream!();
    let _one_at_a_time = serial();
    let server = NatsServer::start();
    let ns_of = |line: &str| -> u128 {
        line.rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("ns in {line:?}"))
    };
    // By idle time.
    let mut a = Node::start_args(
        "witness_node",
        &server.url(),
        "a",
        &["--lease-ms", "2000", "--idle-ms", "300"],
    );
    a.run("tell acct-1 5", "told");
    let last_got = ns_of(&a.saw("got acct-1 a 5 "));
    let stopped = ns_of(&a.saw("stop acct-1 "));
    let idle = Duration::from_nanos(u64::try_from(stopped - last_got).expect("ns"));
    eprintln!("idle 300 ms: passivated {idle:?} after its last message");
    assert!(idle >= Duration::from_millis(250), "{idle:?}");
    a.run("tell acct-1 6", "told");
    a.saw("got acct-1 a 6 ");
    let starts = events(a.drain())
        .iter()
        .filter(|e| matches!(e, Event::Start { id, .. } if id == "acct-1"))
        .count();
    assert_eq!(starts, 2, "a new incarnation");
    let mut out = finish(vec![("a", a)]);

    // By a limit of active entities.
    let mut p = Node::start_args(
        "witness_node",
        &server.url(),
        "p",
        &["--lease-ms", "2000", "--max-active", "3"],
    );
    for i in 0..10 {
        p.run(&format!("tell acct-{i} 0"), "told");
        p.saw(&format!("got acct-{i} p 0 "));
        eventually("at most three live", || p.live().len() <= 3);
    }
    // acct-7 (live with 8 and 9) gets 100, is made busy, then the least
    // recent (8 and 9 get something after it), then is passivated for
    // acct-0's start while busy (acct-0 was passivated above: its shard is
    // allocated here, so it starts at once), then gets 7: in its next
    // incarnation.
    for command in [
        "tell acct-7 100",
        "busy acct-7 300",
        "tell acct-8 1",
        "tell acct-9 1",
        "tell acct-0 1",
        "tell acct-7 7",
    ] {
        p.run(command, "told");
    }
    let seven = ns_of(&p.saw("got acct-7 p 7 "));
    let hundred = ns_of(&p.saw("got acct-7 p 100 "));
    let lines = p.drain().to_vec();
    let between = |prefix: &str| {
        lines
            .iter()
            .filter(|l| l.starts_with(prefix))
            .map(|l| ns_of(l))
            .any(|ns| hundred < ns && ns < seven)
    };
    let trail: Vec<&String> = lines.iter().filter(|l| l.contains(" acct-7 ")).collect();
    assert!(
        between("stop acct-7 ") && between("start acct-7 "),
        "acct-7 stopped and started again between its 100 and its 7: {trail:#?}"
    );
    eventually("at most three live", || p.live().len() <= 3);
    out.extend(finish(vec![("p", p)]));
    witness(&labelled(&out));
}

/// Issue 36, check 9, as OS processes (leases of 6 s): the nats-server
/// killed and started again at once moves nothing (no entity starts
/// again, the incarnations stay, nobody is fenced); an outage longer than
/// the lease fences both nodes and stops every entity, and the cluster
/// recovers once the server is back, under new incarnations.
#[test]
fn processes_ride_out_a_short_server_restart_and_fence_themselves_in_a_long_outage() {
    require_jetstream!();
    let _one_at_a_time = serial();
    let mut server = NatsServer::start();
    let start = |name, url: &str| Node::start_example("witness_node", url, name, 6000);
    let (mut a, mut b) = (start("a", &server.url()), start("b", &server.url()));
    let n = 60;
    touch_all(&mut [&mut a, &mut b], 0, n, 0);
    let incs = (a.incarnation(), b.incarnation());
    assert!(!incs.0 .1 && !incs.1 .1, "{incs:?}");
    let starts = |x: &mut Node| {
        events(x.drain())
            .iter()
            .filter(|e| matches!(e, Event::Start { id, .. } if id.starts_with("acct-")))
            .count()
    };
    assert_eq!(starts(&mut a) + starts(&mut b), n as usize);

    // Short: killed and started again at once.
    let restarted = Instant::now();
    server.kill();
    server.start_again();
    eprintln!("server restarted in {:?}", restarted.elapsed());
    touch_all(&mut [&mut a, &mut b], 0, n, 1);
    assert_eq!(
        starts(&mut a) + starts(&mut b),
        n as usize,
        "an entity started again"
    );
    assert_eq!((a.incarnation(), b.incarnation()), incs);

    // Long: past the lease, both fence themselves and stop everything.
    server.kill();
    let fenced = eventually("both fenced", || a.incarnation().1 && b.incarnation().1);
    eventually("every entity stopped", || {
        a.live().is_empty() && b.live().is_empty()
    });
    eprintln!("outage: both fenced {fenced:?} after the kill (lease 6 s, margin 1.5 s)");
    server.start_again();
    eventually("both hold a lease again", || {
        !a.incarnation().1 && !b.incarnation().1
    });
    assert_ne!(a.incarnation().0, incs.0 .0);
    assert_ne!(b.incarnation().0, incs.1 .0);
    touch_all(&mut [&mut a, &mut b], 1, n, 2);
    let out = finish(vec![("a", a), ("b", b)]);
    witness(&labelled(&out));
}

/// Issue 36, check 10, as OS processes: with remember-entities, the
/// entities of a node killed with SIGKILL run again on the nodes that
/// take its shards, without a message.
#[test]
fn remembered_entities_of_a_killed_process_start_again_without_a_message() {
    require_jetstream!();
    let _one_at_a_time = serial();
    let server = NatsServer::start();
    let options = ["--lease-ms", "2000", "--remember"];
    let start = |name| Node::start_args("witness_node", &server.url(), name, &options);
    let (mut a, mut b, mut c) = (start("a"), start("b"), start("c"));
    let n = 300;
    touch_all(&mut [&mut a, &mut b, &mut c], 0, n, 0);
    let on_c = c.live();
    assert!(!on_c.is_empty(), "c runs some entities");
    // Killed at once: an entity starts only once its key is in the bucket
    // (decision 0030), so every one that ran is remembered. (When the key
    // was written after the start, this failed 2 runs of 3.)
    let killed_ns = mono_ns();
    c.signal(libc::SIGKILL);
    let cl = c.drain_to_end().to_vec();
    let mut back = std::collections::HashMap::new();
    eventually("c's entities run again on a and b, unasked", || {
        for x in [&mut a, &mut b] {
            for e in events(x.drain()) {
                if let Event::Start { id, ns, .. } = e {
                    if ns > killed_ns && on_c.contains(&id) {
                        back.insert(id, ns);
                    }
                }
            }
        }
        back.len() == on_c.len()
    });
    let last = back.values().max().copied().unwrap_or(killed_ns);
    eprintln!(
        "remember-entities: the {} entities of the killed node running again {:?} after \
         the SIGKILL (lease 2 s)",
        on_c.len(),
        Duration::from_nanos(u64::try_from(last - killed_ns).expect("ns"))
    );
    let mut out = finish(vec![("a", a), ("b", b)]);
    out.push(("c".to_owned(), cl));
    witness(&labelled(&out));
}

/// Issue 36, check 12, as OS processes: a network partition, not a pause.
/// Node c reaches NATS through a TCP proxy the test cuts while c's
/// process, timers and entities run on; its entities tick every 50 ms (as
/// ones writing to a store on their own). c stops them by its own lease
/// deadline: no tick of c's after any other node starts one of them (the
/// witness); its shards move to a and b; restored, c rejoins under a new
/// incarnation, and nothing of its old activations acts again.
#[test]
fn a_process_cut_from_nats_stops_its_ticking_entities_before_they_move() {
    require_jetstream!();
    let _one_at_a_time = serial();
    let server = NatsServer::start();
    let proxy = Proxy::start(server.port);
    let start = |name, url: &str, tick: bool| {
        let mut options = vec!["--lease-ms", "2000"];
        if tick {
            options.extend(["--tick-ms", "50"]);
        }
        Node::start_args("witness_node", url, name, &options)
    };
    let mut a = start("a", &server.url(), false);
    let mut b = start("b", &server.url(), false);
    let mut c = start("c", &proxy.url(), true);
    let n = 100;
    touch_all(&mut [&mut a, &mut b, &mut c], 0, n, 0);
    let on_c = c.live();
    assert!(!on_c.is_empty(), "c runs some entities");
    let (before, _) = c.incarnation();

    proxy.cut();
    let cut = Instant::now();
    let fenced = eventually("c fences itself", || c.incarnation().1);
    eventually("c's entities stop", || c.live().is_empty());
    let stopped = cut.elapsed();
    touch_all(&mut [&mut a, &mut b], 0, n, 1);
    let moved = cut.elapsed();
    let took: std::collections::HashSet<String> = [&mut a, &mut b]
        .into_iter()
        .flat_map(|x| x.live())
        .collect();
    assert!(
        on_c.iter().all(|id| took.contains(id)),
        "c's entities run on a and b"
    );
    eprintln!(
        "cut: c fenced after {fenced:?}, its entities stopped after {stopped:?}, all on a and b \
         after {moved:?} (lease 2 s)"
    );
    assert!(fenced < Duration::from_secs(2), "{fenced:?}");

    proxy.restore();
    let restored_ns = mono_ns();
    eventually("c holds a lease again", || {
        let (inc, fenced) = c.incarnation();
        inc != before && !fenced
    });
    touch_all(&mut [&mut a, &mut b, &mut c], 2, n, 2);
    nothing_under_old_tokens_after(c.drain(), restored_ns, "it was restored");
    let out = finish(vec![("a", a), ("b", b), ("c", c)]);
    witness(&labelled(&out));
}
