//! [`EventProbe`]: records events from the event stream (dead letters,
//! lifecycle and supervision events, your own) for a test to assert on.

use std::any::{Any, TypeId};
use std::fmt;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};

use crate::api::actor_ref::ActorId;
use crate::observe::dead_letters::DeadLetter;
use crate::observe::event_stream::Subscription;
use crate::runtime::system::ActorSystem;

use super::deadline_after;

/// One recorded event, with its type for the failure messages.
struct Recorded {
    event: Box<dyn Any + Send>,
    type_name: &'static str,
}

/// What an [`EventProbe`] records of a [`DeadLetter`] (a dead letter's
/// message is published by reference and cannot be kept; map it with
/// [`EventProbe::subscribe_map`] to keep something of it).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ObservedDeadLetter {
    /// The actor it was for; `None` for a late reply to an `ask`.
    pub recipient: Option<ActorId>,
    /// The message's type name.
    pub message_type: &'static str,
}

impl ObservedDeadLetter {
    /// Whether the message was a `T`.
    pub fn is<T: Any>(&self) -> bool {
        self.message_type == std::any::type_name::<T>()
    }
}

/// Records the events of the types it subscribes to, in the order they
/// were published, for [`expect_event`](Self::expect_event) and
/// [`expect_dead_letter`](Self::expect_dead_letter). Dropping it ends its
/// subscriptions.
///
/// ```
/// use proscenium::testkit::{EventProbe, TestSystem};
/// use std::time::Duration;
///
/// let system = TestSystem::new();
/// let events = EventProbe::dead_letters(&system);
/// let probe = proscenium::testkit::TestProbe::<u32>::new(&system);
/// let dead = probe.actor_ref();
/// drop(probe); // stops the probe's actor
/// dead.when_terminated().wait();
/// dead.tell(7);
/// let letter = events.expect_dead_letter(Duration::from_secs(5));
/// assert_eq!(letter.recipient, Some(dead.id()));
/// assert!(letter.is::<u32>());
/// ```
pub struct EventProbe {
    system: ActorSystem,
    tx: Sender<Recorded>,
    rx: Receiver<Recorded>,
    subscriptions: Vec<Subscription>,
}

impl EventProbe {
    /// A probe subscribed to nothing yet.
    pub fn new(system: &ActorSystem) -> EventProbe {
        let (tx, rx) = mpsc::channel();
        EventProbe {
            // The engine's reference: a probe does not keep the system alive.
            system: system.internal(),
            tx,
            rx,
            subscriptions: Vec::new(),
        }
    }

    /// A probe subscribed to dead letters (recorded as
    /// [`ObservedDeadLetter`]).
    pub fn dead_letters(system: &ActorSystem) -> EventProbe {
        EventProbe::new(system).subscribe_map(|d: &DeadLetter| {
            Some(ObservedDeadLetter {
                recipient: d.recipient().cloned(),
                message_type: d.message_type(),
            })
        })
    }

    /// Also records every event of type `E` (a clone of it).
    pub fn subscribe<E: Any + Clone + Send>(self) -> EventProbe {
        self.subscribe_map(|e: &E| Some(e.clone()))
    }

    /// Also records what `map` makes of each event of type `E`, where it
    /// makes something (`None`: not recorded): a filter, or a way to keep
    /// part of an event that is not `Clone` (such as a [`DeadLetter`]'s
    /// message). Expect it as a `T`.
    pub fn subscribe_map<E: Any, T: Any + Send>(
        mut self,
        map: impl Fn(&E) -> Option<T> + Send + Sync + 'static,
    ) -> EventProbe {
        let tx = self.tx.clone();
        let sub = self.system.event_stream().subscribe(move |e: &E| {
            if let Some(t) = map(e) {
                let _ = tx.send(Recorded {
                    event: Box::new(t),
                    type_name: std::any::type_name::<T>(),
                });
            }
        });
        self.subscriptions.push(sub);
        self
    }

    fn next(&self, deadline: Instant) -> Option<Recorded> {
        let left = deadline.saturating_duration_since(Instant::now());
        // A timeout, or (never: the probe holds a sender itself) no sender left.
        self.rx.recv_timeout(left).ok()
    }

    /// The next recorded event, which must come within `timeout` and be a
    /// `T` (the type subscribed to, or that the map made).
    ///
    /// # Panics
    ///
    /// If nothing comes in time, or an event of another type comes first
    /// (the failure names both types).
    #[track_caller]
    pub fn expect_event<T: Any>(&self, timeout: Duration) -> T {
        let expected = std::any::type_name::<T>();
        match self.next(deadline_after(timeout)) {
            None => panic!("expected an event {expected} within {timeout:?}, nothing came"),
            Some(r) if r.event.as_ref().type_id() == TypeId::of::<T>() => {
                match r.event.downcast::<T>() {
                    Ok(t) => *t,
                    Err(_) => unreachable!("the type id was just checked"),
                }
            }
            Some(r) => panic!(
                "expected an event {expected} within {timeout:?}, got a {}",
                r.type_name
            ),
        }
    }

    /// Reads the recorded events until one is a `T` that satisfies `pred`,
    /// within `timeout`; the others are dropped.
    ///
    /// # Panics
    ///
    /// If none comes in time (the failure says how many were passed over).
    #[track_caller]
    pub fn fish_event<T: Any>(&self, pred: impl Fn(&T) -> bool, timeout: Duration) -> T {
        let deadline = deadline_after(timeout);
        let mut passed = 0_usize;
        loop {
            let Some(r) = self.next(deadline) else {
                panic!(
                    "expected an event {} matching the predicate within {timeout:?}; passed \
                     over {passed} others",
                    std::any::type_name::<T>()
                );
            };
            match r.event.downcast::<T>() {
                Ok(t) if pred(&t) => return *t,
                _ => passed += 1,
            }
        }
    }

    /// The next recorded event, which must be a dead letter (this probe
    /// subscribed with [`dead_letters`](Self::dead_letters)), within
    /// `timeout`.
    ///
    /// # Panics
    ///
    /// As [`expect_event`](Self::expect_event).
    #[track_caller]
    pub fn expect_dead_letter(&self, timeout: Duration) -> ObservedDeadLetter {
        self.expect_event::<ObservedDeadLetter>(timeout)
    }

    /// Waits `duration` and asserts that no event was recorded meanwhile.
    ///
    /// # Panics
    ///
    /// If one was (the failure names its type).
    #[track_caller]
    pub fn expect_no_event(&self, duration: Duration) {
        if let Some(r) = self.next(deadline_after(duration)) {
            panic!("expected no event for {duration:?}, got a {}", r.type_name);
        }
    }

    /// What has been recorded so far, without waiting (as boxed events,
    /// for a test that counts or downcasts them itself).
    pub fn drain_now(&self) -> Vec<Box<dyn Any + Send>> {
        self.rx.try_iter().map(|r| r.event).collect()
    }
}

impl Drop for EventProbe {
    fn drop(&mut self) {
        for sub in &self.subscriptions {
            self.system.event_stream().unsubscribe(sub);
        }
    }
}

impl fmt::Debug for EventProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventProbe")
            .field("subscriptions", &self.subscriptions.len())
            .finish()
    }
}
