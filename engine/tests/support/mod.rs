//! Helpers shared by the engine's behaviour tests: a system builder for
//! tests, probes (channels the tests block on, with a generous timeout so a
//! hang fails instead of blocking CI), and a checked shutdown.
#![allow(dead_code, unreachable_pub)]

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use proscenium::{ActorSystem, DeadLetter, TerminationReport};

/// How long a probe waits before the test fails: long enough never to fire
/// on a healthy run, short enough that a lost message fails the test.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A 2-worker, unpinned system with the dead-letter log off.
pub fn system() -> ActorSystem {
    ActorSystem::builder()
        .name("test")
        .workers(2)
        .pin_workers(false)
        .dead_letter_logging(0, Duration::from_secs(1))
        .build()
        .expect("the test system starts")
}

/// Terminates `system`, waits, and checks that the workers drained and
/// every actor cell was freed (references held by the test are the
/// caller's to drop first).
pub fn shutdown(system: ActorSystem) -> TerminationReport {
    let report = system
        .terminate()
        .wait_timeout(PATIENCE)
        .expect("the system terminates in time");
    assert!(report.clean(), "termination left work behind: {report:?}");
    report
}

/// A channel a test blocks on.
pub struct Probe<T> {
    tx: Sender<T>,
    rx: Receiver<T>,
}

impl<T: Send + 'static> Probe<T> {
    pub fn new() -> Probe<T> {
        let (tx, rx) = mpsc::channel();
        Probe { tx, rx }
    }

    /// The sending end, for actors and callbacks.
    pub fn tx(&self) -> Sender<T> {
        self.tx.clone()
    }

    /// The next item; fails the test after [`PATIENCE`].
    #[track_caller]
    pub fn next(&self) -> T {
        match self.rx.recv_timeout(PATIENCE) {
            Ok(v) => v,
            Err(RecvTimeoutError::Timeout) => panic!("probe: nothing arrived within {PATIENCE:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("probe: every sender is gone"),
        }
    }

    /// The next `n` items.
    #[track_caller]
    pub fn take(&self, n: usize) -> Vec<T> {
        (0..n).map(|_| self.next()).collect()
    }

    /// What has arrived so far, without waiting.
    pub fn drain_now(&self) -> Vec<T> {
        self.rx.try_iter().collect()
    }
}

impl<T: Send + PartialEq + std::fmt::Debug + 'static> Probe<T> {
    /// Reads items until one equals `item`; returns the items before it.
    #[track_caller]
    pub fn until(&self, item: impl PartialEq<T> + std::fmt::Debug) -> Vec<T> {
        let mut before = Vec::new();
        loop {
            let next = self.next();
            if item == next {
                return before;
            }
            before.push(next);
        }
    }
}

/// Subscribes a probe to dead letters, keeping `f` of each.
pub fn dead_letter_probe<T: Send + 'static>(
    system: &ActorSystem,
    f: impl Fn(&DeadLetter) -> T + Send + Sync + 'static,
) -> Probe<T> {
    let probe = Probe::new();
    let tx = std::sync::Mutex::new(probe.tx());
    system.event_stream().subscribe(move |d: &DeadLetter| {
        let _ = tx.lock().expect("probe lock").send(f(d));
    });
    probe
}

pub mod actors;
pub mod scripted;

/// The `tracing` output of this test binary, captured by a global
/// subscriber installed on first use (actors log on worker threads, so a
/// thread-local subscriber would miss them).
pub struct Logs {
    text: std::sync::Mutex<String>,
    grew: std::sync::Condvar,
}

impl Logs {
    /// Installs the capturing subscriber once per test binary.
    pub fn capture() -> &'static Logs {
        static LOGS: std::sync::OnceLock<&'static Logs> = std::sync::OnceLock::new();
        LOGS.get_or_init(|| {
            let logs: &'static Logs = Box::leak(Box::new(Logs {
                text: std::sync::Mutex::new(String::new()),
                grew: std::sync::Condvar::new(),
            }));
            let subscriber = tracing_subscriber::fmt()
                .with_ansi(false)
                .with_max_level(tracing::Level::DEBUG)
                .with_writer(move || LogWriter(logs))
                .finish();
            tracing::subscriber::set_global_default(subscriber)
                .expect("no other global subscriber in this test binary");
            logs
        })
    }

    /// Waits for a line that contains every one of `parts`, and returns it;
    /// fails the test after [`PATIENCE`].
    #[track_caller]
    pub fn wait_for(&self, parts: &[&str]) -> String {
        let deadline = std::time::Instant::now() + PATIENCE;
        let mut text = self.text.lock().expect("log lock");
        loop {
            if let Some(line) = text.lines().find(|l| parts.iter().all(|p| l.contains(p))) {
                return line.to_owned();
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            assert!(!left.is_zero(), "no log line with {parts:?} in:\n{text}");
            text = self.grew.wait_timeout(text, left).expect("log lock").0;
        }
    }

    /// The lines logged so far that contain every one of `parts`.
    pub fn lines_with(&self, parts: &[&str]) -> Vec<String> {
        let text = self.text.lock().expect("log lock");
        text.lines()
            .filter(|l| parts.iter().all(|p| l.contains(p)))
            .map(str::to_owned)
            .collect()
    }
}

struct LogWriter(&'static Logs);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .text
            .lock()
            .expect("log lock")
            .push_str(&String::from_utf8_lossy(buf));
        self.0.grew.notify_all();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
