//! [`TestSystem`]: an [`ActorSystem`] preset for tests that checks its own
//! clean termination when dropped.

use std::fmt;
use std::ops::Deref;
use std::time::Duration;

use proscenium_shutdown::ShutdownConfig;

use crate::error::SystemError;
use crate::runtime::system::{ActorSystem, SystemBuilder, TerminationReport};

use super::PATIENCE;

/// An [`ActorSystem`] for tests: 2 unpinned workers (tests share cores
/// with each other), no SIGTERM/SIGINT handlers (a test process's signals
/// are not the system's), the dead-letter log off (tests that care read
/// dead letters from an [`EventProbe`](super::EventProbe)). Derefs to the
/// [`ActorSystem`].
///
/// Dropping it terminates the system, waits for it (up to
/// [`PATIENCE`]) and asserts that the termination was clean (the workers
/// drained, no runnable and no timer left), with a message that lists what
/// was left and how many actor cells are still allocated; unless the thread
/// is already panicking (a failed assertion of the test itself), in which
/// case it only starts the termination. Locals declared after the
/// `TestSystem` (actor refs, probes) are dropped before it.
///
/// ```
/// use proscenium::testkit::TestSystem;
///
/// let system = TestSystem::new();
/// assert_eq!(system.live_cells(), 3); // the guardians
/// let report = system.shutdown(); // or just drop it
/// assert!(report.clean());
///
/// // Another preset: start from `TestSystem::builder()`.
/// let system = TestSystem::build(TestSystem::builder().workers(1).throughput(1))?;
/// # drop(system);
/// # Ok::<(), proscenium::SystemError>(())
/// ```
pub struct TestSystem {
    /// `None` once [`shutdown`](TestSystem::shutdown) took it.
    system: Option<ActorSystem>,
}

impl TestSystem {
    /// The preset builder: name `test`, 2 unpinned workers, signals off
    /// (`run_by_signals(false)` in the coordinated shutdown; a
    /// [`SystemBuilder::coordinated_shutdown`] set later replaces that
    /// whole config, so keep `run_by_signals(false)` in yours), the
    /// dead-letter log off.
    pub fn builder() -> SystemBuilder {
        ActorSystem::builder()
            .name("test")
            .workers(2)
            .pin_workers(false)
            .dead_letter_logging(0, Duration::from_secs(1))
            .coordinated_shutdown(ShutdownConfig::default().run_by_signals(false))
    }

    /// A system from the preset.
    ///
    /// # Panics
    ///
    /// If it does not start (a test cannot go on without it).
    #[track_caller]
    pub fn new() -> TestSystem {
        match TestSystem::build(TestSystem::builder()) {
            Ok(system) => system,
            Err(e) => panic!("the test system did not start: {e}"),
        }
    }

    /// A system from `builder` (start from [`builder`](Self::builder)).
    pub fn build(builder: SystemBuilder) -> Result<TestSystem, SystemError> {
        Ok(TestSystem {
            system: Some(builder.build()?),
        })
    }

    /// The system itself (a handle: clones keep it alive).
    pub fn system(&self) -> &ActorSystem {
        self.system
            .as_ref()
            .expect("only `shutdown` takes the system, and it consumes self")
    }

    /// Terminates the system now, waits and asserts as the drop does, and
    /// returns the report (for tests that read it further).
    ///
    /// # Panics
    ///
    /// If the system does not terminate within [`PATIENCE`], or its
    /// termination was not clean.
    #[track_caller]
    pub fn shutdown(mut self) -> TerminationReport {
        let system = self
            .system
            .take()
            .expect("only `shutdown` takes the system, and it consumes self");
        terminate_and_check(system)
    }
}

impl Default for TestSystem {
    fn default() -> TestSystem {
        TestSystem::new()
    }
}

#[track_caller]
fn terminate_and_check(system: ActorSystem) -> TerminationReport {
    let Some(report) = system.terminate().wait_timeout(PATIENCE) else {
        panic!(
            "the test system did not terminate within {PATIENCE:?} \
             ({} actor cells still allocated)",
            system.live_cells()
        );
    };
    if !report.clean() {
        let left = match &report.quiesce {
            Some(q) => format!(
                "drained: {}, runnables left: {}, timers pending: {}, workers joined: {}, \
                 panics: {}",
                q.drained, q.runnables_left, q.timers_pending, q.workers_joined, q.panics
            ),
            None => "no quiesce report (the scheduler was already gone)".to_owned(),
        };
        panic!(
            "the test system's termination left work behind: {left}; actor cells still \
             allocated: {} (refs held by the test or by event-stream callbacks count); \
             dead letters: {}",
            system.live_cells(),
            report.dead_letters
        );
    }
    report
}

impl Drop for TestSystem {
    fn drop(&mut self) {
        let Some(system) = self.system.take() else {
            return;
        };
        if std::thread::panicking() {
            // The test already failed: start the termination, assert
            // nothing, and do not wait on what may be the cause.
            drop(system.terminate());
            return;
        }
        terminate_and_check(system);
    }
}

impl Deref for TestSystem {
    type Target = ActorSystem;

    fn deref(&self) -> &ActorSystem {
        self.system()
    }
}

impl fmt::Debug for TestSystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("TestSystem").field(&self.system).finish()
    }
}
