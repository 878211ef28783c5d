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

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::Instant;

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
}

/// A cumulative confirmation: every message of `producer` up to `upto`
/// was delivered.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Ack {
    pub(crate) producer: u64,
    pub(crate) upto: u64,
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
            let upto = last.min(st.first - 1 + window);
            let from = st.sent_to + 1;
            let batch: Vec<(u64, Bytes)> = (from..=upto)
                .map(|seq| (seq, st.buffer[(seq - st.first) as usize].clone()))
                .collect();
            st.sent_to = st.sent_to.max(upto);
            let deadline = (!st.buffer.is_empty()).then(|| st.progress_at + resend);
            (batch, st.first, deadline)
        };
        for (seq, body) in batch {
            let envelope = Envelope {
                producer: p.id,
                seq,
                first,
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
    if ack.upto < st.first {
        return;
    }
    let n = (ack.upto + 1 - st.first).min(st.buffer.len() as u64);
    for _ in 0..n {
        if let Some(body) = st.buffer.pop_front() {
            st.bytes -= body.len() + OVERHEAD;
        }
    }
    st.first += n;
    st.sent_to = st.sent_to.max(st.first - 1);
    st.progress_at = Instant::now();
    drop(st);
    p.progress.notify_waiters();
    // The window moved: more may go out.
    p.wake.notify_one();
}

/// What a receiving node keeps per producer sending to one of its names.
#[derive(Default)]
pub(crate) struct Consumers {
    by_producer: HashMap<u64, ConsumerState>,
    /// Producers with an acknowledgement to send.
    owed: Vec<u64>,
}

struct ConsumerState {
    /// The next number to deliver.
    expected: u64,
    /// Where acknowledgements go.
    ack_to: String,
    /// Delivered since the last acknowledgement.
    unacked: u64,
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
}

impl Consumers {
    /// Where `envelope` stands for its producer; counts it towards an
    /// acknowledgement. `true` in the second place: one is due now.
    pub(crate) fn receive(&mut self, envelope: &Envelope, ack_to: &str) -> (Verdict, bool) {
        let st = self
            .by_producer
            .entry(envelope.producer)
            .or_insert_with(|| ConsumerState {
                // No state (a new producer, or a new receiver): everything
                // before `first` was confirmed, so start there.
                expected: envelope.first,
                ack_to: ack_to.to_owned(),
                unacked: 0,
            });
        if envelope.first > st.expected {
            // Confirmed past what this receiver delivered: delivered by an
            // earlier one (this node exposed the name anew).
            st.expected = envelope.first;
        }
        let verdict = if envelope.seq == st.expected {
            st.expected += 1;
            st.unacked += 1;
            Verdict::Deliver
        } else if envelope.seq < st.expected {
            Verdict::Duplicate
        } else {
            Verdict::Gap
        };
        if !self.owed.contains(&envelope.producer) {
            self.owed.push(envelope.producer);
        }
        let now = self
            .by_producer
            .get(&envelope.producer)
            .is_some_and(|st| st.unacked >= ACK_EVERY);
        (verdict, now)
    }

    /// Whether an acknowledgement is owed.
    pub(crate) fn owes(&self) -> bool {
        !self.owed.is_empty()
    }

    /// Sends every owed acknowledgement (cumulative: up to the last
    /// delivered), on the control lane: a flow-control signal does not wait
    /// behind user messages.
    pub(crate) fn acknowledge(&mut self, shared: &Shared) {
        for producer in std::mem::take(&mut self.owed) {
            if let Some(st) = self.by_producer.get_mut(&producer) {
                st.unacked = 0;
                let body = postcard::to_stdvec(&Ack {
                    producer,
                    upto: st.expected - 1,
                })
                .expect("an ack always encodes");
                shared.send_control(shared.out(st.ack_to.clone(), None, &body));
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

    fn env(seq: u64, first: u64) -> Envelope {
        Envelope {
            producer: 7,
            seq,
            first,
        }
    }

    /// The receiver's side: each number once, in order; duplicates and
    /// gaps dropped; a fresh receiver starts at the producer's first
    /// unconfirmed number.
    #[test]
    fn each_number_is_delivered_once_and_in_order() {
        let mut c = Consumers::default();
        assert_eq!(c.receive(&env(1, 1), "a").0, Verdict::Deliver);
        assert_eq!(c.receive(&env(3, 1), "a").0, Verdict::Gap);
        assert_eq!(c.receive(&env(2, 1), "a").0, Verdict::Deliver);
        assert_eq!(c.receive(&env(1, 1), "a").0, Verdict::Duplicate);
        assert_eq!(c.receive(&env(3, 1), "a").0, Verdict::Deliver);
        assert!(c.owes());
        // A fresh receiver: the producer has confirmed up to 9.
        let mut fresh = Consumers::default();
        assert_eq!(fresh.receive(&env(12, 10), "a").0, Verdict::Gap);
        assert_eq!(fresh.receive(&env(10, 10), "a").0, Verdict::Deliver);
        // An acknowledgement is due every ACK_EVERY deliveries.
        let mut c = Consumers::default();
        let due = (1..=ACK_EVERY)
            .map(|seq| c.receive(&env(seq, 1), "a").1)
            .collect::<Vec<_>>();
        assert!(!due[..due.len() - 1].iter().any(|d| *d));
        assert!(due[due.len() - 1]);
    }
}
