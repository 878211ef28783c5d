//! Timers: callbacks fire in deadline order, cancel works, sleep completes.
#![cfg(not(loom))] // the API is not built under loom (see src/sync.rs)
#![allow(clippy::unwrap_used)] // tests may unwrap
mod support;

use proscenium_scheduler::block_on;
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[test]
fn callbacks_fire_in_deadline_order() {
    let s = support::scheduler(1);
    let (tx, rx) = mpsc::channel();
    let delays = [30u64, 10, 50, 20, 40, 1, 5, 64, 65, 130];
    // A deadline is `now + delay` at some point during `schedule`: bounded
    // by the instants taken before and after the call, so the check holds
    // however slowly the timers are set (e.g. under Miri).
    let mut bounds = Vec::new();
    let _handles: Vec<_> = delays
        .iter()
        .enumerate()
        .map(|(i, &d)| {
            let tx = tx.clone();
            let delay = Duration::from_millis(d);
            let before = Instant::now();
            let handle = s
                .handle()
                .schedule(delay, move || tx.send((i, Instant::now())).unwrap());
            bounds.push((before + delay, Instant::now() + delay));
            handle
        })
        .collect();
    let fired: Vec<(usize, Instant)> = (0..delays.len())
        .map(|_| rx.recv_timeout(support::FAILSAFE).unwrap())
        .collect();
    for (i, at) in &fired {
        assert!(*at >= bounds[*i].0, "timer {i} fired early");
    }
    // Fired in deadline order; deadlines less than the 1 ms resolution
    // apart share a tick and fire in the order they were set.
    for pair in fired.windows(2) {
        let (first, then) = (pair[0].0, pair[1].0);
        assert!(
            bounds[first].0 <= bounds[then].1 + Duration::from_millis(1),
            "timer {first} ({:?}) fired before timer {then} ({:?})",
            bounds[first],
            bounds[then]
        );
    }
    let mut seen: Vec<usize> = fired.iter().map(|f| f.0).collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..delays.len()).collect::<Vec<_>>());
}

#[test]
fn a_cancelled_timer_does_not_fire() {
    let s = support::scheduler(1);
    let (tx, rx) = mpsc::channel();
    let tx2 = tx.clone();
    let cancelled = s.handle().schedule(Duration::from_millis(5), move || {
        tx2.send("cancelled").unwrap()
    });
    assert!(cancelled.cancel());
    assert!(!cancelled.cancel(), "second cancel is a no-op");
    // Fires after the cancelled one's deadline; timers fire in order, so if
    // the cancelled one were to fire, it would be seen first.
    let _later = s
        .handle()
        .schedule(Duration::from_millis(20), move || tx.send("later").unwrap());
    assert_eq!(rx.recv_timeout(support::FAILSAFE).unwrap(), "later");
    assert!(!cancelled.is_fired());
    assert_eq!(s.handle().timers_pending(), 0);
}

#[test]
fn cancel_after_fire_reports_false() {
    let s = support::scheduler(1);
    let (tx, rx) = mpsc::channel();
    let t = s
        .handle()
        .schedule(Duration::from_millis(1), move || tx.send(()).unwrap());
    rx.recv_timeout(support::FAILSAFE).unwrap();
    assert!(t.is_fired());
    assert!(!t.cancel());
}

#[test]
fn sleep_completes_on_the_scheduler_and_off_it() {
    let s = support::scheduler(2);
    let h = s.handle().clone();
    let start = Instant::now();
    let task = s.handle().spawn(async move {
        h.sleep(Duration::from_millis(15)).await;
    });
    task.wait().unwrap();
    assert!(start.elapsed() >= Duration::from_millis(15));
    let start = Instant::now();
    block_on(s.handle().sleep(Duration::from_millis(10)));
    assert!(start.elapsed() >= Duration::from_millis(10));
}

#[test]
fn many_live_timers_are_counted_and_cancelled() {
    let s = support::scheduler(1);
    let n = if cfg!(miri) { 100 } else { 100_000 };
    let timers: Vec<_> = (0..n)
        .map(|i| {
            s.handle()
                .schedule(Duration::from_secs(3600 + i % 1000), || {})
        })
        .collect();
    assert_eq!(s.handle().timers_pending(), n as usize);
    for t in &timers {
        assert!(t.cancel());
    }
    assert_eq!(s.handle().timers_pending(), 0);
}

#[test]
fn an_absurd_delay_is_clamped_not_a_panic() {
    let s = support::scheduler(1);
    let t = s.handle().schedule(Duration::MAX, || {});
    assert_eq!(s.handle().timers_pending(), 1);
    assert!(t.cancel());
}

/// `schedule_inline` runs its callback on the timer thread (not a worker),
/// and a panicking inline callback is caught: later timers still fire.
#[test]
fn inline_callbacks_run_on_the_timer_thread_and_a_panic_is_contained() {
    let s = support::scheduler(1);
    let handle = s.handle().clone();
    let (tx, rx) = mpsc::channel();
    let _boom = handle.schedule_inline(Duration::from_millis(1), || panic!("inline boom"));
    let t = tx.clone();
    let _later = handle.schedule_inline(Duration::from_millis(5), move || {
        let name = std::thread::current().name().map(str::to_owned);
        t.send((proscenium_scheduler::current_worker().is_none(), name))
            .unwrap();
    });
    let (off_worker, name) = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert!(off_worker, "inline callbacks do not run on a worker");
    assert!(
        name.is_some_and(|n| n.ends_with("-timer")),
        "on the timer thread"
    );
    let report = s.quiesce(Instant::now() + Duration::from_secs(10));
    assert!(report.drained && report.timers_pending == 0, "{report:?}");
}

/// Regression (issue 12, item 2): a timer beyond the wheel's horizon
/// (`Duration::MAX`, or anything over about 2.2 years), set once the clock
/// has moved past the wheel's last advance, used to land in the top-level
/// slot whose deadline equals the wheel's clock; `advance` then re-inserted
/// it into that same slot forever, and no other timer fired again (nor did
/// quiesce return).
#[test]
fn a_timer_beyond_the_horizon_does_not_stop_the_wheel() {
    let s = support::scheduler(1);
    // Let the clock move while the timer thread sleeps with an empty wheel
    // (this is the set-up of the bug, not a wait for an event).
    std::thread::sleep(Duration::from_millis(20));
    let far = s.handle().schedule(Duration::MAX, || {});
    let (tx, rx) = mpsc::channel();
    s.handle()
        .schedule(Duration::from_millis(1), move || tx.send(()).unwrap());
    if rx.recv_timeout(Duration::from_secs(10)).is_err() {
        // The timer thread spins: dropping the scheduler would hang.
        std::mem::forget(s);
        panic!("a 1 ms timer set after a Duration::MAX one never fired");
    }
    assert!(far.cancel(), "the far timer is still pending, not fired");
    let report = s.quiesce(Instant::now() + support::FAILSAFE);
    assert!(report.drained, "{report:?}");
}
