//! What `SystemBuilder::build` refuses, with a typed error and before any
//! thread starts.

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
