//! An actor's own supervision (`Props::with_supervision`, issue 35): one
//! actor's failures handled by a strategy of its own, without a parent
//! written for it, checked against the sentences of
//! `akka-net-supervision.txt` that say what each directive does. Every
//! wait is on an event (probes, asks, event-stream subscriptions); time
//! is asserted only as "at least", and where a test needs time to pass (a
//! window, a stable period) it waits for the clock to pass a point that
//! an event proved is after the engine's own reading.

mod support;

use std::any::Any;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use proscenium::prelude::*;
use proscenium::{BackoffRestartScheduled, Directive, StrategyKind};
use support::actors::*;
use support::*;

/// A probe fed by a callback subscription to `E`, keeping what `f` maps to
/// `Some`.
fn events<E: Any, T: Send + 'static>(
    system: &ActorSystem,
    f: impl Fn(&E) -> Option<T> + Send + Sync + 'static,
) -> Probe<T> {
    let probe = Probe::new();
    let tx = Mutex::new(probe.tx());
    system.event_stream().subscribe(move |e: &E| {
        if let Some(t) = f(e) {
            let _ = tx.lock().expect("probe lock").send(t);
        }
    });
    probe
}

/// The supervision decisions about the actor at `path`: who decided, what
/// is done, and why.
fn decisions(system: &ActorSystem, path: &str) -> Probe<(String, Directive, SupervisionReason)> {
    let path = path.to_owned();
    events(system, move |e: &SupervisionEvent| {
        (e.child.path() == path).then(|| (e.supervisor.path(), e.directive, e.reason))
    })
}

/// When the actor at `path` was seen restarted (after the engine marked
/// the new incarnation started).
fn restarts(system: &ActorSystem, path: &str) -> Probe<Instant> {
    let path = path.to_owned();
    events(system, move |e: &LifecycleEvent| {
        (e.actor.path() == path && e.kind == LifecycleKind::Restarted).then(Instant::now)
    })
}

/// The (attempt, delay) of each delayed restart the actor at `path` scheduled.
fn scheduled(system: &ActorSystem, path: &str) -> Probe<(u32, Duration)> {
    let path = path.to_owned();
    events(system, move |e: &BackoffRestartScheduled| {
        (e.supervisor.path() == path).then_some((e.attempt, e.delay))
    })
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Waits until the clock has passed `instant` (time itself is what the
/// test needs here, not an event).
fn wait_past(instant: Instant) {
    while Instant::now() <= instant {
        std::thread::sleep(instant.saturating_duration_since(Instant::now()) + ms(1));
    }
}

fn decided(directive: Directive) -> (String, Directive, SupervisionReason) {
    ("/user/w".to_owned(), directive, SupervisionReason::Decided)
}

/// "limits on how often a child is allowed to fail before terminating
/// it", on one top-level actor: `/user`'s strategy restarts without limit,
/// but the actor's own restarts it twice within the window and stops it at
/// the third failure. Each decision is the actor's own (it is supervisor
/// and child in the event); `/user` decides nothing.
#[test]
fn restart_with_a_limit_stops_a_top_level_actor_at_the_limit() {
    let system = system();
    let decisions = decisions(&system, "/user/w");
    let log = Probe::new();
    let props = Worker::props("w", &log.tx())
        .with_supervision(Supervision::restart().with_limit(2, Duration::from_secs(60)));
    let w = system.spawn(props, "w").expect("spawn");
    let ended = w.id().when_terminated();
    for _ in 0..2 {
        w.tell(WorkerMsg::Inc);
        w.tell(WorkerMsg::Fail);
        assert_eq!(decisions.next(), decided(Directive::Restart));
        // "Restart the subordinate, clearing out its accumulated internal
        // state": the Inc before the failure is gone.
        assert_eq!(count(&w), 0);
    }
    w.tell(WorkerMsg::Fail);
    assert_eq!(
        decisions.next(),
        (
            "/user/w".to_owned(),
            Directive::Stop,
            SupervisionReason::RestartLimitReached
        )
    );
    assert!(ended.wait_timeout(PATIENCE), "stopped at the limit");
    assert_eq!(
        log.take(7),
        [
            "w created",
            "w started",
            "w pre_restart",
            "w stopped",
            "w created",
            "w post_restart",
            "w started",
        ]
    );
    assert!(decisions.drain_now().is_empty(), "/user decided nothing");
    drop(w);
    shutdown(system);
}

/// The window: "limits on how often a child is allowed to fail" within
/// it. With one restart allowed per window, a second failure after the
/// window has passed is restarted again (a new window opens), where one
/// inside it would stop the actor (the test above).
#[test]
fn the_window_counts_restarts_anew_once_it_has_passed() {
    let system = system();
    let decisions = decisions(&system, "/user/w");
    let log = Probe::new();
    let window = ms(300);
    let props = Worker::props("w", &log.tx())
        .with_supervision(Supervision::restart().with_limit(1, window));
    let w = system.spawn(props, "w").expect("spawn");
    w.tell(WorkerMsg::Fail);
    assert_eq!(decisions.next(), decided(Directive::Restart));
    // The window opened when the engine decided, before this event came.
    wait_past(Instant::now() + window);
    w.tell(WorkerMsg::Fail);
    assert_eq!(
        decisions.next(),
        decided(Directive::Restart),
        "a failure after the window is counted in a new one"
    );
    assert_eq!(count(&w), 0, "alive, restarted");
    drop(w);
    shutdown(system);
}

/// "starting a child actor again when it fails, each time with a growing
/// time delay between restarts", on the actor itself: 10, 20, 40, 40 ms,
/// each restart at least its delay after the failure. Meanwhile the actor
/// is suspended and what is sent to it waits: "the restart is not visible
/// outside of the actor itself with the notable exception that the
/// message during which the failure occurred is not re-processed."
#[test]
fn backoff_restarts_after_growing_delays_and_keeps_what_was_sent_meanwhile() {
    let system = system();
    let scheduled = scheduled(&system, "/user/w");
    let restarted = restarts(&system, "/user/w");
    let log = Probe::new();
    let props = Worker::props("w", &log.tx()).with_supervision(
        Supervision::restart_with_backoff(ms(10), ms(40), 0.0)
            .with_reset_after(Duration::from_secs(60)),
    );
    let w = system.spawn(props, "w").expect("spawn");
    for (attempt, delay) in [(0, ms(10)), (1, ms(20)), (2, ms(40)), (3, ms(40))] {
        let before_failure = Instant::now();
        w.tell(WorkerMsg::Fail);
        for _ in 0..3 {
            w.tell(WorkerMsg::Inc);
        }
        assert_eq!(scheduled.next(), (attempt, delay));
        let at = restarted.next();
        assert!(
            at.duration_since(before_failure) >= delay,
            "restart {attempt} came {:?} after the failure, before its delay {delay:?}",
            at.duration_since(before_failure)
        );
        assert_eq!(
            count(&w),
            3,
            "the new instance handled what was sent meanwhile"
        );
    }
    drop(w);
    shutdown(system);
}

/// "The back-off is automatically reset if the child does not throw any
/// errors within" the reset period: after an incarnation that ran that
/// long, the delay is the minimum again; one that failed sooner (the
/// second) does not reset it.
#[test]
fn backoff_starts_over_after_a_stable_period() {
    let system = system();
    let scheduled = scheduled(&system, "/user/w");
    let restarted = restarts(&system, "/user/w");
    let log = Probe::new();
    let stable = ms(200);
    let props = Worker::props("w", &log.tx()).with_supervision(
        Supervision::restart_with_backoff(ms(5), ms(1000), 0.0).with_reset_after(stable),
    );
    let w = system.spawn(props, "w").expect("spawn");
    w.tell(WorkerMsg::Fail);
    assert_eq!(scheduled.next(), (0, ms(5)));
    restarted.next();
    w.tell(WorkerMsg::Fail);
    assert_eq!(scheduled.next(), (1, ms(10)));
    // Seen after the engine marked the incarnation started.
    let since = restarted.next();
    wait_past(since + stable);
    w.tell(WorkerMsg::Fail);
    assert_eq!(
        scheduled.next(),
        (0, ms(5)),
        "reset after the stable period"
    );
    restarted.next();
    drop(w);
    shutdown(system);
}

/// A failed start is restarted with backoff (a resource not there yet),
/// and the actor starts once its factory succeeds; without a limit, a
/// plain restart hands a failed start to the parent instead, whose default
/// decider stops it (it would fail again at once, forever).
#[test]
fn a_failed_start_is_retried_with_backoff_and_handed_on_by_an_unlimited_restart() {
    let system = system();
    let scheduled = scheduled(&system, "/user/w");
    let started = events(&system, |e: &LifecycleEvent| {
        (e.actor.path() == "/user/w" && e.kind == LifecycleKind::Started).then_some(())
    });
    let tries = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let props = {
        let tries = tries.clone();
        Props::try_new(
            move || match tries.fetch_add(1, std::sync::atomic::Ordering::Relaxed) {
                0..=2 => Err("not there yet"),
                _ => Ok(Echo),
            },
        )
        .with_supervision(Supervision::restart_with_backoff(ms(1), ms(4), 0.0))
    };
    let w = system.spawn(props, "w").expect("spawn");
    assert_eq!(scheduled.take(3), [(0, ms(1)), (1, ms(2)), (2, ms(4))]);
    started.next();
    assert_eq!(w.ask(|r| (5, r), PATIENCE).wait(), Ok(5));
    drop(w);

    let decisions = decisions(&system, "/user/v");
    let never =
        Props::try_new(|| Err::<Echo, _>("never there")).with_supervision(Supervision::restart());
    let v = system.spawn(never, "v").expect("spawn");
    assert!(v.id().when_terminated().wait_timeout(PATIENCE));
    assert_eq!(
        decisions.next(),
        (
            "/user".to_owned(),
            Directive::Stop,
            SupervisionReason::Decided
        ),
        "the parent decided, with the default decider"
    );
    drop(v);
    shutdown(system);
}

struct Echo;

impl Actor for Echo {
    type Msg = (u32, Reply<u32>);

    fn receive(&mut self, _: &mut Context<Self>, (n, reply): Self::Msg) -> Outcome {
        reply.send(n);
        Ok(())
    }
}

/// "Resume the subordinate, keeping its accumulated internal state" and
/// "Stop the subordinate permanently", each on the actor itself, under
/// `/user`, whose strategy would restart it.
#[test]
fn resume_keeps_the_state_and_stop_stops() {
    let system = system();
    let decisions = decisions(&system, "/user/w");
    let log = Probe::new();
    let w = system
        .spawn(
            Worker::props("w", &log.tx()).with_supervision(Supervision::resume()),
            "w",
        )
        .expect("spawn");
    w.tell(WorkerMsg::Inc);
    w.tell(WorkerMsg::Fail);
    w.tell(WorkerMsg::Inc);
    assert_eq!(count(&w), 2);
    assert_eq!(decisions.next(), decided(Directive::Resume));
    w.stop();
    assert!(w.id().when_terminated().wait_timeout(PATIENCE));
    drop(w);

    let w = system
        .spawn(
            Worker::props("w", &log.tx()).with_supervision(Supervision::stop()),
            "w",
        )
        .expect("spawn");
    let ended = w.id().when_terminated();
    w.tell(WorkerMsg::Fail);
    assert_eq!(decisions.next(), decided(Directive::Stop));
    assert!(ended.wait_timeout(PATIENCE));
    drop(w);
    shutdown(system);
}

/// What the actor's own supervision does not take goes to its parent,
/// decided there as for any child: a failure `only_when` refuses, and
/// Kill. "wishing for different strategies to be applied to different
/// subordinates": the parent's strategy still covers its other children.
#[test]
fn the_parent_decides_what_the_actor_does_not_take_and_its_other_children() {
    let system = system();
    let log = Probe::new();
    let boss = system
        .spawn(
            Boss::props(&log.tx(), StrategyKind::OneForOne, Some(Directive::Stop)),
            "boss",
        )
        .expect("boss");
    let decisions = decisions(&system, "/user/boss/own");
    // Resumes itself on panics; errors are the boss's (which stops).
    let own = hire(
        &boss,
        Worker::props("own", &log.tx())
            .with_supervision(Supervision::resume().only_when(Failure::is_panic)),
        "own",
    );
    let plain = hire(&boss, Worker::props("plain", &log.tx()), "plain");
    own.tell(WorkerMsg::Inc);
    own.tell(WorkerMsg::Panic("taken"));
    own.tell(WorkerMsg::Inc);
    assert_eq!(count(&own), 2, "resumed by its own supervision");
    assert_eq!(
        decisions.next(),
        (
            "/user/boss/own".to_owned(),
            Directive::Resume,
            SupervisionReason::Decided
        )
    );
    // The boss's strategy: Stop, for its plain child.
    plain.tell(WorkerMsg::Fail);
    assert!(plain.id().when_terminated().wait_timeout(PATIENCE));
    log.until("boss decided Stop for /user/boss/plain: worker failure");
    // Not a panic: the boss decides, and stops it.
    own.tell(WorkerMsg::Fail);
    assert!(own.id().when_terminated().wait_timeout(PATIENCE));
    log.until("boss decided Stop for /user/boss/own: worker failure");
    assert_eq!(
        decisions.next(),
        (
            "/user/boss".to_owned(),
            Directive::Stop,
            SupervisionReason::Decided
        )
    );

    // Kill is its sender's decision: the parent's, even under resume().
    let kill_me = hire(
        &boss,
        Worker::props("kill-me", &log.tx()).with_supervision(Supervision::resume()),
        "kill-me",
    );
    kill_me.kill();
    assert!(kill_me.id().when_terminated().wait_timeout(PATIENCE));
    log.until("boss decided Stop for /user/boss/kill-me: the actor was killed");
    drop((boss, own, plain, kill_me));
    shutdown(system);
}

/// An actor stopped while it waits for a delayed restart stops at once,
/// and its pending restart's timer is cancelled (the termination report is
/// clean only when no timer is left).
#[test]
fn stopping_an_actor_that_waits_for_its_backoff_cancels_the_restart() {
    let system = system();
    let scheduled = scheduled(&system, "/user/w");
    let log = Probe::new();
    let props = Worker::props("w", &log.tx()).with_supervision(Supervision::restart_with_backoff(
        Duration::from_secs(60),
        Duration::from_secs(60),
        0.0,
    ));
    let w = system.spawn(props, "w").expect("spawn");
    w.tell(WorkerMsg::Fail);
    assert_eq!(scheduled.next(), (0, Duration::from_secs(60)));
    w.stop();
    assert!(w.id().when_terminated().wait_timeout(PATIENCE));
    drop(w);
    shutdown(system);
}

/// A restart by the parent (here an all-for-one restart after a sibling's
/// failure) while the actor waits for its own delayed restart (a minute)
/// takes its place: the actor is restarted now, and handles messages
/// again, the one sent while it waited included (its own failure's
/// suspension is lifted with the parent's Suspend; before, it stayed
/// suspended and the ask timed out).
#[test]
fn a_restart_by_the_parent_replaces_a_pending_delayed_restart() {
    let system = system();
    let log = Probe::new();
    let scheduled = scheduled(&system, "/user/boss/a");
    let restarted = restarts(&system, "/user/boss/a");
    let boss = system
        .spawn(
            Boss::props(&log.tx(), StrategyKind::AllForOne, Some(Directive::Restart)),
            "boss",
        )
        .expect("boss");
    let a = hire(
        &boss,
        Worker::props("a", &log.tx()).with_supervision(Supervision::restart_with_backoff(
            Duration::from_secs(60),
            Duration::from_secs(60),
            0.0,
        )),
        "a",
    );
    let b = hire(&boss, Worker::props("b", &log.tx()), "b");
    a.tell(WorkerMsg::Inc);
    a.tell(WorkerMsg::Fail);
    assert_eq!(scheduled.next(), (0, Duration::from_secs(60)));
    a.tell(WorkerMsg::Inc);
    b.tell(WorkerMsg::Fail);
    log.until("boss decided Restart for /user/boss/b: worker failure");
    restarted.next();
    assert_eq!(count(&a), 1, "restarted by the boss, and running again");
    assert_eq!(count(&b), 0);
    drop((boss, a, b));
    shutdown(system);
}
