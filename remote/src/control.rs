//! The control plane: incarnations, the notices a node publishes on
//! `<cluster>.node.<node>.{join,hb,leave,terminated.<name>}`, remote
//! watches, where-requests, the heartbeat and the failure detector.
//!
//! Every notice carries the sender's [`Incarnation`] and a sequence number
//! that grows with each notice of that incarnation; with a cluster key it
//! is signed (see `sign.rs`). A receiver that tracks a node acts on a
//! notice only if it is from the node's current incarnation (or a newer
//! one) and newer than the last it heard: a replayed heartbeat, leave or
//! terminated notice is dropped and counted like a forged one.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use async_nats::{Message, StatusCode};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::error::RemoteError;
use crate::shared::{lock, Pending, Shared};
use crate::sign::random_u64;

/// What a watcher learns when a watched remote actor is gone: see
/// [`Remote::watch`](crate::Remote::watch).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteTerminated {
    /// The exposed name watched.
    pub name: String,
    /// The node that exposed it, if it was found.
    pub node: Option<String>,
    /// Why the watch fired.
    pub reason: TerminatedReason,
}

/// Why a remote watch fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TerminatedReason {
    /// The actor terminated (its node said so).
    Stopped,
    /// Its node left the cluster (coordinated shutdown).
    NodeLeft,
    /// Its node sent no heartbeat within the failure-detector timeout (or
    /// did not answer where the actor is): taken as gone, as Akka's
    /// watch takes an unreachable node.
    NodeUnreachable,
    /// No node exposes the name (with [`Remote::expose`](crate::Remote::expose)) at watch time.
    NotFound,
}

/// One run of a node (a process connected under the node's name): a node
/// restarted under the same name is another incarnation, as Akka's actor
/// uid. Ordered by when it started, so a notice of an earlier one is
/// known for stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct Incarnation {
    /// Milliseconds since the Unix epoch when it connected.
    started_ms: u64,
    /// 128 random bits: two incarnations never share one.
    id: u128,
}

impl Incarnation {
    pub(crate) fn new() -> Incarnation {
        let started_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Incarnation {
            started_ms,
            id: (u128::from(random_u64()) << 64) | u128::from(random_u64()),
        }
    }

    /// Whether this one started before `other` (a restarted node's clock
    /// is taken to be later than at its previous start; if it is not, its
    /// notices wait until the failure detector has given up on the old one).
    fn older_than(&self, other: &Incarnation) -> bool {
        self.started_ms < other.started_ms
    }
}

/// The body of a notice (`join`, `hb`, `leave`, `terminated.<name>`).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Notice {
    pub(crate) inc: Incarnation,
    /// Grows by one with each notice this incarnation sends, in the order
    /// they are published (see [`Shared::send_notice`]).
    pub(crate) seq: u64,
}

/// The body of the answer to a where-request.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WhereAnswer {
    pub(crate) node: String,
    pub(crate) inc: Incarnation,
    /// The number of the last notice the node had sent when it answered:
    /// a terminated notice of the name numbered after it is news; one
    /// numbered before it (a replay) is not.
    pub(crate) seq: u64,
}

/// A terminated notice heard while a watch of its name was not located:
/// from which node, incarnation and number.
type Heard = (String, Incarnation, u64);

/// The most terminated notices an unlocated watch keeps (a notice beyond
/// it is dropped: the watch then learns of the end from its node's leave,
/// or its failure detector).
const UNLOCATED_NOTICES: usize = 16;

/// The most departed incarnations remembered (see `Watches::departed`).
const DEPARTED: usize = 1024;

pub(crate) struct Watch {
    name: String,
    node: Option<String>,
    /// The incarnation of the node that answered.
    incarnation: Option<Incarnation>,
    /// While not located: the terminated notices of the name heard since
    /// the where-request went out (the notice can overtake the answer:
    /// they travel on different lanes). Matched against the answer.
    heard_terminated: Vec<Heard>,
    fire: Box<dyn FnOnce(RemoteTerminated) + Send>,
}

/// What this node knows of a node it watches.
struct Seen {
    inc: Incarnation,
    /// The last notice's sequence number (0: none yet).
    seq: u64,
    /// When it was last heard from.
    at: Instant,
}

#[derive(Default)]
pub(crate) struct Watches {
    by_id: HashMap<u64, Watch>,
    /// The nodes watched: their current incarnation, when they were last
    /// heard from and their last notice.
    last_seen: HashMap<String, Seen>,
    /// Incarnations known to be gone for good: they left (their leave
    /// notice), or a newer incarnation of their node was heard. A notice
    /// of one is a replay (dropped and counted, tracked or not), and a
    /// where-answer of one means the actor is gone. The last
    /// [`DEPARTED`], oldest forgotten first.
    departed: HashMap<(String, Incarnation), TerminatedReason>,
    departed_order: VecDeque<(String, Incarnation)>,
}

impl Watches {
    /// Remembers that `inc` of `node` is gone (`why`: how watches of it end).
    fn depart(&mut self, node: &str, inc: Incarnation, why: TerminatedReason) {
        let key = (node.to_owned(), inc);
        if self.departed.insert(key.clone(), why).is_none() {
            self.departed_order.push_back(key);
            if self.departed_order.len() > DEPARTED {
                if let Some(old) = self.departed_order.pop_front() {
                    self.departed.remove(&old);
                }
            }
        }
    }

    fn departed(&self, node: &str, inc: Incarnation) -> Option<TerminatedReason> {
        // A lookup without allocating would need a borrowed key type; a
        // notice of a node is not the hot path.
        self.departed.get(&(node.to_owned(), inc)).copied()
    }
}

/// How a notice or where-answer of a node compares with what is known.
enum Standing {
    /// From the current incarnation (or a node not tracked).
    Current,
    /// From a newer incarnation: the watches located on the older one,
    /// whose actors are gone.
    Newer(Vec<Watch>),
    /// A replay: an older incarnation, or a notice not newer than the last.
    Stale,
}

/// What was heard from a node: a notice (with its number) or the answer
/// to a where-request (with the number of its last notice then).
#[derive(Clone, Copy)]
enum Hearing {
    Notice(u64),
    Answer(u64),
}

/// Learns that `inc` is heard from `node`. A node heard from for the
/// first time (or anew) wakes the failure detector (`heard`); a newer
/// incarnation makes the one it replaces departed.
fn hear(
    w: &mut Watches,
    node: &str,
    inc: Incarnation,
    hearing: Hearing,
    heard: &Notify,
) -> Standing {
    let now = Instant::now();
    if w.departed(node, inc).is_some() {
        return Standing::Stale;
    }
    match w.last_seen.get_mut(node) {
        Some(seen) if seen.inc == inc => {
            match hearing {
                Hearing::Notice(seq) => {
                    if seq <= seen.seq {
                        return Standing::Stale;
                    }
                    seen.seq = seq;
                }
                // An answer may have been overtaken by later notices.
                Hearing::Answer(seq) => seen.seq = seen.seq.max(seq),
            }
            seen.at = now;
            return Standing::Current;
        }
        Some(seen) if inc.older_than(&seen.inc) => return Standing::Stale,
        _ => {}
    }
    let seq = match hearing {
        Hearing::Notice(seq) | Hearing::Answer(seq) => seq,
    };
    if let Some(old) = w
        .last_seen
        .insert(node.to_owned(), Seen { inc, seq, at: now })
    {
        w.depart(node, old.inc, TerminatedReason::NodeUnreachable);
    }
    // A permit if the detector is not waiting: it looks again.
    heard.notify_one();
    let stale: Vec<u64> = w
        .by_id
        .iter()
        .filter(|(_, x)| x.node.as_deref() == Some(node) && x.incarnation.is_some_and(|i| i != inc))
        .map(|(id, _)| *id)
        .collect();
    Standing::Newer(stale.iter().filter_map(|id| w.by_id.remove(id)).collect())
}

/// A remote watch; [`unwatch`](Self::unwatch) cancels it. Dropping it
/// keeps the watch.
#[derive(Debug)]
pub struct RemoteWatch {
    shared: Arc<Shared>,
    id: u64,
}

impl RemoteWatch {
    /// Cancels the watch: no Terminated comes from it after this returns.
    /// Returns `false` if it had already fired.
    pub fn unwatch(self) -> bool {
        lock(&self.shared.watches).by_id.remove(&self.id).is_some()
    }
}

impl Shared {
    fn fire(&self, watch: Watch, reason: TerminatedReason) {
        (watch.fire)(RemoteTerminated {
            name: watch.name,
            node: watch.node,
            reason,
        });
    }

    /// Fires (and removes) every watch matching `pick`.
    fn fire_where(&self, reason: TerminatedReason, pick: impl Fn(&Watch) -> bool) {
        let fired: Vec<Watch> = {
            let mut w = lock(&self.watches);
            let ids: Vec<u64> = w
                .by_id
                .iter()
                .filter(|(_, watch)| pick(watch))
                .map(|(id, _)| *id)
                .collect();
            ids.iter().filter_map(|id| w.by_id.remove(id)).collect()
        };
        for watch in fired {
            self.fire(watch, reason);
        }
    }

    /// Publishes a notice of this incarnation on
    /// `<cluster>.node.<node>.<what>`. The sequence number is taken and
    /// the notice queued under one lock, so notices are published in the
    /// order of their numbers (a receiver drops one not newer than the
    /// last it heard).
    pub(crate) fn send_notice(&self, what: &str) {
        let mut seq = lock(&self.notice_seq);
        *seq += 1;
        let body = postcard::to_stdvec(&Notice {
            inc: self.incarnation,
            seq: *seq,
        })
        .expect("a notice always encodes");
        let out = self.out(self.node_subject(what), None, &body);
        self.send_control(if what == "hb" { out.heartbeat() } else { out });
    }

    /// The answer to a where-request: this node and incarnation, and the
    /// number of its last notice.
    pub(crate) fn where_answer(&self) -> Vec<u8> {
        let seq = *lock(&self.notice_seq);
        postcard::to_stdvec(&WhereAnswer {
            node: self.settings.node.clone(),
            inc: self.incarnation,
            seq,
        })
        .expect("a where-answer always encodes")
    }
}

/// The sequence numbers of this node's notices (see [`Shared::send_notice`]).
pub(crate) type NoticeSeq = Mutex<u64>;

/// Registers a watch of `name` and sends its where-request (through the
/// ordered queue: it reaches the exposing node before anything this node
/// sends after `watch` returns, and that node answers it before later
/// messages).
pub(crate) fn watch(
    shared: &Arc<Shared>,
    name: &str,
    fire: Box<dyn FnOnce(RemoteTerminated) + Send>,
) -> Result<RemoteWatch, RemoteError> {
    // Relaxed: only uniqueness matters.
    let id = shared.next_watch.fetch_add(1, Ordering::Relaxed);
    lock(&shared.watches).by_id.insert(
        id,
        Watch {
            name: name.to_owned(),
            node: None,
            incarnation: None,
            heard_terminated: Vec::new(),
            fire,
        },
    );
    let (rid, reply_subject) = shared.new_reply_subject();
    let resolver = Arc::clone(shared);
    shared.put_pending(
        rid,
        Pending {
            deliver: Box::new(move |outcome| {
                let outcome = match outcome {
                    Ok(msg) if msg.status == Some(StatusCode::NO_RESPONDERS) => {
                        Err(TerminatedReason::NotFound)
                    }
                    Ok(msg) if msg.status.is_none() => {
                        postcard::from_bytes::<WhereAnswer>(&msg.payload)
                            .map_err(|_| TerminatedReason::NodeUnreachable)
                    }
                    _ => Err(TerminatedReason::NodeUnreachable),
                };
                located(&resolver, id, outcome);
            }),
            alive: None,
            deadline: Instant::now().checked_add(shared.settings.failure_detector_timeout),
        },
    );
    shared.send_ordered(shared.out(shared.subject("where", name), Some(reply_subject), &[]));
    Ok(RemoteWatch {
        shared: Arc::clone(shared),
        id,
    })
}

/// A watch's where-request was answered (with the node) or failed.
fn located(shared: &Shared, id: u64, outcome: Result<WhereAnswer, TerminatedReason>) {
    let (fire, stale, replays) = {
        let mut w = lock(&shared.watches);
        let Some(watch) = w.by_id.get_mut(&id) else {
            return;
        };
        // The terminated notices heard before the answer: one of the
        // answering incarnation numbered after the answer is the actor's
        // end (it overtook the answer); one numbered before it is a
        // replay; others are of other nodes (of an earlier holder of the
        // name, or replays that cannot be told from one).
        let heard = std::mem::take(&mut watch.heard_terminated);
        let mut replays = 0;
        let mut ended = false;
        if let Ok(answer) = &outcome {
            for (node, inc, seq) in &heard {
                if *node == answer.node && *inc == answer.inc {
                    if *seq > answer.seq {
                        ended = true;
                    } else {
                        replays += 1;
                    }
                }
            }
        }
        match outcome {
            Ok(answer) => {
                let departed = w.departed(&answer.node, answer.inc);
                match hear(
                    &mut w,
                    &answer.node,
                    answer.inc,
                    Hearing::Answer(answer.seq),
                    &shared.node_heard,
                ) {
                    // Answered by an incarnation that has left, or one
                    // older than one heard from since: that actor is gone.
                    Standing::Stale => (
                        w.by_id.remove(&id).map(|watch| {
                            (watch, departed.unwrap_or(TerminatedReason::NodeUnreachable))
                        }),
                        Vec::new(),
                        replays,
                    ),
                    standing => {
                        let stale = match standing {
                            Standing::Newer(stale) => stale,
                            _ => Vec::new(),
                        };
                        let fire = if ended {
                            w.by_id.remove(&id).map(|mut watch| {
                                watch.node = Some(answer.node);
                                watch.incarnation = Some(answer.inc);
                                (watch, TerminatedReason::Stopped)
                            })
                        } else {
                            if let Some(watch) = w.by_id.get_mut(&id) {
                                watch.node = Some(answer.node);
                                watch.incarnation = Some(answer.inc);
                            }
                            None
                        };
                        (fire, stale, replays)
                    }
                }
            }
            Err(reason) => (
                w.by_id.remove(&id).map(|watch| (watch, reason)),
                Vec::new(),
                replays,
            ),
        }
    };
    for _ in 0..replays {
        shared.reject(
            "a terminated notice",
            "control notice",
            "a replay (numbered before its node's where-answer)",
        );
    }
    if let Some((watch, reason)) = fire {
        shared.fire(watch, reason);
    }
    for watch in stale {
        shared.fire(watch, TerminatedReason::NodeUnreachable);
    }
}

/// Acts on the notices of every node (`<cluster>.node.>`): heartbeats
/// (and the incarnations they reveal), leaves and terminated actors. A
/// notice that does not verify, does not decode, or is stale is dropped
/// and counted.
pub(crate) async fn control(
    shared: Arc<Shared>,
    mut messages: impl futures_util::Stream<Item = Message> + Unpin,
) {
    let prefix = format!("{}.node.", shared.settings.cluster);
    while let Some(mut msg) = messages.next().await {
        if !shared.open(&mut msg, "control notice") {
            continue;
        }
        let subject = msg.subject.as_str();
        let Some(rest) = subject.strip_prefix(&prefix) else {
            continue;
        };
        let Some((node, what)) = rest.split_once('.') else {
            continue;
        };
        if what == "join" {
            continue;
        }
        let Ok(notice) = postcard::from_bytes::<Notice>(&msg.payload) else {
            shared.reject(subject, "control notice", "it does not decode");
            continue;
        };
        let inc = notice.inc;
        let terminated = what.strip_prefix("terminated.");
        let standing = {
            let mut w = lock(&shared.watches);
            if w.departed(node, inc).is_some() {
                None
            } else if !w.last_seen.contains_key(node) {
                // A node this one does not track (no watch is located on
                // it): nothing of its can fire. Its leave is remembered
                // (an answer of it, or a replay, comes later); its
                // terminated notice is kept by the unlocated watches of
                // the name, to be matched against their answer.
                if what == "leave" {
                    w.depart(node, inc, TerminatedReason::NodeLeft);
                } else if let Some(name) = terminated {
                    note_unlocated(&mut w, node, inc, notice.seq, name);
                }
                continue;
            } else {
                Some(hear(
                    &mut w,
                    node,
                    inc,
                    Hearing::Notice(notice.seq),
                    &shared.node_heard,
                ))
            }
        };
        let older = match standing {
            None => {
                shared.reject(
                    subject,
                    "control notice",
                    "a replay (of an incarnation that has left)",
                );
                continue;
            }
            Some(Standing::Stale) => {
                shared.reject(
                    subject,
                    "control notice",
                    "a replay (stale incarnation or sequence)",
                );
                continue;
            }
            Some(Standing::Newer(older)) => older,
            Some(Standing::Current) => Vec::new(),
        };
        for watch in older {
            shared.fire(watch, TerminatedReason::NodeUnreachable);
        }
        if what == "leave" {
            {
                let mut w = lock(&shared.watches);
                if w.last_seen.get(node).is_some_and(|s| s.inc == inc) {
                    w.last_seen.remove(node);
                }
                w.depart(node, inc, TerminatedReason::NodeLeft);
            }
            shared.fire_where(TerminatedReason::NodeLeft, |w| {
                w.node.as_deref() == Some(node)
            });
        } else if let Some(name) = terminated {
            // Watches of the name located on that incarnation; the
            // unlocated ones keep it for their answer.
            note_unlocated(&mut lock(&shared.watches), node, inc, notice.seq, name);
            shared.fire_where(TerminatedReason::Stopped, |w| {
                w.name == name && w.node.as_deref() == Some(node) && w.incarnation == Some(inc)
            });
        }
    }
}

/// Keeps a terminated notice of `name` on every watch of it not located
/// yet (at most [`UNLOCATED_NOTICES`] each).
fn note_unlocated(w: &mut Watches, node: &str, inc: Incarnation, seq: u64, name: &str) {
    for watch in w.by_id.values_mut() {
        if watch.node.is_none()
            && watch.name == name
            && watch.heard_terminated.len() < UNLOCATED_NOTICES
        {
            watch.heard_terminated.push((node.to_owned(), inc, seq));
        }
    }
}

/// Publishes this node's heartbeat, and sweeps the entries of abandoned
/// local replies, every heartbeat interval.
pub(crate) async fn heartbeat(shared: Arc<Shared>) {
    let every = shared.settings.heartbeat_interval;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // One heartbeat waiting at a time (an outage does not pile them up).
        if !shared.is_closed() && shared.lanes.claim_heartbeat() {
            shared.send_notice("hb");
        }
        let abandoned: Vec<Pending> = {
            let mut p = lock(&shared.pending);
            let ids: Vec<u64> = p
                .by_id
                .iter()
                .filter(|(_, e)| e.alive.as_ref().is_some_and(|alive| !alive()))
                .map(|(id, _)| *id)
                .collect();
            ids.iter().filter_map(|id| p.remove(*id)).collect()
        };
        for pending in abandoned {
            (pending.deliver)(Err(()));
        }
    }
}

/// The failure detector: a watched node not heard from for
/// `failure_detector_timeout` is gone, and the watches located on it fire
/// (`NodeUnreachable`). It sleeps until the earliest node's last-heard +
/// timeout (a heartbeat moves that later, and it looks again then), so a
/// node is found gone at its timeout, not at some later tick.
pub(crate) async fn failure_detector(shared: Arc<Shared>) {
    let timeout = shared.settings.failure_detector_timeout;
    loop {
        let now = Instant::now();
        let (lost, next) = {
            let mut w = lock(&shared.watches);
            let lost: Vec<String> = w
                .last_seen
                .iter()
                .filter(|(_, seen)| now.saturating_duration_since(seen.at) >= timeout)
                .map(|(n, _)| n.clone())
                .collect();
            for n in &lost {
                w.last_seen.remove(n);
            }
            let next = w
                .last_seen
                .values()
                .map(|seen| seen.at)
                .min()
                .and_then(|seen| seen.checked_add(timeout));
            (lost, next)
        };
        for node in lost {
            shared.fire_where(TerminatedReason::NodeUnreachable, |w| {
                w.node.as_deref() == Some(node.as_str())
            });
        }
        match next {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at.into()) => {}
                    () = shared.node_heard.notified() => {}
                }
            }
            None => shared.node_heard.notified().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Secret;
    use crate::sign::{seal, ClusterKey, TAG_LEN};
    use std::time::Duration;

    /// The signed control plane's cost per heartbeat (BENCHMARKS.md,
    /// "Remote security"): a heartbeat built and sealed by its node, then
    /// verified and decoded by a watcher, with the cluster key and
    /// without, alternated, medians of 7 rounds of 20,000; and the same
    /// for a 40-byte message to an actor. Figures with
    /// `cargo test --release -p proscenium-remote --lib signing_costs -- --nocapture`.
    #[test]
    fn signing_costs_about_a_microsecond_per_message() {
        let key = ClusterKey::new(&Secret::new("k".repeat(32)));
        let inc = Incarnation::new();
        // Fewer in a debug build (CI's), where ring's glue is unoptimized.
        let per: u32 = if cfg!(debug_assertions) { 500 } else { 20_000 };
        let heartbeat = |key: Option<&ClusterKey>| {
            let subject = "shop.node.a.hb";
            let start = Instant::now();
            for seq in 0..u64::from(per) {
                let body = postcard::to_stdvec(&Notice { inc, seq }).expect("encodes");
                let sealed = seal(key, subject, None, None, &body);
                let payload = match key {
                    Some(k) => {
                        assert!(k.verify(subject, None, None, &sealed));
                        &sealed[TAG_LEN..]
                    }
                    None => &sealed[..],
                };
                let notice: Notice = postcard::from_bytes(payload).expect("decodes");
                std::hint::black_box(notice);
            }
            start.elapsed() / per
        };
        let message = |key: Option<&ClusterKey>| {
            let subject = "shop.actor.bench-sink";
            let body = [7u8; 40];
            let start = Instant::now();
            for _ in 0..per {
                let sealed = seal(key, subject, None, None, &body);
                if let Some(k) = key {
                    assert!(k.verify(subject, None, None, &sealed));
                }
                std::hint::black_box(sealed);
            }
            start.elapsed() / per
        };
        let median = |mut v: Vec<Duration>| {
            v.sort();
            v[v.len() / 2]
        };
        let (mut hb, mut hb_key, mut msg, mut msg_key) = (vec![], vec![], vec![], vec![]);
        for _ in 0..7 {
            hb.push(heartbeat(None));
            hb_key.push(heartbeat(Some(&key)));
            msg.push(message(None));
            msg_key.push(message(Some(&key)));
        }
        let (hb, hb_key, msg, msg_key) = (median(hb), median(hb_key), median(msg), median(msg_key));
        eprintln!(
            "per heartbeat (build, seal, verify, decode): {hb:?} unsigned, {hb_key:?} signed; \
             per 40-byte message (seal, verify): {msg:?} unsigned, {msg_key:?} signed"
        );
        // Far above what it costs (about a microsecond in a release build,
        // tens in a debug one): only a pathology (a key derived per
        // message, say) fails this.
        let bound = Duration::from_micros(if cfg!(debug_assertions) { 2_000 } else { 100 });
        assert!(hb_key < bound, "{hb_key:?}");
        assert!(msg_key < bound, "{msg_key:?}");
    }

    fn inc(started_ms: u64, id: u128) -> Incarnation {
        Incarnation { started_ms, id }
    }

    /// A replay is a notice of an older incarnation than the one known,
    /// or one not newer than the last notice heard; a newer incarnation
    /// gives up the watches located on the older one.
    #[test]
    fn notices_of_an_older_incarnation_or_not_newer_than_the_last_are_stale() {
        let heard = Notify::new();
        let mut w = Watches::default();
        let (old, new) = (inc(1_000, 1), inc(2_000, 2));
        assert!(
            matches!(hear(&mut w, "n", old, Hearing::Notice(1), &heard), Standing::Newer(v) if v.is_empty())
        );
        assert!(matches!(
            hear(&mut w, "n", old, Hearing::Notice(2), &heard),
            Standing::Current
        ));
        assert!(matches!(
            hear(&mut w, "n", old, Hearing::Notice(2), &heard),
            Standing::Stale
        ));
        assert!(matches!(
            hear(&mut w, "n", old, Hearing::Notice(1), &heard),
            Standing::Stale
        ));
        // A where-answer has no number: current.
        assert!(matches!(
            hear(&mut w, "n", old, Hearing::Answer(0), &heard),
            Standing::Current
        ));
        w.by_id.insert(
            7,
            Watch {
                name: "x".into(),
                node: Some("n".into()),
                incarnation: Some(old),
                heard_terminated: Vec::new(),
                fire: Box::new(|_| {}),
            },
        );
        // The node restarted: the watch of the old incarnation is handed back.
        assert!(
            matches!(hear(&mut w, "n", new, Hearing::Notice(1), &heard), Standing::Newer(v) if v.len() == 1)
        );
        assert!(w.by_id.is_empty());
        // The old incarnation again (a replay): stale, whatever its number.
        assert!(matches!(
            hear(&mut w, "n", old, Hearing::Notice(99), &heard),
            Standing::Stale
        ));
        assert!(matches!(
            hear(&mut w, "n", new, Hearing::Notice(2), &heard),
            Standing::Current
        ));
        // Another node is tracked on its own.
        assert!(matches!(
            hear(&mut w, "m", old, Hearing::Notice(1), &heard),
            Standing::Newer(_)
        ));
    }
}
