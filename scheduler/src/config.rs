//! Configuration: the [`Builder`] and its [`BuildError`].

use crate::idle::MAX_WORKERS;
use crate::scheduler::Scheduler;
use std::io;

/// The default [`Builder::throughput`]: how many units of work (actor
/// messages) one run may handle before it yields.
///
/// Chosen by measurement (`benches/benches/scheduler.rs`, group
/// `scheduler/throughput`, figures in `BENCHMARKS.md`): on a 2-core machine
/// 64 was the fastest budget while the cores were contended and within 5 %
/// of the best when they were not; a budget of 1 cost up to 2.5×. The
/// fairness cost of a larger budget grows linearly (a runnable queued behind
/// k busy ones waits up to k × budget messages), so the smallest budget that
/// gets the throughput is the one to take.
pub const DEFAULT_THROUGHPUT: u32 = 64;

/// The smallest [`Builder::stack_size`] accepted: 64 KiB. Below that a
/// worker could not run the scheduler's own frames plus a handler's.
pub const MIN_STACK_SIZE: usize = 64 * 1024;

/// Configures and starts a [`Scheduler`].
///
/// ```
/// let scheduler = proscenium_scheduler::Scheduler::builder()
///     .workers(2)
///     .pin_workers(false)
///     .throughput(32)
///     .build()
///     .expect("valid configuration");
/// assert_eq!(scheduler.handle().num_workers(), 2);
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    pub(crate) workers: Option<usize>,
    pub(crate) pin_workers: bool,
    pub(crate) throughput: u32,
    pub(crate) thread_name: String,
    /// `None`: std's default for spawned threads.
    pub(crate) stack_size: Option<usize>,
}

impl Default for Builder {
    fn default() -> Builder {
        Builder::new()
    }
}

impl Builder {
    /// The defaults: one worker per available core, pinned, a throughput of
    /// [`DEFAULT_THROUGHPUT`].
    pub fn new() -> Builder {
        Builder {
            workers: None,
            pin_workers: true,
            throughput: DEFAULT_THROUGHPUT,
            thread_name: "proscenium-worker".to_owned(),
            stack_size: None,
        }
    }

    /// The number of worker threads (`scheduler.workers`). Default: the
    /// number of available cores.
    pub fn workers(mut self, workers: usize) -> Builder {
        self.workers = Some(workers);
        self
    }

    /// Whether to pin worker `i` to core `i` (`scheduler.pin-workers`).
    /// Default: `true`. Workers that cannot be pinned run unpinned, and the
    /// scheduler says so once (see [`Scheduler::pinning`]).
    pub fn pin_workers(mut self, pin: bool) -> Builder {
        self.pin_workers = pin;
        self
    }

    /// The most units of work one run may do before it yields
    /// (`scheduler.throughput`). Default: [`DEFAULT_THROUGHPUT`].
    pub fn throughput(mut self, throughput: u32) -> Builder {
        self.throughput = throughput;
        self
    }

    /// The stack size of each worker thread, in bytes
    /// (`scheduler.stack-size`). Default: std's default for spawned
    /// threads, 2 MiB (or `RUST_MIN_STACK` if set). At least
    /// [`MIN_STACK_SIZE`]; [`build`](Self::build) refuses less with
    /// [`BuildError::StackSizeTooSmall`].
    ///
    /// Everything a runnable does runs on this stack. In the actor engine,
    /// a message is moved by value through a few frames on the way into a
    /// mailbox and out to the handler, so a message of a few hundred KiB
    /// (say a large array inside the message type) can overflow the default
    /// stack, which aborts the process. Box large payloads, or raise this.
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.stack_size = Some(bytes);
        self
    }

    /// The prefix of worker thread names (`<prefix>-<index>`; the timer
    /// thread is `<prefix>-timer`). It must not contain a NUL byte
    /// ([`BuildError::InvalidThreadName`]).
    pub fn thread_name(mut self, name: impl Into<String>) -> Builder {
        self.thread_name = name.into();
        self
    }

    /// Validates the configuration and starts the worker and timer threads.
    /// Returns once every worker has started (and reported its pinning).
    pub fn build(self) -> Result<Scheduler, BuildError> {
        // std's thread builder panics on such a name.
        if self.thread_name.contains('\0') {
            return Err(BuildError::InvalidThreadName {
                name: self.thread_name,
            });
        }
        let workers = match self.workers {
            Some(n) => n,
            None => std::thread::available_parallelism().map_or(1, usize::from),
        };
        if workers == 0 {
            return Err(BuildError::ZeroWorkers);
        }
        if workers > MAX_WORKERS {
            return Err(BuildError::TooManyWorkers {
                requested: workers,
                max: MAX_WORKERS,
            });
        }
        if self.throughput == 0 {
            return Err(BuildError::ZeroThroughput);
        }
        if let Some(requested) = self.stack_size.filter(|&n| n < MIN_STACK_SIZE) {
            return Err(BuildError::StackSizeTooSmall {
                requested,
                min: MIN_STACK_SIZE,
            });
        }
        Scheduler::start(self, workers)
    }
}

/// Why a [`Builder`] could not start a scheduler.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// `scheduler.workers` was 0.
    #[error("scheduler.workers must be at least 1")]
    ZeroWorkers,
    /// `scheduler.workers` was above what the idle accounting can count.
    #[error("scheduler.workers must be at most {max}, got {requested}")]
    TooManyWorkers {
        /// The configured value.
        requested: usize,
        /// The largest accepted value.
        max: usize,
    },
    /// `scheduler.throughput` was 0.
    #[error("scheduler.throughput must be at least 1")]
    ZeroThroughput,
    /// `scheduler.stack-size` was below [`MIN_STACK_SIZE`].
    #[error("scheduler.stack-size must be at least {min} bytes, got {requested}")]
    StackSizeTooSmall {
        /// The configured value, in bytes.
        requested: usize,
        /// The smallest accepted value, in bytes.
        min: usize,
    },
    /// The thread-name prefix holds a NUL byte, which threads cannot be
    /// named with.
    #[error("scheduler thread name {name:?} contains a NUL byte")]
    InvalidThreadName {
        /// The configured prefix.
        name: String,
    },
    /// The operating system refused to start a thread.
    #[error("failed to spawn scheduler thread {name}")]
    Spawn {
        /// The thread's name.
        name: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}
