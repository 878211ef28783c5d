//! Vyukov's node-based MPSC queue ("Intrusive MPSC node-based queue",
//! 1024cores), generic over the payload.
//!
//! Producers link a fresh node at `head` with one atomic swap and one store,
//! so a push never waits for anybody. The single consumer walks from `tail`.
//! The queue always holds at least one node whose value has been taken (or
//! was never there: the initial stub); `tail` points at it, and the values
//! live in the nodes after it.
//!
//! The one subtle state: a producer that has swapped `head` but not yet
//! stored the link into the previous node. The consumer then sees
//! `head != tail` while `tail.next` is null. The queue is *not* empty: an
//! item is on its way. [`Pop::Inconsistent`] reports exactly that, so callers
//! retry later instead of concluding "empty" and losing a wake-up.
//!
//! The two ends are separate types, [`Head`] (written by producers) and
//! [`Tail`] (written by the consumer), so that an owner can lay them out
//! apart: [`MpscQueue`] pads each to its own cache line; the mailbox keeps
//! the user lane's head among the senders' words and the system lane's head
//! and both tails among the run holder's, without padding.

use std::alloc::Layout;
use std::mem::MaybeUninit;
use std::ptr;

use crossbeam_utils::CachePadded;

use crate::node_cache;
use crate::sync::{AtomicPtr, Ordering, UnsafeCell};

/// What [`MpscQueue::pop`] found.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub enum Pop<T> {
    /// The oldest value in the queue, now removed.
    Data(T),
    /// Nothing is queued and no push is in progress.
    Empty,
    /// A producer has claimed a place but not yet linked it: the queue is
    /// not empty, but its next value cannot be reached yet. Retry later.
    Inconsistent,
}

struct Node<T> {
    /// Written once by the producer that links the next node (Release), read
    /// by the consumer (Acquire).
    next: AtomicPtr<Node<T>>,
    /// Initialised by the producer before the node is published; moved out
    /// exactly once by the consumer. Uninitialised in the stub node and in a
    /// node whose value has been taken.
    value: UnsafeCell<MaybeUninit<T>>,
}

impl<T> Node<T> {
    /// Allocates a node from the node cache (see `node_cache.rs`; also under
    /// loom, so that the models see freed addresses reused).
    fn alloc(value: MaybeUninit<T>) -> *mut Node<T> {
        Self::alloc_from(value, node_cache::alloc_block)
    }

    /// Allocates a queue's stub node, from slabs of stubs
    /// (`node_cache::alloc_stub_block` says why).
    fn alloc_stub() -> *mut Node<T> {
        Self::alloc_from(MaybeUninit::uninit(), node_cache::alloc_stub_block)
    }

    #[inline(always)]
    fn alloc_from(value: MaybeUninit<T>, alloc_block: fn(Layout) -> *mut u8) -> *mut Node<T> {
        let node = Node {
            next: AtomicPtr::new(ptr::null_mut()),
            value: UnsafeCell::new(value),
        };
        let block = alloc_block(Layout::new::<Node<T>>()).cast::<Node<T>>();
        // SAFETY: `alloc_block` returns a fresh, non-null block that fits
        // `Node<T>`'s size and alignment.
        unsafe { block.write(node) };
        block
    }

    /// Frees a node.
    ///
    /// # Safety
    ///
    /// `node` came from [`Node::alloc`], is unreachable from the queue, and
    /// its value has been taken (or was never there).
    unsafe fn free(node: *mut Node<T>) {
        // `Node` holds no value needing a drop (the payload is
        // `MaybeUninit`): dropping in place runs only the fields' own drops
        // (trivial, or under loom the release of loom's tracking objects)
        // before the memory goes back.
        // SAFETY: by the caller's contract `node` is a live block of
        // `Node::alloc` that nothing else reaches, with no value in it.
        unsafe {
            ptr::drop_in_place(node);
            node_cache::free_block(node.cast(), Layout::new::<Node<T>>());
        }
    }
}

/// The producers' end of a queue: where pushes link new nodes.
pub(crate) struct Head<T> {
    /// The most recently pushed node. Written by producers (swap).
    head: AtomicPtr<Node<T>>,
}

/// The consumer's end of a queue. Owns every node from `tail` on: dropping
/// it frees them and drops the values still queued.
pub(crate) struct Tail<T> {
    /// The node before the oldest value. Read and written only by the
    /// consumer.
    tail: UnsafeCell<*mut Node<T>>,
}

/// A position in a queue that the consumer saw; see [`MpscQueue::mark`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark(*mut ());

/// Creates the two ends of one empty queue (one stub node is allocated).
///
/// The ends must be used together, as one queue, and dropped together.
pub(crate) fn ends<T>() -> (Head<T>, Tail<T>) {
    let stub = Node::alloc_stub();
    (
        Head {
            head: AtomicPtr::new(stub),
        },
        Tail {
            tail: UnsafeCell::new(stub),
        },
    )
}

impl<T> Head<T> {
    /// Appends `value`. Wait-free: one allocation, one swap, one store.
    #[inline]
    pub(crate) fn push(&self, value: T) {
        let node = Node::alloc(MaybeUninit::new(value));
        // SeqCst, which includes AcqRel. Release: publishes `node`'s
        // initialised `next` and `value` to the producer that will swap after
        // us (it writes `node.next`) and, through the link store below, to
        // the consumer. Acquire: pairs with the Release of the producer that
        // swapped `prev` in, so that our store into `prev.next` happens after
        // `prev` was initialised. SeqCst: this swap is the push that the
        // mailbox's Dekker pairing orders against a release (the SeqCst load
        // in `nonempty_since`; `Mailbox::claim_after_push`, decision record
        // 0019). On x86-64 a swap is `xchg` whatever the ordering.
        let prev = self.head.swap(node, Ordering::SeqCst);
        // SAFETY: `prev` is alive: the consumer frees a node only after it has
        // moved `tail` past it, which requires `prev.next` to be non-null,
        // and only this producer makes it so, right here.
        unsafe {
            // Release: pairs with the consumer's Acquire load of `next` in
            // `pop`, making `node.value` visible before the consumer reads it.
            (*prev).next.store(node, Ordering::Release);
        }
    }

    /// For the consumer, after [`Tail::pop_linked`] found nothing at `mark`
    /// (its `tail`): whether a producer has claimed a place after it (`head`
    /// moved) but not linked it yet, or linked it since. `false` means the
    /// lane was empty when `head` was read.
    #[inline]
    pub(crate) fn moved_from(&self, mark: Mark) -> bool {
        // Relaxed: only compared, never dereferenced (as in
        // `empty_or_inconsistent`).
        self.head.load(Ordering::Relaxed).cast::<()>() != mark.0
    }

    /// Whether, seen from `mark`, the queue holds a value or a push is in
    /// progress: `head` has moved past the marked node. Safe to call from any
    /// thread, also one that is no longer the consumer.
    ///
    /// The answer is exact for pushes that happen-before this call. A false
    /// "empty" is possible only if the marked node was freed and its address
    /// reused (the node cache carves a freed address again once its whole
    /// slab is free; under loom at once), which
    /// requires a later consumer to have popped past it; that consumer then
    /// owns every value pushed before (see `Mailbox::release` for why that
    /// is enough).
    #[inline]
    pub(crate) fn nonempty_since(&self, mark: Mark) -> bool {
        // SeqCst: the release's half of the mailbox's Dekker pairing (with
        // the SeqCst swap in `push` and the run-state word's SeqCst accesses,
        // `Mailbox::release`); nothing is dereferenced. A plain `mov` on
        // x86-64.
        self.head.load(Ordering::SeqCst).cast::<()>() != mark.0
    }
}

impl<T> Tail<T> {
    #[inline]
    fn node(&self) -> *mut Node<T> {
        // SAFETY: only the consumer calls the methods that reach here (their
        // callers' contract), so nobody writes `tail` concurrently.
        self.tail.with(|t| unsafe { *t })
    }

    /// Removes the oldest value.
    ///
    /// # Safety
    ///
    /// The caller is the single consumer of the queue whose other end is
    /// `head`, for the duration of the call.
    #[inline]
    pub(crate) unsafe fn pop(&self, head: &Head<T>) -> Pop<T> {
        let tail = self.node();
        // SAFETY: `tail` is alive: only the consumer frees nodes, and it
        // never frees the node `tail` points at.
        let next = unsafe { (*tail).next.load(Ordering::Acquire) }; // pairs with push's link store
        if !next.is_null() {
            // SAFETY: single consumer (caller's contract).
            self.tail.with_mut(|t| unsafe { *t = next });
            // SAFETY: `next`'s value is initialised and visible (we acquired
            // its link store); it is read once: only the node after `tail`
            // holds a value, and `tail` now points at `next`.
            let value = unsafe { (*next).value.with(|v| ptr::read(v).assume_init()) };
            // SAFETY: the old tail is unreachable now: `head` moved past it
            // (its `next` is set) and `tail` no longer points at it. Its
            // value was already taken (or it was the stub).
            unsafe { Node::free(tail) };
            return Pop::Data(value);
        }
        Self::empty_or_inconsistent(head, tail)
    }

    /// Looks at the oldest value without taking it: [`Pop::Data`]`(())`
    /// when one is ready to pop, else what `pop` would report.
    ///
    /// # Safety
    ///
    /// As for [`pop`](Self::pop).
    #[inline]
    pub(crate) unsafe fn peek(&self, head: &Head<T>) -> Pop<()> {
        let tail = self.node();
        // SAFETY: `tail` is alive (see `pop`).
        let next = unsafe { (*tail).next.load(Ordering::Acquire) }; // pairs with push's link store
        if next.is_null() {
            Self::empty_or_inconsistent(head, tail)
        } else {
            Pop::Data(())
        }
    }

    /// Removes the oldest value if it is linked, without reading `head`:
    /// `Err(mark)` means "empty or a push in progress", which
    /// [`Head::moved_from`] with that mark tells apart. For a consumer that
    /// looks at a lane which is nearly always empty, while producers write
    /// that lane's `head` (the mailbox's system lane).
    ///
    /// # Safety
    ///
    /// As for [`pop`](Self::pop).
    #[inline]
    pub(crate) unsafe fn pop_linked(&self) -> Result<T, Mark> {
        let tail = self.node();
        // SAFETY: `tail` is alive (see `pop`).
        let next = unsafe { (*tail).next.load(Ordering::Acquire) }; // pairs with push's link store
        if next.is_null() {
            return Err(Mark(tail.cast()));
        }
        // SAFETY: as in `pop`: single consumer, `next`'s value initialised
        // and visible, read once, the old tail unreachable.
        unsafe {
            self.tail.with_mut(|t| *t = next);
            let value = (*next).value.with(|v| ptr::read(v).assume_init());
            Node::free(tail);
            Ok(value)
        }
    }

    fn empty_or_inconsistent<V>(head: &Head<T>, tail: *mut Node<T>) -> Pop<V> {
        // Relaxed: only compared, never dereferenced. head != tail means a
        // push has claimed a place after `tail` but not linked it yet.
        if head.head.load(Ordering::Relaxed) == tail {
            Pop::Empty
        } else {
            Pop::Inconsistent
        }
    }

    /// Marks the consumer's current position, to learn later, *without*
    /// being the consumer any more, whether anything was pushed since (see
    /// [`Head::nonempty_since`]).
    ///
    /// # Safety
    ///
    /// As for [`pop`](Self::pop).
    #[inline]
    pub(crate) unsafe fn mark(&self) -> Mark {
        Mark(self.node().cast())
    }
}

impl<T> Drop for Tail<T> {
    fn drop(&mut self) {
        // `&mut self`: no producer or consumer is active, and whatever gave us
        // exclusive access (an `Arc` drop, a join) made all their writes
        // visible.
        let mut node = self.node();
        let mut holds_value = false; // the tail node's value is taken (or stub)
        while !node.is_null() {
            // SAFETY: every node from `tail` on is owned by the queue and
            // freed only here; `holds_value` is true exactly for the nodes
            // after `tail`, whose values were pushed and never popped.
            unsafe {
                let next = (*node).next.load(Ordering::Acquire); // pairs with push's link store
                if holds_value {
                    (*node).value.with_mut(|v| (*v).assume_init_drop());
                }
                Node::free(node);
                node = next;
            }
            holds_value = true;
        }
    }
}

/// A multi-producer, single-consumer queue: wait-free push, lock-free pop.
///
/// `push` may be called from any number of threads at once. `pop`, `peek`
/// and `mark` belong to one consumer at a time; that is why they are
/// `unsafe`: the caller proves exclusivity (the mailbox does it with its
/// run-state word). The two ends sit on separate cache lines.
///
/// ```
/// use proscenium_mailbox::{MpscQueue, Pop};
///
/// let q = MpscQueue::new();
/// q.push(1);
/// q.push(2);
/// // SAFETY: this thread is the only consumer.
/// unsafe {
///     assert_eq!(q.pop(), Pop::Data(1));
///     assert_eq!(q.pop(), Pop::Data(2));
///     assert_eq!(q.pop(), Pop::Empty);
/// }
/// ```
pub struct MpscQueue<T> {
    head: CachePadded<Head<T>>,
    tail: CachePadded<Tail<T>>,
}

// SAFETY: values move from producer threads to the consumer thread and are
// never shared, so `T: Send` suffices. The raw pointers are owned by the
// queue (every node reachable from `tail` is freed exactly once, by `pop` or
// `Drop`).
unsafe impl<T: Send> Send for Head<T> {}
// SAFETY: `&Head` only allows `push` (synchronised through `head`) and a
// comparison of `head`; no `&T` is ever handed out.
unsafe impl<T: Send> Sync for Head<T> {}
// SAFETY: as for `Head`: the values only move to the consumer.
unsafe impl<T: Send> Send for Tail<T> {}
// SAFETY: `&Tail` only allows the `unsafe` consumer operations, whose callers
// guarantee a single consumer; no `&T` is ever handed out.
unsafe impl<T: Send> Sync for Tail<T> {}

impl<T> MpscQueue<T> {
    /// Creates an empty queue (one stub node is allocated).
    pub fn new() -> MpscQueue<T> {
        let (head, tail) = ends();
        MpscQueue {
            head: CachePadded::new(head),
            tail: CachePadded::new(tail),
        }
    }

    /// Appends `value`. Wait-free: one allocation, one swap, one store.
    pub fn push(&self, value: T) {
        self.head.push(value);
    }

    /// Removes the oldest value.
    ///
    /// # Safety
    ///
    /// No other thread may call `pop`, `peek`, `is_empty` or `mark` on this
    /// queue concurrently: the caller is the single consumer for the
    /// duration of the call.
    pub unsafe fn pop(&self) -> Pop<T> {
        // SAFETY: single consumer (caller's contract).
        unsafe { self.tail.pop(&self.head) }
    }

    /// Looks at the oldest value without taking it: [`Pop::Data`]`(())`
    /// when one is ready to pop, else what `pop` would report.
    ///
    /// # Safety
    ///
    /// As for [`pop`](Self::pop).
    pub unsafe fn peek(&self) -> Pop<()> {
        // SAFETY: single consumer (caller's contract).
        unsafe { self.tail.peek(&self.head) }
    }

    /// Whether the queue holds nothing and no push is in progress.
    ///
    /// # Safety
    ///
    /// As for [`pop`](Self::pop).
    pub unsafe fn is_empty(&self) -> bool {
        // SAFETY: single consumer (caller's contract).
        unsafe { self.peek() == Pop::Empty }
    }

    /// Marks the consumer's current position, to learn later, *without*
    /// being the consumer any more, whether anything was pushed since.
    ///
    /// This is what lets a consumer give up its role and then re-check the
    /// queue: after the hand-off it may no longer touch `tail`, but it may
    /// compare `head` against a mark taken before.
    ///
    /// # Safety
    ///
    /// As for [`pop`](Self::pop).
    pub unsafe fn mark(&self) -> Mark {
        // SAFETY: single consumer (caller's contract).
        unsafe { self.tail.mark() }
    }

    /// Whether, seen from `mark`, the queue holds a value or a push is in
    /// progress. Safe to call from any thread; exact for pushes that
    /// happen-before the call (see the mailbox's `release` for the one
    /// imprecision and why it is harmless there).
    pub fn nonempty_since(&self, mark: Mark) -> bool {
        self.head.nonempty_since(mark)
    }
}

impl<T> Default for MpscQueue<T> {
    fn default() -> Self {
        MpscQueue::new()
    }
}

impl<T> std::fmt::Debug for MpscQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpscQueue").finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize as StdAtomicUsize;
    use std::sync::Arc;

    #[test]
    fn fifo_single_thread() {
        let q = MpscQueue::new();
        // SAFETY: this test is the only consumer.
        unsafe {
            assert_eq!(q.pop(), Pop::<u32>::Empty);
            assert!(q.is_empty());
            for i in 0..10 {
                q.push(i);
            }
            assert!(!q.is_empty());
            for i in 0..10 {
                assert_eq!(q.pop(), Pop::Data(i));
            }
            assert_eq!(q.pop(), Pop::Empty);
            assert!(q.is_empty());
        }
    }

    #[test]
    fn mark_sees_later_pushes() {
        let q = MpscQueue::new();
        // SAFETY: this test is the only consumer.
        let m = unsafe { q.mark() };
        assert!(!q.nonempty_since(m));
        q.push(7);
        assert!(q.nonempty_since(m));
        // SAFETY: as above.
        unsafe {
            assert_eq!(q.pop(), Pop::Data(7));
            let m = q.mark();
            assert!(!q.nonempty_since(m));
        }
    }

    struct Counted(Arc<StdAtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[test]
    fn drop_frees_every_queued_value_once() {
        let drops = Arc::new(StdAtomicUsize::new(0));
        let q = MpscQueue::new();
        for _ in 0..5 {
            q.push(Counted(drops.clone()));
        }
        // SAFETY: this test is the only consumer.
        match unsafe { q.pop() } {
            Pop::Data(c) => drop(c),
            other => panic!("expected data, got {:?}", other.is_data()),
        }
        assert_eq!(drops.load(std::sync::atomic::Ordering::Relaxed), 1);
        drop(q);
        assert_eq!(drops.load(std::sync::atomic::Ordering::Relaxed), 5);
    }

    impl<T> Pop<T> {
        fn is_data(&self) -> bool {
            matches!(self, Pop::Data(_))
        }
    }

    #[test]
    fn producers_fifo_no_loss_no_duplication() {
        let producers = 3;
        let per = if cfg!(miri) { 50 } else { 100_000 };
        let q = Arc::new(MpscQueue::new());
        let handles: Vec<_> = (0..producers)
            .map(|p| {
                let q = q.clone();
                std::thread::spawn(move || {
                    for i in 0..per {
                        q.push((p, i));
                    }
                })
            })
            .collect();
        let mut next = vec![0usize; producers];
        let mut got = 0;
        while got < producers * per {
            // SAFETY: this thread is the only consumer.
            match unsafe { q.pop() } {
                Pop::Data((p, i)) => {
                    assert_eq!(i, next[p], "producer {p} out of order");
                    next[p] += 1;
                    got += 1;
                }
                Pop::Empty | Pop::Inconsistent => std::thread::yield_now(),
            }
        }
        for h in handles {
            h.join().expect("producer panicked");
        }
        // SAFETY: as above.
        assert_eq!(unsafe { q.pop() }, Pop::Empty);
    }
}
