//! The way out: two queues to the NATS client, each drained by a task of
//! its own.
//!
//! * The **user lane** carries tells, asks, replies, where-requests and
//!   where-answers, in submission order (per-sender order). It is bounded
//!   by `outbound-capacity`, in bytes: past it a tell or an ask is refused
//!   with [`RemoteError::OutboundFull`] and a reply is dropped and counted,
//!   so a node whose connection is down (or slower than its senders) holds
//!   at most that much, instead of queueing without limit. Once it has
//!   refused a message, it refuses every message until it has drained to
//!   half its capacity (a high and a low water mark): a small ask does not
//!   slip into the room a large tell left, and senders see the lane full
//!   or not, not a size lottery.
//! * The **control lane** carries the node's notices (join, heartbeat,
//!   leave, terminated) and the round trips that follow subscriptions. It
//!   never waits behind user messages: its task publishes on its own, so a
//!   heartbeat reaches the server while a backlog of user messages drains
//!   (behind at most the client's own buffer, 2,048 commands), and watchers
//!   do not take a busy node for a dead one. While one heartbeat waits to
//!   be published no other is queued (an outage does not pile them up).
//!
//! Both tasks publish on the one connection; NATS keeps each task's order.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use async_nats::HeaderMap;
use bytes::Bytes;
use tokio::sync::mpsc as tmpsc;

use crate::error::RemoteError;

/// How many user messages the user lane's task takes at a time.
const USER_BATCH: usize = 256;

/// What one queued message costs beyond the allocations of its subject,
/// reply subject and payload: its slot in the channel (the `Out` and its
/// cost) and the `Bytes`' shared header once the client clones it.
const OVERHEAD: usize = std::mem::size_of::<(Out, usize)>() + 32;

/// What an allocation of `len` bytes takes from the allocator: glibc's
/// malloc adds 8 bytes of header and rounds up to 16, 32 at least (other
/// allocators round as much or more; issue 33, item 12: counting lengths
/// alone, the queue held about twice its capacity).
fn allocated(len: usize) -> usize {
    if len == 0 {
        0
    } else {
        (len + 8).next_multiple_of(16).max(32)
    }
}

/// A message to publish, sealed already (tagged, with a cluster key).
pub(crate) struct Out {
    subject: String,
    reply: Option<String>,
    headers: Option<HeaderMap>,
    payload: Bytes,
    /// A heartbeat (see [`Lanes::heartbeat_queued`]).
    heartbeat: bool,
}

impl Out {
    pub(crate) fn new(
        subject: String,
        reply: Option<String>,
        headers: Option<HeaderMap>,
        payload: Bytes,
    ) -> Out {
        Out {
            subject,
            reply,
            headers,
            payload,
            heartbeat: false,
        }
    }

    pub(crate) fn heartbeat(mut self) -> Out {
        self.heartbeat = true;
        self
    }

    /// Its share of `outbound-capacity`: what it holds.
    fn cost(&self) -> usize {
        allocated(self.subject.len())
            + self.reply.as_ref().map_or(0, |r| allocated(r.len()))
            + allocated(self.payload.len())
            + OVERHEAD
    }
}

/// The two queues, and what the user lane holds.
pub(crate) struct Lanes {
    user: tmpsc::UnboundedSender<(Out, usize)>,
    control: tmpsc::UnboundedSender<Out>,
    /// Bytes (by [`Out::cost`]) queued on the user lane and not yet
    /// handed to the client. Added by the senders, subtracted by the user
    /// task; Relaxed: a budget, no data is published through it (the
    /// channel carries the messages and their own synchronization).
    queued: Arc<AtomicUsize>,
    capacity: usize,
    /// The lane refused a message and has not drained to half its
    /// capacity since. Relaxed: as `queued`, a budget.
    full: AtomicBool,
    /// A heartbeat is on the control lane, not yet handed to the client.
    /// Set by the heartbeat task, cleared by the control task; Relaxed:
    /// it only thins out heartbeats, nothing is read through it.
    heartbeat_queued: Arc<AtomicBool>,
    /// Replies dropped because the user lane was full.
    dropped_replies: AtomicU64,
}

/// The receiving ends, for [`run`].
pub(crate) struct LaneReceivers {
    user: tmpsc::UnboundedReceiver<(Out, usize)>,
    control: tmpsc::UnboundedReceiver<Out>,
    queued: Arc<AtomicUsize>,
    heartbeat_queued: Arc<AtomicBool>,
}

impl Lanes {
    /// Lanes whose user lane holds at most `capacity` bytes.
    pub(crate) fn new(capacity: usize) -> (Lanes, LaneReceivers) {
        let (user, user_rx) = tmpsc::unbounded_channel();
        let (control, control_rx) = tmpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let heartbeat_queued = Arc::new(AtomicBool::new(false));
        (
            Lanes {
                user,
                control,
                queued: Arc::clone(&queued),
                capacity,
                full: AtomicBool::new(false),
                heartbeat_queued: Arc::clone(&heartbeat_queued),
                dropped_replies: AtomicU64::new(0),
            },
            LaneReceivers {
                user: user_rx,
                control: control_rx,
                queued,
                heartbeat_queued,
            },
        )
    }

    /// Queues `out` on the user lane while it holds less than its
    /// capacity (one message is always taken when the lane is empty,
    /// whatever its length: the server's max payload bounds it); once full,
    /// nothing until it has drained to half.
    pub(crate) fn send_user(&self, out: Out) -> Result<(), RemoteError> {
        let full = Err(RemoteError::OutboundFull {
            capacity: self.capacity,
        });
        // Relaxed: see `queued` and `full`.
        if self.full.load(Ordering::Relaxed) {
            if self.queued.load(Ordering::Relaxed) > self.capacity / 2 {
                return full;
            }
            self.full.store(false, Ordering::Relaxed);
        }
        let cost = out.cost();
        let before = self.queued.fetch_add(cost, Ordering::Relaxed);
        if before > 0 && before + cost > self.capacity {
            self.queued.fetch_sub(cost, Ordering::Relaxed);
            self.full.store(true, Ordering::Relaxed);
            return full;
        }
        // Fails only once the runtime is gone: nothing can be sent then.
        let _ = self.user.send((out, cost));
        Ok(())
    }

    /// Queues `out` on the user lane whatever it holds (counted, so the
    /// bound covers it from then on).
    pub(crate) fn send_forced(&self, out: Out) {
        let cost = out.cost();
        // Relaxed: see `queued`.
        self.queued.fetch_add(cost, Ordering::Relaxed);
        let _ = self.user.send((out, cost));
    }

    /// Queues `out` on the control lane.
    pub(crate) fn send_control(&self, out: Out) {
        let _ = self.control.send(out);
    }

    /// Claims the heartbeat's place on the control lane: `false` if one
    /// is still waiting there (this one is skipped).
    pub(crate) fn claim_heartbeat(&self) -> bool {
        // Relaxed: see `heartbeat_queued`.
        !self.heartbeat_queued.swap(true, Ordering::Relaxed)
    }

    /// Bytes queued on the user lane now.
    #[cfg(test)]
    pub(crate) fn queued_bytes(&self) -> usize {
        // Relaxed: a statistic.
        self.queued.load(Ordering::Relaxed)
    }

    pub(crate) fn note_dropped_reply(&self) {
        // Relaxed: a statistic.
        let n = self.dropped_replies.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_power_of_two() {
            tracing::warn!(
                dropped = n,
                capacity = self.capacity,
                "remote: a reply was dropped: the outbound queue is full (outbound-capacity); \
                 its asker gets its timeout"
            );
        }
    }

    pub(crate) fn dropped_replies(&self) -> u64 {
        // Relaxed: a statistic.
        self.dropped_replies.load(Ordering::Relaxed)
    }
}

/// Starts the two tasks that hand the lanes' messages to `client`.
pub(crate) fn run(client: &async_nats::Client, rx: LaneReceivers) {
    let LaneReceivers {
        mut user,
        mut control,
        queued,
        heartbeat_queued,
    } = rx;
    let c = client.clone();
    tokio::spawn(async move {
        // In batches: the budget is given back once per batch, not once
        // per message (the counter's cache line moves between the senders'
        // threads and this one).
        let mut batch = Vec::with_capacity(USER_BATCH);
        while user.recv_many(&mut batch, USER_BATCH).await > 0 {
            let mut cost = 0;
            for (out, c_out) in batch.drain(..) {
                publish(&c, out).await;
                cost += c_out;
            }
            // Relaxed: see `Lanes::queued`.
            queued.fetch_sub(cost, Ordering::Relaxed);
        }
    });
    let c = client.clone();
    tokio::spawn(async move {
        while let Some(out) = control.recv().await {
            let heartbeat = out.heartbeat;
            publish(&c, out).await;
            if heartbeat {
                // Relaxed: see `Lanes::heartbeat_queued`.
                heartbeat_queued.store(false, Ordering::Relaxed);
            }
        }
    });
}

async fn publish(client: &async_nats::Client, out: Out) {
    let Out {
        subject,
        reply,
        headers,
        payload,
        ..
    } = out;
    let sent = match (reply, headers) {
        (None, None) => client.publish(subject, payload).await,
        (Some(r), None) => client.publish_with_reply(subject, r, payload).await,
        (None, Some(h)) => client.publish_with_headers(subject, h, payload).await,
        (Some(r), Some(h)) => {
            client
                .publish_with_reply_and_headers(subject, r, h, payload)
                .await
        }
    };
    if let Err(e) = sent {
        tracing::debug!(error = %e, "remote: a publish failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support as support;
    use crate::{Remote, RemoteSettings};
    use futures_util::StreamExt;
    use std::time::Duration;
    use support::{require_nats, NatsServer, GUARD};

    /// Issue 25, item 4: heartbeats shared the one outbound queue with
    /// user messages, so under a backlog a node's heartbeat waited behind
    /// all of it (and its watchers could take it for dead). Now the
    /// heartbeat queued after 50,000 user messages reaches the server
    /// before the last of them.
    #[test]
    fn a_heartbeat_does_not_wait_behind_the_user_messages_queued_before_it() {
        require_nats!();
        let server = NatsServer::start();
        let rt = tokio::runtime::Runtime::new().expect("rt");
        // Subscribed (and live: a request's no-responders answer follows
        // the SUB) before the node connects.
        let (raw, mut seen) = rt.block_on(async {
            let raw = async_nats::connect(server.url()).await.expect("raw");
            let sub = raw.subscribe("h.>").await.expect("sub");
            let _ = raw.request("nobody", Bytes::new()).await;
            (raw, sub)
        });
        let sys = support::system("h");
        // No heartbeat of its own within the test: only the one below.
        let hour = Duration::from_secs(3600);
        let remote = Remote::connect(
            &sys,
            RemoteSettings::new(server.url(), "h", "a")
                .failure_detector(hour, 2 * hour)
                .outbound_capacity(1 << 30),
        )
        .expect("connect");
        let shared = std::sync::Arc::clone(&remote.inner.shared);
        let n = 50_000;
        // Queued from a task on the remote's runtime, which has one worker:
        // neither lane's task runs until all of it, the heartbeat last, is
        // queued (from a plain thread the lanes would drain meanwhile, and
        // on a loaded machine the heartbeat could find the user lane empty).
        let queue = std::sync::Arc::clone(&shared);
        let seq = remote
            .inner
            .handle
            .block_on(remote.inner.handle.spawn(async move {
                for _ in 0..n {
                    queue
                        .send_user(queue.out("h.sink".into(), None, &[0; 256]))
                        .expect("room");
                }
                let seq = *crate::shared::lock(&queue.notice_seq) + 1;
                queue.send_notice("hb");
                seq
            }))
            .expect("the queueing task");
        let before_it = rt.block_on(async {
            let mut sinks = 0;
            loop {
                let msg = tokio::time::timeout(GUARD, seen.next())
                    .await
                    .expect("within the guard")
                    .expect("a message");
                match msg.subject.as_str() {
                    "h.sink" => sinks += 1,
                    "h.node.a.hb" => {
                        let notice: crate::control::Notice =
                            postcard::from_bytes(&msg.payload).expect("a notice");
                        if notice.seq == seq {
                            return sinks;
                        }
                    }
                    _ => {}
                }
            }
        });
        eprintln!("the heartbeat came after {before_it} of the {n} user messages queued before it");
        assert!(
            before_it < n,
            "the heartbeat waited behind all {n} user messages"
        );
        drop((remote, raw));
        assert!(sys.terminate().wait_timeout(GUARD).is_some());
    }

    fn msg(len: usize) -> Out {
        Out::new("s".into(), None, None, Bytes::from(vec![0; len]))
    }

    #[test]
    fn the_user_lane_refuses_past_its_capacity_and_the_control_lane_never() {
        let (lanes, _rx) = Lanes::new(1000);
        // One message is always taken into an empty lane.
        assert!(lanes.send_user(msg(5000)).is_ok());
        assert_eq!(
            lanes.send_user(msg(1)),
            Err(RemoteError::OutboundFull { capacity: 1000 })
        );
        lanes.send_control(msg(5000));
        lanes.send_forced(msg(10));
        assert_eq!(lanes.queued_bytes(), msg(5000).cost() + msg(10).cost());
        // What is counted is what is allocated: the subject's and the
        // payload's allocations, rounded as malloc rounds them.
        assert_eq!(msg(5000).cost(), 32 + 5008 + OVERHEAD);
        assert_eq!(msg(10).cost(), 32 + 32 + OVERHEAD);
        let (lanes, _rx) = Lanes::new(1000);
        let fits = 1000 / msg(100).cost();
        for _ in 0..fits {
            assert!(lanes.send_user(msg(100)).is_ok());
        }
        assert!(lanes.send_user(msg(100)).is_err());
        // Full: a smaller message does not slip into the room left.
        assert!(lanes.send_user(msg(0)).is_err());
        // Drained to half (as the task does): room again.
        lanes
            .queued
            .fetch_sub(lanes.queued_bytes() - 500, Ordering::Relaxed);
        assert!(lanes.send_user(msg(0)).is_ok());
        assert!(lanes.claim_heartbeat());
        assert!(!lanes.claim_heartbeat(), "one heartbeat queued at a time");
    }
}
