//! What a termination is, beneath the binding: when its hard deadline
//! passes ([`Deadline`]), what it ends with ([`HttpTerminated`],
//! [`TerminateError`]), and its part of the server's state
//! (`TerminationState`, under the server's lock in `binding.rs`).
//! `terminate.rs`, above the binding, carries a termination out.

use proscenium::JoinError;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// When a termination's hard deadline passes (Akka's `Deadline`), as
/// [`ServerBinding::when_termination_signal_issued`](crate::ServerBinding::when_termination_signal_issued)
/// gives it.
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
    /// while
    /// [`ServerBinding::when_terminated`](crate::ServerBinding::when_terminated)
    /// waited for a termination that was never started.
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
    pub(crate) deadline: Option<Deadline>,
    /// The coordinated shutdown's `service-stop` asks to close what is left
    /// now, before the deadline.
    pub(crate) force_requested: bool,
    /// The drain is over: every connection closed, or the deadline passed
    /// (or the close was forced) and what was left was told to close.
    pub(crate) drain_over: bool,
    pub(crate) outcome: Option<Result<HttpTerminated, TerminateError>>,
    /// Every future waiting on any of the above (and the termination's
    /// task, for `force_requested`): woken on each change.
    pub(crate) wakers: Vec<Waker>,
}

impl TerminationState {
    /// `Ready(f(self))` if `f` has an answer, else registers the waker.
    pub(crate) fn poll<T>(
        &mut self,
        cx: &mut Context<'_>,
        f: impl Fn(&Self) -> Option<T>,
    ) -> Poll<T> {
        if let Some(t) = f(self) {
            return Poll::Ready(t);
        }
        if !self.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            self.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }

    pub(crate) fn take_wakers(&mut self) -> Vec<Waker> {
        std::mem::take(&mut self.wakers)
    }

    pub(crate) fn is_started(&self) -> bool {
        self.deadline.is_some()
    }
}
