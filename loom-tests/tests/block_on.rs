//! loom models of `block_on`'s wake flag (`scheduler/src/block_on.rs`): a
//! wake that comes while the blocked thread polls, checks its flag or
//! parks is never lost.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 cargo test -p proscenium-loom-tests --release`.
//!
//! The models run the real `proscenium_scheduler::block_on` (its flag is a
//! loom `AtomicBool`, its thread handle, `park` and `unpark` are loom's
//! under `--cfg loom`) on a future that two other threads complete, each
//! with one increment and one wake. A lost wake-up leaves the blocked
//! thread parked with nobody left to unpark it: loom reports a deadlock.
//!
//! Mutations of `block_on.rs` checked to be caught (each as a deadlock):
//! `block_on` clearing the flag after the poll instead of consuming it
//! before (`store(false)` between `poll` and the park loop, which forgets
//! a wake that came during the poll); `wake_by_ref` unparking before it
//! sets the flag (the blocked thread can consume the unpark token, see no
//! flag, and park again). Not caught: weakening the flag's Release/Acquire
//! to Relaxed, because loom's `unpark`/`park` and the future's own mutex
//! already order the data the model checks; the orderings are kept for
//! futures whose state is not under a lock.
#![cfg(loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;
use proscenium_scheduler::block_on;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// A count that other threads raise, with the waker of whoever waits for it.
struct Count {
    n: AtomicUsize,
    waker: Mutex<Option<Waker>>,
}

impl Count {
    fn bump(&self) {
        self.n.fetch_add(1, Ordering::SeqCst);
        if let Some(w) = self.waker.lock().expect("loom").as_ref() {
            w.wake_by_ref();
        }
    }
}

/// Ready once the count reaches `target`.
struct AtLeast {
    count: Arc<Count>,
    target: usize,
}

impl Future for AtLeast {
    type Output = usize;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
        // Register first, then check: a bump after the check finds the waker.
        *self.count.waker.lock().expect("loom") = Some(cx.waker().clone());
        let n = self.count.n.load(Ordering::SeqCst);
        if n >= self.target {
            Poll::Ready(n)
        } else {
            Poll::Pending
        }
    }
}

/// Two wakers race with the blocked thread's polls and parks; it returns.
#[test]
fn block_on_sees_every_wake() {
    loom::model(|| {
        let count = Arc::new(Count {
            n: AtomicUsize::new(0),
            waker: Mutex::new(None),
        });
        // Not joined: a late `unpark` of a thread blocked in loom's `join`
        // trips an assertion in loom itself (tokio-rs/loom#249); loom
        // runs every thread to its end anyway.
        for _ in 0..2 {
            let count = Arc::clone(&count);
            thread::spawn(move || count.bump());
        }
        let got = block_on(AtLeast {
            count: Arc::clone(&count),
            target: 2,
        });
        assert_eq!(got, 2);
    });
}
