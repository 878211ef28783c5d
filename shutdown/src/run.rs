//! The outcome side of a run: [`Reason`], [`TaskError`], [`ShutdownError`],
//! and [`ShutdownRun`], the shared future every caller of `run` gets.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// Why the shutdown runs. The first run's reason is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reason {
    /// No reason given (Akka's `UnknownReason`).
    Unknown,
    /// `ActorSystem::terminate` started it.
    ActorSystemTerminate,
    /// A process signal (SIGTERM, SIGINT) started it.
    Signal(i32),
    /// The application's own reason.
    User(Arc<str>),
}

/// Why a task failed: its message.
///
/// ```
/// use proscenium_shutdown::TaskError;
/// let e: TaskError = "the cache did not flush".into();
/// assert_eq!(e.to_string(), "the cache did not flush");
/// let io = std::io::Error::new(std::io::ErrorKind::Other, "disk full");
/// assert_eq!(TaskError::from_error(&io).to_string(), "disk full");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskError(String);

impl TaskError {
    /// From any error, by its message.
    pub fn from_error(error: &dyn std::error::Error) -> TaskError {
        TaskError(error.to_string())
    }
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TaskError {}

impl From<&str> for TaskError {
    fn from(message: &str) -> TaskError {
        TaskError(message.to_owned())
    }
}

impl From<String> for TaskError {
    fn from(message: String) -> TaskError {
        TaskError(message)
    }
}

/// How a task ended, when it did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskFailure {
    /// Its future returned an error.
    Failed(String),
    /// It panicked (the message, when the payload was a string).
    Panicked(String),
    /// Its phase timed out before it finished.
    TimedOut(Duration),
    /// Its future was dropped before it completed: nothing held its waker
    /// any more (so nothing could ever wake it), or the scheduler shut down.
    Dropped,
}

impl fmt::Display for TaskFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskFailure::Failed(m) => write!(f, "failed: {m}"),
            TaskFailure::Panicked(m) => write!(f, "panicked: {m}"),
            TaskFailure::TimedOut(d) => write!(f, "timed out after {d:?}"),
            TaskFailure::Dropped => f.write_str("dropped before it completed"),
        }
    }
}

/// Why a run did not complete every phase.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShutdownError {
    /// A task of a phase with `recover = off` failed or timed out: the rest
    /// of the run was aborted.
    #[error("coordinated shutdown aborted in phase `{phase}`: task `{task}` {cause}")]
    Aborted {
        /// The phase.
        phase: String,
        /// The task.
        task: String,
        /// How it ended.
        cause: TaskFailure,
    },
    /// The scheduler the run was on shut down before the run completed.
    #[error("the scheduler shut down during coordinated shutdown (in phase `{phase}`)")]
    SchedulerClosed {
        /// The phase that was running (or next).
        phase: String,
    },
}

struct Outcome {
    result: Option<Result<(), ShutdownError>>,
    wakers: Vec<Waker>,
}

/// Where a run's outcome is kept; shared by every [`ShutdownRun`].
pub(crate) struct RunSlot {
    outcome: Mutex<Outcome>,
    ready: Condvar,
}

impl RunSlot {
    pub(crate) fn new() -> Arc<RunSlot> {
        Arc::new(RunSlot {
            outcome: Mutex::new(Outcome {
                result: None,
                wakers: Vec::new(),
            }),
            ready: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Outcome> {
        // No code that can panic runs under this lock.
        self.outcome.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the outcome; the first one wins. Returns whether this was it.
    pub(crate) fn complete(&self, result: Result<(), ShutdownError>) -> bool {
        let mut outcome = self.lock();
        if outcome.result.is_some() {
            return false;
        }
        outcome.result = Some(result);
        let wakers = std::mem::take(&mut outcome.wakers);
        drop(outcome);
        self.ready.notify_all();
        for w in wakers {
            w.wake();
        }
        true
    }

    pub(crate) fn is_complete(&self) -> bool {
        self.lock().result.is_some()
    }
}

/// The run of a coordinated shutdown: every call of `run` gets a clone of
/// the same one. A [`Future`] for any executor, or [`wait`](Self::wait) on
/// a plain thread (not on a scheduler worker: it would block it).
#[derive(Clone)]
#[must_use = "a run's outcome is only known if awaited or waited for"]
pub struct ShutdownRun {
    pub(crate) slot: Arc<RunSlot>,
}

impl fmt::Debug for ShutdownRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShutdownRun")
            .field("complete", &self.slot.is_complete())
            .finish()
    }
}

impl ShutdownRun {
    /// Blocks until the run has completed.
    ///
    /// # Panics
    ///
    /// On a scheduler worker thread (inside an actor's handler or a task),
    /// where it would block the worker the run needs: `.await` it there.
    #[track_caller]
    pub fn wait(&self) -> Result<(), ShutdownError> {
        proscenium_scheduler::assert_not_on_worker("ShutdownRun::wait");
        let mut outcome = self.slot.lock();
        loop {
            if let Some(r) = &outcome.result {
                return r.clone();
            }
            outcome = self
                .slot
                .ready
                .wait(outcome)
                .unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Blocks until the run has completed or `timeout` has passed (`None`).
    ///
    /// # Panics
    ///
    /// On a scheduler worker thread, as [`wait`](Self::wait).
    #[track_caller]
    pub fn wait_timeout(&self, timeout: Duration) -> Option<Result<(), ShutdownError>> {
        proscenium_scheduler::assert_not_on_worker("ShutdownRun::wait_timeout");
        let deadline = Instant::now().checked_add(timeout);
        let mut outcome = self.slot.lock();
        loop {
            if let Some(r) = &outcome.result {
                return Some(r.clone());
            }
            let left = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => Duration::MAX,
            };
            if left.is_zero() {
                return None;
            }
            outcome = self
                .slot
                .ready
                .wait_timeout(outcome, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Whether the run has completed.
    pub fn is_complete(&self) -> bool {
        self.slot.is_complete()
    }
}

impl Future for ShutdownRun {
    type Output = Result<(), ShutdownError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut outcome = self.slot.lock();
        if let Some(r) = &outcome.result {
            return Poll::Ready(r.clone());
        }
        if !outcome.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            outcome.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}
