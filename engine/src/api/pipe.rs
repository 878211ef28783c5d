//! Waiting without blocking: a future's output, or the answer to an ask,
//! delivered to an actor as a message ([`Context::pipe_to_self`],
//! [`Context::ask_pipe`]).
//!
//! A piped future runs as a task (on the system's workers, or on a tokio
//! runtime with the `tokio` feature); when it completes, its output is
//! mapped to one of the actor's messages and sent with `tell`, so it takes
//! its place in the user lane like any other message, and goes to dead
//! letters (exactly once, by the `tell`) if the actor has stopped meanwhile.
//! A restart does not cancel it (Akka's `pipeTo`): the task holds the
//! actor's reference, which outlives incarnations. [`PipeHandle::cancel`]
//! does: the future is dropped and nothing is delivered.
//!
//! An ask piped to an actor needs no task at all: the ask's reply slot is
//! polled once with a waker of our own, and the slot's completion (the
//! reply, its drop, or the timeout) calls that waker, which maps the answer
//! and tells it to the asker right there, on the thread that completed the
//! slot. One scheduler hop fewer than a task that awaits the ask and tells.
//!
//! A panic in a piped future or in a mapping closure is caught: nothing is
//! delivered, the panic is logged and counted
//! ([`ActorSystem::pipe_panics`](crate::ActorSystem::pipe_panics)), and the
//! actor is not failed. The future is not the actor's handler (it may
//! complete in a later incarnation, or after the actor has stopped), so a
//! supervision failure would blame the wrong incarnation; an output type of
//! `Result` is how a future reports a failure to its actor.

use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll, Wake, Waker};
use std::time::Duration;

use crate::api::actor::Actor;
use crate::api::ask::Reply;
use crate::api::context::Context;
use crate::api::pipe_state::{PipeShared, CANCELLED, DELIVERED, PANICKED, PENDING};

use crate::api::actor_ref::ActorRef;
use crate::api::ask::{Ask, AskError};
use crate::runtime::contain::{contain, report};
use crate::runtime::large;

/// Cancels a piped future; returned by [`Context::pipe_to_self`].
/// Dropping it does not cancel (the future runs and its message is
/// delivered): keep it only to cancel.
///
/// [`Context::pipe_to_self`]: crate::Context::pipe_to_self
pub struct PipeHandle {
    shared: Arc<PipeShared>,
}

impl PipeHandle {
    /// Cancels the pipe: the future is dropped (on its executor, soon after)
    /// and no message is delivered. Returns `true` if this call cancelled
    /// it, `false` if it had already delivered its message (or
    /// panicked, or was cancelled before).
    pub fn cancel(&self) -> bool {
        self.shared.cancel()
    }

    /// Whether the pipe is over: delivered, cancelled, or panicked.
    pub fn is_finished(&self) -> bool {
        self.shared.state() != PENDING
    }

    /// Whether its message was handed to the actor (or, if the actor had
    /// stopped, to dead letters).
    pub fn is_delivered(&self) -> bool {
        self.shared.state() == DELIVERED
    }
}

impl fmt::Debug for PipeHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.shared.state() {
            PENDING => "pending",
            CANCELLED => "cancelled",
            DELIVERED => "delivered",
            _ => "panicked",
        };
        f.debug_struct("PipeHandle").field("state", &state).finish()
    }
}

/// The future that runs `future`, maps its output and tells it to
/// `target`, unless cancelled; to be spawned on any executor. Returns the
/// handle that cancels it.
pub(crate) fn piped<F, T, M>(
    target: ActorRef<M>,
    future: F,
    map: impl FnOnce(T) -> M + Send + 'static,
) -> (impl Future<Output = ()> + Send + 'static, PipeHandle)
where
    F: Future<Output = T> + Send + 'static,
    M: Send + 'static,
{
    let shared = Arc::new(PipeShared::new());
    let task_shared = Arc::clone(&shared);
    let task = async move {
        let shared = task_shared;
        let mut future = std::pin::pin!(future);
        let output = std::future::poll_fn(|cx| {
            // Stores the waker for a cancel (see `PipeShared::poll_gate`).
            if !shared.poll_gate(cx.waker()) {
                return Poll::Ready(None);
            }
            match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
                Ok(Poll::Pending) => Poll::Pending,
                Ok(Poll::Ready(output)) => Poll::Ready(Some(Ok(output))),
                Err(payload) => Poll::Ready(Some(Err(payload))),
            }
        })
        .await;
        // The waker is no longer needed (a cancel now only loses its race).
        shared.drop_waker();
        match output {
            None => {} // cancelled: the future is dropped with this task
            Some(Ok(output)) => deliver(&shared, &target, output, map),
            Some(Err(payload)) if shared.finish(PANICKED) => {
                panicked(&target, payload, "a piped future");
            }
            // Cancelled while the panic unwound: the panic is not reported.
            Some(Err(_)) => {}
        }
    };
    (task, PipeHandle { shared })
}

/// Maps `output` and tells it, unless the pipe was cancelled meanwhile.
/// The message lives in this frame: with room for it, if it is large.
fn deliver<T, M: Send + 'static>(
    shared: &PipeShared,
    target: &ActorRef<M>,
    output: T,
    map: impl FnOnce(T) -> M,
) {
    large::with_room_if_large::<M, _>(move || deliver_here(shared, target, output, map));
}

/// `deliver` on this stack.
fn deliver_here<T, M: Send + 'static>(
    shared: &PipeShared,
    target: &ActorRef<M>,
    output: T,
    map: impl FnOnce(T) -> M,
) {
    if shared.state() != PENDING {
        contain("dropping a cancelled pipe's output", || drop(output));
        return;
    }
    match catch_unwind(AssertUnwindSafe(|| map(output))) {
        Ok(msg) => {
            if shared.finish(DELIVERED) {
                target.tell(msg);
            } else {
                contain("dropping a cancelled pipe's message", || drop(msg));
            }
        }
        Err(payload) => {
            if shared.finish(PANICKED) {
                panicked(target, payload, "a pipe's mapping closure");
            }
        }
    }
}

/// Logs and counts a panic in piped user code.
fn panicked<M: Send + 'static>(
    target: &ActorRef<M>,
    payload: Box<dyn std::any::Any + Send>,
    what: &str,
) {
    target.cell.core().system.pipe_panicked();
    let actor = target.path();
    report(payload, |panic| {
        tracing::error!(%actor, panic, "{what} panicked; nothing was delivered");
    });
}

/// An ask whose answer is told to an actor: the waker that the ask's slot
/// calls when it completes.
struct AskPipe<R, M: Send + 'static, G> {
    /// Taken by the delivery.
    pending: Mutex<Option<PendingAsk<R, M, G>>>,
}

/// The ask, the mapping and the asker, until the answer comes.
type PendingAsk<R, M, G> = (Ask<R>, G, ActorRef<M>);

impl<R, M, G> AskPipe<R, M, G>
where
    R: Send + 'static,
    M: Send + 'static,
    G: FnOnce(Result<R, AskError>) -> M + Send + 'static,
{
    /// Polls the ask with this pipe as its waker; delivers once it is ready.
    fn poll(self: &Arc<Self>) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let Some((ask, _, _)) = pending.as_mut() else {
            return; // delivered already (a late, spurious wake)
        };
        let waker = Waker::from(Arc::clone(self));
        let answer = match Pin::new(ask).poll(&mut TaskContext::from_waker(&waker)) {
            Poll::Pending => return,
            Poll::Ready(answer) => answer,
        };
        let Some((ask, map, target)) = pending.take() else {
            return;
        };
        drop(pending);
        drop(ask);
        // The message lives in this frame: with room for it, if it is large.
        large::with_room_if_large::<M, _>(move || {
            match catch_unwind(AssertUnwindSafe(|| map(answer))) {
                Ok(msg) => target.tell(msg),
                Err(payload) => panicked(&target, payload, "an ask pipe's mapping closure"),
            }
        });
    }
}

impl<R, M, G> Wake for AskPipe<R, M, G>
where
    R: Send + 'static,
    M: Send + 'static,
    G: FnOnce(Result<R, AskError>) -> M + Send + 'static,
{
    fn wake(self: Arc<Self>) {
        self.poll();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.poll();
    }
}

/// Tells `map(answer)` to `asker` once `ask` completes, with no task.
pub(crate) fn pipe_ask<R, M, G>(ask: Ask<R>, asker: ActorRef<M>, map: G)
where
    R: Send + 'static,
    M: Send + 'static,
    G: FnOnce(Result<R, AskError>) -> M + Send + 'static,
{
    let pipe = Arc::new(AskPipe {
        pending: Mutex::new(Some((ask, map, asker))),
    });
    // Registers the waker in the slot (or delivers at once if answered).
    pipe.poll();
}

impl<A: Actor> Context<A> {
    /// Runs `future` on the system's workers and delivers its output to
    /// this actor as the message `map(output)`, in the user lane like any
    /// other message: the way to wait for something inside a handler
    /// without blocking its worker (Akka's `pipeToSelf`).
    ///
    /// - If the actor has stopped when the output comes, the message goes to
    ///   dead letters (once).
    /// - A restart does not cancel it: the message reaches the incarnation
    ///   that is current when it arrives.
    /// - [`PipeHandle::cancel`] cancels it: the future is dropped and
    ///   nothing is delivered. Dropping the handle does not cancel.
    /// - A panic in the future or in `map` delivers nothing; it is logged
    ///   and counted in [`ActorSystem::pipe_panics`](crate::ActorSystem::pipe_panics),
    ///   and the actor is not failed (make the output a `Result` to tell the
    ///   actor about failures).
    ///
    /// `map` runs on the worker that completes the future, not in the
    /// actor: it must not touch the actor's state (it cannot: it is
    /// `'static`), only build the message.
    ///
    /// ```
    /// use proscenium::prelude::*;
    /// use std::sync::mpsc;
    ///
    /// enum Msg { Fetch, Fetched(u64) }
    /// struct Fetcher { done: mpsc::Sender<u64> }
    ///
    /// impl Actor for Fetcher {
    ///     type Msg = Msg;
    ///     fn receive(&mut self, ctx: &mut Context<Self>, msg: Msg) -> Outcome {
    ///         match msg {
    ///             // Never block here; the answer comes back as a message.
    ///             Msg::Fetch => drop(ctx.pipe_to_self(async { 42 }, Msg::Fetched)),
    ///             Msg::Fetched(n) => { let _ = self.done.send(n); }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
    /// let (tx, rx) = mpsc::channel();
    /// let fetcher = system.spawn(Props::new(move || Fetcher { done: tx.clone() }), "fetcher")?;
    /// fetcher.tell(Msg::Fetch);
    /// assert_eq!(rx.recv()?, 42);
    /// # system.terminate().wait();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pipe_to_self<F, T>(
        &self,
        future: F,
        map: impl FnOnce(T) -> A::Msg + Send + 'static,
    ) -> PipeHandle
    where
        F: Future<Output = T> + Send + 'static,
    {
        let (task, handle) = piped(self.self_ref(), future, map);
        // From a worker: the task goes to this worker's LIFO slot. On a
        // closed scheduler (the system is terminating) it is dropped, and so
        // is the future: nothing is delivered.
        self.system().scheduler_handle().spawn_detached(task);
        handle
    }

    /// Like [`pipe_to_self`](Self::pipe_to_self), with the future run on a
    /// tokio runtime: for futures of tokio-based clients (tokio's I/O and
    /// timers work only inside its runtime). The output is delivered as
    /// `pipe_to_self` says; the runtime must outlive the future (a runtime
    /// that shuts down first drops it: nothing is delivered).
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub fn pipe_to_self_on<F, T>(
        &self,
        runtime: &tokio::runtime::Handle,
        future: F,
        map: impl FnOnce(T) -> A::Msg + Send + 'static,
    ) -> PipeHandle
    where
        F: Future<Output = T> + Send + 'static,
    {
        let (task, handle) = piped(self.self_ref(), future, map);
        drop(runtime.spawn(task));
        handle
    }

    /// Asks `target` without blocking: sends `make(reply)` to it, and
    /// delivers the answer to this actor as the message `map(answer)`, or
    /// `map(Err(AskError::Timeout(..)))` after `timeout`, or
    /// `map(Err(AskError::NoReply(reason)))` if the request is dropped
    /// unanswered.
    /// Exactly one message comes back, in the user lane.
    ///
    /// No task is spawned: the answer is mapped and told to this actor by
    /// whoever completes the ask (the replier's `Reply::send`, the timer
    /// thread at the timeout), so keep `map` cheap; a panic in it is
    /// caught, logged and counted as [`pipe_to_self`](Self::pipe_to_self)
    /// says. A restart of this actor does not cancel the ask.
    ///
    /// ```
    /// use proscenium::prelude::*;
    /// use std::sync::mpsc;
    /// use std::time::Duration;
    ///
    /// struct Doubler;
    /// impl Actor for Doubler {
    ///     type Msg = (u32, Reply<u32>);
    ///     fn receive(&mut self, _: &mut Context<Self>, (n, r): Self::Msg) -> Outcome {
    ///         r.send(2 * n);
    ///         Ok(())
    ///     }
    /// }
    ///
    /// enum Msg { Go(ActorRef<(u32, Reply<u32>)>), Got(Result<u32, AskError>) }
    /// struct Asker { done: mpsc::Sender<Result<u32, AskError>> }
    /// impl Actor for Asker {
    ///     type Msg = Msg;
    ///     fn receive(&mut self, ctx: &mut Context<Self>, msg: Msg) -> Outcome {
    ///         match msg {
    ///             Msg::Go(doubler) => {
    ///                 ctx.ask_pipe(&doubler, |r| (21, r), Duration::from_secs(1), Msg::Got)
    ///             }
    ///             Msg::Got(answer) => { let _ = self.done.send(answer); }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
    /// let doubler = system.spawn(Props::new(|| Doubler), "doubler")?;
    /// let (tx, rx) = mpsc::channel();
    /// let asker = system.spawn(Props::new(move || Asker { done: tx.clone() }), "asker")?;
    /// asker.tell(Msg::Go(doubler));
    /// assert_eq!(rx.recv()?, Ok(42));
    /// # system.terminate().wait();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn ask_pipe<N, R>(
        &self,
        target: &ActorRef<N>,
        make: impl FnOnce(Reply<R>) -> N,
        timeout: Duration,
        map: impl FnOnce(Result<R, AskError>) -> A::Msg + Send + 'static,
    ) where
        N: Send + 'static,
        R: Send + 'static,
    {
        let ask = target.ask(make, timeout);
        pipe_ask(ask, self.self_ref(), map);
    }
}
