//! loom models of proscenium live in `tests/`; this library holds what
//! several of them share.
//!
//! [`isolated`] runs a model in a child process of its test binary. A model
//! that deadlocks (or fails otherwise) makes loom panic, and the unwinding
//! drops the model's loom objects outside the execution, where their
//! destructors panic again: the process aborts, and the other models of the
//! binary never report. In a child process, the abort is the failure of
//! that one test, reported with the child's output.

use std::process::Command;

/// The environment variable that tells a child process which model to run.
const CHILD: &str = "PROSCENIUM_LOOM_ISOLATED";

/// Runs `model` in a child process of this test binary (which runs only the
/// test named `name`, with the same environment); fails if the child fails
/// or aborts, with its output. `name` is the test's name as libtest knows
/// it (for a test at the root of a test file, the function's name). In the
/// child, runs `model` directly.
pub fn isolated(name: &str, model: impl FnOnce()) {
    if std::env::var_os(CHILD).is_some_and(|n| n == name) {
        model();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = Command::new(exe)
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(CHILD, name)
        .output()
        .expect("could not run the model's child process");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // A misspelt name would run no test and pass.
    assert!(
        stdout.contains("running 1 test"),
        "the child ran no test named {name:?}:\n{stdout}\n{stderr}"
    );
    if !output.status.success() {
        // The first panic's message comes first (a backtrace may follow).
        let head = |s: &str| s.lines().take(40).collect::<Vec<_>>().join("\n");
        panic!(
            "model {name} failed in its child process ({}):\n--- stderr\n{}\n--- stdout\n{}",
            output.status,
            head(&stderr),
            head(&stdout)
        );
    }
}

/// `loom::model(model)` in a child process of this test binary (see
/// [`isolated`]): for the models that can deadlock, so that a deadlock
/// fails only its own test. `name` is the test's name.
#[cfg(loom)]
pub fn model(name: &str, model: impl Fn() + Sync + Send + 'static) {
    isolated(name, || loom::model(model));
}
