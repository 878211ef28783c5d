//! Graceful termination (Akka HTTP's `ServerBinding.terminate`):
//! [`ServerBinding::terminate`](crate::ServerBinding::terminate), the
//! termination's task, the futures that observe it
//! ([`TerminationSignal`], [`HttpTermination`]), and the
//! coordinated-shutdown tasks. On top of the crate's layers, above
//! `binding.rs` (which does not import it): what a termination is and its
//! state are `termination.rs`'s, the responses it sends are settings
//! (`settings.rs`).
//!
//! The first [`ServerBinding::terminate`](crate::ServerBinding::terminate)
//! records a [`Deadline`] in the server's state, requests the unbind,
//! signals every connection (`terminating`) and spawns one task that waits
//! until no connection is left or the deadline passes; at the deadline it
//! signals what is left (`forced`), waits for those connections to close,
//! and completes the outcome every [`HttpTermination`] waits for. Later
//! calls only return a future of that same outcome. Each connection acts on
//! its own signals (`connection.rs`'s `Control`, read by each protocol in
//! `protocol/`): idle, it closes; with a request
//! in the handler, it finishes it and sends the response with `Connection:
//! close`; a request that arrives completes with the termination response;
//! at the deadline, a handler still running is dropped and the
//! deadline-exceeded response is sent instead, if the socket takes it at
//! once.

use crate::binding::{Server, ServerBinding};
use crate::termination::{Deadline, HttpTerminated, TerminateError, TerminationState};
use proscenium::{AddTaskError, CoordinatedShutdown, Handle, Phase, TaskError};
use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

impl ServerBinding {
    /// Terminates the server gracefully (Akka HTTP's
    /// `ServerBinding.terminate`):
    ///
    /// 1. unbinds (no new connection is accepted) and completes
    ///    [`when_termination_signal_issued`](Self::when_termination_signal_issued)
    ///    at once, with the deadline;
    /// 2. closes connections with no request in flight at once;
    /// 3. lets requests in the handler finish until `hard_deadline` and
    ///    sends their responses with `Connection: close`, then closes;
    /// 4. answers a request that arrives meanwhile on a live connection
    ///    with the [termination response](crate::ServerSettings::termination_response)
    ///    (default `503 Service Unavailable`, empty body, `Connection:
    ///    close`) without calling the handler, then closes;
    /// 5. at the deadline, answers a request whose handler is still running
    ///    with the [deadline-exceeded
    ///    response](crate::ServerSettings::termination_deadline_exceeded_response)
    ///    (if the socket takes it at once), cuts a response being written,
    ///    and closes every connection left;
    /// 6. completes [`when_terminated`](Self::when_terminated) with an
    ///    [`HttpTerminated`](crate::HttpTerminated) once no connection is
    ///    left and the port is closed.
    ///
    /// The termination runs on the system's workers whether the returned
    /// future is awaited or not. Idempotent: a later call (with any
    /// deadline) starts nothing and returns a future of the same outcome.
    pub fn terminate(&self, hard_deadline: Duration) -> HttpTermination {
        start(self, hard_deadline)
    }

    /// Completes with the hard deadline as soon as
    /// [`terminate`](Self::terminate) has been called (at once if it has
    /// been): the signal for other parts of the application that the
    /// server is shutting down (Akka's `whenTerminationSignalIssued`).
    pub fn when_termination_signal_issued(&self) -> TerminationSignal {
        TerminationSignal {
            server: Arc::clone(self.server()),
            handle: self.handle().clone(),
        }
    }

    /// Completes when the termination is over, whichever call of
    /// [`terminate`](Self::terminate) started it (Akka's `whenTerminated`):
    /// no connection is left to this server. Pending until a termination
    /// is started; its [`wait`](HttpTermination::wait) fails with
    /// [`TerminateError::SystemTerminated`] if the system terminates
    /// first.
    pub fn when_terminated(&self) -> HttpTermination {
        HttpTermination {
            server: Arc::clone(self.server()),
            handle: self.handle().clone(),
        }
    }

    /// Adds the server's shutdown to `shutdown`'s phases, as Akka's
    /// `addToCoordinatedShutdown`:
    ///
    /// * `service-unbind`: [`unbind`](Self::unbind), and wait until the port
    ///   is closed;
    /// * `service-requests-done`: [`terminate(hard_deadline)`](Self::terminate)
    ///   and wait until the drain is over (every connection closed, or the
    ///   hard deadline passed);
    /// * `service-stop`: close by force what is still open (a drain that
    ///   its phase's timeout cut short), and wait for
    ///   [`when_terminated`](Self::when_terminated).
    ///
    /// The `service-requests-done` phase should be given a timeout of at
    /// least `hard_deadline` (the default phase timeout is 5 s), or the
    /// drain is cut at that timeout; a warning is logged here if it is
    /// not. Fails if the run has started (the tasks would not run).
    ///
    /// ```
    /// use http::{Request, Response};
    /// use proscenium::{ActorSystem, Reason, ShutdownConfig};
    /// use proscenium_http::{Body, Http};
    /// use std::time::Duration;
    ///
    /// let system = ActorSystem::builder().workers(2).pin_workers(false)
    ///     .coordinated_shutdown(ShutdownConfig::default().run_by_signals(false))
    ///     .build()?;
    /// let binding = Http::bind(&system, "127.0.0.1:0".parse()?, |_: Request<Body>| async {
    ///     Response::new(Body::from("hello"))
    /// })?;
    /// binding.add_to_coordinated_shutdown(system.coordinated_shutdown(), Duration::from_secs(3))?;
    ///
    /// // Later (or on SIGTERM, or through `system.terminate()`):
    /// system.coordinated_shutdown().run(Reason::User("deploy".into())).wait()?;
    /// assert!(binding.when_terminated().wait().is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn add_to_coordinated_shutdown(
        &self,
        shutdown: &CoordinatedShutdown,
        hard_deadline: Duration,
    ) -> Result<(), AddTaskError> {
        add_tasks(self, shutdown, hard_deadline)
    }
}

/// Starts the termination unless one was started; the future of its
/// outcome either way.
fn start(binding: &ServerBinding, hard_deadline: Duration) -> HttpTermination {
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
fn add_tasks(
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
