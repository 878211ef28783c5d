//! Stopping an actor, sentence by sentence from `stopping-an-actor.txt`:
//! Stop, the Stop sequence, PoisonPill, Kill, GracefulStop, and where the
//! messages of a stopped actor go (dead letters).
//!
//! The router paragraphs of that document are tested with the routers.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proscenium::prelude::*;
use proscenium::{StopSignal, StrategyKind};
use support::actors::*;
use support::*;

/// The notes that reached dead letters, with their recipient's name.
fn dead_notes(system: &ActorSystem) -> Probe<(String, u32)> {
    dead_letter_probe(system, |d| match d.downcast_ref::<WorkerMsg>() {
        Some(WorkerMsg::Note(n)) => (
            d.recipient()
                .map_or("-".to_owned(), |r| r.name().to_owned()),
            *n,
        ),
        _ => (format!("other: {}", d.message_type()), 0),
    })
}

/// "Stop() the actor: stops the actor immediately after it finishes
/// processing the current message."
///
/// "Is There A Way To Stop An Actor In The Middle Of Processing A Message?
/// No."
///
/// The worker is stopped while its handler is blocked: the handler runs to
/// its end, then the actor stops; what was queued behind is not handled but
/// goes to dead letters.
#[test]
fn stop_takes_effect_after_the_current_message() {
    let system = system();
    let log = Probe::new();
    let dead = dead_notes(&system);
    let w = system.spawn(Worker::props("w", &log.tx()), "w").expect("w");
    let (gate, blocked) = block();
    w.tell(blocked);
    log.until("w blocked");
    w.tell(WorkerMsg::Note(1));
    w.tell(WorkerMsg::Note(2));
    w.stop();
    gate.send(()).expect("unblock");
    assert_eq!(log.until("w stopped"), Vec::<String>::new());
    assert_eq!(dead.take(2), [("w".into(), 1), ("w".into(), 2)]);
    let stopped = w.graceful_stop(PATIENCE).wait();
    assert!(stopped && w.is_terminated());
    assert!(!log.drain_now().iter().any(|l| l.contains("handled")));
    drop(w);
    shutdown(system);
}

/// "This is the sequence of events when you Stop() an actor:
///  1. Actor receives the Stop message and suspends the actor's Mailbox.
///  2. Actor tells all its children to Stop. Stop messages propagate down
///     the hierarchy below the actor.
///  3. Actor waits for all children to stop.
///  4. Actor calls PostStop lifecycle hook method for resource cleanup.
///  5. Actor shuts down."
///
/// A grandchild is blocked in a handler, so the parent has to wait: while
/// it waits, its mailbox is suspended (a message sent to it is not
/// handled), and its `post_stop` comes only after the whole subtree
/// stopped; a watcher learns of the parent's end after that.
#[test]
fn the_stop_sequence() {
    let system = system();
    let log = Probe::new();
    let tx = log.tx();
    let dead = dead_notes(&system);
    let p = system.spawn(Worker::props("p", &tx), "p").expect("p");
    let c1 = spawn_child(&p, "c1");
    let c2 = spawn_child(&p, "c2");
    let g = spawn_child(&c1, "g");
    let watcher = system
        .spawn(Worker::props("watcher", &tx), "watcher")
        .expect("watcher");
    watcher.tell(WorkerMsg::Watch(p.id()));
    // The watch is registered; and every child has started (a child's
    // first run can come after the parent answered the spawn), so no
    // "created"/"started" note of theirs can come after "g blocked" and
    // into the sequence checked below.
    assert_eq!(count(&watcher), 0);
    for child in [&c1, &c2, &g] {
        assert_eq!(count(child), 0);
    }
    let (gate, blocked) = block();
    g.tell(blocked);
    log.until("g blocked");

    p.stop();
    // Step 1: suspended. This note waits in the mailbox and is never
    // handled: it goes to dead letters when the actor has shut down.
    p.tell(WorkerMsg::Note(7));
    // Steps 2 and 3: c2 (idle) stops now; p and c1 wait for g.
    assert_eq!(log.until("c2 stopped"), Vec::<String>::new());
    gate.send(()).expect("unblock g");
    // Steps 4 and 5: children first, then p's post_stop, then the end.
    let rest = log.take(4);
    assert_eq!(
        rest,
        [
            "g stopped",
            "c1 stopped",
            "p stopped",
            "watcher saw p terminate"
        ]
    );
    assert_eq!(dead.next(), ("p".into(), 7));
    drop((p, c1, c2, g, watcher));
    shutdown(system);
}

/// "You Stop() an actor via the ActorContext": an actor stops a child, or
/// itself, through its context.
#[test]
fn stop_through_the_context() {
    let system = system();
    let log = Probe::new();
    let p = system.spawn(Worker::props("p", &log.tx()), "p").expect("p");
    let c = spawn_child(&p, "c");
    p.tell(WorkerMsg::StopOther(c.id()));
    log.until("c stopped");
    assert!(c.graceful_stop(PATIENCE).wait());
    p.tell(WorkerMsg::Note(1));
    p.tell(WorkerMsg::StopSelf);
    p.tell(WorkerMsg::Note(2));
    assert_eq!(log.until("p stopped"), ["p handled 1"]);
    assert!(p.graceful_stop(PATIENCE).wait());
    drop((p, c));
    shutdown(system);
}

/// "Send the actor a PoisonPill: the actor will finish processing the
/// messages currently in its mailbox, and then Stop."
///
/// "The PoisonPill goes to the back of the actor's mailbox. The actor then
/// processes the messages that are ahead of the PoisonPill in the mailbox.
/// Once it reaches the PoisonPill, the actor tells itself to Stop and the
/// sequence above will begin."
///
/// "What Happens to Messages That Queue Up Behind a PoisonPill? They will
/// be drained to DeadLetters, along with any other messages sent to the
/// now-dead actor instance."
///
/// Dead letters are counted and published on the event stream, to callback
/// subscribers and to subscribed actors alike.
#[test]
fn poison_pill_after_the_queued_messages_and_what_follows_it_is_dead() {
    let system = system();
    let log = Probe::new();
    let tx = log.tx();
    let dead = dead_notes(&system);
    // An actor subscriber: a counter of dead letters.
    let counter = system
        .spawn(Worker::props("dl-counter", &tx), "dl-counter")
        .expect("counter");
    system
        .event_stream()
        .subscribe_actor(&counter, |_: &DeadLetter| WorkerMsg::Inc);
    log.until("dl-counter started");
    let before = system.dead_letter_count();

    let w = system.spawn(Worker::props("w", &tx), "w").expect("w");
    counter.tell(WorkerMsg::Watch(w.id()));
    let (gate, blocked) = block();
    w.tell(blocked);
    log.until("w blocked");
    for n in 1..=3 {
        w.tell(WorkerMsg::Note(n));
    }
    w.poison_pill();
    w.tell(WorkerMsg::Note(4));
    w.tell(WorkerMsg::Note(5));
    gate.send(()).expect("unblock");
    assert_eq!(
        log.until("w stopped"),
        ["w handled 1", "w handled 2", "w handled 3"]
    );
    log.until("dl-counter saw w terminate");
    w.tell(WorkerMsg::Note(6)); // sent to the now-dead actor
    assert_eq!(
        dead.take(3),
        [("w".into(), 4), ("w".into(), 5), ("w".into(), 6)]
    );
    assert_eq!(system.dead_letter_count() - before, 3);
    // The actor subscriber got all three too (the count is a barrier: the
    // events were sent to it before `Get`).
    let deadline = Instant::now() + PATIENCE;
    while count(&counter) < 3 {
        assert!(Instant::now() < deadline, "the subscriber missed letters");
        std::thread::yield_now();
    }
    assert_eq!(count(&counter), 3);
    drop((w, counter));
    shutdown(system);
}

/// "Kill will cause an actor to be Stopped by its supervisor. In the
/// process, the supervisor will log the ActorKilledException."
///
/// "1. The actor throws an ActorKilledException. The actor's supervisor
/// logs this message. Note: This suspends the actor mailbox from
/// processing further user messages. 2. The actor's supervisor handles the
/// ActorKilledException and issues a Stop directive. 3. The actor will
/// stop per the Stop sequence outlined above."
///
/// "In Between Killing an Actor and Its Supervisor Issuing It a Stop
/// Directive, Can Other User Messages Get Processed? No. When an actor
/// faults—such as the ActorKilledException thrown by Kill— the actor's
/// mailbox is suspended and will not process any more user messages. The
/// actor will still receive the system-level Stop directive and will then
/// shut down."
///
/// The supervisor is held busy while the child takes the Kill, so the
/// child sits failed with two notes queued behind the Kill: they are never
/// handled, and end in dead letters once the supervisor's Stop arrives.
#[test]
fn kill_is_logged_and_stops_through_the_supervisor() {
    let logs = Logs::capture();
    let system = system();
    let log = Probe::new();
    let tx = log.tx();
    let dead = dead_notes(&system);
    let boss = system
        .spawn(Boss::props(&tx, StrategyKind::OneForOne, None), "kill-boss")
        .expect("boss");
    let w = hire(
        &boss,
        Worker::props("w", &tx).with_mailbox_capacity(16),
        "w",
    );
    log.until("w started");
    let (boss_gate, held) = gate();
    boss.tell(BossMsg::Block(held));
    log.until("boss blocked");
    w.kill();
    w.tell(WorkerMsg::Note(1));
    w.tell(WorkerMsg::Note(2));
    // Wait until the child has taken the Kill (and failed): the bounded
    // mailbox reports the two notes behind it.
    let deadline = Instant::now() + PATIENCE;
    while w.id().queued() > Some(2) {
        assert!(
            Instant::now() < deadline,
            "the Kill was never taken: {:?} {:?}",
            w.id().queued(),
            log.drain_now()
        );
        std::thread::yield_now();
    }
    boss_gate.send(()).expect("unblock the boss");
    let before_stop = log.until("w stopped");
    assert_eq!(
        before_stop,
        ["boss decided Stop for /user/kill-boss/w: the actor was killed"]
    );
    assert_eq!(dead.take(2), [("w".into(), 1), ("w".into(), 2)]);
    // Logged with tracing, at error level, naming the actor and the cause.
    let line = logs.wait_for(&["actor failed", "/user/kill-boss/w"]);
    assert!(line.contains("ERROR"), "{line}");
    assert!(line.contains("killed"), "{line}");
    assert!(line.contains("Stop"), "{line}");
    drop((boss, w));
    shutdown(system);
}

/// "By default, the actor will be sent a PoisionPill and will return your
/// caller a Task<bool> which will complete within the timeout you
/// specify."
///
/// "GracefulStop is if you want your caller to get confirmation that the
/// actor was stopped within the timeout you set."
///
/// The confirmation is a future: awaited here on the engine's own
/// scheduler, and waited on from a plain thread.
#[test]
fn graceful_stop_confirms_after_the_queued_messages() {
    let system = system();
    let log = Probe::new();
    let w = system.spawn(Worker::props("w", &log.tx()), "w").expect("w");
    log.until("w started");
    for n in 1..=3 {
        w.tell(WorkerMsg::Note(n));
    }
    let stop = w.graceful_stop(PATIENCE);
    let stopped = proscenium_scheduler::block_on(stop);
    assert!(stopped);
    assert!(w.is_terminated());
    assert_eq!(
        log.until("w stopped"),
        ["w handled 1", "w handled 2", "w handled 3"]
    );
    // Asking again, of an actor already gone, confirms at once.
    assert!(w.graceful_stop(Duration::from_millis(1)).wait());
    drop(w);
    shutdown(system);
}

/// "Does An Actor Ever Get "stuck"? i.e. It Can't Be Stopped. Sort of. If
/// you have an actor that is stuck in some sort of infinite loop or that
/// has indefinitely blocked while waiting for some call to complete, that
/// could block the shutdown."
///
/// GracefulStop answers `false` when the timeout passes first; the stop is
/// not withdrawn, and happens once the handler returns.
#[test]
fn graceful_stop_answers_false_when_the_actor_is_stuck() {
    let system = system();
    let log = Probe::new();
    let w = system.spawn(Worker::props("w", &log.tx()), "w").expect("w");
    let (gate, blocked) = block();
    w.tell(blocked);
    log.until("w blocked");
    assert!(!w.graceful_stop(Duration::from_millis(50)).wait());
    assert!(!w.is_terminated());
    gate.send(()).expect("unblock");
    log.until("w stopped");
    assert!(w.graceful_stop(PATIENCE).wait());
    drop(w);
    shutdown(system);
}

/// "By default, the actor will be sent a PoisionPill and will return your
/// caller a Task<bool> which will complete within the timeout you
/// specify."
///
/// A full bounded mailbox refuses the PoisonPill (or the Kill of
/// `graceful_stop_by`): the graceful stop then stops the actor on its
/// system lane instead, after the message it is handling now, so the
/// confirmation still comes; what was queued goes to dead letters.
#[test]
fn graceful_stop_of_an_actor_whose_bounded_mailbox_is_full() {
    for signal in [StopSignal::PoisonPill, StopSignal::Kill] {
        let system = system();
        let log = Probe::new();
        let dead = dead_notes(&system);
        let props = Worker::props("w", &log.tx()).with_mailbox_capacity(1);
        let w = system.spawn(props, "w").expect("w");
        let (gate, blocked) = block();
        w.tell(blocked);
        log.until("w blocked");
        w.tell(WorkerMsg::Note(1));
        assert_eq!(w.id().queued(), Some(1), "the mailbox is full");
        let stop = w.graceful_stop_by(signal, PATIENCE);
        gate.send(()).expect("unblock");
        assert!(stop.wait(), "{signal:?}: the actor stopped");
        assert_eq!(dead.next(), ("w".into(), 1), "{signal:?}");
        assert_eq!(system.dead_letter_count(), 1, "{signal:?}: only the note");
        assert!(!log.drain_now().iter().any(|l| l.contains("handled")));
        drop(w);
        shutdown(system);
    }
}

/// "There is also an overload you can use to swap in a different message
/// for PoisonPill (e.g. Stop instead of PoisonPill)."
///
/// With Stop, the queued notes are not handled (dead letters); with a user
/// message of the actor's own (which makes it stop itself), they are
/// handled first, in order.
#[test]
fn graceful_stop_with_another_message() {
    let system = system();
    let log = Probe::new();
    let tx = log.tx();
    let dead = dead_notes(&system);

    let a = system.spawn(Worker::props("a", &tx), "a").expect("a");
    let (gate, blocked) = block();
    a.tell(blocked);
    log.until("a blocked");
    a.tell(WorkerMsg::Note(1));
    let stop = a.graceful_stop_by(StopSignal::Stop, PATIENCE);
    gate.send(()).expect("unblock");
    assert!(stop.wait());
    assert_eq!(log.until("a stopped"), Vec::<String>::new());
    assert_eq!(dead.next(), ("a".into(), 1));

    let b = system.spawn(Worker::props("b", &tx), "b").expect("b");
    let (gate, blocked) = block();
    b.tell(blocked);
    log.until("b blocked");
    b.tell(WorkerMsg::Note(1));
    let stop = b.graceful_stop_with(WorkerMsg::StopSelf, PATIENCE);
    b.tell(WorkerMsg::Note(2)); // behind the stop message: dead
    gate.send(()).expect("unblock");
    assert!(stop.wait());
    assert_eq!(log.until("b stopped"), ["b handled 1"]);
    assert_eq!(dead.next(), ("b".into(), 2));

    // Through the untyped handle too (Kill: stopped by the default decider).
    let c = system.spawn(Worker::props("c", &tx), "c").expect("c");
    assert!(c.id().graceful_stop_by(StopSignal::Kill, PATIENCE).wait());
    log.until("c stopped");
    drop((a, b, c));
    shutdown(system);
}

/// Stopping a stopped actor, or stopping twice, is harmless: one
/// `post_stop`, and the stops that find the actor gone are not dead
/// letters (a Stop is a signal, not a user's message). The PoisonPill of
/// the graceful stop may find the actor already stopping: that one is a
/// dead letter (as in Akka), and nothing else is.
#[test]
fn stopping_twice_is_harmless() {
    let system = system();
    let log = Probe::new();
    let dead = Arc::new(AtomicUsize::new(0));
    let d = dead.clone();
    system.event_stream().subscribe(move |l: &DeadLetter| {
        if l.downcast_ref::<proscenium::PoisonPill>().is_none() {
            d.fetch_add(1, Ordering::SeqCst);
        }
    });
    let w = system.spawn(Worker::props("w", &log.tx()), "w").expect("w");
    log.until("w started");
    w.stop();
    w.stop();
    assert!(w.graceful_stop(PATIENCE).wait());
    w.stop();
    w.id().stop();
    assert_eq!(log.until("w stopped"), Vec::<String>::new());
    drop(w);
    shutdown(system);
    assert!(log.drain_now().is_empty(), "post_stop ran once");
    assert_eq!(dead.load(Ordering::SeqCst), 0);
}
