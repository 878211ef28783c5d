//! User code that misbehaves outside the handlers the engine calls it
//! through: values whose `Drop` panics (a queued message, a stashed one, a
//! timer's payload, what a `Props` factory captured), and an event-stream
//! subscriber that publishes from inside a publish. None of it may wedge
//! an actor (a run that never releases its cell) or abort the process, and
//! an actor's termination still completes: its `post_stop` runs once, its
//! parent and its watchers are told, and its messages reach dead letters
//! exactly once.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use proscenium::prelude::*;
use support::actors::*;
use support::*;

/// A value whose `Drop` panics: user code the engine has to contain. It
/// stays quiet while its thread is already unwinding (a second panic would
/// abort the process, and the test would learn nothing more).
struct Bomb(&'static str);

impl Drop for Bomb {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("the {} bomb went off", self.0);
        }
    }
}

enum VictimMsg {
    /// Log `"victim blocked"` and wait for the gate.
    Block(Gate),
    /// Carries a bomb; never handled in these tests (handling it would
    /// drop it inside `receive`, which fails the actor: another story).
    Bomb(#[allow(dead_code)] Bomb),
    /// Stash the bomb.
    Keep(Bomb),
    /// Start a single and a repeating timer whose payloads hold bombs, an
    /// hour away: cancelled when the actor stops.
    Arm(Bomb, Bomb),
}

/// Logs `"victim started"`, `"victim blocked"`, `"victim stopped"`.
struct Victim {
    log: Log,
}

impl Victim {
    fn props(log: &Log) -> Props<Victim> {
        let log = log.clone();
        Props::new(move || Victim { log: log.clone() })
    }
}

impl Actor for Victim {
    type Msg = VictimMsg;

    fn pre_start(&mut self, _ctx: &mut Context<Self>) -> Outcome {
        let _ = self.log.send("victim started".to_owned());
        Ok(())
    }

    fn receive(&mut self, ctx: &mut Context<Self>, msg: VictimMsg) -> Outcome {
        match msg {
            VictimMsg::Block(gate) => {
                let _ = self.log.send("victim blocked".to_owned());
                let _ = gate.lock().expect("gate").recv();
            }
            VictimMsg::Keep(bomb) => {
                if ctx.stash(VictimMsg::Bomb(bomb)).is_err() {
                    return Err("the stash is full".into());
                }
            }
            VictimMsg::Arm(once, every) => {
                let hour = Duration::from_secs(3600);
                let _single = ctx.tell_after(hour, VictimMsg::Bomb(once));
                let _repeating = ctx.tell_every_with(hour, hour, move || {
                    let _armed = &every;
                    VictimMsg::Bomb(Bomb("made by a timer"))
                });
            }
            VictimMsg::Bomb(_) => unreachable!("never handled in these tests"),
        }
        Ok(())
    }

    fn post_stop(&mut self, _ctx: &mut Context<Self>) {
        let _ = self.log.send("victim stopped".to_owned());
    }
}

/// A victim, and a watcher (a `Worker` logging `"watcher saw victim
/// terminate"`) watching it; returns once both have started.
fn victim_and_watcher(
    system: &ActorSystem,
    log: &Probe<String>,
    props: Props<Victim>,
) -> (ActorRef<VictimMsg>, ActorRef<WorkerMsg>) {
    let victim = system.spawn(props, "victim").expect("victim");
    log.until("victim started");
    let watcher = system
        .spawn(Worker::props("watcher", &log.tx()), "watcher")
        .expect("watcher");
    watcher.tell(WorkerMsg::Watch(victim.id()));
    log.until("watcher started");
    (victim, watcher)
}

/// The victim has stopped and everyone was told: `post_stop` ran once, the
/// watcher got its Terminated, and a graceful stop confirms at once.
#[track_caller]
fn assert_stopped_and_told(log: &Probe<String>, victim: &ActorRef<VictimMsg>) {
    let lines = log.until("watcher saw victim terminate");
    let stops = lines.iter().filter(|l| *l == "victim stopped").count();
    assert_eq!(stops, 1, "post_stop ran once: {lines:?}");
    assert!(victim.graceful_stop(PATIENCE).wait(), "terminated");
}

/// Terminates the system (its parent, `/user`, must learn of the victim's
/// end for that) and checks that every cell was freed, the victim's too,
/// and that each panic was contained where it happened: none reached the
/// backstop around the actor's run.
fn terminate_and_free(system: ActorSystem) {
    shutdown(system.clone());
    assert_eq!(system.live_cells(), 0, "every cell freed");
    assert_eq!(system.escaped_panics(), 0, "contained where they happened");
}

/// "What Happens to Messages That Queue Up Behind a PoisonPill? They will
/// be drained to DeadLetters, along with any other messages sent to the
/// now-dead actor instance." (stopping-an-actor.txt)
///
/// The message queued behind the PoisonPill panics when it is dropped
/// after its dead letter was published: the actor still terminates, its
/// watcher and its parent are told, and the message is a dead letter once.
#[test]
fn a_message_whose_drop_panics_queued_behind_a_poison_pill() {
    let system = system();
    let log = Probe::new();
    let dead = dead_letter_probe(&system, |d| d.message_type().to_owned());
    let (victim, watcher) = victim_and_watcher(&system, &log, Victim::props(&log.tx()));
    let (open, gate) = gate();
    victim.tell(VictimMsg::Block(gate));
    log.until("victim blocked");
    victim.poison_pill();
    victim.tell(VictimMsg::Bomb(Bomb("queued")));
    open.send(()).expect("unblock");
    assert_stopped_and_told(&log, &victim);
    assert_eq!(dead.next(), std::any::type_name::<VictimMsg>());
    assert_eq!(system.dead_letter_count(), 1, "one dead letter, once");
    drop((victim, watcher));
    terminate_and_free(system);
}

/// The factory of the victim's `Props` captured a value whose `Drop`
/// panics; the props are dropped when the actor terminates.
#[test]
fn a_props_factory_whose_captured_value_panics_on_drop() {
    let system = system();
    let log = Probe::new();
    let tx = log.tx();
    let bomb = Bomb("props");
    let props = Props::new(move || {
        let _armed = &bomb;
        Victim { log: tx.clone() }
    });
    let (victim, watcher) = victim_and_watcher(&system, &log, props);
    victim.poison_pill();
    assert_stopped_and_told(&log, &victim);
    assert_eq!(system.dead_letter_count(), 0);
    drop((victim, watcher));
    terminate_and_free(system);
}

/// The stash "goes to dead letters" when the actor stops (stash.rs); here
/// the stashed message panics when it is dropped after that.
#[test]
fn a_stashed_message_whose_drop_panics_when_the_actor_stops() {
    let system = system();
    let log = Probe::new();
    let dead = dead_letter_probe(&system, |d| d.message_type().to_owned());
    let (victim, watcher) = victim_and_watcher(&system, &log, Victim::props(&log.tx()));
    victim.tell(VictimMsg::Keep(Bomb("stashed")));
    victim.poison_pill();
    assert_stopped_and_told(&log, &victim);
    assert_eq!(dead.next(), std::any::type_name::<VictimMsg>());
    assert_eq!(system.dead_letter_count(), 1, "one dead letter, once");
    drop((victim, watcher));
    terminate_and_free(system);
}

/// No timer outlives its actor (timers.rs): stopping cancels the victim's
/// timers, which drops their payloads, and those panic.
#[test]
fn timer_payloads_whose_drop_panics_when_the_stop_cancels_them() {
    let system = system();
    let log = Probe::new();
    let (victim, watcher) = victim_and_watcher(&system, &log, Victim::props(&log.tx()));
    victim.tell(VictimMsg::Arm(
        Bomb("single timer"),
        Bomb("repeating timer"),
    ));
    victim.poison_pill();
    assert_stopped_and_told(&log, &victim);
    assert_eq!(
        system.dead_letter_count(),
        0,
        "a cancelled timer sends nothing, not even to dead letters"
    );
    drop((victim, watcher));
    terminate_and_free(system);
}

/// A closure subscribed to dead letters tells an actor that has stopped:
/// each tell is a dead letter, published to the same closure. The nesting
/// is cut off (the process lives, the tell returns), and every dead letter
/// is still counted once: the deliveries plus the one not delivered, which
/// is counted on the event stream and logged.
#[test]
fn a_dead_letter_subscriber_telling_a_stopped_actor_does_not_recurse_forever() {
    let logs = Logs::capture();
    let system = system();
    let log = Probe::new();
    let gone = system
        .spawn(Worker::props("gone", &log.tx()), "gone")
        .expect("gone");
    assert!(gone.graceful_stop(PATIENCE).wait());
    let delivered = Arc::new(AtomicU64::new(0));
    let (target, seen) = (gone.clone(), Arc::clone(&delivered));
    let sub = system.event_stream().subscribe(move |_: &DeadLetter| {
        seen.fetch_add(1, Ordering::Relaxed);
        target.tell(WorkerMsg::Inc);
    });
    let before = system.dead_letter_count();
    gone.tell(WorkerMsg::Inc);
    // All of it ran on this thread, inside the tell.
    let delivered = delivered.load(Ordering::Relaxed);
    assert!(
        (1..=16).contains(&delivered),
        "{delivered} nested deliveries"
    );
    assert_eq!(system.dead_letter_count() - before, delivered + 1);
    assert_eq!(system.event_stream().dropped_reentrant(), 1, "counted");
    logs.wait_for(&["WARN", "not handed to callback subscribers", "cut_off=1"]);
    assert!(system.event_stream().unsubscribe(&sub));
    drop(gone);
    terminate_and_free(system);
}
