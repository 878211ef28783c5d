//! The BackoffSupervisor pattern, sentence by sentence from the
//! "Delayed Restarts with the BackoffSupervisor Pattern" section of
//! `akka-net-supervision.txt`. Backoffs are milliseconds; every wait is on
//! an event (probes, asks, event-stream subscriptions), and time is only
//! asserted as "at least".

mod support;

use std::sync::mpsc::Sender;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use proscenium::prelude::*;
use proscenium::{
    BackoffMsg, BackoffOptions, BackoffRestartScheduled, BackoffSupervisor, LifecycleEvent,
    LifecycleKind, SupervisionEvent,
};
use support::*;

#[derive(Debug, thiserror::Error)]
#[error("flaky failure")]
struct FlakyFailure;

#[derive(Debug, thiserror::Error)]
#[error("recoverable")]
struct Recoverable;

enum FlakyMsg {
    Echo(u32, Reply<u32>),
    Inc,
    Count(Reply<u64>),
    Fail,
    FailRecoverable,
    Panic,
    StopSelf,
    /// Stops itself too; the final stop message in one test.
    Shutdown,
    /// Sends Reset to the backoff supervisor, then answers whether it could.
    ResetBackoff(Reply<bool>),
}

/// What a child reports, with when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Life {
    Started,
    Stopped,
}

struct Flaky {
    log: Sender<(Life, Instant)>,
    count: u64,
    stop_at_start: bool,
}

impl Flaky {
    fn props(log: &Probe<(Life, Instant)>) -> Props<Flaky> {
        Flaky::props_with(log, false)
    }

    /// A child that stops itself as soon as it has started.
    fn props_with(log: &Probe<(Life, Instant)>, stop_at_start: bool) -> Props<Flaky> {
        let log = log.tx();
        Props::new(move || Flaky {
            log: log.clone(),
            count: 0,
            stop_at_start,
        })
    }
}

impl Actor for Flaky {
    type Msg = FlakyMsg;

    fn receive(&mut self, ctx: &mut Context<Self>, msg: FlakyMsg) -> Outcome {
        match msg {
            FlakyMsg::Echo(n, reply) => reply.send(n),
            FlakyMsg::Inc => self.count += 1,
            FlakyMsg::Count(reply) => reply.send(self.count),
            FlakyMsg::Fail => return Err(Box::new(FlakyFailure)),
            FlakyMsg::FailRecoverable => return Err(Box::new(Recoverable)),
            FlakyMsg::Panic => panic!("flaky panic"),
            FlakyMsg::StopSelf | FlakyMsg::Shutdown => ctx.stop_self(),
            FlakyMsg::ResetBackoff(reply) => reply.send(BackoffSupervisor::reset(ctx)),
        }
        Ok(())
    }

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        let _ = self.log.send((Life::Started, Instant::now()));
        if self.stop_at_start {
            ctx.stop_self();
        }
        Ok(())
    }

    fn post_stop(&mut self, _ctx: &mut Context<Self>) {
        let _ = self.log.send((Life::Stopped, Instant::now()));
    }
}

type Sup = ActorRef<BackoffMsg<FlakyMsg>>;

/// A probe fed by a callback subscription to `E`, keeping what `f` maps to
/// `Some`.
fn event_probe<E: std::any::Any, T: Send + 'static>(
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

/// The (attempt, delay) of each restart scheduled by `/user/<name>`.
fn restarts(system: &ActorSystem, name: &str) -> Probe<(u32, Duration)> {
    let path = format!("/user/{name}");
    event_probe(system, move |e: &BackoffRestartScheduled| {
        (e.supervisor.path() == path).then_some((e.attempt, e.delay))
    })
}

/// Lifecycle events of the actor at `path`.
fn lifecycle(system: &ActorSystem, path: &str) -> Probe<LifecycleKind> {
    let path = path.to_owned();
    event_probe(system, move |e: &LifecycleEvent| {
        (e.actor.path() == path).then_some(e.kind)
    })
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn tell(sup: &Sup, msg: FlakyMsg) {
    sup.tell(BackoffMsg::Msg(msg));
}

fn restart_count(sup: &Sup) -> u32 {
    sup.ask(BackoffMsg::GetRestartCount, PATIENCE)
        .wait()
        .expect("the supervisor answers")
}

fn current_child(sup: &Sup) -> Option<ActorRef<FlakyMsg>> {
    sup.ask(BackoffMsg::GetCurrentChild, PATIENCE)
        .wait()
        .expect("the supervisor answers")
}

/// Waits for a child to start; returns when it did.
#[track_caller]
fn started(log: &Probe<(Life, Instant)>) -> Instant {
    let (life, at) = log.next();
    assert_eq!(life, Life::Started);
    at
}

/// Waits for a child to stop; returns when it did.
#[track_caller]
fn stopped(log: &Probe<(Life, Instant)>) -> Instant {
    let (life, at) = log.next();
    assert_eq!(life, Life::Stopped);
    at
}

/// "start the given echo actor after it has stopped because of a failure,
/// in increasing intervals of 3, 6, 12, 24 and finally 30 seconds" (here
/// milliseconds), each restart coming at least its delay after the stop;
/// and, with a limit on restarts (Akka's `maxNrOfRetries`), the supervisor
/// stops once the child goes down once more.
#[test]
fn on_stop_restarts_after_doubling_delays_up_to_the_maximum() {
    let system = system();
    let scheduled = restarts(&system, "sup");
    let sup_life = lifecycle(&system, "/user/sup");
    let log = Probe::new();
    let props = BackoffOptions::on_stop(Flaky::props_with(&log, true), "echo", ms(3), ms(30), 0.0)
        .with_manual_reset()
        .with_max_retries(6)
        .props();
    let sup = system.spawn(props, "sup").expect("spawn");
    let mut delays = Vec::new();
    let mut stop = {
        started(&log);
        stopped(&log)
    };
    for attempt in 0..6 {
        let (n, delay) = scheduled.next();
        assert_eq!(n, attempt);
        let again = started(&log);
        assert!(
            again.duration_since(stop) >= delay,
            "restart {attempt} came {:?} after the stop, before its delay {delay:?}",
            again.duration_since(stop)
        );
        delays.push(delay);
        stop = stopped(&log);
    }
    assert_eq!(delays, [ms(3), ms(6), ms(12), ms(24), ms(30), ms(30)]);
    // The seventh stop exceeds the six restarts allowed.
    assert_eq!(
        sup_life.until(LifecycleKind::Stopped),
        [LifecycleKind::Started]
    );
    assert!(
        scheduled.drain_now().is_empty(),
        "no restart after the limit"
    );
    drop(sup);
    shutdown(system);
}

/// "Using a randomFactor to add a little bit of additional variance to the
/// backoff intervals": each scheduled delay lies in [d, d * (1 + factor)].
#[test]
fn the_random_factor_lengthens_each_delay_within_its_bound() {
    let system = system();
    let scheduled = restarts(&system, "sup");
    let log = Probe::new();
    let props = BackoffOptions::on_stop(Flaky::props_with(&log, true), "echo", ms(2), ms(8), 0.5)
        .with_manual_reset()
        .with_max_retries(5)
        .props();
    let sup = system.spawn(props, "sup").expect("spawn");
    for (attempt, d) in [ms(2), ms(4), ms(8), ms(8), ms(8)].into_iter().enumerate() {
        let (n, delay) = scheduled.next();
        assert_eq!(n as usize, attempt);
        let high = d + d.mul_f64(0.5);
        assert!(
            d <= delay && delay <= high,
            "{delay:?} outside [{d:?}, {high:?}]"
        );
    }
    drop(sup);
    shutdown(system);
}

/// Messages to the supervisor reach the current child; while the child is
/// down they go to dead letters, counted.
#[test]
fn messages_are_forwarded_and_go_to_dead_letters_while_the_child_is_down() {
    let system = system();
    let scheduled = restarts(&system, "sup");
    let dead = dead_letter_probe(&system, |d| {
        (
            d.recipient().map(ActorId::path),
            d.downcast_ref::<FlakyMsg>().is_some(),
        )
    });
    let log = Probe::new();
    // A long backoff keeps the child down for the rest of the test; the
    // shutdown then proves the pending timer was cancelled (a clean
    // report has no timer left).
    let props =
        BackoffOptions::on_stop(Flaky::props(&log), "echo", ms(60_000), ms(60_000), 0.0).props();
    let sup = system.spawn(props, "sup").expect("spawn");
    started(&log);
    assert_eq!(
        sup.ask(|r| BackoffMsg::Msg(FlakyMsg::Echo(5, r)), PATIENCE)
            .wait(),
        Ok(5)
    );
    let child = current_child(&sup).expect("a child");
    assert_eq!(child.path(), "/user/sup/echo");
    tell(&sup, FlakyMsg::Inc);
    assert_eq!(
        sup.ask(|r| BackoffMsg::Msg(FlakyMsg::Count(r)), PATIENCE)
            .wait(),
        Ok(1)
    );
    tell(&sup, FlakyMsg::StopSelf);
    assert_eq!(scheduled.next(), (0, ms(60_000)));
    assert!(current_child(&sup).is_none());
    let before = system.dead_letter_count();
    for _ in 0..3 {
        tell(&sup, FlakyMsg::Inc);
    }
    for _ in 0..3 {
        assert_eq!(dead.next(), (Some("/user/sup".to_owned()), true));
    }
    assert!(system.dead_letter_count() >= before + 3);
    drop((sup, child));
    shutdown(system);
}

/// "requires the child actor to send a Akka.Pattern.BackoffSupervisor.Reset
/// message to its parent when a message is successfully processed,
/// resetting the back-off."
#[test]
fn a_manual_reset_brings_the_delay_back_to_the_minimum() {
    let system = system();
    let scheduled = restarts(&system, "sup");
    let log = Probe::new();
    let props = BackoffOptions::on_stop(Flaky::props(&log), "echo", ms(3), ms(1000), 0.0)
        .with_manual_reset()
        .props();
    let sup = system.spawn(props, "sup").expect("spawn");
    for (attempt, delay) in [(0, ms(3)), (1, ms(6)), (2, ms(12))] {
        started(&log);
        tell(&sup, FlakyMsg::StopSelf);
        stopped(&log);
        assert_eq!(scheduled.next(), (attempt, delay));
    }
    started(&log);
    assert_eq!(restart_count(&sup), 3);
    let reset = sup.ask(|r| BackoffMsg::Msg(FlakyMsg::ResetBackoff(r)), PATIENCE);
    assert_eq!(reset.wait(), Ok(true));
    // The child's Reset is queued ahead of this request.
    assert_eq!(restart_count(&sup), 0);
    tell(&sup, FlakyMsg::StopSelf);
    assert_eq!(scheduled.next(), (0, ms(3)));
    stopped(&log);
    started(&log);
    drop(sup);
    shutdown(system);
}

/// `BackoffSupervisor::reset` from an actor whose parent is no backoff
/// supervisor says so and sends nothing.
#[test]
fn reset_outside_a_backoff_supervisor_is_refused() {
    let system = system();
    let log = Probe::new();
    let plain = system.spawn(Flaky::props(&log), "plain").expect("spawn");
    started(&log);
    assert_eq!(
        plain.ask(FlakyMsg::ResetBackoff, PATIENCE).wait(),
        Ok(false)
    );
    drop(plain);
    shutdown(system);
}

/// ".WithAutoReset(TimeSpan.FromSeconds(10)) ... The back-off is
/// automatically reset if the child does not throw any errors within 10
/// seconds." (here 200 ms); a child that goes down sooner does not reset it.
#[test]
fn an_auto_reset_after_a_quiet_period_brings_the_delay_back_to_the_minimum() {
    let system = system();
    let scheduled = restarts(&system, "sup");
    let log = Probe::new();
    let quiet = ms(200);
    let props = BackoffOptions::on_stop(Flaky::props(&log), "echo", ms(2), ms(1000), 0.0)
        .with_auto_reset(quiet)
        .props();
    let sup = system.spawn(props, "sup").expect("spawn");
    // Stopped well within the quiet period: the counter keeps growing.
    for (attempt, delay) in [(0, ms(2)), (1, ms(4))] {
        started(&log);
        tell(&sup, FlakyMsg::StopSelf);
        stopped(&log);
        assert_eq!(scheduled.next(), (attempt, delay));
    }
    let since = started(&log);
    // Wait (on the supervisor's answers) until the quiet period reset it.
    let deadline = Instant::now() + PATIENCE;
    while restart_count(&sup) != 0 {
        assert!(Instant::now() < deadline, "the backoff never reset");
        std::thread::sleep(ms(1));
    }
    assert!(since.elapsed() >= quiet, "reset before the quiet period");
    tell(&sup, FlakyMsg::StopSelf);
    assert_eq!(scheduled.next(), (0, ms(2)));
    stopped(&log);
    started(&log);
    drop(sup);
    shutdown(system);
}

/// "restart the actor after a delay when the actor crashes and the
/// supervision strategy decides that it should restart": an `Err` and a
/// panic each stop the child and start a new instance after the backoff.
#[test]
fn on_failure_restarts_after_an_error_or_a_panic() {
    let system = system();
    let scheduled = restarts(&system, "sup");
    let log = Probe::new();
    let props = BackoffOptions::on_failure(Flaky::props(&log), "echo", ms(3), ms(30), 0.0)
        .with_manual_reset()
        .props();
    let sup = system.spawn(props, "sup").expect("spawn");
    started(&log);
    tell(&sup, FlakyMsg::Inc);
    tell(&sup, FlakyMsg::Fail);
    let down = stopped(&log);
    assert_eq!(scheduled.next(), (0, ms(3)));
    assert!(started(&log).duration_since(down) >= ms(3));
    // A new instance: the count started again.
    assert_eq!(
        sup.ask(|r| BackoffMsg::Msg(FlakyMsg::Count(r)), PATIENCE)
            .wait(),
        Ok(0)
    );
    tell(&sup, FlakyMsg::Panic);
    let down = stopped(&log);
    assert_eq!(scheduled.next(), (1, ms(6)));
    assert!(started(&log).duration_since(down) >= ms(6));
    drop(sup);
    let report = shutdown(system);
    assert_eq!(report.quiesce.expect("quiesced").panics, 0);
}

/// On-failure with a strategy that allows two retries (Akka takes
/// `maxNrOfRetries` from the strategy): the third failure stops the
/// supervisor instead of backing off again.
#[test]
fn on_failure_takes_the_retry_limit_from_the_strategy() {
    let system = system();
    let scheduled = restarts(&system, "sup");
    let sup_life = lifecycle(&system, "/user/sup");
    let log = Probe::new();
    let props = BackoffOptions::on_failure(Flaky::props(&log), "echo", ms(2), ms(30), 0.0)
        .with_manual_reset()
        .with_supervisor_strategy(SupervisorStrategy::one_for_one().max_retries(2))
        .props();
    let sup = system.spawn(props, "sup").expect("spawn");
    for (attempt, delay) in [(0, ms(2)), (1, ms(4))] {
        started(&log);
        tell(&sup, FlakyMsg::Fail);
        stopped(&log);
        assert_eq!(scheduled.next(), (attempt, delay));
    }
    started(&log);
    tell(&sup, FlakyMsg::Fail);
    stopped(&log);
    assert_eq!(
        sup_life.until(LifecycleKind::Stopped),
        [LifecycleKind::Started]
    );
    assert!(scheduled.drain_now().is_empty(), "no third restart");
    drop(sup);
    shutdown(system);
}

/// On-failure: a child that stops by itself is not restarted; the
/// supervisor stops with it.
#[test]
fn on_failure_stops_with_a_child_that_stopped_itself() {
    let system = system();
    let scheduled = restarts(&system, "sup");
    let sup_life = lifecycle(&system, "/user/sup");
    let log = Probe::new();
    let props = BackoffOptions::on_failure(Flaky::props(&log), "echo", ms(3), ms(30), 0.0).props();
    let sup = system.spawn(props, "sup").expect("spawn");
    started(&log);
    tell(&sup, FlakyMsg::StopSelf);
    assert_eq!(
        sup_life.until(LifecycleKind::Stopped),
        [LifecycleKind::Started]
    );
    assert!(scheduled.drain_now().is_empty());
    drop(sup);
    shutdown(system);
}

/// ".WithDefaultStoppingStrategy()); // Stop at any Exception thrown":
/// with on-stop the failed child is stopped and started again after the
/// backoff, where the default strategy restarts it in place.
#[test]
fn the_default_stopping_strategy_stops_the_child_and_backs_off() {
    let system = system();
    let scheduled = restarts(&system, "stopping");
    let decisions = event_probe(&system, |e: &SupervisionEvent| {
        Some((e.supervisor.path(), e.directive))
    });
    let log = Probe::new();
    let props = BackoffOptions::on_stop(Flaky::props(&log), "echo", ms(3), ms(30), 0.0)
        .with_default_stopping_strategy()
        .props();
    let sup = system.spawn(props, "stopping").expect("spawn");
    started(&log);
    tell(&sup, FlakyMsg::Fail);
    assert_eq!(
        decisions.next(),
        ("/user/stopping".to_owned(), Directive::Stop)
    );
    stopped(&log);
    assert_eq!(scheduled.next(), (0, ms(3)));
    started(&log);

    // The default strategy instead: a restart in place, no backoff.
    let in_place = restarts(&system, "restarting");
    let child_life = lifecycle(&system, "/user/restarting/echo");
    let log2 = Probe::new();
    let props = BackoffOptions::on_stop(Flaky::props(&log2), "echo", ms(3), ms(30), 0.0).props();
    let sup2 = system.spawn(props, "restarting").expect("spawn");
    assert_eq!(child_life.next(), LifecycleKind::Started);
    tell(&sup2, FlakyMsg::Fail);
    assert_eq!(
        decisions.next(),
        ("/user/restarting".to_owned(), Directive::Restart)
    );
    assert_eq!(child_life.next(), LifecycleKind::Restarted);
    assert!(in_place.drain_now().is_empty());
    drop((sup, sup2));
    shutdown(system);
}

/// ".WithSupervisorStrategy(new OneForOneStrategy(exception => { if
/// (exception is MyException) return Directive.Restart; ..." : a custom
/// strategy decides; here Resume keeps the child and its state, and the
/// other failures back off.
#[test]
fn a_custom_strategy_decides_resume_keeps_the_child() {
    let system = system();
    let scheduled = restarts(&system, "sup");
    let log = Probe::new();
    let strategy = SupervisorStrategy::one_for_one().decider(|f| {
        if f.is::<Recoverable>() {
            Directive::Resume
        } else {
            Directive::Restart
        }
    });
    let props = BackoffOptions::on_failure(Flaky::props(&log), "echo", ms(3), ms(30), 0.0)
        .with_supervisor_strategy(strategy)
        .props();
    let sup = system.spawn(props, "sup").expect("spawn");
    started(&log);
    let child = current_child(&sup).expect("a child");
    tell(&sup, FlakyMsg::Inc);
    tell(&sup, FlakyMsg::FailRecoverable);
    tell(&sup, FlakyMsg::Inc);
    assert_eq!(
        sup.ask(|r| BackoffMsg::Msg(FlakyMsg::Count(r)), PATIENCE)
            .wait(),
        Ok(2)
    );
    assert_eq!(current_child(&sup), Some(child.clone()));
    assert!(scheduled.drain_now().is_empty());
    tell(&sup, FlakyMsg::Fail);
    assert_eq!(scheduled.next(), (0, ms(3)));
    stopped(&log);
    started(&log);
    assert_ne!(current_child(&sup), Some(child.clone()));
    drop((sup, child));
    shutdown(system);
}

/// The final stop message (Akka's `finalStopMessage`): forwarded to the
/// child, and when the child then stops, the supervisor stops instead of
/// restarting it.
#[test]
fn a_final_stop_message_stops_the_supervisor_with_its_child() {
    let system = system();
    let scheduled = restarts(&system, "sup");
    let sup_life = lifecycle(&system, "/user/sup");
    let log = Probe::new();
    let props = BackoffOptions::on_stop(Flaky::props(&log), "echo", ms(3), ms(30), 0.0)
        .with_final_stop_message(|m| matches!(m, FlakyMsg::Shutdown))
        .props();
    let sup = system.spawn(props, "sup").expect("spawn");
    started(&log);
    tell(&sup, FlakyMsg::Shutdown);
    stopped(&log);
    assert_eq!(
        sup_life.until(LifecycleKind::Stopped),
        [LifecycleKind::Started]
    );
    assert!(scheduled.drain_now().is_empty());
    drop(sup);
    shutdown(system);
}

/// Stopping the supervisor while a restart is pending cancels its timer:
/// the child is not started again and no timer outlives the supervisor.
#[test]
fn stopping_the_supervisor_cancels_the_pending_restart() {
    let system = system();
    let scheduled = restarts(&system, "sup");
    let sup_life = lifecycle(&system, "/user/sup");
    let log = Probe::new();
    let props =
        BackoffOptions::on_stop(Flaky::props(&log), "echo", ms(60_000), ms(60_000), 0.0).props();
    let sup = system.spawn(props, "sup").expect("spawn");
    started(&log);
    tell(&sup, FlakyMsg::StopSelf);
    stopped(&log);
    assert_eq!(scheduled.next(), (0, ms(60_000)));
    // The restart is the only timer: the auto reset's went with the child.
    assert_eq!(system.scheduler_handle().timers_pending(), 1);
    sup.stop();
    assert_eq!(
        sup_life.until(LifecycleKind::Stopped),
        [LifecycleKind::Started]
    );
    assert_eq!(system.scheduler_handle().timers_pending(), 0);
    assert!(log.drain_now().is_empty(), "no child started again");
    drop(sup);
    shutdown(system);
}

/// "any other exception will be escalated": the supervisor fails with the
/// child's failure, and its own supervisor (the user guardian, which
/// restarts) makes a new supervisor, which starts a new child.
#[test]
fn an_escalated_failure_restarts_the_supervisor_and_its_child() {
    let system = system();
    let scheduled = restarts(&system, "sup");
    let sup_life = lifecycle(&system, "/user/sup");
    let log = Probe::new();
    let props = BackoffOptions::on_failure(Flaky::props(&log), "echo", ms(2), ms(30), 0.0)
        .with_supervisor_strategy(
            SupervisorStrategy::one_for_one().decider(|_| Directive::Escalate),
        )
        .props();
    let sup = system.spawn(props, "sup").expect("spawn");
    assert_eq!(sup_life.next(), LifecycleKind::Started);
    started(&log);
    tell(&sup, FlakyMsg::Fail);
    stopped(&log);
    assert_eq!(sup_life.next(), LifecycleKind::Restarted);
    started(&log);
    assert_eq!(
        sup.ask(|r| BackoffMsg::Msg(FlakyMsg::Echo(9, r)), PATIENCE)
            .wait(),
        Ok(9)
    );
    assert!(
        scheduled.drain_now().is_empty(),
        "no backoff: a new supervisor"
    );
    drop(sup);
    shutdown(system);
}
