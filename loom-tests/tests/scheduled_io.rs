//! loom models of an I/O source's readiness word and wakers
//! (`scheduler/src/scheduled_io.rs`, which the reactor's shards keep one
//! of per registered source): an edge is never lost between a future that
//! polls and the worker (or stall monitor) that dispatches the edge, a
//! future's clear never erases an edge newer than the one it saw, and a
//! poll that races the reactor's shutdown fails without leaving its waker
//! stored.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 cargo test -p proscenium-loom-tests --release --test scheduled_io`.
//!
//! The models drive the real `ScheduledIo`: `poll_ready` and
//! `clear_readiness` (what `Registration::poll_io` does around the
//! non-blocking operation) on one thread, `dispatch` (what the reactor does
//! for each event of a poll, for a failed poll's sources and for every
//! source at shutdown) on another. mio does not run under loom, so the
//! epoll side is the model's: an "edge" is a call of `dispatch`. Which
//! worker or monitor polls a shard does not matter here: the poller is
//! serialised by the shard's poll lock, and the word is the same for any.
//! The waker is a std `Waker` whose wake sets a loom flag.
//!
//! Mutations of `scheduled_io.rs` checked to be caught (each applied alone,
//! seen to fail, reverted):
//! - `poll_ready` without its re-check under the lock (Pending once the
//!   waker is stored): "an edge was lost" in
//!   `scheduled_io_an_edge_wakes_or_is_seen_by_the_poll`;
//! - `dispatch` taking the wakers before it sets the readiness: "an edge
//!   was lost" in the same model;
//! - `clear_readiness` ignoring the tick (clearing whatever it finds): "an
//!   edge was lost" in `scheduled_io_a_clear_keeps_a_newer_edge`;
//! - `set_readiness` not bumping the tick: the same failure;
//! - `poll_ready` not taking its waker back when its re-check finds
//!   `SHUTDOWN`: "a waker outlived the shutdown" in
//!   `scheduled_io_a_poll_racing_shutdown_fails_and_keeps_no_waker`.
//!
//! Not caught, by design: `set_readiness`'s compare-and-swap or
//! `poll_ready`'s loads made Relaxed. No lost edge rests on those orderings
//! (the waiters' lock orders "set, take" against "store, re-check", and an
//! RMW reads the latest value): they only order the readiness bits, and
//! what a ready operation reads comes from the kernel, not from memory the
//! poller wrote.
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use proscenium_scheduler::__loom::{
    Direction, ReadyEvent, ScheduledIo, SchedulerShutDown, READABLE, SHUTDOWN,
};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// A waker that records its wake in a loom flag.
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // SeqCst: a model's flag, read after the joins.
        self.0.store(true, Ordering::SeqCst);
    }
}

fn flag() -> (Arc<Flag>, Waker) {
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    (Arc::clone(&flag), Waker::from(Arc::clone(&flag)))
}

/// `Some(event)` if the read half is ready, `None` if pending (the waker
/// is stored); panics on an error.
fn poll_read(io: &ScheduledIo, waker: &Waker) -> Option<ReadyEvent> {
    match io.poll_ready(&mut Context::from_waker(waker), Direction::Read) {
        Poll::Ready(Ok(event)) => Some(event),
        Poll::Ready(Err(e)) => panic!("unexpected error {e}"),
        Poll::Pending => None,
    }
}

/// The reactor's turn for one edge: dispatch, then wake what it took (the
/// reactor wakes outside the slab's lock).
fn edge(io: &ScheduledIo, bits: usize) {
    let mut wakers = Vec::new();
    io.dispatch(bits, &mut wakers);
    wakers.into_iter().for_each(Waker::wake);
}

/// A future polls a source with no readiness while the reactor dispatches
/// a read edge: the poll is ready, or its waker is woken.
#[test]
fn scheduled_io_an_edge_wakes_or_is_seen_by_the_poll() {
    loom::model(|| {
        let io = Arc::new(ScheduledIo::new());
        let (woken, waker) = flag();
        let reactor = {
            let io = Arc::clone(&io);
            thread::spawn(move || edge(&io, READABLE))
        };
        let ready = poll_read(&io, &waker).is_some();
        reactor.join().expect("reactor");
        assert!(
            ready || woken.0.load(Ordering::SeqCst),
            "an edge was lost: the poll was pending and nobody woke it"
        );
    });
}

/// A future saw a read edge, its read hit `WouldBlock`, and it clears the
/// readiness and polls again, while a newer edge is dispatched: the newer
/// edge is not erased, so the second poll is ready or its waker woken.
#[test]
fn scheduled_io_a_clear_keeps_a_newer_edge() {
    loom::model(|| {
        let io = Arc::new(ScheduledIo::new());
        let (woken, waker) = flag();
        edge(&io, READABLE);
        let seen = poll_read(&io, &waker).expect("the first edge is ready");
        let reactor = {
            let io = Arc::clone(&io);
            thread::spawn(move || edge(&io, READABLE))
        };
        // `Registration::poll_io` on `WouldBlock`: clear what it saw, poll.
        io.clear_readiness(seen);
        let ready = poll_read(&io, &waker).is_some();
        reactor.join().expect("reactor");
        assert!(
            ready || woken.0.load(Ordering::SeqCst),
            "an edge was lost: the clear erased an edge newer than the one it saw"
        );
    });
}

/// A future polls while the reactor shuts down (marks the source and takes
/// its wakers): the poll fails, or its waker is woken (its next poll
/// fails); either way no waker is left stored (it would keep its task, and
/// the task the source, alive).
#[test]
fn scheduled_io_a_poll_racing_shutdown_fails_and_keeps_no_waker() {
    loom::model(|| {
        let io = Arc::new(ScheduledIo::new());
        let (woken, waker) = flag();
        let reactor = {
            let io = Arc::clone(&io);
            thread::spawn(move || edge(&io, SHUTDOWN))
        };
        let polled = io.poll_ready(&mut Context::from_waker(&waker), Direction::Read);
        reactor.join().expect("reactor");
        match polled {
            Poll::Ready(Err(e)) => assert!(
                e.get_ref()
                    .is_some_and(|inner| inner.is::<SchedulerShutDown>()),
                "the error is the shutdown's"
            ),
            Poll::Ready(Ok(_)) => panic!("ready without an edge"),
            Poll::Pending => assert!(woken.0.load(Ordering::SeqCst), "a shutdown was lost"),
        }
        drop(waker);
        // Held here and by nobody else unless `io` still stores a clone.
        assert_eq!(
            Arc::strong_count(&woken),
            1,
            "a waker outlived the shutdown"
        );
    });
}
