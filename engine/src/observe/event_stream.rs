//! The event stream: publish/subscribe by event type, for system events
//! (dead letters, lifecycle, supervision decisions, unhandled messages:
//! see `events.rs`) and for users' own monitoring events.

use std::any::{Any, TypeId};
use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use crate::api::actor_ref::ActorRef;
use crate::observe::dead_letters::DeadLetter;
use crate::observe::events::{LifecycleEvent, SupervisionEvent, UnhandledMessage};
use crate::runtime::large;

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

/// How many publishes may nest on one thread before an event is no longer
/// handed to callback subscribers. A callback may publish (or tell an
/// actor that has stopped, which publishes a dead letter, which reaches the
/// same callback...): without a bound that recursion ends in a stack
/// overflow, which aborts the process.
const MAX_NESTED_PUBLISHES: u32 = 8;

thread_local! {
    /// Publishes under way on this thread, and the events of the current
    /// burst (since the outermost of them began) that nested too deep.
    static NESTING: Cell<Nesting> = const { Cell::new(Nesting { depth: 0, cut_off: 0 }) };
}

#[derive(Clone, Copy)]
struct Nesting {
    depth: u32,
    cut_off: u64,
}

/// One publish under way on this thread, for its delivery loop; logs the
/// events cut off in the burst when the outermost publish ends.
struct NestedPublish {
    /// How deep this publish is (1: not nested); 0 if this thread's
    /// counter is gone (a publish from a thread-local's destructor).
    depth: u32,
}

impl NestedPublish {
    fn enter() -> NestedPublish {
        let depth = NESTING
            .try_with(|n| {
                let mut now = n.get();
                now.depth += 1;
                n.set(now);
                now.depth
            })
            .unwrap_or(0);
        NestedPublish { depth }
    }

    /// Whether this publish is nested too deep to run callbacks.
    fn too_deep(&self) -> bool {
        self.depth > MAX_NESTED_PUBLISHES
    }

    /// Notes an event not handed to the callbacks, for the burst's warning.
    fn cut_off(&self) {
        let _ = NESTING.try_with(|n| {
            let mut now = n.get();
            now.cut_off += 1;
            n.set(now);
        });
    }
}

impl Drop for NestedPublish {
    fn drop(&mut self) {
        if self.depth == 0 {
            return;
        }
        let cut_off = NESTING
            .try_with(|n| {
                let mut now = n.get();
                now.depth -= 1;
                let cut_off = if now.depth == 0 {
                    std::mem::take(&mut now.cut_off)
                } else {
                    0
                };
                n.set(now);
                cut_off
            })
            .unwrap_or(0);
        if cut_off > 0 {
            // Once per burst, when its outermost publish ends; a panicking
            // log layer must not unwind out of a drop.
            let _ = std::panic::catch_unwind(|| {
                tracing::warn!(
                    cut_off,
                    max = MAX_NESTED_PUBLISHES,
                    "events published from inside too many nested publishes were not handed \
                     to callback subscribers (a subscriber that publishes, or that tells a \
                     stopped actor from a dead-letter subscription?)"
                );
            });
        }
    }
}

/// Whether a subscriber stays subscribed after a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    Yes,
    No,
}

struct Subscriber {
    id: u64,
    /// A callback (run on the publishing thread, so it can recurse), not
    /// an actor (told with `try_tell`, which publishes nothing).
    callback: bool,
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
    /// Events not handed to callback subscribers: published too deep
    /// inside other publishes (see `MAX_NESTED_PUBLISHES`).
    dropped_reentrant: AtomicU64,
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
            callback: self.callback,
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
            dropped_reentrant: AtomicU64::new(0),
        }
    }

    fn add<E: Any>(&self, callback: bool, deliver: Arc<Deliver>) -> Subscription {
        // Relaxed: only uniqueness matters.
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let event = TypeId::of::<E>();
        let mut map = self.by_type.write().unwrap_or_else(|e| e.into_inner());
        let list = map.entry(event).or_insert_with(|| Arc::from(Vec::new()));
        let mut subs: Vec<Subscriber> = list.iter().cloned().collect();
        subs.push(Subscriber {
            id,
            callback,
            deliver,
        });
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
    ///
    /// `f` runs on the publishing thread, inside the publish: if it
    /// publishes in turn (or tells an actor that has stopped, from a
    /// [`DeadLetter`] subscription: another dead letter), the publishes
    /// nest. Beyond 8 nested publishes on one thread an event is no longer
    /// handed to callbacks (actors still get it); each such event is
    /// counted ([`dropped_reentrant`](Self::dropped_reentrant)) and a burst
    /// of them logged once, as a warning.
    pub fn subscribe<E: Any>(&self, f: impl Fn(&E) + Send + Sync + 'static) -> Subscription {
        self.add::<E>(
            true,
            Arc::new(move |event: &dyn Any| {
                if let Some(e) = event.downcast_ref::<E>() {
                    f(e);
                }
                Keep::Yes
            }),
        )
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
        self.add::<E>(
            false,
            Arc::new(move |event: &dyn Any| {
                let Some(e) = event.downcast_ref::<E>() else {
                    return Keep::Yes;
                };
                if actor.is_terminated() {
                    return Keep::No;
                }
                // The message lives in this frame: with room for it, if it
                // is large.
                large::with_room_if_large::<M, _>(|| match actor.try_tell(map(e)) {
                    Err(err) if err.is_closed() => Keep::No,
                    _ => Keep::Yes,
                })
            }),
        )
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

    /// Removes every actor subscriber (at termination, once every actor
    /// has stopped: a subscriber actor is otherwise removed only by the
    /// first publish of its event type after it stopped, and until then its
    /// subscription keeps its cell, and the system, allocated). Callback
    /// subscribers stay: they are the user's to remove.
    pub(crate) fn remove_actor_subscribers(&self) {
        let removed = {
            let mut map = self.by_type.write().unwrap_or_else(|e| e.into_inner());
            let mut removed = Vec::new();
            map.retain(|event, list| {
                let kept: Vec<Subscriber> = list.iter().filter(|s| s.callback).cloned().collect();
                if let Some(slot) = builtin_slot(*event) {
                    // Relaxed: see `add`.
                    self.builtin[slot].fetch_sub(list.len() - kept.len(), Ordering::Relaxed);
                }
                if kept.len() == list.len() {
                    return true;
                }
                removed.push(std::mem::replace(list, Arc::from(kept)));
                !list.is_empty()
            });
            removed
        };
        // Dropped outside the lock: an actor subscriber's last reference
        // may free a cell, which may publish.
        drop(removed);
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

    /// Events not handed to callback subscribers because they were
    /// published from inside too many nested publishes on one thread (see
    /// [`subscribe`](Self::subscribe)); zero unless a callback publishes,
    /// directly or not, in a loop.
    pub fn dropped_reentrant(&self) -> u64 {
        // Relaxed: a statistic, read after a synchronising event.
        self.dropped_reentrant.load(Ordering::Relaxed)
    }

    /// Hands `event` to every subscriber of its type; returns how many got
    /// it. A subscriber that panics is logged and stays subscribed. From
    /// inside more than 8 nested publishes on this thread, only actor
    /// subscribers get it (see [`subscribe`](Self::subscribe)).
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
        let nesting = NestedPublish::enter();
        let too_deep = nesting.too_deep();
        if too_deep && subs.iter().any(|s| s.callback) {
            // Relaxed: a statistic.
            self.dropped_reentrant.fetch_add(1, Ordering::Relaxed);
            nesting.cut_off();
        }
        let mut gone = Vec::new();
        let mut skipped = 0;
        for s in subs.iter() {
            if too_deep && s.callback {
                skipped += 1;
                continue;
            }
            let deliver = &s.deliver;
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| deliver(&event))) {
                Ok(Keep::Yes) => {}
                Ok(Keep::No) => gone.push(s.id),
                Err(payload) => tracing::error!(
                    event = std::any::type_name::<E>(),
                    panic = %crate::supervision::failure::panic_message(payload.as_ref()),
                    "an event stream subscriber panicked"
                ),
            }
        }
        drop(nesting);
        if !gone.is_empty() {
            self.remove(event_type, &gone);
        }
        subs.len() - gone.len() - skipped
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
