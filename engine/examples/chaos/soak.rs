//! The chaos soak itself, shared by the `chaos` example (`main.rs`, a run
//! of N seconds) and the engine's test `tests/chaos.rs` (a run of a fixed
//! number of messages).
//!
//! A three-level tree (tops under `/user`, mids under the tops, leaves
//! under the mids) takes messages with unique ids from producer threads,
//! while the producers and the messages themselves inject every kind of
//! trouble the engine has an answer for: handler errors carrying the
//! directive the supervisor is to pick (Resume, Restart, Stop, Escalate;
//! one-for-one and all-for-one supervisors), panics, Kill, stop, PoisonPill,
//! `stop_self`, watch and unwatch between leaves, timers (the actor's own,
//! which its restart or stop cancels; keyed ones that replace each other;
//! a fixed-delay one; scheduled messages from outside, some cancelled),
//! and stashes. Supervisors watch their children and spawn a stopped one
//! again, so the tree keeps its shape.
//!
//! What is checked at the end (see `Report::violations`):
//!
//! - every id is accounted for exactly once, in exactly one bucket:
//!   handled (`receive` got it and returned `Ok`), dead-lettered (published
//!   as a `DeadLetter`), dropped by failure (`receive` got it and failed:
//!   "the restart is not visible outside of the actor itself with the
//!   notable exception that the message during which the failure occurred
//!   is not re-processed" (akka-net-supervision.txt, "What Restarting
//!   Means"), nor by a resumed actor, so it is gone, and it is counted here
//!   once, by the handler that failed on it), cancelled (a timer message cancelled before
//!   delivery: by the producer's `Cancellable::cancel` returning `true`, or
//!   by its actor's stop or restart, which the actor's `post_stop` observes);
//! - `pre_start` and `post_stop` ran the same number of times at every
//!   level, and as often as the factories made instances (one pair per
//!   incarnation), and on each instance once each, in that order, before
//!   it was dropped (`Hooks`);
//! - after termination, the report is clean, no panic escaped a run, and
//!   `live_cells() == 0` once the soak's own references are dropped.
//!
//! Ids live in a ring of `RING` slots (a fixed allocation, so that the
//! ledger does not grow with the run and the RSS samples measure the
//! engine): a slot holds the id's generation and a count per bucket; a
//! producer reuses a slot only once its previous id has settled, and checks
//! that id's counts then.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proscenium::prelude::*;
use proscenium::{ActorSystem, Cancellable, DeadLetter, SupervisionEvent};

/// Ring slots for the ids' ledger (a power of two; a multiple of any
/// producer count up to 2^21).
const RING: u64 = 1 << 21;
/// No id issued or settled for this long: the run stalled; the sampler
/// prints the unsettled ids by leaf (`Books::stall_report`), once.
const STALL_AFTER: Duration = Duration::from_secs(5);
/// Bits of a bucket's count in a slot's low word.
const BUCKET_BITS: u32 = 6;
const BUCKET_MASK: u64 = (1 << BUCKET_BITS) - 1;

/// Where an id ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bucket {
    /// `receive` got it and returned `Ok`.
    Handled = 0,
    /// Published as a dead letter.
    DeadLettered = 1,
    /// `receive` got it and failed (an `Err` or a panic): not redelivered.
    DroppedByFailure = 2,
    /// An actor's own timer message, cancelled by its stop or restart (or
    /// by its `post_stop`) before delivery.
    TimerCancelled = 3,
    /// A scheduled message whose producer's `cancel()` returned `true`.
    ProducerCancelled = 4,
}

const BUCKETS: [Bucket; 5] = [
    Bucket::Handled,
    Bucket::DeadLettered,
    Bucket::DroppedByFailure,
    Bucket::TimerCancelled,
    Bucket::ProducerCancelled,
];

impl Bucket {
    fn unit(self) -> u64 {
        1 << (BUCKET_BITS * self as u32)
    }
    fn name(self) -> &'static str {
        match self {
            Bucket::Handled => "handled",
            Bucket::DeadLettered => "dead-lettered",
            Bucket::DroppedByFailure => "dropped by failure",
            Bucket::TimerCancelled => "timer cancelled (stop/restart)",
            Bucket::ProducerCancelled => "cancelled by producer",
        }
    }
}

/// The soak's settings.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// Seed of the producers' choices (printed; `--seed`).
    pub(crate) seed: u64,
    /// Top supervisors under `/user`.
    pub(crate) tops: usize,
    /// Mid supervisors per top.
    pub(crate) mids: usize,
    /// Leaves per mid.
    pub(crate) leaves: usize,
    /// Producer threads.
    pub(crate) producers: usize,
    /// Workers of the system.
    pub(crate) workers: usize,
    /// How long the producers run, or how many messages each sends.
    pub(crate) length: Length,
    /// Ids sent and not yet settled, at most (the producers wait beyond).
    pub(crate) window: u64,
    /// Seconds between RSS samples (a time-bound run).
    pub(crate) sample_every: Duration,
    /// Handler errors per 10 000 messages (panics: a fifth as many).
    pub(crate) fail_per_10k: u64,
    /// Print progress lines.
    pub(crate) verbose: bool,
}

/// How long the producers run.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Length {
    /// For a duration.
    Time(Duration),
    /// For this many messages each.
    Messages(u64),
}

impl Config {
    /// 10 x 10 x 100 leaves, 4 producers, 2 workers.
    pub(crate) fn standard(seed: u64, length: Length) -> Config {
        Config {
            seed,
            tops: 10,
            mids: 10,
            leaves: 100,
            producers: 4,
            workers: 2,
            length,
            window: 100_000,
            sample_every: Duration::from_secs(5),
            fail_per_10k: 10,
            verbose: false,
        }
    }

    fn leaf_count(&self) -> usize {
        self.tops * self.mids * self.leaves
    }
}

// ---- randomness ------------------------------------------------------------

/// splitmix64: small, seedable, good enough to pick actions.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n`.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// True once in `n` on average.
    pub(crate) fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

// ---- the ledger -------------------------------------------------------------

/// What every actor and producer writes into; outlives the actors.
pub(crate) struct Books {
    ring: Vec<AtomicU64>,
    /// Per ring slot, where its current id went and what it was to do
    /// (`leaf slot << 8 | Act::code`), for the stall report.
    what: Vec<AtomicU32>,
    /// Settled ids, by bucket (counted when their slot is checked).
    buckets: [AtomicU64; 5],
    issued: AtomicU64,
    settled: AtomicU64,
    /// Settlements of a slot already settled (a second bucket or a second
    /// time in one): an id seen twice.
    twice: AtomicU64,
    /// Settlements of a slot holding another generation: an id settled
    /// after its slot was reused (seen twice, or a stray id).
    stray: AtomicU64,
    /// Ids that had not settled exactly once when checked.
    bad: AtomicU64,
    first_errors: Mutex<Vec<String>>,
    /// Lifecycle hooks and factory calls, per level (top, mid, leaf).
    made: [AtomicU64; 3],
    starts: [AtomicU64; 3],
    stops: [AtomicU64; 3],
    /// Instances whose hooks did not run as one `pre_start` and then one
    /// `post_stop` (see `Hooks`).
    unpaired: AtomicU64,
    terminated_seen: AtomicU64,
    stashed: AtomicU64,
    respawned: AtomicU64,
    /// Supervision decisions seen on the event stream: [kind][directive].
    directives: [[AtomicU64; 4]; 2],
    /// No more respawning: the run is winding down.
    winding_down: AtomicBool,
    /// The current leaf and mid refs, by slot (registered by `pre_start`).
    leaves: Vec<Mutex<Option<ActorRef<LeafMsg>>>>,
    mids: Vec<Mutex<Option<ActorRef<()>>>>,
}

impl Books {
    fn new(cfg: &Config) -> Books {
        let ring: Vec<AtomicU64> = (0..RING).map(|_| AtomicU64::new(0)).collect();
        // Written once here (a zeroed allocation may come as untouched
        // pages), so the ledger is resident from the start and the RSS
        // samples measure the engine.
        for slot in &ring {
            // Relaxed: no other thread sees the ring yet.
            slot.store(0, Ordering::Relaxed);
        }
        let what: Vec<AtomicU32> = (0..RING).map(|_| AtomicU32::new(0)).collect();
        for w in &what {
            // Relaxed: no other thread sees it yet (written for residency,
            // as the ring).
            w.store(0, Ordering::Relaxed);
        }
        Books {
            ring,
            what,
            buckets: Default::default(),
            issued: AtomicU64::new(0),
            settled: AtomicU64::new(0),
            twice: AtomicU64::new(0),
            stray: AtomicU64::new(0),
            bad: AtomicU64::new(0),
            first_errors: Mutex::new(Vec::new()),
            made: Default::default(),
            starts: Default::default(),
            stops: Default::default(),
            unpaired: AtomicU64::new(0),
            terminated_seen: AtomicU64::new(0),
            stashed: AtomicU64::new(0),
            respawned: AtomicU64::new(0),
            directives: Default::default(),
            winding_down: AtomicBool::new(false),
            leaves: (0..cfg.leaf_count()).map(|_| Mutex::new(None)).collect(),
            mids: (0..cfg.tops * cfg.mids).map(|_| Mutex::new(None)).collect(),
        }
    }

    fn unpaired(&self, level: usize, what: &str) {
        self.unpaired.fetch_add(1, Ordering::Relaxed);
        let level = ["top", "mid", "leaf"][level];
        self.note_error(format!("a {level}: {what}"));
    }

    fn note_error(&self, e: String) {
        let mut errors = self.first_errors.lock().unwrap_or_else(|p| p.into_inner());
        if errors.len() < 20 {
            errors.push(e);
        }
    }

    /// The generation tag a slot holds for `id` (0: never used).
    fn tag(id: u64) -> u64 {
        (id / RING + 1) << 32
    }

    /// Claims `id`'s slot; waits while the slot's previous id is unsettled.
    /// Returns false if it waited longer than `patience` (a lost id).
    fn issue(&self, id: u64, patience: Duration) -> bool {
        let slot = &self.ring[(id % RING) as usize];
        let mut waited: Option<Instant> = None;
        loop {
            // Acquire: pairs with the AcqRel of `settle`.
            let v = slot.load(Ordering::Acquire);
            if v == 0 {
                break;
            }
            if v & 0xFFFF_FFFF != 0 {
                self.check_settled(id - RING, v);
                break;
            }
            let since = *waited.get_or_insert_with(Instant::now);
            if since.elapsed() > patience {
                self.note_error(format!("id {} never settled", id - RING));
                self.bad.fetch_add(1, Ordering::Relaxed);
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        // Release: pairs with the Acquire of `settle`'s fetch_add.
        slot.store(Books::tag(id), Ordering::Release);
        // Relaxed: counters read for flow control and at the end.
        self.issued.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Records where `id` ended.
    pub(crate) fn settle(&self, id: u64, bucket: Bucket) {
        let slot = &self.ring[(id % RING) as usize];
        // AcqRel: pairs with `issue`'s store (the tag) and load.
        let before = slot.fetch_add(bucket.unit(), Ordering::AcqRel);
        // Relaxed: a counter.
        self.settled.fetch_add(1, Ordering::Relaxed);
        if before & !0xFFFF_FFFF != Books::tag(id) {
            self.stray.fetch_add(1, Ordering::Relaxed);
            self.note_error(format!(
                "id {id} settled as {} in a slot of another generation",
                bucket.name()
            ));
        } else if before & 0xFFFF_FFFF != 0 {
            self.twice.fetch_add(1, Ordering::Relaxed);
            self.note_error(format!(
                "id {id} settled again as {} (counts before: {:#x})",
                bucket.name(),
                before & 0xFFFF_FFFF
            ));
        }
    }

    /// Checks that the settled `id` (slot value `v`) is in exactly one
    /// bucket, once; counts it.
    fn check_settled(&self, id: u64, v: u64) {
        let counts: Vec<u64> = BUCKETS
            .iter()
            .map(|b| (v >> (BUCKET_BITS * *b as u32)) & BUCKET_MASK)
            .collect();
        let total: u64 = counts.iter().sum();
        match counts.iter().position(|&c| c == 1) {
            Some(b) if total == 1 => {
                self.buckets[b].fetch_add(1, Ordering::Relaxed);
            }
            _ => {
                self.bad.fetch_add(1, Ordering::Relaxed);
                self.note_error(format!("id {id}: bucket counts {counts:?}"));
            }
        }
    }

    /// Prints the ids issued and not settled, by leaf (at most `leaves`
    /// leaves), with what each was to do and the leaf's and its mid's
    /// mailbox run-state: for a run that stopped making progress.
    fn stall_report(&self, cfg: &Config, leaves: usize) {
        let mut by_leaf: std::collections::BTreeMap<u32, Vec<(u64, u32)>> = Default::default();
        for (slot, v) in self.ring.iter().enumerate() {
            // Acquire: pairs with `settle` and `issue` (a diagnostic).
            let v = v.load(Ordering::Acquire);
            if v == 0 || v & 0xFFFF_FFFF != 0 {
                continue;
            }
            let id = ((v >> 32) - 1) * RING + slot as u64;
            // Relaxed: a diagnostic.
            let what = self.what[slot].load(Ordering::Relaxed);
            by_leaf
                .entry(what >> 8)
                .or_default()
                .push((id, what & 0xFF));
        }
        let total: usize = by_leaf.values().map(Vec::len).sum();
        println!(
            "  STALL: {total} ids unsettled, on {} leaves:",
            by_leaf.len()
        );
        let mids_per_top = cfg.mids;
        for (leaf, ids) in by_leaf.iter().take(leaves) {
            let leaf = *leaf as usize;
            let r = self.leaves[leaf]
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let mid = self.mids[leaf / cfg.leaves]
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let mut acts: std::collections::BTreeMap<&str, usize> = Default::default();
            for (_, code) in ids {
                *acts.entry(code_name(*code)).or_default() += 1;
            }
            println!(
                "    leaf slot {leaf} (top {}, mid {}): {} ids ({:?}), first {:?}; leaf {} {}; mid {}",
                leaf / cfg.leaves / mids_per_top,
                leaf / cfg.leaves,
                ids.len(),
                acts,
                ids.iter().map(|(id, _)| *id).min(),
                r.as_ref().map_or("-".to_owned(), |r| r.path()),
                r.as_ref().map_or("-".to_owned(), |r| r.debug_run_state()),
                mid.as_ref().map_or("-".to_owned(), |m| m.debug_run_state()),
            );
        }
    }

    fn in_flight(&self) -> u64 {
        // Relaxed: flow control only.
        let issued = self.issued.load(Ordering::Relaxed);
        issued.saturating_sub(self.settled.load(Ordering::Relaxed))
    }
}

// ---- the actors -------------------------------------------------------------

/// The error a leaf fails with: which directive its mid is to pick, and,
/// for an escalation, which one the top is to pick for the mid.
#[derive(Debug)]
pub(crate) struct Chaos {
    leaf: Directive,
    mid: Directive,
}

impl fmt::Display for Chaos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "chaos: {:?} then {:?}", self.leaf, self.mid)
    }
}

impl std::error::Error for Chaos {}

/// What a leaf does with a message.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Act {
    /// Handle it.
    Normal,
    /// Fail with an error: the supervisor picks `.0` for the leaf, and
    /// `.1` for the mid if `.0` is Escalate.
    Fail(Directive, Directive),
    /// Panic.
    Panic,
    /// Stash it (once), then handle it when unstashed.
    Stash,
    /// Send it to itself again after this many milliseconds (an actor
    /// timer, cancelled by a stop or restart).
    Later(u64),
    /// Watch the leaf in this slot.
    Watch(usize),
    /// Unwatch every leaf it watches.
    UnwatchAll,
    /// Handle it, then stop.
    StopSelf,
}

/// The stall report's code for a scheduled message from outside.
const SCHEDULED_CODE: u32 = 9;

impl Act {
    /// A code for the stall report (`Books::what`), 1 to 8.
    fn code(self) -> u32 {
        match self {
            Act::Normal => 1,
            Act::Fail(..) => 2,
            Act::Panic => 3,
            Act::Stash => 4,
            Act::Later(_) => 5,
            Act::Watch(_) => 6,
            Act::UnwatchAll => 7,
            Act::StopSelf => 8,
        }
    }
}

/// The name of a code of `Books::what`.
fn code_name(code: u32) -> &'static str {
    match code {
        1 => "normal",
        2 => "fail",
        3 => "panic",
        4 => "stash",
        5 => "later",
        6 => "watch",
        7 => "unwatch-all",
        8 => "stop-self",
        SCHEDULED_CODE => "scheduled",
        _ => "?",
    }
}

/// A leaf's messages (`Clone` for the fixed-delay timer; ids are never
/// cloned by the soak).
#[derive(Debug, Clone)]
pub(crate) enum LeafMsg {
    /// A message with an id, to account for.
    Work {
        /// Unique in the run.
        id: u64,
        /// What to do with it.
        act: Act,
        /// Already stashed once.
        stashed: bool,
    },
    /// Unstash everything (a keyed single timer).
    Flush,
    /// A fixed-delay keyed timer's tick.
    Tick,
}

fn panic_quietly(msg: &str) -> ! {
    std::panic::panic_any(format!("chaos: {msg}"))
}

/// One instance's lifecycle hooks, checked instance by instance (the
/// level totals alone would let a double `post_stop` on one instance hide
/// a missing one on another): `pre_start` once, then `post_stop` once,
/// before the instance is dropped. Made by the factory, so every instance
/// the engine creates has one.
struct Hooks {
    level: usize,
    books: Arc<Books>,
    started: bool,
    stopped: bool,
}

impl Hooks {
    fn new(books: &Arc<Books>, level: usize) -> Hooks {
        books.made[level].fetch_add(1, Ordering::Relaxed);
        Hooks {
            level,
            books: Arc::clone(books),
            started: false,
            stopped: false,
        }
    }

    fn pre_start(&mut self) {
        if self.started {
            self.books
                .unpaired(self.level, "pre_start ran twice on one instance");
        }
        self.started = true;
        self.books.starts[self.level].fetch_add(1, Ordering::Relaxed);
    }

    fn post_stop(&mut self) {
        if !self.started {
            self.books
                .unpaired(self.level, "post_stop ran on an instance never started");
        }
        if self.stopped {
            self.books
                .unpaired(self.level, "post_stop ran twice on one instance");
        }
        self.stopped = true;
        self.books.stops[self.level].fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for Hooks {
    fn drop(&mut self) {
        match (self.started, self.stopped) {
            (true, true) => {}
            (false, _) => self
                .books
                .unpaired(self.level, "an instance was dropped never started"),
            (true, false) => self
                .books
                .unpaired(self.level, "an instance was dropped without post_stop"),
        }
    }
}

struct Leaf {
    slot: usize,
    books: Arc<Books>,
    hooks: Hooks,
    /// Ids sent to itself by `tell_after`, not handled yet.
    timers: Vec<(u64, Cancellable)>,
    watching: VecDeque<ActorId>,
}

impl Actor for Leaf {
    type Msg = LeafMsg;

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        self.hooks.pre_start();
        *self.books.leaves[self.slot]
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(ctx.self_ref());
        if self.slot.is_multiple_of(16) {
            ctx.start_timer_with_fixed_delay("tick", LeafMsg::Tick, Duration::from_millis(50));
        }
        Ok(())
    }

    fn post_stop(&mut self, _ctx: &mut Context<Self>) {
        self.hooks.post_stop();
        // Timer messages not handled: cancelled now by this call, or
        // already by the stop (before `post_stop`); else delivered, and
        // then handled or dead-lettered by the mailbox.
        for (id, timer) in self.timers.drain(..) {
            if timer.cancel() || timer.is_cancelled() {
                self.books.settle(id, Bucket::TimerCancelled);
            }
        }
    }

    fn receive(&mut self, ctx: &mut Context<Self>, msg: LeafMsg) -> Outcome {
        let (id, act, stashed) = match msg {
            LeafMsg::Work { id, act, stashed } => (id, act, stashed),
            LeafMsg::Flush | LeafMsg::Tick => {
                ctx.unstash_all();
                return Ok(());
            }
        };
        match act {
            Act::Normal => {
                if let Some(i) = self.timers.iter().position(|(t, _)| *t == id) {
                    // Delivered: nothing left to cancel.
                    let _delivered = self.timers.swap_remove(i);
                }
            }
            Act::Fail(leaf, mid) => {
                self.books.settle(id, Bucket::DroppedByFailure);
                return Err(Box::new(Chaos { leaf, mid }));
            }
            Act::Panic => {
                self.books.settle(id, Bucket::DroppedByFailure);
                panic_quietly("a leaf panics");
            }
            Act::Stash if !stashed => {
                let again = LeafMsg::Work {
                    id,
                    act,
                    stashed: true,
                };
                if ctx.stash(again).is_err() {
                    // Unbounded: cannot happen. If it did, the message is
                    // gone with the failure this returns.
                    self.books.settle(id, Bucket::DroppedByFailure);
                    return Err("the stash refused a message".into());
                }
                self.books.stashed.fetch_add(1, Ordering::Relaxed);
                // Replaces the previous flush timer (a keyed timer).
                ctx.start_single_timer("flush", LeafMsg::Flush, Duration::from_millis(2));
                return Ok(());
            }
            Act::Stash => {}
            Act::Later(ms) => {
                let again = LeafMsg::Work {
                    id,
                    act: Act::Normal,
                    stashed,
                };
                let timer = ctx.tell_after(Duration::from_millis(ms), again);
                self.timers.push((id, timer));
                return Ok(());
            }
            Act::Watch(slot) => {
                let peer = self.books.leaves[slot]
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .as_ref()
                    .map(|r| r.id());
                if let Some(peer) = peer {
                    if peer != ctx.id() && !ctx.is_watching(&peer) {
                        ctx.watch(&peer);
                        self.watching.push_back(peer);
                        if self.watching.len() > 4 {
                            if let Some(old) = self.watching.pop_front() {
                                ctx.unwatch(&old);
                            }
                        }
                    }
                }
            }
            Act::UnwatchAll => {
                for w in self.watching.drain(..) {
                    ctx.unwatch(&w);
                }
            }
            Act::StopSelf => ctx.stop_self(),
        }
        self.books.settle(id, Bucket::Handled);
        Ok(())
    }

    fn on_terminated(&mut self, _ctx: &mut Context<Self>, who: ActorId) -> Outcome {
        self.books.terminated_seen.fetch_add(1, Ordering::Relaxed);
        self.watching.retain(|w| *w != who);
        Ok(())
    }
}

fn leaf_props(books: &Arc<Books>, slot: usize) -> Props<Leaf> {
    let books = Arc::clone(books);
    Props::new(move || Leaf {
        slot,
        books: Arc::clone(&books),
        hooks: Hooks::new(&books, 2),
        timers: Vec::new(),
        watching: VecDeque::new(),
    })
}

/// The decider of both supervisor levels: the directive the failure names
/// (`level` 0: the leaf's, 1: the mid's), Restart for panics, the default
/// for the rest (Killed: Stop).
fn decide(f: &Failure, level: usize) -> Directive {
    if let Some(c) = f.downcast_ref::<Chaos>() {
        return if level == 0 { c.leaf } else { c.mid };
    }
    default_decider(f)
}

fn strategy(all_for_one: bool, level: usize) -> SupervisorStrategy {
    let s = if all_for_one {
        SupervisorStrategy::all_for_one()
    } else {
        SupervisorStrategy::one_for_one()
    };
    s.logging(false).decider(move |f| decide(f, level))
}

struct Mid {
    index: usize,
    leaves: usize,
    books: Arc<Books>,
    hooks: Hooks,
}

impl Mid {
    fn spawn_leaf(&self, ctx: &mut Context<Self>, k: usize) {
        let slot = self.index * self.leaves + k;
        // Fails only while this mid stops, or if a new incarnation of the
        // leaf already took the name.
        if let Ok(leaf) = ctx.spawn(leaf_props(&self.books, slot), &format!("l{k}")) {
            ctx.watch(&leaf.id());
        }
    }
}

impl Actor for Mid {
    type Msg = ();

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        self.hooks.pre_start();
        *self.books.mids[self.index]
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(ctx.self_ref());
        for k in 0..self.leaves {
            self.spawn_leaf(ctx, k);
        }
        Ok(())
    }

    fn post_stop(&mut self, _ctx: &mut Context<Self>) {
        self.hooks.post_stop();
    }

    fn receive(&mut self, _ctx: &mut Context<Self>, _msg: ()) -> Outcome {
        Ok(())
    }

    fn on_terminated(&mut self, ctx: &mut Context<Self>, who: ActorId) -> Outcome {
        if self.books.winding_down.load(Ordering::Relaxed) || ctx.child(who.name()).is_some() {
            return Ok(());
        }
        if let Some(k) = who.name().strip_prefix('l').and_then(|k| k.parse().ok()) {
            self.books.respawned.fetch_add(1, Ordering::Relaxed);
            self.spawn_leaf(ctx, k);
        }
        Ok(())
    }

    fn supervisor_strategy(&self) -> SupervisorStrategy {
        strategy(self.index.is_multiple_of(2), 0)
    }
}

struct Top {
    index: usize,
    mids: usize,
    leaves: usize,
    books: Arc<Books>,
    hooks: Hooks,
}

impl Top {
    fn spawn_mid(&self, ctx: &mut Context<Self>, j: usize) {
        let books = Arc::clone(&self.books);
        let (index, leaves) = (self.index * self.mids + j, self.leaves);
        let props = Props::new(move || Mid {
            index,
            leaves,
            books: Arc::clone(&books),
            hooks: Hooks::new(&books, 1),
        });
        if let Ok(mid) = ctx.spawn(props, &format!("m{j}")) {
            ctx.watch(&mid.id());
        }
    }
}

impl Actor for Top {
    type Msg = ();

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        self.hooks.pre_start();
        for j in 0..self.mids {
            self.spawn_mid(ctx, j);
        }
        Ok(())
    }

    fn post_stop(&mut self, _ctx: &mut Context<Self>) {
        self.hooks.post_stop();
    }

    fn receive(&mut self, _ctx: &mut Context<Self>, _msg: ()) -> Outcome {
        Ok(())
    }

    fn on_terminated(&mut self, ctx: &mut Context<Self>, who: ActorId) -> Outcome {
        if self.books.winding_down.load(Ordering::Relaxed) || ctx.child(who.name()).is_some() {
            return Ok(());
        }
        if let Some(j) = who.name().strip_prefix('m').and_then(|j| j.parse().ok()) {
            self.books.respawned.fetch_add(1, Ordering::Relaxed);
            self.spawn_mid(ctx, j);
        }
        Ok(())
    }

    fn supervisor_strategy(&self) -> SupervisorStrategy {
        strategy(self.index.is_multiple_of(2), 1)
    }
}

// ---- the producers ----------------------------------------------------------

fn pick_directive(rng: &mut Rng) -> Directive {
    match rng.below(40) {
        0..=17 => Directive::Resume,
        18..=35 => Directive::Restart,
        36..=37 => Directive::Stop,
        _ => Directive::Escalate,
    }
}

fn pick_act(rng: &mut Rng, leaves: usize, fail_per_10k: u64) -> Act {
    // Out of 10 000 messages: `fail_per_10k` errors, a fifth as many
    // panics, 500 stashed, 100 sent again by an actor timer, 20 watches, 20
    // unwatches, 2 stop_self; the rest are plain.
    let r = rng.below(10_000);
    let panics = fail_per_10k / 5;
    let mut at = fail_per_10k;
    if r < at {
        let leaf = pick_directive(rng);
        // The mid's directive after an escalation: rarely an escalation
        // again (a top's restart stops a tenth of the tree).
        let mid = match rng.below(100) {
            0 => Directive::Escalate,
            1..=60 => Directive::Resume,
            61..=90 => Directive::Restart,
            _ => Directive::Stop,
        };
        return Act::Fail(leaf, mid);
    }
    for (n, act) in [(panics, 0), (500, 1), (100, 2), (20, 3), (20, 4), (2, 5)] {
        at += n;
        if r < at {
            return match act {
                0 => Act::Panic,
                1 => Act::Stash,
                2 => Act::Later(1 + rng.below(20)),
                3 => Act::Watch(rng.below(leaves as u64) as usize),
                4 => Act::UnwatchAll,
                _ => Act::StopSelf,
            };
        }
    }
    Act::Normal
}

/// Per producer: what it did besides sending.
#[derive(Debug, Default, Clone)]
struct Sent {
    messages: u64,
    scheduled: u64,
    cancelled: u64,
    kills: u64,
    stops: u64,
    pills: u64,
    mid_signals: u64,
    stalls: u64,
}

fn produce(cfg: &Config, p: usize, books: &Books, deadline: Option<Instant>) -> Sent {
    let mut rng = Rng::new(cfg.seed ^ (p as u64).wrapping_mul(0xA076_1D64_78BD_642F));
    let leaves = cfg.leaf_count();
    let mut sent = Sent::default();
    let mut timers: VecDeque<(u64, Cancellable)> = VecDeque::new();
    // The other half of the scheduled messages, not cancelled on the way:
    // cancelled at the end if still pending, so that no timer of the
    // producers is left when the system terminates (one due a few
    // milliseconds after the last send outlived a fast termination, which
    // then reported it pending and was not clean). Only the last 1,024
    // are kept: an older one (due at most 30 ms after it was sent) has
    // long fired, and its handle is dropped, not cancelled.
    let mut kept: VecDeque<(u64, Cancellable)> = VecDeque::new();
    let mut k: u64 = 0;
    let patience = Duration::from_secs(60);
    loop {
        match cfg.length {
            Length::Messages(n) if sent.messages >= n => break,
            Length::Time(_)
                if k.is_multiple_of(256) && deadline.is_some_and(|d| Instant::now() >= d) =>
            {
                break
            }
            _ => {}
        }
        while books.in_flight() > cfg.window {
            sent.stalls += 1;
            std::thread::sleep(Duration::from_micros(100));
        }
        let slot = rng.below(leaves as u64) as usize;
        let Some(leaf) = books.leaves[slot]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        else {
            continue;
        };
        // Producer p's ids: p, p + P, p + 2P...; RING is a multiple of P,
        // so a slot is only ever reused by the producer that used it.
        let id = k * cfg.producers as u64 + p as u64;
        k += 1;
        books.issue(id, patience);
        sent.messages += 1;
        let scheduled = rng.one_in(200);
        // Relaxed: read only by the stall report, a diagnostic.
        books.what[(id % RING) as usize].store(
            (slot as u32) << 8 | if scheduled { SCHEDULED_CODE } else { 0 },
            Ordering::Relaxed,
        );
        if scheduled {
            // A scheduled message from outside, cancelled half the time
            // (later, if not yet delivered).
            let delay = Duration::from_millis(1 + rng.below(30));
            let c = leaf.tell_after(
                delay,
                LeafMsg::Work {
                    id,
                    act: Act::Normal,
                    stashed: false,
                },
            );
            sent.scheduled += 1;
            if rng.one_in(2) {
                timers.push_back((id, c));
            } else {
                if kept.len() == 1024 {
                    kept.pop_front();
                }
                kept.push_back((id, c));
            }
        } else {
            let act = pick_act(&mut rng, leaves, cfg.fail_per_10k);
            // Relaxed: as above.
            books.what[(id % RING) as usize].fetch_or(act.code(), Ordering::Relaxed);
            leaf.tell(LeafMsg::Work {
                id,
                act,
                stashed: false,
            });
        }
        if timers.len() > 32 {
            if let Some((id, c)) = timers.pop_front() {
                if c.cancel() {
                    sent.cancelled += 1;
                    books.settle(id, Bucket::ProducerCancelled);
                }
            }
        }
        match rng.below(20_000) {
            0 => {
                sent.kills += 1;
                leaf.kill();
            }
            1 => {
                sent.stops += 1;
                leaf.stop();
            }
            2 => {
                sent.pills += 1;
                leaf.poison_pill();
            }
            3 if rng.one_in(20) => {
                // A mid: killed, stopped or poisoned (its top spawns it
                // again, with a hundred new leaves).
                let m = rng.below(books.mids.len() as u64) as usize;
                let mid = books.mids[m]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                if let Some(mid) = mid {
                    sent.mid_signals += 1;
                    match rng.below(3) {
                        0 => mid.kill(),
                        1 => mid.stop(),
                        _ => mid.poison_pill(),
                    }
                }
            }
            _ => {}
        }
    }
    for (id, c) in timers.into_iter().chain(kept) {
        if c.cancel() {
            sent.cancelled += 1;
            books.settle(id, Bucket::ProducerCancelled);
        }
    }
    sent
}

// ---- the run ----------------------------------------------------------------

/// One RSS sample.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    /// Seconds since the producers started.
    pub(crate) at: f64,
    /// Resident set, bytes.
    pub(crate) rss: u64,
    /// Ids issued so far.
    pub(crate) issued: u64,
    /// Cells alive.
    pub(crate) live_cells: usize,
}

/// Hands the allocator's free memory back to the system before a sample
/// (glibc: `malloc_trim(0)`), so that RSS measures memory in use, not the
/// arenas' high-water marks left by a burst (a mid's restart queues
/// thousands of messages at once). A leak is memory in use: trimming
/// cannot hide it.
pub(crate) fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions and is thread-safe (it
    // locks each arena while it trims it).
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Resident set size of this process, from /proc/self/statm (0 elsewhere).
pub(crate) fn rss_bytes() -> u64 {
    let Ok(statm) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // The page size of every Linux target we run on; statm counts pages.
    pages * 4096
}

/// What a run found.
#[derive(Debug)]
pub(crate) struct Report {
    /// The settings.
    pub(crate) config: Config,
    /// Producers' wall time.
    pub(crate) elapsed: Duration,
    /// Ids issued.
    pub(crate) issued: u64,
    /// Ids per bucket.
    pub(crate) buckets: [u64; 5],
    /// Settlements of an id already settled (see `Books::twice`).
    pub(crate) twice: u64,
    /// See `Books::stray`.
    pub(crate) stray: u64,
    /// See `Books::bad`.
    pub(crate) bad: u64,
    /// The first errors, described.
    pub(crate) errors: Vec<String>,
    /// Instances made, `pre_start`s and `post_stop`s, per level.
    pub(crate) made: [u64; 3],
    /// See `made`.
    pub(crate) starts: [u64; 3],
    /// See `made`.
    pub(crate) stops: [u64; 3],
    /// Supervision decisions: [one-for-one, all-for-one][Resume, Restart,
    /// Stop, Escalate].
    pub(crate) directives: [[u64; 4]; 2],
    /// Terminated signals leaves handled.
    pub(crate) terminated_seen: u64,
    /// Messages stashed.
    pub(crate) stashed: u64,
    /// Children spawned again after they stopped.
    pub(crate) respawned: u64,
    /// Kill, stop and PoisonPill sent to leaves; signals to mids;
    /// scheduled messages; cancelled ones; flow-control waits.
    pub(crate) kills: u64,
    /// See `kills`.
    pub(crate) stops_sent: u64,
    /// See `kills`.
    pub(crate) pills: u64,
    /// See `kills`.
    pub(crate) mid_signals: u64,
    /// See `kills`.
    pub(crate) scheduled: u64,
    /// See `kills`.
    pub(crate) producer_cancelled: u64,
    /// See `kills`.
    pub(crate) stalls: u64,
    /// Dead letters the system counted (all kinds, ids or not).
    pub(crate) dead_letters: u64,
    /// Whether termination completed within its patience, and was clean.
    pub(crate) terminated_clean: bool,
    /// The termination's report as `Debug` (`None` past its patience):
    /// printed when it was not clean, to say which part was not (the
    /// workers drained, runnables left, timers pending).
    pub(crate) termination: Option<String>,
    /// Panics that escaped a run.
    pub(crate) escaped_panics: u64,
    /// Cells alive after termination and after the soak dropped its refs.
    pub(crate) live_cells_after: usize,
    /// Instances whose hooks were not one `pre_start` then one `post_stop`
    /// (read after the cells are gone, so every instance has been dropped).
    pub(crate) unpaired: u64,
    /// RSS samples.
    pub(crate) samples: Vec<Sample>,
}

/// The allowed RSS growth between the base sample (`Report::rss_window`)
/// and the last one: 10 % of the former, or 16 MiB, whichever is larger (the
/// allocator's arenas and the per-thread node caches move by a few MiB
/// with the load, a leak of one node per message grows by hundreds).
pub(crate) fn rss_tolerance(base: u64) -> u64 {
    (base / 10).max(16 << 20)
}

/// Memory in use allowed per live cell above the base sample's count, on
/// top of [`rss_tolerance`]. The tree holds about 10,000 cells, but a
/// restart storm (a mid's children respawned while the old ones drain, an
/// escalation to a top) holds thousands more for a few seconds, each with
/// its mailbox's queued and stashed messages: a CI run measured 27 MiB for
/// 12,500 extra cells (2.2 KiB each) and 17 MiB for 4,450 (3.9 KiB each),
/// trimmed heap, no leak (the same seed's rerun ended 2 MiB above its
/// base). Twice the larger figure. A leak of one node per message still
/// grows by hundreds of MiB; a cell that is never freed is caught by
/// `live_cells_after`.
pub(crate) const RSS_PER_EXTRA_CELL: u64 = 8 << 10;

/// The allowed RSS at `last` for the base sample `base`: the tolerance,
/// and [`RSS_PER_EXTRA_CELL`] for each cell alive then above the base's.
pub(crate) fn rss_allowed(base: &Sample, last: &Sample) -> u64 {
    let extra_cells = last.live_cells.saturating_sub(base.live_cells) as u64;
    base.rss + rss_tolerance(base.rss) + extra_cells * RSS_PER_EXTRA_CELL
}

impl Report {
    /// Every invariant that does not hold, described; empty on success.
    pub(crate) fn violations(&self) -> Vec<String> {
        let mut v = Vec::new();
        let accounted: u64 = self.buckets.iter().sum();
        if accounted != self.issued {
            v.push(format!(
                "{} ids issued, {accounted} accounted for in the buckets",
                self.issued
            ));
        }
        if self.twice + self.stray + self.bad > 0 {
            v.push(format!(
                "ids not settled exactly once: {} twice, {} stray, {} bad",
                self.twice, self.stray, self.bad
            ));
        }
        for (level, name) in ["top", "mid", "leaf"].iter().enumerate() {
            let (m, a, z) = (self.made[level], self.starts[level], self.stops[level]);
            if m != a || a != z {
                v.push(format!(
                    "{name}s: {m} instances made, {a} pre_start, {z} post_stop"
                ));
            }
        }
        if self.unpaired != 0 {
            v.push(format!(
                "{} instances did not run one pre_start and then one post_stop",
                self.unpaired
            ));
        }
        if !self.terminated_clean {
            v.push(format!(
                "termination did not complete cleanly: {}",
                self.termination.as_deref().unwrap_or("none within 120 s")
            ));
        }
        if self.escaped_panics != 0 {
            v.push(format!("{} panics escaped a run", self.escaped_panics));
        }
        if self.live_cells_after != 0 {
            v.push(format!(
                "{} cells alive after termination",
                self.live_cells_after
            ));
        }
        if let Some((base, last)) = self.rss_window() {
            if last.rss > rss_allowed(&base, &last) {
                v.push(format!(
                    "RSS grew from {} MiB at {:.0}s ({} cells) to {} MiB at {:.0}s ({} cells; \
                     allowed {} MiB)",
                    base.rss >> 20,
                    base.at,
                    base.live_cells,
                    last.rss >> 20,
                    last.at,
                    last.live_cells,
                    rss_allowed(&base, &last) >> 20
                ));
            }
        }
        v.extend(self.errors.iter().cloned());
        v
    }

    /// The sample at the start of the 2nd minute (at a third of a run
    /// shorter than 3 minutes) and the last one (None with fewer than 3
    /// samples).
    pub(crate) fn rss_window(&self) -> Option<(Sample, Sample)> {
        if self.samples.len() < 3 {
            return None;
        }
        // The issue's window: from the start of the 2nd minute to the end,
        // for a run of 3 minutes or more (the first minute warms up the
        // caches: node caches, the allocator's arenas, the timer wheel);
        // in a shorter run (CI's 60 s), from a third of the run. The
        // sample nearest that point (samples fall on whole intervals; the
        // run ends a little after its last one).
        let secs = self.elapsed.as_secs_f64();
        let from = if secs >= 180.0 { 60.0 } else { secs / 3.0 };
        let base = *self
            .samples
            .iter()
            .min_by(|a, b| (a.at - from).abs().total_cmp(&(b.at - from).abs()))?;
        let last = *self.samples.last()?;
        Some((base, last))
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.config;
        let secs = self.elapsed.as_secs_f64();
        writeln!(f, "chaos soak: seed {}", c.seed)?;
        writeln!(
            f,
            "  tree {} x {} x {} ({} leaves), {} producers, {} workers, {:.1}s",
            c.tops,
            c.mids,
            c.leaves,
            c.leaf_count(),
            c.producers,
            c.workers,
            secs
        )?;
        writeln!(f)?;
        writeln!(f, "| ids | count | share |")?;
        writeln!(f, "|---|---:|---:|")?;
        writeln!(
            f,
            "| issued | {} | {:.0}/s |",
            self.issued,
            self.issued as f64 / secs.max(1e-9)
        )?;
        for b in BUCKETS {
            let n = self.buckets[b as usize];
            writeln!(
                f,
                "| {} | {} | {:.3}% |",
                b.name(),
                n,
                100.0 * n as f64 / self.issued.max(1) as f64
            )?;
        }
        writeln!(
            f,
            "| seen twice / stray / not once | {} / {} / {} | |",
            self.twice, self.stray, self.bad
        )?;
        writeln!(f)?;
        writeln!(f, "| level | instances | pre_start | post_stop |")?;
        writeln!(f, "|---|---:|---:|---:|")?;
        for (level, name) in ["top", "mid", "leaf"].iter().enumerate() {
            writeln!(
                f,
                "| {name} | {} | {} | {} |",
                self.made[level], self.starts[level], self.stops[level]
            )?;
        }
        writeln!(f)?;
        writeln!(f, "| directive | one-for-one | all-for-one |")?;
        writeln!(f, "|---|---:|---:|")?;
        for (i, d) in ["Resume", "Restart", "Stop", "Escalate"].iter().enumerate() {
            writeln!(
                f,
                "| {d} | {} | {} |",
                self.directives[0][i], self.directives[1][i]
            )?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "  sent to leaves: {} Kill, {} stop, {} PoisonPill; {} signals to mids; \
             {} children spawned again",
            self.kills, self.stops_sent, self.pills, self.mid_signals, self.respawned
        )?;
        writeln!(
            f,
            "  {} scheduled from outside ({} cancelled), {} stashed, {} Terminated handled, \
             {} dead letters in all, {} flow-control waits",
            self.scheduled,
            self.producer_cancelled,
            self.stashed,
            self.terminated_seen,
            self.dead_letters,
            self.stalls
        )?;
        writeln!(
            f,
            "  termination clean: {}; escaped panics: {}; live cells after: {}; unpaired hooks: {}",
            self.terminated_clean, self.escaped_panics, self.live_cells_after, self.unpaired
        )?;
        if !self.terminated_clean {
            match &self.termination {
                Some(report) => writeln!(f, "  termination report: {report}")?,
                None => writeln!(f, "  termination report: none (past the 120 s patience)")?,
            }
        }
        if !self.samples.is_empty() {
            writeln!(f)?;
            writeln!(f, "| t (s) | RSS (MiB) | ids issued | live cells |")?;
            writeln!(f, "|---:|---:|---:|---:|")?;
            for s in &self.samples {
                writeln!(
                    f,
                    "| {:.0} | {:.1} | {} | {} |",
                    s.at,
                    s.rss as f64 / (1 << 20) as f64,
                    s.issued,
                    s.live_cells
                )?;
            }
            if let Some((base, last)) = self.rss_window() {
                writeln!(
                    f,
                    "  RSS at {:.0}s: {:.1} MiB, last ({:.0}s): {:.1} MiB, growth {:+.1} MiB \
                     (tolerance {} MiB, {:+} cells: allowed up to {:.1} MiB)",
                    base.at,
                    base.rss as f64 / (1 << 20) as f64,
                    last.at,
                    last.rss as f64 / (1 << 20) as f64,
                    (last.rss as f64 - base.rss as f64) / (1 << 20) as f64,
                    rss_tolerance(base.rss) >> 20,
                    last.live_cells as i64 - base.live_cells as i64,
                    rss_allowed(&base, &last) as f64 / (1 << 20) as f64
                )?;
            }
        }
        Ok(())
    }
}

/// Installs a panic hook that keeps the soak's own panics (payloads
/// starting with "chaos:") off stderr and passes every other one on.
pub(crate) fn quiet_chaos_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let ours = info
            .payload()
            .downcast_ref::<String>()
            .is_some_and(|s| s.starts_with("chaos:"));
        if !ours {
            previous(info);
        }
    }));
}

/// Runs the soak and reports; the caller judges `Report::violations`.
pub(crate) fn run(cfg: Config) -> Report {
    let system = ActorSystem::builder()
        .name("chaos")
        .workers(cfg.workers)
        .pin_workers(false)
        .dead_letter_logging(0, Duration::from_secs(1))
        .build()
        .expect("the system starts");
    let books = Arc::new(Books::new(&cfg));

    let dead_books = Arc::clone(&books);
    let dead_sub = system.event_stream().subscribe(move |d: &DeadLetter| {
        if let Some(LeafMsg::Work { id, .. }) = d.downcast_ref::<LeafMsg>() {
            dead_books.settle(*id, Bucket::DeadLettered);
        }
    });
    let sup_books = Arc::clone(&books);
    let mids_per_top = cfg.mids;
    let sup_sub = system
        .event_stream()
        .subscribe(move |e: &SupervisionEvent| {
            // The supervisor's strategy kind, from its name (tops and mids
            // with an even index are all-for-one; /user is one-for-one).
            let name = e.supervisor.name();
            let index: Option<usize> = name.get(1..).and_then(|n| n.parse().ok());
            let all_for_one = match name.as_bytes().first() {
                Some(b't') | Some(b'm') => index.is_some_and(|i| {
                    // A mid's strategy goes by its global index: its top's
                    // index times the mids per top, plus its own.
                    let global = if name.starts_with('m') {
                        e.supervisor
                            .path()
                            .split('/')
                            .nth(2)
                            .and_then(|t| t.get(1..)?.parse::<usize>().ok())
                            .map(|t| t * mids_per_top + i)
                    } else {
                        Some(i)
                    };
                    global.is_some_and(|g| g % 2 == 0)
                }),
                _ => false,
            };
            let d = match e.directive {
                Directive::Resume => 0,
                Directive::Restart => 1,
                Directive::Stop => 2,
                Directive::Escalate => 3,
            };
            sup_books.directives[all_for_one as usize][d].fetch_add(1, Ordering::Relaxed);
        });

    let started_leaves = cfg.leaf_count() as u64;
    for t in 0..cfg.tops {
        let books2 = Arc::clone(&books);
        let (mids, leaves) = (cfg.mids, cfg.leaves);
        let props = Props::new(move || Top {
            index: t,
            mids,
            leaves,
            books: Arc::clone(&books2),
            hooks: Hooks::new(&books2, 0),
        });
        system.spawn(props, &format!("t{t}")).expect("spawn a top");
    }
    // Wait for the tree (a start-up, not a correctness wait: the check
    // below does not depend on it).
    let ready = Instant::now();
    while books.starts[2].load(Ordering::Relaxed) < started_leaves
        && ready.elapsed() < Duration::from_secs(60)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    if cfg.verbose {
        println!(
            "tree of {} leaves up in {:.2}s; RSS {} MiB",
            started_leaves,
            ready.elapsed().as_secs_f64(),
            rss_bytes() >> 20
        );
    }

    let start = Instant::now();
    let deadline = match cfg.length {
        Length::Time(d) => Some(start + d),
        Length::Messages(_) => None,
    };
    let done = AtomicBool::new(false);
    let samples = Mutex::new(Vec::new());
    let sents: Vec<Sent> = std::thread::scope(|s| {
        let producers: Vec<_> = (0..cfg.producers)
            .map(|p| {
                let (cfg, books) = (&cfg, &*books);
                s.spawn(move || produce(cfg, p, books, deadline))
            })
            .collect();
        if deadline.is_some() {
            let (done, samples, books, system, cfg) = (&done, &samples, &*books, &system, &cfg);
            s.spawn(move || {
                let mut next = start + cfg.sample_every;
                // The stall watchdog: ids issued and settled, as of the
                // last change, and whether a report was printed.
                let mut progress = (0, 0, Instant::now());
                let mut reported = false;
                while !done.load(Ordering::Relaxed) {
                    // Relaxed: counters, read for a diagnostic.
                    let now = (
                        books.issued.load(Ordering::Relaxed),
                        books.settled.load(Ordering::Relaxed),
                    );
                    if now != (progress.0, progress.1) {
                        progress = (now.0, now.1, Instant::now());
                    } else if !reported && progress.2.elapsed() > STALL_AFTER {
                        reported = true;
                        books.stall_report(cfg, 20);
                    }
                    if Instant::now() < next {
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                    next += cfg.sample_every;
                    trim_heap();
                    let sample = Sample {
                        at: start.elapsed().as_secs_f64(),
                        rss: rss_bytes(),
                        issued: books.issued.load(Ordering::Relaxed),
                        live_cells: system.live_cells(),
                    };
                    if cfg.verbose {
                        println!(
                            "  t={:>5.0}s RSS {:>6.1} MiB, {} ids ({:.0}/s), {} in flight, {} cells",
                            sample.at,
                            sample.rss as f64 / (1 << 20) as f64,
                            sample.issued,
                            sample.issued as f64 / sample.at,
                            books.in_flight(),
                            sample.live_cells
                        );
                    }
                    samples
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(sample);
                }
            });
        }
        let sents = producers
            .into_iter()
            .map(|h| h.join().expect("a producer panicked"))
            .collect();
        done.store(true, Ordering::Relaxed);
        sents
    });
    let elapsed = start.elapsed();

    // Wind down: no more respawns, then terminate.
    books.winding_down.store(true, Ordering::Relaxed);
    let report = system.terminate().wait_timeout(Duration::from_secs(120));
    let terminated_clean = report.as_ref().is_some_and(|r| r.clean());
    let termination = report.as_ref().map(|r| format!("{r:?}"));
    system.event_stream().unsubscribe(&dead_sub);
    system.event_stream().unsubscribe(&sup_sub);
    // Drop the soak's own references to cells.
    for r in &books.leaves {
        r.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
    for r in &books.mids {
        r.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
    // The final sweep: every id still in the ring, named by its slot's
    // generation (the producers advance at their own pace, so the ids in
    // the ring are not the last `RING` issued).
    let issued = books.issued.load(Ordering::Relaxed);
    for (slot, v) in books.ring.iter().enumerate() {
        let v = v.load(Ordering::Acquire);
        if v != 0 {
            books.check_settled(((v >> 32) - 1) * RING + slot as u64, v);
        }
    }

    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let sum = |f: fn(&Sent) -> u64| sents.iter().map(f).sum::<u64>();
    let errors = books
        .first_errors
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    Report {
        elapsed,
        issued,
        buckets: std::array::from_fn(|b| load(&books.buckets[b])),
        twice: load(&books.twice),
        stray: load(&books.stray),
        bad: load(&books.bad),
        errors,
        made: std::array::from_fn(|l| load(&books.made[l])),
        starts: std::array::from_fn(|l| load(&books.starts[l])),
        stops: std::array::from_fn(|l| load(&books.stops[l])),
        directives: std::array::from_fn(|k| std::array::from_fn(|d| load(&books.directives[k][d]))),
        terminated_seen: load(&books.terminated_seen),
        stashed: load(&books.stashed),
        respawned: load(&books.respawned),
        kills: sum(|s| s.kills),
        stops_sent: sum(|s| s.stops),
        pills: sum(|s| s.pills),
        mid_signals: sum(|s| s.mid_signals),
        scheduled: sum(|s| s.scheduled),
        producer_cancelled: sum(|s| s.cancelled),
        stalls: sum(|s| s.stalls),
        dead_letters: system.dead_letter_count(),
        terminated_clean,
        termination,
        escaped_panics: system.escaped_panics(),
        live_cells_after: system.live_cells(),
        unpaired: load(&books.unpaired),
        samples: samples.into_inner().unwrap_or_else(|e| e.into_inner()),
        config: cfg,
    }
}
