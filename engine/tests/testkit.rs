//! The testkit itself (`proscenium::testkit`): what its expectations
//! accept, and what their failures say.

use std::time::Duration;

use proscenium::testkit::{EventProbe, TestProbe, TestSystem, PATIENCE};

/// The text of a panic that `f` raises.
fn panic_text(f: impl FnOnce()) -> String {
    let payload = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .expect_err("the expectation fails");
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

#[derive(Debug, PartialEq)]
enum Msg {
    Ping(u32),
    Pong,
}

#[test]
fn expectations_pass_on_what_came() {
    let system = TestSystem::new();
    let probe = TestProbe::<Msg>::new(&system);
    let to = probe.actor_ref();
    to.tell(Msg::Ping(1));
    to.tell(Msg::Ping(2));
    to.tell(Msg::Pong);
    to.tell(Msg::Pong);
    assert_eq!(probe.expect_msg(PATIENCE), Msg::Ping(1));
    assert_eq!(
        probe.expect_msg_matching(|m| matches!(m, Msg::Ping(n) if *n > 1), PATIENCE),
        Msg::Ping(2)
    );
    probe.expect_msg_eq(Msg::Pong, PATIENCE);
    assert_eq!(probe.receive_n(1, PATIENCE), [Msg::Pong]);
    probe.expect_no_msg(Duration::from_millis(20));
    assert_eq!(probe.id(), to.id());
    assert!(probe.id().path().starts_with("/system/testProbe-"));
}

#[test]
fn failures_say_what_was_expected_and_what_came() {
    let system = TestSystem::new();
    let probe = TestProbe::<Msg>::new(&system);
    let to = probe.actor_ref();
    let short = Duration::from_millis(20);

    let text = panic_text(|| {
        let _ = probe.expect_msg(short);
    });
    assert!(text.contains("expected a message"), "{text}");
    assert!(text.contains("nothing came"), "{text}");

    to.tell(Msg::Ping(3));
    let text = panic_text(|| {
        let _ = probe.expect_msg_eq(Msg::Pong, PATIENCE);
    });
    assert!(text.contains("expected Pong, got Ping(3)"), "{text}");

    to.tell(Msg::Ping(4));
    let text = panic_text(|| {
        let _ = probe.expect_msg_matching(|m| *m == Msg::Pong, PATIENCE);
    });
    assert!(text.contains("got Ping(4)"), "{text}");

    to.tell(Msg::Pong);
    let text = panic_text(|| probe.expect_no_msg(short));
    assert!(text.contains("expected no message"), "{text}");
    assert!(text.contains("Msg"), "the type name: {text}");

    to.tell(Msg::Pong);
    let text = panic_text(|| drop(probe.receive_n(3, short)));
    assert!(text.contains("expected 3 messages"), "{text}");
    assert!(text.contains("got 1"), "{text}");

    let other = TestProbe::<u8>::new(&system);
    let other_id = other.id();
    probe.watch(&other_id);
    to.tell(Msg::Pong); // `other` is alive: the message is all that comes
    let text = panic_text(|| probe.expect_terminated(&other_id, PATIENCE));
    assert!(text.contains("got a message"), "{text}");
    drop(other); // stops its actor
    let text = panic_text(|| {
        let _ = probe.expect_msg(PATIENCE);
    });
    assert!(
        text.contains("got the termination of /system/testProbe-"),
        "{text}"
    );
}

#[test]
fn an_event_probe_records_dead_letters_and_events_in_order() {
    let system = TestSystem::new();
    let events = EventProbe::dead_letters(&system).subscribe::<u32>();
    let gone = TestProbe::<String>::new(&system);
    let to = gone.actor_ref();
    drop(gone);
    to.when_terminated().wait();
    to.tell("hello".to_owned());
    system.event_stream().publish(5_u32);
    let letter = events.expect_dead_letter(PATIENCE);
    assert_eq!(letter.recipient, Some(to.id()));
    assert!(letter.is::<String>());
    assert_eq!(events.expect_event::<u32>(PATIENCE), 5);
    events.expect_no_event(Duration::from_millis(20));

    system.event_stream().publish(6_u32);
    let text = panic_text(|| drop(events.expect_dead_letter(PATIENCE)));
    assert!(text.contains("ObservedDeadLetter"), "{text}");
    assert!(text.contains("got a u32"), "{text}");

    system.event_stream().publish(7_u32);
    system.event_stream().publish(8_u32);
    assert_eq!(events.fish_event(|n: &u32| *n == 8, PATIENCE), 8);
    drop(events);
    assert!(
        !system.event_stream().has_subscribers::<u32>(),
        "unsubscribed"
    );
}

/// A test that fails while its system is alive reports its own failure:
/// the system's drop does not panic again (which would abort).
#[test]
#[should_panic(expected = "the test's own failure")]
fn a_failing_test_keeps_its_own_message() {
    let system = TestSystem::new();
    let _probe = TestProbe::<u8>::new(&system);
    panic!("the test's own failure");
}

/// `shutdown` returns the report; the preset is 2 unpinned workers.
#[test]
fn shutdown_reports_a_clean_termination() {
    let system = TestSystem::new();
    assert_eq!(system.name(), "test");
    let report = system.shutdown();
    assert!(report.clean());
    assert_eq!(report.quiesce.map(|q| q.workers_joined), Some(2));
}
