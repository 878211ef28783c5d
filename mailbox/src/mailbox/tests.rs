//! Single-threaded unit tests of the mailbox protocol (these also run under
//! Miri). The multi-threaded properties are in `tests/` and `loom-tests/`.

use super::*;
use std::sync::atomic::{AtomicUsize as StdAtomicUsize, Ordering as StdOrdering};
use std::sync::Arc;

type Mb = Mailbox<&'static str, u32>;

#[test]
fn first_sender_wins_the_run_then_the_rest_do_not() {
    let _serial = crate::test_serial();
    let mb = Mb::new();
    assert_eq!(mb.enqueue_user(1), Ok(Enqueued::MustSchedule));
    assert_eq!(mb.enqueue_user(2), Ok(Enqueued::AlreadyScheduled));
    assert_eq!(mb.enqueue_system("x"), Ok(Enqueued::AlreadyScheduled));
    assert!(mb.snapshot().is_scheduled());
}

#[test]
fn system_lane_is_served_before_user_lane() {
    let _serial = crate::test_serial();
    let mb = Mb::new();
    let _ = mb.enqueue_user(1);
    let _ = mb.enqueue_user(2);
    let _ = mb.enqueue_system("a");
    // SAFETY: the first enqueue won the run.
    unsafe {
        assert_eq!(mb.dequeue(), Dequeued::System("a"));
        assert_eq!(mb.dequeue(), Dequeued::User(1));
        // A system message that arrives between user messages jumps ahead.
        let _ = mb.enqueue_system("b");
        assert_eq!(mb.dequeue(), Dequeued::System("b"));
        assert_eq!(mb.dequeue(), Dequeued::User(2));
        assert_eq!(mb.dequeue(), Dequeued::Empty);
        assert_eq!(mb.release(), Release::Idle);
    }
    assert!(!mb.snapshot().is_scheduled());
}

#[test]
fn suspended_mailbox_serves_system_lane_only_and_nests() {
    let _serial = crate::test_serial();
    let mb = Mb::new();
    let _ = mb.enqueue_user(1);
    // SAFETY: we hold the run from the enqueue above.
    unsafe {
        mb.suspend();
        mb.suspend();
        assert!(mb.is_suspended());
        let _ = mb.enqueue_system("s");
        assert_eq!(mb.dequeue(), Dequeued::System("s"));
        assert_eq!(mb.dequeue(), Dequeued::Empty, "user lane paused");
        // Pending user messages do not keep a suspended owner scheduled.
        assert_eq!(mb.release(), Release::Idle);
    }
    // A new user message still wins the run (the owner may have system work
    // to do); the run finds only the paused lane.
    assert_eq!(mb.enqueue_user(2), Ok(Enqueued::MustSchedule));
    // SAFETY: we hold the run again.
    unsafe {
        assert_eq!(mb.dequeue(), Dequeued::Empty);
        assert!(!mb.resume(), "one suspension is still in force");
        assert_eq!(mb.dequeue(), Dequeued::Empty);
        assert!(mb.resume());
        assert!(mb.resume(), "an unmatched resume is harmless");
        assert!(!mb.is_suspended());
        assert_eq!(mb.dequeue(), Dequeued::User(1));
        assert_eq!(mb.dequeue(), Dequeued::User(2));
        assert_eq!(mb.release(), Release::Idle);
    }
}

#[test]
fn resume_all_lifts_nested_suspensions_at_once() {
    let _serial = crate::test_serial();
    let mb = Mb::new();
    let _ = mb.enqueue_user(1);
    // SAFETY: we hold the run from the enqueue above.
    unsafe {
        mb.suspend();
        mb.suspend();
        assert_eq!(mb.dequeue(), Dequeued::Empty, "user lane paused");
        mb.resume_all();
        assert!(!mb.is_suspended());
        assert_eq!(mb.dequeue(), Dequeued::User(1));
        assert!(mb.resume(), "a resume after resume_all is harmless");
        assert_eq!(mb.release(), Release::Idle);
    }
}

#[test]
fn release_reports_messages_that_arrived_during_the_run() {
    let _serial = crate::test_serial();
    let mb = Mb::new();
    let _ = mb.enqueue_user(1);
    // SAFETY: we hold the run.
    unsafe {
        assert_eq!(mb.dequeue(), Dequeued::User(1));
        // Arrives while we hold the run: the sender relies on us.
        assert_eq!(mb.enqueue_user(2), Ok(Enqueued::AlreadyScheduled));
        assert_eq!(mb.release(), Release::Reschedule);
        assert!(mb.snapshot().is_scheduled());
        assert_eq!(mb.dequeue(), Dequeued::User(2));
        // A release with work left (e.g. a spent budget) reschedules too.
        let _ = mb.enqueue_system("late");
        assert_eq!(mb.release(), Release::Reschedule);
        assert_eq!(mb.dequeue(), Dequeued::System("late"));
        assert_eq!(mb.release(), Release::Idle);
    }
}

#[test]
fn closed_mailbox_refuses_and_hands_out_what_was_queued() {
    let _serial = crate::test_serial();
    let mb = Mb::new();
    let _ = mb.enqueue_user(1);
    let _ = mb.enqueue_system("sys");
    // SAFETY: we hold the run.
    unsafe {
        mb.suspend();
        mb.close();
        assert!(mb.is_closed());
        assert_eq!(mb.enqueue_user(2), Err(TrySendError::Closed(2)));
        assert_eq!(mb.enqueue_system("no"), Err(SendError("no")));
        // Both lanes drain, whatever the suspension.
        assert_eq!(mb.dequeue(), Dequeued::System("sys"));
        assert_eq!(mb.dequeue(), Dequeued::User(1));
        assert_eq!(mb.dequeue(), Dequeued::Empty);
        assert_eq!(mb.release(), Release::Idle);
    }
    assert_eq!(mb.enqueue_user(3).map_err(TrySendError::into_inner), Err(3));
}

#[test]
fn bounded_user_lane_hands_back_the_message_when_full() {
    let _serial = crate::test_serial();
    assert_eq!(Mb::bounded(0).err(), Some(ZeroCapacityError));
    let mb = Mb::bounded(2).expect("non-zero capacity");
    assert_eq!(mb.capacity(), Some(2));
    assert_eq!(mb.enqueue_user(1), Ok(Enqueued::MustSchedule));
    assert_eq!(mb.enqueue_user(2), Ok(Enqueued::AlreadyScheduled));
    let err = mb.enqueue_user(3).expect_err("full");
    assert!(err.is_full());
    assert_eq!(err.into_inner(), 3);
    assert_eq!(mb.user_len(), Some(2));
    // The system lane is never bounded.
    assert_eq!(mb.enqueue_system("s"), Ok(Enqueued::AlreadyScheduled));
    // SAFETY: we hold the run.
    unsafe {
        assert_eq!(mb.dequeue(), Dequeued::System("s"));
        assert_eq!(mb.dequeue(), Dequeued::User(1));
    }
    assert_eq!(mb.user_len(), Some(1));
    assert_eq!(mb.enqueue_user(4), Ok(Enqueued::AlreadyScheduled));
    assert_eq!(Mb::new().user_len(), None);
    assert_eq!(Mb::new().capacity(), None);
}

/// The holder's copy of "bounded" (a flag bit beside the suspensions) is
/// kept through suspend, resume, resume_all and close: a dequeue still
/// gives the slot back, so the lane takes a message again.
#[test]
fn a_bounded_lane_stays_bounded_through_suspensions_and_close() {
    let _serial = crate::test_serial();
    let mb = Mb::bounded(1).expect("non-zero capacity");
    assert_eq!(mb.enqueue_user(1), Ok(Enqueued::MustSchedule));
    assert!(mb.enqueue_user(2).expect_err("full").is_full());
    // SAFETY: we hold the run.
    unsafe {
        mb.suspend();
        mb.suspend();
        assert!(mb.is_suspended());
        assert!(!mb.resume());
        mb.resume_all();
        assert!(!mb.is_suspended());
        assert_eq!(mb.dequeue(), Dequeued::User(1));
    }
    assert_eq!(mb.user_len(), Some(0));
    assert_eq!(mb.enqueue_user(3), Ok(Enqueued::AlreadyScheduled));
    // SAFETY: we hold the run.
    unsafe {
        mb.suspend();
        mb.close();
        // A closed lane is drained whatever its suspension.
        assert_eq!(mb.dequeue(), Dequeued::User(3));
    }
    assert_eq!(mb.user_len(), Some(0));
    // An unbounded lane's flags have no bounded bit: a closed, suspended
    // unbounded lane is drained too.
    let unbounded = Mb::new();
    assert_eq!(unbounded.enqueue_user(7), Ok(Enqueued::MustSchedule));
    // SAFETY: we hold the run.
    unsafe {
        unbounded.suspend();
        assert_eq!(unbounded.dequeue(), Dequeued::Empty);
        unbounded.close();
        assert_eq!(unbounded.dequeue(), Dequeued::User(7));
    }
}

/// The owner's words between the halves are stored and handed back, at
/// the offset the type reports.
#[test]
fn the_middle_is_stored_between_the_halves() {
    let _serial = crate::test_serial();
    let mut mb: Mailbox<&str, u32, [u64; 8]> =
        Mailbox::with_middle(Some(3), [7; 8]).expect("non-zero capacity");
    assert_eq!(mb.middle(), &[7; 8]);
    mb.middle_mut()[0] = 1;
    assert_eq!(mb.middle()[0], 1);
    assert_eq!(mb.capacity(), Some(3));
    let base = std::ptr::from_ref(&mb).cast::<u8>();
    let middle = std::ptr::from_ref(mb.middle()).cast::<u8>();
    assert_eq!(
        middle as usize - base as usize,
        Mailbox::<&str, u32, [u64; 8]>::MIDDLE_OFFSET
    );
    assert_eq!(Mailbox::<&str, u32, [u64; 8]>::MIDDLE_OFFSET, 16);
    assert!(Mailbox::<&str, u32, u8>::with_middle(Some(0), 0).is_err());
}

#[test]
fn errors_display_lowercase_and_debug_without_payload_debug() {
    let _serial = crate::test_serial();
    struct Opaque;
    let e: TrySendError<Opaque> = TrySendError::Full(Opaque);
    assert_eq!(e.to_string(), "sending on a full mailbox");
    assert_eq!(format!("{e:?}"), "Full(..)");
    let e: TrySendError<Opaque> = SendError(Opaque).into();
    assert!(e.is_closed());
    assert_eq!(SendError(Opaque).to_string(), "sending on a closed mailbox");
    assert_eq!(
        ZeroCapacityError.to_string(),
        "mailbox capacity must be at least 1"
    );
}

struct Counted(Arc<StdAtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, StdOrdering::Relaxed);
    }
}

#[test]
fn dropping_a_mailbox_drops_every_payload_once() {
    let _serial = crate::test_serial();
    let drops = Arc::new(StdAtomicUsize::new(0));
    let mb: Mailbox<Counted, Counted> = Mailbox::new();
    for _ in 0..3 {
        let _ = mb.enqueue_user(Counted(drops.clone()));
        let _ = mb.enqueue_system(Counted(drops.clone()));
    }
    // SAFETY: we hold the run.
    match unsafe { mb.dequeue() } {
        Dequeued::System(c) => drop(c),
        _ => panic!("expected the first system message"),
    }
    assert_eq!(drops.load(StdOrdering::Relaxed), 1);
    drop(mb);
    assert_eq!(drops.load(StdOrdering::Relaxed), 6);
}

#[test]
fn threads_exchange_through_the_run_protocol() {
    let _serial = crate::test_serial();
    // A small multi-threaded run, sized for Miri; the big ones are in tests/.
    let per = if cfg!(miri) { 20 } else { 10_000 };
    let mb: Arc<Mailbox<(), (usize, usize)>> = Arc::new(Mailbox::new());
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let senders: Vec<_> = (0..2)
        .map(|p| {
            let mb = mb.clone();
            let tx = tx.clone();
            std::thread::spawn(move || {
                for i in 0..per {
                    if mb.enqueue_user((p, i)) == Ok(Enqueued::MustSchedule) {
                        tx.send(()).expect("runner alive");
                    }
                }
            })
        })
        .collect();
    drop(tx);
    let mut next = [0usize; 2];
    let mut got = 0;
    while got < 2 * per {
        rx.recv()
            .expect("a run is scheduled while messages are pending");
        loop {
            // SAFETY: each token received is one won run; runs are serial here.
            match unsafe { mb.dequeue() } {
                Dequeued::User((p, i)) => {
                    assert_eq!(i, next[p]);
                    next[p] += 1;
                    got += 1;
                }
                Dequeued::System(()) => unreachable!(),
                Dequeued::Empty | Dequeued::Retry => {
                    // SAFETY: as above.
                    if unsafe { mb.release() } == Release::Reschedule {
                        continue;
                    }
                    break;
                }
            }
        }
    }
    for s in senders {
        s.join().expect("sender panicked");
    }
}

/// The mailbox is part of every cell: six words (the run-state word and
/// the capacity share one, the holder's flags and the bounded lane's count
/// another) and no alignment forced on the cell (decision records 0002,
/// 0020).
#[test]
fn mailbox_fits_in_48_bytes_without_forcing_alignment() {
    let _serial = crate::test_serial();
    assert!(
        std::mem::size_of::<Mb>() <= 48,
        "{}",
        std::mem::size_of::<Mb>()
    );
    assert!(std::mem::align_of::<Mb>() <= 8);
}

/// Capacities beyond what 32 bits count are unbounded; the rest are kept.
#[test]
fn huge_capacities_are_unbounded() {
    let _serial = crate::test_serial();
    let mb = Mb::bounded(usize::MAX).expect("not zero");
    assert_eq!(mb.capacity(), None);
    assert_eq!(mb.user_len(), None);
    let mb = Mb::bounded(u32::MAX as usize).expect("not zero");
    assert_eq!(mb.capacity(), None);
    let mb = Mb::bounded(u32::MAX as usize - 1).expect("not zero");
    assert_eq!(mb.capacity(), Some(u32::MAX as usize - 1));
    assert_eq!(mb.enqueue_user(1), Ok(Enqueued::MustSchedule));
    assert_eq!(mb.user_len(), Some(1));
}

/// Suspensions nest, and the closed flag shares their word without
/// disturbing the count.
#[test]
fn suspensions_and_close_share_the_holder_word() {
    let _serial = crate::test_serial();
    let mb = Mb::new();
    let _ = mb.enqueue_user(1);
    // SAFETY: the enqueue won the run; this thread holds it.
    unsafe {
        mb.suspend();
        mb.suspend();
        mb.close();
        assert!(mb.is_suspended());
        assert!(!mb.resume());
        assert!(mb.resume());
        assert!(!mb.is_suspended());
        assert!(mb.resume(), "a resume without a suspend does nothing");
        assert!(!mb.is_suspended());
        mb.suspend();
        mb.resume_all();
        assert!(!mb.is_suspended());
        // Closed: the lane is drained whatever the suspension.
        mb.suspend();
        assert_eq!(mb.dequeue(), Dequeued::User(1));
    }
}

/// An idle mailbox holds no node: `release` puts each empty lane back at
/// its inline stub, freeing the node of the last message (decision 0020);
/// a lane that is not empty keeps its node.
#[test]
fn release_leaves_an_idle_mailbox_at_its_stubs() {
    let _serial = crate::test_serial();
    let fresh = Mb::new();
    // SAFETY: nobody runs `fresh`; its marks are read only to compare.
    let (sys_stub, user_stub) = unsafe { (fresh.holder.system.mark(), fresh.holder.user.mark()) };
    let mb = Mb::new();
    let _ = mb.enqueue_system("create");
    let _ = mb.enqueue_user(1);
    // SAFETY: the first enqueue won the run; we hold it until `Idle`.
    unsafe {
        assert_eq!(mb.dequeue(), Dequeued::System("create"));
        assert_eq!(mb.dequeue(), Dequeued::User(1));
        assert_ne!(mb.holder.user.mark(), user_stub, "at the message's node");
        assert_eq!(mb.dequeue(), Dequeued::Empty);
        assert_eq!(mb.release(), Release::Idle);
        // Read after the release only because nothing else runs here.
        assert_eq!(mb.holder.system.mark(), sys_stub);
        assert_eq!(mb.holder.user.mark(), user_stub);
    }
    // A paused lane with a message keeps its node; the stub comes back
    // once the message is taken.
    assert_eq!(mb.enqueue_user(2), Ok(Enqueued::MustSchedule));
    let _ = mb.enqueue_user(3);
    // SAFETY: as above.
    unsafe {
        assert_eq!(mb.dequeue(), Dequeued::User(2));
        mb.suspend();
        assert_eq!(mb.dequeue(), Dequeued::Empty);
        assert_eq!(mb.release(), Release::Idle);
        assert_ne!(mb.holder.user.mark(), user_stub, "3 is still queued");
    }
    let _ = mb.enqueue_system("resume");
    // SAFETY: as above.
    unsafe {
        assert_eq!(mb.dequeue(), Dequeued::System("resume"));
        assert!(mb.resume());
        assert_eq!(mb.dequeue(), Dequeued::User(3));
        assert_eq!(mb.dequeue(), Dequeued::Empty);
        assert_eq!(mb.release(), Release::Idle);
        assert_eq!(mb.holder.user.mark(), user_stub);
    }
    // Back at the stubs, the lanes take messages as before.
    assert_eq!(mb.enqueue_user(4), Ok(Enqueued::MustSchedule));
    // SAFETY: as above.
    unsafe {
        assert_eq!(mb.dequeue(), Dequeued::User(4));
        assert_eq!(mb.dequeue(), Dequeued::Empty);
        assert_eq!(mb.release(), Release::Idle);
    }
}
