//! Dead letters: messages that could not be delivered, counted, published
//! on the event stream, and logged with a rate limit.

use std::any::Any;
use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::api::actor_ref::ActorId;
use crate::runtime::contain::contain;

/// The PoisonPill, as it appears in a [`DeadLetter`] (send one with
/// [`ActorRef::poison_pill`](crate::ActorRef::poison_pill)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoisonPill;

/// Kill, as it appears in a [`DeadLetter`] (send one with
/// [`ActorRef::kill`](crate::ActorRef::kill)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kill;

/// A message that could not be delivered: sent to (or queued in) an actor
/// that terminated, queued behind a PoisonPill, refused by a full bounded
/// mailbox, or a reply that came after its `ask` timed out. Published on
/// the [`EventStream`](crate::EventStream).
pub struct DeadLetter {
    recipient: Option<ActorId>,
    message: Box<dyn Any + Send>,
    message_type: &'static str,
}

impl DeadLetter {
    pub(crate) fn new<T: Any + Send>(recipient: Option<ActorId>, message: T) -> DeadLetter {
        DeadLetter {
            recipient,
            message: Box::new(message),
            message_type: std::any::type_name::<T>(),
        }
    }

    /// The actor it was for; `None` for a late reply to an `ask`.
    pub fn recipient(&self) -> Option<&ActorId> {
        self.recipient.as_ref()
    }

    /// The message itself.
    pub fn message(&self) -> &(dyn Any + Send) {
        &*self.message
    }

    /// The message as a `T`, if it is one.
    pub fn downcast_ref<T: Any>(&self) -> Option<&T> {
        self.message.downcast_ref::<T>()
    }

    /// The message's type name.
    pub fn message_type(&self) -> &'static str {
        self.message_type
    }
}

impl Drop for DeadLetter {
    /// The message is user code's: a panic in its `Drop` (the dead letter
    /// is dropped once published, often inside an actor's termination) is
    /// logged and goes no further. A [`Reply`](crate::Reply) in it fails
    /// its ask with [`NoReplyReason::DeadLetter`](crate::NoReplyReason::DeadLetter)
    /// (the thread is marked while the message drops: `dropping_dead_letter`).
    fn drop(&mut self) {
        // A zero-sized box: no allocation.
        let message = std::mem::replace(&mut self.message, Box::new(()));
        let _dropping = DroppingDeadLetter::enter();
        contain("dropping a dead letter's message", || drop(message));
    }
}

thread_local! {
    /// How many dead letters' messages this thread is dropping (nested:
    /// a message may hold a cell whose queued messages become dead letters
    /// as it goes).
    static DROPPING: Cell<u32> = const { Cell::new(0) };
}

/// One dead letter's message being dropped on this thread.
struct DroppingDeadLetter;

impl DroppingDeadLetter {
    fn enter() -> DroppingDeadLetter {
        // A thread-local gone (a drop from another thread-local's
        // destructor) only loses the reason: the ask fails as `Dropped`.
        let _ = DROPPING.try_with(|n| n.set(n.get() + 1));
        DroppingDeadLetter
    }
}

impl Drop for DroppingDeadLetter {
    fn drop(&mut self) {
        let _ = DROPPING.try_with(|n| n.set(n.get() - 1));
    }
}

/// Whether this thread is dropping a dead letter's message: a `Reply`
/// dropped now was in a request that no handler got. The message is
/// user code's, opaque here, so its `Reply` cannot be told otherwise; the
/// drop is synchronous, on this thread, inside `DeadLetter::drop` (the
/// letter is handed to subscribers by reference, so none can keep the
/// message).
pub(crate) fn dropping_dead_letter() -> bool {
    DROPPING.try_with(|n| n.get() > 0).unwrap_or(false)
}

impl fmt::Debug for DeadLetter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadLetter")
            .field("recipient", &self.recipient)
            .field("message_type", &self.message_type)
            .finish()
    }
}

/// The system's dead-letter office: counts and rate-limits the log.
pub(crate) struct DeadLetters {
    count: AtomicU64,
    log: Mutex<LogWindow>,
    log_limit: u32,
    log_suspend: Duration,
}

struct LogWindow {
    logged: u32,
    suspended_until: Option<Instant>,
    suppressed: u64,
}

impl DeadLetters {
    pub(crate) fn new(log_limit: u32, log_suspend: Duration) -> DeadLetters {
        DeadLetters {
            count: AtomicU64::new(0),
            log: Mutex::new(LogWindow {
                logged: 0,
                suspended_until: None,
                suppressed: 0,
            }),
            log_limit,
            log_suspend,
        }
    }

    pub(crate) fn count(&self) -> u64 {
        // Relaxed: a statistic; tests read it after a synchronising event.
        self.count.load(Ordering::Relaxed)
    }

    /// Counts and logs one dead letter (the caller publishes it).
    pub(crate) fn record(&self, letter: &DeadLetter) {
        // Relaxed: a counter; see `count`.
        self.count.fetch_add(1, Ordering::Relaxed);
        if self.log_limit == 0 {
            return;
        }
        let mut w = self.log.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(until) = w.suspended_until {
            if Instant::now() < until {
                w.suppressed += 1;
                return;
            }
            if w.suppressed > 0 {
                tracing::info!(
                    suppressed = w.suppressed,
                    "dead letters were not logged while logging was suspended"
                );
            }
            *w = LogWindow {
                logged: 0,
                suspended_until: None,
                suppressed: 0,
            };
        }
        w.logged += 1;
        let recipient = letter
            .recipient
            .as_ref()
            .map_or_else(|| "an ask".to_owned(), ActorId::path);
        tracing::info!(
            recipient = %recipient,
            message_type = letter.message_type,
            "dead letter ({} of at most {} before logging is suspended for {:?})",
            w.logged,
            self.log_limit,
            self.log_suspend
        );
        if w.logged >= self.log_limit {
            w.suspended_until = Some(Instant::now() + self.log_suspend);
        }
    }
}
