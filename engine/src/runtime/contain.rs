//! Containing panics from user code that the engine runs outside the
//! handlers it calls through `Driver::call`: mostly `Drop` impls (a message
//! handed to dead letters, a stashed one, a timer's payload, what a
//! `Props` factory captured). A panic there must not cut a lifecycle step
//! short (a termination that never tells the parent) nor unwind out of an
//! actor's run (a cell left held): it is logged, and the step goes on.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::supervision::failure::panic_message;

/// Runs `f`; a panic in it is logged, naming `what`, and goes no further.
#[inline]
pub(crate) fn contain(what: &'static str, f: impl FnOnce()) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
        report(payload, |panic| {
            tracing::error!(panic, "{what} panicked; the panic was contained");
        });
    }
}

/// Hands a caught panic's message to `log`, then drops the payload. Both
/// steps may panic in turn (a panicking tracing layer, a payload whose
/// `Drop` panics): that is swallowed, so this never unwinds.
pub(crate) fn report(payload: Box<dyn Any + Send>, log: impl FnOnce(&str)) {
    let message = panic_message(payload.as_ref());
    let _ = catch_unwind(AssertUnwindSafe(|| log(&message)));
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        // Its payload may panic when dropped too: it is not worth the risk.
        std::mem::forget(again);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Bomb;

    impl Drop for Bomb {
        fn drop(&mut self) {
            if !std::thread::panicking() {
                panic!("bomb");
            }
        }
    }

    #[test]
    fn a_panic_in_a_drop_is_contained() {
        let mut after = false;
        contain("dropping a bomb", || drop(Bomb));
        contain("nothing", || after = true);
        assert!(after);
    }

    #[test]
    fn a_panic_while_logging_or_dropping_the_payload_is_swallowed() {
        let payload = catch_unwind(|| std::panic::panic_any(Bomb)).expect_err("panicked");
        report(payload, |_| panic!("the log panics too"));
    }
}
