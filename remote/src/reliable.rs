//! Reliable delivery on request, after Akka's reliable delivery
//! (`ProducerController` / `ConsumerController`): a [`ReliableRef`] numbers
//! its messages to one name, keeps each until the receiving node confirms
//! it, resends what is not confirmed after a timeout, and keeps at most a
//! window of them in flight; the receiving node delivers each sequence
//! number once and in order, and drops duplicates. See
//! docs/decisions/0023-remote-security.md, "Reliable delivery".
//!
//! Wire: a reliable message goes to `C.actor.<name>.r` (the exposing
//! node subscribes beside `C.actor.<name>`) with the producer's ack
//! subject (`<inbox>.ack`) as its NATS reply subject; its body is an
//! [`Envelope`] and the message. The receiver answers with cumulative
//! [`Ack`]s: when its subscription has nothing more ready, and every
//! [`ACK_EVERY`] messages. With a cluster key both are signed as every
//! message is.
//!
//! Sessions: the receiver delivers only envelopes of a session it opened
//! and still keeps. A producer starts without one; its first message (sent
//! alone) is answered with a *fresh* ack that names a new random session,
//! and the producer sends everything unconfirmed again under it. A
//! receiver that restarts, exposes the name anew, or has forgotten the
//! producer (idle, or past `reliable-max-producers`) does not know the
//! session of what arrives, and opens a new one the same way. So an
//! envelope recorded and published again later (a replay, or a late
//! copy) is delivered at most once: in its own session while the
//! receiver keeps it (a duplicate then), never in another.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::codec::encode;
use crate::error::RemoteError;
use crate::remote::Inner;
use crate::shared::{lock, Shared};
use crate::sign::{random_u64, seal};

/// The receiver acknowledges at least every this many messages of one
/// producer (and whenever its subscription has nothing more ready).
pub(crate) const ACK_EVERY: u64 = 1024;

/// The most bytes an [`Envelope`] takes (postcard varints: 10 bytes a
/// u64 at most).
const ENVELOPE_MAX: usize = 30;

/// What one buffered message is taken to cost beyond its body (its
/// `Bytes`, its allocation, the deque's slot), against `outbound-capacity`.
const OVERHEAD: usize = 64;

/// What precedes a reliable message's body.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Envelope {
    /// The producer (random; one per node and name).
    pub(crate) producer: u64,
    /// This message's number, from 1.
    pub(crate) seq: u64,
    /// The producer's first unconfirmed number when it sent this: all
    /// before it are confirmed (a receiver with no state starts there).
    pub(crate) first: u64,
    /// The receiver's session this was sent in (0: none known yet).
    pub(crate) session: u64,
}

/// A cumulative confirmation: every message of `producer` up to `upto`
/// was delivered. A fresh one opens `session`: the producer sends what is
/// unconfirmed again in it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Ack {
    pub(crate) producer: u64,
    pub(crate) upto: u64,
    pub(crate) session: u64,
    pub(crate) fresh: bool,
}

/// The producers of this node (one per name), by name and by id.
#[derive(Default)]
pub(crate) struct Producers {
    by_name: HashMap<String, Arc<Producer>>,
    by_id: HashMap<u64, Arc<Producer>>,
}

/// One node's sending side of reliable delivery to one name.
pub(crate) struct Producer {
    id: u64,
    name: String,
    subject: String,
    state: Mutex<ProducerState>,
    /// Wakes the producer's task: a message was queued or confirmed.
    wake: Notify,
    /// Wakes senders waiting for room, and waiters for confirmation.
    progress: Notify,
    /// Messages sent again after the resend timeout (a statistic).
    resent: AtomicU64,
}

struct ProducerState {
    /// The bodies of `first ..` not yet confirmed, in order.
    buffer: VecDeque<Bytes>,
    /// The number of `buffer[0]`: everything before is confirmed.
    first: u64,
    /// The last number published (since the last resend from `first`).
    sent_to: u64,
    /// Bytes in `buffer` (each message counted with [`OVERHEAD`]).
    bytes: usize,
    /// When the last confirmation came, or the first unconfirmed message
    /// went out: the resend timeout runs from here.
    progress_at: Instant,
    /// The receiver's session (0: none yet: only the first unconfirmed
    /// message goes out, to be answered with one).
    session: u64,
}

impl Producer {
    fn unconfirmed(&self) -> usize {
        lock(&self.state).buffer.len()
    }
}

/// The producer of `name` on this node (made, and its task started, on
/// first use).
pub(crate) fn producer(inner: &Inner, name: &str) -> Arc<Producer> {
    let shared = &inner.shared;
    let mut producers = lock(&shared.producers);
    if let Some(p) = producers.by_name.get(name) {
        return Arc::clone(p);
    }
    let p = Arc::new(Producer {
        id: random_u64(),
        name: name.to_owned(),
        subject: format!("{}.r", shared.subject("actor", name)),
        state: Mutex::new(ProducerState {
            buffer: VecDeque::new(),
            first: 1,
            sent_to: 0,
            bytes: 0,
            progress_at: Instant::now(),
            session: 0,
        }),
        wake: Notify::new(),
        progress: Notify::new(),
        resent: AtomicU64::new(0),
    });
    producers.by_name.insert(name.to_owned(), Arc::clone(&p));
    producers.by_id.insert(p.id, Arc::clone(&p));
    inner
        .handle
        .spawn(run_producer(Arc::clone(shared), Arc::clone(&p)));
    p
}

/// The producer's task: publishes what the window allows, and after the
/// resend timeout without progress everything unconfirmed again, in order
/// (go-back-N: the receiver drops what is out of order or seen).
async fn run_producer(shared: Arc<Shared>, p: Arc<Producer>) {
    let window = shared.settings.reliable_window as u64;
    let resend = shared.settings.reliable_resend_timeout;
    let ack_subject = format!("{}.ack", shared.inbox);
    loop {
        let (batch, first, next_deadline) = {
            let mut st = lock(&p.state);
            let now = Instant::now();
            let last = st.first + st.buffer.len() as u64 - 1;
            if st.sent_to >= st.first && now >= st.progress_at + resend {
                // Nothing confirmed for a resend timeout: from the first.
                // Relaxed: a statistic.
                p.resent
                    .fetch_add(st.sent_to + 1 - st.first, Ordering::Relaxed);
                st.sent_to = st.first - 1;
            }
            if st.sent_to < st.first {
                // Nothing in flight: the timeout runs from this send.
                st.progress_at = now;
            }
            // Without a session, the first message alone: the receiver
            // answers it with one (everything else would be dropped).
            let window = if st.session == 0 { 1 } else { window };
            let upto = last.min(st.first - 1 + window);
            let from = st.sent_to + 1;
            let batch: Vec<(u64, Bytes)> = (from..=upto)
                .map(|seq| (seq, st.buffer[(seq - st.first) as usize].clone()))
                .collect();
            st.sent_to = st.sent_to.max(upto);
            let deadline = (!st.buffer.is_empty()).then(|| st.progress_at + resend);
            (batch, (st.first, st.session), deadline)
        };
        let (first, session) = first;
        for (seq, body) in batch {
            let envelope = Envelope {
                producer: p.id,
                seq,
                first,
                session,
            };
            let mut payload = BytesMut::with_capacity(ENVELOPE_MAX + body.len());
            let head = postcard::to_extend(&envelope, Vec::with_capacity(ENVELOPE_MAX))
                .expect("an envelope always encodes");
            payload.extend_from_slice(&head);
            payload.extend_from_slice(&body);
            let sealed = seal(
                shared.key.as_ref(),
                &p.subject,
                Some(&ack_subject),
                None,
                &payload,
            );
            if let Err(e) = shared
                .client
                .publish_with_reply(p.subject.clone(), ack_subject.clone(), sealed)
                .await
            {
                tracing::debug!(error = %e, "remote: a reliable publish failed (resent later)");
            }
        }
        match next_deadline {
            Some(at) => {
                tokio::select! {
                    () = p.wake.notified() => {}
                    () = tokio::time::sleep_until(at.into()) => {}
                }
            }
            None => p.wake.notified().await,
        }
    }
}

/// Wakes every sender waiting for room (the node is leaving: they find
/// it closed).
pub(crate) fn wake_all(shared: &Shared) {
    for p in lock(&shared.producers).by_name.values() {
        p.progress.notify_waiters();
    }
}

/// An acknowledgement reached this node's ack subject.
pub(crate) fn on_ack(shared: &Shared, body: &[u8]) {
    let Ok(ack) = postcard::from_bytes::<Ack>(body) else {
        return;
    };
    let Some(p) = lock(&shared.producers).by_id.get(&ack.producer).cloned() else {
        return;
    };
    let mut st = lock(&p.state);
    let new_session = ack.fresh && ack.session != st.session;
    // A confirmation holds whatever its session: the receiver delivered
    // those (cumulative, so an old one confirms nothing new).
    if ack.upto >= st.first {
        let n = (ack.upto + 1 - st.first).min(st.buffer.len() as u64);
        for _ in 0..n {
            if let Some(body) = st.buffer.pop_front() {
                st.bytes -= body.len() + OVERHEAD;
            }
        }
        st.first += n;
        st.sent_to = st.sent_to.max(st.first - 1);
        st.progress_at = Instant::now();
    } else if !new_session {
        return;
    }
    if new_session {
        // A new session: everything unconfirmed again, in it.
        st.session = ack.session;
        st.sent_to = st.first - 1;
        st.progress_at = Instant::now();
    }
    drop(st);
    p.progress.notify_waiters();
    // The window moved: more may go out.
    p.wake.notify_one();
}

/// What a receiving node keeps per producer sending to one of its names,
/// within the bounds of `reliable-max-producers` and
/// `reliable-idle-timeout`.
pub(crate) struct Consumers {
    by_producer: HashMap<u64, ConsumerState>,
    /// Producers with an acknowledgement to send (each once: see
    /// `ConsumerState::owed`).
    owed: Vec<u64>,
    /// Acknowledgements of forgotten producers, still to send.
    parting: Vec<(String, Ack)>,
    max_producers: usize,
    idle_timeout: Duration,
}

struct ConsumerState {
    /// The session this receiver opened for the producer.
    session: u64,
    /// The next number to deliver.
    expected: u64,
    /// Where acknowledgements go.
    ack_to: String,
    /// Delivered since the last acknowledgement.
    unacked: u64,
    /// Listed in `Consumers::owed` (so a burst of many producers costs one
    /// push each, not a search of the list).
    owed: bool,
    /// The next acknowledgement announces the session.
    fresh: bool,
    /// When a message of the producer came last.
    heard_at: Instant,
}

impl ConsumerState {
    fn ack(&self, producer: u64) -> Ack {
        Ack {
            producer,
            upto: self.expected - 1,
            session: self.session,
            fresh: self.fresh,
        }
    }
}

/// What to do with a reliable message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The next in order: deliver it.
    Deliver,
    /// Seen before (a resend): drop it.
    Duplicate,
    /// An earlier one is missing: drop it (the producer resends from there).
    Gap,
    /// Not of the producer's current session here (its first message, one
    /// sent before this receiver opened the session, or a replay):
    /// dropped, and the session announced.
    OtherSession,
}

impl Consumers {
    pub(crate) fn new(max_producers: usize, idle_timeout: Duration) -> Consumers {
        Consumers {
            by_producer: HashMap::new(),
            owed: Vec::new(),
            parting: Vec::new(),
            max_producers: max_producers.max(1),
            idle_timeout,
        }
    }

    /// Where `envelope` stands for its producer; counts it towards an
    /// acknowledgement. `true` in the second place: one is due now.
    pub(crate) fn receive(&mut self, envelope: &Envelope, ack_to: &str) -> (Verdict, bool) {
        let now = Instant::now();
        if !self.by_producer.contains_key(&envelope.producer) {
            if self.by_producer.len() >= self.max_producers {
                self.forget_least_recent();
            }
            self.by_producer.insert(
                envelope.producer,
                ConsumerState {
                    // Never 0 (a producer's "no session").
                    session: random_u64().max(1),
                    // No state (a new producer, or a new receiver):
                    // everything before `first` was confirmed, so start there.
                    expected: envelope.first,
                    ack_to: ack_to.to_owned(),
                    unacked: 0,
                    owed: false,
                    fresh: true,
                    heard_at: now,
                },
            );
        }
        let Some(st) = self.by_producer.get_mut(&envelope.producer) else {
            unreachable!("inserted above");
        };
        st.heard_at = now;
        let verdict = if envelope.session != st.session {
            st.fresh = true;
            Verdict::OtherSession
        } else {
            if envelope.first > st.expected {
                // Confirmed past what this session delivered: delivered in
                // an earlier one (its cumulative confirmation came late).
                st.expected = envelope.first;
            }
            if envelope.seq == st.expected {
                st.expected += 1;
                st.unacked += 1;
                Verdict::Deliver
            } else if envelope.seq < st.expected {
                Verdict::Duplicate
            } else {
                Verdict::Gap
            }
        };
        let due = st.unacked >= ACK_EVERY;
        if !st.owed {
            st.owed = true;
            self.owed.push(envelope.producer);
        }
        (verdict, due)
    }

    /// Whether an acknowledgement is owed.
    pub(crate) fn owes(&self) -> bool {
        !self.owed.is_empty() || !self.parting.is_empty()
    }

    /// Forgets the least recently heard eighth of the producers (at least
    /// one), their owed acknowledgements kept to send: the table is full.
    /// One pass over the table per eighth of its size: constant per
    /// producer added.
    fn forget_least_recent(&mut self) {
        let mut by_age: Vec<(Instant, u64)> = self
            .by_producer
            .iter()
            .map(|(producer, st)| (st.heard_at, *producer))
            .collect();
        let k = (by_age.len() / 8).max(1);
        by_age.select_nth_unstable(k - 1);
        for (_, producer) in &by_age[..k] {
            self.forget(*producer);
        }
    }

    /// Forgets the producers not heard from for the idle timeout.
    pub(crate) fn forget_idle(&mut self) {
        let Some(cutoff) = Instant::now().checked_sub(self.idle_timeout) else {
            return;
        };
        let idle: Vec<u64> = self
            .by_producer
            .iter()
            .filter(|(_, st)| st.heard_at <= cutoff)
            .map(|(producer, _)| *producer)
            .collect();
        for producer in idle {
            self.forget(producer);
        }
    }

    fn forget(&mut self, producer: u64) {
        if let Some(st) = self.by_producer.remove(&producer) {
            if st.owed {
                self.parting.push((st.ack_to.clone(), st.ack(producer)));
            }
        }
    }

    /// Sends every owed acknowledgement (cumulative: up to the last
    /// delivered), on the control lane: a flow-control signal does not wait
    /// behind user messages.
    pub(crate) fn acknowledge(&mut self, shared: &Shared) {
        let send = |to: String, ack: &Ack| {
            let body = postcard::to_stdvec(ack).expect("an ack always encodes");
            shared.send_control(shared.out(to, None, &body));
        };
        for (to, ack) in std::mem::take(&mut self.parting) {
            send(to, &ack);
        }
        for producer in std::mem::take(&mut self.owed) {
            if let Some(st) = self.by_producer.get_mut(&producer) {
                if !st.owed {
                    // Forgotten and heard from again: listed twice.
                    continue;
                }
                st.unacked = 0;
                st.owed = false;
                send(st.ack_to.clone(), &st.ack(producer));
                st.fresh = false;
            }
        }
    }
}

/// A reference that delivers each message to the actor exposed under a
/// name exactly once and in order, across lost messages, a restarted NATS
/// server and bursts (reliable delivery after Akka's `ProducerController`
/// and `ConsumerController`): [`Remote::reliable_ref`](crate::Remote::reliable_ref).
///
/// Each message gets a sequence number and is kept on this node until
/// the receiving node confirms it; at most
/// [`reliable_window`](crate::RemoteSettings::reliable_window) are in
/// flight; what is not confirmed within
/// [`reliable_resend_timeout`](crate::RemoteSettings::reliable_resend_timeout)
/// is sent again from the first unconfirmed one, and the receiver drops
/// duplicates and anything out of order. The buffer of unconfirmed
/// messages holds at most
/// [`outbound_capacity`](crate::RemoteSettings::outbound_capacity) bytes:
/// [`tell`](Self::tell) fails past it, [`send`](Self::send) waits for room.
///
/// Exactly once holds while both nodes live: a receiving node that
/// restarts (or exposes the name anew) may get again what it had
/// delivered and not yet confirmed (at least once), and what a sending node
/// held unconfirmed when it stopped is lost (no durable queue). The name
/// must be exposed with [`Remote::expose`](crate::Remote::expose) (a
/// group's members do not share sequence numbers). Messages from one node
/// to one name through reliable refs keep their order among themselves,
/// not with [`RemoteRef`](crate::RemoteRef) messages. Cheap to clone; all
/// reliable refs of one node to one name share one sequence.
pub struct ReliableRef<M> {
    inner: Arc<Inner>,
    producer: Arc<Producer>,
    _msg: PhantomData<fn(M)>,
}

impl<M> Clone for ReliableRef<M> {
    fn clone(&self) -> Self {
        ReliableRef {
            inner: Arc::clone(&self.inner),
            producer: Arc::clone(&self.producer),
            _msg: PhantomData,
        }
    }
}

impl<M> fmt::Debug for ReliableRef<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReliableRef")
            .field("name", &self.producer.name)
            .finish()
    }
}

impl<M: Serialize + DeserializeOwned + Send + 'static> ReliableRef<M> {
    pub(crate) fn new(inner: Arc<Inner>, name: &str) -> ReliableRef<M> {
        let producer = producer(&inner, name);
        ReliableRef {
            inner,
            producer,
            _msg: PhantomData,
        }
    }

    /// The exposed name.
    pub fn name(&self) -> &str {
        &self.producer.name
    }

    /// Queues `msg` for delivery, exactly once and in order. Fails if it
    /// cannot be encoded, is over the server's max payload, or the buffer
    /// of unconfirmed messages is full ([`RemoteError::OutboundFull`]:
    /// wait with [`send`](Self::send) instead), or the remote has left.
    pub fn tell(&self, msg: M) -> Result<(), RemoteError> {
        let body = self.body(&msg)?;
        push(&self.inner, &self.producer, body).map_err(|(_, e)| e)
    }

    /// Queues `msg`, waiting for room in the buffer if it is full: the
    /// flow-controlled way to send many (Akka's producer waits for demand
    /// the same way). A future (await it anywhere) with a blocking
    /// [`wait`](ReliableSend::wait).
    pub fn send(&self, msg: M) -> ReliableSend {
        let body = self.body(&msg);
        ReliableSend {
            producer: Arc::clone(&self.producer),
            inner: Arc::clone(&self.inner),
            body: Some(body),
            wait: None,
        }
    }

    /// How many messages are queued or in flight and not yet confirmed.
    pub fn unconfirmed(&self) -> usize {
        self.producer.unconfirmed()
    }

    /// How many messages were sent again after a resend timeout.
    pub fn resent(&self) -> u64 {
        // Relaxed: a statistic.
        self.producer.resent.load(Ordering::Relaxed)
    }

    /// A future that resolves once every message queued so far is
    /// confirmed (with a blocking [`wait_timeout`](Confirmed::wait_timeout)).
    /// It waits as long as it takes: while nobody exposes the name, or the
    /// connection is down, or after this node has closed, that is forever.
    pub fn confirmed(&self) -> Confirmed {
        Confirmed {
            producer: Arc::clone(&self.producer),
            handle: self.inner.handle.clone(),
            wait: None,
        }
    }

    fn body(&self, msg: &M) -> Result<Bytes, RemoteError> {
        let shared = &self.inner.shared;
        if shared.is_closed() {
            return Err(RemoteError::Closed);
        }
        let encoded = encode(shared, msg)?;
        let body = encoded.into_body(shared);
        let size = body.len() + ENVELOPE_MAX + shared.tag_len();
        let max = shared.max_payload();
        if size > max {
            return Err(RemoteError::PayloadTooLarge { size, max });
        }
        Ok(body)
    }
}

/// Queues `body` on `producer` if its buffer has room (one message is
/// always taken into an empty buffer).
fn push(inner: &Inner, producer: &Producer, body: Bytes) -> Result<(), (Bytes, RemoteError)> {
    let shared = &inner.shared;
    if shared.is_closed() {
        return Err((body, RemoteError::Closed));
    }
    let capacity = shared.settings.outbound_capacity;
    let mut st = lock(&producer.state);
    let cost = body.len() + OVERHEAD;
    if !st.buffer.is_empty() && st.bytes + cost > capacity {
        return Err((body, RemoteError::OutboundFull { capacity }));
    }
    st.bytes += cost;
    st.buffer.push_back(body);
    drop(st);
    producer.wake.notify_one();
    // Once, when the buffer takes it (its resends are not counted again).
    #[cfg(feature = "metrics")]
    shared.messages.sent();
    Ok(())
}

/// [`ReliableRef::send`]: queues a message once there is room.
#[must_use = "nothing is queued unless the ReliableSend is awaited or waited for"]
pub struct ReliableSend {
    producer: Arc<Producer>,
    inner: Arc<Inner>,
    body: Option<Result<Bytes, RemoteError>>,
    wait: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl ReliableSend {
    /// Blocks this thread until the message is queued (or refused).
    ///
    /// # Panics
    ///
    /// On a scheduler worker thread (`.await` it there).
    #[track_caller]
    pub fn wait(self) -> Result<(), RemoteError> {
        proscenium_scheduler::block_on(self)
    }
}

impl Future for ReliableSend {
    type Output = Result<(), RemoteError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        loop {
            // Registered before the attempt, so no confirmation between the
            // attempt and the wait is missed.
            if self.wait.is_none() {
                let producer = Arc::clone(&self.producer);
                self.wait = Some(Box::pin(async move { producer.progress.notified().await }));
            }
            if let Some(wait) = self.wait.as_mut() {
                // Polled once: registered as a waiter (or woken already).
                if wait.as_mut().poll(cx).is_ready() {
                    self.wait = None;
                    continue;
                }
            }
            let body = match self.body.take() {
                Some(Ok(body)) => body,
                Some(Err(e)) => return Poll::Ready(Err(e)),
                None => return Poll::Ready(Err(RemoteError::Closed)),
            };
            match push(&self.inner, &self.producer, body) {
                Ok(()) => return Poll::Ready(Ok(())),
                Err((body, RemoteError::OutboundFull { .. })) => {
                    self.body = Some(Ok(body));
                    return Poll::Pending;
                }
                Err((_, e)) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl fmt::Debug for ReliableSend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReliableSend").finish_non_exhaustive()
    }
}

/// [`ReliableRef::confirmed`]: resolves once nothing queued is unconfirmed.
#[must_use = "a future does nothing unless awaited or waited for"]
pub struct Confirmed {
    producer: Arc<Producer>,
    /// The remote's runtime, for `wait_timeout`'s timer.
    handle: tokio::runtime::Handle,
    wait: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl Confirmed {
    /// Blocks this thread until every message queued is confirmed, or
    /// `timeout` has passed: `true` if confirmed.
    ///
    /// # Panics
    ///
    /// On a scheduler worker thread (`.await` it there).
    #[track_caller]
    pub fn wait_timeout(self, timeout: std::time::Duration) -> bool {
        proscenium_scheduler::assert_not_on_worker("Confirmed::wait_timeout");
        let (tx, rx) = std::sync::mpsc::channel();
        let task = self.handle.clone().spawn(async move {
            self.await;
            let _ = tx.send(());
        });
        let confirmed = rx.recv_timeout(timeout).is_ok();
        task.abort();
        confirmed
    }
}

impl Future for Confirmed {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<()> {
        loop {
            if self.wait.is_none() {
                let producer = Arc::clone(&self.producer);
                self.wait = Some(Box::pin(async move { producer.progress.notified().await }));
            }
            if let Some(wait) = self.wait.as_mut() {
                if wait.as_mut().poll(cx).is_ready() {
                    self.wait = None;
                    continue;
                }
            }
            if self.producer.unconfirmed() == 0 {
                return Poll::Ready(());
            }
            return Poll::Pending;
        }
    }
}

impl fmt::Debug for Confirmed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Confirmed").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn consumers() -> Consumers {
        Consumers::new(65_536, Duration::from_secs(300))
    }

    /// The session `c` opened for producer 7 (after a message of it).
    fn session(c: &Consumers) -> u64 {
        c.by_producer[&7].session
    }

    fn env(seq: u64, first: u64, session: u64) -> Envelope {
        Envelope {
            producer: 7,
            seq,
            first,
            session,
        }
    }

    /// The receiver's side: each number once, in order, in the session it
    /// opened; duplicates and gaps dropped; a fresh receiver starts at the
    /// producer's first unconfirmed number.
    #[test]
    fn each_number_is_delivered_once_and_in_order() {
        let mut c = consumers();
        // No session yet: dropped, and one is opened.
        assert_eq!(c.receive(&env(1, 1, 0), "a").0, Verdict::OtherSession);
        let s = session(&c);
        assert_ne!(s, 0);
        assert_eq!(c.receive(&env(1, 1, s), "a").0, Verdict::Deliver);
        assert_eq!(c.receive(&env(3, 1, s), "a").0, Verdict::Gap);
        assert_eq!(c.receive(&env(2, 1, s), "a").0, Verdict::Deliver);
        assert_eq!(c.receive(&env(1, 1, s), "a").0, Verdict::Duplicate);
        assert_eq!(c.receive(&env(3, 1, s), "a").0, Verdict::Deliver);
        assert!(c.owes());
        // A fresh receiver: the producer has confirmed up to 9.
        let mut fresh = consumers();
        assert_eq!(fresh.receive(&env(10, 10, s), "a").0, Verdict::OtherSession);
        let f = session(&fresh);
        assert_ne!(f, s);
        assert_eq!(fresh.receive(&env(12, 10, f), "a").0, Verdict::Gap);
        assert_eq!(fresh.receive(&env(10, 10, f), "a").0, Verdict::Deliver);
        // An acknowledgement is due every ACK_EVERY deliveries.
        let mut c = consumers();
        c.receive(&env(1, 1, 0), "a");
        let s = session(&c);
        let due = (1..=ACK_EVERY)
            .map(|seq| c.receive(&env(seq, 1, s), "a").1)
            .collect::<Vec<_>>();
        assert!(!due[..due.len() - 1].iter().any(|d| *d));
        assert!(due[due.len() - 1]);
    }

    /// Issue 33, item 4: five messages delivered and confirmed, the
    /// receiving node restarted, the five envelopes published again byte
    /// for byte: all five were delivered a second time (a receiver with
    /// no state started at the envelope's `first`). Now a receiver
    /// delivers only in a session it opened: the replays are of another.
    #[test]
    fn envelopes_of_a_session_the_receiver_did_not_open_are_never_delivered() {
        let mut before = consumers();
        before.receive(&env(1, 1, 0), "a");
        let s = session(&before);
        for seq in 1..=5 {
            assert_eq!(before.receive(&env(seq, 1, s), "a").0, Verdict::Deliver);
        }
        // The restarted receiver: the recorded envelopes, again.
        let mut after = consumers();
        for seq in 1..=5 {
            assert_eq!(after.receive(&env(seq, 1, s), "a").0, Verdict::OtherSession);
        }
        // Its own session is another; the producer (which had them
        // confirmed) goes on from 6 in it.
        let t = session(&after);
        assert_ne!(t, s);
        assert_eq!(after.receive(&env(6, 6, t), "a").0, Verdict::Deliver);
        // A replay in the old session, with this producer known: no.
        assert_eq!(after.receive(&env(3, 1, s), "a").0, Verdict::OtherSession);
        // A forgotten producer: its next message opens a new session, in
        // which the old envelopes are not.
        after.forget(7);
        assert_eq!(after.receive(&env(6, 6, t), "a").0, Verdict::OtherSession);
        assert_ne!(session(&after), t);
    }

    /// Issue 33, item 6: one message each from many producers used to cost
    /// a search of the owed list per message (60,000 producers: the last
    /// third four times slower than the first), and the table was never
    /// trimmed. The list is pushed to once per producer (a flag), and the
    /// table holds at most `max_producers`: the least recently heard
    /// eighth is forgotten, the acknowledgements it was owed kept to send.
    #[test]
    fn many_producers_are_tracked_within_the_bound() {
        let max = 1_000;
        let mut c = Consumers::new(max, Duration::from_secs(300));
        for producer in 0..10_000u64 {
            let e = Envelope {
                producer,
                seq: 1,
                first: 1,
                session: 0,
            };
            c.receive(&e, "a");
            assert!(c.by_producer.len() <= max);
        }
        // Each producer is owed one acknowledgement: kept, or parting.
        let owed_kept = c.by_producer.values().filter(|st| st.owed).count();
        assert_eq!(owed_kept + c.parting.len(), 10_000);
        assert_eq!(c.owed.len(), 10_000);
        // The newest are kept.
        assert!(c.by_producer.contains_key(&9_999));
        assert!(!c.by_producer.contains_key(&0));
    }

    #[test]
    fn idle_producers_are_forgotten_and_their_acknowledgement_kept() {
        let mut c = Consumers::new(10, Duration::ZERO);
        c.receive(&env(1, 1, 0), "a");
        assert_eq!(c.by_producer.len(), 1);
        c.forget_idle();
        assert!(c.by_producer.is_empty());
        assert_eq!(c.parting.len(), 1);
        assert!(c.parting[0].1.fresh);
        assert!(c.owes());
    }
}
