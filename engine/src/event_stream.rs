//! The event stream: publish/subscribe by event type, for system events
//! (dead letters, lifecycle, supervision decisions, unhandled messages:
//! see `events.rs`) and for users' own monitoring events.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use crate::actor_ref::ActorRef;
use crate::dead_letters::DeadLetter;
use crate::events::{LifecycleEvent, SupervisionEvent, UnhandledMessage};

/// How many built-in event types have a lock-free subscriber count.
const BUILTIN: usize = 4;

/// The slot of a built-in event type in `EventStream::builtin`: the engine
/// publishes these on hot paths (every actor start and stop), so asking
/// whether anyone listens must not take the map's lock.
fn builtin_slot(event: TypeId) -> Option<usize> {
    if event == TypeId::of::<LifecycleEvent>() {
        Some(0)
    } else if event == TypeId::of::<DeadLetter>() {
        Some(1)
    } else if event == TypeId::of::<SupervisionEvent>() {
        Some(2)
    } else if event == TypeId::of::<UnhandledMessage>() {
        Some(3)
    } else {
        None
    }
}

type Deliver = dyn Fn(&dyn Any) -> Keep + Send + Sync;

/// Whether a subscriber stays subscribed after a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    Yes,
    No,
}

struct Subscriber {
    id: u64,
    deliver: Arc<Deliver>,
}

/// Publish/subscribe by event type. Subscribers are callbacks (run on the
/// publishing thread; they must be quick and must not block) or actors (the
/// event is mapped to one of their messages and told to them; a subscriber
/// actor that has terminated is removed).
///
/// ```
/// use proscenium::prelude::*;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
///
/// let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
/// let seen = Arc::new(AtomicUsize::new(0));
/// let counter = Arc::clone(&seen);
/// let sub = system.event_stream().subscribe(move |_: &DeadLetter| {
///     counter.fetch_add(1, Ordering::Relaxed);
/// });
/// system.event_stream().publish(42_u32); // nobody listens for u32: dropped
/// # system.event_stream().unsubscribe(&sub);
/// # system.terminate().wait();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct EventStream {
    /// Copy-on-write lists, so a publish clones one `Arc` and runs the
    /// subscribers outside the lock (they may subscribe or publish).
    by_type: RwLock<HashMap<TypeId, Arc<[Subscriber]>>>,
    /// Subscribers per built-in event type (see `builtin_slot`); written
    /// only under `by_type`'s write lock, together with the map.
    builtin: [AtomicUsize; BUILTIN],
    next_id: AtomicU64,
}

/// A subscription, to cancel with [`EventStream::unsubscribe`]. Dropping it
/// does not unsubscribe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    id: u64,
    event: TypeId,
}

impl Clone for Subscriber {
    fn clone(&self) -> Subscriber {
        Subscriber {
            id: self.id,
            deliver: Arc::clone(&self.deliver),
        }
    }
}

impl EventStream {
    pub(crate) fn new() -> EventStream {
        EventStream {
            by_type: RwLock::new(HashMap::new()),
            builtin: Default::default(),
            next_id: AtomicU64::new(1),
        }
    }

    fn add<E: Any>(&self, deliver: Arc<Deliver>) -> Subscription {
        // Relaxed: only uniqueness matters.
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let event = TypeId::of::<E>();
        let mut map = self.by_type.write().unwrap_or_else(|e| e.into_inner());
        let list = map.entry(event).or_insert_with(|| Arc::from(Vec::new()));
        let mut subs: Vec<Subscriber> = list.iter().cloned().collect();
        subs.push(Subscriber { id, deliver });
        *list = Arc::from(subs);
        if let Some(slot) = builtin_slot(event) {
            // Relaxed: a hint read by `has_subscribers`; a publish that
            // happens after this subscribe (through whatever ordered the two)
            // sees the new count by coherence, a concurrent one may miss it.
            self.builtin[slot].fetch_add(1, Ordering::Relaxed);
        }
        Subscription { id, event }
    }

    /// Calls `f` with every event of type `E` published from now on.
    pub fn subscribe<E: Any>(&self, f: impl Fn(&E) + Send + Sync + 'static) -> Subscription {
        self.add::<E>(Arc::new(move |event: &dyn Any| {
            if let Some(e) = event.downcast_ref::<E>() {
                f(e);
            }
            Keep::Yes
        }))
    }

    /// Tells `actor` the message `map` makes of every event of type `E`
    /// published from now on. The subscription ends when the actor has
    /// terminated; a full bounded mailbox drops the event (events never go
    /// to dead letters, so a dead-letter subscriber cannot loop).
    pub fn subscribe_actor<E: Any, M: Send + 'static>(
        &self,
        actor: &ActorRef<M>,
        map: impl Fn(&E) -> M + Send + Sync + 'static,
    ) -> Subscription {
        let actor = actor.clone();
        self.add::<E>(Arc::new(move |event: &dyn Any| {
            let Some(e) = event.downcast_ref::<E>() else {
                return Keep::Yes;
            };
            if actor.is_terminated() {
                return Keep::No;
            }
            match actor.try_tell(map(e)) {
                Err(err) if err.is_closed() => Keep::No,
                _ => Keep::Yes,
            }
        }))
    }

    /// Ends a subscription; `false` if it had already ended.
    pub fn unsubscribe(&self, subscription: &Subscription) -> bool {
        self.remove(subscription.event, &[subscription.id])
    }

    fn remove(&self, event: TypeId, ids: &[u64]) -> bool {
        let mut map = self.by_type.write().unwrap_or_else(|e| e.into_inner());
        let Some(list) = map.get_mut(&event) else {
            return false;
        };
        let before = list.len();
        let kept: Vec<Subscriber> = list
            .iter()
            .filter(|s| !ids.contains(&s.id))
            .cloned()
            .collect();
        let removed = kept.len() != before;
        if let Some(slot) = builtin_slot(event) {
            // Relaxed: see `add`.
            self.builtin[slot].fetch_sub(before - kept.len(), Ordering::Relaxed);
        }
        if kept.is_empty() {
            map.remove(&event);
        } else {
            *list = Arc::from(kept);
        }
        removed
    }

    /// Whether anyone listens for `E` (to skip building an event). For the
    /// engine's own events this is one atomic load, without a lock.
    pub fn has_subscribers<E: Any>(&self) -> bool {
        if let Some(slot) = builtin_slot(TypeId::of::<E>()) {
            // Relaxed: see `add`.
            return self.builtin[slot].load(Ordering::Relaxed) > 0;
        }
        self.by_type
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(&TypeId::of::<E>())
    }

    /// Hands `event` to every subscriber of its type; returns how many got
    /// it. A subscriber that panics is logged and stays subscribed.
    pub fn publish<E: Any>(&self, event: E) -> usize {
        let event_type = TypeId::of::<E>();
        if builtin_slot(event_type).is_some() && !self.has_subscribers::<E>() {
            return 0;
        }
        let subs = {
            let map = self.by_type.read().unwrap_or_else(|e| e.into_inner());
            match map.get(&event_type) {
                Some(list) => Arc::clone(list),
                None => return 0,
            }
        };
        let mut gone = Vec::new();
        for s in subs.iter() {
            let deliver = &s.deliver;
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| deliver(&event))) {
                Ok(Keep::Yes) => {}
                Ok(Keep::No) => gone.push(s.id),
                Err(payload) => tracing::error!(
                    event = std::any::type_name::<E>(),
                    panic = %crate::failure::panic_message(payload.as_ref()),
                    "an event stream subscriber panicked"
                ),
            }
        }
        if !gone.is_empty() {
            self.remove(event_type, &gone);
        }
        subs.len() - gone.len()
    }
}

impl fmt::Debug for EventStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let map = self.by_type.read().unwrap_or_else(|e| e.into_inner());
        f.debug_struct("EventStream")
            .field("event_types", &map.len())
            .field("subscribers", &map.values().map(|l| l.len()).sum::<usize>())
            .finish()
    }
}
