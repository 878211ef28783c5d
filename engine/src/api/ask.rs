//! Request-reply ([`Reply`], [`Ask`], [`AskError`], [`NoReplyReason`]) and confirmed stops
//! ([`GracefulStop`]). Both futures work on any executor and offer a
//! blocking `wait()` for plain threads.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::api::actor_ref::ActorId;
use crate::api::promise::{Expiry, Slot};
use crate::observe::dead_letters::dropping_dead_letter;
use crate::runtime::signal::{SystemMsg, Watcher};
use crate::runtime::system::ActorSystem;

/// Why an [`Ask`] produced no answer.
///
/// To treat every [`NoReply`](AskError::NoReply) alike, match
/// `AskError::NoReply(_)`; its [`NoReplyReason`] tells an actor that never
/// got the request (it had terminated: a dead letter) from one that got it
/// and dropped the [`Reply`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    /// No reply within the timeout. A reply that comes later goes to dead
    /// letters.
    #[error("no reply within {0:?}")]
    Timeout(Duration),
    /// The [`Reply`] was dropped unsent, at once (not at the timeout); the
    /// reason says where.
    #[error("no reply: {}", .0.explain())]
    NoReply(NoReplyReason),
}

/// Where the [`Reply`] of an [`AskError::NoReply`] was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NoReplyReason {
    /// The request was never handled: it became a dead letter, with the
    /// `Reply` in it. The actor had terminated (or terminated with the
    /// request still queued, or behind a PoisonPill), or it could not take
    /// the request: a full bounded mailbox, a router without routees, a
    /// backoff supervisor whose child is down.
    DeadLetter,
    /// Whoever held the `Reply` dropped it unsent: the handler (a bug, or
    /// the actor failed while handling the request), or code the handler
    /// gave it to.
    Dropped,
    /// The system terminated while the `Reply` was still held, unsent,
    /// somewhere outside its actors.
    SystemTerminated,
}

impl NoReplyReason {
    /// A short description: `"dead letter"`, `"dropped"` or `"system
    /// terminated"`.
    pub fn as_str(self) -> &'static str {
        match self {
            NoReplyReason::DeadLetter => "dead letter",
            NoReplyReason::Dropped => "dropped",
            NoReplyReason::SystemTerminated => "system terminated",
        }
    }
}

impl NoReplyReason {
    /// What happened, for [`AskError::NoReply`]'s message (each says
    /// "dropped" at most once).
    fn explain(self) -> &'static str {
        match self {
            NoReplyReason::DeadLetter => {
                "the request was never handled (a dead letter, its reply dropped with it)"
            }
            NoReplyReason::Dropped => "the reply was dropped unsent",
            NoReplyReason::SystemTerminated => {
                "the system terminated while the reply was still held, unsent"
            }
        }
    }
}

impl fmt::Display for NoReplyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

type AskSlot<R> = Slot<Result<R, AskError>>;

/// The answering half of an `ask`: put it in the request, and the actor
/// calls [`send`](Reply::send) once.
pub struct Reply<R: Send + 'static> {
    slot: Option<Arc<AskSlot<R>>>,
    system: ActorSystem,
}

impl<R: Send + 'static> Reply<R> {
    /// Answers the request. If the asker already gave up (timed out), the
    /// answer goes to dead letters.
    pub fn send(mut self, value: R) {
        let slot = self.slot.take().expect("a reply is sent at most once");
        if let Err(Ok(late)) = slot.complete(Ok(value)) {
            self.system.dead_reply(late);
        }
    }

    /// Whether the asker is still waiting (it has not timed out).
    pub fn is_pending(&self) -> bool {
        self.slot.as_ref().is_some_and(|s| !s.is_completed())
    }
}

/// What an ask can put in its request: a [`Reply`] itself, or a type
/// built from one. proscenium-remote's `RemoteReply<R>` is one (it answers
/// a local asker and a remote one alike), so a message type made for
/// remote asks is asked locally with the same constructor, no wrapping at
/// the call site: `actor.ask(Cmd::Get, timeout)` whether `Cmd::Get` takes
/// a `Reply<u64>` or a `RemoteReply<u64>`.
///
/// ```
/// # use proscenium::prelude::*;
/// # use proscenium::FromReply;
/// # use std::time::Duration;
/// /// A reply of one's own: a `Reply` with a label.
/// struct Labelled(&'static str, Reply<String>);
///
/// impl FromReply for Labelled {
///     type Value = String;
///     fn from_reply(reply: Reply<String>) -> Self {
///         Labelled("hello", reply)
///     }
/// }
///
/// struct Greeter;
/// impl Actor for Greeter {
///     type Msg = Labelled;
///     fn receive(&mut self, _: &mut Context<Self>, Labelled(l, r): Labelled) -> Outcome {
///         r.send(format!("{l}, world"));
///         Ok(())
///     }
/// }
/// # let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
/// let greeter = system.spawn(Props::new(|| Greeter), "greeter")?;
/// let answer = greeter.ask(|m: Labelled| m, Duration::from_secs(1)).wait();
/// assert_eq!(answer.as_deref(), Ok("hello, world"));
/// # system.terminate().wait();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait FromReply: Sized {
    /// The answer's type.
    type Value: Send + 'static;
    /// Built around the ask's reply.
    fn from_reply(reply: Reply<Self::Value>) -> Self;
}

impl<R: Send + 'static> FromReply for Reply<R> {
    type Value = R;
    #[inline]
    fn from_reply(reply: Reply<R>) -> Self {
        reply
    }
}

impl<R: Send + 'static> Drop for Reply<R> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            let reason = if dropping_dead_letter() {
                NoReplyReason::DeadLetter
            } else {
                NoReplyReason::Dropped
            };
            let _ = slot.complete(Err(AskError::NoReply(reason)));
        }
    }
}

impl<R: Send + 'static> fmt::Debug for Reply<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reply")
            .field("pending", &self.is_pending())
            .finish()
    }
}

/// The future answer of [`ActorRef::ask`](crate::ActorRef::ask).
///
/// It resolves on time whatever the workers are doing (the timer thread
/// itself completes it at the timeout, and `wait` keeps its own deadline),
/// and it always resolves: if the system terminates first, with
/// [`AskError::NoReply`] ([`NoReplyReason::SystemTerminated`]).
#[must_use = "an ask does nothing useful unless its answer is awaited or waited for"]
pub struct Ask<R> {
    slot: Arc<AskSlot<R>>,
    taken: bool,
    timeout: Duration,
}

impl<R> Ask<R> {
    /// Blocks this thread until the answer, the timeout or the drop of the
    /// request.
    ///
    /// # Panics
    ///
    /// On a scheduler worker thread, that is inside an actor's handler or
    /// a task: blocking there holds the worker the answer may need, and can
    /// deadlock. `.await` the `Ask` in a task instead, or let the answer
    /// come to the actor as a message. Also after
    /// [`try_take`](Self::try_take) has taken the answer.
    #[track_caller]
    pub fn wait(mut self) -> Result<R, AskError> {
        proscenium_scheduler::assert_not_on_worker("Ask::wait");
        assert!(!self.taken, "Ask::wait after try_take took the answer");
        self.taken = true;
        // A backstop in case the timer thread is late: the timeout again,
        // from now (the timer, armed when the ask was made, fires first;
        // not reading the clock when the ask is made saves every ask that
        // is awaited or piped a clock read).
        let deadline = Instant::now().checked_add(self.timeout);
        if let Some(answer) = self.slot.wait_take_until(deadline) {
            return answer;
        }
        // Our own deadline passed: time out, unless the answer came in just
        // now.
        let _ = self.slot.complete(Err(AskError::Timeout(self.timeout)));
        self.slot.wait_take()
    }

    /// Whether the outcome is in (an answer, a timeout or
    /// [`AskError::NoReply`]) and not yet taken: then
    /// [`try_take`](Self::try_take) returns it and `wait` does not block.
    /// Never blocks, also on a worker thread.
    pub fn is_ready(&self) -> bool {
        !self.taken && self.slot.has_value()
    }

    /// Takes the outcome if it is in, without blocking (on any thread,
    /// workers included): `Some` once, then `None` for ever, as for an
    /// outcome not in yet. Once it has returned `Some`, the `Ask` is spent:
    /// polling it again or calling [`wait`](Self::wait) panics, as polling
    /// a completed future may.
    ///
    /// ```
    /// # use proscenium::prelude::*;
    /// # use std::time::Duration;
    /// # struct Echo;
    /// # impl Actor for Echo {
    /// #     type Msg = (u32, Reply<u32>);
    /// #     fn receive(&mut self, _: &mut Context<Self>, (n, r): Self::Msg) -> Outcome { r.send(n); Ok(()) }
    /// # }
    /// # let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
    /// let echo = system.spawn(Props::new(|| Echo), "echo")?;
    /// let mut ask = echo.ask(|reply| (7, reply), Duration::from_secs(5));
    /// let answer = loop {
    ///     if let Some(answer) = ask.try_take() {
    ///         break answer;
    ///     }
    ///     std::thread::yield_now(); // or other work
    /// };
    /// assert_eq!(answer, Ok(7));
    /// assert!(!ask.is_ready() && ask.try_take().is_none());
    /// # system.terminate().wait();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_take(&mut self) -> Option<Result<R, AskError>> {
        if self.taken {
            return None;
        }
        let answer = self.slot.try_take()?;
        self.taken = true;
        Some(answer)
    }
}

impl<R> Future for Ask<R> {
    type Output = Result<R, AskError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let polled = self.slot.poll_take(cx);
        if polled.is_ready() {
            self.taken = true;
        }
        polled
    }
}

impl<R> Drop for Ask<R> {
    fn drop(&mut self) {
        if !self.taken {
            self.slot.cancel_timer();
        }
    }
}

impl<R> fmt::Debug for Ask<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ask")
            .field("completed", &self.slot.is_completed())
            .finish()
    }
}

/// A reply slot with its timeout armed.
pub(crate) fn request<R: Send + 'static>(
    system: &ActorSystem,
    timeout: Duration,
) -> (Reply<R>, Ask<R>) {
    let slot: Arc<AskSlot<R>> = Arc::new(Slot::new());
    let expiry = Expiry::new(
        Arc::clone(&slot),
        Err(AskError::Timeout(timeout)),
        // The timer is dropped unfired only when the system's timers stop,
        // at its termination, with the `Reply` still held somewhere.
        Err(AskError::NoReply(NoReplyReason::SystemTerminated)),
    );
    // On the timer thread itself: completing a slot only wakes its waiters,
    // and a timeout must not wait for a free worker.
    let timer = system
        .scheduler_handle()
        .schedule_inline(timeout, move || expiry.fire());
    slot.set_timer(timer);
    (
        Reply {
            slot: Some(Arc::clone(&slot)),
            system: system.clone(),
        },
        Ask {
            slot,
            taken: false,
            timeout,
        },
    )
}

/// The future of a graceful stop: `true` once the actor has terminated,
/// `false` if it had not after the timeout.
///
/// Like [`Ask`], it resolves on time whatever the workers are doing, and
/// always resolves (`false` if the system terminated first without the
/// actor's end being seen).
#[must_use = "a graceful stop's confirmation is only useful if awaited or waited for"]
pub struct GracefulStop {
    slot: Arc<Slot<bool>>,
    /// When the timeout passes (`None`: no timeout, or too far away).
    deadline: Option<Instant>,
}

impl GracefulStop {
    /// Blocks this thread until the actor terminated (`true`) or the
    /// timeout passed (`false`).
    ///
    /// # Panics
    ///
    /// On a scheduler worker thread (inside an actor's handler or a task),
    /// as [`Ask::wait`]: `.await` it there.
    #[track_caller]
    pub fn wait(self) -> bool {
        proscenium_scheduler::assert_not_on_worker("GracefulStop::wait");
        if let Some(stopped) = self.slot.wait_clone(self.deadline) {
            return stopped;
        }
        // Our own deadline, in case the timer thread is late.
        let _ = self.slot.complete(false);
        self.slot.wait_clone(None).unwrap_or(false)
    }

    /// Whether the target was already gone when the watch was sent (then
    /// no stop signal is sent: it would only be a dead letter).
    pub(crate) fn already_terminated(&self) -> bool {
        self.slot.is_completed()
    }
}

impl Future for GracefulStop {
    type Output = bool;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        self.slot.poll_clone(cx)
    }
}

impl fmt::Debug for GracefulStop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GracefulStop")
            .field("completed", &self.slot.is_completed())
            .finish()
    }
}

/// Watches `target` with a callback and arms the timeout; the caller then
/// sends the stop signal. The watch goes first, on the system lane, so it
/// is registered before any user-lane stop signal is handled, and a target
/// that is already dead answers it at once.
pub(crate) fn graceful_stop_watch(target: &ActorId, timeout: Duration) -> GracefulStop {
    let stop = termination_watch(target);
    let slot = stop.slot;
    if !slot.is_completed() {
        let expiry = Expiry::new(Arc::clone(&slot), false, false);
        // On the timer thread itself, as the ask's timeout (see `request`).
        let timer = target
            .core()
            .system
            .scheduler_handle()
            .schedule_inline(timeout, move || expiry.fire());
        slot.set_timer(timer);
    }
    GracefulStop {
        slot,
        deadline: Instant::now().checked_add(timeout),
    }
}

/// Completes with `true` once `target` has terminated (also if it already
/// had), with no timeout of its own.
pub(crate) fn termination_watch(target: &ActorId) -> GracefulStop {
    let slot = Arc::new(Slot::new());
    let on_stop = Arc::clone(&slot);
    target.send_system(SystemMsg::Watch(Watcher::Callback(Box::new(move || {
        let _ = on_stop.complete(true);
    }))));
    GracefulStop {
        slot,
        deadline: None,
    }
}
