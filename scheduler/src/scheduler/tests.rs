//! A submit from outside the workers that a quiesce overtakes: admitted
//! (the scheduler was open), then held before its push while the quiesce
//! runs (docs/decisions/0026-loom-issue-28.md, "a submit can be accepted
//! after the quiesce's last drain"). The loom model of the same race is
//! `loom-tests/tests/scheduler_close.rs`; this one holds the submitter at
//! the one point the race needs, so it does not depend on luck.
#![allow(clippy::unwrap_used)] // tests may unwrap

use super::Scheduler;
use crate::runnable::{Budget, RunOutcome, Runnable};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

/// A failsafe bound on waits that should end: only stops a hung test.
const FAILSAFE: Duration = Duration::from_secs(60);

/// How long the test gives a quiesce that must not end, while a submit it
/// has to wait for is held, to end anyway.
const MUST_NOT_END: Duration = Duration::from_millis(300);

thread_local! {
    /// What an external submit on this thread runs once it is admitted and
    /// before it pushes (set by `pause_next_submit`, taken by the submit).
    static PAUSE: RefCell<Option<Box<dyn FnOnce()>>> = const { RefCell::new(None) };
}

/// Called by an external submit once admitted, before its push.
pub(super) fn pause_if_asked() {
    if let Some(pause) = PAUSE.with(|p| p.borrow_mut().take()) {
        pause();
    }
}

/// The next external submit on this thread runs `pause` once admitted,
/// before it pushes.
fn pause_next_submit(pause: impl FnOnce() + 'static) {
    PAUSE.with(|p| *p.borrow_mut() = Some(Box::new(pause)));
}

/// Records that it ran.
struct Flag(AtomicBool);

impl Runnable for Flag {
    fn run(self: Arc<Self>, _budget: &mut Budget) -> RunOutcome {
        // Relaxed: read after the quiesce joined the worker that ran this.
        self.0.store(true, Ordering::Relaxed);
        RunOutcome::Done
    }
}

/// A submit admitted before a quiesce, held before its push until the
/// quiesce closed the scheduler (and, before the fix, had time to end):
/// the quiesce does not end while the submit is under way, and the
/// accepted runnable runs or is counted in `runnables_left`.
fn submit_overtaken_by_a_quiesce(urgent: bool) {
    let scheduler = Scheduler::builder()
        .workers(1)
        .pin_workers(false)
        .build()
        .unwrap();
    let handle = scheduler.handle().clone();
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let (admitted_tx, admitted_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let submitter = {
        let handle = handle.clone();
        let job: Arc<dyn Runnable> = flag.clone();
        thread::spawn(move || {
            pause_next_submit(move || {
                admitted_tx.send(()).unwrap();
                go_rx.recv_timeout(FAILSAFE).unwrap();
            });
            let submitted = if urgent {
                handle.submit_urgent(job)
            } else {
                handle.submit(job)
            };
            submitted.is_ok()
        })
    };
    admitted_rx.recv_timeout(FAILSAFE).unwrap();
    let (report_tx, report_rx) = mpsc::channel();
    let quiescer =
        thread::spawn(move || report_tx.send(scheduler.quiesce(Instant::now() + FAILSAFE)));
    let start = Instant::now();
    while !handle.is_closed() {
        assert!(start.elapsed() < FAILSAFE, "the quiesce never closed");
        thread::yield_now();
    }
    // A bounded wait for what must not happen: the quiesce ending while a
    // submit it admitted has not pushed yet.
    let ended_early = report_rx.recv_timeout(MUST_NOT_END).ok();
    go_tx.send(()).unwrap();
    let accepted = submitter.join().unwrap();
    let early = ended_early.is_some();
    let report = match ended_early {
        Some(report) => report,
        None => report_rx.recv_timeout(FAILSAFE).unwrap(),
    };
    quiescer.join().unwrap().unwrap();
    let ran = flag.0.load(Ordering::Relaxed);
    assert!(accepted, "admitted before the close, then refused");
    assert_eq!(
        usize::from(ran) + report.runnables_left,
        1,
        "an accepted runnable neither ran nor was counted (ran: {ran}, report: {report:?})"
    );
    assert!(
        !early,
        "the quiesce ended while an admitted submit was under way"
    );
}

#[test]
fn a_submit_admitted_before_a_quiesce_runs_or_is_counted() {
    submit_overtaken_by_a_quiesce(false);
}

#[test]
fn an_urgent_submit_admitted_before_a_quiesce_runs_or_is_counted() {
    submit_overtaken_by_a_quiesce(true);
}
