//! The state machine of a scheduled message's slot (`TimerSlot` in
//! `timers.rs`), without the actor and scheduler types around it: the
//! `ACTIVE → CANCELLED | DONE` word, the payload, and the timer armed now.
//!
//! `TimerSlot` keeps one of these and calls it for every step of the
//! protocol (arm, cancel, deliver, end for dead letters), so the loom
//! models in `loom-tests/tests/timer_slot.rs` run the same code with a
//! stand-in timer handle; that is why it is a module of its own (decision
//! record 0015). Its atomics and lock come through `crate::sync`.
#![cfg_attr(not(loom), allow(unreachable_pub))]

use crate::sync::{AtomicU8, Mutex, MutexGuard, Ordering};

/// The slot can still deliver.
pub const ACTIVE: u8 = 0;
/// Cancelled: it sends nothing, not even to dead letters.
pub const CANCELLED: u8 = 1;
/// Delivered (a single timer), or its target is gone.
pub const DONE: u8 = 2;

/// What a slot delivers.
pub enum Payload<M> {
    /// A single message, taken by its delivery.
    Once(Option<M>),
    /// A fresh message for each delivery (a clone, or the user's closure).
    Every(Box<dyn FnMut() -> M + Send>),
}

/// A timer armed for a slot: cancelling it drops its callback.
pub trait Disarm {
    /// Cancels the timer (a no-op if it has fired).
    fn disarm(self);
}

struct Inner<M, H> {
    payload: Payload<M>,
    /// The timer armed now, if any.
    armed: Option<H>,
}

/// The state word, the payload and the armed timer (of type `H`).
pub struct SlotState<M, H: Disarm> {
    /// `ACTIVE`, then `CANCELLED` or `DONE`; written by compare-and-swap
    /// from `ACTIVE` (by a canceller, the delivering run holder, or a timer
    /// callback that finds the target gone), so it changes once.
    state: AtomicU8,
    inner: Mutex<Inner<M, H>>,
}

impl<M, H: Disarm> SlotState<M, H> {
    /// An active slot holding `payload`, with no timer armed yet.
    pub fn new(payload: Payload<M>) -> SlotState<M, H> {
        SlotState {
            state: AtomicU8::new(ACTIVE),
            inner: Mutex::new(Inner {
                payload,
                armed: None,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<M, H>> {
        // A panicking message producer (a `Clone`) poisons the lock; the
        // fields are still consistent (the payload is untouched).
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `ACTIVE`, `CANCELLED` or `DONE`.
    pub fn state(&self) -> u8 {
        // Acquire: pairs with the AcqRel compare-and-swap in `transition`.
        self.state.load(Ordering::Acquire)
    }

    /// Whether the slot can still deliver.
    pub fn is_active(&self) -> bool {
        self.state() == ACTIVE
    }

    /// `ACTIVE` -> `to`; true for the one winner.
    pub fn transition(&self, to: u8) -> bool {
        // AcqRel: a winner publishes its decision to later `state` readers
        // (Acquire loads above) and sees what earlier writers did.
        self.state
            .compare_exchange(ACTIVE, to, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Arms a timer, unless the slot is no longer active: `schedule` is
    /// called without the lock held (a stopped scheduler drops the callback
    /// inside that call, and the callback's drop may take this lock), then
    /// its handle is stored under the lock if the slot is still active, and
    /// disarmed at once if not. A cancel either finds the handle stored, or
    /// its state change is seen here under the same lock.
    pub fn arm_with(&self, schedule: impl FnOnce() -> H) {
        if !self.is_active() {
            return;
        }
        let handle = schedule();
        let mut inner = self.lock();
        if self.is_active() {
            inner.armed = Some(handle);
        } else {
            // Cancelled (or ended) meanwhile: its cancel found nothing armed.
            drop(inner);
            handle.disarm();
        }
    }

    /// The next message: the single one (once), or a fresh one. Runs user
    /// code (a `Clone` or a closure): call it under `catch_unwind`.
    pub fn produce(&self) -> Option<M> {
        match &mut self.lock().payload {
            Payload::Once(msg) => msg.take(),
            Payload::Every(make) => Some(make()),
        }
    }

    /// Ends the slot (`ACTIVE -> DONE`) and disarms its timer; true for the
    /// one caller that ended it (who may then `produce` its last message,
    /// for dead letters).
    pub fn end(&self) -> bool {
        if !self.transition(DONE) {
            return false;
        }
        let armed = self.lock().armed.take();
        if let Some(t) = armed {
            t.disarm();
        }
        true
    }

    /// Cancels the slot (`ACTIVE -> CANCELLED`): disarms its timer and
    /// returns the payload, for the caller to drop outside the lock (its
    /// `Drop` is user code). `None` if it was no longer active.
    pub fn cancel(&self) -> Option<Payload<M>> {
        if !self.transition(CANCELLED) {
            return None;
        }
        let (armed, payload) = {
            let mut inner = self.lock();
            let payload = std::mem::replace(&mut inner.payload, Payload::Once(None));
            (inner.armed.take(), payload)
        };
        if let Some(t) = armed {
            t.disarm();
        }
        Some(payload)
    }

    /// Takes the payload out of a slot nobody else holds (its last
    /// reference is going), for the caller to drop.
    pub fn take_payload(&mut self) -> Payload<M> {
        let inner = match self.inner.get_mut() {
            Ok(inner) => inner,
            Err(poisoned) => poisoned.into_inner(),
        };
        std::mem::replace(&mut inner.payload, Payload::Once(None))
    }
}
