//! The programs some tests drive (curl, wrk): whether they are there, and
//! what a test does when one is missing.
//!
//! The convention (README, "Run the tests"): with the environment variable
//! `PROSCENIUM_REQUIRE_PROGRAMS=1`, which .ci/run sets for its test step, a
//! missing program fails the test that needs it, naming the program, so a
//! failed `apt-get install` cannot leave CI green with the test skipped.
//! Unset (or empty, or `0`), as on a developer's machine, the test prints
//! `SKIPPED` with the program's name and returns.
#![allow(dead_code)] // each test file uses a part
#![allow(unreachable_pub)] // a test module: `pub` is for the test files

use std::process::{Command, Stdio};

/// The environment variable that makes a missing program a failure.
pub const REQUIRE_PROGRAMS: &str = "PROSCENIUM_REQUIRE_PROGRAMS";

/// Whether [`REQUIRE_PROGRAMS`] is set to anything but empty or `0` (as
/// `proscenium-remote`'s tests read it).
pub fn required() -> bool {
    std::env::var_os(REQUIRE_PROGRAMS).is_some_and(|v| !v.is_empty() && v != "0")
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
    match availability(program, required) {
        Ok(()) => true,
        Err(skipped) => {
            // On the real stderr, not the harness's captured output, so
            // that the skip shows beside the test's `ok`.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "{skipped}");
            false
        }
    }
}

/// Whether `program` starts: `Ok` if it does; if not, a panic naming it
/// when `required`, else the `SKIPPED` line [`present_when`] prints (the
/// self-test reads it instead, so that a passing run prints no skip).
pub fn availability(program: &str, required: bool) -> Result<(), String> {
    let started = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match started {
        Ok(_) => Ok(()),
        Err(e) => {
            assert!(
                !required,
                "{program} is required ({REQUIRE_PROGRAMS}=1) but cannot be run: {e} \
                 (install it: .ci/run's \"programs the tests drive\" step does)"
            );
            Err(format!(
                "SKIPPED: {program} cannot be run ({e}); install it, or set \
                 {REQUIRE_PROGRAMS}=1 to make this a failure"
            ))
        }
    }
}
