//! The receive timeout: a message after a stretch of idleness, again after
//! each further stretch, reset by every user message, cancellable; one
//! timer per actor, never one per message.
//!
//! Not in the seed documents; the Akka behaviour is quoted, in our words,
//! from Akka's documentation of `setReceiveTimeout`. Time is asserted only
//! as "at least".

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::scripted::*;
use support::*;

const MS: Duration = Duration::from_millis(1);

/// Akka: "the receive timeout ... triggers the sending of a ReceiveTimeout
/// message after [the actor has been] idle" for the given duration, and
/// "once set, the receive timeout stays in effect (i.e. continues firing
/// repeatedly after inactivity periods)".
#[test]
fn fires_after_idleness_and_again_while_idle() {
    let system = system();
    let probe = Probe::new();
    let started = Instant::now();
    let props = Scripted::props_with_start(probe.tx(), |ctx| {
        ctx.set_receive_timeout(20 * MS, || Cmd::Tick("idle"));
    });
    let a = system.spawn(props, "a").expect("spawn");
    assert_eq!(probe.next(), Seen::Started);
    assert_eq!(probe.next(), Seen::Tick("idle"));
    assert!(started.elapsed() >= 20 * MS);
    assert_eq!(probe.next(), Seen::Tick("idle"));
    assert!(started.elapsed() >= 40 * MS);
    assert_eq!(
        exec(&a, |ctx| ctx.receive_timeout()),
        Some(20 * MS),
        "still set"
    );
    drop(a);
    shutdown(system);
}

/// Akka: the timeout is reset by every message the actor receives. Work
/// is sent every few milliseconds for several timeouts; every timeout
/// message that arrives comes at least one timeout after the work handled
/// just before it was sent, which a timer blind to messages would break.
#[test]
fn every_message_resets_it() {
    const TIMEOUT: Duration = Duration::from_millis(40);
    let system = system();
    let probe = Probe::new();
    let props = Scripted::props_with_start(probe.tx(), |ctx| {
        ctx.set_receive_timeout(TIMEOUT, || Cmd::Tick("idle"));
    });
    let a = system.spawn(props, "a").expect("spawn");
    assert_eq!(probe.next(), Seen::Started);
    // When the work before the current one was sent (first: the start).
    let mut prev_sent = Instant::now();
    let mut last_sent = prev_sent;
    for _ in 0..30 {
        last_sent = Instant::now();
        a.tell(Cmd::Tick("work"));
        // Handled before this work: at least a timeout after the previous.
        for seen in probe.until(Seen::Tick("work")) {
            assert_eq!(seen, Seen::Tick("idle"));
            assert!(
                prev_sent.elapsed() >= TIMEOUT,
                "a timeout despite recent work"
            );
        }
        // Pacing only (no assertion depends on it): well under the
        // timeout, so on a healthy run no timeout fires meanwhile.
        std::thread::sleep(4 * MS);
        for seen in probe.drain_now() {
            assert_eq!(seen, Seen::Tick("idle"));
            assert!(
                last_sent.elapsed() >= TIMEOUT,
                "a timeout despite recent work"
            );
        }
        prev_sent = last_sent;
    }
    // Idle at last: it fires, at least a timeout after the last work.
    assert_eq!(probe.next(), Seen::Tick("idle"));
    assert!(last_sent.elapsed() >= TIMEOUT);
    drop(a);
    shutdown(system);
}

/// Akka: `setReceiveTimeout(Duration.Undefined)` (here
/// `cancel_receive_timeout`) "switches off this feature": no timeout
/// message is handled after the cancel, even one already queued.
#[test]
fn cancelled_it_no_longer_fires() {
    let system = system();
    let (a, probe) = {
        let probe = Probe::new();
        let a = system
            .spawn(Scripted::props(probe.tx()), "a")
            .expect("spawn");
        assert_eq!(probe.next(), Seen::Started);
        (a, probe)
    };
    exec(&a, |ctx| {
        ctx.set_receive_timeout(10 * MS, || Cmd::Tick("idle"))
    });
    assert_eq!(probe.next(), Seen::Tick("idle"));
    exec(&a, |ctx| {
        ctx.cancel_receive_timeout();
        assert_eq!(ctx.receive_timeout(), None);
    });
    // Whatever was delivered before the cancel, nothing after it.
    a.tell(Cmd::Tick("cancelled"));
    probe.until(Seen::Tick("cancelled"));
    assert_eq!(system.scheduler_handle().timers_pending(), 0);
    let _later = a.tell_after(50 * MS, Cmd::Tick("later"));
    assert_eq!(probe.next(), Seen::Tick("later"));
    drop(a);
    shutdown(system);
}

/// Cheap on the hot path: one timer per actor whatever the traffic (a
/// handled message only stores the time).
#[test]
fn one_timer_however_many_messages() {
    let system = system();
    let probe = Probe::new();
    let props = Scripted::props_with_start(probe.tx(), |ctx| {
        ctx.set_receive_timeout(Duration::from_secs(30), || Cmd::Tick("idle"));
    });
    let a = system.spawn(props, "a").expect("spawn");
    assert_eq!(probe.next(), Seen::Started);
    let count = Arc::new(Mutex::new(0u32));
    for _ in 0..1000 {
        let count = Arc::clone(&count);
        a.tell(Cmd::Run(Arc::new(move |_| {
            *count.lock().expect("count") += 1;
        })));
    }
    let pending = exec(&a, |ctx| ctx.system().scheduler_handle().timers_pending());
    assert_eq!(*count.lock().expect("count"), 1000);
    assert_eq!(pending, 1);
    drop(a);
    shutdown(system);
}
