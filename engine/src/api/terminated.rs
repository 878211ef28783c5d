//! Waiting for an actor's end from outside it: [`ActorId::when_terminated`]
//! (and [`ActorRef::when_terminated`]), for plain threads, tests and tasks
//! that must not send the actor anything.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::api::actor_ref::{ActorId, ActorRef};
use crate::api::promise::Slot;
use crate::runtime::signal::{SystemMsg, Watcher};

/// The future of an actor's termination, from
/// [`ActorId::when_terminated`]: resolves once the actor has terminated
/// (its children stopped and its `post_stop` run), at once if it already
/// had. Works on any executor; plain threads use [`wait`](Self::wait) or
/// [`wait_timeout`](Self::wait_timeout). Cheap to clone: every clone sees
/// the same end.
///
/// Unlike a graceful stop, it sends the actor nothing and has no timeout
/// of its own. It is a death watch with a callback: until the actor
/// terminates, the actor keeps the callback (a few words), also if every
/// clone of this future is dropped, so do not call it in a loop on a
/// long-lived actor.
#[derive(Clone)]
#[must_use = "an actor's termination happens anyway; this only waits for it"]
pub struct ActorTermination {
    slot: Arc<Slot<()>>,
    actor: ActorId,
}

impl ActorTermination {
    fn new(actor: &ActorId) -> ActorTermination {
        let slot = Arc::new(Slot::new());
        let on_stop = Arc::clone(&slot);
        // System lane: a watch of an actor that has already terminated is
        // answered at once (`undeliverable_system` runs the callback).
        actor.send_system(SystemMsg::Watch(Watcher::Callback(Box::new(move || {
            let _ = on_stop.complete(());
        }))));
        ActorTermination {
            slot,
            actor: actor.clone(),
        }
    }

    /// The actor waited for.
    pub fn actor(&self) -> &ActorId {
        &self.actor
    }

    /// Whether the actor has terminated (never blocks).
    pub fn is_terminated(&self) -> bool {
        self.slot.is_completed()
    }

    /// Blocks this thread until the actor has terminated.
    ///
    /// # Panics
    ///
    /// On a scheduler worker thread (inside an actor's handler or a task):
    /// blocking there holds a worker the actor's end may need. `.await` it
    /// there, or watch the actor ([`Context::watch`](crate::Context::watch)).
    #[track_caller]
    pub fn wait(self) {
        proscenium_scheduler::assert_not_on_worker("ActorTermination::wait");
        let _ = self.slot.wait_clone(None);
    }

    /// Blocks this thread until the actor has terminated (`true`) or
    /// `timeout` has passed (`false`).
    ///
    /// # Panics
    ///
    /// On a scheduler worker thread, as [`wait`](Self::wait).
    #[track_caller]
    pub fn wait_timeout(self, timeout: Duration) -> bool {
        proscenium_scheduler::assert_not_on_worker("ActorTermination::wait_timeout");
        match Instant::now().checked_add(timeout) {
            Some(deadline) => self.slot.wait_clone(Some(deadline)).is_some(),
            // Too far away to represent: as good as no timeout.
            None => self.slot.wait_clone(None).is_some(),
        }
    }
}

impl Future for ActorTermination {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.slot.poll_clone(cx)
    }
}

impl fmt::Debug for ActorTermination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActorTermination")
            .field("actor", &self.actor)
            .field("terminated", &self.slot.is_completed())
            .finish()
    }
}

impl ActorId {
    /// A future that resolves once this actor has terminated (at once if
    /// it already had), with blocking [`wait`](ActorTermination::wait) and
    /// [`wait_timeout`](ActorTermination::wait_timeout) for plain threads.
    /// Sends the actor nothing: to stop it and wait, use
    /// [`graceful_stop`](Self::graceful_stop).
    ///
    /// ```
    /// use proscenium::prelude::*;
    /// use std::time::Duration;
    ///
    /// struct Once;
    /// impl Actor for Once {
    ///     type Msg = ();
    ///     fn receive(&mut self, ctx: &mut Context<Self>, (): ()) -> Outcome {
    ///         ctx.stop_self(); // its job is done
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
    /// let once = system.spawn(Props::new(|| Once), "once")?;
    /// let ended = once.id().when_terminated();
    /// once.tell(());
    /// assert!(ended.wait_timeout(Duration::from_secs(10)));
    /// assert!(once.is_terminated());
    /// system.terminate().wait();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn when_terminated(&self) -> ActorTermination {
        ActorTermination::new(self)
    }
}

impl<M: Send + 'static> ActorRef<M> {
    /// A future of this actor's termination, as
    /// [`ActorId::when_terminated`].
    pub fn when_terminated(&self) -> ActorTermination {
        ActorTermination::new(&self.id())
    }
}
