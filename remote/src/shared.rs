//! [`Shared`]: one node's state, shared by its handles and the tasks on
//! its runtime; what it publishes ([`Out`], signed with the cluster key),
//! and the table of pending entries its reply subjects answer.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use async_nats::{HeaderMap, Message, StatusCode, Subscriber};
use bytes::Bytes;
use futures_util::StreamExt;
use proscenium::ActorSystem;
use tokio::sync::{oneshot, Notify};

use crate::control::{Incarnation, NoticeSeq, Watches};
use crate::outbound::{Lanes, Out};
use crate::reliable::{self, Producers};
use crate::remote::Exposures;
use crate::settings::RemoteSettings;
use crate::sign::{random_u64, seal, ClusterKey, TAG_LEN};

/// The header that carries a responder's failure back to an asker.
pub(crate) const ERROR_HEADER: &str = "Proscenium-Error";

/// What to do with the answer to a reply subject of this node: called
/// once, with the message or `Err` when it is given up on.
pub(crate) struct Pending {
    pub(crate) deliver: Box<dyn FnOnce(Result<Message, ()>) + Send>,
    /// For local replies: whether their asker still waits (else the
    /// heartbeat's sweep drops the entry).
    pub(crate) alive: Option<Box<dyn Fn() -> bool + Send>>,
    /// When it is given up on (an ask's timeout, a where-request's):
    /// removed with the entry, so an answered ask leaves nothing armed.
    pub(crate) deadline: Option<Instant>,
}

/// The pending entries, and their deadlines in order.
#[derive(Default)]
pub(crate) struct PendingTable {
    pub(crate) by_id: HashMap<u64, Pending>,
    pub(crate) deadlines: BTreeSet<(Instant, u64)>,
}

impl PendingTable {
    pub(crate) fn remove(&mut self, id: u64) -> Option<Pending> {
        let pending = self.by_id.remove(&id)?;
        if let Some(at) = pending.deadline {
            self.deadlines.remove(&(at, id));
        }
        Some(pending)
    }
}

/// The node's state, shared by the handles and the tasks on the runtime.
pub(crate) struct Shared {
    pub(crate) client: async_nats::Client,
    pub(crate) settings: RemoteSettings,
    /// An engine-internal handle (it does not keep the system alive).
    pub(crate) system: ActorSystem,
    /// The two queues to the server (see `outbound.rs`).
    pub(crate) lanes: Lanes,
    /// The cluster key, if the settings have one: everything published is
    /// signed with it, and everything received must verify.
    pub(crate) key: Option<ClusterKey>,
    /// This process's incarnation of the node (heartbeats, where-answers
    /// and notices carry it).
    pub(crate) incarnation: Incarnation,
    /// The prefix of this node's reply subjects,
    /// `<cluster>.reply.<node>.<128 random bits>`: never published (the
    /// heartbeats used to carry the inbox), and each reply subject ends in
    /// a random 64-bit id, so a reply subject cannot be guessed.
    pub(crate) inbox: String,
    pub(crate) pending: Mutex<PendingTable>,
    /// Wakes `expire_pending`: an entry with an earlier deadline than
    /// every other was added.
    pub(crate) earlier_deadline: Notify,
    /// Watch ids. Relaxed: only uniqueness matters.
    pub(crate) next_watch: AtomicU64,
    pub(crate) watches: Mutex<Watches>,
    /// This node's reliable producers (see `reliable.rs`).
    pub(crate) producers: Mutex<Producers>,
    /// The sequence numbers of this node's notices.
    pub(crate) notice_seq: NoticeSeq,
    pub(crate) exposed: Mutex<Exposures>,
    /// Serving tasks still running or about to start (counted under the
    /// `exposed` lock when the name is taken; each notifies `served` as it
    /// ends).
    pub(crate) serving: AtomicUsize,
    pub(crate) served: Notify,
    /// Replies decoded on this node and not yet sent or dropped.
    pub(crate) open_replies: AtomicUsize,
    pub(crate) replies_settled: Notify,
    /// Wakes the failure detector: a node joined `watches.last_seen`.
    pub(crate) node_heard: Notify,
    /// Set once the node has left: sends fail with `Closed`.
    pub(crate) left: AtomicBool,
    /// Messages the NATS client dropped because an exposed name's buffer
    /// was full (its "slow consumer" events; see `Remote::dropped_by_slow_consumer`).
    pub(crate) slow_consumer_drops: Arc<AtomicU64>,
    /// Messages dropped because they did not verify against the cluster
    /// key, or were replays of control notices (see `Remote::rejected_messages`).
    pub(crate) rejected: AtomicU64,
    /// Messages sent to remote actors and delivered to exposed ones (the
    /// `metrics` feature).
    #[cfg(feature = "metrics")]
    pub(crate) messages: crate::metrics::MessageCounters,
}

/// What the node does with an event of its NATS client: a slow-consumer
/// drop is counted in `drops` and logged as a warning (on the first and
/// every power-of-two-th, so that a flood of drops is not a flood of log
/// lines); anything else is logged.
pub(crate) fn note_event(drops: &AtomicU64, event: &async_nats::Event) {
    if let async_nats::Event::SlowConsumer(sid) = event {
        // Relaxed: a statistic, read on its own.
        let n = drops.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_power_of_two() {
            tracing::warn!(
                subscription = sid,
                dropped = n,
                "remote: a message for an exposed name was dropped: its buffer \
                 (subscription-capacity) is full, the actor falls behind its senders"
            );
        }
    } else {
        tracing::info!(event = %event, "remote: NATS");
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    pub(crate) fn subject(&self, kind: &str, name: &str) -> String {
        format!("{}.{kind}.{name}", self.settings.cluster)
    }

    /// `<cluster>.node.<node>.<what>`: this node's control subjects.
    pub(crate) fn node_subject(&self, what: &str) -> String {
        format!(
            "{}.node.{}.{what}",
            self.settings.cluster, self.settings.node
        )
    }

    pub(crate) fn max_payload(&self) -> usize {
        // An atomic load in the client, kept up to date from the server's
        // INFO; `server_info()` clones the whole INFO (a dozen strings) on
        // every message (BENCHMARKS.md, "Remote").
        self.client.max_payload()
    }

    /// Bytes a signed message carries before its body.
    pub(crate) fn tag_len(&self) -> usize {
        if self.key.is_some() {
            TAG_LEN
        } else {
            0
        }
    }

    /// A message of `body` to `subject`, signed.
    pub(crate) fn out(&self, subject: String, reply: Option<String>, body: &[u8]) -> Out {
        let payload = seal(self.key.as_ref(), &subject, reply.as_deref(), None, body);
        Out::new(subject, reply, None, payload)
    }

    /// An encoded message whose first [`tag_len`](Self::tag_len) bytes are
    /// reserved for the tag: the tag is written there (no copy).
    pub(crate) fn out_encoded(
        &self,
        subject: String,
        reply: Option<String>,
        mut payload: Vec<u8>,
    ) -> Out {
        if let Some(key) = &self.key {
            let tag = key.tag(&subject, reply.as_deref(), None, &payload[TAG_LEN..]);
            payload[..TAG_LEN].copy_from_slice(&tag);
        }
        Out::new(subject, reply, None, Bytes::from(payload))
    }

    /// A failure answered to a reply subject (the error header), signed.
    pub(crate) fn error_out(&self, subject: String, reason: &str) -> Out {
        // A header value cannot hold a line break.
        let reason = reason.replace(['\r', '\n'], " ");
        let mut headers = HeaderMap::new();
        headers.insert(ERROR_HEADER, reason.as_str());
        let payload = seal(self.key.as_ref(), &subject, None, Some(&reason), &[]);
        Out::new(subject, None, Some(headers), payload)
    }

    /// Checks a received message and strips its tag: `true` if it may be
    /// acted on. One that may not is counted and logged (`what` says where
    /// it came in), and dropped:
    ///
    /// * a header block the NATS client could not parse (the patched
    ///   client delivers it with a description and no status, instead of
    ///   dropping its connection: third_party/async-nats/PATCH.md);
    /// * a NATS status anywhere but on this node's own reply subjects, or
    ///   one there that is not the server's "no responders" (503, empty):
    ///   any publisher can write a status line (`NATS/1.0 200`), and the
    ///   client takes it from whatever was written, so only the one status
    ///   the server sends us, where it sends it, means anything. A status
    ///   carries no tag (the server cannot sign): the "no responders" on a
    ///   reply subject passes without one, with or without a key;
    /// * with a cluster key, anything else that does not verify.
    ///
    /// See docs/decisions/0023 for what this leaves an attacker.
    pub(crate) fn open(&self, msg: &mut Message, what: &str) -> bool {
        if msg.status.is_none() && msg.description.is_some() {
            self.reject(&msg.subject, what, "its NATS header block does not parse");
            return false;
        }
        if let Some(status) = msg.status {
            if self.is_no_responders(msg, status) {
                return true;
            }
            self.reject(
                &msg.subject,
                what,
                "it carries a NATS status where the server sends none",
            );
            return false;
        }
        let Some(key) = &self.key else {
            return true;
        };
        let error = msg
            .headers
            .as_ref()
            .and_then(|h| h.get(ERROR_HEADER))
            .map(|v| v.as_str());
        if key.verify(&msg.subject, msg.reply.as_deref(), error, &msg.payload) {
            msg.payload = msg.payload.slice(TAG_LEN..);
            true
        } else {
            self.reject(
                &msg.subject,
                what,
                "it does not verify against the cluster key",
            );
            false
        }
    }

    /// Whether `msg` (with `status`) is what the server sends when a
    /// request of this node reached nobody: 503, no body, on one of this
    /// node's reply subjects.
    fn is_no_responders(&self, msg: &Message, status: StatusCode) -> bool {
        status == StatusCode::NO_RESPONDERS
            && msg.payload.is_empty()
            && msg
                .subject
                .strip_prefix(self.inbox.as_str())
                .is_some_and(|rest| rest.starts_with('.'))
    }

    /// Counts and logs (on the first and every power-of-two-th) a message
    /// this node will not act on.
    pub(crate) fn reject(&self, subject: &str, what: &str, why: &str) {
        // Relaxed: a statistic.
        let n = self.rejected.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_power_of_two() {
            tracing::warn!(
                subject,
                rejected = n,
                "remote: dropped a {what}: {why} (a client without the cluster's key, or \
                 a replay; see docs/decisions/0023)"
            );
        }
    }

    /// Queues a user message (a tell, an ask's request, a forwarded
    /// message): refused past `outbound-capacity`.
    pub(crate) fn send_user(&self, out: Out) -> Result<(), crate::RemoteError> {
        self.lanes.send_user(out)
    }

    /// Queues an answer (a reply, a "dropped", a decode failure) on the
    /// user lane; past `outbound-capacity` it is dropped, counted and
    /// logged (its asker gets its timeout).
    pub(crate) fn send_reply(&self, out: Out) {
        if self.send_user(out).is_err() {
            self.lanes.note_dropped_reply();
        }
    }

    /// Queues a message on the user lane whatever its length: small
    /// messages that must keep their place among the user messages (a
    /// where-request, a where-answer, the final flush).
    pub(crate) fn send_ordered(&self, out: Out) {
        self.lanes.send_forced(out);
    }

    /// Queues a control message (a notice, a round trip after a
    /// subscription): never behind user messages.
    pub(crate) fn send_control(&self, out: Out) {
        self.lanes.send_control(out);
    }

    pub(crate) fn is_closed(&self) -> bool {
        // Acquire: pairs with the Release store in `leave`.
        self.left.load(Ordering::Acquire)
    }

    /// A reply subject of this node: the inbox and a random id, which is
    /// also the key of its pending entry. (Two live entries with the same
    /// 64-bit id: about one chance in 2^40 with a million pending.)
    pub(crate) fn new_reply_subject(&self) -> (u64, String) {
        let id = random_u64();
        (id, self.reply_subject_of(id))
    }

    pub(crate) fn reply_subject_of(&self, id: u64) -> String {
        format!("{}.{id:016x}", self.inbox)
    }

    /// A round trip through the server: a message to this node's own
    /// inbox, published after everything sent so far, comes back. The
    /// server handles a connection's operations in order, so once it is
    /// back, every subscription made before is registered there.
    /// (async-nats's `flush` only waits until the bytes are written.)
    ///
    /// On the control lane it follows the subscriptions and notices made
    /// before; on the user lane (`ordered`) every user message queued
    /// before too.
    pub(crate) async fn round_trip(&self, ordered: bool) -> Result<(), String> {
        let (id, subject) = self.new_reply_subject();
        let (tx, rx) = oneshot::channel();
        self.put_pending(
            id,
            Pending {
                deliver: Box::new(move |outcome| {
                    let _ = tx.send(outcome.is_ok());
                }),
                alive: None,
                // Bounded by its caller's `timeout`.
                deadline: None,
            },
        );
        let out = self.out(subject, None, &[]);
        if ordered {
            self.send_ordered(out);
        } else {
            self.send_control(out);
        }
        match tokio::time::timeout(self.settings.connect_timeout, rx).await {
            Ok(Ok(true)) => Ok(()),
            _ => {
                self.take_pending(id);
                Err(format!(
                    "no round trip through the server within {:?}",
                    self.settings.connect_timeout
                ))
            }
        }
    }

    pub(crate) fn put_pending(&self, id: u64, pending: Pending) {
        let mut table = lock(&self.pending);
        if let Some(at) = pending.deadline {
            let earliest = table.deadlines.first().is_none_or(|(first, _)| at < *first);
            table.deadlines.insert((at, id));
            if earliest {
                // A permit if the task is not waiting: it looks again.
                self.earlier_deadline.notify_one();
            }
        }
        table.by_id.insert(id, pending);
    }

    /// Deadlines of pending entries not yet answered or given up on.
    #[cfg(test)]
    pub(crate) fn deadlines_armed(&self) -> usize {
        lock(&self.pending).deadlines.len()
    }

    pub(crate) fn take_pending(&self, id: u64) -> Option<Pending> {
        lock(&self.pending).remove(id)
    }

    pub(crate) fn reply_armed(&self) {
        // Relaxed: a count; `reply_settled`'s notify carries the wake-up.
        self.open_replies.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn reply_settled(&self) {
        // AcqRel: the waiter in `close` reads the count after the notify.
        if self.open_replies.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.replies_settled.notify_waiters();
        }
    }

    pub(crate) fn dead_letter<T: std::any::Any + Send>(
        &self,
        recipient: Option<proscenium::ActorId>,
        message: T,
    ) {
        self.system.publish_dead_letter(recipient, message);
    }
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("node", &self.settings.node)
            .finish()
    }
}

/// Waits until everything queued so far on one lane (the user lane if
/// `ordered`) has reached the server (and been handled there).
pub(crate) async fn flush(shared: &Shared, ordered: bool) {
    if let Err(e) = shared.round_trip(ordered).await {
        tracing::warn!(error = %e, "remote: flush");
    }
}

/// Hands each message to this node's inbox to its pending entry, once it
/// verifies (a forged answer is dropped and leaves the entry waiting for
/// the real one).
pub(crate) async fn inbox_task(shared: Arc<Shared>, mut inbox: Subscriber) {
    let prefix_len = shared.inbox.len() + 1;
    while let Some(mut msg) = inbox.next().await {
        if !shared.open(&mut msg, "reply") {
            continue;
        }
        let last = msg.subject.get(prefix_len..).unwrap_or("");
        if last == "ack" {
            // A reliable receiver's confirmation (a no-responders status
            // here means nobody exposes the name yet: resent later).
            if msg.status.is_none() {
                reliable::on_ack(&shared, &msg.payload);
            }
            continue;
        }
        let Ok(id) = u64::from_str_radix(last, 16) else {
            continue;
        };
        if let Some(pending) = shared.take_pending(id) {
            (pending.deliver)(Ok(msg));
        }
    }
}

/// Gives up on the pending entries whose deadline has passed (an ask's
/// timeout, a where-request's): one task for all of them, asleep until
/// the earliest deadline. An answered entry takes its deadline with it.
pub(crate) async fn expire_pending(shared: Arc<Shared>) {
    loop {
        let now = Instant::now();
        let (expired, next) = {
            let mut table = lock(&shared.pending);
            let mut expired = Vec::new();
            while let Some(&(at, id)) = table.deadlines.first() {
                if at > now {
                    break;
                }
                expired.extend(table.remove(id));
            }
            (expired, table.deadlines.first().map(|(at, _)| *at))
        };
        for pending in expired {
            (pending.deliver)(Err(()));
        }
        match next {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at.into()) => {}
                    () = shared.earlier_deadline.notified() => {}
                }
            }
            None => shared.earlier_deadline.notified().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each slow-consumer event is one message the client dropped: counted.
    /// Other events are only logged.
    #[test]
    fn slow_consumer_events_are_counted_and_nothing_else() {
        let drops = AtomicU64::new(0);
        for event in [
            async_nats::Event::Connected,
            async_nats::Event::SlowConsumer(3),
            async_nats::Event::Disconnected,
            async_nats::Event::SlowConsumer(3),
            async_nats::Event::SlowConsumer(7),
            async_nats::Event::Draining,
        ] {
            note_event(&drops, &event);
        }
        assert_eq!(drops.load(Ordering::Relaxed), 3);
    }
}
