//! loom models of the timer thread's intake (`scheduler/src/timer_intake.rs`,
//! used by `timer.rs`'s `TimerShared::insert`, `timer_loop` and
//! `TimerThread::stop`): a timer registered while the timer thread decides
//! to sleep is not slept past, and a timer registered while the timer
//! thread stops is either drained by the stop or cancelled by its setter.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 cargo test -p proscenium-loom-tests --release --test timer_intake`.
//!
//! The models drive the real `TimerIntake` on plain deadlines (ticks) in
//! place of timer entries, over the stand-in queue of `deque.rs` (its
//! `is_empty`, and `steal` on an empty queue, take no lock, so only the
//! handshakes' fences order the timer thread's re-check and the stop's
//! drain against a push). The timer thread is a loom thread with the steps
//! of `timer_loop`: take what the intake holds, fire what is due, stop once
//! it knows the new timer, otherwise publish its sleep target and re-check
//! (`may_sleep`), then sleep. A sleep until a deadline before the new
//! timer's runs to its end (it cannot make the new timer late); a sleep
//! until the new timer's deadline or later is an untimed park: if nobody
//! cuts it short it is exactly "slept past the new timer", which loom
//! reports as a deadlock. (A push whose deadline is not before the sleep
//! target needs no wake, the timed sleep ends in time; not modelled, as
//! loom has no time.)
//!
//! Mutations of `timer_intake.rs` checked to be caught (none is left in
//! the code):
//! - `push` without its `SeqCst` fence: deadlock in both sleep models;
//!   "timer left in the intake" in the stop model;
//! - `may_sleep` without its fence: deadlock in both sleep models;
//! - `may_sleep` not re-checking the queue (always `true`): deadlock in
//!   both sleep models;
//! - `push` never answering `WakeTimer`: deadlock in both sleep models;
//! - `stop` without its fence: "timer left in the intake" in the stop
//!   model;
//! - `push` not looking at `stopped`: "timer left in the intake".
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::{Condvar, Mutex};
use loom::thread;
use proscenium_scheduler::__loom::{Pushed, TimerIntake};
use std::sync::Arc;

/// `std::thread::park`/`unpark` as the timer thread uses them: a token
/// that an unpark sets and a park consumes. (loom's own `thread::park`
/// is not used: its `unpark` also wakes a thread blocked on a loom mutex,
/// such as the intake's stand-in queue, which then fails to take it.)
#[derive(Default)]
struct Parker {
    token: Mutex<bool>,
    condvar: Condvar,
}

impl Parker {
    fn park(&self) {
        let mut token = self.token.lock().expect("loom");
        while !*token {
            token = self.condvar.wait(token).expect("loom");
        }
        *token = false;
    }

    fn unpark(&self) {
        *self.token.lock().expect("loom") = true;
        self.condvar.notify_one();
    }
}

/// The deadline of the timer registered during the race.
const NEW: u64 = 5;

/// The timer thread: keeps the deadlines it took (its wheel), fires the
/// due ones, and returns once it knows `NEW`. Its clock starts at 0 and
/// moves only when it sleeps until a deadline before `NEW` (such a sleep
/// cannot make `NEW` late, so it is modelled as running to its end); a
/// sleep until `NEW` or later (or indefinitely) must be cut short by the
/// push of `NEW`, so it is an untimed park.
fn timer_thread(intake: &TimerIntake<u64>, parker: &Parker) {
    let mut wheel = Vec::new();
    let mut now = 0;
    loop {
        while let Some(when) = intake.pop() {
            wheel.push(when);
        }
        if wheel.contains(&NEW) {
            return;
        }
        // Fire what is due.
        wheel.retain(|&when| when > now);
        let next = wheel.iter().copied().min().unwrap_or(u64::MAX);
        if !intake.may_sleep(next) {
            continue;
        }
        if next < NEW {
            now = next;
        } else {
            parker.park();
        }
    }
}

/// A timer set at `NEW` while the timer thread, knowing the timers at
/// `known`, fires the first and goes to sleep (until the next, or
/// indefinitely): it is woken or sees the new timer before it sleeps. Its
/// first sleep target (the first known timer, before `NEW`) is the one a
/// racing push may read: then it needs no wake-up, and the timer thread's
/// re-check after its next target must see it.
fn sleep_model(known: &'static [u64]) {
    loom::model(move || {
        let intake = Arc::new(TimerIntake::new());
        for &when in known {
            // Before the timer thread starts; it takes these in its first
            // round (no wake needed).
            let _ = intake.push(when, when);
        }
        let parker = Arc::new(Parker::default());
        let timer = {
            let (intake, parker) = (Arc::clone(&intake), Arc::clone(&parker));
            thread::spawn(move || timer_thread(&intake, &parker))
        };
        match intake.push(NEW, NEW) {
            Pushed::WakeTimer => parker.unpark(),
            Pushed::Queued => {}
            Pushed::Stopped => panic!("not stopped"),
        }
        timer.join().expect("timer thread");
    });
}

/// After firing its one timer (3) the timer thread sleeps indefinitely.
#[test]
fn timer_intake_new_timer_wakes_an_idle_timer_thread() {
    sleep_model(&[3]);
}

/// After firing a timer (3) the timer thread sleeps until a later one
/// (10): the new one (5) must cut that sleep short.
#[test]
fn timer_intake_earlier_timer_is_not_slept_past() {
    sleep_model(&[3, 10]);
}

/// A timer registered while the timer thread is stopped: the stop's drain
/// finds it, the timer thread took it (its wheel is cancelled when it
/// exits), or the setter learns that the intake stopped and cancels it.
#[test]
fn timer_intake_timer_set_during_stop_is_never_left_pending() {
    loom::model(|| {
        let intake: Arc<TimerIntake<u64>> = Arc::new(TimerIntake::new());
        let taken_by_thread = Arc::new(AtomicBool::new(false));
        let parker = Arc::new(Parker::default());
        let timer = {
            let (intake, taken) = (Arc::clone(&intake), Arc::clone(&taken_by_thread));
            let parker = Arc::clone(&parker);
            thread::spawn(move || {
                while !intake.is_stopped() {
                    if intake.pop().is_some() {
                        // Relaxed: read after the join.
                        taken.store(true, Ordering::Relaxed);
                        continue;
                    }
                    if intake.may_sleep(u64::MAX) {
                        parker.park();
                    }
                }
            })
        };
        let setter = {
            let (intake, parker) = (Arc::clone(&intake), Arc::clone(&parker));
            thread::spawn(move || match intake.push(NEW, NEW) {
                Pushed::WakeTimer => {
                    parker.unpark();
                    false
                }
                Pushed::Queued => false,
                Pushed::Stopped => true,
            })
        };
        // `TimerThread::stop`: stop, wake the thread, join it, drain.
        intake.stop();
        parker.unpark();
        timer.join().expect("timer thread");
        let drained = intake.pop().is_some();
        let cancelled_by_setter = setter.join().expect("setter");
        let taken = taken_by_thread.load(Ordering::Relaxed);
        assert!(
            drained || taken || cancelled_by_setter,
            "timer left in the intake"
        );
        assert!(!(drained && taken), "timer taken twice");
    });
}
