//! The programs some tests drive (curl, wrk): whether they are there, and
//! what a test does when one is missing.
//!
//! The convention (README, "Run the tests"): with the environment variable
//! `PROSCENIUM_REQUIRE_PROGRAMS=1`, which .ci/run sets for its test step, a
//! missing program fails the test that needs it, naming the program, so a
//! failed `apt-get install` cannot leave CI green with the test skipped.
//! Unset (or `0`), as on a developer's machine, the test prints `SKIPPED`
//! with the program's name and returns.
#![allow(dead_code)] // each test file uses a part
#![allow(unreachable_pub)] // a test module: `pub` is for the test files

use std::process::{Command, Stdio};

/// The environment variable that makes a missing program a failure.
pub const REQUIRE_PROGRAMS: &str = "PROSCENIUM_REQUIRE_PROGRAMS";

/// Whether [`REQUIRE_PROGRAMS`] is set to `1`; unset, empty or `0` is
/// `false`, any other value fails the test (a typo must not silently
/// mean "skip").
pub fn required() -> bool {
    match std::env::var(REQUIRE_PROGRAMS) {
        Ok(v) if v == "1" => true,
        Ok(v) if v.is_empty() || v == "0" => false,
        Err(std::env::VarError::NotPresent) => false,
        other => panic!("{REQUIRE_PROGRAMS} must be 1, 0 or unset, not {other:?}"),
    }
}

/// Whether a test that runs `program` goes on: `true` if `program` starts
/// (`program --version`; its exit status is not looked at: `wrk
/// --version` exits 1). Missing, it fails the test if [`required`], else
/// prints why the test is skipped and returns `false`.
pub fn present(program: &str) -> bool {
    present_when(program, required())
}

/// [`present`] with the requirement given (tested without touching the
/// process's environment, which tests running in parallel share).
pub fn present_when(program: &str, required: bool) -> bool {
    let started = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match started {
        Ok(_) => true,
        Err(e) => {
            assert!(
                !required,
                "{program} is required ({REQUIRE_PROGRAMS}=1) but cannot be run: {e} \
                 (install it: .ci/run's \"programs the tests drive\" step does)"
            );
            eprintln!(
                "SKIPPED: {program} cannot be run ({e}); install it, or set \
                 {REQUIRE_PROGRAMS}=1 to make this a failure"
            );
            false
        }
    }
}
