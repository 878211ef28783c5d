//! loom models of the mailbox with its real node cache: a freed node's
//! address comes back on the freeing thread's next allocation, while
//! another thread may still hold it as a mark (the ABA case of
//! `Head::nonempty_since`, argued in decision record 0002, "`release`
//! re-checks from marks").
//!
//! Under `--cfg loom` the cache's per-thread state (the slab it carves, its
//! tallies of freed blocks, its free slabs) is a loom thread-local
//! (`mailbox/src/node_cache.rs`), so the models run the cache's real code.
//! Two differences: under loom a slab holds one block (so a freed node's
//! address comes back on the freeing thread's next allocation, as soon as
//! it can: decision record 0021), and there is no global stock and no slab
//! goes back to the allocator while the test runs (what would go to the
//! global stock is retired on the test's OS thread and freed when it
//! exits), because a stock shared by parallel tests and by successive
//! executions, or `malloc` handing a freed address back, would make a
//! schedule's path depend on something other than the schedule, and loom
//! needs each schedule to take one path (decision record 0015).
//!
//! Run with
//! `RUSTFLAGS="--cfg loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 cargo test -p proscenium-loom-tests --release`.
//!
//! Mutations checked to be caught (each applied alone, then reverted; run
//! on the first version of this change, whose loom cache still freed
//! blocks to the allocator at thread exit):
//!
//! - `Node::alloc`/`Node::free` back on `Box` under loom (the state before
//!   this model): `a_freed_node_address_comes_back_and_fools_a_stale_mark`
//!   fails (`nonempty_since` sees the new address, so no reuse is
//!   explored).
//! - `FreeList::pop` returns the head block without unlinking it (two live
//!   nodes at one address): the `node_cache` and `mailbox` test binaries
//!   fail (they crash: one block holds two live nodes). Since issue 17 (item
//!   4, slabs) the same mutation is `Inner::carve` not advancing its
//!   pointer: the `mailbox` models crash (seen; reverted).
//! - Issue 17, item 4: a loom slab of two blocks instead of one:
//!   `a_freed_node_address_comes_back_and_fools_a_stale_mark` fails (the
//!   address does not come back within the model, so the ABA case goes
//!   unexplored; seen, reverted).
//! - `Mailbox::release` without its `fence(SeqCst)`:
//!   `a_holder_fooled_by_a_reused_mark_strands_nothing` fails (a message
//!   left in the mailbox with nobody scheduled). Rechecked in issue 17,
//!   where that fence became `dekker_fence()`, a fence under loom only
//!   (decision 0019): removing the call is still caught.
//!
//! Issue 28: under loom the slab's count is a loom atomic and the slab's
//! blocks a loom cell (read by each thread that settles its frees, written
//! by the one that brings the count to zero), so the hand-over of a slab
//! between the threads that free its blocks is checked:
//!
//! - `settle` without its Acquire load after the count reaches zero (the
//!   load that made ThreadSanitizer quiet; outside loom a `fence(Acquire)`
//!   would do, as in `Arc`): a causality violation in
//!   `a_slab_freed_on_two_threads_is_reused_only_after_both` (seen;
//!   reverted);
//! - `settle`'s `fetch_sub` Relaxed instead of Release: the same failure
//!   (seen; reverted).
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use proscenium_mailbox::{
    Dequeued, Enqueued, Mailbox, ModelSlabCapacity, MpscQueue, Pop, Release, TrySendError,
};

/// The consumer pops past its own mark (freeing the marked node into its
/// cache) and pushes again: the new node takes the marked address, so a
/// check from the stale mark reports "nothing since" although a value is
/// queued. This is the ABA case the mailbox's argument allows for; the
/// model asserts that the loom build really reuses the address (it did not
/// while nodes came from `Box`). The mark is a node's: the queue first
/// takes and pops a value, since a mark at the inline stub is null, which
/// no node address can equal (issue 17).
#[test]
fn a_freed_node_address_comes_back_and_fools_a_stale_mark() {
    loom::model(|| {
        let q = Arc::new(MpscQueue::new());
        q.push(0u32);
        // SAFETY: the main thread is the only consumer.
        let stale = unsafe {
            assert_eq!(q.pop(), Pop::Data(0));
            q.mark()
        };
        let producer = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.push(1u32))
        };
        loop {
            // SAFETY: as above.
            match unsafe { q.pop() } {
                Pop::Data(v) => {
                    assert_eq!(v, 1);
                    break;
                }
                Pop::Empty | Pop::Inconsistent => thread::yield_now(),
            }
        }
        producer.join().expect("producer");
        // The pop freed the node `stale` names into this thread's cache;
        // this push gets it back.
        q.push(2);
        assert!(
            !q.nonempty_since(stale),
            "the freed node's address was not reused"
        );
        // SAFETY: as above.
        unsafe {
            assert_eq!(q.pop(), Pop::Data(2));
            assert_eq!(q.pop(), Pop::Empty);
        }
    });
}

/// An actor whose runs execute inline on the thread that wins them; the
/// handler of a sender's first message tells the actor a second one, from
/// inside the run (so from the run holder's thread, whose cache holds the
/// node it just freed).
struct Actor {
    mailbox: Mailbox<(), (usize, usize)>,
    running: AtomicBool,
    handled: AtomicUsize,
}

impl Actor {
    fn tell(&self, msg: (usize, usize), log: &mut Vec<(usize, usize, usize)>) {
        match self.mailbox.enqueue_user(msg) {
            Ok(Enqueued::MustSchedule) => self.run(log),
            Ok(Enqueued::AlreadyScheduled) => {}
            Err(TrySendError::Closed(_) | TrySendError::Full(_)) => {
                unreachable!("open and unbounded")
            }
        }
    }

    fn run(&self, log: &mut Vec<(usize, usize, usize)>) {
        loop {
            assert!(
                !self.running.swap(true, Ordering::Relaxed),
                "two runs of one mailbox overlap"
            );
            loop {
                // SAFETY: this thread won the run (MustSchedule or Reschedule).
                match unsafe { self.mailbox.dequeue() } {
                    Dequeued::User((s, i)) => {
                        let seq = self.handled.fetch_add(1, Ordering::Relaxed);
                        log.push((seq, s, i));
                        if i == 0 {
                            // A tell from inside the handler: we hold the
                            // run, so it only queues.
                            match self.mailbox.enqueue_user((s, 1)) {
                                Ok(Enqueued::AlreadyScheduled) => {}
                                other => panic!("a tell from the run holder: {other:?}"),
                            }
                        }
                    }
                    Dequeued::System(()) => unreachable!("no system messages"),
                    Dequeued::Empty => break,
                    Dequeued::Retry => {
                        thread::yield_now();
                        break;
                    }
                }
            }
            self.running.store(false, Ordering::Relaxed);
            // SAFETY: as above.
            match unsafe { self.mailbox.release() } {
                Release::Idle => return,
                Release::Reschedule => {}
            }
        }
    }
}

/// Two senders; each first message makes its handler tell a second. A
/// holder preempted between its clear and its re-check can find `head` at
/// its mark again: a later holder (the other sender's thread) popped past
/// the mark, freeing that node into its own cache, and its handler's tell
/// reused the address. Nothing may be stranded: every message is handled
/// once, in order per sender, and the actor ends unscheduled.
#[test]
fn a_holder_fooled_by_a_reused_mark_strands_nothing() {
    loom::model(|| {
        let actor = Arc::new(Actor {
            mailbox: Mailbox::new(),
            running: AtomicBool::new(false),
            handled: AtomicUsize::new(0),
        });
        let handles: Vec<_> = (0..2)
            .map(|s| {
                let actor = Arc::clone(&actor);
                thread::spawn(move || {
                    let mut log = Vec::new();
                    actor.tell((s, 0), &mut log);
                    log
                })
            })
            .collect();
        let mut log = Vec::new();
        for h in handles {
            log.extend(h.join().expect("sender"));
        }
        log.sort_unstable();
        for s in 0..2 {
            let order: Vec<usize> = log
                .iter()
                .filter(|(_, x, _)| *x == s)
                .map(|(_, _, i)| *i)
                .collect();
            assert_eq!(order, vec![0, 1], "sender {s}: {log:?}");
        }
        assert!(
            !actor.mailbox.snapshot().is_scheduled(),
            "left scheduled: {log:?}"
        );
    });
}

/// Slabs of two blocks: the main thread pushes one value onto each of two
/// queues (two nodes carved from one slab), and two consumers pop one each
/// and recycle the emptied queue's node, freeing the two blocks on two
/// threads; each settles its count when it
/// exits. The one that brings the count to zero owns the slab: its reuse
/// must come after the other's use of its block (the count's
/// Release/Acquire), which the loom cell of the slab's blocks checks.
#[test]
fn a_slab_freed_on_two_threads_is_reused_only_after_both() {
    loom::model(|| {
        let _two = ModelSlabCapacity::set(2);
        let queues = [Arc::new(MpscQueue::new()), Arc::new(MpscQueue::new())];
        for (i, q) in queues.iter().enumerate() {
            q.push(i);
        }
        let consumers: Vec<_> = queues
            .iter()
            .map(|q| {
                let q = Arc::clone(q);
                thread::spawn(move || {
                    // SAFETY: this thread is the queue's only consumer.
                    unsafe {
                        assert!(matches!(q.pop(), Pop::Data(_)));
                        // Frees the popped node (the queue is empty).
                        q.recycle();
                    }
                    // The thread's exit settles its tally of the freed
                    // node's slab.
                })
            })
            .collect();
        for c in consumers {
            c.join().expect("consumer");
        }
    });
}
