//! What `SystemBuilder::build` refuses, with a typed error and before any
//! thread starts; and what it says about the signals it takes.

mod support;

use proscenium::testkit::TestSystem;
use proscenium::{ActorSystem, SystemError};

fn build_named(name: &str) -> Result<ActorSystem, SystemError> {
    ActorSystem::builder()
        .name(name)
        .workers(1)
        .pin_workers(false)
        .build()
}

#[test]
fn a_system_name_with_a_nul_is_a_typed_error() {
    // std's thread builder refuses such a name (the worker threads are
    // named after the system): this used to panic.
    let err = build_named("a\0b").expect_err("a NUL is refused");
    assert!(
        matches!(&err, SystemError::InvalidName { name, .. } if name == "a\0b"),
        "{err:?}"
    );
    assert!(err.to_string().contains("NUL"), "{err}");
}

#[test]
fn an_empty_system_name_is_a_typed_error() {
    let err = build_named("").expect_err("an empty name is refused");
    assert!(
        matches!(&err, SystemError::InvalidName { name, .. } if name.is_empty()),
        "{err:?}"
    );
    assert!(err.to_string().contains("empty"), "{err}");
}

#[test]
fn a_valid_name_still_builds() {
    let system = build_named("named-system").expect("a plain name builds");
    assert_eq!(system.name(), "named-system");
    let report = system
        .terminate()
        .wait_timeout(std::time::Duration::from_secs(20))
        .expect("terminates");
    assert!(report.clean(), "{report:?}");
}

/// Signals are per process and go to every registered system: a system
/// that registers while another is registered says so (at info level), and
/// one built with `run_by_signals(false)` (the TestSystem preset) does not
/// register, so says nothing. No signal is sent: the child-process tests
/// in signals.rs do that.
#[test]
fn a_second_system_taking_the_signals_says_so() {
    let logs = support::Logs::capture();
    // Default config: signals on (names unique in this binary).
    let first = build_named("signals-first").expect("first");
    let second = build_named("signals-second").expect("second");
    let line = logs.wait_for(&["signals-second", "SIGTERM/SIGINT", "every"]);
    assert!(line.contains("INFO"), "{line}");
    assert!(line.contains("run_by_signals(false)"), "{line}");
    let quiet = TestSystem::build(TestSystem::builder().name("signals-quiet")).expect("quiet");
    drop(quiet);
    assert!(
        logs.lines_with(&["signals-quiet", "SIGTERM/SIGINT"])
            .is_empty(),
        "a system without signal handlers says nothing about them"
    );
    for system in [second, first] {
        assert!(system.terminate().wait().clean());
    }
}
