//! Routers: pool and group routers, each routing logic's distribution,
//! Broadcast, resizing, supervision of routees, death watch of routees,
//! dead letters, and stopping routers as `stopping-an-actor.txt` says
//! ("What About Shutting Down Routers?").

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use proscenium::prelude::*;
use proscenium::{Broadcast, Group, Pool, Resizer, RouterMsg, RouterRef};
use support::actors::{gate, Gate, Worker, WorkerMsg};
use support::*;

/// What the routees of these tests are told. `Clone` (replies go through
/// channels, not `Reply`), so it can be broadcast.
#[derive(Clone)]
enum Job {
    /// Log `"<name> handled <n>"`.
    Note(u32),
    /// Send this routee's name.
    Who(Sender<String>),
    /// Send the key and this routee's name (consistent hashing).
    Key(u64, Sender<(u64, String)>),
    /// Send how many notes this incarnation handled.
    Count(Sender<u64>),
    /// Log `"<name> blocked"`, then wait for the gate.
    Block(Gate),
    /// Fail with an error.
    Fail,
}

/// A routee that logs `"<name> started|stopped|restarted"` and its notes.
struct Routee {
    name: String,
    log: Sender<String>,
    notes: u64,
}

impl Routee {
    fn props(log: &Sender<String>) -> Props<Routee> {
        let log = log.clone();
        Props::new(move || Routee {
            name: String::new(),
            log: log.clone(),
            notes: 0,
        })
    }

    fn log(&self, event: &str) {
        let _ = self.log.send(format!("{} {event}", self.name));
    }
}

#[derive(Debug, thiserror::Error)]
#[error("routee failure")]
struct RouteeFailure;

impl Actor for Routee {
    type Msg = Job;

    fn receive(&mut self, _ctx: &mut Context<Self>, msg: Job) -> Outcome {
        match msg {
            Job::Note(n) => {
                self.notes += 1;
                self.log(&format!("handled {n}"));
            }
            Job::Who(tx) => {
                let _ = tx.send(self.name.clone());
            }
            Job::Key(k, tx) => {
                let _ = tx.send((k, self.name.clone()));
            }
            Job::Count(tx) => {
                let _ = tx.send(self.notes);
            }
            Job::Block(gate) => {
                self.log("blocked");
                let _ = gate.lock().expect("gate").recv();
            }
            Job::Fail => return Err(Box::new(RouteeFailure)),
        }
        Ok(())
    }

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        self.name = ctx.id().name().to_owned();
        self.log("started");
        Ok(())
    }

    fn post_stop(&mut self, _ctx: &mut Context<Self>) {
        self.log("stopped");
    }

    fn post_restart(&mut self, ctx: &mut Context<Self>, _failure: &Failure) -> Outcome {
        self.name = ctx.id().name().to_owned();
        self.log("restarted");
        Ok(())
    }
}

fn spawn_router(system: &ActorSystem, props: Props<proscenium::Router<Job>>) -> RouterRef<Job> {
    RouterRef::new(system.spawn(props, "router").expect("the router spawns"))
}

fn routees(router: &RouterRef<Job>) -> Vec<ActorRef<Job>> {
    router.routees(PATIENCE).wait().expect("the router answers")
}

/// Asks the router until it has `n` routees (a routee's death reaches the
/// router's table asynchronously).
#[track_caller]
fn wait_routees(router: &RouterRef<Job>, n: usize) -> Vec<ActorRef<Job>> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let now = routees(router);
        if now.len() == n {
            return now;
        }
        assert!(Instant::now() < deadline, "still {} routees", now.len());
        std::thread::yield_now();
    }
}

/// Routes one `Who` and waits for the name of the routee that got it.
fn who(router: &RouterRef<Job>) -> String {
    let probe = Probe::new();
    router.tell(Job::Who(probe.tx()));
    probe.next()
}

/// The count of notes a routee handled (asked directly).
fn notes(routee: &ActorRef<Job>) -> u64 {
    let probe = Probe::new();
    routee.tell(Job::Count(probe.tx()));
    probe.next()
}

/// Notes that reached dead letters: `(recipient name, n)`, whether sent to a
/// routee (`Job`) or queued in the router (`RouterMsg<Job>`).
fn dead_notes(system: &ActorSystem) -> Probe<(String, u32)> {
    dead_letter_probe(system, |d| {
        let to = d
            .recipient()
            .map_or_else(|| "-".to_owned(), |r| r.name().to_owned());
        match (d.downcast_ref::<Job>(), d.downcast_ref::<RouterMsg<Job>>()) {
            (Some(Job::Note(n)), _) | (_, Some(RouterMsg::Route(Job::Note(n)))) => (to, *n),
            _ => (format!("{to}: other {}", d.message_type()), 0),
        }
    })
}

/// The notes handled, by number, from log lines `"<name> handled <n>"`.
fn handled(lines: &[String]) -> Vec<(String, u32)> {
    lines
        .iter()
        .filter_map(|l| {
            let (name, rest) = l.split_once(' ')?;
            let n = rest.strip_prefix("handled ")?.parse().ok()?;
            Some((name.to_owned(), n))
        })
        .collect()
}

fn names(refs: &[ActorRef<Job>]) -> Vec<String> {
    refs.iter().map(|r| r.name().to_owned()).collect()
}

// ---- routing logics ------------------------------------------------------

/// Round-robin: routee 0, 1, 2, 0, 1, 2, ... in routing-table order.
#[test]
fn round_robin_cycles_in_table_order() {
    let system = system();
    let log = Probe::new();
    let router = spawn_router(
        &system,
        Pool::round_robin(3).props(Routee::props(&log.tx())),
    );
    let table = names(&routees(&router));
    assert_eq!(table.len(), 3);
    let got: Vec<String> = (0..9).map(|_| who(&router)).collect();
    let expected: Vec<String> = (0..9).map(|i| table[i % 3].clone()).collect();
    assert_eq!(got, expected);
    drop(router);
    shutdown(system);
}

/// Random: every routee is used, and nothing is lost. (Unseeded, but the
/// chance that one of 4 routees gets none of 400 messages is 4 * 0.75^400.)
#[test]
fn random_uses_every_routee() {
    let system = system();
    let log = Probe::new();
    let router = spawn_router(&system, Pool::random(4).props(Routee::props(&log.tx())));
    for n in 0..400 {
        router.tell(Job::Note(n));
    }
    // The router has routed every note before it answers this, and each
    // routee gets `Count` after the notes routed to it.
    let counts: Vec<u64> = routees(&router).iter().map(notes).collect();
    assert!(counts.iter().all(|&c| c > 0), "{counts:?}");
    assert_eq!(counts.iter().sum::<u64>(), 400);
    drop(router);
    shutdown(system);
}

/// A seeded random router makes the same choices every time.
#[test]
fn a_seeded_random_router_is_reproducible() {
    let system = system();
    let log = Probe::new();
    let draws = |name: &str| -> Vec<usize> {
        let router = RouterRef::new(
            system
                .spawn(
                    Pool::random(5).seed(7).props(Routee::props(&log.tx())),
                    name,
                )
                .expect("router"),
        );
        let table = names(&routees(&router));
        let picks = (0..20)
            .map(|_| {
                let n = who(&router);
                table.iter().position(|t| *t == n).expect("a routee")
            })
            .collect();
        assert!(router.graceful_stop(PATIENCE).wait());
        picks
    };
    assert_eq!(draws("r1"), draws("r2"));
    shutdown(system);
}

/// Smallest-mailbox: with one routee blocked and a message queued behind
/// the block, every message goes to the other one.
#[test]
fn smallest_mailbox_prefers_the_idle_routee() {
    let system = system();
    let log = Probe::new();
    let bounded = Routee::props(&log.tx()).with_mailbox_capacity(16);
    let router = spawn_router(&system, Pool::smallest_mailbox(2).props(bounded));
    let table = routees(&router);
    let (busy, free) = (&table[0], &table[1]);
    let (open, g) = gate();
    busy.tell(Job::Block(g));
    log.until(format!("{} blocked", busy.name()));
    busy.tell(Job::Note(0)); // queued: the blocked routee's load is 2
    for _ in 0..20 {
        // The free routee's load is at most 1 (finishing the previous one).
        assert_eq!(who(&router), free.name());
    }
    open.send(()).expect("unblock");
    drop((router, table));
    shutdown(system);
}

fn key_of(job: &Job) -> u64 {
    match job {
        Job::Key(k, _) => *k,
        _ => 0,
    }
}

/// Asks the owner of each key (all at once; replies carry the key).
fn owners(router: &RouterRef<Job>, keys: u64) -> BTreeMap<u64, String> {
    let probe = Probe::new();
    for k in 0..keys {
        router.tell(Job::Key(k, probe.tx()));
    }
    probe.take(keys as usize).into_iter().collect()
}

/// Consistent hashing: the same key always reaches the same routee; a new
/// routee takes some keys from the others and no key moves between old
/// routees.
#[test]
fn consistent_hashing_keeps_keys_across_a_resize() {
    let system = system();
    let log = Probe::new();
    let router = spawn_router(
        &system,
        Pool::consistent_hashing(4, key_of).props(Routee::props(&log.tx())),
    );
    let before = owners(&router, 400);
    assert_eq!(owners(&router, 400), before, "same key, same routee");
    let used: BTreeSet<&String> = before.values().collect();
    assert_eq!(used.len(), 4, "every routee owns keys");

    let old = names(&routees(&router));
    router.actor_ref().tell(RouterMsg::AdjustPoolSize(1));
    let now = names(&routees(&router));
    let added: Vec<&String> = now.iter().filter(|n| !old.contains(n)).collect();
    assert_eq!(added.len(), 1);
    let after = owners(&router, 400);
    let moved: Vec<u64> = (0..400).filter(|k| before[k] != after[k]).collect();
    assert!(
        moved.iter().all(|k| &after[k] == added[0]),
        "keys moved only to the new routee"
    );
    // About a fifth is expected; most keys stay where they were.
    assert!(
        !moved.is_empty() && moved.len() < 160,
        "{} moved",
        moved.len()
    );
    drop(router);
    shutdown(system);
}

// ---- broadcast -------------------------------------------------------------

/// A `Broadcast` reaches every routee, whatever the logic; the broadcast
/// logic sends every routed message to all.
#[test]
fn broadcast_reaches_every_routee() {
    let system = system();
    let log = Probe::new();
    let router = spawn_router(
        &system,
        Pool::round_robin(4).props(Routee::props(&log.tx())),
    );
    let table: BTreeSet<String> = names(&routees(&router)).into_iter().collect();
    router.broadcast(Job::Note(7));
    let lines = (0..)
        .map(|_| log.next())
        .filter(|l| l.ends_with("handled 7"))
        .take(4)
        .collect::<Vec<_>>();
    let got: BTreeSet<String> = handled(&lines).into_iter().map(|(n, _)| n).collect();
    assert_eq!(got, table);
    assert!(router.graceful_stop(PATIENCE).wait());

    let group_members: Vec<ActorRef<Job>> = (0..3)
        .map(|i| {
            system
                .spawn(Routee::props(&log.tx()), &format!("g{i}"))
                .expect("member")
        })
        .collect();
    let all = RouterRef::new(
        system
            .spawn(Group::broadcast(group_members.clone()).into_props(), "all")
            .expect("group"),
    );
    all.tell(Job::Note(8));
    let mut got: Vec<(String, u32)> = handled(&log.until_n("handled 8", 3));
    got.sort();
    assert_eq!(got, [("g0".into(), 8), ("g1".into(), 8), ("g2".into(), 8)]);
    drop((router, all, group_members));
    shutdown(system);
}

/// Reads log lines until `n` of them end with `suffix`; returns those.
trait UntilN {
    fn until_n(&self, suffix: &str, n: usize) -> Vec<String>;
}

impl UntilN for Probe<String> {
    fn until_n(&self, suffix: &str, n: usize) -> Vec<String> {
        let mut found = Vec::new();
        while found.len() < n {
            let line = self.next();
            if line.ends_with(suffix) {
                found.push(line);
            }
        }
        found
    }
}

// ---- stopping ------------------------------------------------------------

/// "To gracefully shut down a Pool router, send a PoisonPill message to
/// the router, which will shut down the router and in turn, the child
/// routees that it created/supervises (recall that Pool routers are the
/// parent of their routees.)"
///
/// The router routes everything queued ahead of the PoisonPill; what
/// follows it goes to dead letters. The routees stop with the router (as
/// its children: Stop, after their current message), so a note the router
/// had routed is either handled by its routee or, if it was still queued
/// there, goes to dead letters: each exactly once. The router terminates
/// only after its routees.
#[test]
fn poison_pill_stops_a_pool_after_its_queue_and_its_routees_with_it() {
    let system = system();
    let log = Probe::new();
    let dead = dead_notes(&system);
    let router = spawn_router(
        &system,
        Pool::round_robin(2).props(Routee::props(&log.tx())),
    );
    let table = routees(&router);
    let (open, g) = gate();
    router.tell(Job::Block(g)); // to the first routee
    log.until(format!("{} blocked", table[0].name()));
    for n in 1..=6 {
        router.tell(Job::Note(n));
    }
    let stopped = router.graceful_stop(PATIENCE); // the PoisonPill
    router.tell(Job::Note(7));
    router.tell(Job::Note(8));
    // The idle routee stops; the router waits for the blocked one.
    let mut lines = log.until(format!("{} stopped", table[1].name()));
    assert!(!router.actor_ref().is_terminated());
    open.send(()).expect("unblock");
    assert!(stopped.wait(), "the router stopped");
    assert!(table.iter().all(ActorRef::is_terminated));

    lines.extend(log.drain_now());
    let handled: Vec<u32> = handled(&lines).into_iter().map(|(_, n)| n).collect();
    let dead = dead.drain_now();
    let dead_at_router: Vec<u32> = dead
        .iter()
        .filter(|(to, _)| to == "router")
        .map(|&(_, n)| n)
        .collect();
    let mut routed: Vec<u32> = dead
        .iter()
        .filter(|(to, _)| to != "router")
        .map(|&(_, n)| n)
        .chain(handled)
        .collect();
    routed.sort_unstable();
    assert_eq!(
        routed,
        [1, 2, 3, 4, 5, 6],
        "each routed note handled or dead, once"
    );
    assert_eq!(
        dead_at_router,
        [7, 8],
        "behind the PoisonPill: dead letters"
    );
    drop((router, table));
    shutdown(system);
}

/// A broadcast PoisonPill to a pool: every routee handles what it was sent,
/// then stops; the pool, left without routees, stops itself (as Akka's).
#[test]
fn a_pool_whose_routees_are_all_gone_stops_itself() {
    let system = system();
    let log = Probe::new();
    let dead = dead_notes(&system);
    let watcher = system
        .spawn(Worker::props("watcher", &log.tx()), "watcher")
        .expect("watcher");
    let router = spawn_router(
        &system,
        Pool::round_robin(3).props(Routee::props(&log.tx())),
    );
    watcher.tell(WorkerMsg::Watch(router.id()));
    for n in 0..30 {
        router.tell(Job::Note(n));
    }
    router.broadcast_poison_pill();
    let lines = log.until("watcher saw router terminate");
    assert_eq!(handled(&lines).len(), 30);
    assert_eq!(lines.iter().filter(|l| l.ends_with(" stopped")).count(), 3);
    assert!(dead.drain_now().is_empty());
    drop((router, watcher));
    shutdown(system);
}

/// "To gracefully shut down a Group router, send it a Broadcast message
/// which contains a PoisonPill, and then send the router itself a
/// PoisonPill."
///
/// Each routee handles everything routed to it, then stops; the router
/// stops too. Nothing is lost.
#[test]
fn a_group_stops_gracefully_with_broadcast_poison_pill_then_poison_pill() {
    let system = system();
    let log = Probe::new();
    let dead = dead_notes(&system);
    let members: Vec<ActorRef<Job>> = ["a", "b"]
        .iter()
        .map(|n| system.spawn(Routee::props(&log.tx()), n).expect("member"))
        .collect();
    let group = spawn_router(&system, Group::round_robin(members.clone()).into_props());
    for n in 0..20 {
        group.tell(Job::Note(n));
    }
    group
        .actor_ref()
        .tell(RouterMsg::Broadcast(Broadcast::poison_pill()));
    assert!(group.graceful_stop(PATIENCE).wait(), "the router stopped");
    for m in &members {
        assert!(m.graceful_stop(PATIENCE).wait(), "{} stopped", m.name());
    }
    let mut lines = log.drain_now();
    let mut by: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for (name, n) in handled(&lines) {
        by.entry(name).or_default().push(n);
    }
    assert_eq!(by["a"], (0..20).step_by(2).collect::<Vec<_>>());
    assert_eq!(by["b"], (1..20).step_by(2).collect::<Vec<_>>());
    lines.retain(|l| l.ends_with("stopped"));
    lines.sort();
    assert_eq!(lines, ["a stopped", "b stopped"]);
    assert!(dead.drain_now().iter().all(|(to, _)| to.contains("other")));
    drop((group, members));
    shutdown(system);
}

// ---- resizing ----------------------------------------------------------------

/// The resizer grows the pool while every routee is busy, never past the
/// upper bound, and shrinks it to the lower bound once they are idle; the
/// routees it removes get a PoisonPill after what they were sent.
#[test]
fn the_resizer_grows_under_pressure_within_bounds_and_shrinks() {
    let log = Probe::new();
    let resizer = Resizer::new(1, 3).rampup_rate(1.0).messages_per_resize(1);
    // Three routees block in their handler at once: enough workers for them
    // and for the router.
    let system = ActorSystem::builder()
        .name("resize")
        .workers(5)
        .pin_workers(false)
        .dead_letter_logging(0, Duration::from_secs(1))
        .build()
        .expect("the test system starts");
    let router = spawn_router(
        &system,
        Pool::round_robin(1)
            .with_resizer(resizer)
            .props(Routee::props(&log.tx())),
    );
    assert_eq!(routees(&router).len(), 1);
    let (open, g) = gate();
    // Every routee that gets one of these blocks (or queues behind one):
    // it stays busy, so the pool grows whenever all routees have work.
    for _ in 0..30 {
        router.tell(Job::Block(g.clone()));
    }
    let blocked: BTreeSet<String> = log
        .until_n("blocked", 3)
        .into_iter()
        .map(|l| l.replace(" blocked", ""))
        .collect();
    assert_eq!(blocked.len(), 3, "three routees, all busy");
    let grown = routees(&router);
    assert_eq!(grown.len(), 3, "not past the upper bound");
    for _ in 0..30 {
        open.send(()).expect("unblock");
    }
    // Idle again: each routed message checks the load and shrinks by one.
    let deadline = Instant::now() + PATIENCE;
    while routees(&router).len() > 1 {
        assert!(Instant::now() < deadline, "the pool did not shrink");
        router.tell(Job::Note(0));
        std::thread::yield_now();
    }
    for _ in 0..5 {
        router.tell(Job::Note(1));
    }
    // Those may grow it again (a routee busy with a note is pressure), but
    // never past the bounds.
    let left = routees(&router);
    assert!((1..=3).contains(&left.len()), "{} routees", left.len());
    for removed in grown.iter().filter(|r| !left.contains(r)) {
        assert!(removed.graceful_stop(PATIENCE).wait());
    }
    drop((router, grown, left));
    shutdown(system);
}

// ---- supervision and death watch -------------------------------------------

/// A routee's failure goes to the pool's strategy: Restart keeps the
/// routee in its slot (same reference, fresh state); Stop removes it.
#[test]
fn a_routee_failure_is_handled_by_the_pool_strategy() {
    let system = system();
    let log = Probe::new();
    let restarting = Pool::round_robin(2)
        .supervisor_strategy(SupervisorStrategy::one_for_one().decider(|_| Directive::Restart));
    let router = spawn_router(&system, restarting.props(Routee::props(&log.tx())));
    let table = routees(&router);
    table[0].tell(Job::Note(1));
    table[0].tell(Job::Fail);
    log.until(format!("{} restarted", table[0].name()));
    assert_eq!(routees(&router), table, "same routees, same slots");
    assert_eq!(notes(&table[0]), 0, "a fresh instance");
    for n in 0..4 {
        router.tell(Job::Note(n));
    }
    assert_eq!(routees(&router), table); // the notes are routed before this
    let counts: Vec<u64> = table.iter().map(notes).collect();
    assert_eq!(counts, [2, 2]);
    assert!(router.graceful_stop(PATIENCE).wait());

    let stopping = Pool::round_robin(2).supervisor_strategy(SupervisorStrategy::stopping());
    let router = RouterRef::new(
        system
            .spawn(stopping.props(Routee::props(&log.tx())), "router2")
            .expect("router2"),
    );
    let table = routees(&router);
    table[0].tell(Job::Fail);
    log.until(format!("{} stopped", table[0].name()));
    assert_eq!(wait_routees(&router, 1), [table[1].clone()]);
    assert_eq!(who(&router), table[1].name());
    drop((router, table));
    shutdown(system);
}

/// By default a pool escalates its routees' failures (Akka's pool
/// default): the router's parent (`/user`, Restart) restarts the router,
/// which keeps its routees (same references, same size) and restarts every
/// one of them; what was queued in a routee's mailbox is still handled.
#[test]
fn by_default_a_routee_failure_escalates_and_the_pool_restarts_in_place() {
    let system = system();
    let log = Probe::new();
    let router = spawn_router(
        &system,
        Pool::round_robin(2).props(Routee::props(&log.tx())),
    );
    let table = routees(&router);
    let (a, b) = (table[0].name().to_owned(), table[1].name().to_owned());
    let (open, g) = gate();
    table[1].tell(Job::Block(g));
    log.until(format!("{b} blocked"));
    table[1].tell(Job::Note(9)); // queued behind the block
    table[0].tell(Job::Fail);
    log.until(format!("{a} restarted")); // a sibling's failure restarted it
    open.send(()).expect("unblock");
    let lines = log.until(format!("{b} handled 9"));
    assert!(lines.contains(&format!("{b} restarted")), "{lines:?}");
    assert_eq!(routees(&router), table, "same routees after the restart");
    for n in 0..4 {
        router.tell(Job::Note(n));
    }
    assert_eq!(routees(&router), table);
    let counts: Vec<u64> = table.iter().map(notes).collect();
    // Fresh instances; b's new one also handled the note queued before.
    assert_eq!(counts, [2, 3]);
    drop((router, table));
    shutdown(system);
}

/// A routee that terminates is removed from the routing table.
#[test]
fn a_dead_routee_is_removed() {
    let system = system();
    let log = Probe::new();
    let members: Vec<ActorRef<Job>> = ["a", "b"]
        .iter()
        .map(|n| system.spawn(Routee::props(&log.tx()), n).expect("member"))
        .collect();
    let group = spawn_router(&system, Group::round_robin(members.clone()).into_props());
    assert_eq!(routees(&group), members);
    members[0].stop();
    assert_eq!(wait_routees(&group, 1), [members[1].clone()]);
    for _ in 0..3 {
        assert_eq!(who(&group), "b");
    }
    drop((group, members));
    shutdown(system);
}

/// Messages routed by a group with no routee go to dead letters (counted),
/// and the group stays up.
#[test]
fn an_empty_group_sends_to_dead_letters() {
    let system = system();
    let dead = dead_notes(&system);
    let group = spawn_router(&system, Group::random(Vec::new()).into_props());
    let before = system.dead_letter_count();
    group.tell(Job::Note(1));
    group.tell(Job::Note(2));
    assert_eq!(dead.take(2), [("router".into(), 1), ("router".into(), 2)]);
    assert_eq!(system.dead_letter_count() - before, 2);
    assert!(routees(&group).is_empty(), "the group is still up");
    drop(group);
    shutdown(system);
}

/// A pool with a resizer does not stop when its routees are all gone: the
/// next routed message grows it back to the lower bound.
#[test]
fn a_resizing_pool_left_without_routees_grows_back() {
    let system = system();
    let log = Probe::new();
    let resizer = Resizer::new(2, 4).messages_per_resize(1000);
    let router = spawn_router(
        &system,
        Pool::round_robin(2)
            .with_resizer(resizer)
            .props(Routee::props(&log.tx())),
    );
    let first = routees(&router);
    router.broadcast_poison_pill();
    wait_routees(&router, 0);
    let name = who(&router);
    let now = routees(&router);
    assert_eq!(now.len(), 2);
    assert!(now.iter().any(|r| r.name() == name));
    assert!(now.iter().all(|r| !first.contains(r)));
    drop((router, first, now));
    shutdown(system);
}

/// Management messages: a group takes and drops routees (a dropped group
/// routee keeps running: it is not the router's child); a pool's routee
/// removed from the table gets a PoisonPill, and a pool without routees
/// stops.
#[test]
fn routees_are_added_and_removed() {
    let system = system();
    let log = Probe::new();
    let members: Vec<ActorRef<Job>> = ["a", "b"]
        .iter()
        .map(|n| system.spawn(Routee::props(&log.tx()), n).expect("member"))
        .collect();
    let group = spawn_router(
        &system,
        Group::round_robin(vec![members[0].clone()]).into_props(),
    );
    group
        .actor_ref()
        .tell(RouterMsg::AddRoutee(members[1].clone()));
    assert_eq!(routees(&group), members);
    group
        .actor_ref()
        .tell(RouterMsg::RemoveRoutee(members[0].id()));
    assert_eq!(routees(&group), [members[1].clone()]);
    assert_eq!(who(&group), "b");
    assert!(!members[0].is_terminated());

    let watcher = system
        .spawn(Worker::props("watcher", &log.tx()), "watcher")
        .expect("watcher");
    let pool = RouterRef::new(
        system
            .spawn(Pool::round_robin(1).props(Routee::props(&log.tx())), "pool")
            .expect("pool"),
    );
    watcher.tell(WorkerMsg::Watch(pool.id()));
    let only = routees(&pool);
    pool.actor_ref().tell(RouterMsg::RemoveRoutee(only[0].id()));
    log.until("watcher saw pool terminate");
    assert!(only[0].is_terminated());
    drop((group, members, watcher, pool, only));
    shutdown(system);
}

/// A broadcast Kill reaches every routee's user lane after what it has:
/// each fails with `Killed`, which its supervisor (here `/user`) answers
/// with Stop; the group drops them and stays up.
#[test]
fn a_broadcast_kill_reaches_every_routee() {
    let system = system();
    let log = Probe::new();
    let members: Vec<ActorRef<Job>> = ["a", "b", "c"]
        .iter()
        .map(|n| system.spawn(Routee::props(&log.tx()), n).expect("member"))
        .collect();
    let group = spawn_router(&system, Group::round_robin(members.clone()).into_props());
    for n in 0..3 {
        group.tell(Job::Note(n));
    }
    group
        .actor_ref()
        .tell(RouterMsg::Broadcast(Broadcast::kill()));
    wait_routees(&group, 0);
    assert!(members.iter().all(ActorRef::is_terminated));
    let lines = log.drain_now();
    assert_eq!(
        handled(&lines).len(),
        3,
        "the notes ahead of Kill: {lines:?}"
    );
    drop((group, members));
    shutdown(system);
}
