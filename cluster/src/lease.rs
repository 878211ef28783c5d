//! This node's lease, `n.<node>` in the bucket: registered with `create`
//! under a new incarnation, renewed by compare-and-set every renewal
//! interval, and the fence that comes with it.
//!
//! *The fence.* A node may run entities only while it holds its lease by
//! its own clock: until the time its last successful renewal was *sent*,
//! plus the lease timeout, less the fencing margin. Another node takes its
//! shards only once it has seen that renewal's revision unchanged for the
//! whole lease timeout, on its own clock, counted from when it saw it (no
//! earlier than the renewal was written, so no earlier than it was sent).
//! With clocks that run at about the same rate (the margin is the room
//! for the difference and for stopping the entities), the fence falls
//! before any takeover: one live activation per entity. The node checks
//! its deadline on its monotonic clock (a pause of the process is time
//! passing: it wakes up fenced).
//!
//! *A renewal that fails* for a compare-and-set (the lease was deleted by
//! a node that saw it expire, or taken by another run of this node) fences
//! at once: this incarnation is over. One that fails otherwise (the server
//! away) is tried again, until the deadline fences. Fenced, the node
//! registers again under a new incarnation once its old lease is gone:
//! shards of the old one are never run again (they are re-allocated).
//!
//! *A lease held by another run of this node's name* (a crashed process,
//! restarted quickly): registering waits until that lease has been seen
//! unchanged for the lease timeout, deletes it by compare-and-set, then
//! creates its own.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream::kv;
use tokio::sync::Notify;

use crate::store::{encode, lease_key, NodeLease};
use crate::view::Listeners;

/// The state of this node's lease, shared with the regions.
pub(crate) struct LeaseState {
    /// Fenced: no entity may run. Release/Acquire: the incarnation is
    /// written before `fenced` is cleared, and read after it is seen clear.
    fenced: AtomicBool,
    inc: Mutex<u128>,
    /// The deadline by this node's clock, while not fenced: nanoseconds
    /// after `base` (0: none). An atomic, not a lock: every message a
    /// region delivers checks it.
    deadline: AtomicU64,
    base: Instant,
    /// Bumped by every registration and fence (after the incarnation is
    /// written): a region that saw the same epoch has the same
    /// incarnation to compare with, without the lock.
    epoch: AtomicU64,
    /// Leaving (coordinated shutdown): the next renewal says so, and the
    /// lease is deleted at the end.
    leaving: AtomicBool,
    /// Leaving: every region's hand-off ended (its entities terminated,
    /// its shards freed). Only then is the lease deleted on leaving;
    /// otherwise it is left to expire.
    handed_off: AtomicBool,
    /// Wakes whoever waits for a change (registration, fence).
    pub(crate) changed: Notify,
    listeners: Listeners,
}

impl LeaseState {
    pub(crate) fn new() -> Arc<LeaseState> {
        Arc::new(LeaseState {
            fenced: AtomicBool::new(true),
            inc: Mutex::new(0),
            deadline: AtomicU64::new(0),
            base: Instant::now(),
            epoch: AtomicU64::new(0),
            leaving: AtomicBool::new(false),
            handed_off: AtomicBool::new(false),
            changed: Notify::new(),
            listeners: Listeners::default(),
        })
    }

    /// Whether this node may run entities now: registered, and its
    /// deadline not passed (checked on the clock, not only by the task).
    pub(crate) fn holds(&self) -> bool {
        self.holds_at(Instant::now())
    }

    /// `holds`, at `now` (a clock read the caller shares).
    pub(crate) fn holds_at(&self, now: Instant) -> bool {
        // Acquire: pairs with the Release store in `registered`.
        if self.fenced.load(Ordering::Acquire) {
            return false;
        }
        // Relaxed: the deadline alone says whether now is before it; the
        // fence above orders it with the registration.
        let deadline = self.deadline.load(Ordering::Relaxed);
        deadline != 0 && self.nanos(now) < deadline
    }

    /// `at` in nanoseconds after `base` (at least 1: 0 means none).
    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.base).as_nanos())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    fn set_deadline(&self, deadline: Option<Instant>) {
        let ns = deadline.map_or(0, |d| self.nanos(d));
        // Relaxed: see `holds_at`.
        self.deadline.store(ns, Ordering::Relaxed);
    }

    /// The registrations and fences so far (see `epoch`).
    pub(crate) fn epoch(&self) -> u64 {
        // Acquire: pairs with the Release increments in `registered` and
        // `fence`: the incarnation read after this is at least as new.
        self.epoch.load(Ordering::Acquire)
    }

    pub(crate) fn is_fenced(&self) -> bool {
        // Acquire: as in `holds`.
        self.fenced.load(Ordering::Acquire)
    }

    /// The current incarnation (0 before the first registration).
    pub(crate) fn incarnation(&self) -> u128 {
        *self.inc.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn set_leaving(&self) {
        // Relaxed: read by the lease task at its next renewal.
        self.leaving.store(true, Ordering::Relaxed);
    }

    pub(crate) fn set_handed_off(&self) {
        // Release: pairs with the Acquire in `is_handed_off` (the lease
        // task, after the phase that sets it).
        self.handed_off.store(true, Ordering::Release);
    }

    pub(crate) fn is_handed_off(&self) -> bool {
        // Acquire: pairs with the Release in `set_handed_off`.
        self.handed_off.load(Ordering::Acquire)
    }

    pub(crate) fn is_leaving(&self) -> bool {
        // Relaxed: see `set_leaving`.
        self.leaving.load(Ordering::Relaxed)
    }

    pub(crate) fn listen(&self, f: impl Fn() + Send + Sync + 'static) {
        self.listeners.add(f);
    }

    fn tell_listeners(&self) {
        self.changed.notify_waiters();
        self.listeners.tell();
    }

    fn registered(&self, inc: u128, deadline: Instant) {
        *self.inc.lock().unwrap_or_else(|e| e.into_inner()) = inc;
        self.set_deadline(Some(deadline));
        // Release: pairs with the Acquire in `epoch`.
        self.epoch.fetch_add(1, Ordering::Release);
        // Release: pairs with the Acquire loads in `holds`.
        self.fenced.store(false, Ordering::Release);
        self.tell_listeners();
    }

    fn renewed(&self, deadline: Instant) {
        self.set_deadline(Some(deadline));
    }

    fn fence(&self, why: &str, node: &str) {
        // Release: as in `registered`.
        if !self.fenced.swap(true, Ordering::AcqRel) {
            tracing::warn!(node, "cluster: fenced ({why}): this node's entities stop");
        }
        self.set_deadline(None);
        // Release: as in `registered`.
        self.epoch.fetch_add(1, Ordering::Release);
        self.tell_listeners();
    }
}

/// The lease's timing.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    pub(crate) timeout: Duration,
    pub(crate) renew: Duration,
    pub(crate) margin: Duration,
}

impl Timing {
    fn deadline(&self, sent: Instant) -> Instant {
        sent + (self.timeout - self.margin)
    }
}

/// 64 random bits (see `random_inc`).
pub(crate) fn random_u64() -> u64 {
    // Truncation wanted: the low half of 128 random bits.
    #[allow(clippy::cast_possible_truncation)]
    let r = random_inc() as u64;
    r
}

fn random_inc() -> u128 {
    // Two u64s of the system's randomness, through std's RandomState
    // (SipHash keys from the OS): no further crate for 128 bits that only
    // need to be unique.
    use std::hash::{BuildHasher, Hasher};
    let half = || {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        h.finish()
    };
    (u128::from(half()) << 64) | u128::from(half())
}

/// Registers under a new incarnation: `create`, or, while another run
/// holds the key, waits until its revision has been unchanged for the
/// lease timeout and deletes it by compare-and-set. Returns the
/// incarnation, the lease's revision and when its write was sent.
async fn register(store: &kv::Store, node: &str, timing: Timing) -> (u128, u64, Instant) {
    let key = lease_key(node);
    let inc = random_inc();
    let value = encode(&NodeLease {
        inc,
        leaving: false,
    });
    // The other run's revision, and since when it is unchanged here.
    let mut held: Option<(u64, Instant)> = None;
    loop {
        let sent = Instant::now();
        match store.create(&key, value.clone()).await {
            Ok(rev) => return (inc, rev, sent),
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {
                match store.entry(&key).await {
                    Ok(Some(entry)) if entry.operation == kv::Operation::Put => {
                        let rev = entry.revision;
                        match held {
                            Some((r, since)) if r == rev && since.elapsed() >= timing.timeout => {
                                // Expired as seen here: delete it (fails if
                                // it was renewed meanwhile).
                                let _ = store.delete_expect_revision(&key, Some(rev)).await;
                                held = None;
                                continue;
                            }
                            Some((r, _)) if r == rev => {}
                            _ => {
                                tracing::info!(
                                    node,
                                    "cluster: another run of this node holds its lease; \
                                     waiting for it to expire"
                                );
                                held = Some((rev, Instant::now()));
                            }
                        }
                    }
                    // Deleted meanwhile: create again.
                    Ok(_) => {
                        held = None;
                        continue;
                    }
                    Err(e) => tracing::warn!(error = %e, "cluster: reading a lease"),
                }
            }
            Err(e) => tracing::warn!(error = %e, "cluster: registering the lease"),
        }
        tokio::time::sleep(timing.renew).await;
    }
}

/// The lease task: registers, renews, fences, registers again, until the
/// node leaves (then the lease is deleted by compare-and-set).
pub(crate) async fn run(
    store: kv::Store,
    node: String,
    timing: Timing,
    state: Arc<LeaseState>,
    leave: Arc<Notify>,
) {
    let key = lease_key(&node);
    loop {
        let (inc, mut rev, sent) = register(&store, &node, timing).await;
        let mut deadline = timing.deadline(sent);
        state.registered(inc, deadline);
        tracing::info!(node = %node, inc = %format!("{inc:032x}"), "cluster: lease held");
        let mut announced_leaving = false;
        let left = loop {
            let next = Instant::now() + timing.renew;
            tokio::select! {
                () = tokio::time::sleep_until(next.min(deadline).into()) => {}
                () = leave.notified() => break true,
            }
            if Instant::now() >= deadline {
                state.fence("its lease could not be renewed in time", &node);
                break false;
            }
            let leaving = state.is_leaving();
            let value = encode(&NodeLease { inc, leaving });
            let sent = Instant::now();
            match tokio::time::timeout_at(deadline.into(), store.update(&key, value, rev)).await {
                Ok(Ok(r)) => {
                    rev = r;
                    deadline = timing.deadline(sent);
                    state.renewed(deadline);
                    announced_leaving = leaving;
                }
                Ok(Err(e)) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                    state.fence("its lease was taken (seen expired elsewhere)", &node);
                    break false;
                }
                Ok(Err(e)) => {
                    tracing::warn!(node = %node, error = %e, "cluster: renewing the lease (tried again)");
                }
                Err(_) => {
                    state.fence("its lease could not be renewed in time", &node);
                    break false;
                }
            }
        };
        if left {
            let _ = announced_leaving;
            state.fence("it left the cluster", &node);
            if !state.is_handed_off() {
                // An entity may still run (its hand-off timed out): the
                // others take its shards only once the lease has expired.
                tracing::warn!(
                    node = %node,
                    "cluster: left before every shard was handed off: the lease is left to expire"
                );
                return;
            }
            if let Err(e) = store.delete_expect_revision(&key, Some(rev)).await {
                tracing::warn!(node = %node, error = %e, "cluster: deleting the lease on leaving");
            }
            return;
        }
        // Fenced: a new incarnation, after a pause (its old lease is
        // deleted by whoever saw it expire, or waited out by `register`).
        tokio::time::sleep(timing.renew).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The deadline is checked on the clock at every call (an atomic, not
    /// only the renewal task's view), and every registration and fence
    /// moves the epoch the regions' fast path compares.
    #[test]
    fn the_lease_holds_until_its_deadline_and_each_registration_or_fence_moves_the_epoch() {
        let s = LeaseState::new();
        let now = Instant::now();
        assert!(!s.holds_at(now), "not registered yet");
        let e0 = s.epoch();
        s.registered(7, now + Duration::from_secs(1));
        assert_eq!(s.incarnation(), 7);
        assert!(s.holds_at(now));
        assert!(
            !s.holds_at(now + Duration::from_secs(1)),
            "at the deadline: fenced"
        );
        let e1 = s.epoch();
        assert!(e1 > e0);
        s.renewed(now + Duration::from_secs(2));
        assert!(s.holds_at(now + Duration::from_secs(1)));
        assert_eq!(s.epoch(), e1, "a renewal is not a new incarnation");
        s.fence("a test", "a");
        assert!(!s.holds_at(now));
        assert!(s.epoch() > e1);
    }
}
