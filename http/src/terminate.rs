//! Graceful termination (Akka HTTP's `ServerBinding.terminate`): the
//! termination's state and task, the futures that observe it
//! ([`TerminationSignal`], [`HttpTermination`]), and the
//! coordinated-shutdown tasks. The responses it sends are settings
//! (`settings.rs`).
//!
//! The first [`ServerBinding::terminate`](crate::ServerBinding::terminate)
//! records a [`Deadline`] in the server's state, requests the unbind,
//! signals every connection (`terminating`) and spawns one task that waits
//! until no connection is left or the deadline passes; at the deadline it
//! signals what is left (`forced`), waits for those connections to close,
//! and completes the outcome every [`HttpTermination`] waits for. Later
//! calls only return a future of that same outcome. Each connection acts on
//! its own signals (see `connection.rs`): idle, it closes; with a request
//! in the handler, it finishes it and sends the response with `Connection:
//! close`; a request that arrives completes with the termination response;
//! at the deadline, a handler still running is dropped and the
//! deadline-exceeded response is sent instead, if the socket takes it at
//! once.

use crate::binding::{Server, ServerBinding};
use proscenium::{AddTaskError, CoordinatedShutdown, Handle, JoinError, Phase, TaskError};
use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// When a termination's hard deadline passes (Akka's `Deadline`), as
/// [`ServerBinding::when_termination_signal_issued`] gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    /// `None`: beyond the clock's range (never).
    at: Option<Instant>,
}

impl Deadline {
    /// `after` from now.
    pub(crate) fn after(after: Duration) -> Deadline {
        Deadline {
            at: Instant::now().checked_add(after),
        }
    }

    /// The instant, or `None` for a deadline too far away for the clock
    /// (`terminate(Duration::MAX)`): it never passes.
    pub fn instant(&self) -> Option<Instant> {
        self.at
    }

    /// The time left until the deadline: zero once it passed,
    /// [`Duration::MAX`] if it never passes.
    pub fn time_left(&self) -> Duration {
        match self.at {
            Some(at) => at.saturating_duration_since(Instant::now()),
            None => Duration::MAX,
        }
    }

    /// Whether the deadline has passed.
    pub fn is_overdue(&self) -> bool {
        self.at.is_some_and(|at| Instant::now() >= at)
    }
}

/// The outcome of a termination: no connection is left (Akka's
/// `HttpTerminated`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpTerminated {
    /// Connections still open at the hard deadline (or when the
    /// coordinated shutdown's `service-stop` phase forced the close), and
    /// closed by force.
    pub forced_connections: usize,
    /// WebSockets open when the termination started (feature `websocket`;
    /// 0 without it): each was sent a Close frame with 1001 (going away)
    /// and closed when the client answered it, or at the hard deadline
    /// (then counted in `forced_connections` too).
    pub websockets: usize,
}

/// Why a termination could not be awaited to its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TerminateError {
    /// The actor system terminated first (its workers dropped the
    /// termination's task, and with it every connection), or it terminated
    /// while [`ServerBinding::when_terminated`] waited for a termination
    /// that was never started.
    #[error("the actor system terminated before the server")]
    SystemTerminated,
}

impl From<JoinError> for TerminateError {
    fn from(_: JoinError) -> TerminateError {
        // The futures waited on do not panic; cancelled they were.
        TerminateError::SystemTerminated
    }
}

/// The termination's part of the server's state (under its lock).
#[derive(Default)]
pub(crate) struct TerminationState {
    /// Set by the first `terminate`: the signal is issued.
    deadline: Option<Deadline>,
    /// The coordinated shutdown's `service-stop` asks to close what is left
    /// now, before the deadline.
    force_requested: bool,
    /// The drain is over: every connection closed, or the deadline passed
    /// (or the close was forced) and what was left was told to close.
    drain_over: bool,
    outcome: Option<Result<HttpTerminated, TerminateError>>,
    /// Every future waiting on any of the above (and the termination's
    /// task, for `force_requested`): woken on each change.
    wakers: Vec<Waker>,
}

impl TerminationState {
    /// `Ready(f(self))` if `f` has an answer, else registers the waker.
    fn poll<T>(&mut self, cx: &mut Context<'_>, f: impl Fn(&Self) -> Option<T>) -> Poll<T> {
        if let Some(t) = f(self) {
            return Poll::Ready(t);
        }
        if !self.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            self.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }

    fn take_wakers(&mut self) -> Vec<Waker> {
        std::mem::take(&mut self.wakers)
    }

    pub(crate) fn is_started(&self) -> bool {
        self.deadline.is_some()
    }
}

/// Starts the termination unless one was started; the future of its
/// outcome either way.
pub(crate) fn terminate(binding: &ServerBinding, hard_deadline: Duration) -> HttpTermination {
    let server = binding.server();
    let wakers = {
        let mut state = server.lock();
        if state.termination.is_started() {
            None
        } else {
            state.terminating = true;
            state.termination.deadline = Some(Deadline::after(hard_deadline));
            Some(state.termination.take_wakers())
        }
    };
    if let Some(wakers) = wakers {
        tracing::info!(
            local = %binding.local_addr(),
            ?hard_deadline,
            "terminating the HTTP server"
        );
        // Akka: "First, the server port is unbound and no new connections
        // will be accepted (same as invoking unbind()). Immediately the
        // ServerBinding#whenTerminationSignalIssued Future is completed."
        server.request_unbind();
        wakers.into_iter().for_each(Waker::wake);
        let websockets = server.metrics().open_websockets();
        // Registered connections see `terminating` from here on; new ones
        // are refused by `register`.
        for control in server.connections() {
            control.signal(false);
        }
        let mut deadline = binding.handle().sleep(hard_deadline);
        let server = Arc::clone(server);
        // Made before the task: a task dropped unpolled (the system has
        // terminated) still completes the outcome.
        let mut finish = Finish {
            server: Arc::clone(&server),
            outcome: None,
        };
        binding.handle().spawn_detached(async move {
            // Akka: "Next, all in flight requests will be handled. If a
            // request is “in-flight” (being handled by user code), it is
            // given hardDeadline time to complete."
            let drained = poll_fn(|cx| {
                if server.poll_drained(cx).is_ready() {
                    return Poll::Ready(true);
                }
                let forced = server
                    .lock()
                    .termination
                    .poll(cx, |t| t.force_requested.then_some(()));
                if forced.is_ready() {
                    return Poll::Ready(false);
                }
                Pin::new(&mut deadline).poll(cx).map(|()| false)
            })
            .await;
            // Akka: "Finally, all remaining alive connections are forcefully
            // terminated once the hardDeadline is exceeded."
            let mut forced_connections = 0;
            if !drained {
                for control in server.connections() {
                    control.signal(true);
                    forced_connections += 1;
                }
                if forced_connections > 0 {
                    tracing::warn!(
                        forced_connections,
                        "hard deadline of the HTTP server's termination reached: closing the \
                         connections left"
                    );
                }
            }
            server.update_termination(|t| t.drain_over = true);
            poll_fn(|cx| server.poll_drained(cx)).await;
            poll_fn(|cx| server.poll_unbound(cx)).await;
            finish.outcome = Some(HttpTerminated {
                forced_connections,
                websockets,
            });
            drop(finish);
        });
    }
    binding.when_terminated()
}

/// Completes the termination's outcome when its task ends, also when the
/// task is dropped unfinished (the system terminated): then with
/// [`TerminateError::SystemTerminated`].
struct Finish {
    server: Arc<Server>,
    outcome: Option<HttpTerminated>,
}

impl Drop for Finish {
    fn drop(&mut self) {
        let outcome = self.outcome.ok_or(TerminateError::SystemTerminated);
        if let Ok(terminated) = &outcome {
            tracing::info!(
                forced_connections = terminated.forced_connections,
                "the HTTP server has terminated"
            );
        }
        self.server.update_termination(|t| {
            t.drain_over = true;
            t.outcome = Some(outcome);
        });
    }
}

impl Server {
    /// Applies `f` to the termination's state and wakes its futures.
    pub(crate) fn update_termination(&self, f: impl FnOnce(&mut TerminationState)) {
        let wakers = {
            let mut state = self.lock();
            f(&mut state.termination);
            state.termination.take_wakers()
        };
        wakers.into_iter().for_each(Waker::wake);
    }
}

/// Closes what is left of a started termination now, as at its deadline.
pub(crate) fn force(server: &Server) {
    server.update_termination(|t| t.force_requested = true);
}

/// The future of [`ServerBinding::when_termination_signal_issued`]:
/// completes with the hard [`Deadline`] once
/// [`terminate`](ServerBinding::terminate) has been called.
#[must_use = "futures do nothing unless polled"]
pub struct TerminationSignal {
    pub(crate) server: Arc<Server>,
    pub(crate) handle: Handle,
}

impl fmt::Debug for TerminationSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TerminationSignal").finish_non_exhaustive()
    }
}

impl TerminationSignal {
    /// Blocks the calling thread until the signal is issued. Not on a
    /// worker (see proscenium's "Waiting without blocking"): `.await`
    /// there. Fails if the system terminates first.
    pub fn wait(self) -> Result<Deadline, TerminateError> {
        if let Some(deadline) = self.server.lock().termination.deadline {
            return Ok(deadline);
        }
        let handle = self.handle.clone();
        Ok(handle.spawn(self).wait()?)
    }
}

impl Future for TerminationSignal {
    type Output = Deadline;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Deadline> {
        self.server.lock().termination.poll(cx, |t| t.deadline)
    }
}

/// The future of [`ServerBinding::terminate`] and
/// [`ServerBinding::when_terminated`]: the termination's outcome, once no
/// connection is left and the port is closed.
#[must_use = "the termination happens anyway; await this to know it is over"]
pub struct HttpTermination {
    pub(crate) server: Arc<Server>,
    pub(crate) handle: Handle,
}

impl fmt::Debug for HttpTermination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpTermination").finish_non_exhaustive()
    }
}

impl HttpTermination {
    /// Blocks the calling thread until the termination is over. Not on a
    /// worker (see proscenium's "Waiting without blocking"): `.await` there.
    pub fn wait(self) -> Result<HttpTerminated, TerminateError> {
        if let Some(outcome) = self.server.lock().termination.outcome.clone() {
            return outcome;
        }
        let handle = self.handle.clone();
        handle.spawn(self).wait()?
    }

    /// The outcome, if the termination is over.
    pub fn try_outcome(&self) -> Option<Result<HttpTerminated, TerminateError>> {
        self.server.lock().termination.outcome.clone()
    }
}

impl Future for HttpTermination {
    type Output = Result<HttpTerminated, TerminateError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.server
            .lock()
            .termination
            .poll(cx, |t| t.outcome.clone())
    }
}

/// Completes once the drain is over: no connection left, or the deadline
/// passed (or the close was forced) and what was left was told to close.
async fn drain_over(server: &Server) {
    poll_fn(|cx| {
        server
            .lock()
            .termination
            .poll(cx, |t| t.drain_over.then_some(()))
    })
    .await
}

/// The three tasks of [`ServerBinding::add_to_coordinated_shutdown`].
pub(crate) fn add_to_coordinated_shutdown(
    binding: &ServerBinding,
    shutdown: &CoordinatedShutdown,
    hard_deadline: Duration,
) -> Result<(), AddTaskError> {
    let local = binding.local_addr();
    if let Some(timeout) = shutdown
        .config()
        .phase_timeout(Phase::SERVICE_REQUESTS_DONE)
    {
        if timeout < hard_deadline {
            tracing::warn!(
                %local,
                ?hard_deadline,
                phase_timeout = ?timeout,
                "the `service-requests-done` phase times out before the HTTP server's hard \
                 deadline: requests still in flight then are cut in `service-stop`; raise the \
                 phase's timeout to at least the hard deadline"
            );
        }
    }
    let unbind = binding.clone();
    shutdown.add_task(
        Phase::SERVICE_UNBIND,
        &format!("http-unbind-{local}"),
        move || {
            let unbound = unbind.unbind();
            async move {
                unbound.await;
                Ok(())
            }
        },
    )?;
    let drain = binding.clone();
    shutdown.add_task(
        Phase::SERVICE_REQUESTS_DONE,
        &format!("http-terminate-{local}"),
        move || {
            let termination = drain.terminate(hard_deadline);
            async move {
                drop(termination);
                drain_over(drain.server()).await;
                Ok(())
            }
        },
    )?;
    let stop = binding.clone();
    shutdown.add_task(
        Phase::SERVICE_STOP,
        &format!("http-shutdown-{local}"),
        move || {
            // Started here if `service-requests-done` did not run (a run from a
            // later phase, a disabled phase); the same termination otherwise.
            let terminated = stop.terminate(hard_deadline);
            // The drain had its phase: what is left now is closed now.
            force(stop.server());
            async move {
                terminated
                    .await
                    .map(|_| ())
                    .map_err(|e| TaskError::from_error(&e))
            }
        },
    )?;
    Ok(())
}
