//! The run holder's mailbox steps that the driver takes around a stop and
//! the stash, without the driver's types: the close-and-drain of a
//! terminating actor (`Driver::finish_terminate`) and the system-only
//! dequeue of an actor that has unstashed messages waiting
//! (`Driver::next_unstashed`).
//!
//! The driver calls these, and the loom models in
//! `loom-tests/tests/terminate.rs` call the same functions on a real
//! mailbox (decision record 0015); their one wait (a sender between the two
//! steps of its push) yields through `crate::sync`.
#![cfg_attr(not(loom), allow(unreachable_pub))]

use proscenium_mailbox::{Dequeued, Mailbox};

use crate::sync::yield_now;

/// How many messages a terminating actor drains before its mailbox closes
/// (see [`close_and_drain`]).
pub const DRAIN_BEFORE_CLOSE: usize = 1 << 16;

/// Drains a terminating actor's mailbox: every user message goes to `dead`
/// while the mailbox is still open (both lanes are served, whatever the
/// suspension), with system messages held back until the lanes are empty
/// or `cap` messages were taken; then the mailbox closes (late senders get
/// their message back), what raced in goes to `dead` too, system messages
/// still held back, and the held system messages are returned, to be
/// answered last. So whoever learns of the end from a held message (a
/// `Watch` answered with `Terminated`) has seen the dead letters of
/// everything sent to the actor before that message (by its sender, or by
/// anyone who had seen it sent), as far as the cap allows.
///
/// # Safety
///
/// The caller holds `mailbox`'s run.
pub unsafe fn close_and_drain<S, U, X>(
    mailbox: &Mailbox<S, U, X>,
    cap: usize,
    mut dead: impl FnMut(Dequeued<S, U>),
) -> Vec<S> {
    let mut held = Vec::new();
    // SAFETY: we hold the run (caller's contract), for every call below.
    unsafe { mailbox.resume_all() };
    for _ in 0..cap {
        // SAFETY: as above.
        match unsafe { mailbox.dequeue() } {
            Dequeued::Empty => break,
            Dequeued::Retry => yield_now(),
            Dequeued::System(msg) => held.push(msg),
            dequeued => dead(dequeued),
        }
    }
    // SAFETY: as above.
    unsafe { mailbox.close() };
    // Held here too: a sender's system message can race past the close
    // right behind a user message of its own, and the system lane is
    // served first (the loom model `terminate.rs` found a watch answered
    // ahead of the dead letter of a message sent before it).
    // SAFETY: as above.
    unsafe { drain_into(mailbox, &mut held, &mut dead) };
    held
}

/// Drains what raced into a closed mailbox after its actor terminated (the
/// runs after `finish_terminate`'s): `first` (what the run's dequeue took)
/// and everything else queued go to `dead`, system messages last, for the
/// reason given in [`close_and_drain`].
///
/// # Safety
///
/// The caller holds `mailbox`'s run, and the mailbox is closed.
pub unsafe fn drain_closed<S, U, X>(
    mailbox: &Mailbox<S, U, X>,
    first: Dequeued<S, U>,
    mut dead: impl FnMut(Dequeued<S, U>),
) {
    let mut held = Vec::new();
    match first {
        Dequeued::System(msg) => held.push(msg),
        Dequeued::Empty | Dequeued::Retry => {}
        dequeued => dead(dequeued),
    }
    // SAFETY: we hold the run (caller's contract).
    unsafe { drain_into(mailbox, &mut held, &mut dead) };
    for msg in held {
        dead(Dequeued::System(msg));
    }
}

/// Dequeues until the lanes are empty: user messages to `dead`, system
/// messages to `held`.
///
/// # Safety
///
/// The caller holds `mailbox`'s run.
unsafe fn drain_into<S, U, X>(
    mailbox: &Mailbox<S, U, X>,
    held: &mut Vec<S>,
    dead: &mut impl FnMut(Dequeued<S, U>),
) {
    loop {
        // SAFETY: we hold the run (caller's contract).
        match unsafe { mailbox.dequeue() } {
            Dequeued::Empty => break,
            // A sender between the two steps of its push; it finishes
            // promptly (and a closed mailbox takes nothing new).
            Dequeued::Retry => yield_now(),
            Dequeued::System(msg) => held.push(msg),
            dequeued => dead(dequeued),
        }
    }
}

/// One dequeue with the user lane closed, so only the system lane answers
/// (a suspended actor's does anyway): for a run holder that has unstashed
/// messages waiting, which come before anything still in the user lane but
/// after any system message (invariant 3). The user lane's suspension is
/// as it was afterwards. Returns whether the lane was suspended before,
/// and what the dequeue took (never a user message).
///
/// # Safety
///
/// The caller holds `mailbox`'s run.
pub unsafe fn dequeue_system_only<S, U, X>(mailbox: &Mailbox<S, U, X>) -> (bool, Dequeued<S, U>) {
    // SAFETY: we hold the run (caller's contract), as each call requires.
    unsafe {
        let suspended = mailbox.is_suspended();
        mailbox.suspend();
        let dequeued = mailbox.dequeue();
        mailbox.resume();
        (suspended, dequeued)
    }
}
