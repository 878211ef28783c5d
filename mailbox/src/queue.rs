//! Vyukov's node-based MPSC queue ("Intrusive MPSC node-based queue",
//! 1024cores), generic over the payload, with its stub inline.
//!
//! Producers link a fresh node at `head` with one atomic swap and one store,
//! so a push never waits for anybody. The single consumer walks from `tail`.
//! The queue always holds at least one node whose value has been taken (or
//! was never there: the stub); `tail` points at it, and the values live in
//! the nodes after it.
//!
//! The stub is not allocated: it has no value, and its one field, its link
//! to the next node, is the consumer's `tail` word itself. `head` is null
//! while the stub is the last node; a producer whose swap returns null
//! links its node into the stub by storing it, tagged [`STUB`], in `tail`.
//! So `tail` reads as: null (at the stub, nothing linked), a tagged node
//! (at the stub, linked to that node, whose value is next) or a plain node
//! (at that node, value taken). The consumer can put the stub back when the
//! queue is empty ([`Tail::recycle`]: a compare-and-swap of `head` from
//! its node to null), which frees its last node: an idle queue holds no
//! memory beyond its two words. A plain Vyukov queue keeps its last popped
//! node as the stub for good: 48 or 64 bytes of heap per lane of an idle
//! actor, which was most of what its mailbox cost (decision 0020).
//!
//! The one subtle state: a producer that has swapped `head` but not yet
//! stored the link into the previous node (or into the stub). The consumer
//! then sees `head` not at its position while there is no next node. The
//! queue is *not* empty: an item is on its way. [`Pop::Inconsistent`]
//! reports exactly that, so callers retry later instead of concluding
//! "empty" and losing a wake-up.
//!
//! The two ends are separate types, [`Head`] (written by producers) and
//! [`Tail`] (written by the consumer, and by the producer that links into
//! the stub), so that an owner can lay them out apart: [`MpscQueue`] pads
//! each to its own cache line; the mailbox keeps the user lane's head among
//! the senders' words and the system lane's head and both tails among the
//! run holder's, without padding.

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

/// Nodes are allocated with at least this alignment (`node_cache::ALIGN`
/// for the cached sizes, a pointer's for the rest), so bit 0 of a node's
/// address is free for the [`STUB`] tag.
const STUB: usize = 1;

struct Node<T> {
    /// Written once by the producer that links the next node (Release), read
    /// by the consumer (Acquire).
    next: AtomicPtr<Node<T>>,
    /// Initialised by the producer before the node is published; moved out
    /// exactly once by the consumer. Uninitialised in a node whose value has
    /// been taken.
    value: UnsafeCell<MaybeUninit<T>>,
}

/// `node` tagged: "the stub, linked to `node`".
fn tagged<T>(node: *mut Node<T>) -> *mut Node<T> {
    // Keeps the provenance (no integer round trip); undone by `untagged`.
    node.wrapping_byte_add(STUB)
}

fn is_tagged<T>(p: *mut Node<T>) -> bool {
    p as usize & STUB != 0
}

fn untagged<T>(p: *mut Node<T>) -> *mut Node<T> {
    p.wrapping_byte_sub(STUB)
}

impl<T> Node<T> {
    /// Allocates a node from the node cache (see `node_cache.rs`; also under
    /// loom, so that the models see freed addresses reused).
    fn alloc(value: MaybeUninit<T>) -> *mut Node<T> {
        let node = Node {
            next: AtomicPtr::new(ptr::null_mut()),
            value: UnsafeCell::new(value),
        };
        let block = node_cache::alloc_block(Layout::new::<Node<T>>()).cast::<Node<T>>();
        debug_assert!(!is_tagged(block), "node addresses leave bit 0 free");
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
    /// its value has been taken.
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

    /// Moves the value out.
    ///
    /// # Safety
    ///
    /// The value is initialised, visible to this thread, and taken once.
    unsafe fn take(node: *mut Node<T>) -> T {
        // SAFETY: the caller's contract.
        unsafe { (*node).value.with(|v| ptr::read(v).assume_init()) }
    }
}

/// The producers' end of a queue: where pushes link new nodes.
pub(crate) struct Head<T> {
    /// The most recently pushed node; null while the stub is the last node.
    /// Written by producers (swap) and by the consumer when it puts the
    /// stub back (compare-and-swap, `Tail::recycle`).
    head: AtomicPtr<Node<T>>,
}

/// The consumer's end of a queue. Owns every node from `tail` on: dropping
/// it frees them and drops the values still queued.
pub(crate) struct Tail<T> {
    /// Where the consumer is (see the module docs): null, a node tagged
    /// [`STUB`], or a node. Written by the consumer, and by the one producer
    /// that links into the stub (whose swap read the null that the
    /// consumer's `recycle`, or the queue's creation, put in `head`).
    tail: AtomicPtr<Node<T>>,
}

/// A position in a queue that the consumer saw; see [`MpscQueue::mark`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark(*mut ());

/// Creates the two ends of one empty queue (nothing is allocated).
///
/// The ends must be used together, as one queue, and dropped together.
pub(crate) fn ends<T>() -> (Head<T>, Tail<T>) {
    (
        Head {
            head: AtomicPtr::new(ptr::null_mut()),
        },
        Tail {
            tail: AtomicPtr::new(ptr::null_mut()),
        },
    )
}

impl<T> Head<T> {
    /// Appends `value`. Wait-free: one allocation, one swap, one store.
    /// `tail` is this queue's other end (a push into an empty queue links
    /// into the stub, which is `tail`'s word).
    #[inline]
    pub(crate) fn push(&self, tail: &Tail<T>, value: T) {
        let node = Node::alloc(MaybeUninit::new(value));
        // SeqCst, which includes AcqRel. Release: publishes `node`'s
        // initialised `next` and `value` to the producer that will swap after
        // us (it writes `node.next`) and, through the link store below, to
        // the consumer. Acquire: pairs with the Release of the producer that
        // swapped `prev` in, so that our store into `prev.next` happens after
        // `prev` was initialised, and with the Release of the consumer's
        // `recycle` whose null we may read, so that our store into `tail`
        // comes after its own. SeqCst: this swap is the push that the
        // mailbox's Dekker pairing orders against a release (the SeqCst load
        // in `nonempty_since`; `Mailbox::claim_after_push`, decision record
        // 0019). On x86-64 a swap is `xchg` whatever the ordering.
        let prev = self.head.swap(node, Ordering::SeqCst);
        if prev.is_null() {
            // The stub was the last node: link into it. Release: pairs with
            // the consumer's Acquire load of `tail` in `pop`/`peek`, making
            // `node.value` visible before the consumer reads it.
            tail.tail.store(tagged(node), Ordering::Release);
            return;
        }
        // The consumer frees a node only after it has moved `tail` past it,
        // which requires `prev.next` to be non-null, and only this producer
        // makes it so, right here; or in `recycle`, whose compare-and-swap
        // from `prev` fails once we have swapped it out of `head`.
        // SAFETY: so `prev` is alive for the store below.
        unsafe {
            // Release: pairs with the consumer's Acquire load of `next` in
            // `pop`, making `node.value` visible before the consumer reads it.
            (*prev).next.store(node, Ordering::Release);
        }
    }

    /// Whether, seen from `mark`, the queue holds a value or a push is in
    /// progress: `head` has moved away from the marked position. Safe to
    /// call from any thread, also one that is no longer the consumer.
    ///
    /// The answer is exact for pushes that happen-before this call. A false
    /// "empty" is possible only if the marked node was freed and its address
    /// reused (the node cache reuses a freed address at once), which
    /// requires a later consumer to have popped past it; that consumer then
    /// owns every value pushed before (see `Mailbox::release` for why that
    /// is enough). A mark at the stub is null, and `head` is null only while
    /// the queue is empty.
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
    /// Removes the oldest value.
    ///
    /// # Safety
    ///
    /// The caller is the single consumer of the queue whose other end is
    /// `head`, for the duration of the call.
    #[inline(always)]
    pub(crate) unsafe fn pop(&self, head: &Head<T>) -> Pop<T> {
        // Acquire: pairs with the Release store of a producer that linked
        // into the stub (`push`); otherwise this reads our own store.
        let tail = self.tail.load(Ordering::Acquire);
        if is_tagged(tail) {
            // At the stub, linked to `node`: its value is next. Nothing to
            // free (the stub has no storage). Relaxed: only we write `tail`
            // now (`head` is not null, so no producer links into the stub).
            let node = untagged(tail);
            self.tail.store(node, Ordering::Relaxed);
            // SAFETY: the value is initialised and visible (we acquired the
            // link above) and read once: `tail` now points at its node.
            return Pop::Data(unsafe { Node::take(node) });
        }
        if tail.is_null() {
            return Self::empty_or_inconsistent(head, tail);
        }
        // SAFETY: `tail` is alive: only the consumer frees nodes, and it
        // never frees the node `tail` points at.
        let next = unsafe { (*tail).next.load(Ordering::Acquire) }; // pairs with push's link store
        if next.is_null() {
            return Self::empty_or_inconsistent(head, tail);
        }
        // Relaxed: only the consumer writes `tail` while it holds a node.
        self.tail.store(next, Ordering::Relaxed);
        // `next`'s value is initialised and visible (we acquired its link
        // store) and read once: only the node after `tail` holds a value,
        // and `tail` now points at `next`. The old tail is unreachable now:
        // `head` moved past it (its `next` is set) and `tail` no longer
        // points at it; its value was already taken.
        // SAFETY: so taking `next`'s value and freeing the old tail are sound.
        unsafe {
            let value = Node::take(next);
            Node::free(tail);
            Pop::Data(value)
        }
    }

    /// Looks at the oldest value without taking it: [`Pop::Data`]`(())`
    /// when one is ready to pop, else what `pop` would report.
    ///
    /// # Safety
    ///
    /// As for [`pop`](Self::pop).
    #[inline]
    pub(crate) unsafe fn peek(&self, head: &Head<T>) -> Pop<()> {
        // Acquire: as in `pop`.
        let tail = self.tail.load(Ordering::Acquire);
        if is_tagged(tail) {
            return Pop::Data(());
        }
        if tail.is_null() {
            return Self::empty_or_inconsistent(head, tail);
        }
        // SAFETY: `tail` is alive (see `pop`).
        let next = unsafe { (*tail).next.load(Ordering::Acquire) }; // pairs with push's link store
        if next.is_null() {
            Self::empty_or_inconsistent(head, tail)
        } else {
            Pop::Data(())
        }
    }

    /// `tail` (the consumer's position, untagged) has no next node: the
    /// queue is empty if `head` is there too, else a push is in progress.
    fn empty_or_inconsistent<V>(head: &Head<T>, tail: *mut Node<T>) -> Pop<V> {
        // Relaxed: only compared, never dereferenced. head != tail means a
        // push has claimed a place after `tail` but not linked it yet.
        if head.head.load(Ordering::Relaxed) == tail {
            Pop::Empty
        } else {
            Pop::Inconsistent
        }
    }

    /// Puts the stub back if the queue is empty and the consumer is at a
    /// node: frees that node, so the empty queue holds no memory. A push
    /// racing with it is never lost: it either comes before the
    /// compare-and-swap (which then fails, and the consumer stays at its
    /// node, to which the push links) or after (and links into the stub).
    ///
    /// # Safety
    ///
    /// As for [`pop`](Self::pop).
    #[inline]
    pub(crate) unsafe fn recycle(&self, head: &Head<T>) {
        // Relaxed: only compared, or our own store (a producer writes `tail`
        // only after reading a null `head`, which it is not while we are at
        // a node).
        let tail = self.tail.load(Ordering::Relaxed);
        // At the stub already (null), or not empty: `head` is elsewhere (a
        // value is queued after `tail`, or a push is in progress), which a
        // tagged `tail` always is (`head` is never tagged). Relaxed: only
        // compared, to skip the exchange when it would fail; the exchange
        // below is the check that counts.
        if tail.is_null() || head.head.load(Ordering::Relaxed) != tail {
            return;
        }
        // At the stub before `head` says so: a producer that reads the null
        // below links into `tail`, and its store must come after this one.
        // Relaxed: ordered before that store by the Release below.
        self.tail.store(ptr::null_mut(), Ordering::Relaxed);
        // Release: pairs with the Acquire of the swap in `push` that reads
        // this null, so the store above happens-before that producer's store
        // of its link into `tail`. Relaxed on failure: nothing was published;
        // the producer that moved `head` links into `tail`'s node.
        match head.head.compare_exchange(
            tail,
            ptr::null_mut(),
            Ordering::Release,
            Ordering::Relaxed,
        ) {
            // SAFETY: `head` was still at `tail`, with nothing after it: no
            // producer holds it as `prev` (a swap that took it out of `head`
            // would have failed this exchange), and its value was taken.
            Ok(_) => unsafe { Node::free(tail) },
            // A push came in: stay at the node it links to. Relaxed: no
            // producer writes `tail` (none read a null `head`).
            Err(_) => self.tail.store(tail, Ordering::Relaxed),
        }
    }

    /// Marks the consumer's current position, to learn later, *without*
    /// being the consumer any more, whether anything was pushed since (see
    /// [`Head::nonempty_since`]): its node, or null at the stub. A tagged
    /// `tail` (the stub, with a value linked) is a mark no `head` equals:
    /// the queue is not empty.
    ///
    /// # Safety
    ///
    /// As for [`pop`](Self::pop).
    #[inline]
    pub(crate) unsafe fn mark(&self) -> Mark {
        // Relaxed: only compared later.
        Mark(self.tail.load(Ordering::Relaxed).cast())
    }
}

impl<T> Drop for Tail<T> {
    fn drop(&mut self) {
        // `&mut self`: no producer or consumer is active, and whatever gave us
        // exclusive access (an `Arc` drop, a join) made all their writes
        // visible.
        let tail = self.tail.load(Ordering::Acquire);
        // A tagged tail is the stub linked to a node that holds a value; a
        // plain one is a node whose value was taken.
        let (mut node, mut holds_value) = if is_tagged(tail) {
            (untagged(tail), true)
        } else {
            (tail, false)
        };
        while !node.is_null() {
            // SAFETY: every node from `tail` on is owned by the queue and
            // freed only here; `holds_value` is true exactly for the nodes
            // whose values were pushed and never popped.
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
/// `push` may be called from any number of threads at once. `pop`, `peek`,
/// `recycle` and `mark` belong to one consumer at a time; that is why they are
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
    /// Creates an empty queue (nothing is allocated: the stub is inline).
    pub fn new() -> MpscQueue<T> {
        let (head, tail) = ends();
        MpscQueue {
            head: CachePadded::new(head),
            tail: CachePadded::new(tail),
        }
    }

    /// Appends `value`. Wait-free: one allocation, one swap, one store.
    pub fn push(&self, value: T) {
        self.head.push(&self.tail, value);
    }

    /// Removes the oldest value.
    ///
    /// # Safety
    ///
    /// No other thread may call `pop`, `peek`, `is_empty`, `recycle` or
    /// `mark` on this queue concurrently: the caller is the single consumer for the
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

    /// Frees the last popped node if the queue is empty, putting the inline
    /// stub back, so an empty queue holds no memory. Without it a queue
    /// keeps one node (its last popped one) once anything was pushed.
    ///
    /// # Safety
    ///
    /// As for [`pop`](Self::pop).
    pub unsafe fn recycle(&self) {
        // SAFETY: single consumer (caller's contract).
        unsafe { self.tail.recycle(&self.head) }
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
        let _serial = crate::test_serial();
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
        let _serial = crate::test_serial();
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

    /// `recycle` puts an empty queue back at its inline stub (freeing the
    /// last popped node) and does nothing while a value is queued; pushes
    /// then link into the stub.
    #[test]
    fn recycle_puts_the_stub_back_only_when_empty() {
        let _serial = crate::test_serial();
        let q = MpscQueue::new();
        // SAFETY: this test is the only consumer.
        unsafe {
            let stub = q.mark();
            q.recycle();
            assert_eq!(q.mark(), stub, "a new queue is at its stub");
            q.push(1);
            assert_eq!(q.pop(), Pop::Data(1));
            assert_ne!(q.mark(), stub, "at the popped node");
            q.recycle();
            assert_eq!(q.mark(), stub, "back at the stub");
            assert!(q.is_empty());
            q.push(2);
            q.push(3);
            q.recycle();
            assert_eq!(q.pop(), Pop::Data(2));
            q.recycle();
            assert_ne!(q.mark(), stub, "3 is queued: no stub");
            assert_eq!(q.pop(), Pop::Data(3));
            assert_eq!(q.pop(), Pop::Empty);
            q.recycle();
            assert_eq!(q.mark(), stub);
            assert_eq!(q.pop(), Pop::Empty);
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
        let _serial = crate::test_serial();
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
        // Dropped at the stub with a value linked to it, and after a
        // recycle with values pushed since.
        let q = MpscQueue::new();
        q.push(Counted(drops.clone()));
        drop(q);
        assert_eq!(drops.load(std::sync::atomic::Ordering::Relaxed), 6);
        let q = MpscQueue::new();
        q.push(Counted(drops.clone()));
        // SAFETY: this test is the only consumer.
        unsafe {
            drop(q.pop());
            q.recycle();
        }
        q.push(Counted(drops.clone()));
        q.push(Counted(drops.clone()));
        drop(q);
        assert_eq!(drops.load(std::sync::atomic::Ordering::Relaxed), 9);
    }

    impl<T> Pop<T> {
        fn is_data(&self) -> bool {
            matches!(self, Pop::Data(_))
        }
    }

    #[test]
    fn producers_fifo_no_loss_no_duplication() {
        let _serial = crate::test_serial();
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
                // SAFETY: as above. Recycling whenever the queue looks
                // empty races the producers' pushes with the stub's return.
                Pop::Empty => unsafe { q.recycle() },
                Pop::Inconsistent => std::thread::yield_now(),
            }
        }
        for h in handles {
            h.join().expect("producer panicked");
        }
        // SAFETY: as above.
        assert_eq!(unsafe { q.pop() }, Pop::Empty);
    }
}
