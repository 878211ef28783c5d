//! Scheduled messages: `tell_after` / `tell_every` from outside and from an
//! actor's context, keyed timers, cancellation, and that no timer outlives
//! its actor.
//!
//! Timers are not in the seed documents; the Akka behaviour these tests
//! hold the engine to is quoted, in our words, from Akka's documentation of
//! the scheduler (`scheduleOnce`, `scheduleWithFixedDelay`) and of actor
//! timers (`Timers`, `TimerScheduler`). Delays are tiny; time is asserted
//! only as "at least".

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proscenium::prelude::*;
use support::scripted::*;
use support::*;

const MS: Duration = Duration::from_millis(1);

fn spawn(system: &ActorSystem, name: &str) -> (ActorRef<Cmd>, Probe<Seen>) {
    let probe = Probe::new();
    let a = system
        .spawn(Scripted::props(probe.tx()), name)
        .expect("spawn");
    assert_eq!(probe.next(), Seen::Started);
    (a, probe)
}

/// Stops `a` and waits until it has terminated (its mailbox closed, after
/// its timers were cancelled). Not `graceful_stop`, whose own timeout timer
/// would be counted as pending for a moment after it completes.
fn stop_and_wait(a: &ActorRef<Cmd>) {
    a.stop();
    eventually(|| a.is_terminated());
}

/// Runs `f` in the actor and holds the actor in that handler until the
/// returned sender is used; returns once `f` has run.
fn hold(
    a: &ActorRef<Cmd>,
    f: impl Fn(&mut Context<Scripted>) + Send + Sync + 'static,
) -> std::sync::mpsc::Sender<()> {
    hold_then(a, f, |_| {})
}

/// Like [`hold`], then runs `then` in the same handler once released.
fn hold_then(
    a: &ActorRef<Cmd>,
    f: impl Fn(&mut Context<Scripted>) + Send + Sync + 'static,
    then: impl Fn(&mut Context<Scripted>) + Send + Sync + 'static,
) -> std::sync::mpsc::Sender<()> {
    let (open, gate) = std::sync::mpsc::channel::<()>();
    let gate = Mutex::new(gate);
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let held_tx = Mutex::new(held_tx);
    a.tell(Cmd::Run(Arc::new(move |ctx| {
        f(ctx);
        let _ = held_tx.lock().expect("held").send(());
        let _ = gate.lock().expect("gate").recv();
        then(ctx);
    })));
    held_rx.recv_timeout(PATIENCE).expect("the actor is held");
    open
}

fn pending(system: &ActorSystem) -> usize {
    system.scheduler_handle().timers_pending()
}

/// Akka: `scheduleOnce` "schedules a message to be sent once with a delay".
/// Delivered once, and not before the delay.
#[test]
fn tell_after_from_the_context_delivers_once_not_early() {
    let system = system();
    let (a, probe) = spawn(&system, "a");
    let started = Instant::now();
    let timer = exec(&a, |ctx| ctx.tell_after(15 * MS, Cmd::Tick("once")));
    assert_eq!(probe.next(), Seen::Tick("once"));
    assert!(started.elapsed() >= 15 * MS);
    // Delivered: nothing left to cancel, nothing pending, and the slot of a
    // single timer cannot be delivered again.
    assert!(!timer.cancel());
    assert!(!timer.is_cancelled());
    assert_eq!(pending(&system), 0);
    a.tell(Cmd::Tick("end"));
    assert_eq!(probe.next(), Seen::Tick("end"));
    drop(a);
    shutdown(system);
}

/// Akka: the scheduler's `scheduleOnce(delay, receiver, message)` sends to
/// any actor; a message to a terminated actor goes to dead letters.
#[test]
fn tell_after_from_outside_delivers_or_goes_to_dead_letters() {
    let system = system();
    let dead = dead_letter_probe(&system, |d| format!("{:?}", d.downcast_ref::<Cmd>()));
    let (a, probe) = spawn(&system, "a");
    let started = Instant::now();
    let _t = a.tell_after(10 * MS, Cmd::Tick("outside"));
    assert_eq!(probe.next(), Seen::Tick("outside"));
    assert!(started.elapsed() >= 10 * MS);

    let late = a.tell_after(10 * MS, Cmd::Tick("late"));
    stop_and_wait(&a);
    assert_eq!(dead.next(), "Some(Tick(late))");
    assert!(!late.cancel(), "its target was gone: it ended");
    assert_eq!(pending(&system), 0);
    drop(a);
    shutdown(system);
}

/// Akka: a message sent to a terminated actor goes to dead letters. Once
/// the whole system has terminated, its scheduler takes no timer: a
/// scheduled message goes to dead letters at once (and a repeating one
/// ends there), never silently nowhere.
#[test]
fn tell_after_once_the_system_has_terminated_goes_to_dead_letters() {
    let system = system();
    let dead = dead_letter_probe(&system, |d| format!("{:?}", d.downcast_ref::<Cmd>()));
    let (a, _probe) = spawn(&system, "a");
    shutdown(system.clone());
    let once = a.tell_after(MS, Cmd::Tick("once"));
    assert_eq!(dead.next(), "Some(Tick(once))");
    let every = a.tell_every(MS, MS, Cmd::Tick("every"));
    assert_eq!(dead.next(), "Some(Tick(every))");
    assert!(!once.cancel() && !every.cancel(), "both ended");
    assert_eq!(system.dead_letter_count(), 2);
    drop((once, every, a));
    assert_eq!(system.live_cells(), 0, "no timer holds the actor");
}

/// The same for a message still scheduled when the system terminates: its
/// timer never fires (the scheduler drops it, unfired, and reports it as
/// pending), and the message goes to dead letters then.
#[test]
fn a_message_still_scheduled_when_the_system_terminates_goes_to_dead_letters() {
    let system = system();
    let dead = dead_letter_probe(&system, |d| format!("{:?}", d.downcast_ref::<Cmd>()));
    let (a, _probe) = spawn(&system, "a");
    let hour = Duration::from_secs(3600);
    let later = a.tell_after(hour, Cmd::Tick("in an hour"));
    let report = system
        .terminate()
        .wait_timeout(PATIENCE)
        .expect("the system terminates");
    assert_eq!(report.quiesce.map(|q| q.timers_pending), Some(1));
    assert_eq!(dead.next(), "Some(Tick(in an hour))");
    assert_eq!(report.dead_letters, 1, "counted before the report");
    assert!(!later.cancel(), "it ended");
    drop((later, a));
    assert_eq!(system.live_cells(), 0, "no timer holds the actor");
}

/// Akka: `startTimerWithFixedDelay` "schedules a message to be sent
/// repeatedly to the self actor with a fixed delay between messages";
/// `cancel` stops it. Here the delay is measured from each delivery.
#[test]
fn tell_every_repeats_until_cancelled() {
    let system = system();
    let (a, probe) = spawn(&system, "a");
    let started = Instant::now();
    let timer = exec(&a, |ctx| {
        let mut n = 0;
        ctx.tell_every_with(2 * MS, 2 * MS, move || {
            n += 1;
            Cmd::Num(n)
        })
    });
    assert_eq!(probe.take(3), [Seen::Num(1), Seen::Num(2), Seen::Num(3)]);
    // Three deliveries, each at least one delay after the one before.
    assert!(started.elapsed() >= 6 * MS);
    assert!(timer.cancel());
    assert!(timer.is_cancelled());
    assert!(!timer.cancel(), "a second cancel does nothing");
    // Nothing re-arms a cancelled timer; an envelope already queued is
    // skipped (so the marker below is the last thing delivered).
    assert_eq!(pending(&system), 0);
    a.tell(Cmd::Tick("end"));
    let before_end = probe.until(Seen::Tick("end"));
    assert!(before_end
        .iter()
        .all(|s| matches!(s, Seen::Num(n) if *n > 3)));
    let after_cancel = before_end.len();
    assert!(
        after_cancel <= 1,
        "at most the one tick in flight: {before_end:?}"
    );
    assert_eq!(pending(&system), 0);
    drop(a);
    shutdown(system);
}

/// The same from outside: `ActorRef::tell_every`, a clone each time.
#[test]
fn tell_every_from_outside_repeats_until_cancelled() {
    let system = system();
    let (a, probe) = spawn(&system, "a");
    let timer = a.tell_every(MS, MS, Cmd::Tick("tick"));
    assert_eq!(probe.take(3), [Seen::Tick("tick"); 3]);
    assert!(timer.cancel());
    assert_eq!(pending(&system), 0);
    drop(a);
    shutdown(system);
}

/// Akka: `Cancellable.cancel` "cancels this Cancellable and returns true
/// if that was successful" — a message cancelled before its delay is
/// never delivered, not even to dead letters.
#[test]
fn cancel_before_fire_never_delivers() {
    let system = system();
    let (a, probe) = spawn(&system, "a");
    let inner = exec(&a, |ctx| {
        ctx.tell_after(20 * MS, Cmd::Tick("cancelled inside"))
    });
    let outer = a.tell_after(20 * MS, Cmd::Tick("cancelled outside"));
    assert!(inner.cancel() && outer.cancel());
    assert!(inner.is_cancelled() && outer.is_cancelled());
    assert_eq!(pending(&system), 0);
    // A later timer arrives first: the cancelled ones were due before it.
    let _t = a.tell_after(40 * MS, Cmd::Tick("later"));
    assert_eq!(probe.next(), Seen::Tick("later"));
    assert_eq!(system.dead_letter_count(), 0);
    drop(a);
    shutdown(system);
}

/// Akka (Timers): a message from a cancelled timer that is already in the
/// mailbox "will not be received" after the cancel. The actor is held in a
/// handler while its timer fires and queues the message; the cancel comes
/// after that.
#[test]
fn cancel_after_fire_drops_the_queued_message() {
    let system = system();
    let (a, probe) = spawn(&system, "a");
    let (open, gate) = std::sync::mpsc::channel::<()>();
    let gate = Mutex::new(gate);
    let (handle_tx, handle_rx) = std::sync::mpsc::channel();
    let handle_tx = Mutex::new(handle_tx);
    a.tell(Cmd::Run(Arc::new(move |ctx| {
        let t = ctx.tell_after(MS, Cmd::Tick("stale"));
        let _ = handle_tx.lock().expect("handle").send(t);
        let _ = gate.lock().expect("gate").recv();
    })));
    let timer = handle_rx.recv_timeout(PATIENCE).expect("the handle");
    eventually(|| pending(&system) == 0); // fired: "stale" is queued
    assert!(timer.cancel(), "queued but not handled: still cancellable");
    open.send(()).expect("open");
    a.tell(Cmd::Tick("end"));
    assert_eq!(probe.until(Seen::Tick("end")), Vec::<Seen>::new());
    assert_eq!(system.dead_letter_count(), 0);
    drop(a);
    shutdown(system);
}

/// Akka (Timers): "Each timer has a key and if a new timer with the same
/// key is started, the previous is cancelled. It is guaranteed that a
/// message from the previous timer is not received, even if it was already
/// enqueued in the mailbox when the new timer was started."
#[test]
fn keyed_timer_replacement_drops_the_stale_message() {
    let system = system();
    let (a, probe) = spawn(&system, "a");
    // Start the timer and block in the same handler: the timer fires into
    // the mailbox while the actor is held.
    let open = hold_then(
        &a,
        |ctx| ctx.start_single_timer("k", Cmd::Tick("old"), MS),
        |ctx| {
            // "old" is in the mailbox now (see below); replace it.
            assert!(ctx.is_timer_active("k"));
            ctx.start_single_timer("k", Cmd::Tick("new"), MS);
        },
    );
    eventually(|| pending(&system) == 0); // fired: "old" is queued
    open.send(()).expect("open");
    assert_eq!(probe.next(), Seen::Tick("new"));
    // A delivered single timer is no longer active.
    assert!(!exec(&a, |ctx| ctx.is_timer_active("k")));
    a.tell(Cmd::Tick("end"));
    assert_eq!(probe.next(), Seen::Tick("end"));
    assert_eq!(system.dead_letter_count(), 0);
    drop(a);
    shutdown(system);
}

/// Akka (Timers): `cancel(key)` — "It is guaranteed that a message from a
/// canceled timer, including its previous incarnation for the same key,
/// will not be received by the actor, even though the message might
/// already be enqueued in the mailbox when cancel is called."
#[test]
fn cancel_timer_by_key_drops_the_queued_message() {
    let system = system();
    let (a, probe) = spawn(&system, "a");
    let open = hold_then(
        &a,
        |ctx| ctx.start_timer_with_fixed_delay("tick", Cmd::Tick("tick"), MS),
        |ctx| {
            assert!(ctx.cancel_timer("tick"));
            assert!(!ctx.is_timer_active("tick"));
            assert!(!ctx.cancel_timer("tick"));
        },
    );
    eventually(|| pending(&system) == 0); // fired into the mailbox
    open.send(()).expect("open");
    a.tell(Cmd::Tick("end"));
    assert_eq!(probe.until(Seen::Tick("end")), Vec::<Seen>::new());
    assert_eq!(pending(&system), 0);
    drop(a);
    shutdown(system);
}

/// Akka (Timers): "The timers are bound to the lifecycle of the actor that
/// owns it, and thus are cancelled automatically when it is restarted or
/// stopped." Stopped: every timer is cancelled and dropped (nothing left
/// pending in the wheel) and nothing goes to dead letters.
#[test]
fn stopping_an_actor_cancels_its_timers() {
    let system = system();
    let dead = dead_letter_probe(&system, |d| d.message_type());
    let (a, _probe) = spawn(&system, "a");
    let before = pending(&system);
    let handles = exec(&a, |ctx| {
        let once = ctx.tell_after(Duration::from_secs(30), Cmd::Tick("once"));
        let every = ctx.tell_every(Duration::from_secs(30), MS, Cmd::Tick("every"));
        ctx.start_single_timer("single", Cmd::Tick("single"), Duration::from_secs(30));
        ctx.start_timer_with_fixed_delay("fixed", Cmd::Tick("fixed"), Duration::from_secs(30));
        ctx.set_receive_timeout(Duration::from_secs(30), || Cmd::Tick("idle"));
        (once, every)
    });
    assert_eq!(pending(&system), before + 5);
    stop_and_wait(&a);
    assert_eq!(pending(&system), before);
    assert!(handles.0.is_cancelled() && handles.1.is_cancelled());
    assert_eq!(dead.drain_now(), Vec::<&str>::new());
    assert_eq!(system.dead_letter_count(), 0);
    drop(a);
    shutdown(system);
}

/// A timer that fires while its actor is stopping: cancelled at the start
/// of the stop, so its message is neither handled nor a dead letter.
#[test]
fn a_timer_due_during_the_stop_is_not_a_dead_letter() {
    let system = system();
    let dead = dead_letter_probe(&system, |d| d.message_type());
    let (a, probe) = spawn(&system, "a");
    let open = hold(&a, |ctx| {
        let _ = ctx.tell_every(MS, MS, Cmd::Tick("tick"));
    });
    eventually(|| pending(&system) == 0); // fired into the mailbox
    a.stop();
    open.send(()).expect("open");
    eventually(|| a.is_terminated());
    assert_eq!(probe.drain_now(), Vec::<Seen>::new());
    assert_eq!(dead.drain_now(), Vec::<&str>::new());
    assert_eq!(system.dead_letter_count(), 0);
    assert_eq!(pending(&system), 0);
    drop(a);
    shutdown(system);
}

/// Restarted: the old incarnation's timers are cancelled, and the new one
/// starts with none.
#[test]
fn restarting_an_actor_cancels_its_timers() {
    let system = system();
    let (a, probe) = spawn(&system, "a");
    exec(&a, |ctx| {
        ctx.start_timer_with_fixed_delay("k", Cmd::Tick("old"), Duration::from_secs(30));
        let _ = ctx.tell_after(Duration::from_secs(30), Cmd::Tick("old"));
    });
    assert_eq!(pending(&system), 2);
    a.tell(Cmd::Fail);
    assert_eq!(probe.next(), Seen::Started); // the new incarnation
    assert_eq!(pending(&system), 0);
    assert!(!exec(&a, |ctx| ctx.is_timer_active("k")));
    drop(a);
    shutdown(system);
}

/// A repeating timer is re-armed only after its message is handled, so a
/// slow (here: held) actor never has more than one of them queued, however
/// many intervals pass.
#[test]
fn a_repeating_timer_never_queues_more_than_one_message() {
    let system = system();
    let probe = Probe::new();
    let props = Scripted::props(probe.tx()).with_mailbox_capacity(1000);
    let a = system.spawn(props, "a").expect("spawn");
    assert_eq!(probe.next(), Seen::Started);
    let outer = a.tell_every(MS, MS, Cmd::Tick("outer"));
    let open = hold(&a, |ctx| {
        let _ = ctx.tell_every(MS, MS, Cmd::Tick("inner"));
    });
    // Both fired into the mailbox of the held actor; then wait for at
    // least 30 intervals on an independent timer.
    eventually(|| pending(&system) == 0);
    let (tx, rx) = std::sync::mpsc::channel();
    let _w = system
        .scheduler_handle()
        .schedule(30 * MS, move || tx.send(()).expect("wake"));
    rx.recv_timeout(PATIENCE)
        .expect("the independent timer fired");
    assert!(
        a.id().queued().is_some_and(|n| n <= 2),
        "{:?}",
        a.id().queued()
    );
    open.send(()).expect("open");
    outer.cancel();
    drop(a);
    shutdown(system);
}

/// A repeating timer from outside to an actor that has stopped: its last
/// message goes to dead letters and the timer ends.
#[test]
fn a_repeating_timer_to_a_stopped_actor_ends() {
    let system = system();
    let dead = dead_letter_probe(&system, |d| format!("{:?}", d.downcast_ref::<Cmd>()));
    let (a, _probe) = spawn(&system, "a");
    stop_and_wait(&a);
    let timer = a.tell_every(MS, MS, Cmd::Tick("to the dead"));
    assert_eq!(dead.next(), "Some(Tick(to the dead))");
    eventually(|| pending(&system) == 0);
    assert!(!timer.cancel(), "already ended");
    drop(a);
    shutdown(system);
}

/// A panic in a repeating timer's message producer fails the actor like a
/// panic in its handler (the worker survives; the default strategy
/// restarts it, which cancels the timer).
#[test]
fn a_panicking_message_producer_fails_the_actor_not_the_worker() {
    let system = system();
    let (a, probe) = spawn(&system, "a");
    exec(&a, |ctx| {
        let _ = ctx.tell_every_with(MS, MS, || panic!("producer panics"));
    });
    assert_eq!(probe.next(), Seen::Started); // restarted
    assert_eq!(pending(&system), 0);
    a.tell(Cmd::Tick("alive"));
    assert_eq!(probe.next(), Seen::Tick("alive"));
    drop(a);
    shutdown(system);
}

/// Starts timers in `post_stop` (a mistake, but a possible one).
struct LateTimers;

impl Actor for LateTimers {
    type Msg = Cmd;

    fn receive(&mut self, _: &mut Context<Self>, _: Cmd) -> Outcome {
        Ok(())
    }

    fn post_stop(&mut self, ctx: &mut Context<Self>) {
        let _ = ctx.tell_after(Duration::from_secs(30), Cmd::Tick("late"));
        ctx.start_single_timer("late", Cmd::Tick("late"), Duration::from_secs(30));
    }
}

/// Even timers started by `post_stop` do not outlive the actor.
#[test]
fn timers_started_in_post_stop_are_cancelled() {
    let system = system();
    let a = system.spawn(Props::new(|| LateTimers), "a").expect("spawn");
    a.stop();
    eventually(|| a.is_terminated());
    assert_eq!(pending(&system), 0);
    assert_eq!(system.dead_letter_count(), 0);
    drop(a);
    shutdown(system);
}

/// A scheduled message that finds a full bounded mailbox goes to dead
/// letters, as any message would; a repeating timer goes on, and delivers
/// once there is room again.
#[test]
fn a_full_mailbox_dead_letters_the_tick_and_the_timer_goes_on() {
    let system = system();
    let dead = dead_letter_probe(&system, |d| format!("{:?}", d.downcast_ref::<Cmd>()));
    let probe = Probe::new();
    let props = Scripted::props(probe.tx()).with_mailbox_capacity(1);
    let a = system.spawn(props, "a").expect("spawn");
    assert_eq!(probe.next(), Seen::Started);
    let open = hold(&a, |_| {});
    a.tell(Cmd::Tick("fill")); // the one place in the mailbox
    let timer = a.tell_every(MS, MS, Cmd::Tick("tick"));
    assert_eq!(
        dead.take(2),
        ["Some(Tick(tick))"; 2],
        "refused, then re-armed"
    );
    open.send(()).expect("open");
    assert_eq!(probe.until(Seen::Tick("tick")), [Seen::Tick("fill")]);
    assert!(timer.cancel());
    drop(a);
    shutdown(system);
}
