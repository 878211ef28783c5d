//! Process signals as a trigger: SIGTERM and SIGINT run every registered
//! coordinated shutdown (after its process hooks).
//!
//! One dispatcher thread per process, started by the first registration,
//! listens with `signal-hook` and hands each signal to the coordinated
//! shutdowns registered at that moment (their hooks and runs start on a
//! thread of their own). A signal that finds none left to start (none
//! registered, or every one already started by a signal or otherwise: a
//! second Ctrl-C) gets the operating system's default action, so the
//! process still dies the ordinary way, even while a hook hangs.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, Weak};

use crate::run::Reason;
use crate::shutdown::{CoordinatedShutdown, Inner};

/// The coordinated shutdowns that signals run.
struct Registry {
    entries: Mutex<Vec<(u64, Weak<Inner>)>>,
    next_id: AtomicU64,
}

static REGISTRY: OnceLock<Registry> = OnceLock::new();
/// Whether the dispatcher thread runs (`Err` if it could not start).
static DISPATCHER: OnceLock<Result<(), String>> = OnceLock::new();

fn registry() -> &'static Registry {
    REGISTRY.get_or_init(|| Registry {
        entries: Mutex::new(Vec::new()),
        next_id: AtomicU64::new(1),
    })
}

fn entries() -> MutexGuard<'static, Vec<(u64, Weak<Inner>)>> {
    // Only pushes, retains and clones run under this lock.
    registry().entries.lock().unwrap_or_else(|e| e.into_inner())
}

/// Keeps a coordinated shutdown registered for SIGTERM and SIGINT; dropping
/// it unregisters (the engine drops it once its system has terminated).
#[must_use = "dropping the registration unregisters at once"]
pub struct SignalRegistration {
    id: u64,
}

impl fmt::Debug for SignalRegistration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignalRegistration")
            .field("id", &self.id)
            .finish()
    }
}

impl Drop for SignalRegistration {
    fn drop(&mut self) {
        entries().retain(|(id, _)| *id != self.id);
    }
}

impl SignalRegistration {
    /// How many other coordinated shutdowns are registered for signals in
    /// this process right now (whose systems are still alive). A signal
    /// runs every one of them, this one included.
    pub fn others(&self) -> usize {
        entries()
            .iter()
            .filter(|(id, weak)| *id != self.id && weak.strong_count() > 0)
            .count()
    }
}

/// Why signals could not be handled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot handle SIGTERM and SIGINT: {0}")]
pub struct SignalError(String);

impl CoordinatedShutdown {
    /// Runs this coordinated shutdown on SIGTERM and SIGINT (with
    /// [`Reason::Signal`]), after its process hooks, for as long as the
    /// returned registration is kept. The engine calls this when
    /// `run-by-signals` is on.
    ///
    /// A signal that arrives when every registered run has already started
    /// (a second Ctrl-C), or when nothing is registered, gets the default
    /// action: the process is terminated by the signal.
    pub fn register_signals(&self) -> Result<SignalRegistration, SignalError> {
        start_dispatcher()?;
        // Relaxed: only uniqueness matters.
        let id = registry().next_id.fetch_add(1, Ordering::Relaxed);
        entries().push((id, self.weak()));
        Ok(SignalRegistration { id })
    }
}

#[cfg(unix)]
fn start_dispatcher() -> Result<(), SignalError> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    use signal_hook::iterator::Signals;

    let started = DISPATCHER.get_or_init(|| {
        let mut signals = Signals::new([SIGTERM, SIGINT]).map_err(|e| e.to_string())?;
        std::thread::Builder::new()
            .name("coordinated-shutdown-signals".to_owned())
            .spawn(move || {
                for signal in signals.forever() {
                    dispatch(signal);
                }
            })
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
    started.clone().map_err(SignalError)
}

#[cfg(not(unix))]
fn start_dispatcher() -> Result<(), SignalError> {
    Err(SignalError(
        "process signals are only handled on Unix".to_owned(),
    ))
}

/// Starts every registered shutdown that no signal has started yet: on a
/// thread of its own, first all their process hooks, then their runs, so a
/// slow or stuck hook never keeps this thread from the next signal. With
/// none left (a second signal, or nothing registered), the default action.
#[cfg(unix)]
fn dispatch(signal: i32) {
    let live: Vec<CoordinatedShutdown> = entries()
        .iter()
        .filter_map(|(_, weak)| CoordinatedShutdown::from_weak(weak))
        .filter(|cs| cs.claim_signal())
        .collect();
    if live.is_empty() {
        tracing::warn!(
            signal,
            "no coordinated shutdown left to run: default action"
        );
        if let Err(e) = signal_hook::low_level::emulate_default_handler(signal) {
            tracing::error!(signal, error = %e, "could not apply the signal's default action");
        }
        return;
    }
    tracing::info!(
        signal,
        runs = live.len(),
        "signal: running coordinated shutdown"
    );
    let start = move || {
        for cs in &live {
            cs.run_process_hooks();
        }
        for cs in &live {
            // The run goes on by itself; its outcome is logged by its driver.
            drop(cs.run(Reason::Signal(signal)));
        }
    };
    let spawned = std::thread::Builder::new()
        .name("coordinated-shutdown-hooks".to_owned())
        .spawn(start);
    if let Err(e) = spawned {
        tracing::error!(signal, error = %e, "no thread for the shutdown hooks; default action");
        if let Err(e) = signal_hook::low_level::emulate_default_handler(signal) {
            tracing::error!(signal, error = %e, "could not apply the signal's default action");
        }
    }
}
